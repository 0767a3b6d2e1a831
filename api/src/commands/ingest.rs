//! `gpuledger ingest <source> <path|->…`: each input lands as one batch, exactly once.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use gpuledger_ingest::ParseContext;
use gpuledger_ingest::pipeline::{
    IngestOptions, IngestReport, Input, InputLimits, Limit, Outcome, Source, ingest,
};
use gpuledger_lake::Lake;
use indicatif::{ProgressBar, ProgressStyle};

use crate::EXIT_REJECTED;
use crate::cli::IngestArgs;

/// Rejections printed in full before the summary points at the quarantine.
const REJECTIONS_SHOWN: usize = 20;

pub async fn run(lake: &Lake, args: IngestArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let mut any_rejected = false;
    for path in &args.paths {
        let input = if path.as_os_str() == "-" {
            Input::Stdin
        } else {
            Input::Path(path.clone())
        };
        let mut context = ParseContext::new(
            input.origin(),
            args.at.unwrap_or_else(|| input.default_time()),
        );
        context.cluster = args.cluster.clone();
        context.tz = args.tz;
        context.date_format = args.date_format.clone();
        let progress = Arc::new(AtomicU64::new(0));
        let mut options = IngestOptions::new(args.source, context);
        options.strict = args.strict;
        // A file's modification time says when its scrape was taken; stdin says nothing, so an
        // untimestamped scrape piped in twice within the retry window is taken as a retry.
        options.at_declared = args.at.is_some() || path.as_os_str() != "-";
        options.limits = InputLimits {
            max_decompressed: args.max_decompressed_mb.map(|mb| Limit {
                bytes: mb << 20,
                name: "--max-decompressed-mb",
            }),
            max_line: Some(Limit {
                bytes: args.max_line_kb << 10,
                name: "--max-line-kb",
            }),
            batch_rows: args.batch_rows,
            ..InputLimits::default()
        };
        options.progress = Some(Arc::clone(&progress));

        let bar = progress_bar(input.size(), &input.origin());
        let report = with_progress(bar, progress, ingest(lake, input, options)).await?;
        print_report(&report);
        any_rejected |= report.records_rejected > 0;
    }
    Ok(if any_rejected {
        ExitCode::from(EXIT_REJECTED)
    } else {
        ExitCode::SUCCESS
    })
}

/// Runs `work` while `bar` (if any) shows `counter`; clears the bar when it is done.
pub async fn with_progress<T>(
    bar: Option<ProgressBar>,
    counter: Arc<AtomicU64>,
    work: impl Future<Output = T>,
) -> T {
    let ticker = bar.clone().map(|bar| {
        tokio::spawn(async move {
            loop {
                bar.set_position(counter.load(Ordering::Relaxed));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    });
    let result = work.await;
    if let Some(ticker) = ticker {
        ticker.abort();
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    result
}

/// Whether to draw progress bars: on a terminal only, so scripts and CI get the summary lines alone.
pub fn show_progress() -> bool {
    std::io::stderr().is_terminal()
}

/// A bar on a terminal only: scripts and CI get the summary lines alone.
pub fn progress_bar(size: Option<u64>, origin: &str) -> Option<ProgressBar> {
    if !show_progress() {
        return None;
    }
    let bar = match size {
        Some(size) => ProgressBar::new(size).with_style(
            ProgressStyle::with_template("{msg} [{bar:30}] {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} eta {eta}")
                .expect("valid template")
                .progress_chars("=> "),
        ),
        None => ProgressBar::new_spinner()
            .with_style(ProgressStyle::with_template("{msg} {spinner} {binary_bytes} {binary_bytes_per_sec}").expect("valid template")),
    };
    Some(bar.with_message(origin.to_string()))
}

pub fn print_report(report: &IngestReport) {
    match &report.outcome {
        Outcome::AlreadyIngested { batch_id } if report.source.is_billing() => {
            println!(
                "{}: already ingested as batch {batch_id}, identical to the active delivery: \
                 nothing changed",
                report.origin
            );
            return;
        }
        Outcome::AlreadyIngested { batch_id } => {
            println!(
                "{}: already ingested as batch {batch_id}; nothing new landed",
                report.origin
            );
            return;
        }
        Outcome::Reactivated {
            batch_id,
            rows_restored,
            rows_replaced,
        } => {
            println!(
                "{}: re-delivery of an earlier delivery (batch {batch_id}): active again, \
                 {rows_restored} rows restored, {rows_replaced} rows replaced",
                report.origin
            );
            return;
        }
        Outcome::Landed { rows_replaced } => {
            let tables: Vec<String> = report
                .rows
                .iter()
                .map(|(table, n)| format!("{n} rows into {table}"))
                .collect();
            let tables = if tables.is_empty() {
                "no rows".to_string()
            } else {
                tables.join(", ")
            };
            println!(
                "{}: {} records read; landed {tables} (batch {}); {} rejected",
                report.origin, report.records_read, report.batch_id, report.records_rejected
            );
            if !report.missing_columns.is_empty() {
                println!(
                    "  the input lacks the FOCUS Mandatory columns {}: null in every row",
                    report.missing_columns.join(", ")
                );
            }
            if *rows_replaced > 0 {
                println!(
                    "  restated: {rows_replaced} rows of an earlier delivery of the same billing period were replaced"
                );
            }
            if report.duplicates_skipped > 0 {
                let what = match report.source {
                    Source::Events => "events",
                    _ => "requests",
                };
                println!(
                    "  {} {what} were already in the lake and were skipped",
                    report.duplicates_skipped
                );
            }
        }
    }
    for rejection in report.rejections.iter().take(REJECTIONS_SHOWN) {
        eprintln!(
            "  {}:{}: field '{}': {}",
            report.origin, rejection.line, rejection.field, rejection.reason
        );
    }
    let shown = report.rejections.len().min(REJECTIONS_SHOWN) as u64;
    if report.records_rejected > shown {
        eprintln!("  … and {} more", report.records_rejected - shown);
    }
    if !report.rejections.is_empty() {
        eprintln!(
            "  rejected records are kept: gpuledger sql \"select * from quarantine where batch_id = '{}'\"",
            report.batch_id
        );
    }
    if report.records_rejected > report.rejections.len() as u64 {
        eprintln!(
            "  the quarantine keeps the first {} of the {} rejected records",
            report.rejections.len(),
            report.records_rejected
        );
    }
}
