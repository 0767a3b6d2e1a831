//! What the table functions share, and only that: their `(from, to)` window, window scans,
//! money zero, the [`Computed`] table they return, running a plan inside a scan, the declared
//! objects they read; result columns are read with `crate::columns`.

use std::fmt::Debug;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, SchemaRef, TimeUnit};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableFunctionArgs};
use datafusion::common::{DataFusionError, Result as DfResult, ScalarValue, plan_err};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::{TableProvider, TableType, provider_as_source};
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder, col, lit};
use datafusion::physical_plan::{ExecutionPlan, collect};
use gpuledger_lake::Catalog;
use gpuledger_ledger::objects::Spec;

pub(super) use crate::columns::{
    column, floats, integers, several, strings, text, timestamps, value,
};
use crate::error::to_df;

/// The `(from, to)` arguments as UTC timestamps in microseconds.
pub(super) fn window(name: &str, args: &TableFunctionArgs) -> DfResult<(ScalarValue, ScalarValue)> {
    let exprs = args.exprs();
    if exprs.len() != 2 {
        return plan_err!("{name}(from, to) takes 2 arguments, got {}", exprs.len());
    }
    Ok((
        timestamp_arg(name, args, 0, "from")?,
        timestamp_arg(name, args, 1, "to")?,
    ))
}

/// Argument `i` (called `which`) as a UTC timestamp in microseconds: a date, a timestamp or a
/// timestamp string literal.
pub(super) fn timestamp_arg(
    name: &str,
    args: &TableFunctionArgs,
    i: usize,
    which: &str,
) -> DfResult<ScalarValue> {
    let target = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
    let Some(Expr::Literal(value, _)) = args.exprs().get(i) else {
        return plan_err!(
            "{name}: '{which}' must be a date or timestamp literal, e.g. '2026-11-02'"
        );
    };
    value.cast_to(&target).map_err(|_| {
        DataFusionError::Plan(format!(
            "{name}: '{which}' ({value}) is not a date or timestamp"
        ))
    })
}

/// Zero in the lake's money type, for `coalesce` and `CASE` over money columns: a float zero
/// would turn their exact decimal sums into float sums.
pub(crate) fn no_money() -> Expr {
    lit(ScalarValue::Decimal128(
        Some(0),
        gpuledger_lake::tables::MONEY_PRECISION,
        gpuledger_lake::tables::MONEY_SCALE,
    ))
}

/// A money column with NULL read as zero.
pub(super) fn money_or_zero(name: &str) -> Expr {
    datafusion::functions::expr_fn::coalesce(vec![col(name), no_money()])
}

/// Scans `table` with `time_column` in `[from, to)`.
pub(super) fn scan_window(
    name: &str,
    table: &Arc<dyn TableProvider>,
    time_column: &str,
    (from, to): &(ScalarValue, ScalarValue),
) -> DfResult<LogicalPlanBuilder> {
    LogicalPlanBuilder::scan(name, provider_as_source(Arc::clone(table)), None)?.filter(
        col(time_column)
            .gt_eq(lit(from.clone()))
            .and(col(time_column).lt(lit(to.clone()))),
    )
}

/// What a computed table function returns: rows worked out from the lake and the catalog when a
/// query scans it (never stored), small enough to hold in memory.
#[async_trait]
pub(super) trait Computed: Debug + Send + Sync + 'static {
    fn schema(&self) -> SchemaRef;

    /// The rows, in batches of [`Computed::schema`].
    async fn batches(&self, state: &dyn Session) -> DfResult<Vec<RecordBatch>>;
}

/// A [`Computed`] table as DataFusion scans it: a view, computed on each scan and projected in
/// memory; filters and limits are left to the plan above it.
#[derive(Debug)]
struct ComputedTable<T>(T);

pub(super) fn computed(table: impl Computed) -> Arc<dyn TableProvider> {
    Arc::new(ComputedTable(table))
}

#[async_trait]
impl<T: Computed> TableProvider for ComputedTable<T> {
    fn schema(&self) -> SchemaRef {
        self.0.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let batches = self.0.batches(state).await?;
        Ok(MemorySourceConfig::try_new_exec(
            &[batches],
            self.schema(),
            projection.cloned(),
        )?)
    }
}

/// The catalog's objects of one kind, typed (read when a query runs, so it sees the latest apply).
pub(super) async fn declared_specs<S: Spec>(catalog: &Catalog) -> DfResult<Vec<S>> {
    let declared = catalog.objects_of::<S>().await.map_err(to_df)?;
    Ok(declared.into_iter().map(|d| d.spec).collect())
}

pub(super) async fn run(state: &dyn Session, plan: LogicalPlan) -> DfResult<Vec<RecordBatch>> {
    let physical = state.create_physical_plan(&plan).await?;
    collect(physical, state.task_ctx()).await
}
