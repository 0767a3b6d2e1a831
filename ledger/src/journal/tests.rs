use super::*;
use crate::time::{MICROS_PER_DAY as DAY, MICROS_PER_HOUR as H};

fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn globs() {
    assert!(glob_match("Networking", "networking"));
    assert!(glob_match("*transfer*", "Inter-AZ Data Transfer"));
    assert!(glob_match(
        "arn:aws:eks:*",
        "arn:aws:eks:us-east-1:1:cluster/prod"
    ));
    assert!(!glob_match("*transfer", "transfer-in"));
    assert!(glob_match("a*b*c", "aXXbYYc"));
    assert!(!glob_match("a*b*c", "ac"));
}

#[test]
fn amounts_spread_over_days_in_proportion_to_time() {
    // 48.00 over a 48-hour period starting at 12:00 on day 0: 12 h in day 0, 24 h in day 1, 12 h in day 2.
    let parts = by_day(48.0, Span::new(12 * H, 60 * H), Span::new(0, 10 * DAY));
    assert_eq!(parts, [(0, 12.0), (DAY, 24.0), (2 * DAY, 12.0)]);
    // Only the window's share counts: a window of day 1 alone gets 24.00.
    assert_eq!(
        by_day(48.0, Span::new(12 * H, 60 * H), Span::new(DAY, 2 * DAY)),
        [(DAY, 24.0)]
    );
    // A one-time charge (empty period) counts whole on its day, if inside the window.
    assert_eq!(
        by_day(5.0, Span::new(DAY + H, DAY + H), Span::new(0, 2 * DAY)),
        [(DAY, 5.0)]
    );
    assert!(by_day(5.0, Span::new(5 * DAY, 5 * DAY), Span::new(0, 2 * DAY)).is_empty());
}

#[test]
fn the_first_matching_rule_spreads_each_pool() {
    let rules = vec![
        SharedCostRule {
            name: "network-even".into(),
            matches: attrs(&[("service_category", "Networking")]),
            strategy: Strategy::Even,
            basis: Basis::DirectCost,
        },
        SharedCostRule {
            name: "licenses".into(),
            matches: attrs(&[("kind", "manual"), ("category", "licenses")]),
            strategy: Strategy::Fixed {
                weights: [("vision".to_string(), 1.0), ("nlp".to_string(), 3.0)].into(),
            },
            basis: Basis::DirectCost,
        },
    ];
    let mut basis = DailyBasis::default();
    basis.direct_cost.insert((0, "vision".into()), 30.0);
    basis.direct_cost.insert((0, "nlp".into()), 10.0);
    let day0 = Span::new(0, DAY);
    let item = |amount, pairs: &[(&str, &str)]| SharedItem {
        period: day0,
        amount,
        source: "billing".into(),
        attributes: attrs(pairs),
    };
    let entries = consolidate(amortize(
        &[
            item(10.0, &[("service_category", "Networking")]),
            item(8.0, &[("kind", "manual"), ("category", "licenses")]),
            item(4.0, &[("service_category", "Storage")]),
        ],
        &rules,
        &basis,
        day0,
    ));
    let got: Vec<(String, String, f64)> = entries
        .iter()
        .map(|e| (e.rule.clone().unwrap(), e.team.clone().unwrap(), e.amount))
        .collect();
    assert_eq!(
        got,
        [
            // Storage matched no rule: default, proportional to direct cost 30:10 → 3.00 / 1.00.
            ("default".to_string(), "nlp".to_string(), 1.0),
            ("licenses".into(), "nlp".into(), 6.0), // 8 × 3/4
            ("network-even".into(), "nlp".into(), 5.0), // 10 / 2
            ("default".into(), "vision".into(), 3.0),
            ("licenses".into(), "vision".into(), 2.0), // 8 × 1/4
            ("network-even".into(), "vision".into(), 5.0),
        ]
    );
    assert_eq!(entries.iter().map(|e| e.amount).sum::<f64>(), 22.0);
}

#[test]
fn a_day_without_usage_falls_back_to_the_window_and_then_to_unattributed() {
    let mut basis = DailyBasis::default();
    basis.gpu_hours.insert((0, "vision".into()), 5.0);
    // Day 1 has no GPU-hours: the window's basis (vision only) is used.
    assert_eq!(
        basis.for_day(&Basis::GpuHours, DAY),
        [("vision".to_string(), 5.0)].into()
    );
    // No usage measure at all: nothing to weigh, so the pool lands on `unattributed`.
    let rule = SharedCostRule {
        name: "by-requests".into(),
        matches: BTreeMap::new(),
        strategy: Strategy::Usage,
        basis: Basis::Usage("requests".into()),
    };
    let item = SharedItem {
        period: Span::new(0, DAY),
        amount: 3.0,
        source: "manual".into(),
        attributes: BTreeMap::new(),
    };
    let entries = amortize(&[item], &[rule], &basis, Span::new(0, DAY));
    assert_eq!(
        entries[0].team.as_deref(),
        Some(crate::amortize::UNATTRIBUTED)
    );
    assert_eq!(entries[0].amount, 3.0);
}

#[test]
fn the_balance_tolerates_one_part_in_a_million() {
    let balance = Balance {
        billed: 1000.0,
        manual: 10.0,
        rate_card: 0.0,
        accounted: 1010.0005,
    };
    assert!(balance.balances());
    assert!(
        !Balance {
            accounted: 1010.002,
            ..balance
        }
        .balances()
    );
    assert!(
        (Balance {
            accounted: 1009.0,
            ..balance
        }
        .difference()
            + 1.0)
            .abs()
            < 1e-9
    );
}
