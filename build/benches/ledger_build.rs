//! The ledger at fleet scale: 1,000 GPUs (125 nodes × 8 H100) × 7 days, telemetry every 15 s
//! (40.3 M samples), ~4 jobs per GPU per day from 6 teams, a billing line per node per day plus
//! network and storage, warm-pool reservations.
//!
//! `cargo bench -p gpuledger-build --bench ledger_build` reports:
//! - the time to build the ledger for the week from scratch (`ledger build`);
//! - the time of `team_costs` over the built week (median of 5);
//! - the time of `ledger build` with no range when nothing is new (the days from the catalog,
//!   every day found current);
//! - the time to bring the ledger up to date after one late hour of telemetry for one node
//!   (median of `GPULEDGER_BENCH_RUNS` late hours, 5 unless told);
//! - beside it, DuckDB computing each team's direct GPU cost per day from the same raw Parquet
//!   (`PEER_TEAM_DAY_COSTS`: samples joined to the runs of the scheduler events and to each
//!   node's daily bill), the nearest thing another engine does to the ledger's core, and the
//!   ledger's own direct cost of the week, which it should match within the sampling error.
//!   Needs `python3 -m pip install duckdb`.
//!
//! Setup (`support/fleet.rs`, shared with the weekly report's benchmark) is not timed.

#[path = "../../query/benches/support/duckdb.rs"]
mod duckdb;
#[path = "../../query/benches/support/fleet.rs"]
mod fleet;

use std::time::Instant;

use duckdb::{DuckDb, median, process_cpu_seconds, spread};
use fleet::{TEAMS, telemetry, write};
use gpuledger_build::{build_ledger, days_between, input_days};
use gpuledger_lake::tables::Table;
use gpuledger_ledger::time::{MICROS_PER_DAY, MICROS_PER_HOUR, Span};

