use chrono::NaiveDate;
use gpuledger_ingest::{CollectSink, ParseContext, events};

use super::*;
use crate::scenario::DemoSpec;

/// Every event goes through the real canonical parser; a run gives queued, admitted and start
/// (services only start), a checkpoint and a progress per checkpoint (and a last progress when
/// training finishes), and an end unless running;
/// the fault gives node_down and node_up.
#[test]
fn the_events_parse_back_one_for_one() {
    let scenario = Scenario::plan(&DemoSpec {
        gpus: 16,
        days: 2,
        seed: 7,
        start: NaiveDate::from_ymd_opt(2026, 11, 1).unwrap(),
        scrape_interval_s: 30,
    });
    let expected: usize = scenario
        .runs
        .iter()
        .map(|r| {
            let queue = if r.queued.is_some() { 2 } else { 0 };
            let end = usize::from(r.outcome != Outcome::Running);
            let last_progress =
                usize::from(r.outcome == Outcome::Finished && r.samples_per_gpu_second > 0.0);
            queue + 1 + 2 * r.checkpoints.len() + last_progress + end
        })
        .sum::<usize>()
        + 2;
    let text = events_jsonl(&scenario);
    let mut sink = CollectSink::default();
    let ctx = ParseContext::new("events.jsonl", scenario.spec.start_time());
    let stats = events::parse(&mut text.as_slice(), &ctx, &mut sink).unwrap();
    assert_eq!((stats.events as usize, stats.rejected), (expected, 0));
    let preempted = String::from_utf8(text)
        .unwrap()
        .lines()
        .filter(|l| l.contains("\"event\":\"preempted\""))
        .count();
    assert_eq!(
        preempted,
        scenario
            .runs
            .iter()
            .filter(|r| r.outcome == Outcome::Preempted)
            .count()
    );
}
