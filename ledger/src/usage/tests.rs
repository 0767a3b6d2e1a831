use super::*;
use crate::allocation::{Allocation, EndReason, GpuSource, Labels};
use crate::gpu_hours::{ClassifyConfig, GpuHour, GpuTimeline, Owner, UsageSample, gpu_hours};
use crate::time::{MICROS_PER_SECOND as S, Span};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

fn at_seconds(samples: &[(i64, f64)]) -> Vec<(Micros, f64)> {
    samples.iter().map(|(s, v)| (s * S, *v)).collect()
}

#[test]
fn a_gap_beyond_max_gap_counts_for_nothing() {
    // 0.5 at 0 s and 30 s, 0.0 at 60 s, then nothing until 1.0 at 600 s; max gap 120 s.
    // Holdings: 30 s, 30 s, min(540, 120) = 120 s, and 120 s for the last sample.
    // (0.5·30 + 0.5·30 + 0·120 + 1.0·120) / 300 = 150 / 300 = 0.5.
    let samples = at_seconds(&[(0, 0.5), (30, 0.5), (60, 0.0), (600, 1.0)]);
    assert_eq!(time_weighted_average(&samples, 120 * S), Some(0.5));
    // Had the 540 s gap been idle time (max gap 1000 s): (15 + 15 + 0·540 + 1.0·1000) / 1600.
    assert_eq!(time_weighted_average(&samples, 1000 * S), Some(0.64375));
}

#[test]
fn weights_are_durations_not_sample_counts() {
    // 0.2 holds 10 s, 0.8 holds min(90, 60) = 60 s, the last 0.5 holds 60 s:
    // (2 + 48 + 30) / 130 = 0.615…, where the plain mean would be 0.5.
    let samples = at_seconds(&[(0, 0.2), (10, 0.8), (100, 0.5)]);
    assert!(close(
        time_weighted_average(&samples, 60 * S).unwrap(),
        80.0 / 130.0
    ));
    assert_eq!(
        time_weighted_average(&at_seconds(&[(5, 0.3)]), S),
        Some(0.3)
    );
}

#[test]
fn samples_sharing_a_time_share_its_holding() {
    // 0.2 and 0.6 at 0 s hold 10 s together (mean 0.4), 1.0 holds 60 s: (4 + 60) / 70.
    let samples = at_seconds(&[(0, 0.2), (0, 0.6), (10, 1.0)]);
    assert!(close(
        time_weighted_average(&samples, 60 * S).unwrap(),
        64.0 / 70.0
    ));
}

#[test]
fn no_samples_or_no_positive_gap_is_no_average() {
    assert_eq!(time_weighted_average(&[], 60 * S), None);
    assert_eq!(time_weighted_average(&at_seconds(&[(0, 0.5)]), 0), None);
}

fn whole_gpu_allocation(span: Span) -> Allocation {
    Allocation {
        cluster: "c".into(),
        node: "n1".into(),
        gpu_index: 0,
        namespace: None,
        workload: None,
        pod: Some("p".into()),
        labels: Labels {
            team: Some("a".into()),
            ..Labels::default()
        },
        span,
        share: 1.0,
        mig_profile: None,
        end_reason: EndReason::Finished,
        gpu_source: GpuSource::Event,
    }
}

fn owner(_: &Allocation) -> Owner {
    Owner {
        team: "a".into(),
        namespace: None,
        workload: None,
    }
}

#[test]
fn average_agrees_with_the_sm_active_of_gpu_hours() {
    // One hour wholly allocated; SM activity sampled with a 90 s hole and a 60 s max gap.
    let hour = Span::new(0, 3600 * S);
    let allocation = whole_gpu_allocation(hour);
    let samples = at_seconds(&[(0, 0.2), (10, 0.8), (100, 0.5), (1000, 0.9)]);
    let timeline = GpuTimeline {
        existence: vec![hour],
        allocations: vec![&allocation],
        samples: samples
            .iter()
            .map(|&(ts, v)| UsageSample {
                ts,
                sm_active: Some(v),
                memory_used_share: None,
                power_w: None,
            })
            .collect(),
        ..GpuTimeline::default()
    };
    let config = ClassifyConfig {
        max_sample_gap: 60 * S,
        ..ClassifyConfig::default()
    };
    let rows = gpu_hours(&timeline, &config, owner);
    assert_eq!(rows.len(), 1);
    // (0.2·10 + 0.8·60 + 0.5·60 + 0.9·60) / 190.
    let expected = 134.0 / 190.0;
    assert!(close(rows[0].sm_active.unwrap(), expected));
    assert!(close(
        time_weighted_average(&samples, config.max_sample_gap).unwrap(),
        expected
    ));
}

