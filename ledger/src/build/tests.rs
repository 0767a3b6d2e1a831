//! The worked example of `docs/ledger.md`: a small cluster, one day, every bucket non-zero.
//! The expected figures are worked out by hand there and in the comments below.

use super::*;
use crate::allocation::Labels;
use crate::amortize::Strategy;
use crate::journal::Basis;
use crate::time::{MICROS_PER_HOUR as H, MICROS_PER_SECOND as S};

fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn event(
    ts: Micros,
    kind: EventKind,
    node: &str,
    pod: &str,
    team: &str,
    gpu: Option<u32>,
) -> Event {
    Event {
        ts,
        kind: Some(kind),
        cluster: "demo".into(),
        node: Some(node.into()),
        namespace: Some("ml".into()),
        workload: Some(pod.into()),
        pod: Some(pod.into()),
        gpus: Some(1.0),
        gpu_indices: gpu.into_iter().collect(),
        labels: Labels {
            team: Some(team.into()),
            ..Labels::default()
        },
        ..Event::default()
    }
}

fn samples(from_h: i64, to_h: i64, sm_active: f64) -> Vec<UsageSample> {
    (from_h * 3600..to_h * 3600)
        .step_by(30)
        .map(|t| UsageSample {
            ts: t * S,
            sm_active: Some(sm_active),
            memory_used_share: None,
            power_w: Some(400.0),
        })
        .collect()
}

pub(crate) fn worked_example() -> LedgerInputs {
    let day = Span::new(0, 24 * H);
    let node = |name: &str, gpus, model: &str, resource: Option<&str>, share| Node {
        cluster: "demo".into(),
        node: name.into(),
        resource_id: resource.map(str::to_string),
        gpu_count: gpus,
        gpu_model: model.into(),
        capacity_type: "on_demand".into(),
        gpu_cost_share: share,
        gpu_replicas: 1,
    };
    let mut telemetry = HashMap::new();
    // n1 GPU 0: training busy (SM 0.60) for 4 h, then idle (0.01) for 2 h.
    let mut gpu0 = samples(0, 4, 0.6);
    gpu0.extend(samples(4, 6, 0.01));
    telemetry.insert(
        ("demo".into(), "n1".into(), 0),
        GpuTelemetry {
            gpu_uuid: Some("GPU-n1-0".into()),
            samples: gpu0,
            ..GpuTelemetry::default()
        },
    );
    // n2 (rate card) is seen for two hours, busy.
    telemetry.insert(
        ("demo".into(), "n2".into(), 0),
        GpuTelemetry {
            gpu_uuid: Some("GPU-n2-0".into()),
            samples: samples(0, 2, 0.9),
            ..GpuTelemetry::default()
        },
    );
    let line = |cost: f64, resource: Option<&str>, pairs: &[(&str, &str)]| BillingItem {
        charge_period: day,
        effective_cost: Money::from_f64(cost),
        resource_id: resource.map(str::to_string),
        attributes: attrs(pairs),
    };
    LedgerInputs {
        window: day,
        nodes: vec![
            node("n1", 2, "NVIDIA H100 80GB HBM3", Some("i-n1"), 0.8),
            node("n2", 1, "NVIDIA L4", None, 1.0),
        ],
        events: vec![
            event(0, EventKind::Start, "n1", "train", "vision", Some(0)),
            event(6 * H, EventKind::Stop, "n1", "train", "vision", None),
            event(0, EventKind::Start, "n1", "serve", "nlp", Some(1)),
            event(12 * H, EventKind::Stop, "n1", "serve", "nlp", None),
            event(0, EventKind::Start, "n2", "promo", "marketing", Some(0)),
            event(H, EventKind::Stop, "n2", "promo", "marketing", None),
            Event {
                ts: 20 * H,
                kind: Some(EventKind::NodeDown),
                cluster: "demo".into(),
                node: Some("n1".into()),
                ..Event::default()
            },
            Event {
                ts: 22 * H,
                kind: Some(EventKind::NodeUp),
                cluster: "demo".into(),
                node: Some("n1".into()),
                ..Event::default()
            },
        ],
        telemetry,
        reservations: vec![Reservation {
            cluster: "demo".into(),
            node: "n1".into(),
            gpu_indices: Some(vec![1]),
            span: Span::new(12 * H, 18 * H),
            reason: "warm_pool".into(),
        }],
        billing: vec![
            line(
                96.0,
                Some("arn:aws:ec2:us-east-1:1:instance/i-n1"),
                &[("service_category", "Compute")],
            ),
            line(9.0, None, &[("service_category", "Networking")]),
            line(6.0, None, &[("service_category", "Storage")]),
        ],
        manual_costs: vec![ManualCost {
            name: "CUDA toolkit support".into(),
            category: "licenses".into(),
            amount: Money::from_f64(4.8),
            period: day,
        }],
        rules: vec![
            SharedCostRule {
                name: "network".into(),
                matches: attrs(&[("service_category", "Networking")]),
                strategy: Strategy::Even,
                basis: Basis::DirectCost,
            },
            SharedCostRule {
                name: "licenses".into(),
                matches: attrs(&[("kind", "manual"), ("category", "licenses")]),
                strategy: Strategy::Fixed {
                    weights: [("vision".to_string(), 1.0), ("nlp".to_string(), 1.0)].into(),
                },
                basis: Basis::DirectCost,
            },
        ],
        rate_card: vec![RateCardEntry {
            gpu_model: "NVIDIA L4".into(),
            capacity_type: "on_demand".into(),
            price_per_gpu_hour: 1.2,
        }],
        allowed_teams: Some(["vision".to_string(), "nlp".to_string()].into()),
        ..LedgerInputs::default()
    }
}

