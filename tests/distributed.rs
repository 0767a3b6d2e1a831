//! Queries on `gpuledger worker` processes (datafusion-distributed): the golden SQL files give
//! the same answers through three workers as in-process, team scoping holds through them, a
//! worker refuses what is not a coordinator of its cluster, and a worker lost mid-query fails
//! that query with an error that names it while the next query runs on the others.

use std::time::{Duration, Instant};

use datafusion::prelude::SessionContext;
use gpuledger_lake::{Lake, LakeConfig};
use gpuledger_query::distributed::Workers as WorkerList;
use gpuledger_query::user_query::{self, QueryLimits};
use gpuledger_query::{QueryError, Scope, SessionOptions};

use proptest::prelude::*;

use crate::golden::{land_worked_example, load_worked_example, run_golden_files_on};
use crate::order_independence::{
    day, delivery, files, lake_with_nodes, land, ledger_tables, scenario,
};
use crate::support::{Ledger, Workers, describe, ledgers, physical_plan, start_workers};

#[test]
fn golden_sql_files_hold_through_three_workers() {
    run_golden_files_on("tests/sql", load_worked_example, 3);
    run_golden_files_on("tests/sql/spot", crate::spot::load_spot_example, 3);
    run_golden_files_on(
        "tests/sql/training",
        crate::training::load_training_example,
        3,
    );
    run_golden_files_on("tests/sql/value", crate::value::load_value_example, 3);
}

fn open_lake(runtime: &tokio::runtime::Runtime, ledger: &Ledger) -> Lake {
    runtime
        .block_on(Lake::open(&LakeConfig {
            data: ledger.data_dir().display().to_string(),
            catalog: Some(ledger.catalog.clone()),
        }))
        .unwrap()
}

/// A session over `workers` (none: in-process) that splits every scan it can.
fn session(
    lake: &Lake,
    workers: Option<&Workers>,
    scope: Scope,
    secret: Option<&str>,
) -> SessionContext {
    let workers = match workers {
        Some(workers) => WorkerList::parse(&workers.list())
            .unwrap()
            .with_secret(secret.map(str::to_string))
            .with_bytes_per_task(Some(1)),
        None => WorkerList::default(),
    };
    gpuledger_query::new_session_with(
        lake,
        &SessionOptions {
            scope,
            memory_limit: Some(256 << 20),
            workers,
            decoded_files: None,
        },
    )
    .unwrap()
}

/// The rows of `sql`, one string each, or the error.
async fn rows(ctx: &SessionContext, sql: &str) -> Result<Vec<String>, String> {
    let batches = async { ctx.sql(sql).await?.collect().await }
        .await
        .map_err(|e| e.to_string())?;
    let table = arrow::util::pretty::pretty_format_batches(&batches)
        .unwrap()
        .to_string();
    Ok(table
        .lines()
        .filter(|l| l.starts_with("| "))
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect())
}

const BY_TEAM: &str = "SELECT team, count(*) AS hours, sum(alloc_seconds) / 3600 AS held \
                       FROM gpu_hours GROUP BY team ORDER BY team";

/// GPU-hours each team of the worked example held, as `server` answers them over HTTP: nlp 12,
/// unattributed 1, vision 6.
fn assert_worked_example_hours_held(server: &crate::support::Server, token: &str) {
    let held = server.rows(
        token,
        "SELECT team, sum(alloc_seconds) / 3600 AS held FROM gpu_hours \
         WHERE team IS NOT NULL GROUP BY team ORDER BY team",
    );
    assert_eq!(
        held,
        vec![
            serde_json::json!({"team": "nlp", "held": 12.0}),
            serde_json::json!({"team": "unattributed", "held": 1.0}),
            serde_json::json!({"team": "vision", "held": 6.0}),
        ]
    );
}

