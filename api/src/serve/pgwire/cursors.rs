//! `DECLARE … CURSOR FOR <query>`, `FETCH` and `CLOSE`: psycopg's named (server-side) cursors,
//! JDBC's fetch size, and any client that reads a large result in pieces.
//!
//! A cursor's query is planned, refused unless it only reads, and run under the same limits as
//! every other query (datafusion-postgres's own cursor hook would run it outside them): its
//! rows, at most `--query-max-result-mb` of them, wait in a pgwire cursor portal of the cursor's
//! name, so that `FETCH` hands them out and a client's Describe of that portal sees its columns.
//! Cursors scan forward only; they last until `CLOSE`, `DISCARD ALL` or the end of the
//! connection (`WITH HOLD` or not: a session here has no transaction to end them). Rows kept
//! waiting are bounded twice: a connection holds at most [`MAX_OPEN_CURSORS`] cursors, and the
//! whole server at most [`MAX_OPEN_CURSORS`] × `--query-max-result-mb` of cursor rows
//! ([`HeldRows`]), so that many connections cannot add up to the machine's memory.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use datafusion::sql::sqlparser::ast::{self, CloseCursor, DeclareType, FetchDirection, Value};
use datafusion_postgres::pgwire;
use futures::StreamExt;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::results::{FieldInfo, QueryResponse, Response, Tag};
use pgwire::api::stmt::{QueryParser, StoredStatement};
use pgwire::api::store::{MemPortalStore, PortalStore};
use pgwire::api::{ClientInfo, ClientPortalStore};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::data::DataRow;

use super::Connection;
use super::query::{Session, Statement, plan_read_only, rows};

/// Cursors one connection may hold open at once: each keeps up to `--query-max-result-mb` of rows.
pub const MAX_OPEN_CURSORS: usize = 4;

/// Bytes of rows all the server's cursors hold.
static HELD_BYTES: AtomicUsize = AtomicUsize::new(0);

/// A cursor's share of [`HELD_BYTES`], given back when its rows are dropped (read to the end,
/// closed, discarded, or the connection ends).
struct HeldRows(usize);

impl HeldRows {
    fn reserve(bytes: usize, limit: usize) -> PgWireResult<Self> {
        let before = HELD_BYTES.fetch_add(bytes, Ordering::SeqCst);
        if before + bytes > limit {
            HELD_BYTES.fetch_sub(bytes, Ordering::SeqCst);
            return Err(error(
                "53200",
                format!(
                    "the server's cursors hold {} MiB of rows, and this one's {} MiB would pass \
                     their limit of {} MiB: CLOSE a cursor, or read without one",
                    before >> 20,
                    bytes.div_ceil(1 << 20),
                    limit >> 20
                ),
            ));
        }
        Ok(Self(bytes))
    }
}

impl Drop for HeldRows {
    fn drop(&mut self) {
        HELD_BYTES.fetch_sub(self.0, Ordering::SeqCst);
    }
}

/// Whether `statement` is one of this module's.
pub fn is_cursor_statement(statement: &ast::Statement) -> bool {
    matches!(
        statement,
        ast::Statement::Declare { .. }
            | ast::Statement::Fetch { .. }
            | ast::Statement::Close { .. }
    )
}

fn error(sqlstate: &str, message: String) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(
        "ERROR".into(),
        sqlstate.into(),
        message,
    )))
}

/// The connection's portals, where pgwire keeps them.
fn portals<C: ClientPortalStore>(client: &C) -> PgWireResult<&MemPortalStore<Statement>>
where
    C::PortalStore: PortalStore,
{
    client
        .portal_store()
        .as_any()
        .downcast_ref::<MemPortalStore<Statement>>()
        .ok_or_else(|| PgWireError::ApiError("the connection keeps no portals of ours".into()))
}

/// The cursor named `name`, or 34000 as PostgreSQL says it.
fn cursor(store: &MemPortalStore<Statement>, name: &str) -> PgWireResult<Arc<Portal<Statement>>> {
    store
        .get_portal(name)
        .and_then(|entry| entry.value().cloned())
        .ok_or_else(|| error("34000", format!("cursor \"{name}\" does not exist")))
}

/// The columns of the cursor `name`'s rows, in `format`.
pub fn cursor_columns<C: ClientPortalStore>(
    connection: &Connection,
    client: &C,
    name: &str,
    format: &Format,
) -> PgWireResult<Vec<FieldInfo>>
where
    C::PortalStore: PortalStore,
{
    let portal = cursor(portals(client)?, name)?;
    connection
        .parser
        .get_result_schema(&portal.statement.statement, Some(format))
}

