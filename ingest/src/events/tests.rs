use std::collections::{BTreeMap, BTreeSet};

use arrow::array::{Array, AsArray};
use arrow::datatypes::{Float64Type, Int32Type, Int64Type, TimestampMicrosecondType};
use chrono::{SecondsFormat, TimeZone};
use serde_json::json;

use super::*;
use crate::record::{CollectSink, StrictSink};
use crate::testdata::shared_data;

/// `ctx.at` of every test: the "now" of untimestamped and relative inputs.
fn at() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 7, 6, 14, 0, 0).unwrap()
}

fn ctx() -> ParseContext {
    ParseContext::new("test", at())
}

fn run(text: &str, ctx: &ParseContext) -> (Stats, CollectSink) {
    let mut sink = CollectSink::default();
    let stats = parse(&mut text.as_bytes(), ctx, &mut sink).expect("parse");
    (stats, sink)
}

fn run_file(relative: &str, ctx: &ParseContext) -> Option<(Stats, CollectSink)> {
    let path = shared_data(relative)?;
    Some(run(&std::fs::read_to_string(path).unwrap(), ctx))
}

/// One landed row, read back from the Arrow batches the sink received.
#[derive(Debug, Clone, PartialEq, Default)]
struct Row {
    ts: String,
    event: String,
    cluster: Option<String>,
    node: Option<String>,
    namespace: Option<String>,
    workload: Option<String>,
    pod: Option<String>,
    gpus: Option<f64>,
    gpu_indices: Option<Vec<i32>>,
    gpu_uuids: Option<Vec<String>>,
    gpu_model: Option<String>,
    mig_profile: Option<String>,
    gpu_fraction: Option<f64>,
    queue: Option<String>,
    flavor: Option<String>,
    priority: Option<String>,
    reason: Option<String>,
    samples: Option<i64>,
    tokens: Option<i64>,
    team: Option<String>,
    environment: Option<String>,
    workload_type: Option<String>,
    model: Option<String>,
    cost_center: Option<String>,
    source: String,
}

fn rows(sink: &CollectSink) -> Vec<Row> {
    let batch = sink.table(Table::SchedulerEvents);
    assert_eq!(batch.schema(), Table::SchedulerEvents.schema());
    let column = |name: &str| batch.column_by_name(name).unwrap().clone();
    let text = |name: &str, i: usize| {
        let c = column(name);
        c.is_valid(i)
            .then(|| c.as_string::<i32>().value(i).to_string())
    };
    let float = |name: &str, i: usize| {
        let c = column(name);
        c.is_valid(i)
            .then(|| c.as_primitive::<Float64Type>().value(i))
    };
    let int = |name: &str, i: usize| {
        let c = column(name);
        c.is_valid(i)
            .then(|| c.as_primitive::<Int64Type>().value(i))
    };
    (0..batch.num_rows())
        .map(|i| {
            let micros = column("ts")
                .as_primitive::<TimestampMicrosecondType>()
                .value(i);
            let indices = column("gpu_indices");
            let uuids = column("gpu_uuids");
            Row {
                ts: DateTime::from_timestamp_micros(micros)
                    .unwrap()
                    .to_rfc3339_opts(SecondsFormat::Secs, true),
                event: text("event", i).unwrap(),
                cluster: text("cluster", i),
                node: text("node", i),
                namespace: text("namespace", i),
                workload: text("workload", i),
                pod: text("pod", i),
                gpus: float("gpus", i),
                gpu_indices: indices.is_valid(i).then(|| {
                    let list = indices.as_list::<i32>().value(i);
                    list.as_primitive::<Int32Type>().values().to_vec()
                }),
                gpu_uuids: uuids.is_valid(i).then(|| {
                    let list = uuids.as_list::<i32>().value(i);
                    list.as_string::<i32>()
                        .iter()
                        .map(|s| s.unwrap().to_string())
                        .collect()
                }),
                gpu_model: text("gpu_model", i),
                mig_profile: text("mig_profile", i),
                gpu_fraction: float("gpu_fraction", i),
                queue: text("queue", i),
                flavor: text("flavor", i),
                priority: text("priority", i),
                reason: text("reason", i),
                samples: int("samples", i),
                tokens: int("tokens", i),
                team: text("team", i),
                environment: text("environment", i),
                workload_type: text("workload_type", i),
                model: text("model", i),
                cost_center: text("cost_center", i),
                source: text("source", i).unwrap(),
            }
        })
        .collect()
}

fn some(s: &str) -> Option<String> {
    Some(s.to_string())
}

/// Rows of one workload and event kind.
fn find<'r>(rows: &'r [Row], workload: &str, event: &str) -> Vec<&'r Row> {
    rows.iter()
        .filter(|r| r.workload.as_deref() == Some(workload) && r.event == event)
        .collect()
}

fn count_by_event(rows: &[Row]) -> BTreeMap<&str, usize> {
    let mut counts = BTreeMap::new();
    for row in rows {
        *counts.entry(row.event.as_str()).or_default() += 1;
    }
    counts
}

/// GPU-seconds of the start/stop pairs, paired per (cluster, workload, pod, node).
fn gpu_seconds(rows: &[Row]) -> f64 {
    let mut open = BTreeMap::new();
    let mut total = 0.0;
    for row in rows {
        let key = (
            row.cluster.clone(),
            row.workload.clone(),
            row.pod.clone(),
            row.node.clone(),
        );
        let ts = DateTime::parse_from_rfc3339(&row.ts).unwrap();
        match row.event.as_str() {
            "start" => assert!(
                open.insert(key, (ts, row.gpus.unwrap())).is_none(),
                "two starts"
            ),
            "stop" => {
                let (start, gpus) = open.remove(&key).expect("a stop without its start");
                total += gpus * (ts - start).num_seconds() as f64;
            }
            _ => {}
        }
    }
    total
}

// ---------------------------------------------------------------- Slurm, real XDMoD samples

#[test]
fn slurm_accounting_logs() {
    let Some((stats, sink)) = run_file("xdmod-slurm/accounting-logs.log", &ctx()) else {
        return;
    };
    assert_eq!(
        stats,
        Stats {
            format: Some(InputFormat::SlurmSacct),
            records: 4,
            // queued + one start and one stop per node: 32, 3, 4 and 2 nodes.
            events: (1 + 64) + (1 + 6) + (1 + 8) + (1 + 4),
            ..Stats::default()
        }
    );
    let rows = rows(&sink);

    let cancelled = Row {
        ts: "2015-06-26T19:51:25Z".into(),
        event: "queued".into(),
        cluster: some("ub-hpc"),
        namespace: some("dspumpkins"),
        workload: some("4107166"),
        gpus: Some(0.0),
        queue: some("general-compute"),
        priority: some("qos"),
        team: some("dspumpkins"),
        source: "slurm".into(),
        ..Row::default()
    };
    assert_eq!(find(&rows, "4107166", "queued"), [&cancelled]);
    let starts = find(&rows, "4107166", "start");
    let nodes: Vec<_> = starts.iter().map(|r| r.node.clone().unwrap()).collect();
    assert_eq!(nodes, ["k10n26s01", "k13n36s01", "k13n37s01"]);
    assert!(starts.iter().all(|r| r.ts == "2015-06-28T15:14:49Z"));
    let stops = find(&rows, "4107166", "stop");
    assert_eq!(stops.len(), 3);
    assert!(stops.iter().all(|r| r.ts == "2015-07-01T13:17:53Z"
        && r.reason.as_deref() == Some("failed: CANCELLED by 102216")));

    // The GPU job: AllocTRES `gres/gpu=2` over two nodes, an empty Partition, Eligible Unknown.
    let gpu_starts = find(&rows, "5692623", "start");
    let on_nodes: Vec<_> = gpu_starts
        .iter()
        .map(|r| (r.node.clone().unwrap(), r.gpus))
        .collect();
    assert_eq!(
        on_nodes,
        [
            ("cpn-k16-35-01".into(), Some(1.0)),
            ("cpn-k16-37-01".into(), Some(1.0))
        ]
    );
    assert!(
        gpu_starts
            .iter()
            .all(|r| r.queue.is_none() && r.namespace.as_deref() == Some("ccr"))
    );
    let gpu_stops = find(&rows, "5692623", "stop");
    assert!(
        gpu_stops
            .iter()
            .all(|r| r.ts == "2016-08-01T07:04:09Z" && r.reason.as_deref() == Some("finished"))
    );
    assert_eq!(find(&rows, "5692623", "queued")[0].gpus, Some(2.0));

    let timeout = find(&rows, "4103947", "stop");
    assert_eq!(timeout.len(), 32);
    assert!(
        timeout
            .iter()
            .all(|r| r.reason.as_deref() == Some("failed: TIMEOUT"))
    );
    let hosts: BTreeSet<_> = timeout.iter().map(|r| r.node.clone().unwrap()).collect();
    assert!(hosts.contains("d09n04s02") && hosts.contains("d13n16") && hosts.contains("d07n07s02"));
    assert_eq!(hosts.len(), 32);
    assert_eq!(gpu_seconds(&rows), 0.0, "the one GPU job ran for 0 s");
}

