//! Stopping a query's work when its caller stops waiting (a time limit, a client gone).
//!
//! Aborting the query's task is not enough: tokio aborts a task only when it yields, and an
//! operator can work for minutes between yields. A cross join pulls one batch from one side and
//! then emits a batch for every row of the other, and the aggregate above it sums them in a loop
//! that never waits; a nested-loop join whose filter matches nothing pulls batch after batch and
//! emits none. The scans at the leaves yield to tokio's budget only every 128 batches. So every
//! operator of a user's plan is wrapped in [`StopWhenCancelledExec`], which checks a
//! [`Cancellation`] each time its output is pulled: once cancelled, the next batch any operator
//! asks of another is an error, and the plan unwinds. (The wrappers show in `EXPLAIN ANALYZE`.)
//!
//! What this cannot stop is one operator's own work on what it already holds, between two
//! pulls: sorting the batches it buffered, a window over its whole input, a table function
//! computing its rows while the query is planned. The memory limit bounds that data, and the
//! caller has its answer at the time limit all the same.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::{RecordBatchStream, SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::physical_plan::{
    ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties,
    ReplaceChildrenOptions,
};
use datafusion_distributed::NetworkBoundaryExt;
use futures::Stream;

use crate::hidden_inputs::map_hidden_inputs;

/// Set once the query's answer is no longer wanted; shared by every operator of its plan.
#[derive(Debug, Clone, Default)]
pub struct Cancellation {
    cancelled: Arc<AtomicBool>,
    /// Cancelled by itself from then on.
    deadline: Option<std::time::Instant>,
}

impl Cancellation {
    /// Cancelled once `deadline` passes, without a timer: the operators see the time where they
    /// check the flag. (A timer task on the runtime the operators run on can wait behind them
    /// for as long as they do not yield — on a worker, for the whole query.)
    pub fn until(deadline: std::time::Instant) -> Self {
        Self {
            cancelled: Arc::default(),
            deadline: Some(deadline),
        }
    }

    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
            || self
                .deadline
                .is_some_and(|deadline| std::time::Instant::now() >= deadline)
    }

    /// `plan` with every operator wrapped so that it stops once this is cancelled.
    ///
    /// A distributed plan's stages below a network boundary run on workers, which cannot see
    /// this flag: they are left as they are, and stop when the boundary's streams are dropped.
    pub fn guard(&self, plan: Arc<dyn ExecutionPlan>) -> DfResult<Arc<dyn ExecutionPlan>> {
        if plan.is_network_boundary() {
            return Ok(plan);
        }
        // Plans an operator holds but does not list as children (a team barrier's scan, the
        // GPU-hours step's reads) are guarded too, or a time limit would stop such a step only
        // once it had read everything.
        if let Some(node) = map_hidden_inputs(plan.as_ref(), |input| self.guard(input))? {
            return Ok(Arc::new(StopWhenCancelledExec {
                input: node,
                cancellation: self.clone(),
            }));
        }
        let children = plan
            .children()
            .into_iter()
            .map(|child| self.guard(Arc::clone(child)))
            .collect::<DfResult<Vec<_>>>()?;
        let node = if children.is_empty() {
            plan
        } else {
            plan.replace_children(
                children,
                ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
            )?
        };
        Ok(Arc::new(StopWhenCancelledExec {
            input: node,
            cancellation: self.clone(),
        }))
    }
}

/// Passes its input's batches through until the query is cancelled, then answers an error.
#[derive(Debug)]
pub struct StopWhenCancelledExec {
    input: Arc<dyn ExecutionPlan>,
    cancellation: Cancellation,
}

impl DisplayAs for StopWhenCancelledExec {
    fn fmt_as(&self, _format: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("StopWhenCancelledExec")
    }
}

impl ExecutionPlan for StopWhenCancelledExec {
    fn name(&self) -> &str {
        "StopWhenCancelledExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    /// `plan.is::<HashJoinExec>()` and the like see the operator inside.
    fn downcast_delegate(&self) -> Option<&dyn ExecutionPlan> {
        Some(self.input.as_ref())
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
        _options: ReplaceChildrenOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        if children.len() != 1 {
            return Err(DataFusionError::Internal(format!(
                "StopWhenCancelledExec takes one child, not {}",
                children.len()
            )));
        }
        Ok(Arc::new(Self {
            input: children.swap_remove(0),
            cancellation: self.cancellation.clone(),
        }))
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        self.replace_children(
            children,
            ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
        )
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        if self.cancellation.is_cancelled() {
            return Err(cancelled());
        }
        Ok(Box::pin(StopWhenCancelled {
            input: self.input.execute(partition, context)?,
            cancellation: self.cancellation.clone(),
        }))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        None
    }
}

struct StopWhenCancelled {
    input: SendableRecordBatchStream,
    cancellation: Cancellation,
}

impl Stream for StopWhenCancelled {
    type Item = DfResult<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.cancellation.is_cancelled() {
            return Poll::Ready(Some(Err(cancelled())));
        }
        self.input.as_mut().poll_next(cx)
    }
}

