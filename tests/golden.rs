//! Golden SQL: the worked example of `docs/ledger.md` goes in through the real binary (apply,
//! ingest, ledger build), then every `tests/sql/*.slt` file runs against a DataFusion session
//! over that lake — the same session the CLI, HTTP and Postgres entry points use. Expected
//! values are worked out by hand in the files' comments.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use arrow::datatypes::DataType;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use async_trait::async_trait;
use datafusion::error::DataFusionError;
use datafusion::prelude::SessionContext;
use gpuledger_lake::{Lake, LakeConfig};
use gpuledger_query::SessionOptions;
use gpuledger_query::distributed::Workers;
use sqllogictest::{DBOutput, DefaultColumnType};

use crate::support::{Ledger, describe, ledgers, physical_plan};

/// 2026-11-02T00:00:00Z in milliseconds.
const DAY_MS: i64 = 1_793_577_600_000;

/// `file` of the worked example (`tests/data/worked-example`).
pub fn example(file: &str) -> PathBuf {
    example_file("worked-example", file)
}

/// `file` of the example folder `tests/data/<example>`.
pub fn example_file(example: &str, file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data")
        .join(example)
        .join(file)
}

/// Runs `gpuledger ledger build` over the days `from` to `to` (both included); its output.
pub fn build_days(ledger: &Ledger, from: &str, to: &str) -> String {
    run_ok(ledger, &["ledger", "build", "--from", from, "--to", to])
}

/// Appends dcgm-exporter text with per-sample timestamps for GPU `gpu` of `host` (UUID
/// `GPU-<host>-<gpu>`): a scrape every 30 s for `hours` from 2026-11-02, SM activity `sm(second)`,
/// 400 W throughout.
pub fn dcgm_series(text: &mut String, host: &str, gpu: u32, hours: i64, sm: &dyn Fn(i64) -> f64) {
    let labels =
        format!("gpu=\"{gpu}\",UUID=\"GPU-{host}-{gpu}\",modelName=\"NVIDIA\",Hostname=\"{host}\"");
    for t in (0..hours * 3600).step_by(30) {
        let ms = DAY_MS + t * 1000;
        writeln!(text, "DCGM_FI_PROF_SM_ACTIVE{{{labels}}} {:.6} {ms}", sm(t)).unwrap();
        writeln!(text, "DCGM_FI_DEV_POWER_USAGE{{{labels}}} 400.000000 {ms}").unwrap();
    }
}

/// n1 GPU 0 busy (SM 0.60) for 4 h then idle (0.01) for 2 h; n2 GPU 0 busy (0.90) for 2 h.
fn telemetry() -> String {
    let mut text = String::new();
    dcgm_series(&mut text, "n1", 0, 6, &|t| {
        if t < 4 * 3600 { 0.6 } else { 0.01 }
    });
    dcgm_series(&mut text, "n2", 0, 2, &|_| 0.9);
    text
}

