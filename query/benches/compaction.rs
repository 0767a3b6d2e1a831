//! Compaction (issue 16): a day of Prometheus remote-write at one push per 5 s for 128 GPUs
//! (16 nodes × 8) lands as 17,280 files of 128 rows in `gpu_samples`, one per push, as the
//! remote-write receiver lands them (each push its own batch and commit). Then, in one run:
//!
//! - the day's files before and after `compaction::pass` (the pass of `gpuledger compact` and
//!   `serve`: merge, swap in the catalog, move the merged files out of `tables/`);
//! - the time of the pass;
//! - the time of a day's `gpu_samples` aggregate before and after (median of 5, one session).
//!
//! `cargo bench -p gpuledger-query --bench compaction` (`GPULEDGER_BENCH_PUSHES=…` for fewer
//! pushes, `GPULEDGER_BENCH_RUNS=…` for another number of query runs). Landing the pushes is setup, timed only to say how long it took.

#[path = "support/fleet.rs"]
mod fleet;

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Float64Array, Int32Array, StringArray, TimestampMicrosecondArray};
use gpuledger_lake::compaction::{CompactOptions, pass};
use gpuledger_lake::tables::{Table, batch_with_columns};
use gpuledger_lake::{Lake, LakeConfig};

const NODES: usize = 16;
const GPUS: usize = 8;
const STEP_MICROS: i64 = 5_000_000;
/// 2026-11-02T00:00:00Z.
const DAY: i64 = 1_793_577_600_000_000;

fn push(at: i64) -> arrow::record_batch::RecordBatch {
    let rows = NODES * GPUS;
    let (mut node, mut gpu, mut uuid, mut sm, mut power) = (vec![], vec![], vec![], vec![], vec![]);
    for n in 0..NODES {
        for g in 0..GPUS {
            let id = (n * GPUS + g) as i64;
            let wave = ((at / STEP_MICROS + id * 37) % 1000) as f64 / 1000.0;
            node.push(format!("node-{n:02}"));
            gpu.push(g as i32);
            uuid.push(format!("GPU-{id:08x}"));
            sm.push(wave);
            power.push(70.0 + 600.0 * wave);
        }
    }
    batch_with_columns(
        Table::GpuSamples,
        vec![
            (
                "ts",
                Arc::new(TimestampMicrosecondArray::from(vec![at; rows]).with_timezone("UTC")),
            ),
            ("cluster", Arc::new(StringArray::from(vec!["prod"; rows]))),
            ("node", Arc::new(StringArray::from(node))),
            ("gpu_uuid", Arc::new(StringArray::from(uuid))),
            ("gpu_index", Arc::new(Int32Array::from(gpu))),
            ("sm_active", Arc::new(Float64Array::from(sm))),
            ("power_w", Arc::new(Float64Array::from(power))),
        ],
    )
    .unwrap()
}

fn main() {
    let pushes: i64 = std::env::var("GPULEDGER_BENCH_PUSHES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(86_400 / 5);
    let runs = fleet::bench_runs();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let lake = runtime
        .block_on(Lake::open(&LakeConfig {
            data: dir.path().join("lake").display().to_string(),
            catalog: None,
        }))
        .unwrap();

    let started = Instant::now();
    runtime.block_on(async {
        for i in 0..pushes {
            let id = format!("push-{i:05}");
            fleet::write(
                &lake,
                Table::GpuSamples,
                vec![push(DAY + i * STEP_MICROS)],
                &id,
            )
            .await;
        }
    });
    println!(
        "compaction/setup: {pushes} pushes of {} rows landed in {:.1} s",
        NODES * GPUS,
        started.elapsed().as_secs_f64()
    );

    let day_files = || {
        runtime
            .block_on(lake.catalog().active_files(Table::GpuSamples, None, None))
            .unwrap()
    };
    let sql = "SELECT node, gpu_uuid, count(*) AS samples, avg(sm_active) AS sm, max(power_w) AS peak \
               FROM gpu_samples WHERE ts >= TIMESTAMP '2026-11-02T00:00:00Z' AND ts < TIMESTAMP '2026-11-03T00:00:00Z' \
               GROUP BY node, gpu_uuid";
    let query = || {
        let ctx = gpuledger_query::new_session(&lake).unwrap();
        let mut times: Vec<f64> = (0..runs)
            .map(|_| {
                let started = Instant::now();
                let batches = runtime
                    .block_on(async { ctx.sql(sql).await.unwrap().collect().await.unwrap() });
                assert_eq!(
                    batches
                        .iter()
                        .map(arrow::array::RecordBatch::num_rows)
                        .sum::<usize>(),
                    NODES * GPUS
                );
                started.elapsed().as_secs_f64()
            })
            .collect();
        times.sort_by(f64::total_cmp);
        times[times.len() / 2]
    };

    let before = day_files();
    let bytes_before: i64 = before.iter().map(|f| f.bytes).sum();
    let query_before = query();

    let started = Instant::now();
    let (compacted, settled) = runtime
        .block_on(pass(
            &lake,
            &CompactOptions::default(),
            Duration::from_secs(3600),
            "bench",
        ))
        .unwrap()
        .expect("the lease is free");
    let compaction = started.elapsed().as_secs_f64();

    let after = day_files();
    let bytes_after: i64 = after.iter().map(|f| f.bytes).sum();
    let rows_after: i64 = after.iter().map(|f| f.rows).sum();
    assert_eq!(rows_after, pushes * (NODES * GPUS) as i64);
    let query_after = query();
    println!(
        "compaction/files: {} → {} files for the day ({:.1} MB → {:.1} MB of Parquet, {rows_after} rows)",
        before.len(),
        after.len(),
        bytes_before as f64 / 1e6,
        bytes_after as f64 / 1e6
    );
    println!(
        "compaction/pass: {} files merged into {} in {compaction:.1} s; {} moved to _superseded/",
        compacted.files_merged, compacted.files_written, settled.moved
    );
    println!(
        "compaction/query: the day's per-GPU aggregate, median of {runs}: {:.1} ms before → {:.1} ms after",
        query_before * 1e3,
        query_after * 1e3
    );
}
