//! `gpuledger serve`: the REST API under `/v1`, SQL over HTTP, health and metrics, on axum.
//!
//! - `auth.rs`: bearer tokens and what each scope may do;
//! - `sql.rs`: `POST /v1/sql`, read-only and limited, in JSON, CSV, Arrow IPC or Parquet;
//! - `objects.rs`: the catalog objects of the ledger;
//! - `budgets.rs`: budgets and their status; `alerts.rs`: the evaluator that records and sends alerts;
//! - `costs.rs`: `/v1/costs` and the ledger's table functions over a window;
//! - `ingest.rs`: `POST /v1/ingest/{source}` and the Prometheus remote-write receiver;
//! - `scrape.rs`: the scrape targets `serve` fetches on their interval;
//! - `reports.rs`: the weekly report and its scheduled exports (the schedule runs beside the server);
//! - `ledger.rs`: the ledger's balance over a window; `live_ledger.rs`: the continuous build;
//! - `compaction.rs`: the background compaction and vacuum of the lake's files;
//! - `background.rs`: those loops, the scrapes and the Postgres listener, stopped together;
//! - `metrics.rs`: the service's own Prometheus metrics;
//! - `pgwire/`: the PostgreSQL wire protocol (psql, DBeaver, Grafana), on its own port;
//! - `web.rs`: the dashboard (`web/`), at `/`.
//!
//! Every handler is annotated for the OpenAPI document served at `/openapi.json`; the reference
//! page at `/docs` is Swagger UI, bundled in the binary.

mod alerts;
pub mod auth;
mod background;
mod budgets;
mod compaction;
mod costs;
mod export;
mod health;
mod ingest;
mod ledger;
mod live_ledger;
pub mod metrics;
mod objects;
mod pgwire;
mod reports;
mod scrape;
mod sql;
mod web;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use axum::Router;
use axum::extract::{MatchedPath, Request};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use datafusion::prelude::SessionContext;
use gpuledger_ingest::pipeline::{GroupCommit, GroupLimits, InputLimits, Limit};
use gpuledger_lake::Lake;
use gpuledger_query::decoded_files::{BOUNDED_TABLES, DecodedFiles};
use gpuledger_query::user_query::{QueryLimits, QueryResult};
use gpuledger_query::{QueryError, Scope, SessionOptions, new_session_with, runtime};
use tokio::sync::Semaphore;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use utoipa_swagger_ui::SwaggerUi;

use crate::cli::ServeArgs;
use crate::error::ApiError;
use auth::Principal;
use background::{Background, FirstRound};
use metrics::{Metrics, RouteLabel};

/// What every handler shares. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub lake: Lake,
    pub metrics: Metrics,
    pub sql: Arc<SqlSettings>,
    /// The largest ingest request body, in bytes.
    pub ingest_max_bytes: u64,
    /// The ledger `serve` keeps current (`--ledger-interval`).
    pub ledger: Arc<live_ledger::LiveLedger>,
    /// What one ingest input may hold once decompressed, and how much of its rejections is kept.
    pub ingest_limits: InputLimits,
    /// How long a body stamped with its arrival time is taken as retried when sent again.
    pub ingest_retry_window: std::time::Duration,
    /// How long an ingest body may pause between two chunks.
    pub body_timeout: std::time::Duration,
    /// The committer small telemetry requests share (`--ingest-group-rows`); `None` when off.
    pub group_commit: Option<GroupCommit>,
    /// Ledger files kept decoded for every query (`--decoded-cache-mb`); `None` when 0.
    pub decoded_files: Option<Arc<DecodedFiles>>,
    /// Tokens found valid in the last second, so that requests need no catalog statement each.
    pub tokens: Arc<auth::TrustedTokens>,
    shutting_down: Arc<AtomicBool>,
}

/// How users' SQL is bounded.
pub struct SqlSettings {
    pub limits: QueryLimits,
    /// Bytes one query's operators may hold.
    pub memory_limit: usize,
    /// Queries that may run at once; others wait their turn.
    pub slots: Semaphore,
}