/// A team's session through the workers sees its own rows, the same as in-process, from a plan
/// whose stages carry the team's barrier to the workers; so do its table functions and the
/// HTTP API of a `serve --workers`.
#[test]
fn team_scoping_holds_on_the_workers() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for ledger in ledgers() {
        load_worked_example(&ledger);
        let workers = ledger.workers(3, &[]);
        let lake = open_lake(&runtime, &ledger);
        let admin = session(&lake, None, Scope::All, None);
        let all = runtime.block_on(rows(&admin, BY_TEAM)).unwrap();
        // EXPLAIN ANALYZE through the workers: the stages with their tasks' metrics.
        let analyzed = runtime
            .block_on(rows(
                &session(&lake, Some(&workers), Scope::All, None),
                &format!("EXPLAIN ANALYZE {BY_TEAM}"),
            ))
            .unwrap()
            .join("\n");
        assert!(
            analyzed.contains("DistributedExec") && analyzed.contains("output_rows"),
            "{analyzed}"
        );
        // 12 h of nlp, 1 h unattributed, 6 h of vision, and the unallocated hours (no team).
        assert_eq!(all.len(), 4, "{all:?}");
        for team in ["nlp", "vision"] {
            let ctx = session(&lake, Some(&workers), Scope::Team(team.into()), None);
            let shown = runtime.block_on(physical_plan(&ctx, BY_TEAM));
            assert!(
                shown.contains("DistributedExec") && shown.contains("TeamRowsExec"),
                "{shown}"
            );
            let own = runtime.block_on(rows(&ctx, BY_TEAM)).unwrap();
            let expected: Vec<String> = all
                .iter()
                .filter(|r| r.starts_with(&format!("| {team} |")))
                .cloned()
                .collect();
            assert_eq!(own, expected, "[{}] {team}", ledger.backend);
            let costs =
                "SELECT team, round(total_cost, 6) FROM team_costs('2026-11-02', '2026-11-03')";
            let admin_costs = runtime.block_on(rows(&admin, costs)).unwrap();
            let team_costs = runtime.block_on(rows(&ctx, costs)).unwrap();
            assert_eq!(
                team_costs,
                admin_costs
                    .iter()
                    .filter(|r| r.starts_with(&format!("| {team} |")))
                    .cloned()
                    .collect::<Vec<_>>()
            );
        }

        let server = ledger.serve(&["--workers", &workers.list(), "--worker-split-bytes", "1"]);
        let nlp = ledger.token("read", Some("nlp"));
        let seen = server.rows(&nlp, "SELECT DISTINCT team FROM gpu_hours");
        assert_eq!(seen, vec![serde_json::json!({"team": "nlp"})]);
        let admin_token = ledger.token("admin", None);
        assert_worked_example_hours_held(&server, &admin_token);
        // A worker's error keeps its class: a value past the cap (evaluated in the scan's
        // stage, on a worker) is 422 / 54000 as in-process.
        let (status, body) = server.sql(
            &admin_token,
            "SELECT max(length(repeat(team, 100000000))) FROM gpu_hours",
        );
        assert_eq!(
            (status, body["sqlstate"].as_str()),
            (422, Some("54000")),
            "{body}"
        );
        assert!(
            body["detail"]
                .as_str()
                .unwrap()
                .starts_with("repeat: the result would be"),
            "{body}"
        );
    }
}

/// Workers started with a secret run only the plans of coordinators that present it.
#[test]
fn workers_refuse_coordinators_without_the_secret() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let ledger = ledgers().remove(0);
    load_worked_example(&ledger);
    let workers = ledger.workers(2, &["--worker-secret", "s3cret-of-the-cluster"]);
    let lake = open_lake(&runtime, &ledger);
    let expected = runtime
        .block_on(rows(&session(&lake, None, Scope::All, None), BY_TEAM))
        .unwrap();
    for presented in [None, Some("guess")] {
        let ctx = session(&lake, Some(&workers), Scope::All, presented);
        let error = runtime.block_on(rows(&ctx, BY_TEAM)).unwrap_err();
        assert!(
            error.contains("did not present the cluster's worker secret"),
            "{presented:?}: {error}"
        );
    }
    let ctx = session(
        &lake,
        Some(&workers),
        Scope::All,
        Some("s3cret-of-the-cluster"),
    );
    assert_eq!(runtime.block_on(rows(&ctx, BY_TEAM)).unwrap(), expected);
}

/// A CA of the test's own and a certificate it signed for 127.0.0.1: (ca.pem, cert.pem, key.pem).
fn loopback_certificate(dir: &std::path::Path) -> [std::path::PathBuf; 3] {
    let path = |name: &str| dir.join(name);
    let openssl = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run openssl");
        assert!(out.status.success(), "openssl {args:?}: {}", describe(&out));
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=gpuledger test CA",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        "key.pem",
        "-out",
        "worker.csr",
    ]);
    std::fs::write(path("san.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "worker.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        "san.ext",
        "-out",
        "cert.pem",
    ]);
    [path("ca.pem"), path("cert.pem"), path("key.pem")]
}

