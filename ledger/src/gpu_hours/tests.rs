use super::*;
use crate::allocation::{EndReason, GpuSource, Labels};
use crate::time::MICROS_PER_SECOND as S;

const HOUR: Micros = MICROS_PER_HOUR;

fn allocation(team: &str, start_s: i64, end_s: i64, share: f64) -> Allocation {
    Allocation {
        cluster: "c".into(),
        node: "n1".into(),
        gpu_index: 0,
        namespace: Some("ns".into()),
        workload: Some(format!("{team}-job")),
        pod: Some(format!("{team}-pod-{start_s}-{share}")),
        labels: Labels {
            team: Some(team.into()),
            ..Labels::default()
        },
        span: Span::new(start_s * S, end_s * S),
        share,
        mig_profile: None,
        end_reason: EndReason::Finished,
        gpu_source: GpuSource::Event,
    }
}

fn owner(a: &Allocation) -> Owner {
    Owner {
        team: a.labels.team.clone().unwrap(),
        namespace: a.namespace.clone(),
        workload: a.workload.clone(),
    }
}

fn timeline<'a>(allocations: &'a [Allocation], price_per_hour: f64) -> GpuTimeline<'a> {
    GpuTimeline {
        cluster: "c".into(),
        node: "n1".into(),
        gpu_index: 0,
        gpu_uuid: Some("GPU-1".into()),
        existence: vec![Span::new(0, HOUR)],
        allocations: allocations.iter().collect(),
        prices: vec![PriceSegment {
            span: Span::new(0, HOUR),
            price_per_hour,
        }],
        ..GpuTimeline::default()
    }
}

