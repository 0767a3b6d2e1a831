use chrono::NaiveDate;
use gpuledger_ledger::objects::{ObjectKind, parse_document};

use super::*;
use crate::scenario::DemoSpec;

/// Every document passes the validation `gpuledger apply` runs: 8 nodes, the plan's reservations,
/// 5 rules, 1 rate card, 1 license, 1 label policy, 4 SLOs and 2 value mappings.
#[test]
fn every_document_is_a_valid_object() {
    let scenario = Scenario::plan(&DemoSpec {
        gpus: 16,
        days: 2,
        seed: 7,
        start: NaiveDate::from_ymd_opt(2026, 11, 1).unwrap(),
        scrape_interval_s: 30,
    });
    let objects: Vec<_> = documents(&scenario)
        .iter()
        .map(|d| parse_document(d).unwrap_or_else(|e| panic!("{d}: {e}")))
        .collect();
    assert_eq!(
        objects.len(),
        8 + scenario.reservations.len() + 5 + 1 + 1 + 1 + 4 + 2
    );
    let license = objects
        .iter()
        .find(|o| o.kind == ObjectKind::ManualCost)
        .unwrap();
    // 2.50 per GPU-day × 16 GPUs × 2 days.
    assert_eq!(license.spec["amount"], serde_json::json!(80.0));
}

/// Budgets are sized from what they watch: research's spend at 125 % (1,000 spent → 800), the
/// assistant's at 85 % (170 → 200), search's forecast at 70 % (216 → 308.57 → 310); each is a
/// valid budget.
#[test]
fn budgets_are_sized_from_the_spend_they_watch() {
    let documents = budgets(&[(1000.0, 9000.0), (170.0, 900.0), (12.0, 216.0)]);
    let amounts: Vec<f64> = documents
        .iter()
        .map(|d| d["spec"]["amount"].as_f64().unwrap())
        .collect();
    assert_eq!(amounts, [800.0, 200.0, 310.0]);
    assert_eq!(documents[1]["spec"]["namespace"], "assistant");
    for document in &documents {
        let object = parse_document(document).unwrap();
        assert_eq!(object.kind, ObjectKind::Budget);
    }
}