impl AppState {
    /// Starts the group committer: call it inside the runtime.
    pub fn new(lake: Lake, args: &ServeArgs) -> Self {
        Self {
            lake: lake.clone(),
            metrics: Metrics::new(),
            sql: Arc::new(SqlSettings {
                limits: QueryLimits {
                    timeout: args.query_timeout.into(),
                    max_result_bytes: args.query_max_result_mb << 20,
                },
                memory_limit: args.query_memory_mb << 20,
                slots: Semaphore::new(args.query_concurrency),
            }),
            ingest_max_bytes: args.ingest_max_mb << 20,
            ledger: Arc::new(live_ledger::LiveLedger::new(args.ledger_interval.into())),
            ingest_limits: InputLimits {
                max_decompressed: Some(Limit {
                    bytes: args.ingest_max_decompressed_mb << 20,
                    name: "--ingest-max-decompressed-mb",
                }),
                max_line: Some(Limit {
                    bytes: args.ingest_max_line_kb << 10,
                    name: "--ingest-max-line-kb",
                }),
                max_rejections_kept: args.ingest_max_rejections,
                batch_rows: args.ingest_batch_rows,
            },
            ingest_retry_window: args.ingest_retry_window.into(),
            body_timeout: args.body_timeout.into(),
            group_commit: (args.ingest_group_rows > 0).then(|| {
                let limits = GroupLimits {
                    max_rows: args.ingest_group_rows,
                    wait: args.ingest_group_wait.into(),
                };
                GroupCommit::start(lake.clone(), limits)
            }),
            decoded_files: (args.decoded_cache_mb > 0).then(|| {
                Arc::new(DecodedFiles::new(
                    &BOUNDED_TABLES,
                    args.decoded_cache_mb << 20,
                ))
            }),
            tokens: Arc::default(),
            shutting_down: Arc::new(AtomicBool::new(false)),
        }
    }

    /// A session that sees what `principal` may see, with the query memory limit.
    pub fn session(&self, principal: &Principal) -> Result<SessionContext, ApiError> {
        self.session_over(principal.scope())
    }

    /// A session that sees every team, for the service's own work (the budget evaluator).
    pub fn unscoped_session(&self) -> Result<SessionContext, ApiError> {
        self.session_over(Scope::All)
    }

    /// A server session over `scope`: the query memory limit and the shared decoded files.
    fn session_over(&self, scope: Scope) -> Result<SessionContext, ApiError> {
        Ok(new_session_with(
            &self.lake,
            &SessionOptions {
                scope,
                memory_limit: Some(self.sql.memory_limit),
                decoded_files: self.decoded_files.clone(),
                ..SessionOptions::default()
            },
        )?)
    }
}

impl AppState {
    /// Runs a user's query in one of the query slots, timed in the metrics: SQL over HTTP and
    /// over the Postgres wire go through here.
    pub async fn run_query(
        &self,
        query: impl Future<Output = Result<QueryResult, QueryError>>,
    ) -> Result<QueryResult, ApiError> {
        self.in_query_slot(async { Ok(query.await?) }).await
    }

    /// Runs the lake reads of a REST endpoint (costs, budgets, reports, exports, the balance)
    /// as users' SQL runs: in one of the query slots, on the query runtime, within
    /// `--query-timeout`, timed in the metrics. Without this, concurrent requests for the
    /// weekly report each ran at once on the threads that answer `/healthz`.
    pub async fn read<T>(
        &self,
        work: impl Future<Output = Result<T, ApiError>> + Send + 'static,
    ) -> Result<T, ApiError>
    where
        T: Send + 'static,
    {
        let limit = self.sql.limits.timeout;
        self.in_query_slot(async move {
            runtime::run_within(limit, |_| async move { Ok(work.await) }).await?
        })
        .await
    }

    /// The one queue of the query slots (`--query-concurrency`).
    async fn in_query_slot<T>(
        &self,
        work: impl Future<Output = Result<T, ApiError>>,
    ) -> Result<T, ApiError> {
        let waiting = Metrics::one_more(&self.metrics.queries_waiting);
        let _slot = self
            .sql
            .slots
            .acquire()
            .await
            .map_err(|_| ApiError::Unavailable)?;
        drop(waiting);
        let _running = Metrics::one_more(&self.metrics.queries_running);
        let started = Instant::now();
        let result = work.await;
        self.metrics
            .observe_query(started.elapsed().as_secs_f64(), result.is_ok());
        result
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "gpuledger",
        description = "The REST API of gpuledger, a time-series FinOps ledger for GPU and AI infrastructure. \
            Every endpoint under /v1 takes a bearer token (`gpuledger token create`); errors are application/problem+json."
    ),
    modifiers(&BearerAuth),
    security(("bearer" = [])),
    components(schemas(crate::error::Problem))
)]
struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        openapi
            .components
            .get_or_insert_default()
            .add_security_scheme(
                "bearer",
                SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
            );
    }
}

