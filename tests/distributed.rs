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

use crate::golden::{load_worked_example, run_golden_files_on};
use crate::support::{Ledger, Workers, ledgers};

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

/// `sql`'s physical plan, as `EXPLAIN` would indent it.
async fn plan(ctx: &SessionContext, sql: &str) -> String {
    let plan = ctx
        .sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    datafusion::physical_plan::displayable(plan.as_ref())
        .indent(true)
        .to_string()
}

const BY_TEAM: &str = "SELECT team, count(*) AS hours, sum(alloc_seconds) / 3600 AS held \
                       FROM gpu_hours GROUP BY team ORDER BY team";

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
        // 12 h of nlp, 1 h unattributed, 6 h of vision, and the unallocated hours (no team).
        assert_eq!(all.len(), 4, "{all:?}");
        for team in ["nlp", "vision"] {
            let ctx = session(&lake, Some(&workers), Scope::Team(team.into()), None);
            let shown = runtime.block_on(plan(&ctx, BY_TEAM));
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
        let held = server.rows(
            &admin_token,
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
}