#[test]
fn slurm_array_records_stand_for_each_task() {
    let Some((stats, sink)) = run_file("xdmod-slurm/accounting-logs-with-job-arrays.log", &ctx())
    else {
        return;
    };
    // Tasks per record, as XDMoD's own expected output lists them: 1+3+2+4+4+9 = 23, of which
    // 17 are distinct: a task that two records list (4103947_1 in `_[1-3]` and `_[1,5]`) is the
    // same job at the same times, so its events land once and the repeats count as duplicates.
    let (tasks, distinct_tasks) = (23, 17);
    assert_eq!(
        (
            stats.records,
            stats.events,
            stats.rejected,
            stats.duplicates
        ),
        (
            6,
            distinct_tasks * (1 + 2 * 32),
            0,
            (tasks - distinct_tasks) * (1 + 2 * 32)
        )
    );
    let rows = rows(&sink);
    let queued: Vec<_> = rows.iter().filter(|r| r.event == "queued").collect();
    assert_eq!(queued.len(), distinct_tasks as usize);
    let distinct: BTreeSet<_> = queued.iter().map(|r| r.workload.clone().unwrap()).collect();
    let expected: BTreeSet<_> = [
        1, 2, 3, 5, 9, 10, 11, 13, 16, 17, 18, 19, 20, 91, 100, 101, 102,
    ]
    .iter()
    .map(|task| format!("4103947_{task}"))
    .collect();
    assert_eq!(distinct, expected);
    let task_2 = find(&rows, "4103947_2", "start");
    assert_eq!(task_2.len(), 32);
    assert_eq!(task_2[0].ts, "2015-06-28T02:55:50Z");
}

#[test]
fn slurm_running_job_has_no_stop_and_pending_job_only_queues() {
    let Some((stats, sink)) = run_file("xdmod-slurm/non-ended-job-state.log", &ctx()) else {
        return;
    };
    assert_eq!((stats.records, stats.events, stats.rejected), (2, 3, 0));
    let rows = rows(&sink);
    let running: Vec<_> = rows
        .iter()
        .filter(|r| r.workload.as_deref() == Some("3451067"))
        .collect();
    let seen: Vec<_> = running
        .iter()
        .map(|r| (r.event.as_str(), r.ts.as_str(), r.node.as_deref()))
        .collect();
    assert_eq!(
        seen,
        [
            ("queued", "2020-06-24T15:06:34Z", None),
            ("start", "2020-06-30T19:24:08Z", Some("cpn-k07-02-01"))
        ]
    );
    assert_eq!(running[1].cluster.as_deref(), Some("phillips"));
    assert_eq!(running[1].gpus, Some(0.0));
    let pending: Vec<_> = rows
        .iter()
        .filter(|r| r.workload.as_deref() == Some("3483276"))
        .collect();
    assert_eq!(pending.len(), 1);
    assert_eq!(
        (pending[0].event.as_str(), pending[0].ts.as_str()),
        ("queued", "2020-07-01T15:28:17Z")
    );
}

#[test]
fn slurm_unknown_states_are_rejected_with_their_lines() {
    let Some((stats, sink)) = run_file("xdmod-slurm/unknown-job-state.log", &ctx()) else {
        return;
    };
    assert_eq!((stats.records, stats.events, stats.rejected), (2, 0, 2));
    let rejected = sink.rejected_fields();
    assert_eq!(rejected, [(1, "state"), (2, "state")]);
    assert!(
        sink.rejections[0]
            .reason
            .starts_with("unknown Slurm job state 'FOO': expected one of")
    );
    assert!(sink.rejections[1].reason.contains("'BAR'"));
    assert!(
        sink.rejections[1]
            .raw
            .starts_with("3483276|3483276|phillips|")
    );
}

#[test]
fn slurm_utf8_job_name() {
    let Some((stats, sink)) = run_file("xdmod-slurm/utf8-multibyte-chars.log", &ctx()) else {
        return;
    };
    assert_eq!((stats.records, stats.events, stats.rejected), (1, 3, 0));
    let rows = rows(&sink);
    let stop = find(&rows, "4103947", "stop");
    assert_eq!(stop[0].node.as_deref(), Some("d07n07s02"));
    assert_eq!(stop[0].ts, "2015-07-01T02:55:50Z");

    // A rejected line keeps its multi-byte job name intact in the quarantine.
    let path = shared_data("xdmod-slurm/utf8-multibyte-chars.log").unwrap();
    let text = std::fs::read_to_string(path)
        .unwrap()
        .replace("|TIMEOUT|", "|FOO|");
    let (_, sink) = run(&text, &ctx());
    assert!(sink.rejections[0].raw.ends_with("|d07n07s02|aàb"));
}

#[test]
fn slurm_alloc_tres_gpu_counts() {
    let Some(path) = shared_data("xdmod-slurm/alloc-tres-gpu-count.json") else {
        return;
    };
    let table: Vec<(String, u64)> = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    assert_eq!(table.len(), 9);
    for (tres, expected) in table {
        let count = slurm::tres_gpus(&tres).unwrap().map_or(0, |g| g.count);
        assert_eq!(count, expected, "AllocTRES {tres:?}");
    }
    // The typed entry repeats the total only when the type is accounted.
    let typed = slurm::tres_gpus("cpu=4,gres/gpu:a100=1,gres/gpu=1,gres/gpumem=40G")
        .unwrap()
        .unwrap();
    assert_eq!(
        (typed.count, typed.model.as_deref(), typed.mig_profile),
        (1, Some("a100"), None)
    );
    let mig = slurm::tres_gpus("gres/gpu:a100_3g.20gb=2,node=1")
        .unwrap()
        .unwrap();
    assert_eq!(
        (mig.count, mig.model.as_deref(), mig.mig_profile.as_deref()),
        (2, Some("a100"), Some("3g.20gb"))
    );
    assert!(slurm::tres_gpus("gres/gpu=two").is_err());
}

// ---------------------------------------------------------------- Slurm, header, steps, time zones

/// `sacct -p` (trailing `|`) with its header, local times in New York across the spring-forward
/// night of 2024-03-10 (02:00 EST → 03:00 EDT).
const SACCT_WITH_STEPS: &str = "\
JobID|JobName|Cluster|Account|Partition|QOS|Submit|Start|End|State|ReqTRES|AllocTRES|NodeList|
1001|train|hpc1|ml-research|gpu|high|2024-03-10T00:55:00|2024-03-10T01:30:00|2024-03-10T03:30:00|COMPLETED|billing=16,cpu=16,gres/gpu=8,node=2|billing=16,cpu=16,gres/gpu:a100=8,gres/gpu=8,mem=64G,node=2|gpu[07-08]|
1001.batch|batch|hpc1|ml-research|||2024-03-10T01:30:00|2024-03-10T01:30:00|2024-03-10T03:30:00|COMPLETED||cpu=8,gres/gpu:a100=4,gres/gpu=4,mem=32G,node=1|gpu07|
1001.extern|extern|hpc1|ml-research|||2024-03-10T01:30:00|2024-03-10T01:30:00|2024-03-10T03:30:00|COMPLETED||billing=16,cpu=16,gres/gpu=8,node=2|gpu[07-08]|
1001.0|python|hpc1|ml-research|||2024-03-10T01:31:00|2024-03-10T01:31:00|2024-03-10T03:29:00|COMPLETED||cpu=16,gres/gpu=8,node=2|gpu[07-08]|
1002_7|sweep|hpc1|ml-research|gpu|normal|2024-03-10T01:00:00|2024-03-10T01:05:00|Unknown|RUNNING|gres/gpu=1|billing=1,cpu=1,gres/gpu:a100_3g.20gb=1,node=1|gpu09|
1003|oom||ml-research|gpu|normal|2024-03-10T01:00:00|2024-03-10T01:10:00|2024-03-10T01:20:00|OUT_OF_MEMORY|gres/gpu=1|gres/gpu=1,node=1|gpu10|
1004|wait|hpc1|ml-research|gpu|normal|2024-03-10T01:00:00|Unknown|Unknown|PENDING|billing=4,gres/gpu=4,node=1||None assigned|
1005|gap|hpc1|ml-research|gpu|normal|2024-03-10T02:30:00|Unknown|Unknown|PENDING|gres/gpu=1||None assigned|
";

