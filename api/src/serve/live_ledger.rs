//! The live ledger: `serve` keeps `gpu_hours`, `cost_entries` and `allocations` current with
//! their inputs. Every `--ledger-interval` a round asks the catalog which days changed since the
//! last round (telemetry and events by their files' times, every billed day when a bill landed,
//! every built day when a declared object changed) and rebuilds their dirty hours, as
//! `gpuledger ledger build` does. One replica builds at a time, whatever number share the
//! catalog: a round runs only under the catalog's `ledger` lease, renewed after each day.
//!
//! `GET /v1/ledger/status` and `/metrics` (`gpuledger_ledger_lag_seconds`) say how far the
//! ledger is behind its newest input; the budget evaluator and the weekly export wait for a
//! current ledger ([`LiveLedger::current`]) before they read it.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, NaiveDate, Utc};
use gpuledger_build::{build_ledger, days_changed_since, declared};
use gpuledger_lake::Lake;
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::auth::{Permission, Principal};
use super::budgets::rfc3339;
use crate::error::{ApiError, Problem};

/// The catalog lease a building replica holds.
pub const LEASE: &str = "ledger";
/// How long a lease lasts unless renewed: a replica that died mid-build frees it after this.
const LEASE_TIME: Duration = Duration::from_secs(600);
/// How often a replica waiting for another's round asks for the lease again.
const LEASE_POLL: Duration = Duration::from_secs(1);
/// Inputs committed this long before a round started are looked at again by the next one, so
/// that a commit stamped by a replica whose clock runs a little behind is not missed (days with
/// nothing new cost a catalog lookup, not a rebuild).
const CLOCK_SLACK_MICROS: i64 = 60_000_000;

/// The live ledger's progress in this process.
pub struct LiveLedger {
    /// This replica, as the lease's owner.
    owner: String,
    /// Inputs committed after this (microseconds) are yet to be looked at; held for a whole
    /// round, so that rounds of one process do not overlap.
    since: tokio::sync::Mutex<i64>,
    last: std::sync::Mutex<Option<RoundView>>,
    interval: Duration,
}

/// What the latest round of this replica did.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RoundView {
    /// RFC 3339, when the round ended.
    pub finished_at: String,
    /// Days rebuilt (in part or whole).
    pub days_rebuilt: usize,
    /// Why the round failed, if it did; it is retried at the next interval.
    pub error: Option<String>,
    /// False when another replica held the lease (it builds; this one did not).
    pub held_lease: bool,
}

impl LiveLedger {
    pub fn new(interval: Duration) -> Self {
        Self {
            owner: format!("serve-{}", uuid::Uuid::new_v4()),
            since: tokio::sync::Mutex::new(0),
            last: std::sync::Mutex::new(None),
            interval,
        }
    }

    /// This replica, as the owner of the [`LEASE`].
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Brings the ledger up to date with every input committed so far, if this replica gets the
    /// lease; the number of days rebuilt, or `None` when another replica holds the lease.
    pub async fn catch_up(&self, lake: &Lake) -> Result<Option<usize>, ApiError> {
        let mut since = self.since.lock().await;
        let started = Utc::now().timestamp_micros();
        let outcome = self.round(lake, *since, started).await;
        if let Ok(Some(_)) = outcome {
            *since = started - CLOCK_SLACK_MICROS;
        }
        let view = RoundView {
            finished_at: rfc3339(Utc::now().timestamp_micros()),
            days_rebuilt: match &outcome {
                Ok(Some(days)) => *days,
                _ => 0,
            },
            error: outcome.as_ref().err().map(ToString::to_string),
            held_lease: !matches!(outcome, Ok(None)),
        };
        *self.last.lock().expect("not poisoned") = Some(view);
        outcome
    }

    /// Returns once the ledger holds every input committed before the call: this replica's own
    /// round, or, while another replica holds the lease, the round it gets after that one's.
    /// Budget evaluation and the weekly export call it first, so that neither reports a ledger
    /// older than its inputs. Immediate when `serve` does not build the ledger
    /// (`--ledger-interval 0s` leaves it to `gpuledger ledger build`).
    pub async fn current(&self, lake: &Lake) -> Result<(), ApiError> {
        if self.interval.is_zero() {
            return Ok(());
        }
        let waited_since = tokio::time::Instant::now();
        while self.catch_up(lake).await?.is_none() {
            if waited_since.elapsed() > LEASE_TIME {
                return Err(ApiError::Internal(format!(
                    "another replica has held the ledger lease for over {} s",
                    LEASE_TIME.as_secs()
                )));
            }
            tokio::time::sleep(LEASE_POLL).await;
        }
        Ok(())
    }

