//! `focus_allocated(from, to)`: the bill of a window in FOCUS 1.3, each charge split into rows
//! by where the ledger put its money — per team and workload, reserved, unexplained, shared —
//! with `AllocatedMethodId`, `AllocatedMethodDetails`, `AllocatedResourceId`,
//! `AllocatedResourceName` and `AllocatedTags` (`crate::focus_export` documents each).
//!
//! ```sql
//! -- What each team's share of the month's bill is, from the export itself:
//! select "AllocatedTags"->>'gpuledger/team' as team, sum("EffectiveCost")
//! from focus_allocated('2026-11-01', '2026-12-01') group by 1 order by 2 desc;
//! ```
//! Charges are those whose `ChargePeriodStart` is in `[from, to)`; every day they cover must be
//! built. The rows hold every team's money, so a team-scoped token cannot call it.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl};
use datafusion::common::{DataFusionError, Result as DfResult, ScalarValue, plan_err};
use datafusion::datasource::TableProvider;
use datafusion::execution::SessionState;
use datafusion::prelude::SessionContext;
use gpuledger_lake::Catalog;
use gpuledger_ledger::time::Span;

use super::support::{Computed, computed, window};
use crate::focus_export;

#[derive(Debug)]
pub struct FocusAllocated {
    pub catalog: Catalog,
}

impl TableFunctionImpl for FocusAllocated {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        let micros = |v: &ScalarValue| match v {
            ScalarValue::TimestampMicrosecond(Some(t), _) => Some(*t),
            _ => None,
        };
        let (from, to) = window("focus_allocated", &args)?;
        let (Some(from), Some(to)) = (micros(&from), micros(&to)) else {
            return plan_err!("focus_allocated: 'from' and 'to' must not be NULL");
        };
        Ok(computed(FocusTable {
            catalog: self.catalog.clone(),
            window: Span::new(from, to.max(from)),
        }))
    }
}

#[derive(Debug)]
struct FocusTable {
    catalog: Catalog,
    window: Span,
}

#[async_trait]
impl Computed for FocusTable {
    fn schema(&self) -> SchemaRef {
        focus_export::schema()
    }

    async fn batches(&self, state: &dyn Session) -> DfResult<Vec<RecordBatch>> {
        let Some(session) = state.as_any().downcast_ref::<SessionState>() else {
            return plan_err!("focus_allocated: not a DataFusion session");
        };
        let ctx = SessionContext::new_with_state(session.clone());
        focus_export::focus_allocated(&ctx, &self.catalog, self.window)
            .await
            .map_err(|e| DataFusionError::External(Box::new(e)))
    }
}