#[test]
fn slurm_header_steps_and_local_time() {
    let ctx = ParseContext {
        tz: chrono_tz::America::New_York,
        cluster: some("slurm-east"),
        ..ctx()
    };
    let (stats, sink) = run(SACCT_WITH_STEPS, &ctx);
    assert_eq!(
        stats,
        Stats {
            format: Some(InputFormat::SlurmSacct),
            records: 8,
            events: (1 + 4) + (1 + 1) + (1 + 2) + 1,
            rejected: 1,
            skipped: 3,
            duplicates: 0,
        }
    );
    let rows = rows(&sink);
    assert_eq!(find(&rows, "1001", "queued")[0].ts, "2024-03-10T05:55:00Z");
    assert_eq!(
        find(&rows, "1001", "queued")[0].gpus,
        Some(8.0),
        "ReqTRES: the GPUs asked"
    );
    let starts = find(&rows, "1001", "start");
    let on_nodes: Vec<_> = starts
        .iter()
        .map(|r| (r.node.as_deref(), r.gpus, r.ts.as_str()))
        .collect();
    assert_eq!(
        on_nodes,
        [
            (Some("gpu07"), Some(4.0), "2024-03-10T06:30:00Z"),
            (Some("gpu08"), Some(4.0), "2024-03-10T06:30:00Z")
        ]
    );
    assert!(
        starts.iter().all(
            |r| r.gpu_model.as_deref() == Some("a100") && r.priority.as_deref() == Some("high")
        )
    );
    // 03:30 EDT is one hour after 01:30 EST.
    assert!(
        find(&rows, "1001", "stop")
            .iter()
            .all(|r| r.ts == "2024-03-10T07:30:00Z")
    );

    let running = find(&rows, "1002_7", "start");
    assert_eq!(running[0].mig_profile.as_deref(), Some("3g.20gb"));
    assert!(find(&rows, "1002_7", "stop").is_empty());

    let oom = find(&rows, "1003", "stop");
    assert_eq!(oom[0].reason.as_deref(), Some("failed: OUT_OF_MEMORY"));
    assert_eq!(
        oom[0].cluster.as_deref(),
        Some("slurm-east"),
        "no Cluster value: the context's"
    );
    assert_eq!(find(&rows, "1004", "queued")[0].gpus, Some(4.0));
    assert!(find(&rows, "1004", "start").is_empty());

    // 2 nodes × 4 GPUs × 1 h, and 1 GPU × 10 min; the running job is still open.
    let closed: Vec<_> = rows
        .iter()
        .filter(|r| r.workload.as_deref() != Some("1002_7"))
        .cloned()
        .collect();
    assert_eq!(gpu_seconds(&closed), 8.0 * 3600.0 + 600.0);

    let gap = &sink.rejections[0];
    assert_eq!((gap.line, gap.field.as_str()), (9, "Submit"));
    assert!(
        gap.reason
            .contains("does not exist in time zone America/New_York"),
        "{}",
        gap.reason
    );
}

#[test]
fn hostlists_and_array_ranges_expand() {
    let hosts = slurm::expand_hostlist("gpu[01-03,10],cpu7,rack[1-2]n[8-9]").unwrap();
    assert_eq!(
        hosts,
        [
            "gpu01", "gpu02", "gpu03", "gpu10", "cpu7", "rack1n8", "rack1n9", "rack2n8", "rack2n9"
        ]
    );
    assert!(slurm::expand_hostlist("gpu[01-").is_none());
    assert!(slurm::expand_hostlist("gpu[3-1]").is_none());
    assert!(
        slurm::array_tasks("9_[1-999999999]").is_none(),
        "more tasks than Slurm allows"
    );
    let tasks = slurm::array_tasks("77_[1-5:2,9%2]").unwrap();
    assert_eq!(tasks, ["77_1", "77_3", "77_5", "77_9"]);
}

/// Ranges and hostlists a hostile or mistyped line can hold: each is refused, or expanded
/// within the cap, without overflow, stack exhaustion or a product past the cap (found by
/// review of the fuzzer's class: arithmetic and recursion sized by input).
#[test]
fn hostile_ranges_and_hostlists_are_refused_within_bounds() {
    // A u64's whole range: its count does not fit in 64 bits.
    assert!(slurm::array_tasks("1_[0-18446744073709551615]").is_none());
    assert!(slurm::expand_hostlist("n[0-18446744073709551615]").is_none());
    // Zero padding past a u64's 20 digits is no host name (and past u16::MAX no format width).
    assert!(slurm::array_tasks(&format!("1_[{}1]", "0".repeat(65_536))).is_none());
    assert_eq!(
        slurm::array_tasks(&format!("1_[{}1]", "0".repeat(19))).unwrap(),
        [format!("1_{}1", "0".repeat(19))]
    );
    // Each group is under the cap; the product of the groups is not.
    assert!(slurm::expand_hostlist("n[1-2001]x[1-2000]").is_none());
    assert!(slurm::expand_hostlist("n[1-2000]x[1-2000]y[1-2000]").is_none());
    assert!(slurm::expand_hostlist("a[1-2000000],b[1-2000002]").is_none());
    // Few ids of many bytes: a kilobyte of name times 400,000 hosts or tasks is 400 MB, past
    // the 256 MiB an expansion may hold.
    let long = "n".repeat(1000);
    assert!(slurm::expand_hostlist(&format!("{long}[1-400000]")).is_none());
    assert!(slurm::expand_hostlist(&format!("[1-400000]{long}")).is_none());
    assert!(slurm::array_tasks(&format!("9{long}_[1-400000]")).is_none());
    assert_eq!(
        slurm::expand_hostlist(&format!("{long}[1-2]")).unwrap(),
        [format!("{long}1"), format!("{long}2")]
    );
    // 100,000 bracket groups in one pattern: expanded in a loop, not one call per group.
    let deep = slurm::expand_hostlist(&format!("n{}", "[7]".repeat(100_000))).unwrap();
    assert_eq!(deep, [format!("n{}", "7".repeat(100_000))]);
    // Typed GPU counts saturate rather than overflow; the count is then no real one.
    let tres = slurm::tres_gpus("gres/gpu:a=18446744073709551615,gres/gpu:b=2").unwrap();
    assert_eq!(tres.unwrap().count, u64::MAX);

    let sacct = "JobID|State|Start|End|NodeList|AllocTRES
6001_[1-4000]|RUNNING|2026-07-06T10:00:00|Unknown|n[1-2000]|gres/gpu=8
6002|RUNNING|2026-07-06T10:00:00|Unknown|n1|gres/gpu:a=18446744073709551615,gres/gpu:b=2
6003|RUNNING|2026-07-06T10:00:00|Unknown|n[1-2]|gres/gpu=8
";
    let (stats, sink) = run(sacct, &ctx());
    assert_eq!((stats.records, stats.events, stats.rejected), (3, 2, 2));
    assert_eq!(
        sink.rejected(),
        [
            (
                2,
                "NodeList",
                "4000 tasks on 2000 nodes stand for 8000000 events, more than a line may \
                 (4000001 events, 256 MiB)"
            ),
            (
                3,
                "gpus",
                "1.8446744073709552e19 is not a whole number of GPUs from 0 to 1000000"
            ),
        ]
    );
    // 6003's 8 GPUs are shared evenly by its two nodes.
    let gpus: Vec<_> = rows(&sink).iter().map(|r| r.gpus).collect();
    assert_eq!(gpus, [Some(4.0), Some(4.0)]);

    // A pending array's tasks each queue: 50,000 land; 2,000,000 queued events of a few
    // hundred bytes each are more than a line's events may hold, refused at its JobID.
    let pending = "JobID|State|Submit|Start|End
7001_[1-50000]|PENDING|2026-07-06T09:00:00|Unknown|Unknown
7002_[1-2000000]|PENDING|2026-07-06T09:00:00|Unknown|Unknown
";
    let (stats, sink) = run(pending, &ctx());
    assert_eq!(
        (stats.records, stats.events, stats.rejected),
        (2, 50_000, 1)
    );
    assert_eq!(
        sink.rejected(),
        [(
            3,
            "JobID",
            "2000000 tasks on 0 nodes stand for 2000000 events, more than a line may (4000001 \
             events, 256 MiB)"
        )]
    );
}

// ---------------------------------------------------------------- kubectl get events

#[test]
fn kueue_events_table_from_conformance_evidence() {
    let Some((stats, sink)) = run_file(
        "cncf-k8s-ai-conformance/kueue-events-vks-team-a.txt",
        &ctx(),
    ) else {
        return;
    };
    // 3 QuotaReserved, 3 Resumed and 3 Completed repeat other rows.
    assert_eq!(
        stats,
        Stats {
            format: Some(InputFormat::KubectlEvents),
            records: 20,
            events: 11,
            skipped: 9,
            ..Stats::default()
        }
    );
    let rows = rows(&sink);
    assert_eq!(
        count_by_event(&rows),
        BTreeMap::from([("admitted", 3), ("queued", 2), ("start", 3), ("stop", 3)])
    );
    // The saved table has no LAST SEEN column: every event is stamped ctx.at.
    assert!(
        rows.iter()
            .all(|r| r.ts == "2026-07-06T14:00:00Z" && r.source == "kueue")
    );
    // Workload objects are named after their Job, as Pods name it.
    let queued = find(&rows, "sample-job-team-a-sqtjs", "queued");
    assert_eq!(
        queued[0].reason.as_deref(),
        Some(
            "couldn't assign flavors to pod set main: insufficient unused quota for \
             nvidia.com/gpu in flavor default-flavor, 1 more needed"
        )
    );
    let admitted: BTreeSet<_> = rows
        .iter()
        .filter(|r| r.event == "admitted")
        .map(|r| r.workload.clone().unwrap())
        .collect();
    assert_eq!(
        admitted,
        BTreeSet::from(
            [
                "sample-job-team-a-mbd4h",
                "sample-job-team-a-nptv9",
                "sample-job-team-a-sqtjs"
            ]
            .map(String::from)
        )
    );
    let stop = find(&rows, "sample-job-team-a-mbd4h", "stop");
    assert_eq!(stop[0].reason.as_deref(), Some("finished"));
}