    async fn round(&self, lake: &Lake, since: i64, now: i64) -> Result<Option<usize>, ApiError> {
        let catalog = lake.catalog();
        let lease_until = || Utc::now().timestamp_micros() + LEASE_TIME.as_micros() as i64;
        if !catalog
            .claim_lease(LEASE, &self.owner, now, lease_until())
            .await?
        {
            return Ok(None);
        }
        let built = async {
            let declared = declared(lake.catalog()).await?;
            let today = DateTime::<Utc>::from_timestamp_micros(now)
                .map(|t| t.date_naive())
                .unwrap_or(NaiveDate::MAX);
            let days = days_changed_since(lake, &declared, since, today).await?;
            let mut rebuilt = 0;
            for day in days {
                // Renewed before each day, so a long catch-up keeps the lease it started with.
                if !catalog
                    .claim_lease(
                        LEASE,
                        &self.owner,
                        Utc::now().timestamp_micros(),
                        lease_until(),
                    )
                    .await?
                {
                    break;
                }
                rebuilt += build_ledger(lake, &declared, [day]).await?.len();
            }
            Ok::<usize, ApiError>(rebuilt)
        }
        .await;
        catalog.release_lease(LEASE, &self.owner).await?;
        built.map(Some)
    }
}

/// The weekly export's wait for a current ledger.
pub struct Current(pub AppState);

#[async_trait::async_trait]
impl gpuledger_report::LedgerReady for Current {
    async fn ready(&self) -> Result<(), String> {
        self.0
            .ledger
            .current(&self.0.lake)
            .await
            .map_err(|error| error.to_string())
    }
}

/// Brings the ledger up to date with what landed, and says how far behind it is: a round of the
/// loop `serve` runs every `--ledger-interval` from start (never with `0s`, which leaves the
/// ledger to `gpuledger ledger build`).
pub async fn run_round(state: &AppState) {
    let outcome = state.ledger.catch_up(&state.lake).await;
    state.metrics.observe_ledger_round(&outcome);
    if let Err(error) = outcome {
        tracing::error!(%error, "ledger round failed");
    }
    if let Ok((newest_input, built)) = state.lake.catalog().ledger_freshness().await {
        state
            .metrics
            .ledger_lag_seconds
            .set(lag_seconds(newest_input, built));
    }
}

/// Seconds the newest build is behind the newest input; 0 when it is not behind.
fn lag_seconds(newest_input: i64, built: i64) -> f64 {
    (newest_input - built).max(0) as f64 / 1e6
}

/// How current the ledger is.
#[derive(Debug, Serialize, ToSchema)]
pub struct LedgerStatus {
    /// The latest UTC day built (`YYYY-MM-DD`), if any.
    pub built_through: Option<String>,
    /// RFC 3339: when the newest build of any day started (its inputs are those committed
    /// before it).
    pub last_build_at: Option<String>,
    /// RFC 3339: when the newest input (telemetry, events, billing, a declared object) landed.
    pub newest_input_at: Option<String>,
    /// How far the ledger is behind its newest input, in seconds (0: current).
    pub lag_seconds: f64,
    /// `--ledger-interval` in seconds; 0 when `serve` does not build the ledger.
    pub interval_seconds: f64,
    /// This replica's latest round, if it ran one.
    pub last_round: Option<RoundView>,
}

/// How current the ledger is: the newest build against the newest input.
#[utoipa::path(
    get,
    path = "/v1/ledger/status",
    tag = "ledger",
    responses(
        (status = 200, body = LedgerStatus),
        (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The token may not read", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn status(
    State(state): State<AppState>,
    principal: Principal,
) -> Result<Json<LedgerStatus>, ApiError> {
    principal.require(Permission::Read, "reading the ledger's status")?;
    let catalog = state.lake.catalog();
    let (newest_input, built) = catalog.ledger_freshness().await?;
    let built_through = catalog.ledger_days().await?.into_keys().max();
    let at = |micros: i64| (micros > 0).then(|| rfc3339(micros));
    Ok(Json(LedgerStatus {
        built_through,
        last_build_at: at(built),
        newest_input_at: at(newest_input),
        lag_seconds: lag_seconds(newest_input, built),
        interval_seconds: state.ledger.interval.as_secs_f64(),
        last_round: state.ledger.last.lock().expect("not poisoned").clone(),
    }))
}
