//! The benchmarks' fleet: 1,000 GPUs (125 nodes × 8 H100) × 7 days from 2026-11-02 (ISO week
//! 2026-W45), telemetry every 15 s (40.3 M samples of SM activity, power and framebuffer), ~4 jobs per GPU per day from 6 teams, a
//! billing line per node per day plus network and storage, warm-pool reservations. Shared by
//! `build/benches/ledger_build.rs`, `query/benches/sql_peers.rs`,
//! `query/benches/compaction.rs` (its `write`) and `report/benches/weekly_report.rs` (`#[path]`), so all measure the same data. Telemetry is written straight to Parquet (the text parser has its own
//! benchmark); billing lands through the real FOCUS ingest path.

#![allow(dead_code)] // each bench uses part of it

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{ArrayRef, Float64Array, Int32Array, StringArray, TimestampMicrosecondArray};
use chrono::NaiveDate;
use gpuledger_build::{Declared, day_span};
use gpuledger_demo::noise::mix;
use gpuledger_lake::catalog::NewBatch;
use gpuledger_lake::tables::{Table, batch_with_columns};
use gpuledger_lake::writer::TableWriter;
use gpuledger_lake::{Lake, LakeConfig};
use gpuledger_ledger::amortize::Strategy;
use gpuledger_ledger::build::{Node, Reservation};
use gpuledger_ledger::journal::{Basis, SharedCostRule};
use gpuledger_ledger::time::{MICROS_PER_DAY, MICROS_PER_HOUR, MICROS_PER_SECOND, Span};

pub const NODES: usize = 125;
pub const GPUS: usize = 8;
pub const DAYS: i64 = 7;
pub const STEP: i64 = 15 * MICROS_PER_SECOND;
/// The four ad-hoc shapes analysts run over `gpu_samples` (`sql_peers`, `api/benches/workers.rs`).
pub const ADHOC_QUERIES: [(&str, &str); 4] = [
    (
        "count and average",
        "SELECT count(*) AS n, avg(sm_active) AS sm FROM gpu_samples",
    ),
    (
        "node × hour: avg, max, exact p95 of power",
        "SELECT node, date_trunc('hour', ts) AS hour, avg(power_w) AS avg_w, max(power_w) AS max_w, \
         percentile_cont(0.95) WITHIN GROUP (ORDER BY power_w) AS p95_w \
         FROM gpu_samples GROUP BY node, date_trunc('hour', ts)",
    ),
    (
        "GPU × day idle GPU-hours",
        "SELECT gpu_uuid, date_trunc('day', ts) AS day, \
         sum(CASE WHEN sm_active < 0.05 THEN 15 ELSE 0 END) / 3600.0 AS idle_gpu_hours \
         FROM gpu_samples GROUP BY gpu_uuid, date_trunc('day', ts)",
    ),
    (
        "one node, one day",
        "SELECT gpu_index, avg(sm_active) AS sm, max(power_w) AS max_w FROM gpu_samples \
         WHERE node = 'dgx-007' AND ts >= TIMESTAMP '2026-11-04T00:00:00Z' \
         AND ts < TIMESTAMP '2026-11-05T00:00:00Z' GROUP BY gpu_index",
    ),
];
pub const TEAMS: [&str; 6] = ["vision", "nlp", "search", "ads", "research", "speech"];

/// How big a fleet [`land_sized`] lands: nodes of 8 GPUs, days from 2026-11-02, and the step of
/// its telemetry.
#[derive(Debug, Clone, Copy)]
pub struct Size {
    pub nodes: usize,
    pub days: i64,
    pub step: i64,
}

/// The fleet every benchmark shares: 1,000 GPUs × 7 days, a sample every 15 s.
pub const WEEK: Size = Size {
    nodes: NODES,
    days: DAYS,
    step: STEP,
};