#[test]
fn kubectl_events_ages_give_event_times() {
    let table = "\
NAMESPACE   LAST SEEN          TYPE      REASON          OBJECT                                MESSAGE
team-a      3m5s               Warning   Pending         workload/job-train-llm-7xk2p-4fbeb    couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor a100, 4 more needed
team-a      2m10s              Normal    QuotaReserved   workload/job-train-llm-7xk2p-4fbeb    Quota reserved in ClusterQueue gpu-cq, wait time since queued was 55s
team-a      2m10s              Normal    Admitted        workload/job-train-llm-7xk2p-4fbeb    Admitted by ClusterQueue gpu-cq, wait time since reservation was 0s
team-a      2m9s               Normal    Started         job/train-llm-7xk2p                   Admitted by clusterQueue gpu-cq
team-a      2m                 Normal    Pulled          pod/train-llm-7xk2p-0-x7p2d           Container image \"trainer:1.4\" already present on machine
team-a      45s                Normal    Preempted       workload/job-train-llm-7xk2p-4fbeb    Preempted to accommodate a workload (UID: 5d1f) due to prioritization in the ClusterQueue
team-a      45s                Normal    Stopped         job/train-llm-7xk2p                   Preempted to accommodate a workload (UID: 5d1f) due to prioritization in the ClusterQueue
team-b      10m (x3 over 12m)  Warning   Pending         workload/job-eval-9q8w7-0a1b2         couldn't assign flavors to pod set main
team-b      <unknown>          Normal    Admitted        workload/job-eval-9q8w7-0a1b2         Admitted by ClusterQueue gpu-cq
";
    let (stats, sink) = run(table, &ctx());
    assert_eq!(
        (stats.records, stats.events, stats.skipped, stats.rejected),
        (9, 6, 2, 1)
    );
    let rows = rows(&sink);
    let train: Vec<_> = rows
        .iter()
        .filter(|r| r.workload.as_deref() == Some("train-llm-7xk2p"))
        .map(|r| (r.event.as_str(), r.ts.as_str()))
        .collect();
    assert_eq!(
        train,
        [
            ("queued", "2026-07-06T13:56:55Z"),
            ("admitted", "2026-07-06T13:57:50Z"),
            ("start", "2026-07-06T13:57:51Z"),
            ("preempted", "2026-07-06T13:59:15Z"),
            ("stop", "2026-07-06T13:59:15Z"),
        ]
    );
    let stop = find(&rows, "train-llm-7xk2p", "stop");
    assert_eq!(
        stop[0].reason.as_deref(),
        Some(
            "preempted: Preempted to accommodate a workload (UID: 5d1f) due to prioritization in the ClusterQueue"
        )
    );
    assert_eq!(stop[0].namespace.as_deref(), Some("team-a"));
    assert_eq!(
        find(&rows, "eval-9q8w7", "queued")[0].ts,
        "2026-07-06T13:50:00Z"
    );
    let unknown = &sink.rejections[0];
    assert_eq!((unknown.line, unknown.field.as_str()), (10, "LAST SEEN"));
}

#[test]
fn pod_container_events_are_not_allocations() {
    let Some((stats, sink)) = run_file(
        "nvidia-cloud-native-docs/time-slicing-get-events.txt",
        &ctx(),
    ) else {
        return;
    };
    assert_eq!(
        stats,
        Stats {
            format: Some(InputFormat::KubectlEvents),
            records: 24,
            skipped: 24,
            ..Stats::default()
        }
    );
    assert!(sink.batches.is_empty());
}

#[test]
fn kubectl_events_wide_output_is_refused() {
    let table = "LAST SEEN   TYPE     REASON    OBJECT     SUBOBJECT   SOURCE   MESSAGE   FIRST SEEN   COUNT   NAME\n";
    let error = parse(&mut table.as_bytes(), &ctx(), &mut CollectSink::default()).unwrap_err();
    assert!(matches!(error, IngestError::Format { .. }));
    assert!(error.to_string().contains("-o wide"), "{error}");
}

// ---------------------------------------------------------------- canonical JSON lines

#[test]
fn canonical_lines() {
    let lines = r#"{"ts":"2025-03-02T10:00:00Z","event":"start","cluster":"gke-prod","node":"gpu-node-1","namespace":"inference","workload":"llama-serve","pod":"llama-serve-0","gpus":1,"gpu_model":"NVIDIA H100 80GB HBM3","mig_profile":"1g.10gb","gpu_uuids":["MIG-7089d0f3-293f-58c9-8f8c-5ea66eabdc4d"],"queue":"lq-inference","priority":"high","labels":{"team":"search","environment":"prod","workload_type":"inference","model":"llama-3-8b","cost_center":"cc-42","owner":"ignored"}}
{"ts":"2025-03-02T10:00:00Z","event":"start","node":"gpu-node-2","workload":"notebook-7","pod":"nb-7","gpus":1,"gpu_fraction":0.25,"gpu_indices":[3],"priority":100}

{"ts":"2025-03-02T11:30:00+01:00","event":"stop","workload":"train-42","pod":"train-42-0","reason":"PREEMPTED"}
{"ts":"2025-03-02T10:00:00Z","event":"started","workload":"x"}
{"ts":"2025-03-02T12:00:00Z","event":"stop","workload":"llama-serve","pod":"llama-serve-0","reason":"Failed: CUDA error 719"}
{"ts":"2025-03-02T12:00:00Z","event":"checkpoint","workload":"train-42","samples":1200000,"tokens":2400000000}
{"ts":"2025-03-02T12:00:00Z","event":"start","gpu_fraction":1.5}
not json
{"event":"stop","workload":"x"}
"#;
    let ctx = ParseContext {
        cluster: some("default-cluster"),
        ..ctx()
    };
    let (stats, sink) = run(lines, &ctx);
    assert_eq!(
        stats,
        Stats {
            format: Some(InputFormat::CanonicalJson),
            records: 9,
            events: 5,
            rejected: 4,
            ..Stats::default()
        }
    );
    let rows = rows(&sink);
    let mig = Row {
        ts: "2025-03-02T10:00:00Z".into(),
        event: "start".into(),
        cluster: some("gke-prod"),
        node: some("gpu-node-1"),
        namespace: some("inference"),
        workload: some("llama-serve"),
        pod: some("llama-serve-0"),
        gpus: Some(1.0),
        gpu_uuids: Some(vec!["MIG-7089d0f3-293f-58c9-8f8c-5ea66eabdc4d".into()]),
        gpu_model: some("NVIDIA H100 80GB HBM3"),
        mig_profile: some("1g.10gb"),
        queue: some("lq-inference"),
        priority: some("high"),
        team: some("search"),
        environment: some("prod"),
        workload_type: some("inference"),
        model: some("llama-3-8b"),
        cost_center: some("cc-42"),
        source: "canonical".into(),
        ..Row::default()
    };
    assert_eq!(rows[0], mig);
    let fractional = &rows[1];
    assert_eq!(
        (
            fractional.gpu_fraction,
            fractional.gpu_indices.clone(),
            fractional.cluster.as_deref(),
            fractional.priority.as_deref()
        ),
        (
            Some(0.25),
            Some(vec![3]),
            Some("default-cluster"),
            Some("100")
        )
    );
    assert_eq!(
        (rows[2].ts.as_str(), rows[2].reason.as_deref()),
        ("2025-03-02T10:30:00Z", Some("preempted"))
    );
    assert_eq!(rows[3].reason.as_deref(), Some("failed: CUDA error 719"));
    assert_eq!(
        (rows[4].samples, rows[4].tokens),
        (Some(1_200_000), Some(2_400_000_000))
    );

    let rejected = sink.rejected_fields();
    assert_eq!(
        rejected,
        [(5, "event"), (8, "gpu_fraction"), (9, "json"), (10, "ts")]
    );
    assert_eq!(
        sink.rejections[0].reason,
        "unknown event 'started': expected one of start, stop, checkpoint, progress, queued, \
         admitted, rejected, preempted, evicted, node_up, node_down"
    );
}

// ---------------------------------------------------------------- Kubernetes Pods