/// The whole application: the API, its document and reference page, health, metrics and the
/// dashboard.
pub fn app(state: AppState) -> Router {
    let (api, openapi) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(sql::query))
        .routes(routes!(ingest::ingest_file))
        .routes(routes!(ingest::prom_write))
        .routes(routes!(auth::me))
        .routes(routes!(ledger::balance_report))
        .routes(routes!(live_ledger::status))
        .routes(routes!(objects::list, objects::create))
        .routes(routes!(objects::get, objects::replace, objects::delete))
        .routes(routes!(budgets::list, budgets::create))
        .routes(routes!(budgets::get, budgets::replace, budgets::delete))
        .routes(routes!(budgets::budget_status_at))
        .routes(routes!(budgets::alerts))
        .routes(routes!(costs::costs))
        .routes(routes!(costs::idle))
        .routes(routes!(costs::recommendations))
        .routes(routes!(costs::unit_economics))
        .routes(routes!(costs::training_economics))
        .routes(routes!(costs::spot_savings))
        .routes(routes!(costs::value_report))
        .routes(routes!(export::focus))
        .routes(routes!(reports::weekly))
        .routes(routes!(reports::runs))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ))
        .split_for_parts();
    let mut openapi = openapi;
    costs::document_time_parameters(&mut openapi);
    let open = Router::new()
        .route("/healthz", axum::routing::get(health::healthz))
        .route("/readyz", axum::routing::get(health::readyz))
        .route("/metrics", axum::routing::get(health::metrics));
    Router::new()
        .merge(api)
        .merge(open)
        .merge(SwaggerUi::new("/docs").url("/openapi.json", openapi))
        .fallback(web::asset)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            count_requests,
        ))
        .layer(TraceLayer::new_for_http())
        .layer(CatchPanicLayer::custom(panic_response))
        .with_state(state)
}

/// A handler that panicked answers 500 problem+json (the panic logged, never shown) and the
/// service goes on.
fn panic_response(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let what = panic_message(panic.as_ref());
    ApiError::Internal(format!("a handler panicked: {what}")).into_response()
}

/// What a caught panic says, for the log.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(ToString::to_string)
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// Counts every request by route template (not by path, which would be unbounded) and status.
async fn count_requests(
    axum::extract::State(state): axum::extract::State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let response = next.run(request).await;
    state
        .metrics
        .requests
        .get_or_create(&RouteLabel {
            route,
            status: response.status().as_u16(),
        })
        .inc();
    response
}

