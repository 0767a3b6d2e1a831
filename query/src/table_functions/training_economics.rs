//! `training_economics(from, to)`: what each training workload's GPU time bought (docs/design.md §7).
//!
//! ```sql
//! select team, workload, success_rate, effective_gpu_hours, failure_loss, cost_per_1m_samples
//! from training_economics('2026-11-02', '2026-11-09') order by failure_loss desc;
//! ```
//!
//! One row per **training** workload: one with a start event labelled `workload_type: training`
//! or with any `checkpoint` / `progress` event in the window. The rules
//! (`gpuledger_ledger::training`):
//! - runs are the pods' `start` events in `[from, to)`, each up to its next `stop` (succeeded when
//!   the reason is `finished`, `succeeded` or `completed`, failed otherwise), `preempted` or
//!   `evicted` event in the window; a run still open at `to` counts in `runs` only;
//! - `gpu_hours` and `cost` are the workload's allocated GPU-hours and busy + allocated idle cost
//!   in `gpu_hours` over the window; `team` is the team the ledger charged (the one it charged
//!   the most when it charged several, the first by name on a tie);
//! - a failed or preempted run loses the GPU time after its last checkpoint (all of it without
//!   one): `effective_gpu_hours` = `gpu_hours` − lost time; `failure_loss` (failed runs) and
//!   `recompute_cost` (preempted and evicted runs) price the lost time at cost / `gpu_hours`
//!   (NULL when the workload has no cost in the window);
//! - `samples` and `tokens` are cumulative per run: each run contributes its last `progress`
//!   event, or for a failed or preempted run its last one at or before its last checkpoint;
//!   `cost_per_1m_samples` and `cost_per_1b_tokens` divide `cost` by that effective work.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl};
use datafusion::common::{NullEquality, Result as DfResult, ScalarValue};
use datafusion::datasource::TableProvider;
use datafusion::functions::expr_fn::coalesce;
use datafusion::functions_aggregate::expr_fn::sum;
use datafusion::logical_expr::{Expr, JoinType, LogicalPlanBuilder, col, lit, when};
use gpuledger_ledger::training::{Event, Row, TrainingRuns, WorkloadCost, WorkloadKey};
use tokio::sync::OnceCell;

use super::support::{
    Computed, computed, floats, integers, money_or_zero, run, scan_window, several, strings, text,
    timestamps, value, window,
};

#[derive(Debug)]
pub struct TrainingEconomics {
    pub gpu_hours: Arc<dyn TableProvider>,
    pub scheduler_events: Arc<dyn TableProvider>,
}

impl TableFunctionImpl for TrainingEconomics {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        Ok(computed(TrainingEconomicsTable {
            gpu_hours: Arc::clone(&self.gpu_hours),
            scheduler_events: Arc::clone(&self.scheduler_events),
            bounds: window("training_economics", &args)?,
        }))
    }
}

/// One window's training economics, computed when scanned.
#[derive(Debug)]
struct TrainingEconomicsTable {
    gpu_hours: Arc<dyn TableProvider>,
    scheduler_events: Arc<dyn TableProvider>,
    bounds: (ScalarValue, ScalarValue),
}

static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let text = |name| Field::new(name, DataType::Utf8, true);
    let count = |name| Field::new(name, DataType::Int64, false);
    let number = |name| Field::new(name, DataType::Float64, true);
    Arc::new(Schema::new(vec![
        text("team"),
        text("namespace"),
        Field::new("workload", DataType::Utf8, false),
        count("runs"),
        count("succeeded"),
        count("failed"),
        count("preempted"),
        number("success_rate"),
        number("gpu_hours"),
        number("effective_gpu_hours"),
        number("cost"),
        number("failure_loss"),
        number("recompute_cost"),
        count("samples"),
        count("tokens"),
        number("cost_per_1m_samples"),
        number("cost_per_1b_tokens"),
    ]))
});

#[async_trait]
impl Computed for TrainingEconomicsTable {
    fn schema(&self) -> SchemaRef {
        SCHEMA.clone()
    }

    async fn batches(&self, state: &dyn Session) -> DfResult<Vec<RecordBatch>> {
        let costs = self.costs(state).await?;
        let runs = training_runs(state, &self.scheduler_events, &self.bounds).await?;
        let batch = rows_batch(&runs.finish(&costs))?;
        Ok(vec![batch])
    }
}

