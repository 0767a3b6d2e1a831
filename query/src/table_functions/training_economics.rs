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
//!   in `gpu_hours` over the window; `team` is the team the ledger charged;
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
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::datasource::TableProvider;
use datafusion::functions::expr_fn::coalesce;
use datafusion::functions_aggregate::expr_fn::sum;
use datafusion::logical_expr::{Expr, col, lit, when};
use gpuledger_ledger::training::{Event, Row, TrainingRuns, WorkloadCost};
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
    /// Each workload's charged team, busy + allocated idle cost and allocated GPU-hours.
    async fn costs(
        &self,
        state: &dyn Session,
    ) -> DfResult<HashMap<(Option<String>, String), (String, WorkloadCost)>> {
        let zero = |name: &str| coalesce(vec![col(name), lit(0.0)]);
        let plan = scan_window("gpu_hours", &self.gpu_hours, "hour", &self.bounds)?
            .filter(col("team").is_not_null().and(col("workload").is_not_null()))?
            .aggregate(
                vec![col("team"), col("namespace"), col("workload")],
                vec![
                    sum(money_or_zero("cost_busy") + money_or_zero("cost_allocated_idle"))
                        .alias("cost"),
                    sum(zero("alloc_seconds") / lit(3600.0)).alias("gpu_hours"),
                ],
            )?
            .build()?;
        let mut costs = HashMap::new();
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
                let (_, total) = costs
                    .entry(key)
                    .or_insert_with(|| (team.value(row).to_string(), WorkloadCost::default()));
                total.cost += cost.value(row);
                total.gpu_hours += gpu_hours.value(row);
            }
        }
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
    let plan = scan_window("scheduler_events", scheduler_events, "ts", bounds)?
        .filter(col("workload").is_not_null().and(col("pod").is_not_null()))?
        .project(read)?
        .sort(vec![
            col("ts").sort(true, false),
            same_instant_order()?.sort(true, false),
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

/// At one instant progress is reported before the checkpoint that saves it, and both before the
/// run ends.
fn same_instant_order() -> DfResult<Expr> {
    when(col("event").eq(lit("progress")), lit(0))
        .when(col("event").eq(lit("checkpoint")), lit(1))
        .otherwise(lit(2))
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
}
