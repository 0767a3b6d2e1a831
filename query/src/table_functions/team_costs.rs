//! `team_costs(from, to)`: what each team pays in a window — direct (allocated and busy),
//! allocated idle, its share of the shared pools — and the GPU-hours it held.
//!
//! ```sql
//! select * from team_costs('2026-11-02', '2026-11-09') order by total_cost desc;
//! ```
//! Rows come in no particular order: say `ORDER BY`.
//! Unallocated GPU time (reserved by reason, unexplained, fault) belongs to no team: see
//! `idle_summary`. Together the two add up to the ledger's whole cost for the window.

use std::sync::Arc;

use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl};
use datafusion::common::{JoinType, Result as DfResult};
use datafusion::datasource::{TableProvider, ViewTable};
use datafusion::functions_aggregate::expr_fn::sum;
use datafusion::logical_expr::{Expr, col, lit, when};

use super::support::{no_money, scan_window, window};

#[derive(Debug)]
pub struct TeamCosts {
    pub gpu_hours: Arc<dyn TableProvider>,
    pub cost_entries: Arc<dyn TableProvider>,
}

fn bucket_sum(bucket: &str, name: &str) -> DfResult<Expr> {
    Ok(sum(when(col("bucket").eq(lit(bucket)), col("amount")).otherwise(no_money())?).alias(name))
}

impl TableFunctionImpl for TeamCosts {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        let bounds = window("team_costs", &args)?;
        let costs = scan_window("cost_entries", &self.cost_entries, "day", &bounds)?
            .filter(col("team").is_not_null())?
            .aggregate(
                vec![col("team")],
                vec![
                    bucket_sum("direct", "direct_cost")?,
                    bucket_sum("allocated_idle", "allocated_idle_cost")?,
                    bucket_sum("shared", "shared_cost")?,
                    sum(col("amount")).alias("total_cost"),
                ],
            )?
            .build()?;
        let held = scan_window("gpu_hours", &self.gpu_hours, "hour", &bounds)?
            .filter(col("team").is_not_null())?
            .aggregate(
                vec![col("team").alias("held_by")],
                vec![(sum(col("alloc_seconds")) / lit(3600.0)).alias("gpu_hours")],
            )?
            .build()?;
        let plan = datafusion::logical_expr::LogicalPlanBuilder::from(costs)
            .join(held, JoinType::Left, (vec!["team"], vec!["held_by"]), None)?
            .project(vec![
                col("team"),
                datafusion::functions::expr_fn::coalesce(vec![col("gpu_hours"), lit(0.0)])
                    .alias("gpu_hours"),
                col("direct_cost"),
                col("allocated_idle_cost"),
                col("shared_cost"),
                col("total_cost"),
            ])?
            .build()?;
        Ok(Arc::new(ViewTable::new(plan, None)))
    }
}
