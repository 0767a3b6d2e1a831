//! `budget_status(at)`: every declared budget's status at `at` (a date or timestamp; its UTC
//! month is the budget's month), as `GET /v1/budgets/{name}/status?at=` gives it one by one.
//!
//! ```sql
//! select budget, team, month, spend_to_date, forecast, percent_used, state
//! from budget_status('2026-11-20') order by percent_used desc;
//! ```
//! One row per budget: what it watches (`team`, `namespace` or `cost_center`, one of them set),
//! its `amount` and `currency`, the spend to date in the month up to `at`, the forecast to the
//! month's end at the rate over the hours the ledger holds, the percentage used, the `state`
//! (`ok`, `warn`: a threshold below 100 crossed or the forecast past the amount, `over`) and the
//! highest threshold crossed. A team-scoped token sees its team's budgets.

use std::sync::{Arc, LazyLock};

use arrow::array::{ArrayRef, Float64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl};
use datafusion::common::{DataFusionError, Result as DfResult, ScalarValue, plan_err};
use datafusion::datasource::TableProvider;
use datafusion::execution::SessionState;
use datafusion::prelude::SessionContext;
use gpuledger_lake::Catalog;
use gpuledger_ledger::budget::BudgetSpec;

use super::support::{Computed, computed, timestamp_arg};
use crate::error::to_df;
use crate::spend;

#[derive(Debug)]
pub struct BudgetStatusFunction {
    pub catalog: Catalog,
}

impl TableFunctionImpl for BudgetStatusFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        const NAME: &str = "budget_status";
        if args.exprs().len() != 1 {
            return plan_err!("{NAME}(at) takes 1 argument, got {}", args.exprs().len());
        }
        let ScalarValue::TimestampMicrosecond(Some(at), _) = timestamp_arg(NAME, &args, 0, "at")?
        else {
            return plan_err!("{NAME}: 'at' must not be NULL");
        };
        let Some(at) = DateTime::<Utc>::from_timestamp_micros(at) else {
            return plan_err!("{NAME}: 'at' is out of range");
        };
        Ok(computed(BudgetStatusTable {
            catalog: self.catalog.clone(),
            at,
        }))
    }
}

#[derive(Debug)]
struct BudgetStatusTable {
    catalog: Catalog,
    at: DateTime<Utc>,
}

static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let text = |name| Field::new(name, DataType::Utf8, true);
    let number = |name| Field::new(name, DataType::Float64, true);
    Arc::new(Schema::new(vec![
        Field::new("budget", DataType::Utf8, false),
        text("team"),
        text("namespace"),
        text("cost_center"),
        text("month"),
        number("amount"),
        text("currency"),
        number("spend_to_date"),
        number("forecast"),
        number("percent_used"),
        text("state"),
        number("highest_threshold_crossed"),
    ]))
});

#[async_trait]
impl Computed for BudgetStatusTable {
    fn schema(&self) -> SchemaRef {
        SCHEMA.clone()
    }

    async fn batches(&self, state: &dyn Session) -> DfResult<Vec<RecordBatch>> {
        // The spend is read through the calling session, so a team-scoped one sums its own rows.
        let Some(session) = state.as_any().downcast_ref::<SessionState>() else {
            return plan_err!("budget_status: not a DataFusion session");
        };
        let ctx = SessionContext::new_with_state(session.clone());
        let budgets = self
            .catalog
            .objects_of::<BudgetSpec>()
            .await
            .map_err(to_df)?;
        let mut rows = Vec::new();
        for budget in &budgets {
            let Some((month, figures)) =
                spend::budget_status(&ctx, &self.catalog, &budget.spec, self.at)
                    .await
                    .map_err(|e| DataFusionError::External(Box::new(e)))?
            else {
                continue;
            };
            rows.push((budget, month, figures));
        }
        let text = |f: &dyn Fn(usize) -> Option<String>| -> ArrayRef {
            Arc::new((0..rows.len()).map(f).collect::<StringArray>())
        };
        let number = |f: &dyn Fn(usize) -> Option<f64>| -> ArrayRef {
            Arc::new((0..rows.len()).map(f).collect::<Float64Array>())
        };
        let columns: Vec<ArrayRef> = vec![
            text(&|i| Some(rows[i].0.name().to_string())),
            text(&|i| rows[i].0.spec.team.clone()),
            text(&|i| rows[i].0.spec.namespace.clone()),
            text(&|i| rows[i].0.spec.cost_center.clone()),
            text(&|i| Some(rows[i].1.label.clone())),
            number(&|i| Some(rows[i].0.spec.amount)),
            text(&|i| Some(rows[i].0.spec.currency.clone())),
            number(&|i| Some(rows[i].2.spend_to_date)),
            number(&|i| Some(rows[i].2.forecast)),
            number(&|i| Some(rows[i].2.percent_used)),
            text(&|i| {
                serde_json::to_value(rows[i].2.state)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
            }),
            number(&|i| rows[i].2.thresholds_crossed.last().copied()),
        ];
        Ok(vec![RecordBatch::try_new(SCHEMA.clone(), columns)?])
    }
}
