//! Ad-hoc SQL over `gpu_samples`, gpuledger beside DuckDB on the same Parquet files, in one run.
//!
//! The fleet of `support/fleet.rs` (1,000 GPUs × 7 days, a sample every 15 s: 40.3 M rows in
//! the lake's own files). Four query shapes analysts run, each timed 5 times per engine,
//! interleaved (gpuledger, then DuckDB, then gpuledger …) so that a noisy neighbour slows both,
//! at 2 threads and at 1; the median and the ratio are printed as a Markdown table for
//! BENCHMARKS.md. Both engines must return the same number of rows. The node × hour shape runs a
//! second time with DataFusion's own `date_trunc` (registered as `df_date_trunc`), which converts
//! every UTC time through the zone's calendar, to show what `udf/date_trunc_utc.rs` saves.
//!
//! `cargo bench -p gpuledger-query --bench sql_peers` (needs `python3 -m pip install duckdb`).
//! `GPULEDGER_BENCH_QUERY=<words>` runs only the shapes whose name contains them, and
//! `GPULEDGER_BENCH_THREADS=<n>` only that thread count: one shape under `perf record`.

#[path = "support/duckdb.rs"]
mod duckdb;
#[path = "support/fleet.rs"]
mod fleet;

use std::time::Instant;

use duckdb::{DuckDb, median};

use datafusion::functions::datetime::date_trunc::DateTruncFunc;
use datafusion::logical_expr::ScalarUDF;
use gpuledger_query::udf::date_trunc_utc::DateTruncUtc;

const RUNS: usize = 5;

/// The node × hour shape again with DataFusion's own `date_trunc` (registered as
/// `df_date_trunc`), which converts every UTC time through the zone's calendar.
const DF_DATE_TRUNC: (&str, &str) = (
    "node × hour, DataFusion's own date_trunc",
    "SELECT node, df_date_trunc('hour', ts) AS hour, avg(power_w) AS avg_w, max(power_w) AS max_w, \
     percentile_cont(0.95) WITHIN GROUP (ORDER BY power_w) AS p95_w \
     FROM gpu_samples GROUP BY node, df_date_trunc('hour', ts)",
);

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let fleet = fleet::land(&runtime);
    let mut duckdb = DuckDb::over(fleet.data_dir(), &["gpu_samples"]);
    println!(
        "{} samples; DuckDB {}; median of {RUNS} runs each, interleaved\n",
        fleet.samples, duckdb.version
    );
    println!("| query | threads | gpuledger | DuckDB | ratio |\n|---|---|---|---|---|");
    let only = std::env::var("GPULEDGER_BENCH_QUERY").unwrap_or_default();
    let thread_counts: Vec<usize> = match std::env::var("GPULEDGER_BENCH_THREADS") {
        Ok(n) => vec![n.parse().expect("GPULEDGER_BENCH_THREADS is a number")],
        Err(_) => vec![2, 1],
    };
    for threads in thread_counts {
        let ctx = gpuledger_query::new_session(&fleet.lake).unwrap();
        // A function registers under its name too: `date_trunc` is then DataFusion's again,
        // until the session's own is registered back over it.
        ctx.register_udf(ScalarUDF::from(DateTruncFunc::new()).with_aliases(["df_date_trunc"]));
        ctx.register_udf(ScalarUDF::new_from_impl(DateTruncUtc::default()));
        let date_trunc = ctx.state().scalar_functions()["date_trunc"].clone();
        let date_trunc: &dyn std::any::Any = date_trunc.inner().as_ref();
        assert!(
            date_trunc.is::<DateTruncUtc>(),
            "the shapes measure the session's date_trunc"
        );
        runtime.block_on(async {
            ctx.sql(&format!(
                "SET datafusion.execution.target_partitions = {threads}"
            ))
            .await
            .unwrap();
        });
        duckdb.threads(threads);
        let queries = fleet::ADHOC_QUERIES[..2]
            .iter()
            .chain([&DF_DATE_TRUNC])
            .chain(&fleet::ADHOC_QUERIES[2..])
            .filter(|(name, _)| name.contains(only.as_str()));
        for &(name, sql) in queries {
            let (mut ours, mut theirs) = (Vec::new(), Vec::new());
            for _ in 0..RUNS {
                let started = Instant::now();
                let rows: usize = runtime.block_on(async {
                    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
                    batches
                        .iter()
                        .map(arrow::array::RecordBatch::num_rows)
                        .sum()
                });
                ours.push(started.elapsed().as_secs_f64());
                let answer = duckdb.time(&sql.replace("df_date_trunc", "date_trunc"));
                assert_eq!(answer.rows, rows, "{name}");
                theirs.push(answer.seconds);
            }
            let (ours, theirs) = (median(ours), median(theirs));
            println!(
                "| {name} | {threads} | {:.3} s | {:.3} s | {:.2} |",
                ours,
                theirs,
                ours / theirs
            );
        }
    }
}