/// The class `gpu_hours` gives a minute that is all of one kind.
fn class_of(row: &GpuHour) -> IdleClass<'_> {
    let classes = [
        (row.busy_seconds, IdleClass::Busy),
        (row.allocated_idle_seconds, IdleClass::AllocatedIdle),
        (
            row.reserved_seconds,
            IdleClass::Reserved(row.reserved_reason.as_deref().unwrap_or_default()),
        ),
        (row.unexplained_seconds, IdleClass::Unexplained),
        (row.fault_seconds, IdleClass::Fault),
    ];
    let [(_, class)] = classes
        .into_iter()
        .filter(|(seconds, _)| *seconds > 0.0)
        .collect::<Vec<_>>()[..]
    else {
        panic!("the minute is not in exactly one class: {row:?}");
    };
    class
}

#[test]
fn idle_class_agrees_with_gpu_hours_in_every_case() {
    let minute = Span::new(0, 60 * S);
    let allocation = whole_gpu_allocation(minute);
    let threshold = ClassifyConfig::default().idle_threshold;
    for allocated in [false, true] {
        for sm_active in [None, Some(0.01), Some(threshold), Some(0.5)] {
            for reason in [None, Some("warm_pool")] {
                for fault in [false, true] {
                    let timeline = GpuTimeline {
                        existence: vec![minute],
                        allocations: if allocated { vec![&allocation] } else { vec![] },
                        reservations: reason.map(|r| (minute, r.into())).into_iter().collect(),
                        faults: if fault { vec![minute] } else { vec![] },
                        samples: sm_active
                            .map(|v| UsageSample {
                                ts: 0,
                                sm_active: Some(v),
                                memory_used_share: None,
                                power_w: None,
                            })
                            .into_iter()
                            .collect(),
                        ..GpuTimeline::default()
                    };
                    let rows = gpu_hours(&timeline, &ClassifyConfig::default(), owner);
                    let share = if allocated { 1.0 } else { 0.0 };
                    assert_eq!(
                        idle_class(share, sm_active, reason, fault, threshold),
                        class_of(&rows[0]),
                        "allocated {allocated}, sm_active {sm_active:?}, reason {reason:?}, fault {fault}"
                    );
                }
            }
        }
    }
}

#[test]
fn idle_class_names_are_those_of_the_design() {
    let names: Vec<String> = [
        idle_class(0.5, Some(0.3), None, false, 0.05),
        idle_class(1.0, None, None, false, 0.05),
        idle_class(1.0, Some(0.01), Some("warm_pool"), true, 0.05),
        idle_class(0.0, Some(0.9), Some("gang_wait"), false, 0.05),
        idle_class(0.0, None, None, false, 0.05),
        idle_class(0.0, None, Some("maintenance"), true, 0.05),
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    assert_eq!(
        names,
        [
            "busy",
            "busy",
            "allocated_idle",
            "reserved:gang_wait",
            "unexplained",
            "fault"
        ]
    );
    assert_eq!(IdleClass::Reserved("gang_wait").as_str(), "reserved");
}

#[test]
fn unit_cost_needs_output() {
    // 12.00 for 3M tokens is 4.00 per 1M tokens.
    assert_eq!(unit_cost(12.0, 3e6, 1e6), Some(4.0));
    assert_eq!(unit_cost(12.0, 4.0, 1.0), Some(3.0));
    assert_eq!(unit_cost(12.0, 0.0, 1.0), None);
    assert_eq!(unit_cost(12.0, -1.0, 1.0), None);
}