impl Connection {
    /// Answers a cursor statement of [`is_cursor_statement`].
    pub async fn cursor_statement<C>(
        &self,
        client: &C,
        session: &Session,
        statement: &ast::Statement,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Send + Sync,
        C::PortalStore: PortalStore,
    {
        let store = portals(client)?;
        match statement {
            ast::Statement::Declare { stmts } => {
                for declare in stmts {
                    self.declare(client, session, store, declare).await?;
                }
                Ok(Response::Execution(Tag::new("DECLARE CURSOR")))
            }
            ast::Statement::Fetch {
                name, direction, ..
            } => {
                let portal = cursor(store, &name.value)?;
                let mut response = fetch(&portal, rows_to_fetch(direction)?).await?;
                if response.row_schema().is_empty() {
                    // pgwire forgets the columns of a cursor it has read to the end.
                    let columns =
                        cursor_columns(self, client, &name.value, &portal.result_column_format)?;
                    response = QueryResponse::new(
                        Arc::new(columns),
                        futures::stream::empty::<PgWireResult<DataRow>>(),
                    );
                }
                response.set_command_tag("FETCH");
                Ok(Response::Query(response))
            }
            ast::Statement::Close { cursor: closed } => {
                match closed {
                    CloseCursor::All => store.clear_portals(),
                    CloseCursor::Specific { name } => {
                        cursor(store, &name.value)?;
                        store.rm_portal(&name.value);
                    }
                }
                Ok(Response::Execution(Tag::new("CLOSE CURSOR")))
            }
            other => Err(PgWireError::ApiError(
                format!("not a cursor statement: {other}").into(),
            )),
        }
    }

    async fn declare<C>(
        &self,
        client: &C,
        session: &Session,
        store: &MemPortalStore<Statement>,
        declare: &ast::Declare,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Send + Sync,
    {
        let [name] = declare.names.as_slice() else {
            return Err(error("42601", "DECLARE names one cursor".into()));
        };
        let (Some(DeclareType::Cursor), Some(query)) = (&declare.declare_type, &declare.for_query)
        else {
            return Err(error(
                "0A000",
                "only DECLARE name CURSOR FOR query is supported".into(),
            ));
        };
        if store.get_portal(&name.value).is_some() {
            return Err(error(
                "42P03",
                format!("cursor \"{}\" already exists", name.value),
            ));
        }
        {
            // Cursors closed one way or another (CLOSE, DISCARD ALL) no longer count.
            let mut open = session.cursors.lock().expect("not poisoned");
            open.retain(|open| store.get_portal(open).is_some());
            if open.len() >= MAX_OPEN_CURSORS {
                return Err(error(
                    "54000",
                    format!(
                        "a connection may hold {MAX_OPEN_CURSORS} cursors open at once: CLOSE one first"
                    ),
                ));
            }
        }
        let query = ast::Statement::Query(query.clone());
        let plan = plan_read_only(session, query.clone()).await?;
        let format = if declare.binary == Some(true) {
            Format::UnifiedBinary
        } else {
            Format::UnifiedText
        };
        let result = self.execute(&session.ctx, plan.clone()).await?;
        let bytes = result
            .batches
            .iter()
            .map(arrow::array::RecordBatch::get_array_memory_size)
            .sum();
        let limit = self.state.sql.limits.max_result_bytes * MAX_OPEN_CURSORS;
        let rows = rows(client, result, &format, HeldRows::reserve(bytes, limit)?)?;
        let planned = Statement::Planned(Box::new((query.to_string(), Some((query, plan)))));
        let statement = Arc::new(StoredStatement::new(name.value.clone(), planned, vec![]));
        let mut portal = Portal::new_cursor(name.value.clone(), statement);
        portal.result_column_format = format;
        portal.start(rows).await;
        store.put_portal(Arc::new(portal));
        session
            .cursors
            .lock()
            .expect("not poisoned")
            .insert(name.value.clone());
        Ok(())
    }
}

/// Rows one call of pgwire's `Portal::fetch` is asked for: it reserves room for as many rows as
/// it is asked, so a `FETCH 100000000000` is read in pieces of this size.
pub(super) const FETCH_PIECE: usize = 8192;

/// Up to `count` rows of the cursor (0: all that are left), read in pieces of [`FETCH_PIECE`].
async fn fetch(portal: &Portal<Statement>, count: usize) -> PgWireResult<QueryResponse> {
    if count == 0 {
        return Ok(portal.fetch(0).await?.response);
    }
    let mut left = count;
    let mut fetched = portal.fetch(left.min(FETCH_PIECE)).await?;
    let mut rows = Vec::new();
    loop {
        let mut piece = fetched.response;
        while let Some(row) = piece.data_rows().next().await {
            rows.push(row?);
        }
        left = count - rows.len();
        if left == 0 || !fetched.suspended {
            let schema = piece.row_schema();
            return Ok(QueryResponse::new(
                schema,
                futures::stream::iter(rows.into_iter().map(Ok)),
            ));
        }
        fetched = portal.fetch(left.min(FETCH_PIECE)).await?;
    }
}

/// How many rows a `FETCH` asks for; 0 for all that are left.
fn rows_to_fetch(direction: &FetchDirection) -> PgWireResult<usize> {
    let count = |value: &Value| match value {
        Value::Number(n, _) => n.parse::<usize>().ok(),
        _ => None,
    };
    match direction {
        FetchDirection::Next | FetchDirection::Forward { limit: None } => Ok(1),
        FetchDirection::Forward { limit: Some(v) } | FetchDirection::Count { limit: v } => {
            match count(&v.value) {
                // FETCH 0 re-reads the current row in PostgreSQL: not on a forward-only cursor.
                Some(0) | None => Err(error(
                    "0A000",
                    format!("FETCH takes a positive count here, not {}", v.value),
                )),
                Some(n) => Ok(n),
            }
        }
        FetchDirection::All | FetchDirection::ForwardAll => Ok(0),
        _ => Err(error(
            "55000",
            "cursor can only scan forward: FETCH NEXT, FORWARD n, n or ALL".into(),
        )),
    }
}
