//! What every source shares: stdin, gzip, time pruning, the system tables.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::json;

use crate::support::{describe, ledgers};

fn scrape(gpu_temp: u32, at_ms: i64) -> String {
    format!("DCGM_FI_DEV_GPU_TEMP{{gpu=\"0\",UUID=\"GPU-1\",Hostname=\"n1\"}} {gpu_temp} {at_ms}\n")
}

#[test]
fn stdin_and_gzip_land_and_queries_prune_files_by_time() {
    for ledger in ledgers() {
        // Day one from stdin, day two gzip-compressed from a file. 1_790_000_000_000 ms = 2026-09-21T14:13:20Z.
        let day_ms = 86_400_000;
        let out = ledger.run_with_stdin(
            &["ingest", "dcgm", "-"],
            scrape(40, 1_790_000_000_000).as_bytes(),
        );
        assert!(out.status.success(), "{}", describe(&out));
        let gz = ledger.dir.path().join("day2.prom.gz");
        let mut encoder = flate2::write::GzEncoder::new(
            std::fs::File::create(&gz).unwrap(),
            flate2::Compression::default(),
        );
        encoder
            .write_all(scrape(50, 1_790_000_000_000 + day_ms).as_bytes())
            .unwrap();
        encoder.finish().unwrap();
        ledger.ingest_ok("dcgm", &gz, &[]);

        assert_eq!(
            ledger.scalar("select cast(sum(gpu_temp_c) as bigint) from gpu_samples"),
            90
        );
        let dates = ledger.sql(
            "select partition_date from system.files where table_name = 'gpu_samples' order by 1",
        );
        assert_eq!(
            dates,
            [
                json!({"partition_date": "2026-09-21"}),
                json!({"partition_date": "2026-09-22"})
            ]
        );

        // A filter on time reads only the second day's file: the catalog prunes before the scan.
        let query =
            "select gpu_temp_c from gpu_samples where ts >= timestamp '2026-09-22T00:00:00Z'";
        assert_eq!(ledger.scalar(query), 50.0);
        let plan = ledger.run(&["sql", &format!("explain {query}"), "--format", "csv"]);
        let plan = String::from_utf8_lossy(&plan.stdout);
        assert!(
            plan.contains("date=2026-09-22") && !plan.contains("date=2026-09-21"),
            "{plan}"
        );

        let batches = ledger.sql(
            "select source, origin, rows_landed from system.ingest_batches order by committed_at",
        );
        assert_eq!(batches[0]["origin"], "-");
        assert_eq!(batches[1]["rows_landed"], 1);
    }
}

#[test]
fn a_file_is_parsed_and_written_a_batch_of_rows_at_a_time() {
    let ledger = ledgers().remove(0);
    // Five scrapes of one GPU, 30 s apart: five rows, written two at a time (2 + 2 + 1).
    let path = ledger.dir.path().join("five.prom");
    let text: String = (0..5)
        .map(|i| scrape(40 + i, 1_790_000_000_000 + i64::from(i) * 30_000))
        .collect();
    std::fs::write(&path, text).unwrap();
    ledger.ingest_ok("dcgm", &path, &["--batch-rows", "2"]);
    let files =
        ledger.sql("select rows from system.files where table_name = 'gpu_samples' order by path");
    assert_eq!(
        files,
        [json!({"rows": 2}), json!({"rows": 2}), json!({"rows": 1})]
    );
    // 40 + 41 + 42 + 43 + 44
    assert_eq!(
        ledger.scalar("select cast(sum(gpu_temp_c) as bigint) from gpu_samples"),
        210
    );
    // Past 16 Mi rows a batch is refused (the parser numbers held rows in 32 bits).
    for refused in ["0", "16777217", "18446744073709551615"] {
        let out = ledger.run(&[
            "ingest",
            "dcgm",
            path.to_str().unwrap(),
            "--batch-rows",
            refused,
        ]);
        assert_eq!(out.status.code(), Some(2));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&format!(
                "'{refused}' is not a number of rows from 1 to 16777216"
            )),
            "{}",
            describe(&out)
        );
    }
}

#[test]
fn unknown_sources_and_missing_files_fail_clearly() {
    let ledger = ledgers().remove(0);
    let out = ledger.run(&["ingest", "nope", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown source 'nope'"),
        "{}",
        describe(&out)
    );
    let out = ledger.run(&["ingest", "focus", "/does/not/exist.csv"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("/does/not/exist.csv: cannot read input"),
        "{}",
        describe(&out)
    );
}

#[test]
fn the_lake_can_live_behind_a_url() {
    let dir = tempfile::tempdir().unwrap();
    let mut lakes = vec![(format!("file://{}/lake", dir.path().display()), vec![])];
    match std::env::var("GPULEDGER_TEST_S3") {
        Ok(endpoint) => {
            // A bucket of its own on the test command's S3-compatible server.
            let bucket = format!("gpuledger-{}", std::process::id());
            let out = Command::new("curl")
                .args(["-fsS", "-X", "PUT", &format!("{endpoint}/{bucket}")])
                .output()
                .unwrap();
            assert!(out.status.success(), "create bucket: {}", describe(&out));
            let env = vec![
                ("AWS_ENDPOINT", endpoint),
                ("AWS_ALLOW_HTTP", "true".into()),
                ("AWS_ACCESS_KEY_ID", "test".into()),
                ("AWS_SECRET_ACCESS_KEY", "test".into()),
                ("AWS_REGION", "us-east-1".into()),
            ];
            lakes.push((format!("s3://{bucket}/team-lake"), env));
        }
        Err(_) if std::env::var_os("CI").is_some() => {
            panic!("CI must test an S3 lake: GPULEDGER_TEST_S3 is not set")
        }
        Err(_) => eprintln!("skipped: S3 lake (GPULEDGER_TEST_S3 not set)"),
    }
    for (i, (data, env)) in lakes.into_iter().enumerate() {
        let catalog = format!(
            "sqlite://{}?mode=rwc",
            dir.path().join(format!("catalog-{i}.db")).display()
        );
        let run = |args: &[&str], stdin: &str| {
            let mut command = Command::new(env!("CARGO_BIN_EXE_gpuledger"));
            command
                .args(["--data", &data, "--catalog", &catalog])
                .args(args)
                .envs(env.iter().map(|(k, v)| (k, v)));
            command
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut child = command.spawn().unwrap();
            child
                .stdin
                .take()
                .unwrap()
                .write_all(stdin.as_bytes())
                .unwrap();
            child.wait_with_output().unwrap()
        };
        let out = run(&["ingest", "dcgm", "-"], &scrape(45, 1_790_000_000_000));
        assert!(out.status.success(), "{data}: {}", describe(&out));
        let out = run(
            &[
                "sql",
                "select gpu_temp_c, node from gpu_samples",
                "--format",
                "csv",
            ],
            "",
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "gpu_temp_c,node\n45.0,n1\n",
            "{data}: {}",
            describe(&out)
        );
    }
}