impl TrainingEconomicsTable {
    /// Each training workload's busy + allocated idle cost and allocated GPU-hours in the
    /// window, and the team the ledger charged: when it charged several, the one it charged
    /// the most (the first by name on a tie), whatever order the rows come in.
    async fn costs(
        &self,
        state: &dyn Session,
    ) -> DfResult<HashMap<WorkloadKey, (String, WorkloadCost)>> {
        let zero = |name: &str| coalesce(vec![col(name), lit(0.0)]);
        let rows = scan_window("gpu_hours", &self.gpu_hours, "hour", &self.bounds)?
            .filter(col("team").is_not_null().and(col("workload").is_not_null()))?;
        let plan = of_training_workloads(rows, "gpu_hours", &self.scheduler_events, &self.bounds)?
            .aggregate(
                vec![col("team"), col("namespace"), col("workload")],
                vec![
                    sum(money_or_zero("cost_busy") + money_or_zero("cost_allocated_idle"))
                        .alias("cost"),
                    sum(zero("alloc_seconds") / lit(3600.0)).alias("gpu_hours"),
                ],
            )?
            .build()?;
        let mut charged = Vec::new();
        for batch in run(state, plan).await? {
            let (team, namespace, workload) = (
                strings(&batch, "team")?,
                strings(&batch, "namespace")?,
                strings(&batch, "workload")?,
            );
            let (cost, gpu_hours) = (floats(&batch, "cost")?, floats(&batch, "gpu_hours")?);
            for row in 0..batch.num_rows() {
                let key = (
                    text(&namespace, row).map(str::to_string),
                    workload.value(row).to_string(),
                );
                let cost = WorkloadCost {
                    cost: cost.value(row),
                    gpu_hours: gpu_hours.value(row),
                };
                charged.push((key, team.value(row).to_string(), cost));
            }
        }
        // By workload, then team: the sums add in one order, and of the teams charged the most
        // the first is named.
        charged.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        let costs = charged
            .chunk_by(|a, b| a.0 == b.0)
            .map(|teams| {
                let named = teams
                    .iter()
                    .reduce(|most, team| {
                        if team.2.cost > most.2.cost {
                            team
                        } else {
                            most
                        }
                    })
                    .expect("a chunk has a row");
                let total =
                    teams
                        .iter()
                        .fold(WorkloadCost::default(), |total, team| WorkloadCost {
                            cost: total.cost + team.2.cost,
                            gpu_hours: total.gpu_hours + team.2.gpu_hours,
                        });
                (named.0.clone(), (named.1.clone(), total))
            })
            .collect();
        Ok(costs)
    }
}

/// The runs a session has folded, by window: for a session that answers several questions of
/// one week (the weekly report asks `training_economics` and `spot_savings`), so that the week's
/// events are read and folded once, also when they ask at once (the others wait for the fold).
/// Only such a session carries it (see `gpuledger_report`): a long-lived one, a server's, folds
/// on every call and so sees events landed since.
#[derive(Debug, Default)]
pub struct TrainingRunsMemo(
    Mutex<HashMap<(ScalarValue, ScalarValue), Arc<OnceCell<Arc<TrainingRuns>>>>>,
);

/// The window's scheduler events, in time order, folded into runs (`spot_savings` reads them
/// too); from the session's [`TrainingRunsMemo`] when it has one.
pub(super) async fn training_runs(
    state: &dyn Session,
    scheduler_events: &Arc<dyn TableProvider>,
    bounds: &(ScalarValue, ScalarValue),
) -> DfResult<Arc<TrainingRuns>> {
    let fold = || async {
        fold_runs(state, scheduler_events, bounds)
            .await
            .map(Arc::new)
    };
    let Some(memo) = state.config().get_extension::<TrainingRunsMemo>() else {
        return fold().await;
    };
    let window = {
        let mut windows = memo.0.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(windows.entry(bounds.clone()).or_default())
    };
    window.get_or_try_init(fold).await.map(Arc::clone)
}

/// The text columns of an event that the fold reads (the scan reads these and four more, not the
/// table's other columns).
const EVENT_TEXT: [&str; 9] = [
    "event",
    "cluster",
    "node",
    "namespace",
    "workload",
    "pod",
    "reason",
    "team",
    "workload_type",
];

