use super::*;

const MIN: Micros = 60 * MICROS_PER_SECOND;

fn replica(name: &str, start_min: i64, end_min: i64, share: f64) -> ReplicaAllocation {
    ReplicaAllocation {
        replica: name.into(),
        span: Span::new(start_min * MIN, end_min * MIN),
        share,
    }
}

#[test]
fn the_safe_rate_is_the_busiest_window_that_stayed_at_slo() {
    let mut windows = Windows::default();
    // 00:00–00:05: 4 requests, all met. 00:05–00:10: 6 requests, one missed (5/6 < 0.99).
    // 00:10–00:15: 2 requests, met. 01:00: 1 request with no replica holding a GPU.
    for minute in [0, 1, 2, 3] {
        windows.add(minute * MIN, true);
    }
    for (i, minute) in [5, 6, 7, 8, 9, 9].into_iter().enumerate() {
        windows.add(minute * MIN, i != 0);
    }
    windows.add(11 * MIN, true);
    windows.add(12 * MIN, true);
    windows.add(60 * MIN, true);
    let replicas = [replica("ml/chat/chat-0", 0, 15, 1.0)];
    let measured = windows.throughput(&replicas, 0.99);
    // 4 / 300 s / 1 replica = 0.013333 rps; the 6-request window broke the SLO.
    assert_eq!((measured.windows, measured.windows_at_slo), (3, 2));
    assert_eq!(measured.best_window, Some(0));
    assert_eq!(measured.safe_rps_per_replica, Some(4.0 / 300.0));
    assert_eq!(measured.gpus_per_replica, Some(1.0));
    // Two replicas of 2 GPUs each split the same traffic.
    let two = [
        replica("ml/chat/chat-0", 0, 15, 1.0),
        replica("ml/chat/chat-0", 0, 15, 1.0),
        replica("ml/chat/chat-1", 0, 15, 1.0),
        replica("ml/chat/chat-1", 0, 15, 1.0),
    ];
    let measured = windows.throughput(&two, 0.99);
    assert_eq!(measured.safe_rps_per_replica, Some(4.0 / 300.0 / 2.0));
    assert_eq!(measured.gpus_per_replica, Some(2.0));
}

#[test]
fn replicas_round_up_then_add_redundancy() {
    // 0.1 / (4 / 300) = 7.5 → 8, + 1 = 9.
    assert_eq!(replicas_needed(0.1, Some(4.0 / 300.0), 1), Some(9));
    assert_eq!(replicas_needed(0.1, None, 1), None);
}

#[test]
fn a_job_starts_on_one_node_or_on_whole_free_nodes() {
    let fragmented = [NodeFree { gpus: 2, free: 1 }, NodeFree { gpus: 2, free: 1 }];
    // 2 GPUs free, but one on each node: a 2-GPU job cannot start.
    let two = fit(&fragmented, 2);
    assert_eq!(
        (two.free_gpus, two.largest_free_block, two.can_start),
        (2, 1, false)
    );
    assert!(fit(&fragmented, 1).can_start);
    let whole = [
        NodeFree { gpus: 8, free: 8 },
        NodeFree { gpus: 8, free: 8 },
        NodeFree { gpus: 8, free: 3 },
    ];
    // 16 GPUs on two whole free nodes; 19 free in all, but the 3 are a fragment.
    assert!(fit(&whole, 16).can_start);
    assert!(!fit(&whole, 19).can_start);
}
