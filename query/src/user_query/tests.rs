//! Users' SQL through a limited session: team scoping that SQL cannot get around, read-only
//! refusals, and the memory, time and result limits.

use std::time::Duration;

use arrow::array::AsArray;
use arrow::datatypes::Int64Type;
use gpuledger_ingest::pipeline::Source;
use gpuledger_lake::Lake;

use super::{QueryLimits, run};
use crate::error::QueryError;
use crate::scope::Scope;
use crate::session::{SessionOptions, new_session_with};
use crate::test_lake::lake_with;

/// Three requests of team `nlp` and two of team `vision`, on 2026-11-02.
const TOKENS: &str = r#"{"ts": "2026-11-02T01:00:00Z", "request_id": "a", "team": "nlp", "model": "m", "input_tokens": 10, "output_tokens": 1}
{"ts": "2026-11-02T02:00:00Z", "request_id": "b", "team": "nlp", "model": "m", "input_tokens": 20, "output_tokens": 2}
{"ts": "2026-11-02T03:00:00Z", "request_id": "c", "team": "nlp", "model": "m", "input_tokens": 30, "output_tokens": 3}
{"ts": "2026-11-02T04:00:00Z", "request_id": "d", "team": "vision", "model": "m", "input_tokens": 400, "output_tokens": 4}
{"ts": "2026-11-02T05:00:00Z", "request_id": "e", "team": "vision", "model": "m", "input_tokens": 500, "output_tokens": 5}
"#;

async fn lake_with_two_teams() -> (tempfile::TempDir, Lake) {
    lake_with(Source::Tokens, "tokens.jsonl", [TOKENS.to_string()]).await
}

fn options(scope: Scope) -> SessionOptions {
    SessionOptions {
        scope,
        memory_limit: Some(32 << 20),
        ..SessionOptions::default()
    }
}

async fn single_i64(lake: &Lake, scope: Scope, sql: &str) -> Result<i64, QueryError> {
    let ctx = new_session_with(lake, &options(scope))?;
    let result = run(&ctx, sql, &QueryLimits::default()).await?;
    let batch = &result.batches[0];
    Ok(batch.column(0).as_primitive::<Int64Type>().value(0))
}

fn nlp() -> Scope {
    Scope::Team("nlp".into())
}

#[tokio::test]
async fn a_team_sees_only_its_rows_however_the_query_is_written() {
    let (_dir, lake) = lake_with_two_teams().await;
    // Everyone: 10+20+30+400+500 = 960 input tokens; nlp alone: 10+20+30 = 60.
    let total = "select sum(input_tokens) from token_usage";
    assert_eq!(single_i64(&lake, Scope::All, total).await.unwrap(), 960);
    assert_eq!(single_i64(&lake, nlp(), total).await.unwrap(), 60);

    let ways_around = [
        "select sum(input_tokens) from token_usage where team = 'vision' or true",
        "select sum(input_tokens) from (select * from token_usage union all \
         select * from gpuledger.public.token_usage)",
        "select sum(input_tokens) from token_usage where request_id in \
         (select request_id from token_usage where team <> 'nlp') or true",
        "with t as (select * from public.token_usage) select sum(input_tokens) from t",
    ];
    // The UNION reads the same 60 twice; nothing else can reach the other team's 900.
    for (sql, expected) in ways_around.iter().zip([60, 120, 60, 60]) {
        assert_eq!(
            single_i64(&lake, nlp(), sql).await.unwrap(),
            expected,
            "{sql}"
        );
    }
}