/// Workers serving TLS with a certificate of the cluster's CA, which they also trust to read each
/// other's shuffles: a coordinator that trusts the CA gets the in-process answers (in a plan
/// whose stages read each other across workers), in a session and through `serve`'s flags; one
/// that trusts only the public roots is refused at the handshake with an error that says why; one
/// that speaks plain HTTP to them gets no rows; the secret is still checked; and a worker given a
/// key that is not one does not start.
#[test]
fn workers_over_tls_answer_only_coordinators_that_trust_their_certificate() {
    use gpuledger_query::distributed::WorkerChannels;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let ledger = ledgers().remove(0);
    load_worked_example(&ledger);
    let [ca, cert, key] = loopback_certificate(ledger.dir.path());
    let (ca, cert, key) = (
        ca.to_str().unwrap(),
        cert.to_str().unwrap(),
        key.to_str().unwrap(),
    );
    let secret = "s3cret-of-the-cluster";
    let workers = ledger.workers(
        3,
        &[
            "--tls-cert",
            cert,
            "--tls-key",
            key,
            "--worker-ca",
            ca,
            "--worker-secret",
            secret,
        ],
    );
    let lake = open_lake(&runtime, &ledger);
    let over = |scheme: &str, ca_pem: Option<&[u8]>, secret: &str| {
        let list: Vec<String> = workers
            .addresses
            .iter()
            .map(|address| format!("{scheme}://{address}"))
            .collect();
        let workers = WorkerList::parse(&list.join(","))
            .unwrap()
            .with_channels(WorkerChannels::new(ca_pem))
            .with_secret(Some(secret.to_string()))
            .with_bytes_per_task(Some(1));
        gpuledger_query::new_session_with(
            &lake,
            &SessionOptions {
                scope: Scope::All,
                memory_limit: Some(256 << 20),
                workers,
                decoded_files: None,
            },
        )
        .unwrap()
    };
    let ca_pem = std::fs::read(ca).unwrap();
    // Grouped by a key other than the scan's order: a shuffle stage reads the scan's tasks.
    let by_node = "SELECT node, count(*) AS samples, round(avg(sm_active), 6) AS sm \
                   FROM gpu_samples GROUP BY node ORDER BY node";
    let in_process = session(&lake, None, Scope::All, None);
    for sql in [BY_TEAM, by_node] {
        let expected = runtime.block_on(rows(&in_process, sql)).unwrap();
        assert!(!expected.is_empty(), "{sql}");
        let trusting = over("https", Some(&ca_pem), secret);
        let plan = runtime.block_on(physical_plan(&trusting, sql));
        assert!(plan.contains("DistributedExec"), "{plan}");
        assert_eq!(
            runtime.block_on(rows(&trusting, sql)).unwrap(),
            expected,
            "{sql}"
        );
    }
    let plan = runtime.block_on(physical_plan(
        &over("https", Some(&ca_pem), secret),
        by_node,
    ));
    assert!(plan.contains("NetworkShuffleExec"), "{plan}");

    let untrusting = over("https", None, secret);
    let error = runtime.block_on(rows(&untrusting, BY_TEAM)).unwrap_err();
    assert!(
        error.contains("over TLS") && error.contains("certificate"),
        "{error}"
    );
    let plain = over("http", Some(&ca_pem), secret);
    assert!(runtime.block_on(rows(&plain, BY_TEAM)).is_err());
    let guessing = over("https", Some(&ca_pem), "guess");
    let error = runtime.block_on(rows(&guessing, BY_TEAM)).unwrap_err();
    assert!(
        error.contains("did not present the cluster's worker secret"),
        "{error}"
    );

    // `serve` with the flags users give it.
    let list: Vec<String> = workers
        .addresses
        .iter()
        .map(|a| format!("https://{a}"))
        .collect();
    let server = ledger.serve(&[
        "--workers",
        &list.join(","),
        "--worker-ca",
        ca,
        "--worker-secret",
        secret,
        "--worker-split-bytes",
        "1",
    ]);
    assert_worked_example_hours_held(&server, &ledger.token("admin", None));

    // A key that is not one, a CA's file as a worker's CA that holds no certificate, and a key
    // that is not the certificate's: the worker says which flag and stops before it listens.
    let ca_key = ledger.dir.path().join("ca.key");
    let ca_key = ca_key.to_str().unwrap();
    for (args, said) in [
        (
            ["--tls-cert", cert, "--tls-key", ca, "--worker-ca", ca],
            "--tls-key",
        ),
        (
            ["--tls-cert", cert, "--tls-key", key, "--worker-ca", key],
            "--worker-ca",
        ),
        (
            ["--tls-cert", cert, "--tls-key", ca_key, "--worker-ca", ca],
            "certificate or key (--tls-cert, --tls-key) is not usable",
        ),
    ] {
        let out = ledger.run(&[&["worker", "--listen", "127.0.0.1:0"][..], &args].concat());
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(said) && !stderr.contains("listening"),
            "{args:?}: {stderr}"
        );
    }
    let out = ledger.run(&["worker", "--listen", "127.0.0.1:0", "--tls-cert", cert]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--tls-key"),
        "{}",
        describe(&out)
    );
}

