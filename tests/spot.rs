//! Golden SQL for spot economics: the spot example (`tests/data/spot-example`) goes in through the
//! real binary, then every `tests/sql/spot/*.slt` file runs against it.

use crate::golden::{build_days, example_file, run_golden_files, run_ok};
use crate::support::Ledger;

/// Lands the spot example in `ledger` and builds its ledger for 2026-11-02 (no telemetry:
/// allocated time counts as busy, and allocations make the rate-card node s2 observed).
pub fn load_spot_example(ledger: &Ledger) {
    let path = |file: &str| {
        example_file("spot-example", file)
            .to_str()
            .unwrap()
            .to_string()
    };
    run_ok(ledger, &["apply", &path("objects.yaml")]);
    run_ok(ledger, &["ingest", "events", &path("events.jsonl")]);
    run_ok(ledger, &["ingest", "focus", &path("billing.csv")]);
    let built = build_days(ledger, "2026-11-02", "2026-11-02");
    assert!(
        built.contains("24 hours recomputed") && built.contains("(balanced)"),
        "{built}"
    );
}

#[test]
fn golden_sql_files_hold_on_the_spot_example() {
    run_golden_files("tests/sql/spot", load_spot_example);
}
