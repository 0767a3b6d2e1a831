use super::*;
use crate::time::{MICROS_PER_DAY as DAY, MICROS_PER_HOUR as H};

fn m(text: &str) -> Money {
    text.parse().unwrap()
}

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
    let parts = by_day(m("48"), Span::new(12 * H, 60 * H), Span::new(0, 10 * DAY));
    assert_eq!(parts, [(0, m("12")), (DAY, m("24")), (2 * DAY, m("12"))]);
    // Only the window's share counts: a window of day 1 alone gets 24.00.
    assert_eq!(
        by_day(m("48"), Span::new(12 * H, 60 * H), Span::new(DAY, 2 * DAY)),
        [(DAY, m("24"))]
    );
    // A one-time charge (empty period) counts whole on its day, if inside the window.
    assert_eq!(
        by_day(m("5"), Span::new(DAY + H, DAY + H), Span::new(0, 2 * DAY)),
        [(DAY, m("5"))]
    );
    assert!(by_day(m("5"), Span::new(5 * DAY, 5 * DAY), Span::new(0, 2 * DAY)).is_empty());
}

#[test]
fn a_prorated_amount_adds_back_exactly_and_each_day_is_the_same_in_any_window() {
    // 100.00 over three equal days: 33.333333333334 on the first (largest remainder, first on
    // a tie), 33.333333333333 on the others; together exactly 100.
    let period = Span::new(0, 3 * DAY);
    let all = by_day(m("100"), period, Span::new(-DAY, 9 * DAY));
    assert_eq!(
        all,
        [
            (0, m("33.333333333334")),
            (DAY, m("33.333333333333")),
            (2 * DAY, m("33.333333333333"))
        ]
    );
    assert_eq!(all.iter().map(|(_, a)| *a).sum::<Money>(), m("100"));
    // A build of each day alone books the same parts: the days add back to the whole.
    let days: Money = (0..3)
        .flat_map(|d| by_day(m("100"), period, Span::new(d * DAY, (d + 1) * DAY)))
        .map(|(_, a)| a)
        .sum();
    assert_eq!(days, m("100"));
    // A window that cuts a day takes the part of the day inside it. The period is cut into
    // 24 h, 12 h, 12 h and 24 h: quotas 33.333…, 16.666…, 16.666…, 33.333… leave 2e-12, which go
    // to the two halves (remainder 0.67 against 0.33): 16.666666666667 for the half asked for.
    assert_eq!(
        by_day(m("100"), period, Span::new(DAY + 12 * H, 2 * DAY)),
        [(DAY, m("16.666666666667"))]
    );
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
            item(m("10"), &[("service_category", "Networking")]),
            item(m("8"), &[("kind", "manual"), ("category", "licenses")]),
            item(m("4"), &[("service_category", "Storage")]),
        ],
        &rules,
        &basis,
        day0,
    ));
    let got: Vec<(String, String, Money)> = entries
        .iter()
        .map(|e| (e.rule.clone().unwrap(), e.team.clone().unwrap(), e.amount))
        .collect();
    assert_eq!(
        got,
        [
            // Storage matched no rule: default, proportional to direct cost 30:10 → 3.00 / 1.00.
            ("default".to_string(), "nlp".to_string(), m("1")),
            ("licenses".into(), "nlp".into(), m("6")), // 8 × 3/4
            ("network-even".into(), "nlp".into(), m("5")), // 10 / 2
            ("default".into(), "vision".into(), m("3")),
            ("licenses".into(), "vision".into(), m("2")), // 8 × 1/4
            ("network-even".into(), "vision".into(), m("5")),
        ]
    );
    assert_eq!(entries.iter().map(|e| e.amount).sum::<Money>(), m("22"));
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
        amount: m("3"),
        source: "manual".into(),
        attributes: BTreeMap::new(),
    };
    let entries = amortize(&[item], &[rule], &basis, Span::new(0, DAY));
    assert_eq!(
        entries[0].team.as_deref(),
        Some(crate::amortize::UNATTRIBUTED)
    );
    assert_eq!(entries[0].amount, m("3"));
}

#[test]
fn the_balance_tolerates_one_part_in_a_million() {
    let balance = Balance {
        billed: m("1000"),
        manual: m("10"),
        rate_card: Money::ZERO,
        accounted: m("1010.0005"),
    };
    assert!(balance.balances());
    assert!(
        !Balance {
            accounted: m("1010.002"),
            ..balance
        }
        .balances()
    );
    assert_eq!(
        Balance {
            accounted: m("1009"),
            ..balance
        }
        .difference(),
        m("-1")
    );
}

#[test]
fn the_balance_line_rounds_to_cents_and_says_when_it_does_not_balance() {
    let balance = Balance {
        billed: m("135"),
        manual: m("4.8"),
        rate_card: m("2.395"),
        accounted: m("142.195"),
    };
    // 2.395 rounds half to even at the cent: 2.40; 142.195 → 142.20.
    assert_eq!(
        balance.to_string(),
        "billed 135.00 + manual 4.80 + rate card 2.40 = accounted 142.20 (balanced)"
    );
    let short = Balance {
        accounted: m("140"),
        ..balance
    };
    assert_eq!(
        short.to_string(),
        "billed 135.00 + manual 4.80 + rate card 2.40 = accounted 140.00 (DOES NOT BALANCE)"
    );
}