fn samples(
    from_s: i64,
    to_s: i64,
    sm_active: f64,
    power_w: f64,
) -> impl Iterator<Item = UsageSample> {
    (from_s..to_s).step_by(30).map(move |t| UsageSample {
        ts: t * S,
        sm_active: Some(sm_active),
        memory_used_share: None,
        power_w: Some(power_w),
    })
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn every_second_of_the_hour_lands_in_one_class() {
    // One hour at 3.60/GPU-hour (0.001 per second). Team A holds the GPU for 00:00–00:30:
    // SM active 0.50 for the first 15 minutes, 0.01 (idle) for the next 15. A warm pool is
    // declared 00:30–00:45, the GPU is faulty 00:55–01:00, and 00:45–00:55 is unexplained.
    let allocations = [allocation("a", 0, 1800, 1.0)];
    let mut t = timeline(&allocations, 3.6);
    t.samples = samples(0, 900, 0.5, 300.0)
        .chain(samples(900, 1800, 0.01, 300.0))
        .collect();
    t.reservations = vec![(Span::new(1800 * S, 2700 * S), "warm_pool".into())];
    t.faults = vec![Span::new(3300 * S, 3600 * S)];
    let rows = gpu_hours(&t, &ClassifyConfig::default(), owner);

    assert_eq!(rows.len(), 3, "{rows:#?}");
    let team = rows.iter().find(|r| r.owner.is_some()).unwrap();
    assert_eq!(
        (
            team.alloc_seconds,
            team.busy_seconds,
            team.allocated_idle_seconds
        ),
        (1800.0, 900.0, 900.0)
    );
    // (0.50 × 900 + 0.01 × 900) / 1800 = 0.255
    assert!(close(team.sm_active.unwrap(), 0.255));
    // 300 W × 1800 s = 150 Wh; 1800 s × 0.001 = 1.80
    assert!(close(team.energy_wh, 150.0) && close(team.cost.to_f64(), 1.8));

    let warm = rows
        .iter()
        .find(|r| r.reserved_reason.as_deref() == Some("warm_pool"))
        .unwrap();
    assert_eq!(warm.reserved_seconds, 900.0);
    // The last sample (00:29:30) stands for two minutes, to 00:31:30: 90 s at 300 W into the warm pool.
    assert!(close(warm.energy_wh, 7.5) && close(warm.cost.to_f64(), 0.9));

    let rest = rows
        .iter()
        .find(|r| r.owner.is_none() && r.reserved_reason.is_none())
        .unwrap();
    assert_eq!(
        (rest.unexplained_seconds, rest.fault_seconds),
        (600.0, 300.0)
    );
    assert!(close(rest.cost.to_f64(), 0.9));
    assert!(
        close(rest.class_costs.unexplained.to_f64(), 0.6)
            && close(rest.class_costs.fault.to_f64(), 0.3)
    );
    assert!(
        close(team.class_costs.busy.to_f64(), 0.9)
            && close(team.class_costs.allocated_idle.to_f64(), 0.9)
    );

    assert_eq!(rows.iter().map(GpuHour::seconds).sum::<f64>(), 3600.0);
    assert!(close(
        rows.iter().map(|r| r.cost).sum::<Money>().to_f64(),
        3.6
    ));
}

#[test]
fn four_quarter_shares_for_an_hour_are_one_gpu_hour() {
    let allocations: Vec<_> = ["a", "b", "c", "d"]
        .iter()
        .map(|team| allocation(team, 0, 3600, 0.25))
        .collect();
    let rows = gpu_hours(
        &timeline(&allocations, 2.0),
        &ClassifyConfig::default(),
        owner,
    );
    assert_eq!(rows.len(), 4, "no unallocated row: the GPU was fully held");
    for row in &rows {
        // 0.25 × 3600 s = 900 s each; 0.25 GPU-hours × 2.00 = 0.50 each; no telemetry → busy.
        assert_eq!((row.alloc_seconds, row.busy_seconds), (900.0, 900.0));
        assert!(close(row.cost.to_f64(), 0.5));
        assert_eq!(row.sm_active, None);
    }
}

#[test]
fn overcommitted_shares_are_scaled_to_the_one_gpu() {
    let allocations = [allocation("a", 0, 3600, 1.0), allocation("b", 0, 3600, 1.0)];
    let rows = gpu_hours(
        &timeline(&allocations, 1.0),
        &ClassifyConfig::default(),
        owner,
    );
    assert_eq!(
        rows.iter().map(|r| r.alloc_seconds).collect::<Vec<_>>(),
        [1800.0, 1800.0]
    );
}

#[test]
fn a_missing_hour_of_telemetry_is_not_an_idle_hour() {
    // Two hours allocated; samples (all idle) only in the first.
    let allocations = [allocation("a", 0, 7200, 1.0)];
    let mut t = timeline(&allocations, 1.0);
    t.existence = vec![Span::new(0, 2 * HOUR)];
    t.prices = vec![PriceSegment {
        span: Span::new(0, 2 * HOUR),
        price_per_hour: 1.0,
    }];
    t.samples = samples(0, 3600, 0.0, 100.0).collect();
    let rows = gpu_hours(&t, &ClassifyConfig::default(), owner);
    assert_eq!(rows.len(), 2);
    // Hour 1: idle throughout, but the last sample (00:59:30) stands for two minutes, past the hour.
    assert_eq!(
        (
            rows[0].allocated_idle_seconds,
            rows[0].busy_seconds,
            rows[0].sm_active
        ),
        (3600.0, 0.0, Some(0.0))
    );
    // Hour 2: 90 s still covered by that sample (idle), then no evidence: busy, not idle.
    assert_eq!(
        (rows[1].allocated_idle_seconds, rows[1].busy_seconds),
        (90.0, 3510.0)
    );
    assert_eq!(rows[1].sm_active, Some(0.0));
}

#[test]
fn a_price_change_inside_the_hour_is_honoured() {
    let mut t = timeline(&[], 0.0);
    t.prices = vec![
        PriceSegment {
            span: Span::new(0, 1800 * S),
            price_per_hour: 1.0,
        },
        PriceSegment {
            span: Span::new(1800 * S, HOUR),
            price_per_hour: 3.0,
        },
    ];
    let rows = gpu_hours(&t, &ClassifyConfig::default(), owner);
    // 0.5 h × 1.00 + 0.5 h × 3.00 = 2.00, i.e. an average of 2.00 per hour.
    assert_eq!(rows.len(), 1);
    assert!(close(rows[0].cost.to_f64(), 2.0) && close(rows[0].price_per_hour(), 2.0));
    assert_eq!(rows[0].unexplained_seconds, 3600.0);
}

#[test]
fn only_seconds_the_gpu_existed_are_counted() {
    let allocations = [allocation("a", 0, 3600, 1.0)];
    let mut t = timeline(&allocations, 1.0);
    // Billed for the first half hour only (e.g. the node was launched at 00:30 the day before and
    // released at 00:30): the allocation's second half is outside the GPU's existence.
    t.existence = vec![Span::new(0, 1800 * S)];
    let rows = gpu_hours(&t, &ClassifyConfig::default(), owner);
    assert_eq!(rows.iter().map(GpuHour::seconds).sum::<f64>(), 1800.0);
    assert!(close(rows[0].cost.to_f64(), 0.5));
}

#[test]
fn observed_hours_are_whole_hours() {
    let at = |times: &[i64]| -> Vec<UsageSample> {
        times
            .iter()
            .map(|&ts| UsageSample {
                ts,
                sm_active: None,
                memory_used_share: None,
                power_w: None,
            })
            .collect()
    };
    assert_eq!(
        observed_hours(&at(&[10 * S, 20 * S, HOUR + 5])),
        [Span::new(0, HOUR), Span::new(HOUR, 2 * HOUR)]
    );
    // A gap of hours is skipped; a reading on an hour's first microsecond opens that hour, on
    // its last closes the one before; times before the epoch floor down.
    assert_eq!(
        observed_hours(&at(&[-1, HOUR - 1, HOUR, 5 * HOUR - 1, 5 * HOUR - 1])),
        [
            Span::new(-HOUR, 0),
            Span::new(0, HOUR),
            Span::new(HOUR, 2 * HOUR),
            Span::new(4 * HOUR, 5 * HOUR),
        ]
    );
    assert_eq!(observed_hours(&[]), []);
}

#[test]
fn a_reading_ends_its_time_only_where_no_later_one_takes_over() {
    let at = |seconds: &[i64]| -> Vec<UsageSample> {
        seconds
            .iter()
            .map(|&t| UsageSample {
                ts: t * S,
                sm_active: Some(0.5),
                memory_used_share: None,
                power_w: None,
            })
            .collect()
    };
    let cuts = |seconds: &[i64]| -> Vec<i64> {
        reading_cuts(&at(seconds), 120 * S).map(|t| t / S).collect()
    };
    // 0 and 30 are taken over by the next reading; 30 by 60 only at 60 ≤ 150; 60's reading
    // stands to 180, before 400 comes; 400's to 520, the last.
    assert_eq!(cuts(&[0, 30, 60, 400]), [0, 30, 60, 180, 400, 520]);
    // A next reading exactly when the last one's time ends takes over without a cut of its own.
    assert_eq!(cuts(&[0, 120]), [0, 120, 240]);
    assert_eq!(cuts(&[]), Vec::<i64>::new());
}

#[test]
fn a_pods_readings_stand_for_the_gap_then_the_gpus_do() {
    // The GPU reads busy every 30 s; the pod's own series reads idle at 0 s, 60 s and 600 s
    // only. Its reading of 60 s stands to 180 s, the one of 600 s to 720 s; between and after,
    // the GPU's reading does: idle 180 + 120 = 300 s, busy 420 + 2,880 = 3,300 s.
    let allocations = [allocation("a", 0, 3600, 1.0)];
    let mut t = timeline(&allocations, 3.6);
    t.samples = samples(0, 3600, 0.9, 100.0).collect();
    let idle = |s: i64| UsageSample {
        ts: s * S,
        sm_active: Some(0.0),
        memory_used_share: None,
        power_w: Some(50.0),
    };
    let pod = ("ns".to_string(), allocations[0].pod.clone().unwrap());
    t.pod_samples = Cow::Owned(BTreeMap::from([(pod, vec![idle(0), idle(60), idle(600)])]));
    let rows = gpu_hours(&t, &ClassifyConfig::default(), owner);
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].allocated_idle_seconds, rows[0].busy_seconds),
        (300.0, 3300.0)
    );
    // sm_active time-weighted: 0.9 × 3,300 / 3,600; energy from the GPU's power, 100 W for the hour.
    assert!(close(rows[0].sm_active.unwrap(), 0.825));
    assert!(close(rows[0].energy_wh, 100.0));
    // $3.60 an hour is $0.001 a second: idle $0.30, busy $3.30.
    assert_eq!(
        (rows[0].class_costs.allocated_idle, rows[0].class_costs.busy),
        (Money::from_f64(0.3), Money::from_f64(3.3))
    );
}

