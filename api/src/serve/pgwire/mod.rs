//! The PostgreSQL wire protocol of `gpuledger serve`: psql, DBeaver, Grafana and Metabase
//! connect unchanged and see what `POST /v1/sql` sees.
//!
//! - `startup.rs`: the password is an API token; each connection gets its own session for it;
//! - `query.rs`: the simple and the extended query protocol, read-only and under the SQL limits;
//! - `catalog.rs`: `pg_catalog` on each session, with the ledger's functions in `pg_proc`;
//! - `cursors.rs`: `DECLARE … CURSOR`, `FETCH`, `CLOSE`, under the same limits;
//! - `postgres.rs`: PostgreSQL's own session surface (`current_setting`, `SHOW`, the user
//!   registers, `DEALLOCATE`, `DISCARD`, `version()`, …), as PostgreSQL answers it.
//!
//! Built on `datafusion-postgres` (its `pg_catalog`, its rewrites of the clients' start-up
//! queries, its `SET`/`SHOW`/transaction hooks, its Arrow-to-Postgres encoding) and `pgwire`.
//! The handlers are ours so that every query is planned, refused or run, and limited through
//! `gpuledger_query::user_query`, like HTTP's, and every error carries `ApiError`'s SQLSTATE.

mod catalog;
mod cursors;
mod postgres;
mod query;
mod startup;

use std::error::Error;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use datafusion_postgres::pgwire;
use pgwire::api::{ClientInfo, ErrorHandler, PgWireServerHandlers};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::tokio::TlsAcceptor;
use pgwire::tokio::process_socket;
use tokio::net::TcpListener;

use super::AppState;
use crate::cli::ServeArgs;
use crate::error::ApiError;
use query::{ReadOnlyParser, Session};

/// Binds the PostgreSQL port (unless `--pg-listen off`) and says where on stdout, so that
/// scripts and tests can wait for it. The returned future serves the connections.
pub async fn listen(
    state: AppState,
    args: &ServeArgs,
) -> Result<Option<impl Future<Output = ()> + use<>>, Box<dyn Error>> {
    if args.pg_listen.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    let tls = match (&args.pg_tls_cert, &args.pg_tls_key) {
        (Some(cert), Some(key)) => Some(tls_acceptor(cert, key)?),
        _ => None,
    };
    let listener = TcpListener::bind(&args.pg_listen).await?;
    let address = listener.local_addr()?;
    tracing::info!(%address, tls = tls.is_some(), "serving the postgres wire protocol");
    println!("gpuledger postgres postgres://{address}");
    Ok(Some(accept(listener, tls, state)))
}

async fn accept(listener: TcpListener, tls: Option<TlsAcceptor>, state: AppState) {
    loop {
        match listener.accept().await {
            Ok((socket, peer)) => {
                let handlers = Handlers(Arc::new(Connection::new(state.clone())));
                let tls = tls.clone();
                tokio::spawn(async move {
                    if let Err(error) = process_socket(socket, tls, handlers).await {
                        tracing::debug!(%peer, %error, "postgres connection ended");
                    }
                });
            }
            Err(error) => tracing::warn!(%error, "accepting a postgres connection"),
        }
    }
}

/// TLS from PEM files: a certificate chain and its private key (PKCS#8, PKCS#1 or SEC1).
fn tls_acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, Box<dyn Error>> {
    use pgwire::tokio::tokio_rustls::rustls;

    let chain = crate::pem::certificates(cert, "--pg-tls-cert")?.parsed;
    let key = crate::pem::private_key(key, "--pg-tls-key")?.parsed;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(chain, key)?;
    // PostgreSQL 17 clients may start TLS directly, which requires this ALPN name.
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// One client connection: its session exists once its token is checked.
pub struct Connection {
    state: AppState,
    session: Arc<OnceLock<Session>>,
    parser: Arc<ReadOnlyParser>,
    /// The token the session was opened with, checked again before statements run.
    token: OnceLock<String>,
}

impl Connection {
    fn new(state: AppState) -> Self {
        let session = Arc::new(OnceLock::new());
        Self {
            state,
            parser: Arc::new(ReadOnlyParser::new(Arc::clone(&session))),
            session,
            token: OnceLock::new(),
        }
    }

    /// Ends the connection (FATAL, 28000) once its token is revoked: within
    /// [`TOKEN_RECHECK`](crate::serve::auth::TOKEN_RECHECK), as for any request.
    async fn check_token(&self) -> PgWireResult<()> {
        let Some(token) = self.token.get() else {
            return Err(pg_error(ApiError::Unauthenticated));
        };
        match self
            .state
            .tokens
            .authenticate(self.state.lake.catalog(), token)
            .await
            .map_err(pg_error)?
        {
            Some(_) => Ok(()),
            None => Err(PgWireError::UserError(Box::new(ErrorInfo::new(
                "FATAL".into(),
                "28000".into(),
                "the token of this session is no longer valid (revoked)".into(),
            )))),
        }
    }
}

/// What pgwire asks for: every handler is the connection.
struct Handlers(Arc<Connection>);

impl PgWireServerHandlers for Handlers {
    fn simple_query_handler(&self) -> Arc<impl pgwire::api::query::SimpleQueryHandler> {
        Arc::clone(&self.0)
    }

    fn extended_query_handler(&self) -> Arc<impl pgwire::api::query::ExtendedQueryHandler> {
        Arc::clone(&self.0)
    }

    fn startup_handler(&self) -> Arc<impl pgwire::api::auth::StartupHandler> {
        Arc::clone(&self.0)
    }

    fn error_handler(&self) -> Arc<impl ErrorHandler> {
        Arc::clone(&self.0)
    }
}

/// A client's error: `ApiError`'s SQLSTATE and public message.
fn pg_error(error: ApiError) -> PgWireError {
    if error.status().is_server_error() {
        tracing::error!(%error, "postgres query failed");
    }
    PgWireError::UserError(Box::new(ErrorInfo::new(
        "ERROR".into(),
        error.sqlstate().into(),
        error.public_message(),
    )))
}

impl ErrorHandler for Connection {
    /// Errors that datafusion-postgres passes on as they are (a DataFusion error, a SQL syntax
    /// error) get their SQLSTATE here, like every other.
    fn on_error<C: ClientInfo>(&self, _client: &C, error: &mut PgWireError) {
        use datafusion::error::DataFusionError;
        use datafusion::sql::sqlparser::parser::ParserError;

        if !matches!(error, PgWireError::ApiError(_)) {
            return;
        }
        let placeholder = PgWireError::UserError(Box::new(ErrorInfo::new(
            String::new(),
            String::new(),
            String::new(),
        )));
        let PgWireError::ApiError(inner) = std::mem::replace(error, placeholder) else {
            unreachable!("matched above")
        };
        let inner = match inner.downcast::<ParserError>() {
            Ok(syntax) => Box::new(DataFusionError::SQL(syntax, None)),
            Err(other) => other,
        };
        let api_error = match inner.downcast::<DataFusionError>() {
            Ok(datafusion) => ApiError::Query((*datafusion).into()),
            Err(other) => ApiError::Internal(other.to_string()),
        };
        *error = pg_error(api_error);
    }
}
