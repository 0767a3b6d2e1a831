//! Team scoping: what a session of a team-scoped token can see.
//!
//! A team-scoped session is built so that the filter cannot be removed by the SQL it runs: the
//! names `gpu_hours`, `allocations`, … resolve to [`TeamTable`]s, tables that carry no team (raw
//! telemetry, billing lines, the quarantine, `system.*`) are not registered at all, and every
//! table function's result is filtered the same way — a function whose rows belong to no team
//! (`idle_summary`) is refused. `UNION`, subqueries, CTEs and `information_schema` all resolve
//! names through the same catalog, so they see the same tables.
//!
//! The team filter is a row-level security barrier: a [`TeamTable`]'s scan is a
//! [`TeamRowsExec`] that keeps the team's rows of the table's own scan before anything of the
//! user's query sees a row. The user's predicates are not pushed below it (an expression that
//! fails on another team's row would tell what that row holds), the optimizer cannot merge
//! them into it (it is no `FilterExec`), and it shows no child in `EXPLAIN`, reports no
//! statistics and counts only the team's rows in `EXPLAIN ANALYZE`.

use std::fmt;
use std::sync::Arc;

use arrow::array::{Array, RecordBatch};
use arrow::compute::filter_record_batch;
use arrow::compute::kernels::cmp::eq;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result as DfResult, ScalarValue, plan_err};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{BaselineMetrics, ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties,
    Partitioning, PlanProperties, ReplaceChildrenOptions, SendableRecordBatchStream,
};
use futures::StreamExt;

use crate::lake_table::LakeTable;

/// Who a session answers to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Scope {
    /// Every row.
    #[default]
    All,
    /// Only the rows whose `team` is this team.
    Team(String),
}

/// The column every team-owned row carries.
pub const TEAM_COLUMN: &str = "team";

/// DataFusion's own table functions that generate values and read no data: allowed to everyone.
const DATA_FREE_FUNCTIONS: [&str; 2] = ["generate_series", "range"];

/// `provider` seen by `team`: its rows with `team = '<team>'`, or `None` when its rows carry no
/// team, so that the table must stay hidden.
pub fn team_view(
    _name: &str,
    provider: Arc<dyn TableProvider>,
    team: &str,
) -> DfResult<Option<Arc<dyn TableProvider>>> {
    if provider.schema().column_with_name(TEAM_COLUMN).is_none() {
        return Ok(None);
    }
    Ok(Some(Arc::new(TeamTable {
        inner: provider,
        team: team.to_string(),
    })))
}

/// A table of which only one team's rows exist.
#[derive(Debug)]
pub struct TeamTable {
    inner: Arc<dyn TableProvider>,
    team: String,
}

#[async_trait]
impl TableProvider for TeamTable {
    fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }

    fn table_type(&self) -> TableType {
        // A view: the rows are a selection of another table's.
        TableType::View
    }

    /// The user's filters stay above the barrier (and are re-applied there, whatever the scan
    /// does with them).
    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        _limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let schema = self.inner.schema();
        let team_index = schema.index_of(TEAM_COLUMN)?;
        let mut columns: Vec<usize> = match projection {
            Some(projection) => projection.clone(),
            None => (0..schema.fields().len()).collect(),
        };
        let output_columns = columns.len();
        let team_position = match columns.iter().position(|c| *c == team_index) {
            Some(position) => position,
            None => {
                columns.push(team_index);
                columns.len() - 1
            }
        };
        // A lake table uses filters only to choose its files by time, from literal bounds, and
        // tests rows only against its own range of two literal times (`TimeFilter`): no user
        // expression is evaluated on a row there. Any other table gets none, and no limit
        // either (a limit below the team filter would cut the team's rows).
        let is_lake_table = self.inner.is::<LakeTable>();
        let filters = if is_lake_table { filters } else { &[] };
        let input = self
            .inner
            .scan(state, Some(&columns), filters, None)
            .await?;
        Ok(Arc::new(TeamRowsExec::new(
            input,
            team_position,
            output_columns,
            self.team.clone(),
        )?))
    }
}