/// Team × day direct GPU cost in DuckDB: every 15 s sample of a GPU inside a run is 15 s of that
/// run's team, priced at the node's daily bill × the GPU share (0.9) over 8 GPUs × 86,400 s.
const PEER_TEAM_DAY_COSTS: &str = "
    WITH runs AS (
        SELECT s.node, s.gpu_indices[1] AS gpu_index, s.team, s.ts AS start, e.ts AS stop
        FROM scheduler_events s JOIN scheduler_events e
          ON s.workload = e.workload AND s.event = 'start' AND e.event = 'stop'),
    price AS (
        SELECT 'dgx-' || right(resource_id, 3) AS node, date_trunc('day', charge_period_start) AS day,
               sum(effective_cost) * 0.9 / (8 * 86400) AS per_gpu_second
        FROM billing_lines WHERE resource_id IS NOT NULL GROUP BY ALL),
    team_days AS (
        SELECT r.team, date_trunc('day', g.ts) AS day, sum(15 * p.per_gpu_second) AS cost
        FROM gpu_samples g
        JOIN runs r ON g.node = r.node AND g.gpu_index = r.gpu_index AND g.ts >= r.start AND g.ts < r.stop
        JOIN price p ON p.node = g.node AND p.day = date_trunc('day', g.ts)
        GROUP BY ALL)
    SELECT sum(cost) OVER () AS week, team, day, cost FROM team_days";

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let fleet = fleet::land(&runtime);
    let fleet::Fleet {
        lake,
        declared,
        first,
        last,
        week,
        all_jobs,
        samples,
        ..
    } = &fleet;
    let (first, last, week) = (*first, *last, *week);
    let (started, cpu_before) = (Instant::now(), process_cpu_seconds());
    let days = runtime
        .block_on(async {
            // What `ledger build` without a range builds: every day with inputs (the week, and
            // the day after it, where the last runs' stop events fall at midnight).
            let days = input_days(lake).await.unwrap();
            build_ledger(lake, declared, days).await
        })
        .unwrap();
    let build = started.elapsed().as_secs_f64();
    let build_cpu = process_cpu_seconds().zip(cpu_before).map(|(a, b)| a - b);
    let rows: usize = days.iter().map(|d| d.gpu_hour_rows).sum();
    assert!(
        days.iter().all(|d| d.balance.balances()),
        "{:?}",
        days.iter().map(|d| d.balance).collect::<Vec<_>>()
    );
    println!(
        "ledger_build/week: {} days, {rows} gpu_hours rows, balanced, in {build:.1} s, {} CPU ({:.2} M samples/s)",
        days.len(),
        build_cpu.map_or("?".into(), |cpu| format!("{cpu:.1} s")),
        *samples as f64 / build / 1e6
    );

    let ctx = gpuledger_query::new_session(lake).unwrap();
    let direct: f64 = runtime.block_on(async {
        let batches = ctx
            .sql("SELECT CAST(sum(direct_cost) AS DOUBLE) FROM team_costs('2026-11-02', '2026-11-09')")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        arrow::array::AsArray::as_primitive::<arrow::datatypes::Float64Type>(batches[0].column(0))
            .value(0)
    });
    let mut peer = DuckDb::over(
        fleet.data_dir(),
        &["gpu_samples", "scheduler_events", "billing_lines"],
    );
    peer.threads(2);
    let answers: Vec<_> = (0..3).map(|_| peer.time(PEER_TEAM_DAY_COSTS)).collect();
    let peer_cpu = median(answers.iter().map(|a| a.cpu_seconds).collect());
    println!(
        "ledger_build/duckdb_team_day_costs: DuckDB {} at 2 threads, median {:.1} s, {peer_cpu:.1} s CPU \
         ({} team-days, ${} direct for the week; the ledger's direct cost ${direct:.2}); ratio {:.2}, \
         of CPU time {}",
        peer.version,
        median(answers.iter().map(|a| a.seconds).collect()),
        answers[0].rows,
        answers[0].first,
        build / median(answers.iter().map(|a| a.seconds).collect()),
        build_cpu.map_or("?".into(), |cpu| format!("{:.2}", cpu / peer_cpu)),
    );
    drop(peer);

    let sql = "SELECT * FROM team_costs('2026-11-02', '2026-11-09') ORDER BY total_cost DESC";
    let times: Vec<f64> = (0..5)
        .map(|_| {
            let started = Instant::now();
            let batches =
                runtime.block_on(async { ctx.sql(sql).await.unwrap().collect().await.unwrap() });
            assert_eq!(
                batches
                    .iter()
                    .map(arrow::array::RecordBatch::num_rows)
                    .sum::<usize>(),
                TEAMS.len()
            );
            started.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    let (middle, least, most) = spread(&times);
    println!("ledger_build/team_costs_week: median {middle:.1} ms (min {least:.1}, max {most:.1})");

    // `ledger build` with no range and nothing new: the days it looks at, and none rebuilt.
    let started = Instant::now();
    let (days, rebuilt) = runtime.block_on(async {
        let days = input_days(lake).await.unwrap();
        let rebuilt = build_ledger(lake, declared, days.iter().copied())
            .await
            .unwrap();
        (days, rebuilt)
    });
    assert!(rebuilt.is_empty(), "{} days rebuilt", rebuilt.len());
    println!(
        "ledger_build/nothing_new: {} days found current in {:.3} s",
        days.len(),
        started.elapsed().as_secs_f64()
    );

    // Late hours of telemetry for one node on day 3, one at a time (`GPULEDGER_BENCH_RUNS`
    // of them, 5 unless told, e.g. more for a profile): each time only that hour (and the
    // next, where its last sample still stands) of that node is recomputed. The hours are the
    // fleet's own samples again, as a retried push lands them: the ledger stays the same.
    let runs = fleet::bench_runs();
    let times: Vec<f64> = (0..runs as i64)
        .map(|run| {
            let hour = week.start + 3 * MICROS_PER_DAY + (10 + run % 12) * MICROS_PER_HOUR;
            let late = Span::new(hour, hour + MICROS_PER_HOUR);
            runtime.block_on(write(
                lake,
                Table::GpuSamples,
                vec![telemetry(0..1, late, all_jobs)],
                &format!("late-hour-{run}"),
            ));
            let started = Instant::now();
            let days = runtime
                .block_on(build_ledger(lake, declared, days_between(first, last)))
                .unwrap();
            let took = started.elapsed().as_secs_f64();
            let recomputed = days
                .iter()
                .map(|d| (d.hours, d.nodes, d.balance.balances()))
                .collect::<Vec<_>>();
            assert_eq!(recomputed, [(2, Some(1), true)], "run {run}");
            took
        })
        .collect();
    let (middle, least, most) = spread(&times);
    println!(
        "ledger_build/late_hour: 1 day, 2 hours of 1 node recomputed, median {middle:.2} s of {runs} \
         (min {least:.2}, max {most:.2})",
    );
}
