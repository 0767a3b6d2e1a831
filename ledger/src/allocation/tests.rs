use super::*;
use crate::time::{MICROS_PER_HOUR as H, MICROS_PER_SECOND as S};

fn nodes() -> HashMap<(String, String), NodeGpus> {
    let mut nodes = HashMap::new();
    nodes.insert(
        ("c".into(), "h100-1".into()),
        NodeGpus {
            gpu_count: 8,
            gpu_model: "NVIDIA H100 80GB HBM3".into(),
            replicas: 1,
        },
    );
    nodes.insert(
        ("c".into(), "l4-ts".into()),
        NodeGpus {
            gpu_count: 1,
            gpu_model: "NVIDIA L4".into(),
            replicas: 4,
        },
    );
    nodes
}

fn event(ts: Micros, kind: EventKind, pod: &str) -> Event {
    Event {
        ts,
        kind: Some(kind),
        cluster: "c".into(),
        node: Some("h100-1".into()),
        namespace: Some("ml".into()),
        workload: Some(format!("wl-{pod}")),
        pod: Some(pod.into()),
        labels: Labels {
            team: Some("vision".into()),
            ..Labels::default()
        },
        ..Event::default()
    }
}

fn build(events: &[Event]) -> (Vec<Allocation>, Vec<Warning>) {
    build_allocations(events, Span::new(0, 24 * H), &nodes(), &PodGpus::new())
}

#[test]
fn a_thirty_second_pod_is_charged_thirty_seconds() {
    let start = Event {
        gpu_indices: vec![3],
        ..event(10 * S, EventKind::Start, "p")
    };
    let (allocations, warnings) = build(&[start, event(40 * S, EventKind::Stop, "p")]);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(allocations.len(), 1);
    let a = &allocations[0];
    assert_eq!(
        (a.gpu_index, a.span.seconds(), a.share, a.end_reason),
        (3, 30.0, 1.0, EndReason::Finished)
    );
    assert_eq!(a.gpu_source, GpuSource::Event);
}

#[test]
fn stop_reasons_running_workloads_and_restarts() {
    let start = |ts, pod| Event {
        gpu_indices: vec![0],
        ..event(ts, EventKind::Start, pod)
    };
    let failed = Event {
        reason: Some("Failed".into()),
        ..event(2 * H, EventKind::Stop, "a")
    };
    let (allocations, _) = build(&[
        start(H, "a"),
        failed,
        start(H, "b"),
        event(3 * H, EventKind::Preempted, "b"),
        start(H, "c"),
        event(2 * H, EventKind::Evicted, "c"),
        // d restarts at 5h and then keeps running past the window's end (24h).
        start(4 * H, "d"),
        start(5 * H, "d"),
    ]);
    let reasons: Vec<_> = allocations
        .iter()
        .map(|a| {
            (
                a.pod.clone().unwrap(),
                a.span.seconds() / 3600.0,
                a.end_reason,
            )
        })
        .collect::<Vec<_>>();
    let expect = |pod: &str, hours: f64, reason| (pod.to_string(), hours, reason);
    for want in [
        expect("a", 1.0, EndReason::Failed),
        expect("b", 2.0, EndReason::Preempted),
        expect("c", 1.0, EndReason::Evicted),
        expect("d", 1.0, EndReason::Restarted),
        expect("d", 19.0, EndReason::Running),
    ] {
        assert!(reasons.contains(&want), "{want:?} not in {reasons:?}");
    }
    assert_eq!(reasons.len(), 5);
}

/// Starts the given events at 0 and stops them after one hour; returns each pod's GPU-hours.
fn gpu_hours_after_one_hour(starts: Vec<Event>) -> impl Fn(&str) -> f64 {
    let stops: Vec<Event> = starts
        .iter()
        .map(|e| Event {
            ts: H,
            kind: Some(EventKind::Stop),
            gpu_indices: vec![],
            ..e.clone()
        })
        .collect();
    let (allocations, warnings) = build(&[starts, stops].concat());
    assert!(warnings.is_empty(), "{warnings:?}");
    move |pod: &str| {
        allocations
            .iter()
            .filter(|a| a.pod.as_deref() == Some(pod))
            .map(|a| a.share * a.span.seconds() / 3600.0)
            .sum()
    }
}

#[test]
fn a_job_on_eight_whole_gpus_is_eight_gpu_hours_an_hour() {
    let eight = Event {
        gpu_indices: (0..8).collect(),
        ..event(0, EventKind::Start, "train")
    };
    assert_eq!(gpu_hours_after_one_hour(vec![eight])("train"), 8.0);
}