mod permutations {
    use proptest::prelude::*;
    use proptest::strategy::Strategy;

    use super::*;
    use crate::amortize::Strategy as Spread;
    use crate::gpu_hours::{ClassCosts, Owner};

    const TEAMS: [&str; 3] = ["vision", "nlp", "search"];

    /// A GPU-hour row of GPU `gpu`, hour `hour` (over two days), owned by a team or unallocated
    /// (then reserved or not), with random class costs and allocated seconds.
    fn row() -> impl Strategy<Value = GpuHour> {
        (
            0u32..3,
            0i64..48,
            proptest::option::of(0usize..3),
            any::<bool>(),
            proptest::array::uniform5(0i64..5_000_000_000_000),
            0.0f64..3600.0,
        )
            .prop_map(|(gpu, hour, team, reserved, costs, seconds)| {
                // An owner's row costs busy and idle time; the unallocated rest costs reserved
                // (with a reason), unexplained or fault time.
                let [busy, idle, reserved_cost, unexplained, fault] =
                    costs.map(|u| Money::from_units(u as i128));
                let reserved = team.is_none() && reserved;
                let (owned, free) = (team.is_some(), team.is_none());
                let kept = |keep: bool, m: Money| if keep { m } else { Money::ZERO };
                let class_costs = ClassCosts {
                    busy: kept(owned, busy),
                    allocated_idle: kept(owned, idle),
                    reserved: kept(reserved, reserved_cost),
                    unexplained: kept(free, unexplained),
                    fault: kept(free, fault),
                };
                GpuHour {
                    hour: hour * H,
                    cluster: "c".into(),
                    node: format!("n{}", gpu % 2),
                    gpu_index: gpu,
                    owner: team.map(|t| Owner {
                        team: TEAMS[t].into(),
                        namespace: None,
                        workload: None,
                    }),
                    reserved_reason: reserved.then(|| "warm_pool".into()),
                    alloc_seconds: seconds,
                    cost: class_costs.total(),
                    class_costs,
                    ..GpuHour::default()
                }
            })
    }

    /// Rows unique per (GPU, hour, owner, reason), as `gpu_hours` gives them, and a shuffle.
    fn rows_and_shuffle() -> impl Strategy<Value = (Vec<GpuHour>, Vec<GpuHour>)> {
        proptest::collection::vec(row(), 1..60).prop_flat_map(|mut rows| {
            rows.sort_by(|a, b| {
                (&a.node, a.gpu_index, a.hour, &a.owner, &a.reserved_reason).cmp(&(
                    &b.node,
                    b.gpu_index,
                    b.hour,
                    &b.owner,
                    &b.reserved_reason,
                ))
            });
            rows.dedup_by(|a, b| {
                (&a.node, a.gpu_index, a.hour, &a.owner, &a.reserved_reason)
                    == (&b.node, b.gpu_index, b.hour, &b.owner, &b.reserved_reason)
            });
            let shuffled = Just(rows.clone()).prop_shuffle();
            (Just(rows), shuffled)
        })
    }

    proptest! {
        #[test]
        fn the_journal_of_the_same_rows_is_the_same_in_any_order(
            (rows, shuffled) in rows_and_shuffle(),
            pools in proptest::collection::vec((0i64..1_000_000_000_000_000, 0i64..48, 1i64..72), 0..4),
        ) {
            // Pools of awkward sizes over awkward periods, spread by direct cost (default), by
            // GPU-hours, and evenly.
            let items: Vec<SharedItem> = pools
                .iter()
                .enumerate()
                .map(|(i, &(units, start, hours))| SharedItem {
                    period: Span::new(start * H, (start + hours) * H),
                    amount: Money::from_units(units as i128),
                    source: "billing".into(),
                    attributes: [("pool".to_string(), (i % 3).to_string())].into(),
                })
                .collect();
            let rules = vec![
                SharedCostRule {
                    name: "by-hours".into(),
                    matches: [("pool".to_string(), "1".to_string())].into(),
                    strategy: Spread::Proportional,
                    basis: Basis::GpuHours,
                },
                SharedCostRule {
                    name: "even".into(),
                    matches: [("pool".to_string(), "2".to_string())].into(),
                    strategy: Spread::Even,
                    basis: Basis::DirectCost,
                },
            ];
            let window = Span::new(0, 2 * DAY);
            let source = |r: &GpuHour| if r.node == "n0" { "billing" } else { "rate_card" };
            let once = journal(&rows, source, &items, &rules, &UsageMeasures::new(), window);
            let again = journal(&shuffled, source, &items, &rules, &UsageMeasures::new(), window);
            prop_assert_eq!(&once, &again);
            // Nothing is lost or made up: the lines add to the rows' cost and the pools' parts
            // in the window, exactly.
            let expected: Money = rows.iter().map(|r| r.cost).sum::<Money>()
                + items
                    .iter()
                    .flat_map(|i| by_day(i.amount, i.period, window))
                    .map(|(_, a)| a)
                    .sum::<Money>();
            prop_assert_eq!(once.iter().map(|e| e.amount).sum::<Money>(), expected);
        }
    }
}
