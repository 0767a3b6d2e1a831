//! Table functions over the ledger for arbitrary windows, each in its own module:
//! `team_costs(from, to)`, `idle_summary(from, to)`, `unit_economics(from, to)` and
//! `unit_economics_daily(from, to)`, `training_economics(from, to)`, `spot_savings(from, to)`,
//! `value_report(from, to)` and `value_report_daily(from, to)`,
//! `inference_capacity(model, peak_rps, redundancy)` and `gpu_fit(gpus)`. `from` is inclusive and `to` exclusive;
//! both take a date (`'2026-11-02'`), a timestamp or a timestamp string.

mod capacity;
mod idle_summary;
mod spot_savings;
mod team_costs;
mod training_economics;
mod unit_economics;
mod value_report;

use std::fmt::Debug;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, SchemaRef, TimeUnit};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableFunctionArgs};
use datafusion::common::{Result as DfResult, ScalarValue, plan_err};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::{TableProvider, TableType, provider_as_source};
use datafusion::logical_expr::{Expr, LogicalPlanBuilder, col, lit};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;

pub use capacity::{GpuFit, InferenceCapacity};
pub use idle_summary::IdleSummary;
pub use spot_savings::SpotSavings;
pub use team_costs::TeamCosts;
pub use training_economics::TrainingEconomics;
pub use unit_economics::{UnitEconomicsFunction, UnitEconomicsSources};
pub use value_report::ValueReportFunction;

/// Registers every table function of this module, reading the given lake tables (and, for the
/// SLOs of `unit_economics`, the catalog).
pub fn register_all(ctx: &SessionContext, sources: UnitEconomicsSources) {
    ctx.register_udtf(
        "team_costs",
        Arc::new(TeamCosts {
            gpu_hours: Arc::clone(&sources.gpu_hours),
            cost_entries: Arc::clone(&sources.cost_entries),
        }),
    );
    ctx.register_udtf(
        "idle_summary",
        Arc::new(IdleSummary {
            gpu_hours: Arc::clone(&sources.gpu_hours),
        }),
    );
    for daily in [false, true] {
        let function = UnitEconomicsFunction {
            sources: sources.clone(),
            daily,
        };
        ctx.register_udtf(function.name(), Arc::new(function));
        let function = ValueReportFunction {
            sources: sources.clone(),
            daily,
        };
        ctx.register_udtf(function.name(), Arc::new(function));
    }
    ctx.register_udtf(
        "training_economics",
        Arc::new(TrainingEconomics {
            gpu_hours: Arc::clone(&sources.gpu_hours),
            scheduler_events: Arc::clone(&sources.scheduler_events),
        }),
    );
    ctx.register_udtf(
        "inference_capacity",
        Arc::new(InferenceCapacity {
            sources: sources.clone(),
        }),
    );
    ctx.register_udtf(
        "gpu_fit",
        Arc::new(GpuFit {
            sources: sources.clone(),
        }),
    );
    ctx.register_udtf(
        "spot_savings",
        Arc::new(SpotSavings {
            gpu_hours: Arc::clone(&sources.gpu_hours),
            billing_lines: Arc::clone(&sources.billing_lines),
            scheduler_events: Arc::clone(&sources.scheduler_events),
            catalog: sources.catalog.clone(),
        }),
    );
}

/// The `(from, to)` arguments as UTC timestamps in microseconds.
fn window(name: &str, args: &TableFunctionArgs) -> DfResult<(ScalarValue, ScalarValue)> {
    let target = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
    let exprs = args.exprs();
    if exprs.len() != 2 {
        return plan_err!("{name}(from, to) takes 2 arguments, got {}", exprs.len());
    }
    let bound = |i: usize, which: &str| -> DfResult<ScalarValue> {
        let Expr::Literal(value, _) = &exprs[i] else {
            return plan_err!(
                "{name}: '{which}' must be a date or timestamp literal, e.g. '2026-11-02'"
            );
        };
        value.cast_to(&target).map_err(|_| {
            datafusion::error::DataFusionError::Plan(format!(
                "{name}: '{which}' ({value}) is not a date or timestamp"
            ))
        })
    };
    Ok((bound(0, "from")?, bound(1, "to")?))
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
fn money_or_zero(name: &str) -> Expr {
    datafusion::functions::expr_fn::coalesce(vec![col(name), no_money()])
}

/// Scans `table` with `time_column` in `[from, to)`.
fn scan_window(
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
trait Computed: Debug + Send + Sync + 'static {
    fn schema(&self) -> SchemaRef;

    /// The rows, in batches of [`Computed::schema`].
    async fn batches(&self, state: &dyn Session) -> DfResult<Vec<RecordBatch>>;
}

/// A [`Computed`] table as DataFusion scans it: a view, computed on each scan and projected in
/// memory; filters and limits are left to the plan above it.
#[derive(Debug)]
struct ComputedTable<T>(T);

fn computed(table: impl Computed) -> Arc<dyn TableProvider> {
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
