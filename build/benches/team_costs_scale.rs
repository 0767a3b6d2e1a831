//! `team_costs` at the scale of issue 18's goal: 10,000 GPUs (1,250 nodes × 8) × 30 days, the
//! ledger built in the setup, against ≤ 2 s; beside it, DuckDB computing the same team totals
//! from the same ledger tables (`cost_entries`, `gpu_hours`) in the same run.
//!
//! ```sh
//! cargo bench -p gpuledger-build --bench team_costs_scale
//! GPULEDGER_BENCH_NODES=125 GPULEDGER_BENCH_DAYS=7 cargo bench -p gpuledger-build --bench team_costs_scale
//! ```
//! The fleet is `support/fleet.rs`'s (jobs, billing, reservations), its telemetry every
//! `GPULEDGER_BENCH_STEP_S` seconds (default 300: a 15 s fleet of this size is 1.7 billion
//! samples, more than this machine lands in a benchmark's setup; `team_costs` reads only the
//! ledger tables, whose rows are one per GPU-hour and owner whatever the step). Setup is not
//! timed; it prints its own durations.

#[path = "../../query/benches/support/duckdb.rs"]
mod duckdb;
#[path = "../../query/benches/support/fleet.rs"]
mod fleet;

use std::time::Instant;

use duckdb::{DuckDb, median, process_cpu_seconds, spread};
use gpuledger_build::{build_ledger, input_days};
use gpuledger_ledger::time::MICROS_PER_SECOND;

/// Each team's ledger cost of the window and GPU-hours held, from the ledger tables: what
/// `team_costs` answers.
const PEER_TEAM_COSTS: &str = "
    WITH costs AS (
        SELECT team, sum(amount) AS total_cost FROM cost_entries
        WHERE team IS NOT NULL AND day >= TIMESTAMPTZ '2026-11-02' AND day < TIMESTAMPTZ '2026-11-02' + INTERVAL (DAYS) DAY
        GROUP BY team),
    held AS (
        SELECT team, sum(alloc_seconds) / 3600 AS gpu_hours FROM gpu_hours
        WHERE team IS NOT NULL AND hour >= TIMESTAMPTZ '2026-11-02' AND hour < TIMESTAMPTZ '2026-11-02' + INTERVAL (DAYS) DAY
        GROUP BY team)
    SELECT c.team, coalesce(h.gpu_hours, 0), c.total_cost FROM costs c LEFT JOIN held h USING (team)
    ORDER BY c.total_cost DESC";

fn env(name: &str, default: i64) -> i64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let size = fleet::Size {
        nodes: env("GPULEDGER_BENCH_NODES", 1_250) as usize,
        days: env("GPULEDGER_BENCH_DAYS", 30),
        step: env("GPULEDGER_BENCH_STEP_S", 300) * MICROS_PER_SECOND,
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let fleet = fleet::land_sized(&runtime, size);
    let (started, cpu_before) = (Instant::now(), process_cpu_seconds());
    let days = runtime
        .block_on(async {
            let days = input_days(&fleet.lake).await.unwrap();
            build_ledger(&fleet.lake, &fleet.declared, days).await
        })
        .unwrap();
    let build = started.elapsed().as_secs_f64();
    let build_cpu = process_cpu_seconds().zip(cpu_before).map(|(a, b)| a - b);
    let rows: usize = days.iter().map(|d| d.gpu_hour_rows).sum();
    assert!(days.iter().all(|d| d.balance.balances()));
    println!(
        "team_costs_scale/setup_ledger: {} days, {rows} gpu_hours rows, balanced, built in {build:.1} s, {} CPU",
        days.len(),
        build_cpu.map_or("?".into(), |cpu| format!("{cpu:.1} s")),
    );

    let to = fleet.first + chrono::Days::new(size.days as u64);
    let sql = format!(
        "SELECT * FROM team_costs('{}', '{to}') ORDER BY total_cost DESC",
        fleet.first
    );
    let ctx = gpuledger_query::new_session(&fleet.lake).unwrap();
    let mut top = String::new();
    let times: Vec<f64> = (0..5)
        .map(|_| {
            let started = Instant::now();
            let batches =
                runtime.block_on(async { ctx.sql(&sql).await.unwrap().collect().await.unwrap() });
            let elapsed = started.elapsed().as_secs_f64();
            assert_eq!(
                batches
                    .iter()
                    .map(arrow::array::RecordBatch::num_rows)
                    .sum::<usize>(),
                fleet::TEAMS.len()
            );
            top = gpuledger_query::columns::strings(&batches[0], "team")
                .unwrap()
                .value(0)
                .to_string();
            elapsed
        })
        .collect();
    let (ours, least, most) = spread(&times);
    let mut peer = DuckDb::over(fleet.data_dir(), &["cost_entries", "gpu_hours"]);
    peer.threads(2);
    let peer_sql = PEER_TEAM_COSTS.replace("DAYS", &size.days.to_string());
    let answers: Vec<_> = (0..5).map(|_| peer.time(&peer_sql)).collect();
    assert_eq!(answers[0].rows, fleet::TEAMS.len());
    assert_eq!(
        answers[0].first, top,
        "both engines rank the same team first"
    );
    let theirs = median(answers.iter().map(|a| a.seconds).collect());
    println!(
        "team_costs_scale/team_costs: {} GPUs × {} days: median {:.3} s (min {:.3}, max {:.3}); \
         DuckDB {} at 2 threads over the same ledger tables (the same teams, {top} first), median {theirs:.3} s; ratio {:.2}",
        size.nodes * 8,
        size.days,
        ours,
        least,
        most,
        peer.version,
        ours / theirs
    );
}
