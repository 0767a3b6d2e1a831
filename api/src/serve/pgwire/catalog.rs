//! `pg_catalog` on a connection's session: datafusion-postgres's, which lists the session's
//! own tables (so a team-scoped token's catalog shows its views only) and answers the catalog
//! queries of psql, DBeaver, Grafana and Metabase.
//!
//! Its `pg_proc` holds PostgreSQL's built-in functions only, and it has none of the functions
//! psql's `\df` calls, so `\df` is answered here: the ledger's functions (every function of the
//! session that a bare DataFusion session does not have), as psql lays them out.

use std::collections::HashSet;
use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use datafusion::arrow::array::{RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::ParamValues;
use datafusion::logical_expr::{Documentation, LogicalPlan};
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::Statement;
use datafusion_postgres::arrow_pg::datatypes::df::encode_dataframe;
use datafusion_postgres::datafusion_pg_catalog::pg_catalog::context::EmptyContextProvider;
use datafusion_postgres::datafusion_pg_catalog::setup_pg_catalog;
use datafusion_postgres::hooks::HookClient;
use datafusion_postgres::{QueryHook, pgwire};
use gpuledger_query::QueryError;
use gpuledger_query::session::{CATALOG_NAME, DEFAULT_SCHEMA};
use pgwire::api::ClientInfo;
use pgwire::api::portal::Format;
use pgwire::api::results::Response;
use pgwire::error::PgWireResult;

use super::pg_error;
use crate::error::ApiError;

/// Installs `pg_catalog` and PostgreSQL's session functions; the returned hook answers `\df`
/// with the functions `ctx` had before (the ledger's, not PostgreSQL's).
pub fn install(ctx: &SessionContext) -> Result<DescribeFunctions, ApiError> {
    let functions = DescribeFunctions::new(ctx).map_err(QueryError::from)?;
    setup_pg_catalog(ctx, CATALOG_NAME, EmptyContextProvider)
        .map_err(|error| ApiError::Query((*error).into()))?;
    super::postgres::register_functions(ctx);
    Ok(functions)
}

/// DataFusion's own functions, which `\df` leaves out as PostgreSQL leaves out pg_catalog's.
static BUILT_IN: LazyLock<HashSet<String>> = LazyLock::new(|| {
    let state = SessionContext::new().state();
    (state.scalar_functions().keys())
        .chain(state.aggregate_functions().keys())
        .chain(state.window_functions().keys())
        .chain(state.table_functions().keys())
        .cloned()
        .collect()
});

/// psql's `\df`: schema, name, result type, arguments and kind of each ledger function.
#[derive(Debug)]
pub struct DescribeFunctions {
    rows: RecordBatch,
}

impl DescribeFunctions {
    fn new(ctx: &SessionContext) -> datafusion::error::Result<Self> {
        let state = ctx.state();
        let arguments = |doc: Option<&Documentation>| {
            doc.and_then(|doc| doc.arguments.as_ref())
                .map(|args| {
                    let names: Vec<&str> = args.iter().map(|(name, _)| name.as_str()).collect();
                    names.join(", ")
                })
                .unwrap_or_default()
        };
        // (name, result data type, argument names, type) as psql shows them.
        let mut functions: Vec<(String, &str, String, &str)> = Vec::new();
        for (name, function) in state.scalar_functions() {
            functions.push((
                name.clone(),
                "",
                arguments(function.documentation()),
                "func",
            ));
        }
        for (name, function) in state.aggregate_functions() {
            functions.push((name.clone(), "", arguments(function.documentation()), "agg"));
        }
        for name in state.table_functions().keys() {
            functions.push((name.clone(), "table", String::new(), "func"));
        }
        functions.retain(|(name, ..)| !BUILT_IN.contains(name));
        functions.sort();
        let column = |values: Vec<&str>| Arc::new(StringArray::from(values)) as _;
        let schema = Schema::new(
            [
                "Schema",
                "Name",
                "Result data type",
                "Argument data types",
                "Type",
            ]
            .map(|name| Field::new(name, DataType::Utf8, false))
            .to_vec(),
        );
        let rows = RecordBatch::try_new(
            Arc::new(schema),
            vec![
                column(functions.iter().map(|_| DEFAULT_SCHEMA).collect()),
                column(functions.iter().map(|f| f.0.as_str()).collect()),
                column(functions.iter().map(|f| f.1).collect()),
                column(functions.iter().map(|f| f.2.as_str()).collect()),
                column(functions.iter().map(|f| f.3).collect()),
            ],
        )?;
        Ok(Self { rows })
    }
}

/// psql's `\df` query is the one that asks for `pg_get_function_result(p.oid)`.
fn is_describe_functions(statement: &Statement) -> bool {
    let sql = statement.to_string();
    sql.contains("pg_get_function_result(") && sql.contains("pg_proc")
}

#[async_trait]
impl QueryHook for DescribeFunctions {
    async fn handle_simple_query(
        &self,
        statement: &Statement,
        ctx: &SessionContext,
        _client: &mut dyn HookClient,
    ) -> Option<PgWireResult<Response>> {
        if !is_describe_functions(statement) {
            return None;
        }
        let frame = match ctx.read_batch(self.rows.clone()) {
            Ok(frame) => frame,
            Err(error) => return Some(Err(pg_error(QueryError::from(error).into()))),
        };
        Some(
            encode_dataframe(frame, &Format::UnifiedText, None)
                .await
                .map(Response::Query),
        )
    }

    async fn handle_extended_parse_query(
        &self,
        _statement: &Statement,
        _ctx: &SessionContext,
        _client: &(dyn ClientInfo + Send + Sync),
    ) -> Option<PgWireResult<LogicalPlan>> {
        None
    }

    async fn handle_extended_query(
        &self,
        _statement: &Statement,
        _plan: &LogicalPlan,
        _params: &ParamValues,
        _ctx: &SessionContext,
        _client: &mut dyn HookClient,
    ) -> Option<PgWireResult<Response>> {
        None
    }
}