/// The rows of `input` whose column `team_position` is `team`, with the first `output_columns`
/// columns. Its input is hidden: it is no child of this plan, for the optimizer or `EXPLAIN`.
#[derive(Debug)]
pub struct TeamRowsExec {
    input: Arc<dyn ExecutionPlan>,
    team_position: usize,
    output_columns: usize,
    team: String,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl TeamRowsExec {
    pub(crate) fn new(
        input: Arc<dyn ExecutionPlan>,
        team_position: usize,
        output_columns: usize,
        team: String,
    ) -> DfResult<Self> {
        let schema = Arc::new(
            input
                .schema()
                .project(&(0..output_columns).collect::<Vec<_>>())?,
        );
        let properties = PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            Partitioning::UnknownPartitioning(input.output_partitioning().partition_count()),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Ok(Self {
            input,
            team_position,
            output_columns,
            team,
            schema,
            properties: Arc::new(properties),
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }

    /// The scan under the barrier (no child of the plan: see the module's doc).
    pub(crate) fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }

    /// The team, where its column is in the input, and how many columns leave the barrier.
    pub(crate) fn parts(&self) -> (&str, usize, usize) {
        (&self.team, self.team_position, self.output_columns)
    }

    /// The same barrier over `input` (a slice of the same scan, on a worker's task).
    pub(crate) fn with_input(&self, input: Arc<dyn ExecutionPlan>) -> DfResult<Self> {
        Self::new(
            input,
            self.team_position,
            self.output_columns,
            self.team.clone(),
        )
    }
}

impl DisplayAs for TeamRowsExec {
    fn fmt_as(&self, _format: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "TeamRowsExec: team={}", self.team)
    }
}

impl ExecutionPlan for TeamRowsExec {
    fn name(&self) -> &str {
        "TeamRowsExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
        _options: ReplaceChildrenOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(self)
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
        let input = self.input.execute(partition, context)?;
        let metrics = BaselineMetrics::new(&self.metrics, partition);
        let team = ScalarValue::Utf8(Some(self.team.clone()));
        let (team_position, output_columns) = (self.team_position, self.output_columns);
        let output_schema = Arc::clone(&self.schema);
        let rows = input.map(move |batch| {
            let batch = batch?;
            let _timer = metrics.elapsed_compute().timer();
            let kept = team_rows(&batch, team_position, output_columns, &team, &output_schema)?;
            metrics.record_output(kept.num_rows());
            Ok(kept)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            rows,
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

/// The rows of `batch` whose team is `team`, with its first `output_columns` columns.
fn team_rows(
    batch: &RecordBatch,
    team_position: usize,
    output_columns: usize,
    team: &ScalarValue,
    schema: &SchemaRef,
) -> DfResult<RecordBatch> {
    let teams = batch.column(team_position);
    let team = team.cast_to(teams.data_type())?.to_scalar()?;
    // A null team is no team's: `eq` is null there, and the filter drops nulls.
    let keep = eq(teams, &team)?;
    let kept = filter_record_batch(batch, &keep)?;
    let columns = kept.columns()[..output_columns].to_vec();
    Ok(RecordBatch::try_new_with_options(
        Arc::clone(schema),
        columns,
        &arrow::array::RecordBatchOptions::new().with_row_count(Some(kept.num_rows())),
    )?)
}

/// A table function whose every result is seen through [`team_view`].
#[derive(Debug)]
pub struct TeamScopedFunction {
    pub name: String,
    pub inner: Arc<dyn TableFunctionImpl>,
    pub team: String,
}

impl TableFunctionImpl for TeamScopedFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        let provider = self.inner.call_with_args(args)?;
        if DATA_FREE_FUNCTIONS.contains(&self.name.as_str()) {
            return Ok(provider);
        }
        match team_view(&self.name, provider, &self.team)? {
            Some(view) => Ok(view),
            None => plan_err!(
                "{}(…) is not available to a token scoped to team '{}': its rows belong to no team",
                self.name,
                self.team
            ),
        }
    }
}