#[test]
fn framebuffer_and_power_are_the_gpus_time_weighted_over_each_rows_seconds() {
    // Team a holds half the GPU 0–1,800 s. The GPU reads every 30 s: 0–1,200 s 40 % of the
    // framebuffer at 300 W, then 1,200–2,400 s 70 % at 500 W with no framebuffer fields after
    // 1,800 s. The last reading (2,370 s) stands to 2,490 s (the 120 s gap); then nothing.
    let allocations = [allocation("a", 0, 1800, 0.5)];
    let mut t = timeline(&allocations, 3.6);
    let reading = |s: i64| UsageSample {
        ts: s * S,
        sm_active: Some(0.9),
        memory_used_share: match s {
            ..1200 => Some(0.4),
            1200..1800 => Some(0.7),
            _ => None,
        },
        power_w: Some(if s < 1200 { 300.0 } else { 500.0 }),
    };
    t.samples = (0..2400).step_by(30).map(reading).collect();
    let rows = gpu_hours(&t, &ClassifyConfig::default(), owner);
    // The unallocated row comes first (no owner).
    let [free, team] = &rows[..] else {
        panic!("two rows: {rows:?}")
    };
    assert_eq!(team.owner.as_ref().map(|o| o.team.as_str()), Some("a"));
    assert_eq!(free.owner, None);
    // Team a: half of 0–1,800 s, i.e. 600 s at 40 % / 300 W and 300 s at 70 % / 500 W:
    // memory (0.4 × 600 + 0.7 × 300) / 900 = 0.5, power (300 × 600 + 500 × 300) / 900 = 366.67 W.
    assert!(close(team.memory_used_share.unwrap(), 0.5));
    assert!(close(team.power_w.unwrap(), 1100.0 / 3.0));
    assert!(close(team.energy_wh, 330_000.0 / 3600.0));
    // The free part: the other half of 0–1,800 s, then all of 1,800–2,490 s (690 s at 500 W,
    // none of it with framebuffer fields); 2,490–3,600 s has no reading at all.
    // Memory over its 900 s with fields: 0.5 as the team's. Power over 1,590 s:
    // (300 × 600 + 500 × 300 + 500 × 690) / 1,590 = 424.53 W. Energy 675,000 W·s.
    assert!(close(free.memory_used_share.unwrap(), 0.5));
    assert!(close(free.power_w.unwrap(), 675_000.0 / 1590.0));
    assert!(close(free.energy_wh, 675_000.0 / 3600.0));
    assert!(close(team.seconds() + free.seconds(), 3600.0));
}

#[test]
fn no_reading_leaves_framebuffer_and_power_unknown_not_zero() {
    let allocations = [allocation("a", 0, 3600, 1.0)];
    let rows = gpu_hours(
        &timeline(&allocations, 3.6),
        &ClassifyConfig::default(),
        owner,
    );
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].memory_used_share, rows[0].power_w), (None, None));
    assert_eq!(rows[0].energy_wh, 0.0);
}