/// The worker doing a query's work killed while the query runs: the query fails with an error naming the
/// worker's address, and the next query runs on the workers left, with the right answer.
#[test]
fn a_worker_lost_mid_query_fails_it_clearly() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let ledger = ledgers().remove(0);
    load_worked_example(&ledger);
    let mut workers = ledger.workers(3, &[]);
    let lake = open_lake(&runtime, &ledger);
    let expected = runtime
        .block_on(rows(&session(&lake, None, Scope::All, None), BY_TEAM))
        .unwrap();
    let ctx = session(&lake, Some(&workers), Scope::All, None);
    // Billions of joined rows: minutes of work on the workers, unless one dies.
    let heavy = "SELECT count(*) FROM gpu_samples a JOIN gpu_samples b ON a.gpu_uuid = b.gpu_uuid \
                 JOIN gpu_samples c ON b.gpu_uuid = c.gpu_uuid";
    let running = {
        let ctx = ctx.clone();
        let limits = QueryLimits {
            timeout: Duration::from_secs(600),
            ..QueryLimits::default()
        };
        runtime.spawn(async move { user_query::run(&ctx, heavy, &limits).await })
    };
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        !running.is_finished(),
        "the heavy query ended before the kill"
    );
    // The worker with the join's work (with two GPUs, one or two workers have it all).
    let busiest = workers.busiest();
    let killed = workers.addresses[busiest].clone();
    workers.kill(busiest);
    let killed_at = Instant::now();
    let error = runtime.block_on(running).unwrap().unwrap_err();
    assert!(killed_at.elapsed() < Duration::from_secs(30));
    let QueryError::WorkerLost { down, .. } = &error else {
        panic!("not a lost worker: {error}");
    };
    assert_eq!(down, &killed);
    assert!(
        error.to_string().starts_with(&format!(
            "a query worker stopped while the query ran on it ({killed} does not answer), so the query did not complete: run it again"
        )),
        "{error}"
    );
    // The coordinator has left the dead worker out of its plans.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(runtime.block_on(rows(&ctx, BY_TEAM)).unwrap(), expected);

    // Over HTTP, a `serve` coordinating the two workers left: 503 / 58000, the address kept
    // for the log, and the next query answered by the last worker.
    let live: Vec<String> = (0..3)
        .filter(|&i| i != busiest)
        .map(|i| workers.addresses[i].clone())
        .collect();
    let server = ledger.serve(&[
        "--workers",
        &live.join(","),
        "--worker-split-bytes",
        "1",
        "--query-timeout",
        "600s",
    ]);
    let admin = ledger.token("admin", None);
    // Prometheus sees which workers get work.
    let worker_up = |worker: &str| -> String {
        let metrics = server.metrics();
        let line = format!("gpuledger_query_worker_up{{worker=\"{worker}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .unwrap_or_else(|| panic!("no {line}in {metrics}"))
            .to_string()
    };
    assert_eq!(
        live.iter().map(|w| worker_up(w)).collect::<Vec<_>>(),
        ["1", "1"]
    );
    let mut killed = String::new();
    let (status, body) = std::thread::scope(|scope| {
        let request = scope.spawn(|| server.sql(&admin, heavy));
        std::thread::sleep(Duration::from_secs(2));
        assert!(
            !request.is_finished(),
            "the heavy query ended before the kill"
        );
        let busiest = workers.busiest();
        killed.clone_from(&workers.addresses[busiest]);
        workers.kill(busiest);
        request.join().unwrap()
    });
    assert_eq!(
        (status, body["sqlstate"].as_str(), body["detail"].as_str()),
        (
            503,
            Some("58000"),
            Some(
                "a query worker stopped while the query ran on it, so the query did not complete: run it again"
            )
        ),
        "{body}"
    );
    std::thread::sleep(Duration::from_secs(2));
    let survivor = live.iter().find(|w| **w != killed).unwrap();
    assert_eq!(
        (worker_up(&killed), worker_up(survivor)),
        ("0".into(), "1".into())
    );
    let held = server.rows(
        &admin,
        "SELECT count(*) AS n FROM gpu_hours WHERE team = 'nlp'",
    );
    assert_eq!(held, vec![serde_json::json!({"n": 12})]);
}

