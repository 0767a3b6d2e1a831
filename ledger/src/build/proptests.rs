//! The invariants of docs/design.md §4 under random clusters: the ledger always balances, and each GPU's
//! idle-class seconds add up to the seconds it was billed or observed.

use proptest::prelude::*;

use super::*;
use crate::allocation::Labels;
use crate::amortize::Strategy as Spread;
use crate::journal::Basis;
use crate::time::{MICROS_PER_DAY as DAY, MICROS_PER_HOUR as H};

const TEAMS: [&str; 4] = ["vision", "nlp", "search", "rogue"];

fn span_in(window_hours: i64) -> impl Strategy<Value = Span> {
    (-6..window_hours + 6, 0..window_hours)
        .prop_map(|(start, len)| Span::new(start * H / 2, (start + len) * H / 2 + 1234))
}

/// (gpus, gpu_cost_share, billed, spot, replicas)
type NodeSpec = (u32, f64, bool, bool, u32);
/// (node, pod, start hour, hours, stopped, gpu index, team, MIG, fraction)
type EventSpec = (
    usize,
    usize,
    i64,
    i64,
    bool,
    Option<u32>,
    usize,
    bool,
    Option<f64>,
);

prop_compose! {
    fn node()(gpus in 1u32..5, share in 0.0f64..=1.0, billed in any::<bool>(), spot in any::<bool>(), replicas in 1u32..3) -> NodeSpec {
        (gpus, share, billed, spot, replicas)
    }
}

prop_compose! {
    fn event()(node in 0usize..3, pod in 0usize..6, start in 0i64..60, len in 0i64..30, stop in any::<bool>(),
               gpu in proptest::option::of(0u32..5), team in 0usize..4, mig in any::<bool>(), fraction in proptest::option::of(0.1f64..1.0))
        -> EventSpec {
        (node, pod, start, len, stop, gpu, team, mig, fraction)
    }
}

fn inputs(
    nodes: Vec<NodeSpec>,
    events: Vec<EventSpec>,
    lines: Vec<(usize, f64, Span, bool)>,
    reservations: Vec<(usize, Span, Option<u32>)>,
    manual: Vec<(f64, Span)>,
    strategy: usize,
) -> LedgerInputs {
    let window = Span::new(0, 2 * DAY);
    let name = |i: usize| format!("n{i}");
    let nodes_v: Vec<Node> = nodes
        .iter()
        .enumerate()
        .map(|(i, &(gpus, share, billed, spot, replicas))| Node {
            cluster: "c".into(),
            node: name(i),
            resource_id: billed.then(|| format!("i-{i}")),
            gpu_count: gpus,
            gpu_model: if i % 2 == 0 {
                "NVIDIA H100".into()
            } else {
                "NVIDIA L4".into()
            },
            capacity_type: if spot {
                "spot".into()
            } else {
                "on_demand".into()
            },
            gpu_cost_share: share,
            gpu_replicas: replicas,
        })
        .collect();
    let mut evs = Vec::new();
    for (node, pod, start, len, stop, gpu, team, mig, fraction) in events {
        let node = node % nodes_v.len();
        let base = Event {
            cluster: "c".into(),
            node: Some(name(node)),
            namespace: Some("ns".into()),
            workload: Some(format!("w{pod}")),
            pod: Some(format!("p{pod}")),
            gpus: Some(1.0),
            gpu_indices: gpu.into_iter().collect(),
            mig_profile: mig.then(|| "2g.20gb".to_string()),
            gpu_fraction: fraction,
            labels: Labels {
                team: Some(TEAMS[team].into()),
                ..Labels::default()
            },
            ..Event::default()
        };
        evs.push(Event {
            ts: start * H,
            kind: Some(EventKind::Start),
            ..base.clone()
        });
        if stop {
            evs.push(Event {
                ts: (start + len) * H,
                kind: Some(EventKind::Stop),
                ..base
            });
        }
    }
    evs.push(Event {
        ts: 30 * H,
        kind: Some(EventKind::NodeDown),
        cluster: "c".into(),
        node: Some(name(0)),
        ..Event::default()
    });
    let billing = lines
        .into_iter()
        .map(|(node, cost, period, matched)| BillingItem {
            charge_period: period,
            effective_cost: Money::from_f64(cost),
            resource_id: matched.then(|| format!("arn:x/i-{}", node % nodes_v.len())),
            attributes: [(
                "service_category".to_string(),
                if node % 2 == 0 {
                    "Networking"
                } else {
                    "Storage"
                }
                .to_string(),
            )]
            .into(),
        })
        .collect();
    let strategies = [
        Spread::Proportional,
        Spread::Even,
        Spread::Fixed {
            weights: [("vision".to_string(), 2.0)].into(),
        },
        Spread::Usage,
    ];
    LedgerInputs {
        window,
        reservations: reservations
            .into_iter()
            .map(|(node, span, gpu)| Reservation {
                cluster: "c".into(),
                node: name(node % nodes_v.len()),
                gpu_indices: gpu.map(|g| vec![g]),
                span,
                reason: if span.start % 2 == 0 {
                    "warm_pool".into()
                } else {
                    "ha_redundancy".into()
                },
            })
            .collect(),
        nodes: nodes_v,
        events: evs,
        billing,
        manual_costs: manual
            .into_iter()
            .map(|(amount, period)| ManualCost {
                name: "m".into(),
                category: "licenses".into(),
                amount: Money::from_f64(amount),
                period,
            })
            .collect(),
        rules: vec![SharedCostRule {
            name: "net".into(),
            matches: [("service_category".to_string(), "Networking".to_string())].into(),
            strategy: strategies[strategy % 4].clone(),
            basis: if strategy % 4 == 3 {
                Basis::Usage("requests".into())
            } else {
                Basis::GpuHours
            },
        }],
        rate_card: vec![RateCardEntry {
            gpu_model: "NVIDIA L4".into(),
            capacity_type: "on_demand".into(),
            price_per_gpu_hour: 0.8,
        }],
        allowed_teams: Some(
            [
                "vision".to_string(),
                "nlp".to_string(),
                "search".to_string(),
            ]
            .into(),
        ),
        ..LedgerInputs::default()
    }
}

