//! `GET /v1/ledger/balance`: both sides of the ledger over a window, as `gpuledger ledger check`
//! prints them — what was billed (plus manual and rate-card costs) against what the cost entries
//! account for.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use chrono::NaiveDate;
use gpuledger_ledger::time::Span;
use gpuledger_query::ledger_build::{balance, day_span, declared};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::auth::{Permission, Principal};
use crate::error::{ApiError, Problem};

/// The longest window one request may check, so that a typo cannot ask for centuries.
const MAX_DAYS: i64 = 1_000;

#[derive(Debug, Deserialize, IntoParams)]
pub struct Window {
    /// First day (UTC), `YYYY-MM-DD`.
    #[param(example = "2026-11-01")]
    pub from: Option<String>,
    /// Day after the last (UTC, exclusive), `YYYY-MM-DD`.
    #[param(example = "2026-12-01")]
    pub to: Option<String>,
}

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

fn day(name: &str, value: Option<&str>) -> Result<NaiveDate, ApiError> {
    let value = value.ok_or_else(|| ApiError::BadRequest(format!("{name}: required")))?;
    NaiveDate::parse_from_str(value, "%Y-%m-%d")
        .map_err(|_| ApiError::BadRequest(format!("{name}: '{value}' is not a YYYY-MM-DD date")))
}

/// The ledger's balance over a window.
///
/// The whole ledger's, so a team-scoped token may not ask.
#[utoipa::path(
    get,
    path = "/v1/ledger/balance",
    tag = "ledger",
    params(Window),
    responses(
        (status = 200, body = BalanceReport),
        (status = 400, description = "A missing or malformed date, or a window that is empty or longer than 1,000 days", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The token may not read, or is limited to a team", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn balance_report(
    State(state): State<AppState>,
    principal: Principal,
    window: Result<Query<Window>, QueryRejection>,
) -> Result<Json<BalanceReport>, ApiError> {
    let Query(window) = window?;
    principal.require(Permission::Read, "reading the ledger")?;
    if principal.team.is_some() {
        return Err(ApiError::Forbidden(
            "the ledger balance (it covers every team; this token is limited to one)".into(),
        ));
    }
    let (from, to) = (
        day("from", window.from.as_deref())?,
        day("to", window.to.as_deref())?,
    );
    let days = (to - from).num_days();
    if !(1..=MAX_DAYS).contains(&days) {
        return Err(ApiError::BadRequest(format!(
            "to must be after from, at most {MAX_DAYS} days later"
        )));
    }
    let lake = &state.lake;
    let b = balance(
        lake,
        &declared(lake).await?,
        Span::new(day_span(from).start, day_span(to).start),
    )
    .await?;
    Ok(Json(BalanceReport {
        from: from.to_string(),
        to: to.to_string(),
        billed: b.billed,
        manual: b.manual,
        rate_card: b.rate_card,
        expected: b.expected(),
        accounted: b.accounted,
        difference: b.difference(),
        balanced: b.balances(),
    }))
}