/// The weekly report computed through three workers is the in-process report, byte for byte.
#[test]
fn the_weekly_report_is_the_same_through_workers() {
    for ledger in ledgers() {
        crate::report::load_report_example(&ledger);
        let args = ["report", "weekly", "--week", "2026-W45", "--format", "json"];
        let here = ledger.run(&args);
        assert!(here.status.success(), "{}", describe(&here));
        let workers = ledger.workers(3, &[]);
        let list = workers.list();
        let through = ledger.run(
            &[
                &args[..],
                &["--workers", &list, "--worker-split-bytes", "1"],
            ]
            .concat(),
        );
        assert!(through.status.success(), "{}", describe(&through));
        assert_eq!(
            String::from_utf8_lossy(&through.stdout),
            String::from_utf8_lossy(&here.stdout),
            "[{}]",
            ledger.backend
        );
        crate::report::check_json(&serde_json::from_slice(&through.stdout).unwrap());
    }
}

/// A worker that dies as the build's first task reaches it: the day is built again on the
/// others, nothing of the lost attempt is kept, and the ledger is the one an in-process build
/// makes, balanced.
#[test]
fn a_build_that_loses_a_worker_builds_the_day_again_without_it() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let reference = ledgers().remove(0);
    load_worked_example(&reference);
    let expected = runtime.block_on(ledger_tables(&open_lake(&runtime, &reference)));

    let ledger = ledgers().remove(0);
    land_worked_example(&ledger);
    let workers = ledger.workers(3, &[]);
    let dying = workers.dying_on_first_task(0);
    let list = format!("{dying},{},{}", workers.addresses[1], workers.addresses[2]);
    let build = "ledger build --from 2026-11-02 --to 2026-11-02 --worker-split-bytes 1";
    let out = ledger.run(&[build.split(' ').collect(), vec!["--workers", &list]].concat());
    assert!(out.status.success(), "{}", describe(&out));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        stdout.contains("2026-11-02: 24 hours recomputed") && stdout.contains("(balanced)"),
        "{stdout}"
    );
    // The per-GPU step itself ran on the two workers left, one task each.
    assert!(
        stdout.contains("; GPU-hours computed in 2 tasks on query workers"),
        "{stdout}"
    );
    assert!(
        stderr.contains(&format!(
            "warning: query worker {dying} was lost under the day's inputs: nothing of that attempt was kept, and the day was built again without it"
        )),
        "{stderr}"
    );
    let lake = open_lake(&runtime, &ledger);
    assert_eq!(runtime.block_on(ledger_tables(&lake)), expected);
    // One batch of the ledger's tables for the day, and no file of the lost attempt on disk.
    let files = ledger.sql(
        "SELECT count(DISTINCT batch_id) AS batches, count(*) AS files FROM system.files \
         WHERE table_name IN ('gpu_hours', 'allocations', 'cost_entries') AND active",
    );
    let on_disk: usize = ["gpu_hours", "allocations", "cost_entries"]
        .iter()
        .map(|table| walk(&ledger.data_dir().join("tables").join(table)))
        .sum();
    assert_eq!(
        files,
        vec![serde_json::json!({"batches": 1, "files": on_disk})]
    );
}