#[test]
fn a_mig_slice_holds_its_slices_of_the_gpu() {
    // 3g.40gb on an H100 (7 slices): 3/7 of a GPU-hour per hour.
    let mig = Event {
        gpu_indices: vec![7],
        mig_profile: Some("3g.40gb".into()),
        ..event(0, EventKind::Start, "mig")
    };
    assert!((gpu_hours_after_one_hour(vec![mig])("mig") - 3.0 / 7.0).abs() < 1e-12);
}

#[test]
fn four_time_sliced_replicas_for_an_hour_are_one_gpu_hour() {
    let replicas: Vec<Event> = (0..4)
        .map(|i| Event {
            node: Some("l4-ts".into()),
            gpu_indices: vec![0],
            ..event(0, EventKind::Start, &format!("r{i}"))
        })
        .collect();
    let held = gpu_hours_after_one_hour(replicas);
    assert_eq!(
        (0..4).map(|i| held(&format!("r{i}"))).collect::<Vec<_>>(),
        [0.25; 4]
    );
}

#[test]
fn a_fractional_gpu_holds_its_declared_fraction() {
    let frac = Event {
        gpu_indices: vec![1],
        gpu_fraction: Some(0.25),
        ..event(0, EventKind::Start, "frac")
    };
    assert_eq!(gpu_hours_after_one_hour(vec![frac])("frac"), 0.25);
}

#[test]
fn a_preempted_run_ends_at_its_preemption() {
    let start = Event {
        gpu_indices: vec![2],
        ..event(H, EventKind::Start, "b")
    };
    let (allocations, _) = build(&[start, event(3 * H, EventKind::Preempted, "b")]);
    assert_eq!(allocations.len(), 1);
    assert_eq!(
        (allocations[0].span.seconds(), allocations[0].end_reason),
        (7200.0, EndReason::Preempted)
    );
}

#[test]
fn gpus_come_from_telemetry_else_are_packed() {
    let mut pod_gpus = PodGpus::new();
    pod_gpus.insert(
        ("c".into(), "h100-1".into(), "ml".into(), "seen".into()),
        vec![5],
    );
    let seen = Event {
        gpus: Some(1.0),
        ..event(0, EventKind::Start, "seen")
    };
    let first = Event {
        gpus: Some(2.0),
        ..event(0, EventKind::Start, "first")
    };
    let second = Event {
        gpus: Some(1.0),
        ..event(10 * S, EventKind::Start, "second")
    };
    let (allocations, warnings) =
        build_allocations(&[seen, first, second], Span::new(0, H), &nodes(), &pod_gpus);
    assert!(warnings.is_empty(), "{warnings:?}");
    let placed: Vec<_> = allocations
        .iter()
        .map(|a| (a.pod.clone().unwrap(), a.gpu_index, a.gpu_source))
        .collect();
    assert!(placed.contains(&("seen".into(), 5, GpuSource::Telemetry)));
    assert!(placed.contains(&("first".into(), 0, GpuSource::Packed)));
    assert!(placed.contains(&("first".into(), 1, GpuSource::Packed)));
    assert!(
        placed.contains(&("second".into(), 2, GpuSource::Packed)),
        "{placed:?}"
    );
}

#[test]
fn events_outside_the_inventory_are_warned_about_not_lost_silently() {
    let unknown = Event {
        node: Some("ghost".into()),
        gpu_indices: vec![0],
        ..event(0, EventKind::Start, "x")
    };
    let bad_gpu = Event {
        gpu_indices: vec![9],
        ..event(0, EventKind::Start, "y")
    };
    let (allocations, warnings) = build(&[unknown, bad_gpu]);
    assert!(allocations.is_empty());
    assert_eq!(warnings.len(), 2);
    assert!(
        warnings[0]
            .message
            .contains("ghost is not in the inventory")
    );
    assert!(
        warnings[1]
            .message
            .contains("GPU 9 does not exist on h100-1 (8 GPUs)")
    );
}

#[test]
fn a_slurm_job_on_two_nodes_is_two_runs() {
    let mut nodes = nodes();
    nodes.insert(
        ("c".into(), "h100-2".into()),
        NodeGpus {
            gpu_count: 8,
            gpu_model: "NVIDIA H100".into(),
            replicas: 1,
        },
    );
    let on = |node: &str, ts, kind| Event {
        node: Some(node.into()),
        pod: None,
        gpus: Some(4.0),
        ..event(ts, kind, "job")
    };
    let events = [
        on("h100-1", 0, EventKind::Start),
        on("h100-2", 0, EventKind::Start),
        on("h100-1", H, EventKind::Stop),
        on("h100-2", H, EventKind::Stop),
    ];
    let (allocations, warnings) =
        build_allocations(&events, Span::new(0, 24 * H), &nodes, &PodGpus::new());
    assert!(warnings.is_empty(), "{warnings:?}");
    // 4 GPUs on each of 2 nodes for one hour: 8 GPU-hours, packed onto GPUs 0–3 of each node.
    assert_eq!(allocations.len(), 8);
    assert_eq!(
        allocations
            .iter()
            .map(|a| a.span.seconds() / 3600.0)
            .sum::<f64>(),
        8.0
    );
}

