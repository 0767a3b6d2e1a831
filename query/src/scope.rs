//! Team scoping: what a session of a team-scoped token can see.
//!
//! A team-scoped session is built so that the filter cannot be removed by the SQL it runs: the
//! names `gpu_hours`, `allocations`, … resolve to views that keep only `team = '<team>'`, tables
//! that carry no team (raw telemetry, billing lines, the quarantine, `system.*`) are not
//! registered at all, and every table function's result is filtered the same way — a function
//! whose rows belong to no team (`idle_summary`) is refused. `UNION`, subqueries, CTEs and
//! `information_schema` all resolve names through the same catalog, so they see the same views.

use std::sync::Arc;

use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl};
use datafusion::common::{Result as DfResult, plan_err};
use datafusion::datasource::{TableProvider, ViewTable, provider_as_source};
use datafusion::logical_expr::{LogicalPlanBuilder, col, lit};

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
    name: &str,
    provider: Arc<dyn TableProvider>,
    team: &str,
) -> DfResult<Option<Arc<dyn TableProvider>>> {
    if provider.schema().column_with_name(TEAM_COLUMN).is_none() {
        return Ok(None);
    }
    let plan = LogicalPlanBuilder::scan(name, provider_as_source(provider), None)?
        .filter(col(TEAM_COLUMN).eq(lit(team)))?
        .build()?;
    Ok(Some(Arc::new(ViewTable::new(plan, None))))
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