#[tokio::test]
async fn a_team_does_not_see_tables_or_functions_whose_rows_belong_to_no_team() {
    let (_dir, lake) = lake_with_two_teams().await;
    // gpu_samples, gpu_samples_extra, billing_lines, quarantine and system.* (files,
    // quarantine) carry no team: 6 tables for everyone, none for a team.
    let hidden = "select count(*) from information_schema.tables where table_name in \
        ('gpu_samples', 'gpu_samples_extra', 'billing_lines', 'quarantine', 'files')";
    assert_eq!(single_i64(&lake, Scope::All, hidden).await.unwrap(), 6);
    assert_eq!(single_i64(&lake, nlp(), hidden).await.unwrap(), 0);
    for sql in [
        "select count(*) from billing_lines",
        "select count(*) from system.files",
        "select count(*) from gpuledger.system.quarantine",
    ] {
        let error = single_i64(&lake, nlp(), sql).await.unwrap_err();
        assert!(error.to_string().contains("not found"), "{sql}: {error}");
    }
    let error = single_i64(
        &lake,
        nlp(),
        "select count(*) from idle_summary('2026-11-02', '2026-11-03')",
    )
    .await
    .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("idle_summary(…) is not available to a token scoped to team 'nlp'"),
        "{error}"
    );
    // A misspelt name is told the nearest table the session has, never one the team cannot read.
    let error = single_i64(&lake, Scope::All, "select count(*) from token_usages")
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .ends_with("not found; did you mean 'token_usage'?"),
        "{error}"
    );
    let error = single_i64(&lake, Scope::All, "select count(*) from system.file")
        .await
        .unwrap_err();
    assert!(
        error.to_string().ends_with("did you mean 'system.files'?"),
        "{error}"
    );
    let error = single_i64(&lake, nlp(), "select count(*) from billing_line")
        .await
        .unwrap_err();
    assert!(!error.to_string().contains("did you mean"), "{error}");
    let error = single_i64(&lake, Scope::All, "select count(*) from zzz")
        .await
        .unwrap_err();
    assert!(!error.to_string().contains("did you mean"), "{error}");
    // Values generated by DataFusion itself stay available.
    let series = "select count(*) from generate_series(1, 3)";
    assert_eq!(single_i64(&lake, nlp(), series).await.unwrap(), 3);
}

#[tokio::test]
async fn table_functions_are_filtered_to_the_team() {
    let (_dir, lake) = lake_with_two_teams().await;
    // No serving workload is known, so each team's requests form their own rows, labelled by
    // the request's team: 3 for nlp and 2 for vision.
    let requests = "select cast(sum(requests) as bigint) from \
        unit_economics('2026-11-02', '2026-11-03')";
    assert_eq!(single_i64(&lake, Scope::All, requests).await.unwrap(), 5);
    assert_eq!(single_i64(&lake, nlp(), requests).await.unwrap(), 3);
}

#[tokio::test]
async fn anything_but_a_query_is_refused_before_it_runs() {
    let (dir, lake) = lake_with_two_teams().await;
    let target = dir.path().join("copied.csv");
    for sql in [
        "CREATE EXTERNAL TABLE pw (line varchar) STORED AS CSV LOCATION '/etc/passwd'".to_string(),
        format!("COPY (select 1) TO '{}' STORED AS CSV", target.display()),
        "COPY token_usage TO '/tmp/leak.parquet'".to_string(),
        "CREATE TABLE t AS SELECT 1".to_string(),
        "CREATE VIEW v AS SELECT * FROM token_usage".to_string(),
        "INSERT INTO token_usage SELECT * FROM token_usage".to_string(),
        "DROP TABLE token_usage".to_string(),
        "SET datafusion.runtime.memory_limit = '100G'".to_string(),
    ] {
        let error = single_i64(&lake, Scope::All, &sql).await.unwrap_err();
        assert!(
            matches!(&error, QueryError::Refused(m) if m.starts_with("only read-only queries")),
            "{sql}: {error:?}"
        );
    }
    assert!(!target.exists());
}