async fn fold_runs(
    state: &dyn Session,
    scheduler_events: &Arc<dyn TableProvider>,
    bounds: &(ScalarValue, ScalarValue),
) -> DfResult<TrainingRuns> {
    let read = ["ts", "samples", "tokens", "gpus"]
        .into_iter()
        .chain(EVENT_TEXT)
        .map(col);
    let events = scan_window("scheduler_events", scheduler_events, "ts", bounds)?
        .filter(col("workload").is_not_null().and(col("pod").is_not_null()))?;
    let plan = of_training_workloads(events, "scheduler_events", scheduler_events, bounds)?
        .project(read)?
        // A total order, so that events of one instant fold the same whatever order the files,
        // partitions and the join hand them over in.
        .sort(vec![
            col("ts").sort(true, false),
            same_instant_order()?.sort(true, false),
            col("pod").sort(true, false),
            col("event").sort(true, false),
            col("reason").sort(true, false),
            col("samples").sort(true, false),
            col("tokens").sort(true, false),
        ])?
        .build()?;
    let mut runs = TrainingRuns::default();
    for batch in run(state, plan).await? {
        let ts = timestamps(&batch, "ts")?;
        let [
            kind,
            cluster,
            node,
            namespace,
            workload,
            pod,
            reason,
            team,
            workload_type,
        ] = several(&batch, strings, EVENT_TEXT)?;
        let (samples, tokens) = (integers(&batch, "samples")?, integers(&batch, "tokens")?);
        let gpus = floats(&batch, "gpus")?;
        for row in 0..batch.num_rows() {
            runs.add(&Event {
                ts: ts.value(row),
                kind: kind.value(row),
                cluster: text(&cluster, row),
                node: text(&node, row),
                namespace: text(&namespace, row),
                workload: text(&workload, row),
                pod: text(&pod, row),
                gpus: value(&gpus, row),
                reason: text(&reason, row),
                samples: value(&samples, row),
                tokens: value(&tokens, row),
                team: text(&team, row),
                workload_type: text(&workload_type, row),
            });
        }
    }
    Ok(runs)
}

/// The rows of `rows` (a plan over the table `table`, with `namespace` and `workload` columns)
/// that belong to a workload some event in the window marks as training, as `TrainingRuns::add`
/// tells them: a `start` labelled `workload_type: training`, or any `checkpoint` or `progress` of
/// a pod. Both readers of the runs (this function and `spot_savings`) read training workloads
/// only, and a fleet's week is mostly other pods (each Kubernetes Job a workload of its own): the
/// fold reads their events only, and their costs only are summed. A missing namespace is a
/// namespace of its own, as in the fold's keys (`NullEqualsNull`).
fn of_training_workloads(
    rows: LogicalPlanBuilder,
    table: &str,
    scheduler_events: &Arc<dyn TableProvider>,
    bounds: &(ScalarValue, ScalarValue),
) -> DfResult<LogicalPlanBuilder> {
    let marks_training = (col("event").eq(lit("start")))
        .and(col("workload_type").eq(lit("training")))
        .or(col("event").in_list(vec![lit("checkpoint"), lit("progress")], false));
    let training = scan_window("training", scheduler_events, "ts", bounds)?
        .filter(
            col("workload")
                .is_not_null()
                .and(col("pod").is_not_null())
                .and(marks_training),
        )?
        .project([col("namespace"), col("workload")])?
        .build()?;
    let key = |name| format!("{table}.{name}");
    rows.join_detailed(
        training,
        JoinType::LeftSemi,
        (
            vec![key("namespace"), key("workload")],
            vec![
                "training.namespace".to_string(),
                "training.workload".to_string(),
            ],
        ),
        None,
        NullEquality::NullEqualsNull,
    )
}

/// At one instant progress is reported before the checkpoint that saves it, both before the run
/// ends, and a pod's run ends before its next one starts.
fn same_instant_order() -> DfResult<Expr> {
    when(col("event").eq(lit("progress")), lit(0))
        .when(col("event").eq(lit("checkpoint")), lit(1))
        .when(
            col("event").in_list(vec![lit("stop"), lit("preempted"), lit("evicted")], false),
            lit(2),
        )
        .otherwise(lit(3))
}

