//! The read commands (`sql`, `get`, `report`, `ledger check`, `ledger build`) on a `--data` that
//! holds no lake fail (exit 2) and create nothing; the CLI's SQL is read-only like the server's
//! unless `--allow-writes`.

use crate::golden::run_ok;
use crate::support::{describe, ledgers};

#[test]
fn read_commands_never_invent_a_lake() {
    for ledger in ledgers() {
        let backend = ledger.backend;
        for args in [
            &["sql", "select 1"][..],
            &["get", "node"],
            &["report", "weekly", "--week", "2026-W45"],
            &[
                "ledger",
                "check",
                "--from",
                "2026-11-02",
                "--to",
                "2026-11-02",
            ],
            &[
                "ledger",
                "build",
                "--from",
                "2026-11-02",
                "--to",
                "2026-11-02",
            ],
        ] {
            let out = ledger.run(args);
            assert_eq!(
                out.status.code(),
                Some(2),
                "[{backend}] {args:?}: {}",
                describe(&out)
            );
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr.contains("error: no gpuledger lake at "),
                "[{backend}] {args:?}: {stderr}"
            );
            assert!(
                !ledger.data_dir().exists(),
                "[{backend}] {args:?} made a lake"
            );
        }
        // `migrate` creates one; then reading it works and finds nothing.
        run_ok(&ledger, &["migrate"]);
        assert_eq!(
            ledger.scalar("select count(*) as n from gpu_hours"),
            serde_json::json!(0)
        );
    }
}

#[test]
fn the_cli_sql_is_read_only_unless_allowed() {
    let ledger = ledgers().remove(0);
    run_ok(&ledger, &["migrate"]);
    let out_file = ledger.dir.path().join("out.csv");
    let copy = format!("copy (select 1 as one) to '{}'", out_file.display());
    for statement in [
        copy.as_str(),
        "drop table gpu_hours",
        "set datafusion.execution.batch_size = 1",
    ] {
        let out = ledger.run(&["sql", statement]);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{statement}: {}",
            describe(&out)
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("--allow-writes"), "{statement}: {stderr}");
    }
    assert!(!out_file.exists());
    run_ok(&ledger, &["sql", "--allow-writes", &copy]);
    assert_eq!(std::fs::read_to_string(&out_file).unwrap(), "one\n1\n");
}
