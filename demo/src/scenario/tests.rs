use std::collections::BTreeSet;

use super::*;

fn spec(gpus: u32, days: u32, seed: u64) -> DemoSpec {
    DemoSpec {
        gpus,
        days,
        seed,
        start: NaiveDate::from_ymd_opt(2026, 11, 1).unwrap(),
        scrape_interval_s: 30,
    }
}

#[test]
fn a_spec_the_generator_cannot_lay_out_names_its_flag() {
    let error = |s: DemoSpec| s.check().unwrap_err().to_string();
    assert_eq!(
        error(spec(12, 2, 1)),
        "--gpus: must be a multiple of 8 and at least 16 (got 12)"
    );
    assert_eq!(
        error(spec(8, 2, 1)),
        "--gpus: must be a multiple of 8 and at least 16 (got 8)"
    );
    assert_eq!(error(spec(16, 0, 1)), "--days: must be 1 to 3660 (got 0)");
    assert_eq!(
        error(spec(16, 4_000_000_000, 1)),
        "--days: must be 1 to 3660 (got 4000000000)"
    );
    assert!(spec(16, 3_660, 1).check().is_ok());
    // 86,400 s is not a whole number of 7 s scrapes.
    let mut odd = spec(16, 1, 1);
    odd.scrape_interval_s = 7;
    assert_eq!(
        error(odd),
        "--scrape-interval: must divide a day into whole scrapes (got 7 s)"
    );
    assert!(spec(16, 1, 1).check().is_ok());
}

#[test]
fn the_default_cluster_is_eight_nodes_of_eight_in_their_groups() {
    let scenario = Scenario::plan(&spec(64, 30, 42));
    let names: Vec<&str> = scenario.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "h100-ondemand-01",
            "h100-ondemand-02",
            "h100-spot-01",
            "h100-mig-01",
            "h100-ondemand-03",
            "a100-ondemand-01",
            "a100-spot-01",
            "a100-onprem-01"
        ]
    );
    assert!(
        scenario
            .nodes
            .iter()
            .all(|n| n.gpus == 8 && n.gpu_uuids.len() == 8)
    );
    let billed: Vec<bool> = scenario
        .nodes
        .iter()
        .map(|n| n.resource_id.is_some())
        .collect();
    assert_eq!(billed, [true, true, true, true, true, true, true, false]);
    // 30 days × 86,400 s / 30 s.
    assert_eq!(scenario.spec.scrapes(), 86_400);
}

#[test]
fn small_clusters_keep_eight_nodes_and_large_ones_add_nodes_of_eight() {
    let small = Scenario::plan(&spec(16, 1, 1));
    assert_eq!(small.nodes.len(), 8);
    assert!(small.nodes.iter().all(|n| n.gpus == 2));
    let large = Scenario::plan(&spec(128, 1, 1));
    assert_eq!(large.nodes.len(), 16);
    assert_eq!(large.nodes[8].name, "h100-ondemand-04");
    assert_eq!(large.nodes[15].name, "a100-onprem-02");
}

#[test]
fn the_same_seed_gives_the_same_plan_and_another_seed_another() {
    assert_eq!(
        Scenario::plan(&spec(16, 3, 7)),
        Scenario::plan(&spec(16, 3, 7))
    );
    assert_ne!(
        Scenario::plan(&spec(16, 3, 7)).runs,
        Scenario::plan(&spec(16, 3, 8)).runs
    );
}

/// Every GPU (or MIG instance) runs one pod at a time, never in a declared reservation or
/// while its node is down.
#[test]
fn runs_never_overlap_each_other_reservations_or_faults() {
    for seed in [1, 2, 3] {
        let scenario = Scenario::plan(&spec(16, 4, seed));
        let window = scenario.window_seconds();
        // (node, GPU, MIG instance) → the spans of its runs.
        type Slot = (usize, u32, Option<usize>);
        let mut by_slot: std::collections::BTreeMap<Slot, Vec<(i64, i64)>> = Default::default();
        for run in &scenario.runs {
            assert!(run.start < run.end, "{run:?}");
            for &gpu in &run.gpus {
                by_slot
                    .entry((run.node, gpu, run.mig))
                    .or_default()
                    .push((run.start, run.end.min(window)));
            }
        }
        for spans in by_slot.values_mut() {
            spans.sort();
            assert!(spans.windows(2).all(|w| w[0].1 <= w[1].0), "{spans:?}");
        }
        for r in &scenario.reservations {
            for run in scenario.runs.iter().filter(|run| run.node == r.node) {
                let shares_gpu = r
                    .gpus
                    .as_ref()
                    .is_none_or(|gpus| run.gpus.iter().any(|g| gpus.contains(g)));
                assert!(
                    !shares_gpu || run.end <= r.from || run.start >= r.to,
                    "{} overlaps {}",
                    run.pod,
                    r.name
                );
            }
        }
        for f in &scenario.faults {
            for run in scenario.runs.iter().filter(|run| run.node == f.node) {
                assert!(
                    run.end <= f.down || run.start >= f.up,
                    "{} during the fault",
                    run.pod
                );
            }
        }
    }
}

#[test]
fn every_reservation_reason_and_every_ending_occurs() {
    let scenario = Scenario::plan(&spec(16, 2, 7));
    let reasons: BTreeSet<&str> = scenario.reservations.iter().map(|r| r.reason).collect();
    assert_eq!(
        reasons,
        BTreeSet::from([
            "gang_wait",
            "ha_redundancy",
            "latency_guarantee",
            "maintenance",
            "release_overlap",
            "warm_pool"
        ])
    );
    assert_eq!(scenario.faults.len(), 1);
    let month = Scenario::plan(&spec(64, 30, 42));
    let count = |pred: &dyn Fn(&Run) -> bool| month.runs.iter().filter(|r| pred(r)).count();
    assert!(count(&|r| r.outcome == Outcome::Preempted) > 5);
    assert!(count(&|r| matches!(r.outcome, Outcome::Failed(_)) && !r.checkpoints.is_empty()) > 5);
    assert!(count(&|r| r.activity == Activity::Stuck) > 0);
    assert!(count(&|r| r.labels.team.is_none()) > 0);
    assert!(count(&|r| r.labels.team.is_some_and(|t| !POLICY_TEAMS.contains(&t))) > 5);
    // A preempted or failed run is resubmitted: the same workload runs again as attempt 1.
    let failed = month
        .runs
        .iter()
        .find(|r| r.outcome == Outcome::Preempted && r.end < month.window_seconds() - DAY)
        .unwrap();
    assert!(
        month
            .runs
            .iter()
            .any(|r| r.workload == failed.workload && r.pod.ends_with("-1"))
    );
}

#[test]
fn traffic_is_lowest_at_three_and_highest_at_fifteen_utc() {
    // 0.525 − 0.475 × cos(0) at 03:00; 0.525 − 0.475 × cos(π) at 15:00; cos(π/2) = 0 at 09:00.
    assert!((daily_load(3 * HOUR) - 0.05).abs() < 1e-12);
    assert!((daily_load(15 * HOUR) - 1.0).abs() < 1e-12);
    assert!((daily_load(DAY + 9 * HOUR) - 0.525).abs() < 1e-12);
}