/// Runs `gpuledger args` in `ledger`; its stdout, or the test fails with its output.
pub fn run_ok(ledger: &Ledger, args: &[&str]) -> String {
    let out = ledger.run(args);
    assert!(
        out.status.success(),
        "[{}] gpuledger {}: {}",
        ledger.backend,
        args.join(" "),
        describe(&out)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Lands the worked example in `ledger` and builds its ledger.
pub fn load_worked_example(ledger: &Ledger) {
    land_worked_example(ledger);
    let built = build_days(ledger, "2026-11-02", "2026-11-02");
    assert!(
        built.contains("2026-11-02: 24 hours recomputed") && built.contains("(balanced)"),
        "{built}"
    );
}

/// Lands the worked example's objects and inputs in `ledger`, without building.
pub fn land_worked_example(ledger: &Ledger) {
    let run_ok = |args: &[&str]| run_ok(ledger, args);
    let prom = ledger.dir.path().join("telemetry.prom");
    std::fs::write(&prom, telemetry()).unwrap();
    run_ok(&["apply", example("objects.yaml").to_str().unwrap()]);
    run_ok(&[
        "ingest",
        "events",
        example("events.jsonl").to_str().unwrap(),
    ]);
    run_ok(&["ingest", "focus", example("billing.csv").to_str().unwrap()]);
    run_ok(&[
        "ingest",
        "tokens",
        example("tokens.jsonl").to_str().unwrap(),
    ]);
    run_ok(&[
        "ingest",
        "dcgm",
        prom.to_str().unwrap(),
        "--cluster",
        "demo",
    ]);
}

/// A decimal as DataFusion's own sqllogictest prints it: without trailing zeros, so an exact
/// `19.200` reads as the `19.2` a hand-worked comment says (and a float would print).
fn normalized_decimal(cell: String) -> String {
    if !cell.contains('.') {
        return cell;
    }
    let trimmed = cell.trim_end_matches('0');
    match trimmed.strip_suffix('.') {
        Some(whole) => format!("{whole}.0"),
        None => trimmed.to_string(),
    }
}

/// sqllogictest's view of a DataFusion session.
struct Session(SessionContext);

#[async_trait]
impl sqllogictest::AsyncDB for Session {
    type Error = DataFusionError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, DataFusionError> {
        let frame = self.0.sql(sql).await?;
        let types = frame
            .schema()
            .fields()
            .iter()
            .map(|f| match f.data_type() {
                t if t.is_integer() => DefaultColumnType::Integer,
                t if t.is_floating() || matches!(t, DataType::Decimal128(..)) => {
                    DefaultColumnType::FloatingPoint
                }
                _ => DefaultColumnType::Text,
            })
            .collect();
        let options = FormatOptions::default().with_null("NULL");
        let decimal: Vec<bool> = frame
            .schema()
            .fields()
            .iter()
            .map(|f| matches!(f.data_type(), DataType::Decimal128(..)))
            .collect();
        let mut rows = Vec::new();
        for batch in frame.collect().await? {
            let formatters: Vec<_> = batch
                .columns()
                .iter()
                .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
                .collect::<Result<_, _>>()?;
            for row in 0..batch.num_rows() {
                rows.push(
                    formatters
                        .iter()
                        .zip(&decimal)
                        .map(|(f, &decimal)| match f.value(row).to_string() {
                            empty if empty.is_empty() => "(empty)".to_string(),
                            cell if decimal => normalized_decimal(cell),
                            cell => cell,
                        })
                        .collect(),
                );
            }
        }
        Ok(DBOutput::Rows { types, rows })
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "gpuledger"
    }

    async fn sleep(duration: Duration) {
        tokio::time::sleep(duration).await;
    }
}

#[test]
fn golden_sql_files_hold_on_the_worked_example() {
    run_golden_files("tests/sql", load_worked_example);
}

/// Runs every `.slt` file of `sql_dir` (relative to the repository root) against each backend's
/// lake after `load` has landed its example there.
pub fn run_golden_files(sql_dir: &str, load: fn(&Ledger)) {
    run_golden_files_on(sql_dir, load, 0);
}

/// [`run_golden_files`] with the sessions' stages on `workers` worker processes (none: all
/// in-process). With workers, every scan that can be split is (one byte per task), so that
/// the files run through the workers however small the example.
pub fn run_golden_files_on(sql_dir: &str, load: fn(&Ledger), workers: usize) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(sql_dir),
    )
    .unwrap()
    .map(|e| e.unwrap().path())
    .filter(|p| p.extension().is_some_and(|e| e == "slt"))
    .collect();
    files.sort();
    assert!(!files.is_empty(), "no golden files in {sql_dir}");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for ledger in ledgers() {
        load(&ledger);
        let cluster = (workers > 0).then(|| ledger.workers(workers, &[]));
        let options = SessionOptions {
            workers: match &cluster {
                Some(cluster) => Workers::parse(&cluster.list())
                    .unwrap()
                    .with_bytes_per_task(Some(1)),
                None => Workers::default(),
            },
            ..SessionOptions::default()
        };
        let config = LakeConfig {
            data: ledger.data_dir().display().to_string(),
            catalog: Some(ledger.catalog.clone()),
        };
        let lake = runtime.block_on(Lake::open(&config)).unwrap();
        if cluster.is_some() {
            assert_distributed(&runtime, &lake, &options);
        }
        for file in &files {
            let lake = lake.clone();
            let options = options.clone();
            let mut runner = sqllogictest::Runner::new(move || {
                let lake = lake.clone();
                let options = options.clone();
                async move {
                    Ok(Session(
                        gpuledger_query::new_session_with(&lake, &options).expect("session"),
                    ))
                }
            });
            if let Err(error) = runtime.block_on(runner.run_file_async(file)) {
                panic!(
                    "[{}{}] {}:\n{error}",
                    ledger.backend,
                    if workers > 0 { ", through workers" } else { "" },
                    file.display()
                );
            }
        }
    }
}

/// The ledger's tables are planned over the workers with these options: a scan of `gpu_hours`
/// is cut into stages that run on more than one task.
fn assert_distributed(runtime: &tokio::runtime::Runtime, lake: &Lake, options: &SessionOptions) {
    let ctx = gpuledger_query::new_session_with(lake, options).unwrap();
    let plan = runtime.block_on(physical_plan(
        &ctx,
        "SELECT team, sum(alloc_seconds) FROM gpu_hours GROUP BY team",
    ));
    assert!(
        plan.contains("DistributedExec") && plan.contains("Network"),
        "not distributed:\n{plan}"
    );
}