/// Files under `dir`, at any depth.
fn walk(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .map(|e| e.unwrap().path())
            .map(|p| if p.is_dir() { walk(&p) } else { 1 })
            .sum()
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(8).min(3),
        max_shrink_iters: 0,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// The order-independence scenarios (tests/order_independence.rs): their files landed in
    /// their drawn order, then `ledger build` through three workers, give the ledger an
    /// in-process build of the same facts gives; read through the workers, the same again.
    #[test]
    fn the_property_scenarios_build_the_same_ledger_through_workers(s in scenario(), d in delivery()) {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let reference_dir = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (expected, lake) = runtime.block_on(async {
            let reference = lake_with_nodes(reference_dir.path()).await;
            let lake = lake_with_nodes(dir.path()).await;
            for file in files(&s, &d) {
                land(&reference, &file).await;
                land(&lake, &file).await;
            }
            let declared = gpuledger_build::declared(reference.catalog()).await.unwrap();
            gpuledger_build::build_ledger(&reference, &declared, [day()]).await.unwrap();
            (ledger_tables(&reference).await, lake)
        });
        let gpuledger = || {
            let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_gpuledger"));
            command.arg("--data").arg(dir.path()).env_remove("GPULEDGER_CATALOG");
            command
        };
        let workers = start_workers(gpuledger, 3, &[]);
        let out = gpuledger()
            .args(["ledger", "build", "--from", "2026-11-02", "--to", "2026-11-02"])
            .args(["--workers", &workers.list(), "--worker-split-bytes", "1"])
            .output()
            .unwrap();
        prop_assert!(out.status.success(), "{}", describe(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        prop_assert!(stdout.contains("tasks on query workers"), "{}", stdout);
        prop_assert_eq!(&runtime.block_on(ledger_tables(&lake)), &expected);
        let through = session(&lake, Some(&workers), Scope::All, None);
        let total = "SELECT count(*), round(sum(amount), 6) FROM cost_entries";
        prop_assert_eq!(
            runtime.block_on(rows(&through, total)).unwrap(),
            runtime.block_on(rows(&session(&lake, None, Scope::All, None), total)).unwrap()
        );
    }
}

/// A query past its time limit stops on the workers too (their `--query-timeout` is the
/// coordinator's): their CPU goes quiet once the coordinator has answered 422 / 57014, where
/// the heavy join would have kept them busy for minutes.
#[test]
fn a_timed_out_query_stops_on_the_workers() {
    let ledger = ledgers().remove(0);
    load_worked_example(&ledger);
    let mut workers = ledger.workers(2, &["--query-timeout", "2s"]);
    let server = ledger.serve(&[
        "--workers",
        &workers.list(),
        "--worker-split-bytes",
        "1",
        "--query-timeout",
        "2s",
    ]);
    let admin = ledger.token("admin", None);
    let heavy = "SELECT count(*) FROM gpu_samples a JOIN gpu_samples b ON a.gpu_uuid = b.gpu_uuid \
                 JOIN gpu_samples c ON b.gpu_uuid = c.gpu_uuid";
    let before = workers.cpu_ticks();
    let (status, body) = server.sql(&admin, heavy);
    assert_eq!(
        (status, body["sqlstate"].as_str()),
        (422, Some("57014")),
        "{body}"
    );
    let busy = workers.cpu_ticks() - before;
    assert!(busy > 50, "the workers did the query's work: {busy} ticks");
    std::thread::sleep(Duration::from_secs(1));
    let settled = workers.cpu_ticks();
    std::thread::sleep(Duration::from_secs(3));
    let after = workers.cpu_ticks() - settled;
    // 3 s of two busy workers would be ~600 ticks; idle workers probe nothing.
    assert!(
        after < 30,
        "the workers went on for {after} ticks after the timeout"
    );
}

/// The Postgres port of a `serve --workers`: psql's own statements and the rewrites of the
/// Postgres port (PostgreSQL's functions, a correlated subquery's one-row aggregate) over
/// tables whose scans run on the workers.
#[test]
fn the_postgres_port_answers_through_workers() {
    let ledger = ledgers().remove(0);
    load_worked_example(&ledger);
    let workers = ledger.workers(2, &[]);
    let admin = ledger.token("admin", None);
    let server = ledger.serve(&["--workers", &workers.list(), "--worker-split-bytes", "1"]);
    let out = crate::support::psql(
        &server,
        &admin,
        "disable",
        &["-t"],
        &[
            "select current_schema(), version() like 'PostgreSQL%', count(*) from gpu_hours where team = 'nlp'",
            "select t.name, (select h.node from gpu_hours h where h.team = t.name and h.gpu_index = 1 \
             and h.hour = timestamptz '2026-11-02 03:00:00+00') \
             from (select distinct team as name from gpu_hours where team = 'nlp') t",
            "select t.team, (select count(*) from gpu_hours h where h.team = t.team) from \
             (select distinct team from gpu_hours where team is not null) t order by 1",
        ],
    );
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "public|t|12\nnlp|n1\nnlp|12\nunattributed|1\nvision|6\n"
    );
}
