use arrow::array::{Array, Decimal128Array};
use gpuledger_ingest::{CollectSink, ParseContext, focus};
use gpuledger_lake::tables::Table;

use super::*;
use crate::scenario::DemoSpec;

fn scenario() -> Scenario {
    Scenario::plan(&DemoSpec {
        gpus: 16,
        days: 2,
        seed: 7,
        start: NaiveDate::from_ymd_opt(2026, 11, 30).unwrap(),
        scrape_interval_s: 30,
    })
}

/// 7 billed nodes (the on-premises one is not) × 48 hours + 7 daily lines × 2 days = 350 lines,
/// read back by the real FOCUS parser with nothing rejected, and their effective costs add up to
/// exactly the generated micro-dollars.
#[test]
fn the_export_parses_back_to_the_generated_prices() {
    let scenario = scenario();
    let lines = billing_lines(&scenario);
    assert_eq!(lines.len(), 7 * 48 + 7 * 2);
    let csv = focus_csv(&scenario, &lines);
    let mut sink = CollectSink::default();
    let ctx = ParseContext::new("focus.csv", scenario.spec.start_time());
    let stats = focus::parse(&mut csv.as_slice(), &ctx, &mut sink).unwrap();
    assert_eq!((stats.rows_landed, stats.rejected), (350, 0));
    assert!(stats.missing_mandatory_columns.is_empty(), "{stats:?}");
    let batch = sink.table(Table::BillingLines);
    let effective = batch
        .column_by_name("effective_cost")
        .unwrap()
        .as_any()
        .downcast_ref::<Decimal128Array>()
        .unwrap();
    // Money lands with 12 decimals: one micro-dollar is 10^6 units.
    let landed: i128 = (0..effective.len()).map(|i| effective.value(i)).sum();
    let generated: i64 = lines.iter().map(|l| l.effective_micros).sum();
    assert_eq!(landed, generated as i128 * 1_000_000);
}

/// On demand bills the list price: an H100 node of 2 GPUs is 2 × 12.29 = 24.58 per hour. Spot
/// bills 24–41 % of its list price, and says so in ListCost.
#[test]
fn spot_lines_cost_less_than_their_list_price() {
    let scenario = scenario();
    let lines = billing_lines(&scenario);
    let node_lines = |name: &str| {
        let id = scenario
            .nodes
            .iter()
            .find(|n| n.name == name)
            .unwrap()
            .resource_id
            .clone();
        lines
            .iter()
            .filter(move |l| l.resource_id == id)
            .collect::<Vec<_>>()
    };
    let on_demand = node_lines("h100-ondemand-01");
    assert_eq!(on_demand.len(), 48);
    assert!(
        on_demand
            .iter()
            .all(|l| l.effective_micros == 24_580_000 && l.list_micros == 24_580_000)
    );
    let spot = node_lines("h100-spot-01");
    assert!(spot.iter().all(|l| l.pricing_category == "Dynamic"
        && l.effective_micros >= l.list_micros * 24 / 100
        && l.effective_micros <= l.list_micros * 41 / 100));
}

/// A window over a month's end is billed in two billing periods.
#[test]
fn lines_belong_to_the_month_they_are_charged_in() {
    let scenario = scenario();
    let csv = String::from_utf8(focus_csv(&scenario, &billing_lines(&scenario))).unwrap();
    // BillingPeriodStart and BillingPeriodEnd are the 4th and 5th columns.
    let periods: std::collections::BTreeSet<String> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').skip(3).take(2).collect::<Vec<_>>().join(","))
        .collect();
    assert_eq!(
        periods,
        std::collections::BTreeSet::from([
            "2026-11-01T00:00:00Z,2026-12-01T00:00:00Z".to_string(),
            "2026-12-01T00:00:00Z,2027-01-01T00:00:00Z".to_string()
        ])
    );
}
