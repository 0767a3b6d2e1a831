//! The lake as outside engines see it (issue 16): `tables/**/*.parquet` holds exactly the active
//! files after a restatement, a re-delivery, a late-data rebuild and a compaction, so DuckDB
//! counts what gpuledger counts; and two `serve` replicas on one PostgreSQL catalog and one S3
//! bucket compact and vacuum each table-day once, losing no file.

use std::fmt::Write as _;
use std::process::Command;

use rust_decimal::Decimal;
use serde_json::Value;

use crate::golden::{build_days, example, load_worked_example, run_ok};
use crate::support::{Ledger, describe, duckdb_available, ledgers, serve_command};

/// The tables and money columns compared; `gpu_samples` by rows only.
const COMPARED: [(&str, Option<&str>); 4] = [
    ("billing_lines", Some("billed_cost")),
    ("cost_entries", Some("amount")),
    ("gpu_hours", Some("cost")),
    ("gpu_samples", None),
];

/// Rows and exact money sum per compared table.
type Figures = Vec<(String, i64, Decimal)>;

fn decimal(value: &Value) -> Decimal {
    match value {
        Value::Null => Decimal::ZERO,
        Value::String(s) => s.parse().unwrap_or_else(|_| panic!("not a decimal: {s}")),
        other => other.to_string().parse().unwrap(),
    }
}

fn gpuledger_figures(ledger: &Ledger) -> Figures {
    COMPARED
        .iter()
        .map(|(table, money)| {
            let sum = money.map_or("'0'".to_string(), |m| format!("cast(sum({m}) as varchar)"));
            let rows = ledger.sql(&format!("select count(*) as n, {sum} as s from {table}"));
            (
                table.to_string(),
                rows[0]["n"].as_i64().unwrap(),
                decimal(&rows[0]["s"]),
            )
        })
        .collect()
}

/// The same figures from DuckDB over `<data>/tables/<table>/**/*.parquet`, without gpuledger.
fn duckdb_figures(ledger: &Ledger) -> Figures {
    let mut script = String::from("import duckdb, json\ncon = duckdb.connect()\nout = []\n");
    for (table, money) in COMPARED {
        let glob = ledger
            .data_dir()
            .join("tables")
            .join(table)
            .join("**/*.parquet");
        let sum = money.map_or("'0'".to_string(), |m| format!("cast(sum({m}) as varchar)"));
        writeln!(
            script,
            "out.append([{table:?}] + list(con.execute(\"select count(*), {sum} from read_parquet('{}', hive_partitioning = true, union_by_name = true)\").fetchone()))",
            glob.display()
        )
        .unwrap();
    }
    script.push_str("print(json.dumps(out))\n");
    let out = Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(out.status.success(), "duckdb: {}", describe(&out));
    let rows: Vec<Vec<Value>> = serde_json::from_slice(&out.stdout).unwrap();
    rows.iter()
        .map(|r| {
            (
                r[0].as_str().unwrap().to_string(),
                r[1].as_i64().unwrap(),
                decimal(&r[2]),
            )
        })
        .collect()
}

/// Asserts that DuckDB reads what gpuledger reads, and returns it.
fn same_figures(ledger: &Ledger, step: &str) -> Figures {
    let ours = gpuledger_figures(ledger);
    let theirs = duckdb_figures(ledger);
    assert_eq!(theirs, ours, "[{}] after {step}", ledger.backend);
    ours
}

fn build_day(ledger: &Ledger) -> String {
    build_days(ledger, "2026-11-02", "2026-11-02")
}

fn figure<'a>(figures: &'a Figures, table: &str) -> (i64, &'a Decimal) {
    let (_, rows, sum) = figures.iter().find(|(t, ..)| t == table).unwrap();
    (*rows, sum)
}

/// n2's GPU 0 from 02:00 to 03:00, sent late (the worked example had it only until 02:00).
fn late_telemetry() -> String {
    const DAY_MS: i64 = 1_793_577_600_000; // 2026-11-02T00:00:00Z
    let labels = r#"gpu="0",UUID="GPU-n2-0",modelName="NVIDIA",Hostname="n2""#;
    let mut text = String::new();
    for t in (2 * 3600..3 * 3600).step_by(30) {
        let ms = DAY_MS + t * 1000;
        writeln!(text, "DCGM_FI_PROF_SM_ACTIVE{{{labels}}} 0.900000 {ms}").unwrap();
        writeln!(text, "DCGM_FI_DEV_POWER_USAGE{{{labels}}} 400.000000 {ms}").unwrap();
    }
    text
}

