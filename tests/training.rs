//! Golden SQL for training economics: the training example (`tests/data/training-example`, apart
//! from the worked example so that its totals stay as `docs/ledger.md` works them out) goes in
//! through the real binary, then every `tests/sql/training/*.slt` file runs against it.

use std::path::PathBuf;

use crate::golden::{build_days, dcgm_series, example_file, run_golden_files, run_ok};
use crate::support::Ledger;

fn example(file: &str) -> PathBuf {
    example_file("training-example", file)
}

/// Lands the training example in `ledger` and builds its ledger for 2026-11-02: its objects and
/// events, and telemetry for the 4 GPUs of n3 busy (SM 0.90) for 8 h (a rate-card node exists in
/// the hours it was observed).
pub fn load_training_example(ledger: &Ledger) {
    let mut text = String::new();
    for gpu in 0..4 {
        dcgm_series(&mut text, "n3", gpu, 8, &|_| 0.9);
    }
    let prom = ledger.dir.path().join("telemetry.prom");
    std::fs::write(&prom, text).unwrap();
    let objects = example("objects.yaml");
    let events = example("events.jsonl");
    run_ok(ledger, &["apply", objects.to_str().unwrap()]);
    run_ok(ledger, &["ingest", "events", events.to_str().unwrap()]);
    let prom = prom.to_str().unwrap();
    run_ok(ledger, &["ingest", "dcgm", prom, "--cluster", "demo"]);
    let built = build_days(ledger, "2026-11-02", "2026-11-02");
    assert!(
        built.contains("24 hours recomputed") && built.contains("(balanced)"),
        "{built}"
    );
}

#[test]
fn golden_sql_files_hold_on_the_training_example() {
    run_golden_files("tests/sql/training", load_training_example);
}