#[test]
fn a_workload_seen_as_pods_and_as_a_kueue_workload_counts_once() {
    let pod = Event {
        gpu_indices: vec![0],
        ..event(0, EventKind::Start, "p")
    };
    let pod_stop = event(H, EventKind::Stop, "p");
    // Kueue's view of the same job: no pod, the same workload name.
    let whole = Event {
        pod: None,
        workload: Some("wl-p".into()),
        gpus: Some(1.0),
        ..event(0, EventKind::Start, "p")
    };
    let whole_stop = Event {
        pod: None,
        workload: Some("wl-p".into()),
        ..event(H, EventKind::Stop, "p")
    };
    let (allocations, _) = build(&[pod, pod_stop, whole, whole_stop]);
    assert_eq!(allocations.len(), 1);
    assert_eq!(allocations[0].pod.as_deref(), Some("p"));
}

/// Issue 14 §1: a stop told twice — byte-identical, or with other words — closes one run. Before,
/// the second stop found no open run and became a phantom run from the window's start (00:00) to
/// the stop, packed onto a free GPU: 1 h + 2.5 h of allocated time instead of 1 h.
#[test]
fn a_repeated_stop_is_the_same_stop() {
    let start = Event {
        gpu_indices: vec![0],
        ..event(90 * 60 * S, EventKind::Start, "p")
    };
    let stop = event(150 * 60 * S, EventKind::Stop, "p");
    let reworded = Event {
        reason: Some("Completed".into()),
        ..stop.clone()
    };
    for events in [
        vec![start.clone(), stop.clone(), stop.clone()],
        vec![stop.clone(), start.clone(), reworded.clone()],
        vec![reworded, stop.clone(), start.clone(), start.clone()],
    ] {
        let (allocations, warnings) = build(&events);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(allocations.len(), 1, "{allocations:?}");
        assert_eq!(allocations[0].span, Span::new(90 * 60 * S, 150 * 60 * S));
    }
}

/// Every arrival order of the same events gives the same allocations, repeats included.
#[test]
fn allocations_do_not_depend_on_event_order() {
    let with = |e: Event, gpus: Option<f64>| Event { gpus, ..e };
    let events = vec![
        with(event(H, EventKind::Start, "a"), Some(2.0)),
        with(event(H, EventKind::Start, "b"), Some(1.0)),
        event(3 * H, EventKind::Stop, "a"),
        // b restarts at 2h (a second start ends the first run) and is still running at 24h.
        with(event(2 * H, EventKind::Start, "b"), Some(1.0)),
        // A stop with no start in the window: running since before it.
        event(4 * H, EventKind::Stop, "c"),
    ];
    let (expected, _) = build(&events);
    assert_eq!(expected.len(), 2 + 2 + 1);
    let mut rotated = events.clone();
    for step in 0..events.len() {
        rotated.rotate_left(1);
        let mut doubled = rotated.clone();
        doubled.extend(rotated.iter().skip(step).cloned());
        doubled.reverse();
        assert_eq!(build(&doubled).0, expected, "order {step}");
    }
}

#[test]
fn ties_and_warnings_come_in_the_order_of_the_runs_keys() {
    // Six pods share GPU 0 from 1h (a tenth each): their allocations tie on GPU and start, and
    // are listed by workload; four starts that name no node warn in the same order. The events
    // arrive in reverse.
    let pods = ["p0", "p1", "p2", "p3", "p4", "p5"];
    let mut events: Vec<Event> = pods
        .iter()
        .map(|pod| Event {
            gpu_indices: vec![0],
            gpu_fraction: Some(0.1),
            ..event(H, EventKind::Start, pod)
        })
        .collect();
    events.extend(["q0", "q1", "q2", "q3"].map(|pod| Event {
        node: None,
        ..event(H, EventKind::Start, pod)
    }));
    events.reverse();
    let (allocations, warnings) = build(&events);
    let listed: Vec<_> = allocations
        .iter()
        .map(|a| a.pod.as_deref().unwrap())
        .collect();
    assert_eq!(listed, pods);
    let warned: Vec<_> = warnings.iter().map(|w| w.subject.as_str()).collect();
    assert_eq!(warned.len(), 4);
    for (subject, pod) in warned.iter().zip(["q0", "q1", "q2", "q3"]) {
        assert!(subject.contains(pod), "{subject} should name {pod}");
    }
}
