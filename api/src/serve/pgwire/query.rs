//! The simple and the extended query protocol. A statement is parsed as PostgreSQL (with
//! datafusion-postgres's rewrites of catalog queries), `SET`/`SHOW`/`BEGIN`… are answered by
//! datafusion-postgres's hooks, and everything else is planned, refused unless it only reads,
//! and run under the SQL limits of `serve`, like `POST /v1/sql`.
//!
//! DataFusion calls a table function while planning, with literal arguments: a prepared
//! `team_costs($1, $2)` is planned once its parameters are bound, with their values in place.

use std::fmt::Debug;
use std::ops::ControlFlow;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ParamValues;
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast;
use datafusion::sql::unparser::Unparser;
use datafusion_postgres::arrow_pg::datatypes::df::deserialize_parameters_with_server_types;
use datafusion_postgres::arrow_pg::datatypes::{arrow_schema_to_pg_fields, encode_recordbatch};
use datafusion_postgres::datafusion_pg_catalog::sql::PostgresCompatibilityParser;
use datafusion_postgres::hooks::set_show::SetShowHook;
use datafusion_postgres::hooks::transactions::TransactionStatementHook;
use datafusion_postgres::{DfSessionService, Parser, QueryHook, pgwire};
use futures::Sink;
use gpuledger_query::QueryError;
use gpuledger_query::session::CATALOG_NAME;
use gpuledger_query::user_query::{self, QueryResult, refuse_unless_read_only};
use gpuledger_query::{runtime, sandbox};
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{DescribePortalResponse, FieldInfo, QueryResponse, Response};
use pgwire::api::stmt::QueryParser;
use pgwire::api::store::PortalStore;
use pgwire::api::{ClientInfo, ClientPortalStore, Type};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::extendedquery::Execute;
use pgwire::types::format::FormatOptions;

use super::{Connection, catalog, cursors, pg_error, postgres};
use crate::error::ApiError;

/// A parsed statement as datafusion-postgres keeps it: its text, and the statement with its plan.
type Planned = (String, Option<(ast::Statement, LogicalPlan)>);

/// A statement of the extended protocol.
#[derive(Debug, Clone)]
pub enum Statement {
    Planned(Box<Planned>),
    /// A statement with parameters that does not plan without their values (a table
    /// function's arguments): planned once they are bound.
    Unplanned(Box<ast::Statement>),
    /// A statement about the session itself, answered by [`postgres`] (`DEALLOCATE`, `DISCARD`,
    /// `SHOW` of a setting).
    Session(Box<ast::Statement>),
}

/// The most parameters a statement may take: the protocol counts them in 16 bits.
const MAX_PARAMETERS: usize = u16::MAX as usize;

/// Refuses a statement whose `$n` no `Bind` could fill, before anything is sized by its `n`.
fn check_parameter_numbers(statement: &ast::Statement) -> PgWireResult<()> {
    match parameter_count(statement) {
        count if count > MAX_PARAMETERS => Err(pg_error(ApiError::BadRequest(format!(
            "there is no parameter ${count}: a statement takes at most {MAX_PARAMETERS}"
        )))),
        _ => Ok(()),
    }
}

/// The highest `$n` in `statement`: how many parameters it takes.
fn parameter_count(statement: &ast::Statement) -> usize {
    let mut count = 0;
    let _ = ast::visit_expressions(statement, |expr| {
        if let ast::Expr::Value(value) = expr
            && let ast::Value::Placeholder(name) = &value.value
            && let Ok(n) = name.trim_start_matches('$').parse::<usize>()
        {
            count = count.max(n);
        }
        ControlFlow::<()>::Continue(())
    });
    count
}

/// `statement` with each `$n` replaced by the literal of its value.
fn with_values(
    mut statement: ast::Statement,
    values: &ParamValues,
) -> PgWireResult<ast::Statement> {
    let ParamValues::List(values) = values else {
        return Ok(statement);
    };
    let unparser = Unparser::default();
    let mut failed = None;
    let _ = ast::visit_expressions_mut(&mut statement, |expr| {
        if let ast::Expr::Value(value) = expr
            && let ast::Value::Placeholder(name) = &value.value
            && let Ok(n) = name.trim_start_matches('$').parse::<usize>()
            && let Some(value) = n.checked_sub(1).and_then(|i| values.get(i))
        {
            match unparser.expr_to_sql(&Expr::Literal(value.value.clone(), None)) {
                Ok(literal) => *expr = literal,
                Err(error) => failed = Some(error),
            }
        }
        ControlFlow::<()>::Continue(())
    });
    match failed {
        Some(error) => Err(pg_error(QueryError::from(error).into())),
        None => Ok(statement),
    }
}

