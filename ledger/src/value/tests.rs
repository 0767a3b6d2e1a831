use serde_json::json;

use super::*;
use crate::unit_economics::Outcome;

fn mapping(metric: &str, at_most: Option<f64>, at_least: Option<f64>) -> ValueMappingSpec {
    serde_json::from_value(json!({
        "name": "credit-approvals", "product_line": "credit", "metric": metric,
        "at_most": at_most, "at_least": at_least, "model": "llama-3-8b",
        "event": "credit approvals", "value": 1240, "per": 10000
    }))
    .unwrap()
}

fn request(latency_ms: f64) -> Request<'static> {
    Request {
        model: Some("llama-3-8b"),
        input_tokens: Some(100),
        output_tokens: Some(50),
        outcome: Outcome {
            status: Some("success"),
            ttft_ms: None,
            latency_ms: Some(latency_ms),
        },
        ..Request::default()
    }
}

#[test]
fn percentiles_are_nearest_rank() {
    let values = [300.0, 100.0, 340.0, 200.0];
    // p95 of 4: rank ceil(3.8) = 4 → the largest; p50: rank 2 → 200.
    assert_eq!(percentile(&values, 0.95), Some(340.0));
    assert_eq!(percentile(&values, 0.50), Some(200.0));
    assert_eq!(percentile(&[], 0.5), None);
}

#[test]
fn events_count_only_on_days_the_condition_holds() {
    let p95 = mapping("p95_latency_ms", Some(350.0), None);
    let mut good = DayTraffic::default();
    for latency in [100.0, 200.0, 350.0] {
        good.add(&request(latency), true, true, Some(2.0));
    }
    // p95 = 350 ≤ 350: 3 events × 1240 / 10000 = 0.372.
    let day = evaluate(&p95, &good);
    assert_eq!(
        (day.measured, day.condition_met, day.events),
        (Some(350.0), true, 3)
    );
    assert!((day.value - 0.372).abs() < 1e-12);
    assert_eq!((good.cost, good.tokens), (Some(6.0), 450));
    let mut bad = good.clone();
    bad.add(&request(900.0), true, false, None);
    let day = evaluate(&p95, &bad);
    assert_eq!((day.condition_met, day.events, day.value), (false, 0, 0.0));
    // No measurement is no evidence the condition held.
    assert!(!p95.holds(None));
}

#[test]
fn shares_and_filters() {
    let mut share = mapping("slo_met_share", None, Some(0.75));
    share.counts = "slo_met_requests".into();
    let mut day = DayTraffic::default();
    for met in [true, true, true, false] {
        day.add(&request(100.0), true, met, None);
    }
    // 3 of 4 met: 0.75 ≥ 0.75, and the 3 SLO-met requests are the events.
    let value = evaluate(&share, &day);
    assert_eq!((value.measured, value.events), (Some(0.75), 3));
    assert!(share.matches(&request(1.0)));
    let mut other = request(1.0);
    other.model = Some("mistral-7b");
    assert!(!share.matches(&other));
    assert_eq!(roi(30.0, Some(10.0)), Some(2.0));
    assert_eq!(roi(30.0, None), None);
}