fn total(entries: &[CostEntry], team: Option<&str>, bucket: &str) -> f64 {
    entries
        .iter()
        .filter(|e| e.team.as_deref() == team && e.bucket == bucket)
        .map(|e| e.amount)
        .sum::<Money>()
        .to_f64()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn the_worked_example_balances_with_every_bucket_filled() {
    let out = build(&worked_example());
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    let e = &out.cost_entries;
    // n1: 96.00 × 0.8 = 76.80 for 2 GPUs × 24 h → 1.60 per GPU-hour; 19.20 is node overhead.
    for (team, bucket, want) in [
        (Some("vision"), "direct", 6.40),         // 4 h busy × 1.60
        (Some("vision"), "allocated_idle", 3.20), // 2 h idle × 1.60
        (Some("nlp"), "direct", 19.20),           // 12 h without telemetry → busy × 1.60
        (Some("unattributed"), "direct", 1.20), // n2, team "marketing" is outside the policy; 1 h × 1.20 (rate card)
        (None, "reserved:warm_pool", 9.60),     // n1 GPU 1, 12–18 h
        (None, "unexplained", 33.20),           // n1: (16 h + 4 h) × 1.60 = 32.00; n2: 1 h × 1.20
        (None, "fault", 6.40),                  // n1 down 20–22 h, 2 GPUs × 2 h × 1.60
        // Shared. Direct basis (busy + allocated idle): vision 9.60, nlp 19.20, unattributed 1.20 = 30.00.
        // default rule (node overhead 19.20 + storage 6.00 = 25.20): × 0.32 / 0.64 / 0.04;
        // network 9.00 evenly over 3 teams; licenses 4.80 fixed 1:1 between vision and nlp.
        (Some("vision"), "shared", 8.064 + 3.0 + 2.4),
        (Some("nlp"), "shared", 16.128 + 3.0 + 2.4),
        (Some("unattributed"), "shared", 1.008 + 3.0),
    ] {
        assert!(
            close(total(e, team, bucket), want),
            "{team:?} {bucket}: {} != {want}",
            total(e, team, bucket)
        );
    }
    // Billed 96 + 9 + 6 = 111.00; manual 4.80; rate card 2 h × 1.20 = 2.40 → 118.20, all accounted.
    assert!(
        close(out.balance.billed.to_f64(), 111.0)
            && close(out.balance.manual.to_f64(), 4.8)
            && close(out.balance.rate_card.to_f64(), 2.4)
    );
    assert!(
        close(out.balance.accounted.to_f64(), 118.2),
        "{:?}",
        out.balance
    );
    assert!(out.balance.balances());
    let rule_of = |team: &str, rule: &str| {
        e.iter()
            .filter(|x| x.team.as_deref() == Some(team) && x.rule.as_deref() == Some(rule))
            .map(|x| x.amount)
            .sum::<Money>()
            .to_f64()
    };
    assert!(
        close(rule_of("nlp", "default"), 16.128)
            && close(rule_of("nlp", "network"), 3.0)
            && close(rule_of("nlp", "licenses"), 2.4)
    );
}

#[test]
fn idle_class_seconds_add_up_to_the_gpus_seconds() {
    let out = build(&worked_example());
    // n1's two GPUs are billed all day: 2 × 86 400 s. n2 is seen for 2 h: 7 200 s.
    let seconds = |node: &str| {
        out.gpu_hours
            .iter()
            .filter(|r| r.node == node)
            .map(GpuHour::seconds)
            .sum::<f64>()
    };
    assert!(close(seconds("n1"), 172_800.0) && close(seconds("n2"), 7_200.0));
    let n1_gpu0_busy: f64 = out
        .gpu_hours
        .iter()
        .filter(|r| r.node == "n1" && r.gpu_index == 0)
        .map(|r| r.busy_seconds)
        .sum();
    assert!(close(n1_gpu0_busy, 4.0 * 3600.0));
}

#[test]
fn late_telemetry_recomputes_only_the_hours_it_touches() {
    let mut inputs = worked_example();
    let before = build(&inputs);
    // Late samples arrive for n1 GPU 1 (nlp's serving pod) showing it idle from 08:00 to 09:00.
    // The last one (08:59:30) stands for two minutes, so hours 08 and 09 are touched.
    inputs.telemetry.insert(
        ("demo".into(), "n1".into(), 1),
        GpuTelemetry {
            gpu_uuid: Some("GPU-n1-1".into()),
            samples: samples(8, 9, 0.0),
            ..GpuTelemetry::default()
        },
    );
    let touched = [Span::new(8 * H, 10 * H)];
    let kept: Vec<GpuHour> = before
        .gpu_hours
        .iter()
        .filter(|r| !touched[0].contains(r.hour))
        .cloned()
        .collect();
    let after = rebuild(&inputs, &touched, kept);

    let changed: Vec<_> = after
        .gpu_hours
        .iter()
        .filter(|r| !before.gpu_hours.contains(r))
        .collect();
    assert_eq!(
        changed
            .iter()
            .map(|r| (r.hour / H, r.allocated_idle_seconds))
            .collect::<Vec<_>>(),
        [(8, 3600.0), (9, 90.0)],
    );
    // 1 h + 90 s of nlp's 1.60/h move from direct to allocated idle: 1.60 + 0.04.
    assert!(close(
        total(&after.cost_entries, Some("nlp"), "direct"),
        19.2 - 1.64
    ));
    assert!(close(
        total(&after.cost_entries, Some("nlp"), "allocated_idle"),
        1.64
    ));
    assert!(after.balance.balances() && close(after.balance.accounted.to_f64(), 118.2));
    // Recomputing every hour gives the same ledger (but for the GPU's UUID, which the kept rows
    // did not know yet) as recomputing the touched hours only.
    let without_uuid = |rows: &[GpuHour]| -> Vec<GpuHour> {
        rows.iter()
            .map(|r| GpuHour {
                gpu_uuid: None,
                ..r.clone()
            })
            .collect()
    };
    let full = build(&inputs);
    assert_eq!(
        without_uuid(&full.gpu_hours),
        without_uuid(&after.gpu_hours)
    );
    assert_eq!(full.cost_entries, after.cost_entries);
}

/// One H100 cut into seven 1g.10gb instances, each given to a pod of team `vision` for 01:00–02:00.
/// dcgm-exporter labels each instance's series with its pod: two instances are busy (SM 0.8), the
/// five others idle (0.0). Each allocation's usage is its own instance's (issue 14 §2): before,
/// every allocation was measured by the GPU's average, 1.6 / 7 = 0.229, and all seven were busy.
#[test]
fn mig_instances_are_measured_apart() {
    let pods: Vec<String> = (0..7).map(|i| format!("mig-{i}")).collect();
    let mut events = Vec::new();
    let mut pod_samples = BTreeMap::new();
    for (i, pod) in pods.iter().enumerate() {
        let mut start = event(H, EventKind::Start, "n1", pod, "vision", Some(0));
        start.mig_profile = Some("1g.10gb".into());
        events.push(start);
        events.push(event(2 * H, EventKind::Stop, "n1", pod, "vision", None));
        let sm = if i < 2 { 0.8 } else { 0.0 };
        pod_samples.insert(("ml".to_string(), pod.clone()), samples(1, 2, sm));
    }
    let mut telemetry = HashMap::new();
    telemetry.insert(
        ("demo".into(), "n1".into(), 0),
        GpuTelemetry {
            gpu_uuid: Some("GPU-n1-0".into()),
            // The whole GPU's reading is the highest of its instances'.
            samples: samples(1, 2, 0.8),
            pod_samples,
            xid: Vec::new(),
        },
    );
    let inputs = LedgerInputs {
        window: Span::new(0, 24 * H),
        nodes: vec![Node {
            cluster: "demo".into(),
            node: "n1".into(),
            resource_id: None,
            gpu_count: 1,
            gpu_model: "NVIDIA H100 80GB HBM3".into(),
            capacity_type: "on_demand".into(),
            gpu_cost_share: 1.0,
            gpu_replicas: 1,
        }],
        events,
        telemetry,
        rate_card: vec![RateCardEntry {
            gpu_model: "NVIDIA H100 80GB HBM3".into(),
            capacity_type: "on_demand".into(),
            price_per_gpu_hour: 7.0,
        }],
        ..LedgerInputs::default()
    };
    let out = build(&inputs);
    let by_pod: BTreeMap<&str, (f64, f64, Option<f64>)> = out
        .gpu_hours
        .iter()
        .filter_map(|r| {
            let owner = r.owner.as_ref()?;
            Some((
                owner.workload.as_deref()?,
                (r.busy_seconds, r.allocated_idle_seconds, r.sm_active),
            ))
        })
        .collect();
    // 1/7 of an hour each: 514.29 s.
    let seventh = 3600.0 / 7.0;
    for (i, pod) in pods.iter().enumerate() {
        let (busy, idle, sm) = by_pod[pod.as_str()];
        let expected = if i < 2 {
            (seventh, 0.0, 0.8)
        } else {
            (0.0, seventh, 0.0)
        };
        assert!(
            close(busy, expected.0) && close(idle, expected.1) && close(sm.unwrap(), expected.2),
            "{pod}: {busy} {idle} {sm:?}"
        );
    }
    // 7.00/h: 2 instances busy (2.00), 5 idle (5.00) — vision's allocated idle is 5/7 GPU-h.
    assert!(close(
        total(&out.cost_entries, Some("vision"), "direct"),
        2.0
    ));
    assert!(close(
        total(&out.cost_entries, Some("vision"), "allocated_idle"),
        5.0
    ));
    assert!(out.balance.balances());
}

/// n1's GPU 0 reports XID 79 (fallen off the bus) at 08:00 and 0 again after its reset at 09:00:
/// that unallocated hour is `fault`, not `unexplained` (issue 14 §7). XID 13 (a workload's own
/// graphics exception) at 10:00–11:00 is no device fault.
#[test]
fn an_xid_79_marks_the_gpu_faulty_until_it_reports_otherwise() {
    let mut inputs = worked_example();
    let gpu = inputs
        .telemetry
        .get_mut(&("demo".to_string(), "n1".to_string(), 0))
        .unwrap();
    gpu.xid = vec![(0, 0), (8 * H, 79), (9 * H, 0), (10 * H, 13), (11 * H, 0)];
    let out = build(&inputs);
    let seconds = |hour: i64| {
        out.gpu_hours
            .iter()
            .filter(|r| r.node == "n1" && r.gpu_index == 0 && r.hour == hour * H)
            .map(|r| (r.fault_seconds, r.unexplained_seconds))
            .fold((0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1))
    };
    assert_eq!(seconds(8), (3600.0, 0.0));
    assert_eq!(seconds(10), (0.0, 3600.0));
    // n1's GPUs cost 96 × 0.8 / 2 / 24 = 1.60 per hour: one hour moves from unexplained to fault.
    let before = build(&worked_example());
    let moved = |bucket: &str| {
        total(&out.cost_entries, None, bucket) - total(&before.cost_entries, None, bucket)
    };
    assert!(close(moved("fault"), 1.6) && close(moved("unexplained"), -1.6));
    assert!(out.balance.balances());
}