/// What a connection queries once its token is known.
pub struct Session {
    pub(super) ctx: Arc<SessionContext>,
    /// The names of the cursors declared on this connection (see [`super::cursors`]).
    pub(super) cursors: std::sync::Mutex<std::collections::HashSet<String>>,
    hooks: Vec<Arc<dyn QueryHook>>,
    parser: Arc<Parser>,
    sql_parser: Arc<PostgresCompatibilityParser>,
    /// The names of the session's aggregate and window functions, for [`postgres::rewrite`].
    aggregates: Arc<std::collections::HashSet<String>>,
}

impl Session {
    pub fn new(ctx: SessionContext) -> Result<Self, ApiError> {
        let describe_functions = catalog::install(&ctx)?;
        let ctx = Arc::new(ctx);
        // Not datafusion-postgres's cursor hook: a cursor's query would run outside the limits.
        let hooks: Vec<Arc<dyn QueryHook>> = vec![
            Arc::new(describe_functions),
            Arc::new(SetShowHook),
            Arc::new(TransactionStatementHook),
        ];
        let service = DfSessionService::new_with_hooks(Arc::clone(&ctx), hooks.clone());
        let state = ctx.state();
        let aggregates = state
            .aggregate_functions()
            .keys()
            .chain(state.window_functions().keys())
            .map(|name| name.to_lowercase())
            .collect();
        Ok(Self {
            aggregates: Arc::new(aggregates),
            parser: service.query_parser(),
            ctx,
            cursors: Default::default(),
            hooks,
            sql_parser: Arc::new(PostgresCompatibilityParser::new()),
        })
    }
}

/// `pg_catalog` holds the session's catalog list, in which it is registered itself: a cycle of
/// `Arc`s that would keep every connection's catalog (and pg_catalog's own tables, megabytes of
/// them) alive after the connection ends. Taking it out of the catalog breaks the cycle.
impl Drop for Session {
    fn drop(&mut self) {
        if let Some(catalog) = self.ctx.catalog(CATALOG_NAME) {
            let _ = catalog.deregister_schema("pg_catalog", true);
        }
    }
}

fn session(cell: &OnceLock<Session>) -> PgWireResult<&Session> {
    cell.get()
        .ok_or_else(|| pg_error(ApiError::Unauthenticated))
}

/// `sql`'s statements, parsed and checked on the query runtime: within the bounds of
/// [`sandbox`] (a statement past them is dropped there, on a large stack), and changing no
/// setting but the allowed ones (`SET "datafusion"."runtime"."memory_limit"` is refused however
/// it is quoted). A syntax error is [`parse_error`]'s to explain.
async fn parse_checked(
    session: &Session,
    sql: &str,
    client: &(dyn ClientInfo + Send + Sync),
) -> PgWireResult<Vec<ast::Statement>> {
    use datafusion::sql::sqlparser::parser::ParserError;

    let parser = Arc::clone(&session.sql_parser);
    let text = sql.to_string();
    let client = client.metadata().clone();
    let aggregates = Arc::clone(&session.aggregates);
    let parsed = runtime::run_sync(move || {
        sandbox::check_text(&text)?;
        match parser.parse(&postgres::protect_scalar_subqueries(&text)) {
            Ok(mut statements) => {
                for statement in &mut statements {
                    sandbox::check_statement(statement)?;
                    sandbox::check_setting(statement)?;
                    postgres::rewrite(statement, &client, &aggregates)?;
                }
                Ok(Ok(statements))
            }
            Err(ParserError::RecursionLimitExceeded) => Err(QueryError::StatementTooComplex(
                "its parentheses, subqueries or prefix operators nest too deep".into(),
            )),
            Err(error) => Ok(Err(error)),
        }
    })
    .await
    .map_err(|error| pg_error(error.into()))?;
    match parsed {
        Ok(statements) => Ok(statements),
        Err(error) => {
            let error = PgWireError::ApiError(Box::new(error));
            Err(parse_error(&session.ctx, sql, error).await)
        }
    }
}

/// Plans a checked `statement` on the query runtime.
async fn plan_statement(
    session: &Session,
    statement: ast::Statement,
) -> Result<LogicalPlan, QueryError> {
    let ctx = Arc::clone(&session.ctx);
    runtime::run(|_| async move {
        ctx.state()
            .statement_to_plan(DfStatement::Statement(Box::new(statement)))
            .await
            .map_err(|error| user_query::with_table_suggestion(&ctx, error).into())
    })
    .await
}