fn pod(name: &str, phase: &str, resources: Value, status: Value) -> Value {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": "5f0c1a9e-3b7d-4c1e-9a53-0c2d7e8f9a10",
            "creationTimestamp": "2025-05-01T09:59:50Z",
        },
        "spec": {
            "nodeName": "gpu-node-3",
            "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.04-py3", "resources": resources}],
        },
        "status": status,
    });
    pod["status"]["phase"] = json!(phase);
    pod
}

/// A finished Job pod as `kubectl get pod -o json` shows it (fields that matter, and a few that do not).
fn completed_training_pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "train-llm-7xk2p-0-x7p2d",
            "generateName": "train-llm-7xk2p-0-",
            "namespace": "team-a",
            "uid": "0b7f6a52-8d1e-4c4f-a0d9-2f1e3c4b5a69",
            "creationTimestamp": "2025-05-01T09:59:50Z",
            "labels": {
                "batch.kubernetes.io/job-name": "train-llm-7xk2p",
                "kueue.x-k8s.io/queue-name": "lq-team-a",
                "team": "search",
                "environment": "prod",
                "workload-type": "training",
                "cost-center": "cc-42",
            },
            "annotations": {"kueue.x-k8s.io/workload": "job-train-llm-7xk2p-4fbeb"},
            "ownerReferences": [{
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": "train-llm-7xk2p",
                "uid": "9a1c7e3d-6b2f-4d8a-b5e4-1f0a2c3d4e5f",
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": {
            "nodeName": "gpu-node-3",
            "priorityClassName": "high",
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
            "initContainers": [{"name": "warmup", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            "containers": [
                {
                    "name": "trainer",
                    "image": "registry.example.com/trainer:1.4",
                    "resources": {
                        "limits": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2"},
                        "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2"},
                    },
                },
                {"name": "log-shipper", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}},
            ],
            "restartPolicy": "Never",
        },
        "status": {
            "phase": "Succeeded",
            "startTime": "2025-05-01T10:00:00Z",
            "conditions": [
                {"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": "2025-05-01T12:00:02Z"},
            ],
            "containerStatuses": [
                {"name": "trainer", "restartCount": 0, "state": {"terminated": {
                    "exitCode": 0, "reason": "Completed",
                    "startedAt": "2025-05-01T10:00:41Z", "finishedAt": "2025-05-01T12:00:00Z"}}},
                {"name": "log-shipper", "restartCount": 0, "state": {"terminated": {
                    "exitCode": 0, "reason": "Completed",
                    "startedAt": "2025-05-01T10:00:40Z", "finishedAt": "2025-05-01T12:00:02Z"}}},
            ],
        },
    })
}

fn terminated(reason: &str, exit_code: i32, finished_at: &str) -> Value {
    json!([{"name": "main", "state": {"terminated": {
        "exitCode": exit_code, "reason": reason,
        "startedAt": "2025-05-01T10:05:10Z", "finishedAt": finished_at}}}])
}

#[test]
fn kubernetes_pod_list() {
    let one_gpu = json!({"limits": {"nvidia.com/gpu": 1}});
    let evicted = pod(
        "batch-infer-2",
        "Failed",
        one_gpu.clone(),
        json!({"reason": "Evicted", "message": "The node was low on resource: memory.",
               "startTime": "2025-05-01T10:05:00Z",
               "containerStatuses": terminated("ContainerStatusUnknown", 137, "2025-05-01T10:35:00Z")}),
    );
    let mut mig = pod(
        "vllm-6f7c9d8b4-q2w3e",
        "Running",
        json!({"limits": {"nvidia.com/mig-1g.10gb": "1"}}),
        json!({"startTime": "2025-05-01T10:10:00Z",
               "containerStatuses": [{"name": "main", "state": {"running": {"startedAt": "2025-05-01T10:11:30Z"}}}]}),
    );
    mig["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "vllm-6f7c9d8b4", "controller": true}]);
    let oom = pod(
        "finetune-5",
        "Failed",
        one_gpu.clone(),
        json!({"startTime": "2025-05-01T10:05:00Z", "containerStatuses": terminated("OOMKilled", 137, "2025-05-01T10:45:00Z")}),
    );
    let preempted = pod(
        "low-prio-1",
        "Failed",
        one_gpu.clone(),
        json!({"startTime": "2025-05-01T10:05:00Z",
               "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                               "lastTransitionTime": "2025-05-01T10:20:00Z"}],
               "containerStatuses": terminated("Error", 143, "2025-05-01T10:20:30Z")}),
    );
    let pending = pod("waiting-1", "Pending", one_gpu, json!({}));
    let two_kinds = pod(
        "greedy-1",
        "Running",
        json!({"limits": {"nvidia.com/gpu": "1", "nvidia.com/mig-3g.40gb": "1"}}),
        json!({"startTime": "2025-05-01T10:05:00Z"}),
    );
    let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "vllm"}});
    let list = json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": [completed_training_pod(), evicted, mig, oom, preempted, pending, two_kinds, service],
        "metadata": {"resourceVersion": ""},
    });
    let text = format!("\n{}\n", serde_json::to_string_pretty(&list).unwrap());
    let (stats, sink) = run(&text, &ctx());
    assert_eq!(
        stats,
        Stats {
            format: Some(InputFormat::KubernetesObjects),
            records: 8,
            events: 2 + 2 + 1 + 2 + 2,
            rejected: 1,
            skipped: 2,
            duplicates: 0,
        }
    );
    let rows = rows(&sink);
    let start = Row {
        ts: "2025-05-01T10:00:00Z".into(),
        event: "start".into(),
        node: some("gpu-node-3"),
        namespace: some("team-a"),
        workload: some("train-llm-7xk2p"),
        pod: some("train-llm-7xk2p-0-x7p2d"),
        gpus: Some(2.0),
        gpu_model: some("NVIDIA-A100-SXM4-80GB"),
        queue: some("lq-team-a"),
        priority: some("high"),
        team: some("search"),
        environment: some("prod"),
        workload_type: some("training"),
        cost_center: some("cc-42"),
        source: "kubernetes".into(),
        ..Row::default()
    };
    assert_eq!(rows[0], start);
    let stop = Row {
        ts: "2025-05-01T12:00:02Z".into(),
        event: "stop".into(),
        reason: some("finished"),
        ..start
    };
    assert_eq!(rows[1], stop);

    let ends: Vec<_> = rows
        .iter()
        .filter(|r| r.event == "stop")
        .map(|r| {
            (
                r.pod.as_deref().unwrap(),
                r.ts.as_str(),
                r.reason.as_deref().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ends,
        [
            (
                "train-llm-7xk2p-0-x7p2d",
                "2025-05-01T12:00:02Z",
                "finished"
            ),
            ("batch-infer-2", "2025-05-01T10:35:00Z", "evicted"),
            ("finetune-5", "2025-05-01T10:45:00Z", "failed: OOMKilled"),
            ("low-prio-1", "2025-05-01T10:20:30Z", "preempted"),
        ]
    );
    let mig_start = find(&rows, "vllm-6f7c9d8b4", "start");
    assert_eq!(
        (
            mig_start[0].ts.as_str(),
            mig_start[0].gpus,
            mig_start[0].mig_profile.as_deref()
        ),
        ("2025-05-01T10:10:00Z", Some(1.0), Some("1g.10gb"))
    );
    assert_eq!(
        find(&rows, "batch-infer-2", "start")[0].pod.as_deref(),
        Some("batch-infer-2"),
        "no owner: the pod"
    );

    let rejection = &sink.rejections[0];
    assert_eq!(
        (rejection.line, rejection.field.as_str()),
        (2, "items[6].spec.containers")
    );
    assert_eq!(
        rejection.reason,
        "asks for several GPU kinds (nvidia.com/gpu, nvidia.com/mig-3g.40gb); one allocation holds one kind"
    );
    assert!(rejection.raw.contains("greedy-1"));
}

#[test]
fn json_arrays_and_document_streams_are_framed_record_by_record() {
    // A JSON array of canonical events (what `jq -s` writes) lands element by element, each
    // rejection at the line its element starts on.
    let array = r#"[
  {"ts": "2025-03-02T10:00:00Z", "event": "start", "workload": "a", "gpus": 1},
  {"ts": "2025-03-02T11:00:00Z", "event": "stopp", "workload": "a"},
  {"ts": "2025-03-02T12:00:00Z", "event": "stop", "workload": "a"}
]
"#;
    let (stats, sink) = run(array, &ctx());
    assert_eq!(
        (stats.format, stats.records, stats.events, stats.rejected),
        (Some(InputFormat::CanonicalJson), 3, 2, 1)
    );
    assert_eq!(
        (sink.rejections[0].line, sink.rejections[0].field.as_str()),
        (3, "event")
    );

    // In a stream of pretty-printed objects a broken one is rejected at its first line and the
    // objects after it still land (before, the rest of the input was one rejection).
    let pod_a = serde_json::to_string_pretty(&completed_training_pod()).unwrap();
    let broken = "{
  \"kind\": \"Pod\",
  \"apiVersion\": \"v1\",
  \"metadata\": ,
}";
    let text = format!("{pod_a}\n{broken}\n{pod_a}\n");
    let broken_line = pod_a.lines().count() as u64 + 1;
    let (stats, sink) = run(&text, &ctx());
    assert_eq!(
        (
            stats.format,
            stats.records,
            stats.events,
            stats.rejected,
            stats.duplicates
        ),
        (Some(InputFormat::KubernetesObjects), 3, 2, 1, 2)
    );
    assert_eq!(
        (sink.rejections[0].line, sink.rejections[0].field.as_str()),
        (broken_line, "json")
    );
}