impl RecordBatchStream for StopWhenCancelled {
    fn schema(&self) -> SchemaRef {
        self.input.schema()
    }
}

fn cancelled() -> DataFusionError {
    DataFusionError::Execution("the query was cancelled".into())
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use datafusion::physical_plan::collect;
    use datafusion::prelude::SessionContext;

    use super::*;

    const CROSS_JOIN: &str = "select sum(a.value * b.value) as s from generate_series(1, 100000) a \
                              cross join generate_series(1, 100000) b";

    /// The query runs on a runtime of its own, as users' queries do (crate::runtime): its
    /// threads are busy, and this thread keeps the time.
    #[test]
    fn a_cancelled_cross_join_stops_within_a_batch() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let ctx = SessionContext::new();
        let plan = runtime
            .block_on(async { ctx.sql(CROSS_JOIN).await?.create_physical_plan().await })
            .unwrap();
        let cancellation = Cancellation::default();
        let guarded = cancellation.guard(plan).unwrap();
        let running = runtime.spawn(collect(guarded, ctx.task_ctx()));
        std::thread::sleep(Duration::from_millis(500));
        assert!(!running.is_finished(), "10^10 rows take longer than 500 ms");
        let cancelled_at = Instant::now();
        cancellation.cancel();
        // One batch of each operator's work, not the 10^10 rows (minutes).
        while !running.is_finished() {
            if cancelled_at.elapsed() > Duration::from_secs(5) {
                // Not waiting for the busy threads to finish the join.
                runtime.shutdown_background();
                panic!("still running 5 s after the cancellation");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let error = runtime.block_on(running).unwrap().unwrap_err();
        assert_eq!(
            error.strip_backtrace(),
            "Execution error: the query was cancelled"
        );
    }

    #[tokio::test]
    async fn a_guarded_plan_answers_as_before() {
        let ctx = SessionContext::new();
        let plan = ctx
            .sql(
                "select sum(a.value * b.value) as s from generate_series(1, 300) a \
                  cross join generate_series(1, 200) b",
            )
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap();
        let guarded = Cancellation::default().guard(plan).unwrap();
        let batches = collect(guarded, ctx.task_ctx()).await.unwrap();
        // (1 + … + 300)(1 + … + 200) = 45150 × 20100.
        let sum = arrow::array::cast::as_primitive_array::<arrow::datatypes::Int64Type>(
            batches[0].column(0),
        )
        .value(0);
        assert_eq!(sum, 45_150 * 20_100);
    }

    /// A team barrier's scan is no child of the barrier; the guard reaches it all the same, and
    /// a cancelled query stops there too.
    #[tokio::test]
    async fn the_guard_reaches_a_team_barriers_scan() {
        use arrow::array::{Int64Array, StringArray};
        use arrow::datatypes::{DataType, Field, Schema};
        use datafusion::datasource::memory::MemorySourceConfig;

        use crate::hidden_inputs::hidden_inputs;
        use crate::scope::TeamRowsExec;

        let schema = Arc::new(Schema::new(vec![
            Field::new("gpu_hours", DataType::Int64, false),
            Field::new("team", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from(vec![3, 5, 7])),
                Arc::new(StringArray::from(vec![
                    Some("ml"),
                    Some("infra"),
                    Some("ml"),
                ])),
            ],
        )
        .unwrap();
        let scan = MemorySourceConfig::try_new_exec(&[vec![batch]], schema, None).unwrap();
        let barrier: Arc<dyn ExecutionPlan> =
            Arc::new(TeamRowsExec::new(scan, 1, 1, "ml".into()).unwrap());
        let ctx = SessionContext::new();

        let cancellation = Cancellation::default();
        let guarded = cancellation.guard(barrier).unwrap();
        let inside = guarded.children()[0];
        assert_eq!(inside.name(), "TeamRowsExec");
        let scans = hidden_inputs(inside.as_ref());
        assert_eq!(scans.len(), 1);
        assert_eq!(scans[0].name(), "StopWhenCancelledExec");

        // Uncancelled, the team's rows: 3 + 7.
        let batches = collect(Arc::clone(&guarded), ctx.task_ctx()).await.unwrap();
        let kept = arrow::array::cast::as_primitive_array::<arrow::datatypes::Int64Type>(
            batches[0].column(0),
        );
        assert_eq!(kept.values().to_vec(), vec![3, 7]);

        cancellation.cancel();
        let error = collect(guarded, ctx.task_ctx()).await.unwrap_err();
        assert_eq!(
            error.strip_backtrace(),
            "Execution error: the query was cancelled"
        );
    }
}