/// Plans a checked `statement` and refuses it unless it only reads.
pub(super) async fn plan_read_only(
    session: &Session,
    statement: ast::Statement,
) -> PgWireResult<LogicalPlan> {
    let plan = plan_statement(session, statement)
        .await
        .map_err(|error| pg_error(error.into()))?;
    refuse_unless_read_only(&plan).map_err(|error| pg_error(error.into()))?;
    Ok(plan)
}

/// A statement that the PostgreSQL parser or the planner does not take may be DataFusion's own
/// DDL (`CREATE EXTERNAL TABLE`, `COPY … TO … STORED AS`): planned as DataFusion SQL, it is
/// refused for what it is (42501); anything else keeps its first error.
async fn parse_error(ctx: &SessionContext, sql: &str, error: PgWireError) -> PgWireError {
    match user_query::plan_read_only(ctx, sql).await {
        Err(refused @ QueryError::Refused(_)) => pg_error(refused.into()),
        _ => error,
    }
}

impl Connection {
    /// Runs a read-only `plan` under the limits and encodes its rows in `format`.
    pub(super) async fn run<C: ClientInfo>(
        &self,
        client: &C,
        ctx: &SessionContext,
        plan: LogicalPlan,
        format: &Format,
    ) -> PgWireResult<Response> {
        let result = self.execute(ctx, plan).await?;
        Ok(Response::Query(rows(client, result, format, ())?))
    }

    /// Runs a read-only `plan` under the limits: its whole result.
    pub(super) async fn execute(
        &self,
        ctx: &SessionContext,
        plan: LogicalPlan,
    ) -> PgWireResult<QueryResult> {
        self.state
            .run_query(user_query::execute(ctx, plan, &self.state.sql.limits))
            .await
            .map_err(pg_error)
    }

    /// Answers the statements the connection answers itself, not a plan: the session's own
    /// ([`postgres`]: `DEALLOCATE`, `DISCARD`, `SHOW` of a setting) and cursors ([`cursors`]).
    /// `None` for any other; the one place both protocols ask.
    async fn answer_own<C>(
        &self,
        client: &mut C,
        session: &Session,
        statement: &ast::Statement,
        format: &Format,
    ) -> Option<PgWireResult<Response>>
    where
        C: ClientInfo + ClientPortalStore + Send + Sync,
        C::PortalStore: PortalStore,
    {
        if cursors::is_cursor_statement(statement) {
            return Some(self.cursor_statement(&*client, session, statement).await);
        }
        if let Some(call) = postgres::set_config_call(statement) {
            return Some(match call {
                Ok((name, value)) => {
                    client.metadata_mut().insert(name, value.clone());
                    postgres::set_config_answer(&session.ctx, value, format).await
                }
                Err(error) => Err(pg_error(error.into())),
            });
        }
        postgres::answer_session_statement(
            statement,
            &session.ctx,
            client.metadata(),
            client.portal_store(),
            format,
        )
        .await
    }
}

/// `result`'s rows, encoded in `format` as they are read; `keep` lives as long as they do.
pub(super) fn rows<C: ClientInfo>(
    client: &C,
    result: QueryResult,
    format: &Format,
    keep: impl Send + Sync + 'static,
) -> PgWireResult<QueryResponse> {
    let options = Arc::new(FormatOptions::from_client_metadata(client.metadata()));
    let fields = Arc::new(arrow_schema_to_pg_fields(
        &result.schema,
        format,
        Some(options),
    )?);
    let row_fields = Arc::clone(&fields);
    let rows = result.batches.into_iter().flat_map(move |batch| {
        let _kept = &keep;
        encode_recordbatch(Arc::clone(&row_fields), batch)
    });
    Ok(QueryResponse::new(fields, futures::stream::iter(rows)))
}

#[async_trait]
impl SimpleQueryHandler for Connection {
    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        self.check_token().await?;
        let session = session(&self.session)?;
        let statements = parse_checked(session, query, &*client).await?;
        if statements.is_empty() {
            return Ok(vec![Response::EmptyQuery]);
        }
        let mut responses = Vec::with_capacity(statements.len());
        'statements: for statement in statements {
            if let Some(response) = self
                .answer_own(client, session, &statement, &Format::UnifiedText)
                .await
            {
                responses.push(response?);
                continue;
            }
            for hook in &session.hooks {
                if let Some(response) = hook
                    .handle_simple_query(&statement, &session.ctx, client)
                    .await
                {
                    responses.push(response?);
                    continue 'statements;
                }
            }
            let sql = statement.to_string();
            let plan = match plan_statement(session, statement).await {
                Ok(plan) => plan,
                Err(error) => {
                    let error = pg_error(error.into());
                    return Err(parse_error(&session.ctx, &sql, error).await);
                }
            };
            refuse_unless_read_only(&plan).map_err(|error| pg_error(error.into()))?;
            responses.push(
                self.run(client, &session.ctx, plan, &Format::UnifiedText)
                    .await?,
            );
        }
        Ok(responses)
    }
}