/// Serves until SIGINT or SIGTERM, then stops taking connections and lets in-flight requests
/// (ingest writes among them) finish.
pub async fn run(lake: Lake, args: ServeArgs) -> Result<(), Box<dyn std::error::Error>> {
    let schedule = match args.report_schedule.as_str() {
        "off" => None,
        expression => Some(gpuledger_report::export::parse_schedule(expression)?),
    };
    let state = AppState::new(lake.clone(), &args);
    let mut background = Background::default();
    background.every(args.ledger_interval.into(), FirstRound::AtStart, {
        let state = state.clone();
        move || {
            let state = state.clone();
            async move { live_ledger::run_round(&state).await }
        }
    });
    // After an interval: compaction.rs says why.
    let compaction_owner = format!("serve-{}", uuid::Uuid::new_v4());
    background.every(args.compact_interval.into(), FirstRound::AfterAnInterval, {
        let (state, retain) = (state.clone(), args.retain_superseded.into());
        let owner = compaction_owner.clone();
        move || {
            let (state, owner) = (state.clone(), owner.clone());
            async move { compaction::run_pass(&state, retain, &owner).await }
        }
    });
    background.every(args.budget_interval.into(), FirstRound::AtStart, {
        let (state, client) = (state.clone(), alerts::webhook_client());
        move || {
            let (state, client) = (state.clone(), client.clone());
            async move { alerts::run_round(&state, &client).await }
        }
    });
    let shutting_down = Arc::clone(&state.shutting_down);
    let (stop_exports, exports_stopped) = tokio::sync::oneshot::channel::<()>();
    let metrics = state.metrics.clone();
    let ledger_state = state.clone();
    let exports = schedule.map(|schedule| {
        tokio::spawn(async move {
            gpuledger_report::Scheduler::new(lake, schedule, gpuledger_report::SystemClock)
                .after_ledger(live_ledger::Current(ledger_state))
                .run(
                    |attempt| {
                        let outcome = if attempt.outcome.is_ok() {
                            "succeeded"
                        } else {
                            "failed"
                        };
                        metrics
                            .report_runs
                            .get_or_create(&metrics::OutcomeLabel {
                                outcome: outcome.into(),
                            })
                            .inc();
                    },
                    async move {
                        let _ = exports_stopped.await;
                    },
                )
                .await;
        })
    });
    // Bound first, so that once HTTP's line is out both ports take connections.
    if let Some(postgres) = pgwire::listen(state.clone(), &args).await? {
        background.run(postgres);
    }
    let listener = tokio::net::TcpListener::bind(&args.listen).await?;
    let address: SocketAddr = listener.local_addr()?;
    tracing::info!(%address, "serving");
    // Said on stdout so that scripts and tests can wait for it.
    println!("gpuledger serving http://{address}");
    background.run(scrape::run(state.clone()));
    let limits = ConnectionLimits {
        header_timeout: args.header_timeout.into(),
        max_connections: args.max_connections.max(1),
    };
    let served = serve_http(listener, app(state.clone()), limits, async move {
        shutdown_signal().await;
        shutting_down.store(true, Ordering::SeqCst);
        tracing::info!("shutting down: finishing in-flight requests");
    })
    .await;
    let _ = stop_exports.send(());
    if let Some(exports) = exports {
        exports.await?;
    }
    background.stop().await;
    // A round stopped mid-way still holds its lease: freed now, the next process (a restart, a
    // replica) builds and compacts at once instead of waiting for it to run out. Bounded: an
    // unreachable catalog does not hold the shutdown past a supervisor's grace period.
    let free_leases = async {
        for (lease, owner) in [
            (live_ledger::LEASE, state.ledger.owner()),
            (gpuledger_lake::compaction::LEASE, compaction_owner.as_str()),
        ] {
            if let Err(error) = state.lake.catalog().release_lease(lease, owner).await {
                tracing::warn!(%error, lease, "could not free a lease at shutdown; it runs out by itself");
            }
        }
    };
    if tokio::time::timeout(std::time::Duration::from_secs(3), free_leases)
        .await
        .is_err()
    {
        tracing::warn!("the catalog did not answer at shutdown: leases run out by themselves");
    }
    served?;
    Ok(())
}

/// What one client may hold of the server: connections are accepted only while fewer than
/// `max_connections` are open (the rest wait in the listen backlog, so the service keeps its file
/// descriptors), and a connection whose request headers have not all arrived `header_timeout`
/// after it started waiting for them is closed.
struct ConnectionLimits {
    header_timeout: std::time::Duration,
    max_connections: usize,
}

/// `axum::serve` with [`ConnectionLimits`]: accepts until `shutdown`, then lets every open
/// connection finish its in-flight request and waits for them.
async fn serve_http(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    use hyper_util::server::conn::auto::Builder;
    use hyper_util::service::TowerToHyperService;

    let slots = Arc::new(Semaphore::new(limits.max_connections));
    // Dropped at shutdown: every connection then finishes gracefully.
    let (stop, stopped) = tokio::sync::watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    loop {
        let slot = tokio::select! {
            slot = Arc::clone(&slots).acquire_owned() => slot.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of file descriptors and the like: wait for some to be freed.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let service = TowerToHyperService::new(app.clone());
        let builder = builder.clone();
        let mut stopped = stopped.clone();
        tokio::spawn(async move {
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = stopped.changed() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.as_mut().await;
                }
            }
            drop(slot);
        });
    }
    drop(stopped);
    drop(stop);
    // Every connection holds a slot until it is done: all of them back means all finished.
    let _all = slots
        .acquire_many(limits.max_connections as u32)
        .await
        .expect("the semaphore is never closed");
    Ok(())
}

pub(crate) async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = interrupt => {},
        _ = terminate => {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_handler_answers_500_problem_json() {
        let router: Router = Router::new()
            .route(
                "/boom",
                axum::routing::get(|| async {
                    if true {
                        panic!("secret internal detail");
                    }
                    "unreachable"
                }),
            )
            .layer(CatchPanicLayer::custom(panic_response));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await });
        for _ in 0..2 {
            let response = reqwest::get(format!("http://{address}/boom"))
                .await
                .unwrap();
            assert_eq!(response.status().as_u16(), 500);
            assert_eq!(
                response.headers()["content-type"],
                "application/problem+json"
            );
            let body: serde_json::Value = response.json().await.unwrap();
            assert_eq!(
                body["detail"],
                "the server could not complete the request; the error is in its log"
            );
            assert_eq!(body["sqlstate"], "XX000");
        }
    }
}
