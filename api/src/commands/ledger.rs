//! `gpuledger ledger build` and `gpuledger ledger check`.

use std::process::ExitCode;

use chrono::NaiveDate;
use gpuledger_build::{balance, build_ledger, day_span, days_between, declared, input_days};
use gpuledger_lake::Lake;
use gpuledger_ledger::time::Span;

use crate::EXIT_REJECTED;
use crate::cli::{LedgerArgs, LedgerCommand};

/// Warnings printed per day; the rest are counted (a sample cluster can warn about every job).
const WARNINGS_SHOWN: usize = 3;

pub async fn run(lake: &Lake, args: LedgerArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let declared = declared(lake.catalog()).await?;
    match args.command {
        LedgerCommand::Build { from, to } => {
            let days: Vec<NaiveDate> = match (from, to) {
                (Some(from), Some(to)) => days_between(from, to).collect(),
                (from, to) => input_days(lake)
                    .await?
                    .into_iter()
                    .filter(|d| from.is_none_or(|f| *d >= f) && to.is_none_or(|t| *d <= t))
                    .collect(),
            };
            let (Some(first), Some(last)) = (days.first().copied(), days.last().copied()) else {
                println!(
                    "nothing to build: no telemetry, events or billing has landed for these days"
                );
                return Ok(ExitCode::SUCCESS);
            };
            let reports = build_ledger(lake, &declared, days).await?;
            if reports.is_empty() {
                println!("ledger is up to date for {first} … {last}");
            }
            for day in &reports {
                let place = match day.worker_tasks {
                    0 => String::new(),
                    tasks => format!("; GPU-hours computed in {tasks} tasks on query workers"),
                };
                let nodes = match day.nodes {
                    None => String::new(),
                    Some(1) => " of 1 node".into(),
                    Some(nodes) => format!(" of {nodes} nodes"),
                };
                println!(
                    "{}: {} hours{nodes} recomputed, {} GPU-hour rows; {}{place}",
                    day.day, day.hours, day.gpu_hour_rows, day.balance
                );
                for warning in day.warnings.iter().take(WARNINGS_SHOWN) {
                    eprintln!("  warning: {warning}");
                }
                if day.warnings.len() > WARNINGS_SHOWN {
                    eprintln!(
                        "  … and {} more warnings for {}",
                        day.warnings.len() - WARNINGS_SHOWN,
                        day.day
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        LedgerCommand::Check { from, to } => {
            let window = Span::new(day_span(from).start, day_span(to).end);
            let b = balance(lake, &declared, window).await?;
            println!("ledger balance {from} … {to} (UTC, days inclusive)");
            println!("  billed (effective cost, prorated)  {:>16.6}", b.billed);
            println!("  manual costs                       {:>16.6}", b.manual);
            println!("  rate card (unbilled GPU time)      {:>16.6}", b.rate_card);
            println!(
                "  expected                           {:>16.6}",
                b.expected()
            );
            println!("  accounted (cost_entries)           {:>16.6}", b.accounted);
            println!(
                "  difference                         {:>16.6}",
                b.difference()
            );
            if b.balances() {
                println!("balanced (within 1e-6 relative)");
                Ok(ExitCode::SUCCESS)
            } else {
                println!(
                    "DOES NOT BALANCE: run `gpuledger ledger build --from {from} --to {to}`, then check again"
                );
                Ok(ExitCode::from(EXIT_REJECTED))
            }
        }
    }
}
