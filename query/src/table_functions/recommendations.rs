//! `recommendations(from, to)`: what someone could reclaim in a window, one row per action, each
//! with the money it stands for and whose it is.
//!
//! ```sql
//! select kind, team, action, gpu_hours, cost, cost_per_day
//! from recommendations('2026-11-02', '2026-11-09') order by cost desc;
//! ```
//! - `allocated_idle`: a workload that held GPUs it did not use (allocated, not busy); one row
//!   per cluster, team, namespace and workload, owned by its `team`: release or right-size it.
//! - `unexplained_idle`: a node's GPUs that were neither allocated nor reserved for a declared
//!   reason; one row per cluster and node, with `team` NULL (the platform that runs the node owns
//!   it): find who should hold them, declare a reservation, or release them.
//!
//! Together the rows are the window's waste, to the cent: their `cost` sums to `idle_summary`'s
//! `allocated_idle` plus `unexplained` cost. Intentional idle (reservations) and faults are not
//! recommendations. `cost_per_day` is `cost` over the window's days. Rows come in no particular
//! order: say `ORDER BY cost DESC`. A team-scoped token sees its team's rows only.

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::datasource::{TableProvider, ViewTable};
use datafusion::functions::expr_fn::concat;
use datafusion::functions_aggregate::expr_fn::sum;
use datafusion::logical_expr::{Expr, LogicalPlanBuilder, cast, col, lit};
use gpuledger_ledger::time::MICROS_PER_DAY;

use super::support::{money_or_zero, no_money, scan_window, window};

#[derive(Debug)]
pub struct Recommendations {
    pub gpu_hours: Arc<dyn TableProvider>,
}

/// One kind of action: the `gpu_hours` rows grouped by `keys`, summing `seconds` and `cost`,
/// keeping the groups with any of either.
struct Kind<'a> {
    name: &'a str,
    keys: &'a [&'a str],
    seconds: &'a str,
    cost: &'a str,
    /// The action's wording, around the group's keys.
    action: fn() -> Expr,
}

const COLUMNS: [&str; 5] = ["team", "cluster", "node", "namespace", "workload"];

impl TableFunctionImpl for Recommendations {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        let bounds = window("recommendations", &args)?;
        let days = match &bounds {
            (
                ScalarValue::TimestampMicrosecond(Some(from), _),
                ScalarValue::TimestampMicrosecond(Some(to), _),
            ) => (to - from) as f64 / MICROS_PER_DAY as f64,
            _ => f64::NAN,
        };
        let kinds = [
            Kind {
                name: "allocated_idle",
                keys: &["cluster", "team", "namespace", "workload"],
                seconds: "allocated_idle_seconds",
                cost: "cost_allocated_idle",
                action: || {
                    concat(vec![
                        lit("Release or right-size "),
                        col("namespace"),
                        lit("/"),
                        col("workload"),
                        lit(": allocated GPUs that sat idle"),
                    ])
                },
            },
            Kind {
                name: "unexplained_idle",
                keys: &["cluster", "node"],
                seconds: "unexplained_seconds",
                cost: "cost_unexplained",
                action: || {
                    concat(vec![
                        lit("Find an owner for the idle GPUs of "),
                        col("cluster"),
                        lit("/"),
                        col("node"),
                        lit(", reserve them for a reason, or release them"),
                    ])
                },
            },
        ];
        let mut plan: Option<LogicalPlanBuilder> = None;
        for kind in kinds {
            let rows = scan_window("gpu_hours", &self.gpu_hours, "hour", &bounds)?
                .aggregate(
                    kind.keys.iter().map(|k| col(*k)).collect::<Vec<_>>(),
                    vec![
                        sum(col(kind.seconds)).alias("seconds"),
                        sum(money_or_zero(kind.cost)).alias("cost"),
                    ],
                )?
                .filter(
                    col("seconds")
                        .gt(lit(0.0))
                        .or(col("cost").not_eq(no_money())),
                )?
                .project(
                    [lit(kind.name).alias("kind")]
                        .into_iter()
                        .chain(COLUMNS.iter().map(|c| {
                            if kind.keys.contains(c) {
                                col(*c)
                            } else {
                                lit(ScalarValue::Utf8(None)).alias(*c)
                            }
                        }))
                        .chain([
                            (col("seconds") / lit(3600.0)).alias("gpu_hours"),
                            col("cost"),
                            (cast(col("cost"), DataType::Float64) / lit(days))
                                .alias("cost_per_day"),
                            (kind.action)().alias("action"),
                        ])
                        .collect::<Vec<_>>(),
                )?;
            plan = Some(match plan {
                None => rows,
                Some(plan) => plan.union(rows.build()?)?,
            });
        }
        let plan = plan.expect("two kinds").build()?;
        Ok(Arc::new(ViewTable::new(plan, None)))
    }
}
