//! `idle_summary(from, to)`: GPU-hours and cost of a window by idle class (docs/design.md §5), with
//! intentional idle (reservations, by reason) apart from waste (unexplained) and faults.
//!
//! ```sql
//! select class, reason, gpu_hours, cost from idle_summary('2026-11-02', '2026-11-09');
//! ```
//! One row per class with GPU-hours in the window (`busy`, `allocated_idle`, `reserved` per
//! reason, `unexplained`, `fault`); `intentional` is true for reservations, false for waste and
//! faults, NULL for allocated time.

use std::sync::Arc;

use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::datasource::{TableProvider, ViewTable};
use datafusion::functions_aggregate::expr_fn::sum;
use datafusion::logical_expr::{LogicalPlanBuilder, col, lit};

use super::support::{scan_window, window};

#[derive(Debug)]
pub struct IdleSummary {
    pub gpu_hours: Arc<dyn TableProvider>,
}

impl TableFunctionImpl for IdleSummary {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        let bounds = window("idle_summary", &args)?;
        let no_reason = || lit(ScalarValue::Utf8(None));
        let class = |name: &str,
                     seconds: &str,
                     cost: &str,
                     intentional: Option<bool>|
         -> DfResult<LogicalPlanBuilder> {
            // Grouped by the class name, not a global aggregate: DataFusion pushes a filter on a
            // constant column (`WHERE class IN (…)`) below the aggregate, and a global aggregate
            // over no rows still yields a row (of NULLs) that the filter should have removed.
            scan_window("gpu_hours", &self.gpu_hours, "hour", &bounds)?
                .aggregate(
                    vec![lit(name).alias("class")],
                    vec![
                        sum(col(seconds)).alias("seconds"),
                        sum(col(cost)).alias("cost"),
                    ],
                )?
                .project(vec![
                    col("class"),
                    no_reason().alias("reason"),
                    lit(ScalarValue::Boolean(intentional)).alias("intentional"),
                    (col("seconds") / lit(3600.0)).alias("gpu_hours"),
                    col("cost"),
                ])
        };
        let reserved = scan_window("gpu_hours", &self.gpu_hours, "hour", &bounds)?
            .filter(col("reserved_reason").is_not_null())?
            .aggregate(
                vec![col("reserved_reason")],
                vec![
                    sum(col("reserved_seconds")).alias("seconds"),
                    sum(col("cost_reserved")).alias("cost"),
                ],
            )?
            .project(vec![
                lit("reserved").alias("class"),
                col("reserved_reason").alias("reason"),
                lit(true).alias("intentional"),
                (col("seconds") / lit(3600.0)).alias("gpu_hours"),
                col("cost"),
            ])?
            .build()?;
        let plan = class("busy", "busy_seconds", "cost_busy", None)?
            .union(
                class(
                    "allocated_idle",
                    "allocated_idle_seconds",
                    "cost_allocated_idle",
                    None,
                )?
                .build()?,
            )?
            .union(reserved)?
            .union(
                class(
                    "unexplained",
                    "unexplained_seconds",
                    "cost_unexplained",
                    Some(false),
                )?
                .build()?,
            )?
            .union(class("fault", "fault_seconds", "cost_fault", Some(false))?.build()?)?
            .build()?;
        Ok(Arc::new(ViewTable::new(plan, None)))
    }
}
