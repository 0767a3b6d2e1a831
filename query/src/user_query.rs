//! SQL from users (HTTP, the Postgres wire): read-only, and bounded in size, time and result size.
//!
//! A statement is checked against the bounds of [`sandbox`] before it is planned, and planned
//! and run on the query runtime ([`runtime`]), under one time limit.
//!
//! Memory is bounded by the session ([`crate::session::SessionOptions::memory_limit`]); this
//! module refuses anything but queries before they run — DDL (`CREATE EXTERNAL TABLE`), DML and
//! `COPY … TO`, and statements such as `SET` that would lift the limits — and stops a query
//! that runs past its time. Planning a refused statement touches nothing: DataFusion reads a
//! `LOCATION` only when the plan is executed.

use std::sync::Arc;
use std::time::Duration;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::error::DataFusionError;
use datafusion::execution::context::SQLOptions;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::execute_stream;
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::Statement as DfStatement;
use futures::StreamExt;

use crate::cancel::Cancellation;
use crate::error::QueryError;
use crate::{runtime, sandbox};

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

/// Plans `sql` and refuses it unless it only reads, on the query runtime.
pub async fn plan_read_only(ctx: &SessionContext, sql: &str) -> Result<LogicalPlan, QueryError> {
    sandbox::check_text(sql)?;
    let ctx = ctx.clone();
    let sql = sql.to_string();
    runtime::run(|_| async move { plan_here(&ctx, &sql).await }).await
}

/// Parses `sql` as the session's dialect and plans it once it is within the bounds of
/// [`sandbox`]; the caller is on a query thread.
async fn plan_here(ctx: &SessionContext, sql: &str) -> Result<LogicalPlan, QueryError> {
    let state = ctx.state();
    let dialect = state.config().options().sql_parser.dialect;
    let statement = state.sql_to_statement(sql, &dialect).map_err(parse_error)?;
    sandbox::check_df_statement(&statement)?;
    if let DfStatement::Statement(statement) = &statement {
        sandbox::check_setting(statement)?;
    }
    let plan = state
        .statement_to_plan(statement)
        .await
        .map_err(|error| with_table_suggestion(ctx, error))?;
    refuse_unless_read_only(&plan)?;
    Ok(plan)
}

/// A planning error, with the nearest table of the session when a name is not found: "table
/// 'gpuledger.public.gpu_hour' not found; did you mean 'gpu_hours'?". Only the session's own
/// tables are offered, so a team's token is never told of a table it cannot read.
pub fn with_table_suggestion(ctx: &SessionContext, error: DataFusionError) -> DataFusionError {
    use datafusion::common::utils::datafusion_strsim::levenshtein;
    let DataFusionError::Plan(message) = error.find_root() else {
        return error;
    };
    let Some((name, _)) = message
        .strip_prefix("table '")
        .and_then(|rest| rest.split_once("' not found"))
    else {
        return error;
    };
    let wanted = name.rsplit('.').next().unwrap_or(name).to_lowercase();
    // Close enough to be a typo: a few edits, fewer for short names.
    let reach = (wanted.chars().count() / 3).clamp(1, 3);
    let mut nearest: Option<(usize, String)> = None;
    for catalog in ctx.catalog_names() {
        let Some(catalog) = ctx.catalog(&catalog) else {
            continue;
        };
        for schema_name in catalog.schema_names() {
            let Some(schema) = catalog.schema(&schema_name) else {
                continue;
            };
            for table in schema.table_names() {
                let distance = levenshtein(&wanted, &table.to_lowercase());
                let shown = if schema_name == "public" {
                    table
                } else {
                    format!("{schema_name}.{table}")
                };
                if distance <= reach && nearest.as_ref().is_none_or(|(best, _)| distance < *best) {
                    nearest = Some((distance, shown));
                }
            }
        }
    }
    match nearest {
        Some((_, table)) => DataFusionError::Plan(format!("{message}; did you mean '{table}'?")),
        None => error,
    }
}

/// A parser error, with the parser's recursion limit said as a statement too complex.
pub fn parse_error(error: DataFusionError) -> QueryError {
    use datafusion::sql::sqlparser::parser::ParserError;
    match error.find_root() {
        DataFusionError::SQL(error, _)
            if matches!(**error, ParserError::RecursionLimitExceeded) =>
        {
            QueryError::StatementTooComplex(
                "its parentheses, subqueries or prefix operators nest too deep".into(),
            )
        }
        _ => error.into(),
    }
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

/// Runs a read-only `plan` to completion within `limits`, on the query runtime.
///
/// At the deadline the query is cancelled: every operator stops at its next batch
/// ([`crate::cancel`]), and its streams and the tasks DataFusion spawned for them are dropped.
pub async fn execute(
    ctx: &SessionContext,
    plan: LogicalPlan,
    limits: &QueryLimits,
) -> Result<QueryResult, QueryError> {
    let ctx = ctx.clone();
    let max_result_bytes = limits.max_result_bytes;
    runtime::run_within(limits.timeout, |cancellation| async move {
        collect(&ctx, plan, max_result_bytes, &cancellation).await
    })
    .await
}

async fn collect(
    ctx: &SessionContext,
    plan: LogicalPlan,
    max_result_bytes: usize,
    cancellation: &Cancellation,
) -> Result<QueryResult, QueryError> {
    match collect_here(ctx, plan, max_result_bytes, cancellation).await {
        Err(QueryError::DataFusion(error)) => {
            Err(crate::distributed::explain_failure(ctx, error).await)
        }
        outcome => outcome,
    }
}

async fn collect_here(
    ctx: &SessionContext,
    plan: LogicalPlan,
    max_result_bytes: usize,
    cancellation: &Cancellation,
) -> Result<QueryResult, QueryError> {
    let frame = ctx.execute_logical_plan(plan).await?;
    let schema = SchemaRef::new(frame.schema().as_arrow().clone());
    let task_context = frame.task_ctx();
    let physical = cancellation.guard(frame.create_physical_plan().await?)?;
    let mut stream = execute_stream(physical, Arc::new(task_context))?;
    let mut batches = Vec::new();
    let mut bytes = 0usize;
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(QueryError::from_datafusion)?;
        bytes += batch.get_array_memory_size();
        if bytes > max_result_bytes {
            return Err(QueryError::ResultTooLarge {
                limit_bytes: max_result_bytes,
            });
        }
        batches.push(batch);
    }
    Ok(QueryResult { schema, batches })
}

/// Plans and runs a user's `sql`; its time limit covers both.
pub async fn run(
    ctx: &SessionContext,
    sql: &str,
    limits: &QueryLimits,
) -> Result<QueryResult, QueryError> {
    sandbox::check_text(sql)?;
    let ctx = ctx.clone();
    let sql = sql.to_string();
    let max_result_bytes = limits.max_result_bytes;
    runtime::run_within(limits.timeout, |cancellation| async move {
        let plan = plan_here(&ctx, &sql).await?;
        collect(&ctx, plan, max_result_bytes, &cancellation).await
    })
    .await
}

/// DataFusion says "DDL not supported: CreateExternalTable"; users get one sentence.
fn refusal(error: &DataFusionError) -> String {
    let what = error.message();
    format!("only read-only queries are allowed ({what})")
}

#[cfg(test)]
mod tests;