#[tokio::test]
async fn a_query_past_its_memory_limit_fails_and_the_next_one_runs() {
    let (_dir, lake) = lake_with_two_teams().await;
    // Sorting 50 M generated rows needs ~400 MB: far past the 32 MiB limit, with no spilling.
    let greedy = "select count(*) from (select value from generate_series(1, 50000000) \
        order by value desc limit 10000000)";
    let error = single_i64(&lake, Scope::All, greedy).await.unwrap_err();
    let root = error
        .datafusion_root()
        .map(std::string::ToString::to_string)
        .unwrap_or_default();
    assert!(root.contains("Resources exhausted"), "{error}");
    let total = "select sum(input_tokens) from token_usage";
    assert_eq!(single_i64(&lake, Scope::All, total).await.unwrap(), 960);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_past_its_time_limit_is_stopped() {
    let (_dir, lake) = lake_with_two_teams().await;
    let ctx = new_session_with(&lake, &options(Scope::All)).unwrap();
    let limits = QueryLimits {
        timeout: Duration::from_millis(50),
        ..QueryLimits::default()
    };
    // 10⁹ pairs: seconds of work in operators that rarely yield.
    let slow = "select sum(a.value * b.value) from generate_series(1, 31623) a \
        cross join generate_series(1, 31623) b";
    let error = run(&ctx, slow, &limits).await.unwrap_err();
    assert!(
        matches!(error, QueryError::Timeout(t) if t == Duration::from_millis(50)),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_result_past_its_size_limit_is_refused() {
    let (_dir, lake) = lake_with_two_teams().await;
    let ctx = new_session_with(&lake, &options(Scope::All)).unwrap();
    let limits = QueryLimits {
        max_result_bytes: 1 << 20,
        ..QueryLimits::default()
    };
    // 1 M int64 values are 8 MB.
    let error = run(
        &ctx,
        "select value from generate_series(1, 1000000)",
        &limits,
    )
    .await
    .unwrap_err();
    assert!(matches!(error, QueryError::ResultTooLarge { limit_bytes } if limit_bytes == 1 << 20));
    assert_eq!(
        error.to_string(),
        "the result is larger than 1 MiB: aggregate it, or add LIMIT"
    );
}

/// `n` copies of `term` joined by `op`.
fn chain(term: &str, op: &str, n: usize) -> String {
    vec![term; n].join(op)
}

#[tokio::test]
async fn deep_or_huge_statements_are_refused_before_planning() {
    let (_dir, lake) = lake_with_two_teams().await;
    let union = vec!["select 1 as x"; 3000].join(" union all ");
    let statements = [
        format!("select {}", chain("1", "+", 2_000)),
        format!("select {}", chain("1", "+", 20_000)),
        format!("select {}", chain("'a'", "||", 5_000)),
        format!("select 1 where {}", chain("true", " and ", 5_000)),
        format!("select 1 where {}", chain("false", " or ", 5_000)),
        format!("select count(*) from ({union})"),
        format!("select {}", "(".repeat(200) + "1" + &")".repeat(200)),
    ];
    for sql in &statements {
        let error = single_i64(&lake, Scope::All, sql).await.unwrap_err();
        assert!(
            matches!(&error, QueryError::StatementTooComplex(_)),
            "{}…: {error:?}",
            &sql[..60]
        );
        assert!(
            error
                .to_string()
                .starts_with("the statement is too complex to plan: "),
            "{error}"
        );
    }
    let error = single_i64(
        &lake,
        Scope::All,
        &format!("select 1 {}", " ".repeat(2 << 20)),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(error, QueryError::StatementTooLarge { limit, .. } if limit == 1 << 20),
        "{error:?}"
    );
    // The service goes on.
    let total = "select sum(input_tokens) from token_usage";
    assert_eq!(single_i64(&lake, Scope::All, total).await.unwrap(), 960);
}

/// The test thread has 2 MiB of stack, as a tokio worker has: a 500-term sum plans and runs on a
/// query thread of the query runtime.
#[tokio::test]
async fn a_deep_statement_within_the_bounds_plans_and_runs_on_the_query_runtime() {
    let (_dir, lake) = lake_with_two_teams().await;
    let sum = format!("select cast({} as bigint)", chain("1", "+", 500));
    assert_eq!(single_i64(&lake, Scope::All, &sum).await.unwrap(), 500);
    let union = vec!["select 1 as x"; 200].join(" union all ");
    let count = format!("select count(*) from ({union})");
    assert_eq!(single_i64(&lake, Scope::All, &count).await.unwrap(), 200);
}

#[tokio::test]
async fn engine_settings_are_refused_however_they_are_quoted() {
    let (_dir, lake) = lake_with_two_teams().await;
    for sql in [
        r#"SET "datafusion"."runtime"."memory_limit" = '40G'"#,
        r#"SET "datafusion.runtime.temp_directory" = '/tmp'"#,
        r#"SET DataFusion.Execution.Target_Partitions = 1"#,
        "RESET datafusion.runtime.memory_limit",
        "RESET ALL",
    ] {
        let error = single_i64(&lake, nlp(), sql).await.unwrap_err();
        match &error {
            QueryError::Refused(message) => assert!(
                // DataFusion's own parser reads RESET: the planner refuses it.
                message.starts_with("only read-only queries are allowed ("),
                "{sql}: {message}"
            ),
            other => panic!("{sql}: {other:?}"),
        }
    }
}

/// Team `vision` has requests of 400 and 500 input tokens. An expression that fails on one of
/// vision's rows would tell nlp what vision's rows hold; in a team session it never sees them.
#[tokio::test]
async fn a_teams_predicates_never_see_another_teams_rows() {
    let (_dir, lake) = lake_with_two_teams().await;
    let oracle = |tokens: i64| {
        format!(
            "select count(*) from token_usage where cast(case when team = 'vision' and \
             input_tokens = {tokens} then 'x' else '1' end as int) = 1"
        )
    };
    // 400 is vision's, 401 nobody's: the same answer, nlp's 3 rows.
    for tokens in [400, 401] {
        assert_eq!(
            single_i64(&lake, nlp(), &oracle(tokens)).await.unwrap(),
            3,
            "{tokens}"
        );
    }
    // Everyone's session does evaluate it on vision's row.
    assert!(single_i64(&lake, Scope::All, &oracle(400)).await.is_err());
    // Through a table function too: unit_economics over nlp's requests only.
    let function = "select count(*) from unit_economics('2026-11-02', '2026-11-03') where \
        cast(case when team = 'vision' then 'x' else '1' end as int) = 1";
    assert_eq!(single_i64(&lake, nlp(), function).await.unwrap(), 1);
}

#[tokio::test]
async fn explain_analyze_counts_only_the_teams_rows() {
    let (_dir, lake) = lake_with_two_teams().await;
    let ctx = new_session_with(&lake, &options(nlp())).unwrap();
    let result = run(
        &ctx,
        "explain analyze select request_id from token_usage where input_tokens > 0",
        &QueryLimits::default(),
    )
    .await
    .unwrap();
    let text = arrow::util::pretty::pretty_format_batches(&result.batches)
        .unwrap()
        .to_string();
    assert!(text.contains("TeamRowsExec: team=nlp"), "{text}");
    assert!(text.contains("output_rows=3"), "{text}");
    // 5 rows in the file: no operator shows them.
    assert!(!text.contains("output_rows=5"), "{text}");
    assert!(!text.contains("DataSourceExec"), "{text}");
}

#[tokio::test]
async fn scalar_functions_cannot_build_values_past_the_cap() {
    let (_dir, lake) = lake_with_two_teams().await;
    // 32 MiB sessions: 8 MiB per call.
    for sql in [
        "select length(repeat('x', 1500000000))",
        "select cardinality(array_repeat(1, 500000000))",
        "select length(repeat(arrow_cast('xxx', 'LargeUtf8'), 1000000000))",
        "select length(lpad('', 2000000000))",
        "select length(rpad('x', 2000000000, 'yz'))",
        "select cardinality(range(1, 2000000000))",
        "select length(replace(repeat('x', 1000000), 'x', repeat('y', 100)))",
    ] {
        let error = single_i64(&lake, Scope::All, sql).await.unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains("past the limit of 8388608 bytes for one value"),
            "{sql}: {error:?}"
        );
    }
    // Within the cap, the same functions answer.
    let small = "select cast(length(repeat('x', 1000)) + length(lpad('a', 10)) + \
        cardinality(array_repeat(1, 5)) as bigint)";
    assert_eq!(single_i64(&lake, Scope::All, small).await.unwrap(), 1015);
}
