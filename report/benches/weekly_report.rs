//! The weekly report at fleet scale: the time to produce the report of ISO week 2026-W45 for
//! 1,000 GPUs × 7 days (the fleet of `query/benches/support/fleet.rs`, its ledger built in the
//! untimed setup), and to render it in every format.
//!
//! `cargo bench -p gpuledger-report --bench weekly_report` reports the median of 5
//! (`GPULEDGER_BENCH_RUNS=N` runs N, e.g. for a profile): computed in a session of its own, as
//! `gpuledger report weekly` does, and as `gpuledger serve` answers it, in sessions sharing the
//! files kept decoded (`--decoded-cache-mb`, its default), after one report has filled them.

#[path = "../../query/benches/support/fleet.rs"]
mod fleet;

use std::time::Instant;

use gpuledger_build::{build_ledger, days_between};
use std::sync::Arc;

use gpuledger_query::decoded_files::{BOUNDED_TABLES, DecodedFiles};
use gpuledger_query::{SessionOptions, new_session_with};
use gpuledger_report::{Format, IsoWeek, TenantLimits, weekly_report, weekly_report_in};

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
    let runs = fleet::bench_runs();
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

    // As `serve` answers it: `serve`'s default memory limit and decoded files.
    let decoded = Arc::new(DecodedFiles::new(&BOUNDED_TABLES, 512 << 20));
    let options = SessionOptions {
        memory_limit: Some(1024 << 20),
        decoded_files: Some(Arc::clone(&decoded)),
        ..SessionOptions::default()
    };
    let served = || {
        let ctx = new_session_with(&fleet.lake, &options).unwrap();
        runtime
            .block_on(weekly_report_in(&ctx, &fleet.lake, week, &limits))
            .unwrap()
    };
    let alone = runtime
        .block_on(weekly_report(&fleet.lake, week, &limits))
        .unwrap();
    let first = served();
    assert_eq!(
        serde_json::to_string(&first).unwrap(),
        serde_json::to_string(&alone).unwrap(),
        "the served report differs"
    );
    let mut served_ms: Vec<f64> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            let report = served();
            assert_eq!(report.capacity.total_gpus, 1000);
            started.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    served_ms.sort_by(f64::total_cmp);
    println!(
        "weekly_report/served: median {:.1} ms (min {:.1}, max {:.1}) of {runs}, {} files ({} MiB) kept decoded",
        served_ms[runs / 2],
        served_ms[0],
        served_ms[runs - 1],
        decoded.files(),
        decoded.held() >> 20
    );
}
