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

#[test]
fn scheduler_events_delivered_again_in_other_bytes_land_once() {
    for ledger in ledgers() {
        let dir = ledger.dir.path();
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let first = write(
            "first.jsonl",
            r#"{"ts":"2026-11-02T00:00:00Z","event":"start","cluster":"demo","node":"n1","namespace":"ml","workload":"train","pod":"train-0","gpus":1,"gpu_indices":[0],"labels":{"team":"vision"}}
{"ts":"2026-11-02T06:00:00Z","event":"stop","cluster":"demo","node":"n1","namespace":"ml","workload":"train","pod":"train-0","reason":"finished"}
"#,
        );
        // The same events from another collector: keys reordered, spaces, pretty-printed.
        let again = write(
            "again.json",
            r#"{
  "event": "start", "pod": "train-0", "workload": "train", "namespace": "ml",
  "node": "n1", "cluster": "demo", "ts": "2026-11-02T00:00:00Z",
  "labels": { "team": "vision" }, "gpu_indices": [ 0 ], "gpus": 1
}
{ "reason": "finished", "event": "stop", "ts": "2026-11-02T06:00:00Z", "pod": "train-0",
  "workload": "train", "namespace": "ml", "node": "n1", "cluster": "demo" }
"#,
        );
        // Overlapping: train's stop again, and serve's run, new.
        let overlapping = write(
            "overlapping.jsonl",
            r#"{"ts":"2026-11-02T06:00:00Z","event":"stop","cluster":"demo","node":"n1","namespace":"ml","workload":"train","pod":"train-0","reason":"finished"}
{"ts":"2026-11-02T00:00:00Z","event":"start","cluster":"demo","node":"n1","namespace":"ml","workload":"serve","pod":"serve-0","gpus":1,"gpu_indices":[1]}
{"ts":"2026-11-02T12:00:00Z","event":"stop","cluster":"demo","node":"n1","namespace":"ml","workload":"serve","pod":"serve-0","reason":"finished"}
"#,
        );
        let out = ledger.ingest_ok("events", &first, &[]);
        assert!(out.contains("landed 2 rows into scheduler_events"), "{out}");
        let out = ledger.ingest_ok("events", &again, &[]);
        assert!(
            out.contains("landed no rows") && out.contains("2 events were already in the lake"),
            "{out}"
        );
        let out = ledger.ingest_ok("events", &overlapping, &[]);
        assert!(
            out.contains("landed 2 rows into scheduler_events")
                && out.contains("1 events were already in the lake"),
            "{out}"
        );
        let events = ledger.sql(
            "select workload, event, count(*) as n, count(distinct event_id) as ids \
             from scheduler_events group by 1, 2 order by 1, 2",
        );
        assert_eq!(
            events,
            [
                json!({"workload": "serve", "event": "start", "n": 1, "ids": 1}),
                json!({"workload": "serve", "event": "stop", "n": 1, "ids": 1}),
                json!({"workload": "train", "event": "start", "n": 1, "ids": 1}),
                json!({"workload": "train", "event": "stop", "n": 1, "ids": 1}),
            ],
            "[{}]",
            ledger.backend
        );
    }
}

#[test]
fn slurm_jobs_across_the_autumn_clock_change_keep_their_length() {
    for ledger in ledgers() {
        // Europe/Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET, local 02:xx happens twice.
        let sacct = ledger.dir.path().join("dst.sacct");
        std::fs::write(
            &sacct,
            "JobID|Account|Start|End|Elapsed|ElapsedRaw|State|AllocTRES|NodeList\n\
             2001|ml|2026-10-25T02:15:00|2026-10-25T02:45:00|01:30:00|5400|COMPLETED|gres/gpu=1|gpu01\n\
             2002|ml|2026-10-25T02:40:00|2026-10-25T02:10:00|00:30:00|1800|COMPLETED|gres/gpu=1|gpu02\n",
        )
        .unwrap();
        let out = ledger.ingest_ok("events", &sacct, &["--tz", "Europe/Berlin"]);
        assert!(out.contains("0 rejected"), "{out}");
        let jobs = ledger.sql(
            "select workload, cast(min(ts) as varchar) as start, cast(max(ts) as varchar) as stop, \
             (cast(max(ts) as bigint) - cast(min(ts) as bigint)) / 1000000 as seconds \
             from scheduler_events group by 1 order by 1",
        );
        // 02:15 CEST = 00:15Z to 02:45 CET = 01:45Z; 02:40 CEST = 00:40Z to 02:10 CET = 01:10Z.
        assert_eq!(
            jobs,
            [
                json!({"workload": "2001", "start": "2026-10-25T00:15:00Z",
                       "stop": "2026-10-25T01:45:00Z", "seconds": 5400}),
                json!({"workload": "2002", "start": "2026-10-25T00:40:00Z",
                       "stop": "2026-10-25T01:10:00Z", "seconds": 1800}),
            ],
            "[{}]",
            ledger.backend
        );
    }
}
