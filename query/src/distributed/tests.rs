use std::sync::Arc;

use arrow::array::{AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::physical_plan::{ExecutionPlanProperties, collect};
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

/// A team's scan that a time range cuts (the files it holds whole beside a row filter over the
/// ones it cuts, under a union) spreads over tasks as a plain scan does: its files' bytes ask for
/// the tasks, and each task's barrier reads its own slice of every file, so that together the
/// tasks keep each of the team's rows once.
#[tokio::test]
async fn a_team_scan_cut_by_a_time_range_spreads_over_tasks() {
    use crate::test_lake::{DAY_MS, power_sample_files};

    // n1 reads `hour` watts, n2 `hour + 100`. From 06:00 the first file is cut.
    let (_dir, lake) =
        power_sample_files(&["n1", "n2"], &[&[0, 6], &[12, 18], &[24, 30], &[36]]).await;
    let ctx = crate::session::new_session(&lake).unwrap();
    // What a team's table asks of the lake table under its barrier: node and power from 06:00.
    let table = ctx.table_provider("gpu_samples").await.unwrap();
    let columns: Vec<usize> = ["node", "power_w"]
        .iter()
        .map(|c| table.schema().index_of(c).unwrap())
        .collect();
    let from_six = datafusion::prelude::col("ts").gt_eq(datafusion::prelude::lit(
        datafusion::common::ScalarValue::TimestampMicrosecond(
            Some((DAY_MS + 6 * 3_600_000) * 1000),
            Some("UTC".into()),
        ),
    ));
    let scan = |limit| {
        let (table, columns, from_six) = (&table, &columns, &from_six);
        let state = ctx.state();
        async move {
            table
                .scan(&state, Some(columns), std::slice::from_ref(from_six), limit)
                .await
                .unwrap()
        }
    };
    let union = scan(None).await;
    assert!(
        union_in(&union).is_some_and(|u| Arc::ptr_eq(&u, &union)),
        "the range cuts one file of four"
    );
    let (node, width) = (0, 2);
    let barrier: Arc<dyn ExecutionPlan> =
        Arc::new(TeamRowsExec::new(union, node, width, "n1".into()).unwrap());
    let watts = |batches: Vec<RecordBatch>| -> Vec<f64> {
        let mut watts: Vec<f64> = batches
            .iter()
            .flat_map(|b| {
                let column = b.schema().index_of("power_w").unwrap();
                b.column(column)
                    .as_primitive::<arrow::datatypes::Float64Type>()
                    .values()
                    .to_vec()
            })
            .collect();
        watts.sort_by(f64::total_cmp);
        watts
    };
    let whole = watts(collect(Arc::clone(&barrier), ctx.task_ctx()).await.unwrap());
    assert_eq!(whole, [6.0, 12.0, 18.0, 24.0, 30.0, 36.0]);

    // A partition per byte, one per task: the files' bytes ask for as many tasks.
    let mut config = datafusion::prelude::SessionConfig::new();
    config.options_mut().execution.target_partitions = 1;
    config.set_distributed_option_extension(DistributedConfig::default());
    config
        .set_distributed_file_scan_config_bytes_per_partition(1)
        .unwrap();
    let bytes: u64 = lake
        .catalog()
        .active_files(gpuledger_lake::tables::Table::GpuSamples, None, None)
        .await
        .unwrap()
        .iter()
        .map(|f| f.bytes as u64)
        .sum();
    let asked = team_rows_task_count(DesiredTaskCountEvent {
        plan: &barrier,
        session_config: &config,
    })
    .unwrap()
    .unwrap();
    assert_eq!(asked.task_count.as_usize(), bytes as usize);

    for task_count in [2, 3, 5] {
        let leaf = team_rows_scale_up(ScaleUpLeafNodeEvent {
            plan: &barrier,
            task_count,
            session_config: &config,
        })
        .expect("a team's cut scan is recognized")
        .unwrap()
        .plan;
        let leaf = leaf.downcast_ref::<DistributedLeafExec>().unwrap();
        assert_eq!(leaf.variants().len(), task_count);
        let partitions = leaf.variants()[0].output_partitioning().partition_count();
        let mut together = Vec::new();
        for variant in leaf.variants() {
            assert_eq!(
                variant.output_partitioning().partition_count(),
                partitions,
                "every task shows the same partitions"
            );
            together.extend(watts(
                collect(Arc::clone(variant), ctx.task_ctx()).await.unwrap(),
            ));
        }
        together.sort_by(f64::total_cmp);
        assert_eq!(together, whole, "{task_count} tasks");
    }

    // With a limit in the scan each task would keep that many rows: such a scan stays one task.
    let union = scan(Some(2)).await;
    let barrier: Arc<dyn ExecutionPlan> =
        Arc::new(TeamRowsExec::new(union, node, width, "n1".into()).unwrap());
    let asked = team_rows_task_count(DesiredTaskCountEvent {
        plan: &barrier,
        session_config: &config,
    })
    .unwrap()
    .unwrap();
    assert_eq!(asked.task_count.as_usize(), 1);
    let scaled = team_rows_scale_up(ScaleUpLeafNodeEvent {
        plan: &barrier,
        task_count: 3,
        session_config: &config,
    });
    assert!(scaled.is_none());
}

/// The first union in `plan`: where a lake table joins the files a range holds whole and those
/// it cuts.
fn union_in(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ExecutionPlan>> {
    let mut union = None;
    plan.apply(|node| {
        if node
            .downcast_ref::<datafusion::physical_plan::union::UnionExec>()
            .is_some()
        {
            union = Some(Arc::clone(node));
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .unwrap();
    union
}
