//! Scheduler events through the real binary.

use serde_json::json;

use crate::support::{ledgers, shared};

#[test]
fn slurm_accounting_and_kueue_events_land() {
    let (Some(sacct), Some(states), Some(kueue)) = (
        shared("xdmod-slurm/accounting-logs.log"),
        shared("xdmod-slurm/unknown-job-state.log"),
        shared("cncf-k8s-ai-conformance/kueue-events-vks-team-a.txt"),
    ) else {
        return;
    };
    for ledger in ledgers() {
        ledger.ingest_ok("events", &sacct, &["--cluster", "ccr"]);
        assert_eq!(
            ledger.scalar("select count(*) from scheduler_events where source = 'slurm'"),
            86
        );
        // Job 4107166 ran on three nodes: one start and one stop each, cancelled by a user.
        let job = ledger.sql(
            "select event, count(*) as n, min(reason) as reason from scheduler_events \
             where workload = '4107166' and event in ('start', 'stop') group by event order by event",
        );
        assert_eq!(
            job,
            [
                json!({"event": "start", "n": 3, "reason": null}),
                json!({"event": "stop", "n": 3, "reason": "failed: CANCELLED by 102216"})
            ]
        );

        // Bogus states FOO and BAR are quarantined with their line numbers; exit code 1.
        let out = ledger.run(&["ingest", "events", states.to_str().unwrap()]);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            crate::support::describe(&out)
        );
        let rejected = ledger.sql("select line, field from quarantine order by line");
        assert_eq!(
            rejected,
            [
                json!({"line": 1, "field": "state"}),
                json!({"line": 2, "field": "state"})
            ]
        );

        ledger.ingest_ok("events", &kueue, &["--at", "2026-11-02T10:00:00Z"]);
        let kinds = ledger.sql("select event, count(*) as n from scheduler_events where source = 'kueue' group by 1 order by 1");
        assert_eq!(
            kinds,
            [
                json!({"event": "admitted", "n": 3}),
                json!({"event": "queued", "n": 2}),
                json!({"event": "start", "n": 3}),
                json!({"event": "stop", "n": 3})
            ]
        );
    }
}
