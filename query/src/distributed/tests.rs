use std::sync::Arc;

use arrow::array::{AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::physical_plan::collect;
use datafusion::prelude::SessionContext;
use datafusion_proto::physical_plan::DefaultPhysicalProtoConverter;

use super::*;

#[test]
fn workers_are_host_port_pairs() {
    let workers =
        Workers::parse(" 127.0.0.1:8090, http://w2:9000 ,https://w3:8443,https://w4:443").unwrap();
    let urls: Vec<&str> = workers.urls().iter().map(Url::as_str).collect();
    assert_eq!(
        urls,
        [
            "http://127.0.0.1:8090/",
            "http://w2:9000/",
            "https://w3:8443/",
            "https://w4/"
        ]
    );
    let addresses: Vec<&str> = workers.health.each().map(|w| w.address).collect();
    assert_eq!(
        addresses,
        ["127.0.0.1:8090", "w2:9000", "w3:8443", "w4:443"]
    );
    assert!(Workers::parse("").unwrap().is_empty());
    for bad in ["w1", "ftp://w:1", "w1:port", "https://:443"] {
        let error = Workers::parse(bad).unwrap_err();
        assert!(error.contains(bad), "{error}");
    }
}

#[test]
fn secrets_compare_whole() {
    assert!(same_secret(b"s3cret", b"s3cret"));
    assert!(!same_secret(b"s3cre", b"s3cret"));
    assert!(!same_secret(b"s3creT", b"s3cret"));
    assert!(!same_secret(b"", b"s3cret"));
}

fn rows() -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("value", DataType::Int64, false),
        Field::new("team", DataType::Utf8, true),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(vec![1, 2, 3, 4])),
            Arc::new(StringArray::from(vec![
                Some("ads"),
                Some("nlp"),
                None,
                Some("ads"),
            ])),
        ],
    )
    .unwrap()
}

/// The barrier crosses to a worker with its team and its input: decoded, it keeps only that
/// team's rows, as on the coordinator.
#[tokio::test]
async fn a_team_barrier_crosses_the_wire_whole() {
    let batch = rows();
    let input = MemorySourceConfig::try_new_exec(&[vec![batch.clone()]], batch.schema(), None)
        .unwrap() as Arc<dyn ExecutionPlan>;
    let barrier = Arc::new(TeamRowsExec::new(input, 1, 1, "ads".into()).unwrap());
    let mut bytes = Vec::new();
    TeamRowsCodec
        .try_encode(barrier, &mut bytes, &DefaultPhysicalProtoConverter {})
        .unwrap();
    let ctx = SessionContext::new();
    let decoded = TeamRowsCodec
        .try_decode(
            &bytes,
            &[],
            &ctx.task_ctx(),
            &DefaultPhysicalProtoConverter {},
        )
        .unwrap();
    let (team, position, columns) = decoded.downcast_ref::<TeamRowsExec>().unwrap().parts();
    assert_eq!((team, position, columns), ("ads", 1, 1));
    let out = collect(decoded, ctx.task_ctx()).await.unwrap();
    let values: Vec<i64> = out
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_primitive::<arrow::datatypes::Int64Type>()
                .values()
                .to_vec()
        })
        .collect();
    assert_eq!(values, [1, 4]);
    assert_eq!(out[0].num_columns(), 1, "the team column stays behind");

    let error = TeamRowsCodec
        .try_decode(
            b"\xff\xff",
            &[],
            &ctx.task_ctx(),
            &DefaultPhysicalProtoConverter {},
        )
        .unwrap_err();
    assert!(error.to_string().contains("a team barrier"), "{error}");
}

/// A plan that reads a Parquet file of `dir`'s (one column, `node`), not the lake.
pub(crate) async fn plan_reading_a_local_file(
    dir: &std::path::Path,
) -> Arc<dyn datafusion::physical_plan::ExecutionPlan> {
    let ctx = SessionContext::new();
    let file = dir.join("t.parquet");
    ctx.sql(&format!(
        "COPY (SELECT 'n1' AS node) TO '{}'",
        file.display()
    ))
    .await
    .unwrap()
    .collect()
    .await
    .unwrap();
    ctx.register_parquet("local", file.to_str().unwrap(), Default::default())
        .await
        .unwrap();
    ctx.sql("SELECT node FROM local")
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_worker_runs_only_plans_that_read_the_lake() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = SessionContext::new();
    let target = dir.path().join("out.csv");
    let copy = ctx
        .sql(&format!("COPY (SELECT 1 AS a) TO '{}'", target.display()))
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let error = check_reads_the_lake(&copy).unwrap_err();
    assert!(error.to_string().contains("it writes"), "{error}");

    let foreign = plan_reading_a_local_file(dir.path()).await;
    let error = check_reads_the_lake(&foreign).unwrap_err();
    assert!(error.to_string().contains("reads file:///"), "{error}");

    let computed = ctx
        .sql("SELECT 1 + 1")
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    check_reads_the_lake(&computed).unwrap();
}

/// A plan goes to the workers only when they have every function it calls.
#[tokio::test]
async fn plans_calling_functions_the_workers_lack_stay_here() {
    let ctx = SessionContext::new();
    crate::session::register_functions(&ctx, None).unwrap();
    ctx.register_udf(datafusion::logical_expr::create_udf(
        "only_here",
        vec![DataType::Utf8],
        DataType::Utf8,
        datafusion::logical_expr::Volatility::Immutable,
        Arc::new(|args: &[datafusion::logical_expr::ColumnarValue]| Ok(args[0].clone())),
    ));
    let plan = |sql: &'static str| {
        let ctx = ctx.clone();
        async move { ctx.sql(sql).await.unwrap().into_optimized_plan().unwrap() }
    };
    assert!(workers_can_run(
        &plan("SELECT lower('A'), amortize_share(1.0, 1.0, 2.0)").await
    ));
    assert!(workers_can_run(
        &plan("SELECT (SELECT max(x) FROM (VALUES (1)) v(x))").await
    ));
    // (On literals the optimizer folds a call away: columns keep it.)
    assert!(!workers_can_run(
        &plan("SELECT only_here(column1) FROM (VALUES ('a')) v").await
    ));
    assert!(!workers_can_run(
        &plan("SELECT 1 WHERE 2 > (SELECT count(only_here(column1)) FROM (VALUES ('a')) v)").await
    ));
}