#[async_trait]
impl ExtendedQueryHandler for Connection {
    type Statement = Statement;
    type QueryParser = ReadOnlyParser;

    fn query_parser(&self) -> Arc<ReadOnlyParser> {
        Arc::clone(&self.parser)
    }

    /// pgwire's `Execute`, with its row limit read as PostgreSQL reads it (0 or less: all the
    /// rows) and at most [`cursors::FETCH_PIECE`]: pgwire reserves room for the limit asked, so
    /// pgJDBC's `setFetchSize(Integer.MAX_VALUE)` would ask for ~86 GB. A client given fewer
    /// rows than it asked for sees the portal suspended and executes it again, as for any limit.
    async fn on_execute<C>(&self, client: &mut C, mut message: Execute) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        message.max_rows = match usize::try_from(message.max_rows) {
            Ok(rows) if rows > 0 => rows.min(cursors::FETCH_PIECE) as i32,
            _ => 0,
        };
        self._on_execute(client, message).await
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Statement>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        self.check_token().await?;
        let session = session(&self.session)?;
        let (statement, plan) = match &portal.statement.statement {
            Statement::Planned(planned) => match planned.as_ref() {
                (_, Some((statement, plan))) => (statement, plan),
                (_, None) => return Ok(Response::EmptyQuery),
            },
            Statement::Unplanned(statement) => {
                let plan = plan_with_values(session, portal, statement).await?;
                return self
                    .run(client, &session.ctx, plan, &portal.result_column_format)
                    .await;
            }
            Statement::Session(statement) => {
                // A DECLARE's query may take parameters: their values go in as literals.
                let statement = bound(portal, statement)?;
                let format = &portal.result_column_format;
                let answer = self.answer_own(client, session, &statement, format).await;
                return answer.unwrap_or(Ok(Response::EmptyQuery));
            }
        };
        // The hooks' statements (SET, SHOW, BEGIN, …) take no parameters.
        let no_parameters = ParamValues::List(Vec::new());
        for hook in &session.hooks {
            if let Some(response) = hook
                .handle_extended_query(statement, plan, &no_parameters, &session.ctx, client)
                .await
            {
                return response;
            }
        }
        let parameters = bind_parameters(portal, statement, plan)?;
        let plan = plan
            .clone()
            .replace_params_with_values(&parameters)
            .map_err(|error| pg_error(QueryError::from(error).into()))?;
        self.run(client, &session.ctx, plan, &portal.result_column_format)
            .await
    }

    async fn do_describe_portal<C>(
        &self,
        client: &mut C,
        portal: &Portal<Statement>,
    ) -> PgWireResult<DescribePortalResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let format = &portal.result_column_format;
        let fields = match &portal.statement.statement {
            Statement::Unplanned(statement) => {
                let session = session(&self.session)?;
                let plan = plan_with_values(session, portal, statement).await?;
                arrow_schema_to_pg_fields(plan.schema().as_arrow(), format, None)?
            }
            Statement::Session(statement) => match statement.as_ref() {
                ast::Statement::Fetch { name, .. } => {
                    cursors::cursor_columns(self, client, &name.value, format)?
                }
                _ => postgres::session_statement_columns(statement, format)?,
            },
            other => self.parser.get_result_schema(other, Some(format))?,
        };
        Ok(DescribePortalResponse::new(fields))
    }
}

/// An unplanned statement, planned with the portal's parameter values in place, if it reads.
async fn plan_with_values(
    session: &Session,
    portal: &Portal<Statement>,
    statement: &ast::Statement,
) -> PgWireResult<LogicalPlan> {
    plan_read_only(session, bound(portal, statement)?).await
}

/// `statement` with the portal's parameter values in place of `$n`.
fn bound(portal: &Portal<Statement>, statement: &ast::Statement) -> PgWireResult<ast::Statement> {
    let count = parameter_count(statement);
    if count == 0 {
        return Ok(statement.clone());
    }
    // Sent as text, parameters of unknown type arrive as strings; the function parses them.
    let unknown = vec![Type::UNKNOWN; count];
    let unknown: Vec<Option<&Type>> = unknown.iter().map(Some).collect();
    let values = deserialize_parameters_with_server_types(portal, &[], &unknown)?;
    with_values(statement.clone(), &values)
}

