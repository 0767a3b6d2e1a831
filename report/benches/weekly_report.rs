//! The weekly report at fleet scale: the time to produce the report of ISO week 2026-W45 for
//! 1,000 GPUs × 7 days (the fleet of `query/benches/support/fleet.rs`, its ledger built in the
//! untimed setup), and to render it in every format.
//!
//! `cargo bench -p gpuledger-report --bench weekly_report` reports the median of 5
//! (`GPULEDGER_BENCH_RUNS=N` runs N, e.g. for a profile).

#[path = "../../query/benches/support/fleet.rs"]
mod fleet;

use std::time::Instant;

use gpuledger_build::{build_ledger, days_between};
use gpuledger_report::{Format, IsoWeek, TenantLimits, weekly_report};

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let fleet = fleet::land(&runtime);
    let days = runtime
        .block_on(build_ledger(
            &fleet.lake,
            &fleet.declared,
            days_between(fleet.first, fleet.last),
        ))
        .unwrap();
    assert!(days.iter().all(|d| d.balance.balances()));
    let week: IsoWeek = "2026-W45".parse().unwrap();
    let limits = TenantLimits::default();
    let runs: usize = std::env::var("GPULEDGER_BENCH_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5)
        .max(1);
    let mut times: Vec<(f64, f64)> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            let report = runtime
                .block_on(weekly_report(&fleet.lake, week, &limits))
                .unwrap();
            let computed = started.elapsed().as_secs_f64() * 1000.0;
            assert_eq!(report.capacity.total_gpus, 1000);
            assert_eq!(report.tenants.teams.len(), fleet::TEAMS.len());
            let started = Instant::now();
            let bytes: usize = [Format::Json, Format::Csv, Format::Html, Format::Markdown]
                .iter()
                .map(|f| f.render(&report).len())
                .sum();
            assert!(bytes > 0);
            (computed, started.elapsed().as_secs_f64() * 1000.0)
        })
        .collect();
    times.sort_by(|a, b| a.0.total_cmp(&b.0));
    println!(
        "weekly_report/compute: median {:.1} ms (min {:.1}, max {:.1}) of {runs} for {} GPUs × {} days",
        times[runs / 2].0,
        times[0].0,
        times[runs - 1].0,
        fleet::NODES * fleet::GPUS,
        fleet::DAYS
    );
    times.sort_by(|a, b| a.1.total_cmp(&b.1));
    println!(
        "weekly_report/render_all_formats: median {:.2} ms",
        times[runs / 2].1
    );
}
