//! Golden SQL for value mapping and capacity planning: the value example
//! (`tests/data/value-example`, three days of one serving workload) goes in through the real
//! binary, then every `tests/sql/value/*.slt` file runs against it.

use crate::golden::{build_days, example_file, run_golden_files, run_ok};
use crate::support::Ledger;

/// Lands the value example in `ledger` and builds its ledger for 2026-11-02 to 2026-11-04.
pub fn load_value_example(ledger: &Ledger) {
    let path = |file: &str| {
        example_file("value-example", file)
            .to_str()
            .unwrap()
            .to_string()
    };
    run_ok(ledger, &["apply", &path("objects.yaml")]);
    run_ok(ledger, &["ingest", "events", &path("events.jsonl")]);
    run_ok(ledger, &["ingest", "tokens", &path("tokens.jsonl")]);
    let built = build_days(ledger, "2026-11-02", "2026-11-04");
    assert!(built.contains("(balanced)"), "{built}");
}

#[test]
fn golden_sql_files_hold_on_the_value_example() {
    run_golden_files("tests/sql/value", load_value_example);
}