/// The portal's parameter values, typed as the client sent them, else as the plan infers them.
fn bind_parameters(
    portal: &Portal<Statement>,
    statement: &ast::Statement,
    plan: &LogicalPlan,
) -> PgWireResult<ParamValues> {
    let (inferred, wire_types) = parameter_types(statement, plan)?;
    let inferred: Vec<Option<&DataType>> = inferred.iter().map(Option::as_ref).collect();
    let wire_types: Vec<Option<&Type>> = wire_types.iter().map(Some).collect();
    deserialize_parameters_with_server_types(portal, &inferred, &wire_types)
}

/// Each parameter's type as the plan infers it (`None`: unknown, sent as text) and as the
/// connection describes it, by number: `$1`, `$2`, … A placeholder the plan has no type for (one
/// inside a subquery) must not shift the others, as datafusion-postgres's list, which leaves such
/// placeholders out, would (SQLAlchemy's column reflection binds some inside subqueries).
fn parameter_types(
    statement: &ast::Statement,
    plan: &LogicalPlan,
) -> PgWireResult<(Vec<Option<DataType>>, Vec<Type>)> {
    let by_name = plan
        .get_parameter_types()
        .map_err(|error| pg_error(QueryError::from(error).into()))?;
    let inferred: Vec<Option<DataType>> = (1..=parameter_count(statement))
        .map(|i| by_name.get(&format!("${i}")).cloned().flatten())
        .collect();
    let wire = inferred
        .iter()
        .map(|t| match t {
            Some(t) => datafusion_postgres::arrow_pg::datatypes::into_pg_type(t),
            None => Ok(Type::UNKNOWN),
        })
        .collect::<PgWireResult<Vec<Type>>>()?;
    Ok((inferred, wire))
}

/// datafusion-postgres's parser of the extended protocol, which refuses at `Parse` what does
/// more than read.
pub struct ReadOnlyParser {
    session: Arc<OnceLock<Session>>,
}

impl ReadOnlyParser {
    pub fn new(session: Arc<OnceLock<Session>>) -> Self {
        Self { session }
    }
}

#[async_trait]
impl QueryParser for ReadOnlyParser {
    type Statement = Statement;

    async fn parse_sql<C>(
        &self,
        client: &C,
        sql: &str,
        _types: &[Option<Type>],
    ) -> PgWireResult<Option<Statement>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let session = session(&self.session)?;
        let mut statements = parse_checked(session, sql, client).await?;
        if statements.is_empty() {
            return Ok(None);
        }
        // The extended protocol takes one statement, as datafusion-postgres's parser does.
        let statement = statements.swap_remove(0);
        check_parameter_numbers(&statement)?;
        if cursors::is_cursor_statement(&statement)
            || postgres::is_session_statement(&statement, client.metadata())
        {
            return Ok(Some(Statement::Session(Box::new(statement))));
        }
        let text = statement.to_string();
        for hook in &session.hooks {
            if let Some(plan) = hook
                .handle_extended_parse_query(&statement, &session.ctx, client)
                .await
            {
                let planned = (text, Some((statement, plan?)));
                return Ok(Some(Statement::Planned(Box::new(planned))));
            }
        }
        match plan_statement(session, statement.clone()).await {
            Ok(plan) => {
                refuse_unless_read_only(&plan).map_err(|error| pg_error(error.into()))?;
                let planned = (text, Some((statement, plan)));
                Ok(Some(Statement::Planned(Box::new(planned))))
            }
            Err(_) if parameter_count(&statement) > 0 => {
                Ok(Some(Statement::Unplanned(Box::new(statement))))
            }
            Err(error) => Err(parse_error(&session.ctx, sql, pg_error(error.into())).await),
        }
    }

    fn get_parameter_types(&self, statement: &Statement) -> PgWireResult<Vec<Type>> {
        match statement {
            Statement::Planned(planned) => match &planned.1 {
                Some((statement, plan)) => Ok(parameter_types(statement, plan)?.1),
                None => Ok(Vec::new()),
            },
            Statement::Unplanned(statement) => Ok(vec![Type::UNKNOWN; parameter_count(statement)]),
            Statement::Session(statement) => Ok(vec![Type::UNKNOWN; parameter_count(statement)]),
        }
    }

    /// An unplanned statement's columns are known once its portal is described.
    fn get_result_schema(
        &self,
        statement: &Statement,
        column_format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        match statement {
            Statement::Planned(planned) => session(&self.session)?
                .parser
                .get_result_schema(planned, column_format),
            Statement::Unplanned(_) => Ok(Vec::new()),
            Statement::Session(statement) => postgres::session_statement_columns(
                statement,
                column_format.unwrap_or(&Format::UnifiedText),
            ),
        }
    }
}