/// Jobs of one GPU: back-to-back runs of 1–8 h with 0–3 h gaps, each with a team.
pub fn jobs(gpu: usize, window: Span) -> Vec<(Span, &'static str)> {
    let mut jobs = Vec::new();
    let mut t = window.start;
    let mut k = gpu as u64 * 1_000;
    while t < window.end {
        k += 1;
        let gap = (mix(k) % 4) as i64 * MICROS_PER_HOUR;
        let len = (1 + mix(k ^ 7) % 8) as i64 * MICROS_PER_HOUR
            - (mix(k ^ 9) % 3600) as i64 * MICROS_PER_SECOND;
        let start = t + gap;
        jobs.push((
            Span::new(start, (start + len).min(window.end)),
            TEAMS[(mix(k ^ 3) % 6) as usize],
        ));
        t = start + len;
    }
    jobs
}

pub fn node_name(n: usize) -> String {
    format!("dgx-{n:03}")
}

pub async fn write(
    lake: &Lake,
    table: Table,
    batches: Vec<arrow::record_batch::RecordBatch>,
    id: &str,
) {
    let mut writer = TableWriter::new(Arc::clone(lake.store()), id);
    let mut files = Vec::new();
    for batch in &batches {
        files.extend(writer.write(table, batch).await.unwrap());
    }
    let batch = NewBatch {
        batch_id: id.into(),
        source: "bench".into(),
        origin: id.into(),
        content_hash: id.into(),
        idempotency_key: None,
        records_read: 0,
        started_at: 0,
    };
    lake.catalog()
        .commit_batch(&batch, &files, &[])
        .await
        .unwrap();
    gpuledger_lake::retirement::place(lake, &files).await;
}

fn timestamps(values: Vec<i64>) -> ArrayRef {
    Arc::new(TimestampMicrosecondArray::from(values).with_timezone("UTC"))
}

/// Telemetry of `nodes` over `span` every 15 s: SM 0.55–0.95 while a job runs, 0–0.03 otherwise.
pub fn telemetry(
    nodes: std::ops::Range<usize>,
    span: Span,
    all_jobs: &[Vec<(Span, &str)>],
) -> arrow::record_batch::RecordBatch {
    telemetry_every(nodes, span, all_jobs, STEP)
}

/// [`telemetry`] with a sample every `step`.
pub fn telemetry_every(
    nodes: std::ops::Range<usize>,
    span: Span,
    all_jobs: &[Vec<(Span, &str)>],
    step: i64,
) -> arrow::record_batch::RecordBatch {
    let (mut ts, mut node, mut gpu, mut uuid, mut sm, mut power) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut fb_used, mut fb_free) = (vec![], vec![]);
    for n in nodes {
        for g in 0..GPUS {
            let id = n * GPUS + g;
            let mut job = all_jobs[id].iter().peekable();
            let mut t = span.start;
            while t < span.end {
                while job.peek().is_some_and(|(s, _)| s.end <= t) {
                    job.next();
                }
                let busy = job.peek().is_some_and(|(s, _)| s.contains(t));
                let noise = (mix(id as u64 ^ t as u64) % 1000) as f64 / 1000.0;
                ts.push(t);
                node.push(node_name(n));
                gpu.push(g as i32);
                uuid.push(format!("GPU-{id:08x}"));
                sm.push(if busy {
                    0.55 + 0.4 * noise
                } else {
                    0.03 * noise
                });
                power.push(if busy {
                    450.0 + 250.0 * noise
                } else {
                    70.0 + 20.0 * noise
                });
                // MiB of an H100's 81,559, whole numbers as the exporter gives them.
                let used = if busy {
                    (20_000.0 + 60_000.0 * noise).round()
                } else {
                    512.0
                };
                fb_used.push(used);
                fb_free.push(81_559.0 - used);
                t += step;
            }
        }
    }
    let rows = ts.len();
    batch_with_columns(
        Table::GpuSamples,
        vec![
            ("ts", timestamps(ts)),
            ("cluster", Arc::new(StringArray::from(vec!["prod"; rows]))),
            ("node", Arc::new(StringArray::from(node))),
            ("gpu_uuid", Arc::new(StringArray::from(uuid))),
            ("gpu_index", Arc::new(Int32Array::from(gpu))),
            (
                "gpu_model",
                Arc::new(StringArray::from(vec!["NVIDIA H100 80GB HBM3"; rows])),
            ),
            ("sm_active", Arc::new(Float64Array::from(sm))),
            ("power_w", Arc::new(Float64Array::from(power))),
            ("fb_used_mib", Arc::new(Float64Array::from(fb_used))),
            ("fb_free_mib", Arc::new(Float64Array::from(fb_free))),
        ],
    )
    .unwrap()
}