fn rows_batch(rows: &[Row]) -> DfResult<RecordBatch> {
    let text = |f: fn(&Row) -> Option<&str>| -> ArrayRef {
        Arc::new(rows.iter().map(f).collect::<StringArray>())
    };
    let count =
        |f: fn(&Row) -> i64| -> ArrayRef { Arc::new(rows.iter().map(f).collect::<Int64Array>()) };
    let number = |f: fn(&Row) -> Option<f64>| -> ArrayRef {
        Arc::new(rows.iter().map(f).collect::<Float64Array>())
    };
    let columns = vec![
        text(|r| r.team.as_deref()),
        text(|r| r.namespace.as_deref()),
        text(|r| Some(&r.workload)),
        count(|r| r.runs),
        count(|r| r.succeeded),
        count(|r| r.failed),
        count(|r| r.preempted),
        number(|r| r.success_rate),
        number(|r| Some(r.gpu_hours)),
        number(|r| Some(r.effective_gpu_hours)),
        number(|r| Some(r.cost)),
        number(|r| r.failure_loss),
        number(|r| r.recompute_cost),
        count(|r| r.samples),
        count(|r| r.tokens),
        number(|r| r.cost_per_1m_samples),
        number(|r| r.cost_per_1b_tokens),
    ];
    Ok(RecordBatch::try_new(SCHEMA.clone(), columns)?)
}

#[cfg(test)]
mod tests {
    use datafusion::datasource::MemTable;
    use datafusion::execution::SessionStateBuilder;
    use datafusion::prelude::SessionConfig;
    use gpuledger_lake::tables::Table;
    use gpuledger_ledger::training::Ending;

    use super::*;

    /// A table whose scan yields to the runtime once, as a scan of the lake waits for I/O.
    #[derive(Debug)]
    struct YieldingScan(Arc<dyn TableProvider>);