#[test]
fn kubernetes_watch_stream_repeats_are_dropped() {
    let mut running = completed_training_pod();
    running["status"] = json!({"phase": "Running", "startTime": "2025-05-01T10:00:00Z"});
    let lines = [running.clone(), running, completed_training_pod()]
        .map(|pod| pod.to_string())
        .join("\n");
    let (stats, sink) = run(&lines, &ctx());
    assert_eq!((stats.records, stats.events, stats.duplicates), (3, 2, 2));
    let events: Vec<_> = rows(&sink).into_iter().map(|r| (r.event, r.ts)).collect();
    assert_eq!(
        events,
        [
            ("start".into(), "2025-05-01T10:00:00Z".into()),
            ("stop".into(), "2025-05-01T12:00:02Z".into())
        ]
    );
}

#[test]
fn pod_stop_without_container_times_uses_its_conditions() {
    let mut evicted = pod(
        "batch-infer-3",
        "Failed",
        json!({"limits": {"nvidia.com/gpu": "1"}}),
        json!({"reason": "Evicted", "startTime": "2025-05-01T10:05:00Z",
               "conditions": [{"type": "Ready", "status": "False", "reason": "PodFailed",
                               "lastTransitionTime": "2025-05-01T10:36:00Z"}]}),
    );
    evicted["metadata"]["labels"] = json!({"team": "search"});
    let not_an_object = json!({"ts": "2025-05-01T10:00:00Z", "event": "start"});
    let (stats, sink) = run(&format!("{evicted}\n{not_an_object}\n"), &ctx());
    assert_eq!((stats.records, stats.events, stats.rejected), (2, 2, 1));
    let rows = rows(&sink);
    assert_eq!(
        (
            rows[1].event.as_str(),
            rows[1].ts.as_str(),
            rows[1].reason.as_deref()
        ),
        ("stop", "2025-05-01T10:36:00Z", Some("evicted"))
    );
    assert_eq!(
        (sink.rejections[0].line, sink.rejections[0].field.as_str()),
        (2, "kind")
    );
}

#[test]
fn strict_mode_stops_at_the_first_rejection() {
    let Some(path) = shared_data("xdmod-slurm/unknown-job-state.log") else {
        return;
    };
    let text = std::fs::read_to_string(path).unwrap();
    let error = parse(&mut text.as_bytes(), &ctx(), &mut StrictSink).unwrap_err();
    assert!(
        matches!(error, IngestError::Strict { line: 1, ref field, .. } if field == "state"),
        "{error}"
    );
}

// ---------------------------------------------------------------- Kueue Workloads

fn workload_admitted_then_finished() -> Value {
    json!({
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": "job-train-llm-7xk2p-4fbeb",
            "namespace": "team-a",
            "creationTimestamp": "2025-05-01T09:58:00Z",
            "labels": {"kueue.x-k8s.io/job-uid": "9a1c7e3d-6b2f-4d8a-b5e4-1f0a2c3d4e5f", "team": "search"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train-llm-7xk2p",
                                 "uid": "9a1c7e3d-6b2f-4d8a-b5e4-1f0a2c3d4e5f", "controller": true}],
        },
        "spec": {
            "queueName": "lq-team-a",
            "priorityClassName": "high",
            "priority": 1000,
            "podSets": [{"name": "main", "count": 4, "template": {"spec": {"containers": [
                {"name": "trainer", "resources": {"requests": {"cpu": "8", "nvidia.com/gpu": "2"}}}]}}}],
        },
        "status": {
            "admission": {
                "clusterQueue": "gpu-cq",
                "podSetAssignments": [{
                    "name": "main",
                    "count": 4,
                    "flavors": {"cpu": "default-flavor", "nvidia.com/gpu": "a100-80gb"},
                    "resourceUsage": {"cpu": "32", "nvidia.com/gpu": "8"},
                }],
            },
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                 "message": "Quota reserved in ClusterQueue gpu-cq", "lastTransitionTime": "2025-05-01T09:59:55Z"},
                {"type": "Admitted", "status": "True", "reason": "Admitted",
                 "message": "The workload is admitted", "lastTransitionTime": "2025-05-01T09:59:55Z"},
                {"type": "PodsReady", "status": "True", "reason": "PodsReady", "lastTransitionTime": "2025-05-01T10:00:42Z"},
                {"type": "Finished", "status": "True", "reason": "Succeeded",
                 "message": "Job finished successfully", "lastTransitionTime": "2025-05-01T12:00:05Z"},
            ],
        },
    })
}

#[test]
fn kueue_workload_admitted_then_finished() {
    let (stats, sink) = run(&workload_admitted_then_finished().to_string(), &ctx());
    assert_eq!(
        (stats.format, stats.records, stats.events),
        (Some(InputFormat::KubernetesObjects), 1, 4)
    );
    let rows = rows(&sink);
    let seen: Vec<_> = rows
        .iter()
        .map(|r| (r.event.as_str(), r.ts.as_str(), r.reason.as_deref()))
        .collect();
    assert_eq!(
        seen,
        [
            ("queued", "2025-05-01T09:58:00Z", None),
            ("admitted", "2025-05-01T09:59:55Z", None),
            ("start", "2025-05-01T09:59:55Z", None),
            ("stop", "2025-05-01T12:00:05Z", Some("finished")),
        ]
    );
    let start = &rows[2];
    assert_eq!(
        (
            start.workload.as_deref(),
            start.namespace.as_deref(),
            start.gpus,
            start.flavor.as_deref()
        ),
        (
            Some("train-llm-7xk2p"),
            Some("team-a"),
            Some(8.0),
            Some("a100-80gb")
        )
    );
    assert_eq!(
        (
            start.queue.as_deref(),
            start.priority.as_deref(),
            start.team.as_deref(),
            start.source.as_str()
        ),
        (Some("lq-team-a"), Some("high"), Some("search"), "kueue")
    );
    assert_eq!(gpu_seconds(&rows), 8.0 * (2.0 * 3600.0 + 10.0));
}

#[test]
fn kueue_workload_evictions() {
    // v1beta2, preempted and no longer admitted: when it was admitted is lost, so no interval.
    let preempted = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "job-sweep-abc12-0f3e1", "namespace": "team-b", "creationTimestamp": "2025-05-01T09:00:00Z"},
        "spec": {"queueName": "lq-team-b", "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "low"},
                 "podSets": [{"name": "main", "count": 2, "template": {"spec": {"containers": [
                     {"name": "w", "resources": {"limits": {"nvidia.com/mig-3g.40gb": "1"}}}]}}}]},
        "status": {"conditions": [
            {"type": "Admitted", "status": "False", "reason": "NoReservation", "lastTransitionTime": "2025-05-01T10:30:00Z"},
            {"type": "Evicted", "status": "True", "reason": "Preempted", "lastTransitionTime": "2025-05-01T10:30:00Z"},
            {"type": "Preempted", "status": "True", "reason": "InClusterQueue", "lastTransitionTime": "2025-05-01T10:30:00Z"},
        ]},
    });
    // Evicted after PodsReadyTimeout but still showing Admitted (kueue#14811): stops at eviction.
    let mut timed_out = workload_admitted_then_finished();
    timed_out["status"]["conditions"] = json!([
        {"type": "Admitted", "status": "True", "reason": "Admitted", "lastTransitionTime": "2025-05-01T11:00:00Z"},
        {"type": "Evicted", "status": "True", "reason": "PodsReadyTimeout", "lastTransitionTime": "2025-05-01T11:10:00Z"},
    ]);
    let lines = format!("{preempted}\n{timed_out}\n");
    let (stats, sink) = run(&lines, &ctx());
    assert_eq!((stats.records, stats.events, stats.rejected), (2, 2 + 5, 0));
    let rows = rows(&sink);
    let sweep: Vec<_> = find(&rows, "sweep-abc12", "preempted");
    assert_eq!(
        (
            sweep[0].ts.as_str(),
            sweep[0].reason.as_deref(),
            sweep[0].gpus,
            sweep[0].mig_profile.as_deref()
        ),
        (
            "2025-05-01T10:30:00Z",
            Some("InClusterQueue"),
            Some(2.0),
            Some("3g.40gb")
        )
    );
    assert_eq!(sweep[0].priority.as_deref(), Some("low"));
    assert!(find(&rows, "sweep-abc12", "start").is_empty());
    let stop = find(&rows, "train-llm-7xk2p", "stop");
    assert_eq!(
        (stop[0].ts.as_str(), stop[0].reason.as_deref()),
        ("2025-05-01T11:10:00Z", Some("evicted: PodsReadyTimeout"))
    );
    assert_eq!(
        find(&rows, "train-llm-7xk2p", "evicted")[0]
            .reason
            .as_deref(),
        Some("PodsReadyTimeout")
    );
}