/// The landed fleet: its lake (in a temporary directory, removed on drop), what it declares,
/// and its size.
pub struct Fleet {
    pub lake: Lake,
    pub declared: Declared,
    pub first: NaiveDate,
    pub last: NaiveDate,
    pub week: Span,
    pub all_jobs: Vec<Vec<(Span, &'static str)>>,
    pub samples: usize,
    pub events: usize,
    pub billing_lines: u64,
    _dir: tempfile::TempDir,
}

impl Fleet {
    /// The lake's directory, for other engines to read.
    pub fn data_dir(&self) -> &std::path::Path {
        self._dir.path()
    }
}

/// Lands the fleet's telemetry, scheduler events and billing (the ledger is not built).
pub fn land(runtime: &tokio::runtime::Runtime) -> Fleet {
    land_sized(runtime, WEEK)
}

/// [`land`] for a fleet of another [`Size`].
pub fn land_sized(runtime: &tokio::runtime::Runtime, size: Size) -> Fleet {
    let dir = tempfile::tempdir().unwrap();
    let lake = runtime
        .block_on(Lake::open(&LakeConfig {
            data: dir.path().display().to_string(),
            catalog: None,
        }))
        .unwrap();
    let first = NaiveDate::from_ymd_opt(2026, 11, 2).unwrap();
    let week = Span::new(
        day_span(first).start,
        day_span(first).start + size.days * MICROS_PER_DAY,
    );
    let all_jobs: Vec<Vec<(Span, &str)>> = (0..size.nodes * GPUS).map(|g| jobs(g, week)).collect();

    let setup = Instant::now();
    let mut samples = 0;
    for day in 0..size.days {
        let span = Span::new(
            week.start + day * MICROS_PER_DAY,
            week.start + (day + 1) * MICROS_PER_DAY,
        );
        let batches: Vec<_> = (0..size.nodes)
            .step_by(25)
            .map(|n| telemetry_every(n..(n + 25).min(size.nodes), span, &all_jobs, size.step))
            .collect();
        samples += batches
            .iter()
            .map(arrow::array::RecordBatch::num_rows)
            .sum::<usize>();
        runtime.block_on(write(
            &lake,
            Table::GpuSamples,
            batches,
            &format!("telemetry-{day}"),
        ));
    }
    let (mut ts, mut event, mut node, mut workload, mut pod, mut team, mut indices) =
        (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    for (id, gpu_jobs) in all_jobs.iter().enumerate() {
        for (k, (span, owner)) in gpu_jobs.iter().enumerate() {
            for (t, kind) in [(span.start, "start"), (span.end, "stop")] {
                ts.push(t);
                event.push(kind);
                node.push(node_name(id / GPUS));
                workload.push(format!("job-{id}-{k}"));
                pod.push(format!("job-{id}-{k}-0"));
                team.push(*owner);
                indices.push(Some(vec![Some((id % GPUS) as i32)]));
            }
        }
    }
    let events = ts.len();
    let events_batch = batch_with_columns(
        Table::SchedulerEvents,
        vec![
            ("ts", timestamps(ts)),
            ("event", Arc::new(StringArray::from(event))),
            ("cluster", Arc::new(StringArray::from(vec!["prod"; events]))),
            ("node", Arc::new(StringArray::from(node))),
            ("namespace", Arc::new(StringArray::from(vec!["ml"; events]))),
            ("workload", Arc::new(StringArray::from(workload))),
            ("pod", Arc::new(StringArray::from(pod))),
            ("gpus", Arc::new(Float64Array::from(vec![1.0; events]))),
            (
                "gpu_indices",
                Arc::new(arrow::array::ListArray::from_iter_primitive::<
                    arrow::datatypes::Int32Type,
                    _,
                    _,
                >(indices)),
            ),
            ("team", Arc::new(StringArray::from(team))),
            (
                "source",
                Arc::new(StringArray::from(vec!["canonical"; events])),
            ),
        ],
    )
    .unwrap();
    runtime.block_on(write(
        &lake,
        Table::SchedulerEvents,
        vec![events_batch],
        "events",
    ));
    let billing = billing_csv(week, size);
    let billing_lines = runtime
        .block_on(gpuledger_ingest_focus(&lake, billing))
        .expect("billing lands");
    let declared = Declared {
        nodes: (0..size.nodes)
            .map(|n| Node {
                cluster: "prod".into(),
                node: node_name(n),
                resource_id: Some(format!("i-{n:05}")),
                gpu_count: GPUS as u32,
                gpu_model: "NVIDIA H100 80GB HBM3".into(),
                capacity_type: "on_demand".into(),
                gpu_cost_share: 0.9,
                gpu_replicas: 1,
            })
            .collect(),
        reservations: (0..10)
            .map(|n| Reservation {
                cluster: "prod".into(),
                node: node_name(n),
                gpu_indices: None,
                span: week,
                reason: "warm_pool".into(),
            })
            .collect(),
        rules: vec![SharedCostRule {
            name: "network".into(),
            matches: [("service_category".to_string(), "Networking".to_string())].into(),
            strategy: Strategy::Even,
            basis: Basis::DirectCost,
        }],
        ..Declared::default()
    };
    println!(
        "ledger_build/setup: {samples} samples, {events} events, {billing_lines} billing lines for {} GPUs × {} days in {:.1} s",
        size.nodes * GPUS,
        size.days,
        setup.elapsed().as_secs_f64()
    );

    let last = first + chrono::Days::new(size.days as u64 - 1);
    Fleet {
        lake,
        declared,
        first,
        last,
        week,
        all_jobs,
        samples,
        events,
        billing_lines,
        _dir: dir,
    }
}

/// A FOCUS file for the fleet's days: each node's daily line, networking and storage per day.
fn billing_csv(week: Span, size: Size) -> String {
    let mut csv = String::from(
        "BillingAccountId,BillingPeriodStart,BillingPeriodEnd,ChargePeriodStart,ChargePeriodEnd,ChargeCategory,BilledCost,EffectiveCost,ServiceCategory,ServiceName,ResourceId,ProviderName,BillingCurrency\n",
    );
    let iso = |t: i64| {
        chrono::DateTime::from_timestamp_micros(t)
            .unwrap()
            .format("%Y-%m-%dT%H:%M:%SZ")
            .to_string()
    };
    for day in 0..size.days {
        let (start, end) = (
            iso(week.start + day * MICROS_PER_DAY),
            iso(week.start + (day + 1) * MICROS_PER_DAY),
        );
        for n in 0..size.nodes {
            csv.push_str(&format!("acct,2026-11-01T00:00:00Z,2026-12-01T00:00:00Z,{start},{end},Usage,853.33,853.33,Compute,EC2,arn:aws:ec2:us-east-1:1:instance/i-{n:05},AWS,USD\n"));
        }
        csv.push_str(&format!("acct,2026-11-01T00:00:00Z,2026-12-01T00:00:00Z,{start},{end},Usage,500,500,Networking,Data Transfer,,AWS,USD\n"));
        csv.push_str(&format!("acct,2026-11-01T00:00:00Z,2026-12-01T00:00:00Z,{start},{end},Usage,300,300,Storage,S3,,AWS,USD\n"));
    }
    csv
}

/// Lands the billing through the real FOCUS ingest path; returns the lines landed.
async fn gpuledger_ingest_focus(
    lake: &Lake,
    csv: String,
) -> Result<u64, Box<dyn std::error::Error>> {
    use gpuledger_ingest::ParseContext;
    use gpuledger_ingest::pipeline::{IngestOptions, Input, Source, ingest};
    let input = Input::Bytes {
        origin: "billing.csv".into(),
        bytes: csv.into_bytes().into(),
    };
    let options = IngestOptions::new(
        Source::Focus,
        ParseContext::new("billing.csv", chrono::Utc::now()),
    );
    Ok(ingest(lake, input, options).await?.rows_landed())
}

/// How many times a bench repeats its timed step: `GPULEDGER_BENCH_RUNS` (more for a profile),
/// 5 unless told, at least 1.
pub fn bench_runs() -> usize {
    std::env::var("GPULEDGER_BENCH_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5)
        .max(1)
}
