//! `GET /v1/ledger/balance`: both sides of the ledger over a window, as `gpuledger ledger check`
//! prints them — what was billed (plus manual and rate-card costs) against what the cost entries
//! account for.

use axum::Json;
use axum::extract::State;
use gpuledger_build::{balance_in, declared};
use gpuledger_ledger::time::Span;
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::auth::{Permission, Principal};
use super::costs::{MICROS_PER_DAY, WindowParams, window};
use crate::error::{ApiError, Problem, QueryParams};

/// The longest window one request may check, so that a typo cannot ask for centuries.
const MAX_DAYS: i64 = 1_000;

/// Both sides of the balance; `balanced` when they agree within 1e-6 relative.
#[derive(Debug, Serialize, ToSchema)]
pub struct BalanceReport {
    pub from: String,
    pub to: String,
    /// Billing `effective_cost` in the window, lines prorated over their charge periods.
    pub billed: f64,
    pub manual: f64,
    /// GPU time of nodes without billing, priced by the rate card.
    pub rate_card: f64,
    /// billed + manual + rate_card.
    pub expected: f64,
    /// The sum of the window's cost entries.
    pub accounted: f64,
    pub difference: f64,
    pub balanced: bool,
}

/// The ledger's balance over a window.
///
/// The whole ledger's, so a team-scoped token may not ask.
#[utoipa::path(
    get,
    path = "/v1/ledger/balance",
    tag = "ledger",
    params(WindowParams),
    responses(
        (status = 200, body = BalanceReport),
        (status = 400, description = "A missing or malformed date, or a window that is empty or longer than 1,000 days", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The token may not read, or is limited to a team", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The read ran past --query-timeout or --query-memory-mb", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn balance_report(
    State(state): State<AppState>,
    principal: Principal,
    QueryParams(params): QueryParams<WindowParams>,
) -> Result<Json<BalanceReport>, ApiError> {
    principal.require(Permission::Read, "reading the ledger")?;
    if principal.team.is_some() {
        return Err(ApiError::Forbidden(
            "the ledger balance (it covers every team; this token is limited to one)".into(),
        ));
    }
    let (from, to) = window(&params.from, &params.to)?;
    // Cost entries are kept per day, so only whole days can balance.
    if from % MICROS_PER_DAY != 0 || to % MICROS_PER_DAY != 0 {
        return Err(ApiError::BadRequest(
            "from, to: the ledger balances whole days: give dates (YYYY-MM-DD)".into(),
        ));
    }
    if to - from > MAX_DAYS * MICROS_PER_DAY {
        return Err(ApiError::BadRequest(format!(
            "to: at most {MAX_DAYS} days after from"
        )));
    }
    let lake = state.lake.clone();
    let ctx = state.session(&principal)?;
    let b = state
        .read(async move {
            Ok(balance_in(&ctx, &declared(lake.catalog()).await?, Span::new(from, to)).await?)
        })
        .await?;
    Ok(Json(BalanceReport {
        from: params.from,
        to: params.to,
        billed: b.billed.to_f64(),
        manual: b.manual.to_f64(),
        rate_card: b.rate_card.to_f64(),
        expected: b.expected().to_f64(),
        accounted: b.accounted.to_f64(),
        difference: b.difference().to_f64(),
        balanced: b.balances(),
    }))
}