// ---------------------------------------------------------------- the whole input

#[test]
fn batches_hold_at_most_batch_rows() {
    let mut ctx = ctx();
    ctx.limits.batch_rows = 4;
    let Some((stats, sink)) = run_file("xdmod-slurm/accounting-logs.log", &ctx) else {
        return;
    };
    assert_eq!(stats.events, 86);
    assert_eq!(sink.batches.len(), 22);
    assert!(
        sink.batches
            .iter()
            .all(|(table, batch)| *table == Table::SchedulerEvents && batch.num_rows() <= 4)
    );
    assert_eq!(sink.rows(Table::SchedulerEvents), 86);
}

#[test]
fn inputs_of_no_known_format_are_refused() {
    for (text, says) in [
        ("hello world\n", "neither JSON"),
        (
            "{\"model\": \"gpt-4o\", \"input_tokens\": 12}\n",
            "neither `event`",
        ),
        ("JobID|State\n1|COMPLETED\n", "no Start column"),
        ("1|2|3\n", "XDMoD's --format"),
    ] {
        let error = parse(&mut text.as_bytes(), &ctx(), &mut CollectSink::default()).unwrap_err();
        assert!(matches!(error, IngestError::Format { .. }), "{text}");
        assert!(error.to_string().contains(says), "{error}");
    }
}

#[test]
fn empty_input_is_no_events() {
    let (stats, sink) = run("\n\n", &ctx());
    assert_eq!(stats, Stats::default());
    assert!(sink.batches.is_empty());
}

// ---------------------------------------------------------------- identity

fn event_ids(sink: &CollectSink) -> Vec<String> {
    let batch = sink.table(Table::SchedulerEvents);
    let ids = batch.column_by_name("event_id").unwrap().as_string::<i32>();
    ids.iter().map(|id| id.unwrap().to_string()).collect()
}

const TRAIN: &str = r#"{"ts":"2026-11-02T00:00:00Z","event":"start","cluster":"demo","node":"n1","namespace":"ml","workload":"train","pod":"train-0","gpus":1,"gpu_indices":[0],"labels":{"team":"vision"}}
{"ts":"2026-11-02T06:00:00Z","event":"stop","cluster":"demo","node":"n1","namespace":"ml","workload":"train","pod":"train-0","reason":"finished"}
"#;

/// The same two events as [`TRAIN`], written by another collector: other key order, spacing,
/// the time with an offset, a label added.
const TRAIN_RESERIALIZED: &str = r#"{ "event": "start", "pod": "train-0", "workload": "train", "namespace": "ml", "node": "n1", "cluster": "demo", "ts": "2026-11-02T01:00:00+01:00", "labels": { "team": "vision", "environment": "prod" }, "gpu_indices": [ 0 ], "gpus": 1 }
{ "reason": "finished", "event": "stop", "ts": "2026-11-02T06:00:00Z", "pod": "train-0", "workload": "train", "namespace": "ml", "node": "n1", "cluster": "demo" }
"#;

#[test]
fn event_ids_name_the_event_not_its_bytes() {
    let (_, first) = run(TRAIN, &ctx());
    let ids = event_ids(&first);
    // sha256('["canonical","demo","n1","ml","train","train-0","start",1793577600000000,null]'),
    // first 16 bytes (Python hashlib); 1793577600000000 µs = 2026-11-02T00:00:00Z.
    assert_eq!(ids[0], "81a4ce692ef8e0dbc8db3dfb777f799e");
    assert_ne!(ids[0], ids[1], "start and stop are two events");
    let (_, again) = run(TRAIN_RESERIALIZED, &ctx());
    assert_eq!(event_ids(&again), ids);

    // One input holding both: the second sighting of each event is dropped, the first kept.
    let (stats, both) = run(&format!("{TRAIN}{TRAIN_RESERIALIZED}"), &ctx());
    assert_eq!((stats.records, stats.events, stats.duplicates), (4, 2, 2));
    assert_eq!(
        rows(&both)[0].environment,
        None,
        "the first delivery's labels"
    );
}

#[test]
fn pod_event_ids_keep_the_uid_and_ignore_the_resource_version() {
    let mut pod = completed_training_pod();
    pod["metadata"]["resourceVersion"] = json!("1001");
    let (_, first) = run(&pod.to_string(), &ctx());
    // A later export: the object was updated since (new resourceVersion), keys pretty-printed.
    pod["metadata"]["resourceVersion"] = json!("1774");
    let (_, later) = run(&serde_json::to_string_pretty(&pod).unwrap(), &ctx());
    assert_eq!(event_ids(&first).len(), 2);
    assert_eq!(event_ids(&later), event_ids(&first));
    // A pod of the same name recreated (another uid) is another object.
    pod["metadata"]["uid"] = json!("7d2e9c41-0a5b-4f3e-8c6d-1b2a3f4e5d6c");
    let (_, recreated) = run(&pod.to_string(), &ctx());
    let (first, recreated) = (event_ids(&first), event_ids(&recreated));
    assert!(first.iter().all(|id| !recreated.contains(id)));
}

#[test]
fn slurm_event_ids_survive_another_column_order() {
    let sacct = "JobID|Account|Start|End|State|AllocTRES|NodeList\n\
                 3001|ml|2026-11-02T08:00:00|2026-11-02T10:00:00|COMPLETED|gres/gpu=2|gpu[01-02]\n";
    // `sacct -p --format` in another order: every line ends with `|`.
    let reordered = "NodeList|State|JobID|End|Start|AllocTRES|Account|\n\
                     gpu[01-02]|COMPLETED|3001|2026-11-02T10:00:00|2026-11-02T08:00:00|gres/gpu=2|ml|\n";
    let (stats, first) = run(sacct, &ctx());
    assert_eq!(stats.events, 4, "a start and a stop on each of two nodes");
    let ids = event_ids(&first);
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), 4);
    let (_, again) = run(reordered, &ctx());
    assert_eq!(event_ids(&again), ids);
}

// ---------------------------------------------------------------- Slurm across DST

/// 2026-10-25 in Europe/Berlin: at 03:00 CEST (01:00Z) clocks go back to 02:00 CET, so local
/// 02:00–02:59 happens twice, first at UTC+2 (00:00–00:59Z), then at UTC+1 (01:00–01:59Z).
const SACCT_FALL_BACK: &str = "JobID|Account|Submit|Start|End|Elapsed|ElapsedRaw|State|AllocTRES|NodeList
2001|ml|2026-10-25T02:05:00|2026-10-25T02:15:00|2026-10-25T02:45:00|01:30:00|5400|COMPLETED|gres/gpu=1|gpu01
2002|ml|2026-10-25T02:20:00|2026-10-25T02:40:00|2026-10-25T02:10:00|00:30:00|1800|COMPLETED|gres/gpu=1|gpu02
";

fn berlin() -> ParseContext {
    ParseContext {
        tz: chrono_tz::Europe::Berlin,
        ..ctx()
    }
}

/// (event, ts) of one job, in input order.
fn job_times(rows: &[Row], job: &str) -> Vec<(String, String)> {
    rows.iter()
        .filter(|r| r.workload.as_deref() == Some(job))
        .map(|r| (r.event.clone(), r.ts.clone()))
        .collect()
}

#[test]
fn slurm_repeated_local_hour_is_resolved_by_elapsed() {
    let (stats, sink) = run(SACCT_FALL_BACK, &berlin());
    assert_eq!(
        (stats.events, stats.rejected),
        (6, 0),
        "{:?}",
        sink.rejections
    );
    let rows = rows(&sink);
    // 02:15 CEST = 00:15Z to 02:45 CET = 01:45Z: 90 minutes, as Elapsed says; Submit 02:05 is
    // read before the start, 00:05Z.
    assert_eq!(
        job_times(&rows, "2001"),
        [
            ("queued".into(), "2026-10-25T00:05:00Z".into()),
            ("start".into(), "2026-10-25T00:15:00Z".into()),
            ("stop".into(), "2026-10-25T01:45:00Z".into()),
        ]
    );
    // 02:40 CEST = 00:40Z to 02:10 CET = 01:10Z: 30 minutes, not "ends before it starts".
    assert_eq!(
        job_times(&rows, "2002"),
        [
            ("queued".into(), "2026-10-25T00:20:00Z".into()),
            ("start".into(), "2026-10-25T00:40:00Z".into()),
            ("stop".into(), "2026-10-25T01:10:00Z".into()),
        ]
    );
    assert_eq!(gpu_seconds(&rows), 5400.0 + 1800.0);

    // Elapsed alone (no ElapsedRaw) settles it the same way.
    let elapsed_only: String = SACCT_FALL_BACK
        .lines()
        .map(|line| {
            let mut fields: Vec<&str> = line.split('|').collect();
            fields.remove(6);
            fields.join("|") + "\n"
        })
        .collect();
    let (_, sink) = run(&elapsed_only, &berlin());
    assert_eq!(gpu_seconds(&self::rows(&sink)), 5400.0 + 1800.0);
}