#[test]
fn duckdb_over_the_table_globs_reads_what_gpuledger_reads_at_every_step() {
    if !duckdb_available() {
        return;
    }
    for ledger in ledgers() {
        load_worked_example(&ledger);
        let first = same_figures(&ledger, "the worked example");
        assert_eq!(
            figure(&first, "billing_lines"),
            (3, &"111".parse().unwrap())
        );

        // A restated bill (n1 at 120.00 instead of 96.00) and the rebuilt day.
        let a = example("billing.csv");
        let b = ledger.dir.path().join("restated.csv");
        let text = std::fs::read_to_string(&a).unwrap();
        std::fs::write(&b, text.replace(",96.00,96.00,", ",120.00,120.00,")).unwrap();
        ledger.ingest_ok("focus", &b, &[]);
        assert!(build_day(&ledger).contains("billed 135.00"));
        let restated = same_figures(&ledger, "a restatement and its rebuild");
        assert_eq!(
            figure(&restated, "billing_lines"),
            (3, &"135".parse().unwrap())
        );

        // The first bill delivered again wins again.
        ledger.ingest_ok("focus", &a, &[]);
        assert!(build_day(&ledger).contains("billed 111.00"));
        let again = same_figures(&ledger, "a re-delivery and its rebuild");
        assert_eq!(
            figure(&again, "billing_lines"),
            (3, &"111".parse().unwrap())
        );
        assert_eq!(
            figure(&again, "cost_entries").1,
            figure(&first, "cost_entries").1
        );

        // Late telemetry: 120 more samples, and the day's hours rebuilt.
        let late = ledger.dir.path().join("late.prom");
        std::fs::write(&late, late_telemetry()).unwrap();
        ledger.ingest_ok("dcgm", &late, &["--cluster", "demo"]);
        assert!(build_day(&ledger).contains("(balanced)"));
        let rebuilt = same_figures(&ledger, "late telemetry and its rebuild");
        assert_eq!(
            figure(&rebuilt, "gpu_samples").0,
            figure(&first, "gpu_samples").0 + 120
        );

        // Compaction: gpu_samples' two files of the day become one; nothing else moves.
        let out = run_ok(&ledger, &["compact", "--retain-superseded", "1h"]);
        assert!(out.contains("compacted 2 files into 1"), "{out}");
        let compacted = same_figures(&ledger, "a compaction");
        assert_eq!(
            compacted, rebuilt,
            "[{}] compaction moved a number",
            ledger.backend
        );
        assert_eq!(
            ledger.scalar(
                "select count(*) from system.files where table_name = 'gpu_samples' and active"
            ),
            1
        );
        // Nothing moved the ledger either: it is up to date, and still balances.
        assert!(build_day(&ledger).contains("ledger is up to date"));

        // Past the grace period, the vacuum deletes every retired object.
        let out = run_ok(&ledger, &["compact", "--retain-superseded", "0s"]);
        assert!(out.contains("compacted 0 files"), "{out}");
        let superseded = ledger.data_dir().join("_superseded");
        let left = walk(&superseded);
        assert!(left.is_empty(), "{left:?}");
        assert_eq!(same_figures(&ledger, "the vacuum"), rebuilt);
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}

/// Keys under `prefix` in `bucket` of the test command's S3-compatible server.
fn s3_keys(endpoint: &str, bucket: &str, prefix: &str) -> Vec<String> {
    let out = Command::new("curl")
        .args([
            "-fsS",
            &format!("{endpoint}/{bucket}?list-type=2&max-keys=10000&prefix={prefix}"),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "list bucket: {}", describe(&out));
    let xml = String::from_utf8(out.stdout).unwrap();
    let mut keys: Vec<String> = xml
        .split("<Key>")
        .skip(1)
        .filter_map(|s| s.split_once("</Key>").map(|(k, _)| k.to_string()))
        .collect();
    keys.sort();
    keys
}

#[test]
fn two_replicas_on_postgres_and_s3_compact_each_table_day_once_and_lose_no_file() {
    let (Ok(admin), Ok(endpoint)) = (
        std::env::var("GPULEDGER_TEST_POSTGRES"),
        std::env::var("GPULEDGER_TEST_S3"),
    ) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run the replica test: GPULEDGER_TEST_POSTGRES and GPULEDGER_TEST_S3"
        );
        eprintln!("skipped: two replicas (GPULEDGER_TEST_POSTGRES or GPULEDGER_TEST_S3 not set)");
        return;
    };
    let _ = admin;
    let postgres = ledgers()
        .into_iter()
        .find(|l| l.backend == "postgres")
        .expect("a PostgreSQL catalog");
    let bucket = format!("gpuledger-replicas-{}", std::process::id());
    let out = Command::new("curl")
        .args(["-fsS", "-X", "PUT", &format!("{endpoint}/{bucket}")])
        .output()
        .unwrap();
    assert!(out.status.success(), "create bucket: {}", describe(&out));
    let data = format!("s3://{bucket}/lake");
    let gpuledger = || {
        let mut command = Command::new(env!("CARGO_BIN_EXE_gpuledger"));
        command
            .args(["--data", &data, "--catalog", &postgres.catalog])
            .env_remove("GPULEDGER_DATA")
            .env_remove("GPULEDGER_CATALOG")
            .envs([
                ("AWS_ENDPOINT", endpoint.as_str()),
                ("AWS_ALLOW_HTTP", "true"),
                ("AWS_ACCESS_KEY_ID", "test"),
                ("AWS_SECRET_ACCESS_KEY", "test"),
                ("AWS_REGION", "us-east-1"),
            ]);
        command
    };
    let run = |args: &[&str]| {
        let out = gpuledger().args(args).output().unwrap();
        assert!(
            out.status.success(),
            "gpuledger {args:?}: {}",
            describe(&out)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let sql = |query: &str| -> Vec<Value> {
        serde_json::from_str(run(&["sql", query, "--format", "json"]).trim()).unwrap()
    };

    // Six small pushes of n1's GPU 0 on one day, ten minutes each, and the worked example's
    // catalog objects and bill, so that the replicas build a ledger too.
    run(&["apply", example("objects.yaml").to_str().unwrap()]);
    run(&["ingest", "focus", example("billing.csv").to_str().unwrap()]);
    const DAY_MS: i64 = 1_793_577_600_000; // 2026-11-02T00:00:00Z
    for push in 0..6 {
        let mut text = String::new();
        let labels = r#"gpu="0",UUID="GPU-n1-0",modelName="NVIDIA",Hostname="n1""#;
        for t in (push * 600..(push + 1) * 600).step_by(30) {
            writeln!(
                text,
                "DCGM_FI_PROF_SM_ACTIVE{{{labels}}} 0.500000 {}",
                DAY_MS + t * 1000
            )
            .unwrap();
        }
        let path = postgres.dir.path().join(format!("push-{push}.prom"));
        std::fs::write(&path, text).unwrap();
        run(&[
            "ingest",
            "dcgm",
            path.to_str().unwrap(),
            "--cluster",
            "demo",
        ]);
    }
    assert_eq!(sql("select count(*) as n from gpu_samples")[0]["n"], 120);

    let flags = [
        "--compact-interval",
        "1s",
        "--retain-superseded",
        "0s",
        "--ledger-interval",
        "1s",
        "--report-schedule",
        "off",
    ];
    let replicas = [
        serve_command(gpuledger(), &flags),
        serve_command(gpuledger(), &flags),
    ];
    // Both replicas build and compact; done when the day is one file per table, the ledger is
    // built, and nothing retired is left in the bucket. (Polled: no timing is asserted.)
    let settled = || {
        let files = sql(
            "select count(*) as n from system.files where table_name = 'gpu_samples' and active",
        );
        let built = sql("select count(*) as n from cost_entries");
        files[0]["n"] == 1
            && built[0]["n"].as_i64().unwrap_or(0) > 0
            && s3_keys(&endpoint, &bucket, "lake/_superseded/").is_empty()
            && s3_keys(&endpoint, &bucket, "lake/tables/").len()
                == sql("select count(*) as n from system.files where active")[0]["n"]
                    .as_u64()
                    .unwrap() as usize
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !settled() {
        assert!(
            std::time::Instant::now() < deadline,
            "the replicas did not settle: {:?}",
            sql("select table_name, path, active from system.files order by path")
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    drop(replicas);

    // Each table-day was compacted once (one compaction batch), by whichever replica held the
    // lease; every row is still there, in files that exist under tables/ and nowhere else.
    let compactions = sql(
        "select origin, count(*) as n from system.ingest_batches where source = 'compaction' group by origin order by origin",
    );
    assert!(!compactions.is_empty());
    for row in &compactions {
        assert_eq!(row["n"], 1, "{compactions:?}");
    }
    assert!(
        compactions
            .iter()
            .any(|r| r["origin"] == "compact gpu_samples 2026-11-02"),
        "{compactions:?}"
    );
    assert_eq!(sql("select count(*) as n from gpu_samples")[0]["n"], 120);
    let active: Vec<String> = sql("select path from system.files where active order by path")
        .iter()
        .map(|r| format!("lake/{}", r["path"].as_str().unwrap()))
        .collect();
    assert_eq!(s3_keys(&endpoint, &bucket, "lake/tables/"), active);
    // The ledger's day was built by one replica at a time: it balances, and the journal holds
    // the bill once.
    let out = run(&[
        "ledger",
        "check",
        "--from",
        "2026-11-02",
        "--to",
        "2026-11-02",
    ]);
    assert!(!out.contains("DOES NOT"), "{out}");
    assert_eq!(
        decimal(&sql("select cast(sum(billed_cost) as varchar) as s from billing_lines")[0]["s"]),
        "111".parse().unwrap()
    );
}
