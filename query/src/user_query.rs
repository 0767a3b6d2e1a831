//! SQL from users (HTTP, the Postgres wire): read-only, and bounded in time and result size.
//!
//! Memory is bounded by the session ([`crate::session::SessionOptions::memory_limit`]); this
//! module refuses anything but queries before they run — DDL (`CREATE EXTERNAL TABLE`), DML and
//! `COPY … TO`, and statements such as `SET` that would lift the limits — and stops a query
//! that runs past its time. Planning a refused statement touches nothing: DataFusion reads a
//! `LOCATION` only when the plan is executed.

use std::time::Duration;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::error::DataFusionError;
use datafusion::execution::context::SQLOptions;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SessionContext;
use futures::StreamExt;

use crate::error::QueryError;

/// The bounds of one user query.
#[derive(Debug, Clone, Copy)]
pub struct QueryLimits {
    pub timeout: Duration,
    /// Bytes of results held for the response (Arrow in memory).
    pub max_result_bytes: usize,
}

impl Default for QueryLimits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(60),
            max_result_bytes: 256 << 20,
        }
    }
}

/// Only queries: no DDL, DML, `COPY` or session statements.
pub fn read_only() -> SQLOptions {
    SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false)
}

/// Plans `sql` and refuses it unless it only reads.
pub async fn plan_read_only(ctx: &SessionContext, sql: &str) -> Result<LogicalPlan, QueryError> {
    let plan = ctx.state().create_logical_plan(sql).await?;
    refuse_unless_read_only(&plan)?;
    Ok(plan)
}

/// Refuses a `plan` that does more than read (the Postgres wire plans statements itself).
pub fn refuse_unless_read_only(plan: &LogicalPlan) -> Result<(), QueryError> {
    read_only()
        .verify_plan(plan)
        .map_err(|error| QueryError::Refused(refusal(&error)))
}

/// A query's whole result.
#[derive(Debug)]
pub struct QueryResult {
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
}

/// Runs a read-only `plan` to completion within `limits`.
///
/// The plan runs in a task of its own: a CPU-bound operator (a large join) may not yield for
/// seconds, and the caller must get its answer at the deadline, not when the operator next
/// yields. The task is aborted then and stops at its next yield point.
pub async fn execute(
    ctx: &SessionContext,
    plan: LogicalPlan,
    limits: &QueryLimits,
) -> Result<QueryResult, QueryError> {
    let ctx = ctx.clone();
    let max_result_bytes = limits.max_result_bytes;
    let mut task = tokio::spawn(async move {
        let frame = ctx.execute_logical_plan(plan).await?;
        let schema = SchemaRef::new(frame.schema().as_arrow().clone());
        let mut stream = frame.execute_stream().await?;
        let mut batches = Vec::new();
        let mut bytes = 0usize;
        while let Some(batch) = stream.next().await {
            let batch = batch?;
            bytes += batch.get_array_memory_size();
            if bytes > max_result_bytes {
                return Err(QueryError::ResultTooLarge {
                    limit_bytes: max_result_bytes,
                });
            }
            batches.push(batch);
        }
        Ok(QueryResult { schema, batches })
    });
    match tokio::time::timeout(limits.timeout, &mut task).await {
        Ok(Ok(result)) => result,
        Ok(Err(join_error)) => Err(DataFusionError::ExecutionJoin(Box::new(join_error)).into()),
        Err(_elapsed) => {
            task.abort();
            Err(QueryError::Timeout(limits.timeout))
        }
    }
}

/// Plans and runs a user's `sql`.
pub async fn run(
    ctx: &SessionContext,
    sql: &str,
    limits: &QueryLimits,
) -> Result<QueryResult, QueryError> {
    let plan = plan_read_only(ctx, sql).await?;
    execute(ctx, plan, limits).await
}

/// DataFusion says "DDL not supported: CreateExternalTable"; users get one sentence.
fn refusal(error: &datafusion::error::DataFusionError) -> String {
    let what = error.message();
    format!("only read-only queries are allowed ({what})")
}

#[cfg(test)]
mod tests;