#[test]
fn slurm_repeated_local_hour_without_elapsed_keeps_consistent_lines() {
    let without: String = SACCT_FALL_BACK
        .lines()
        .map(|line| {
            let mut fields: Vec<&str> = line.split('|').collect();
            fields.drain(5..7);
            fields.join("|") + "\n"
        })
        .collect();
    let (stats, sink) = run(&without, &berlin());
    assert_eq!(stats.rejected, 0);
    let rows = rows(&sink);
    // Nothing tells 2001's readings apart: both first occurrences, 00:15Z–00:45Z.
    assert_eq!(
        job_times(&rows, "2001")[1..],
        [
            ("start".into(), "2026-10-25T00:15:00Z".into()),
            ("stop".into(), "2026-10-25T00:45:00Z".into()),
        ]
    );
    // 2002 has one reading that does not end before it starts.
    assert_eq!(
        job_times(&rows, "2002")[1..],
        [
            ("start".into(), "2026-10-25T00:40:00Z".into()),
            ("stop".into(), "2026-10-25T01:10:00Z".into()),
        ]
    );
}

#[test]
fn slurm_lines_no_reading_makes_consistent_are_rejected() {
    let sacct = "JobID|Start|End|Elapsed|State|AllocTRES
4001|2026-11-02T10:00:00|2026-11-02T12:00:00|01:00:00|COMPLETED|gres/gpu=1
4002|2026-11-02T12:00:00|2026-11-02T10:00:00|02:00:00|COMPLETED|gres/gpu=1
4003|2026-03-29T02:30:00|2026-03-29T04:00:00|01:00:00|COMPLETED|gres/gpu=1
4004|2026-11-02T10:00:00|2026-11-02T12:00:00|two hours|COMPLETED|gres/gpu=1
";
    let (stats, sink) = run(sacct, &berlin());
    // 4001: an Elapsed no reading agrees with (a suspended job) does not reject a line that ends
    // after it starts: 10:00 CET = 09:00Z to 11:00Z.
    assert_eq!(
        job_times(&rows(&sink), "4001"),
        [
            ("start".into(), "2026-11-02T09:00:00Z".into()),
            ("stop".into(), "2026-11-02T11:00:00Z".into()),
        ]
    );
    assert_eq!(stats.rejected, 3);
    let rejected = sink.rejected();
    assert_eq!(
        rejected,
        [
            (
                3,
                "End",
                "the job ends (2026-11-02 09:00:00 UTC) before it starts (2026-11-02 11:00:00 UTC)"
            ),
            // Clocks in Berlin jumped from 02:00 to 03:00 CEST on 2026-03-29.
            (
                4,
                "Start",
                "'2026-03-29T02:30:00' does not exist in time zone Europe/Berlin (clocks jumped \
                 forward): is Europe/Berlin the time zone the input was written in?"
            ),
            (
                5,
                "Elapsed",
                "'two hours' is not a duration (expected seconds or [D-]HH:MM:SS)"
            ),
        ]
    );
}

/// Durations read from input (kubectl's LAST SEEN, sacct's Elapsed) are bounded by the lake's
/// range before any arithmetic on instants: one longer than 1970 to 9999, or one that reaches
/// before 1970, is a rejected line that names its field, not a panic (the fuzzer found
/// `ctx.at - age` overflowing chrono).
#[test]
fn durations_past_the_calendar_are_rejected_lines() {
    let table = "\
NAMESPACE   LAST SEEN          TYPE      REASON     OBJECT                     MESSAGE
team-a      4999999999999m10s  Normal    Admitted   workload/job-train-a-4fbeb Admitted by ClusterQueue gpu-cq
team-a      99999999999999999999999y  Normal  Admitted  workload/job-train-b-4fbeb  Admitted by ClusterQueue gpu-cq
team-a      60y                Normal    Admitted   workload/job-train-c-4fbeb Admitted by ClusterQueue gpu-cq
team-a      1d                 Normal    Admitted   workload/job-train-d-4fbeb Admitted by ClusterQueue gpu-cq
";
    let (stats, sink) = run(table, &ctx());
    assert_eq!((stats.records, stats.events, stats.rejected), (4, 1, 3));
    // ctx's time is 2026-07-06T14:00:00Z.
    let landed: Vec<_> = rows(&sink)
        .into_iter()
        .map(|r| (r.workload.unwrap(), r.ts))
        .collect();
    assert_eq!(
        landed,
        [("train-d".to_string(), "2026-07-05T14:00:00Z".to_string())]
    );
    assert_eq!(
        sink.rejected(),
        [
            (
                2,
                "LAST SEEN",
                "299999999999950 s is longer than 1970-01-01 to 9999-12-31"
            ),
            // Past 64 bits the age saturates, and is refused the same way.
            (
                3,
                "LAST SEEN",
                "18446744073709551615 s is longer than 1970-01-01 to 9999-12-31"
            ),
            // 60 × 365 days before ctx's time is before 1970: a time the lake does not keep.
            (
                4,
                "LAST SEEN",
                "1966-07-21T14:00:00+00:00 is outside 1970-01-01 to 9999-12-31"
            ),
        ]
    );
    // Without a header, a lone token shaped like an age is read as one, and refused the same.
    let headerless = "4999999999999m10s  Normal  Admitted  workload/job-train-a-4fbeb  Admitted\n";
    let (stats, sink) = run(headerless, &ctx());
    assert_eq!((stats.records, stats.events, stats.rejected), (1, 0, 1));
    assert_eq!(sink.rejected_fields(), [(1, "LAST SEEN")]);

    // ElapsedRaw is read before Elapsed when a line has both.
    let raw = "JobID|Start|End|ElapsedRaw|State|AllocTRES
5001|2026-11-02T10:00:00|2026-11-02T12:00:00|9223372036854775807|COMPLETED|gres/gpu=1
5002|2026-11-02T10:00:00|2026-11-02T12:00:00|-7200|COMPLETED|gres/gpu=1
";
    let (stats, sink) = run(raw, &ctx());
    assert_eq!((stats.records, stats.rejected), (2, 1));
    assert_eq!(
        sink.rejected(),
        [(
            2,
            "ElapsedRaw",
            "9223372036854775807 s is longer than 1970-01-01 to 9999-12-31"
        )]
    );
    // A negative ElapsedRaw is no length, as sacct's INVALID: 5002 keeps its Start and End.
    assert_eq!(
        job_times(&rows(&sink), "5002"),
        [
            ("start".into(), "2026-11-02T10:00:00Z".into()),
            ("stop".into(), "2026-11-02T12:00:00Z".into()),
        ]
    );
    let clock = "JobID|Start|End|Elapsed|State|AllocTRES
5003|2026-11-02T10:00:00|2026-11-02T12:00:00|99999999999999999-00:00:00|COMPLETED|gres/gpu=1
5004|2026-11-02T10:00:00|2026-11-02T12:00:00|1-00:-5:00|COMPLETED|gres/gpu=1
";
    let (stats, sink) = run(clock, &ctx());
    assert_eq!((stats.records, stats.rejected), (2, 2));
    assert_eq!(
        sink.rejected(),
        [
            (
                2,
                "Elapsed",
                "18446744073709551615 s is longer than 1970-01-01 to 9999-12-31"
            ),
            (
                3,
                "Elapsed",
                "'1-00:-5:00' is not a duration (expected seconds or [D-]HH:MM:SS)"
            ),
        ]
    );
}

/// A GPU count or a time no scheduler reports is rejected with its field, in every source.
#[test]
fn impossible_gpu_counts_and_times_are_rejected() {
    let text = concat!(
        r#"{"ts":"2026-11-02T00:00:00Z","event":"start","workload":"a","gpus":1e308}"#,
        "\n",
        r#"{"ts":"2026-11-02T00:00:00Z","event":"start","workload":"b","gpus":1.5}"#,
        "\n",
        r#"{"ts":"1969-12-31T23:00:00Z","event":"start","workload":"c","gpus":1}"#,
        "\n",
        r#"{"ts":"2026-11-02T00:00:00Z","event":"start","workload":"d","gpus":8}"#,
        "\n",
    );
    let (stats, sink) = run(text, &ctx());
    let got = sink.rejected();
    assert_eq!(
        got,
        vec![
            (
                1,
                "gpus",
                "1e308 is not a whole number of GPUs from 0 to 1000000"
            ),
            (
                2,
                "gpus",
                "1.5 is not a whole number of GPUs from 0 to 1000000"
            ),
            (
                3,
                "ts",
                "1969-12-31T23:00:00+00:00 is outside 1970-01-01 to 9999-12-31"
            ),
        ]
    );
    assert_eq!((stats.events, stats.rejected), (1, 3));
}