fn union_seconds(mut spans: Vec<Span>) -> f64 {
    spans.retain(|s| !s.is_empty());
    spans.sort();
    let mut total = 0;
    let mut current: Option<Span> = None;
    for s in spans {
        current = match current {
            Some(c) if s.start <= c.end => Some(Span::new(c.start, c.end.max(s.end))),
            Some(c) => {
                total += c.len();
                Some(s)
            }
            None => Some(s),
        };
    }
    (total + current.map_or(0, |c| c.len())) as f64 / 1e6
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn the_ledger_always_balances(
        nodes in proptest::collection::vec(node(), 1..4),
        events in proptest::collection::vec(event(), 0..25),
        lines in proptest::collection::vec((0usize..3, -50.0f64..500.0, span_in(96), any::<bool>()), 0..8),
        reservations in proptest::collection::vec((0usize..3, span_in(96), proptest::option::of(0u32..4)), 0..4),
        manual in proptest::collection::vec((0.0f64..100.0, span_in(96)), 0..3),
        strategy in 0usize..4,
    ) {
        let inputs = inputs(nodes, events, lines, reservations, manual, strategy);
        let out = build(&inputs);
        prop_assert!(out.balance.balances(), "{:?}", out.balance);

        // Per GPU: class seconds = seconds billed (matched lines in the window) ∪ observed hours.
        for node in &inputs.nodes {
            let billed: Vec<Span> = inputs.billing.iter()
                .filter(|l| node.resource_id.is_some() && l.resource_id.as_deref().is_some_and(|id| id.ends_with(node.resource_id.as_deref().unwrap())))
                .filter(|l| !l.charge_period.is_empty() && node.gpu_count > 0)
                .map(|l| l.charge_period.intersect(&inputs.window))
                .collect();
            for gpu in 0..node.gpu_count {
                let rows: Vec<&GpuHour> = out.gpu_hours.iter().filter(|r| r.node == node.node && r.gpu_index == gpu).collect();
                let mut existence = billed.clone();
                let allocated = out.allocations.iter().filter(|a| a.node == node.node && a.gpu_index == gpu);
                // An allocation makes every hour it touches observed, the middle ones too.
                existence.extend(allocated.flat_map(|a| (a.span.start.div_euclid(H)..(a.span.end + H - 1).div_euclid(H)).map(|h| Span::new(h * H, (h + 1) * H))).map(|s| s.intersect(&inputs.window)));
                let want = union_seconds(existence);
                let got: f64 = rows.iter().map(|r| r.seconds()).sum();
                prop_assert!((got - want).abs() < 1e-6 * want.max(1.0), "{}/{gpu}: {got} s in rows, {want} s existed", node.node);
                for r in rows {
                    prop_assert!((r.alloc_seconds - r.busy_seconds - r.allocated_idle_seconds).abs() < 1e-6);
                }
            }
        }
    }
}