    #[async_trait]
    impl TableProvider for YieldingScan {
        fn schema(&self) -> SchemaRef {
            self.0.schema()
        }
        fn table_type(&self) -> datafusion::datasource::TableType {
            self.0.table_type()
        }
        async fn scan(
            &self,
            state: &dyn Session,
            projection: Option<&Vec<usize>>,
            filters: &[Expr],
            limit: Option<usize>,
        ) -> DfResult<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
            tokio::task::yield_now().await;
            self.0.scan(state, projection, filters, limit).await
        }
    }

    fn bounds(from: i64, to: i64) -> (ScalarValue, ScalarValue) {
        let at = |t| ScalarValue::TimestampMicrosecond(Some(t), Some("UTC".into()));
        (at(from), at(to))
    }

    /// With a memo, a window's runs are folded once and shared; another window is folded on
    /// its own; without one, every call folds afresh.
    #[tokio::test]
    async fn a_session_with_a_memo_folds_a_windows_runs_once() {
        let table = Table::SchedulerEvents;
        let events: Arc<dyn TableProvider> =
            Arc::new(MemTable::try_new(table.schema(), vec![vec![]]).unwrap());
        let week = bounds(0, 604_800_000_000);

        let memo = Arc::new(TrainingRunsMemo::default());
        let state = SessionStateBuilder::new()
            .with_config(SessionConfig::new().with_extension(Arc::clone(&memo)))
            .build();
        let first = training_runs(&state, &events, &week).await.unwrap();
        let again = training_runs(&state, &events, &week).await.unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        let other = training_runs(&state, &events, &bounds(0, 1)).await.unwrap();
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(memo.0.lock().unwrap().len(), 2);

        // Asked at once (the report's training and spot sections), the second waits for the
        // first's fold instead of folding the same events again.
        let slow: Arc<dyn TableProvider> = Arc::new(YieldingScan(Arc::clone(&events)));
        let at_once = bounds(0, 2);
        let (one, another) = tokio::join!(
            training_runs(&state, &slow, &at_once),
            training_runs(&state, &slow, &at_once)
        );
        assert!(Arc::ptr_eq(&one.unwrap(), &another.unwrap()));

        let plain = SessionStateBuilder::new().build();
        let first = training_runs(&plain, &events, &week).await.unwrap();
        let again = training_runs(&plain, &events, &week).await.unwrap();
        assert!(!Arc::ptr_eq(&first, &again));
    }

    /// The fold reads training workloads' events only; the runs it finds are those the rules
    /// find over every event: a workload with no namespace, one marked training only by a later
    /// progress of another pod, one name in two namespaces of which one trains, a pod whose next
    /// run starts the instant its last one ends, and none of the workloads that look like
    /// training but are not; whatever order the table holds the events in.
    #[tokio::test]
    async fn the_fold_of_training_workloads_finds_what_the_fold_of_every_event_finds() {
        use arrow::array::TimestampMicrosecondArray;
        use gpuledger_lake::tables::batch_with_columns;
        const HOUR: i64 = 3_600_000_000;
        // (ts, event, namespace, workload, pod, workload_type, reason), in the order they happen.
        type E = (
            i64,
            &'static str,
            Option<&'static str>,
            Option<&'static str>,
            Option<&'static str>,
            Option<&'static str>,
            Option<&'static str>,
        );
        let events: [E; 14] = [
            (
                0,
                "start",
                None,
                Some("a"),
                Some("a-0"),
                Some("training"),
                None,
            ),
            (0, "start", Some("x"), Some("b"), Some("b-0"), None, None),
            (0, "start", Some("y"), Some("b"), Some("b-1"), None, None),
            (0, "start", Some("z"), Some("c"), Some("c-0"), None, None),
            (
                0,
                "start",
                Some("z"),
                Some("d"),
                Some("d-0"),
                Some("Training"),
                None,
            ),
            (0, "start", None, Some("e"), Some("e-0"), None, None),
            (0, "progress", Some("x"), None, Some("p"), None, None),
            (
                HOUR / 60,
                "checkpoint",
                Some("z"),
                Some("c"),
                None,
                None,
                None,
            ),
            (
                HOUR / 2,
                "progress",
                Some("x"),
                Some("b"),
                Some("b-2"),
                None,
                None,
            ),
            (
                HOUR,
                "stop",
                None,
                Some("a"),
                Some("a-0"),
                None,
                Some("failed"),
            ),
            // The pod's next run, starting the instant the last one ended.
            (
                HOUR,
                "start",
                None,
                Some("a"),
                Some("a-0"),
                Some("training"),
                None,
            ),
            (
                HOUR,
                "stop",
                None,
                Some("e"),
                Some("e-0"),
                None,
                Some("failed"),
            ),
            (
                2 * HOUR,
                "preempted",
                Some("x"),
                Some("b"),
                Some("b-0"),
                None,
                None,
            ),
            (
                2 * HOUR,
                "stop",
                Some("y"),
                Some("b"),
                Some("b-1"),
                None,
                Some("finished"),
            ),
        ];
        // The table holds them last first: the fold sorts them.
        let rows: Vec<E> = events.iter().rev().copied().collect();
        let text = |f: fn(&E) -> Option<&'static str>| -> ArrayRef {
            Arc::new(rows.iter().map(f).collect::<StringArray>())
        };
        let times = TimestampMicrosecondArray::from_iter_values(rows.iter().map(|e| e.0));
        let batch = batch_with_columns(
            Table::SchedulerEvents,
            vec![
                ("ts", Arc::new(times.with_timezone("UTC"))),
                ("event", text(|e| Some(e.1))),
                ("namespace", text(|e| e.2)),
                ("workload", text(|e| e.3)),
                ("pod", text(|e| e.4)),
                ("workload_type", text(|e| e.5)),
                ("reason", text(|e| e.6)),
                ("source", text(|_| Some("canonical"))),
            ],
        )
        .unwrap();
        let schema = batch.schema();
        let table: Arc<dyn TableProvider> =
            Arc::new(MemTable::try_new(schema, vec![vec![batch]]).unwrap());
        let state = SessionStateBuilder::new().build();
        let folded = fold_runs(&state, &table, &bounds(0, 3 * HOUR))
            .await
            .unwrap();

        let mut every = TrainingRuns::default();
        for e in &events {
            every.add(&Event {
                ts: e.0,
                kind: e.1,
                namespace: e.2,
                workload: e.3,
                pod: e.4,
                workload_type: e.5,
                reason: e.6,
                ..Event::default()
            });
        }
        let runs = |runs: &TrainingRuns| -> Vec<_> {
            runs.training_runs()
                .map(|(key, run)| (key.clone(), run.clone()))
                .collect()
        };
        assert_eq!(runs(&folded), runs(&every));
        let found: Vec<_> = runs(&folded)
            .into_iter()
            .map(|((namespace, workload), run)| {
                (namespace, workload, run.start, run.end, run.ending)
            })
            .collect();
        assert_eq!(
            found,
            [
                (None, "a".to_string(), 0, Some(HOUR), Ending::Failed),
                (None, "a".to_string(), HOUR, None, Ending::Running),
                (
                    Some("x".to_string()),
                    "b".to_string(),
                    0,
                    Some(2 * HOUR),
                    Ending::Preempted
                ),
            ]
        );
    }

    /// A workload the ledger charged to several teams in the window is named for the team it
    /// charged the most (the first by name on a tie), with every team's cost, whatever order
    /// and partitions the rows come in; a workload that is not training is not summed.
    #[tokio::test]
    async fn a_workload_charged_to_several_teams_is_named_for_the_one_charged_most() {
        use arrow::array::{Decimal128Array, Int32Array, TimestampMicrosecondArray};
        use gpuledger_lake::tables::batch_with_columns;
        const HOUR: i64 = 3_600_000_000;
        let events = {
            let text =
                |values: [&str; 2]| -> ArrayRef { Arc::new(StringArray::from_iter_values(values)) };
            let batch = batch_with_columns(
                Table::SchedulerEvents,
                vec![
                    (
                        "ts",
                        Arc::new(TimestampMicrosecondArray::from(vec![0, 0]).with_timezone("UTC")),
                    ),
                    ("event", text(["start", "start"])),
                    ("namespace", text(["x", "x"])),
                    ("workload", text(["train", "serve"])),
                    ("pod", text(["train-0", "serve-0"])),
                    (
                        "workload_type",
                        Arc::new(StringArray::from(vec![Some("training"), None])),
                    ),
                    ("source", text(["canonical", "canonical"])),
                ],
            )
            .unwrap();
            let schema = batch.schema();
            Arc::new(MemTable::try_new(schema, vec![vec![batch]]).unwrap())
                as Arc<dyn TableProvider>
        };
        // (team, workload, busy cost in cents), one allocated GPU-hour each.
        let charged = |rows: &[(&'static str, &'static str, i128)]| -> RecordBatch {
            let n = rows.len();
            let texts = |f: fn(&(&'static str, &'static str, i128)) -> &'static str| -> ArrayRef {
                Arc::new(rows.iter().map(|r| Some(f(r))).collect::<StringArray>())
            };
            let cents =
                Decimal128Array::from_iter_values(rows.iter().map(|r| r.2 * 10i128.pow(10)))
                    .with_precision_and_scale(38, 12)
                    .unwrap();
            batch_with_columns(
                Table::GpuHours,
                vec![
                    (
                        "hour",
                        Arc::new(
                            TimestampMicrosecondArray::from(vec![HOUR; n]).with_timezone("UTC"),
                        ),
                    ),
                    ("gpu_index", Arc::new(Int32Array::from(vec![0; n]))),
                    ("team", texts(|r| r.0)),
                    ("namespace", texts(|_| "x")),
                    ("workload", texts(|r| r.1)),
                    (
                        "alloc_seconds",
                        Arc::new(Float64Array::from(vec![3600.0; n])),
                    ),
                    ("cost_busy", Arc::new(cents)),
                ],
            )
            .unwrap()
        };
        let costs = |partitions: Vec<Vec<RecordBatch>>| {
            let gpu_hours: Arc<dyn TableProvider> =
                Arc::new(MemTable::try_new(Table::GpuHours.schema(), partitions).unwrap());
            let table = TrainingEconomicsTable {
                gpu_hours,
                scheduler_events: Arc::clone(&events),
                bounds: bounds(0, 2 * HOUR),
            };
            async move {
                let state = SessionStateBuilder::new().build();
                table.costs(&state).await.unwrap()
            }
        };
        let key = (Some("x".to_string()), "train".to_string());
        let rows = [
            ("red", "train", 50),
            ("blue", "train", 100),
            ("serve-team", "serve", 999),
            ("red", "train", 50),
            ("green", "train", 40),
        ];
        let mut reversed = rows;
        reversed.reverse();
        for partitions in [
            vec![vec![charged(&rows)]],
            vec![vec![charged(&reversed[..2])], vec![charged(&reversed[2..])]],
        ] {
            let found = costs(partitions).await;
            assert_eq!(found.len(), 1, "only the training workload: {found:?}");
            let (team, cost) = &found[&key];
            // red and blue were both charged 1.00: blue comes first by name.
            assert_eq!(team, "blue");
            assert!((cost.cost - 2.4).abs() < 1e-12, "{cost:?}");
            assert_eq!(cost.gpu_hours, 4.0);
        }
        let red_most = [
            ("red", "train", 60),
            ("blue", "train", 100),
            ("red", "train", 50),
        ];
        assert_eq!(costs(vec![vec![charged(&red_most)]]).await[&key].0, "red");
    }
}
