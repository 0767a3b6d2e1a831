//! `/v1/budgets`: monthly budgets per team, namespace or cost center (docs/design.md §8), with their
//! status from the ledger and the alerts recorded when they crossed a threshold. Budgets are the
//! catalog objects of kind `budget` (the same store as `/v1/objects/budget`); a team-scoped token
//! sees, and may change, only the budgets of its team, and their spend is read through its
//! team-scoped session.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::{DateTime, SecondsFormat, Utc};
use datafusion::prelude::SessionContext;
use gpuledger_lake::catalog::TypedObject;
use gpuledger_lake::{BudgetAlert, Catalog};
use gpuledger_ledger::budget::{BudgetSpec, BudgetState};
use gpuledger_ledger::objects::{Object, ObjectKind};
use gpuledger_query::spend;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::auth::{Permission, Principal};
use super::objects::{
    ObjectDocument, ObjectSpec, create_object, delete_object, not_found, replace_object, visible,
};
use crate::error::{ApiError, JsonBody, Problem, QueryParams};

/// A budget's spec as `POST` and `PUT` take it and every answer gives it back (normal form:
/// every field present, unset ones null, thresholds ascending).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BudgetSpecSchema {
    /// Exactly one of `team`, `namespace`, `cost_center` says whose spend the budget watches.
    #[schema(example = "nlp")]
    pub team: Option<String>,
    pub namespace: Option<String>,
    pub cost_center: Option<String>,
    /// Per calendar month (UTC), > 0.
    #[schema(example = 5000)]
    pub amount: f64,
    /// ISO 4217; default USD.
    #[schema(example = "USD")]
    pub currency: Option<String>,
    /// Percent of the amount; default [50, 80, 100].
    pub thresholds: Option<Vec<f64>>,
    /// http(s) URL POSTed once per threshold crossing.
    pub webhook: Option<String>,
}

/// A new budget.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewBudget {
    #[schema(example = "nlp-monthly")]
    pub name: String,
    /// The budget's fields, as in BudgetSpecSchema; validated by the ledger, whose errors name
    /// the field. (Left open here: the ledger, not the schema, is the one validation.)
    #[schema(value_type = Object, example = json!({"team": "nlp", "amount": 5000, "thresholds": [50, 80, 100]}))]
    pub spec: Value,
}

/// A budget's status at one moment of a month.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BudgetStatusView {
    /// The budget's name.
    pub budget: String,
    /// `YYYY-MM`, UTC.
    pub month: String,
    pub amount: f64,
    pub currency: String,
    /// Spend in the month up to the moment asked about.
    pub spend_to_date: f64,
    /// The spend run on at the same rate to the month's end.
    pub forecast: f64,
    pub percent_used: f64,
    /// `ok`, `warn` (a threshold below 100 crossed, or the forecast past the amount) or `over`.
    #[schema(value_type = String, example = "warn")]
    pub state: BudgetState,
    /// The thresholds the spend has reached, ascending.
    pub thresholds_crossed: Vec<f64>,
}

/// A budget, its spec and its status now.
#[derive(Debug, Serialize, ToSchema)]
pub struct BudgetView {
    pub name: String,
    #[schema(value_type = BudgetSpecSchema)]
    pub spec: Value,
    pub status: BudgetStatusView,
}

/// An alert: a threshold crossed in a month, recorded once.
#[derive(Debug, Serialize, ToSchema)]
pub struct AlertView {
    pub budget: String,
    pub month: String,
    pub threshold: f64,
    pub spend_to_date: f64,
    pub amount: f64,
    pub currency: String,
    pub percent_used: f64,
    /// When the crossing was recorded, RFC 3339.
    pub recorded_at: String,
    /// `none` (no webhook), `pending`, `delivered` or `failed`.
    pub delivery: String,
    /// Webhook calls made.
    pub attempts: i64,
    pub delivered_at: Option<String>,
    pub last_error: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AtParams {
    /// The moment to ask about, RFC 3339 (default now): its month is the budget's month.
    #[param(example = "2026-11-03T00:00:00Z", value_type = Option<String>, format = DateTime)]
    pub at: Option<String>,
}

pub(super) fn rfc3339(micros: i64) -> String {
    DateTime::<Utc>::from_timestamp_micros(micros)
        .map(|t| t.to_rfc3339_opts(SecondsFormat::AutoSi, true))
        .unwrap_or_default()
}

/// Money and percentages to a millionth, the ledger's own precision.
fn rounded(value: f64) -> f64 {
    (value * 1e6).round() / 1e6
}

/// The status of `budget` at `at`, its spend read through `ctx` (`spend::budget_status`).
pub(super) async fn budget_status(
    catalog: &Catalog,
    ctx: &SessionContext,
    budget: &TypedObject<BudgetSpec>,
    at: DateTime<Utc>,
) -> Result<BudgetStatusView, ApiError> {
    let spec = &budget.spec;
    let (month, figures) = spend::budget_status(ctx, catalog, spec, at)
        .await?
        .ok_or_else(|| {
            ApiError::Internal(format!(
                "stored budget {} has no single target",
                budget.name()
            ))
        })?;
    Ok(BudgetStatusView {
        budget: budget.name().to_string(),
        month: month.label,
        amount: spec.amount,
        currency: spec.currency.clone(),
        spend_to_date: rounded(figures.spend_to_date),
        forecast: rounded(figures.forecast),
        percent_used: rounded(figures.percent_used),
        state: figures.state,
        thresholds_crossed: figures.thresholds_crossed,
    })
}

/// The budgets `principal` may see, typed.
async fn visible_budgets(
    state: &AppState,
    principal: &Principal,
) -> Result<Vec<TypedObject<BudgetSpec>>, ApiError> {
    let mut budgets = state.lake.catalog().objects_of::<BudgetSpec>().await?;
    budgets.retain(|b| visible(principal, &b.object.spec));
    Ok(budgets)
}

async fn visible_budget(
    state: &AppState,
    principal: &Principal,
    name: &str,
) -> Result<TypedObject<BudgetSpec>, ApiError> {
    visible_budgets(state, principal)
        .await?
        .into_iter()
        .find(|b| b.name() == name)
        .ok_or_else(|| not_found(ObjectKind::Budget, name))
}

/// Validation errors name the field and answer 422, as for every catalog object.
fn valid(name: &str, spec: &Value) -> Result<Object, ApiError> {
    super::objects::valid(ObjectKind::Budget, Some(name), spec)
}

fn parse_at(at: Option<&str>) -> Result<DateTime<Utc>, ApiError> {
    match at {
        None => Ok(Utc::now()),
        Some(text) => DateTime::parse_from_rfc3339(text)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|error| {
                ApiError::BadRequest(format!(
                    "at: '{text}' is not an RFC 3339 time such as 2026-11-03T00:00:00Z ({error})"
                ))
            }),
    }
}

/// List the budgets, each with its status now.
#[utoipa::path(
    get,
    path = "/v1/budgets",
    tag = "budgets",
    responses(
        (status = 200, body = Vec<BudgetView>),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The read ran past --query-timeout", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list(
    State(state): State<AppState>,
    principal: Principal,
) -> Result<Json<Vec<BudgetView>>, ApiError> {
    principal.require(Permission::Read, "reading budgets")?;
    let budgets = visible_budgets(&state, &principal).await?;
    Ok(Json(with_status(&state, &principal, budgets).await?))
}

/// Each budget with its status now, read in one query slot.
async fn with_status(
    state: &AppState,
    principal: &Principal,
    budgets: Vec<TypedObject<BudgetSpec>>,
) -> Result<Vec<BudgetView>, ApiError> {
    let ctx = state.session(principal)?;
    let catalog = state.lake.catalog().clone();
    let now = Utc::now();
    state
        .read(async move {
            let mut views = Vec::new();
            for budget in budgets {
                let status = budget_status(&catalog, &ctx, &budget, now).await?;
                views.push(BudgetView {
                    name: budget.object.name,
                    spec: budget.object.spec,
                    status,
                });
            }
            Ok(views)
        })
        .await
}

/// Create a budget; 409 when one of that name exists (404 when it is another team's).
#[utoipa::path(
    post,
    path = "/v1/budgets",
    tag = "budgets",
    request_body = NewBudget,
    responses(
        (status = 201, body = ObjectDocument),
        (status = 400, description = "Not the JSON this takes", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The spec is invalid; the detail names the field", body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "A budget of that name belongs to another team", body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    JsonBody(new): JsonBody<NewBudget>,
) -> Result<(StatusCode, Json<ObjectDocument>), ApiError> {
    principal.require(Permission::Admin, "changing budgets")?;
    let object = valid(&new.name, &new.spec)?;
    create_object(&state, &principal, &object).await
}

/// Read a budget and its status now.
#[utoipa::path(
    get,
    path = "/v1/budgets/{name}",
    tag = "budgets",
    params(("name" = String, Path, example = "nlp-monthly")),
    responses(
        (status = 200, body = BudgetView),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The read ran past --query-timeout", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
) -> Result<Json<BudgetView>, ApiError> {
    principal.require(Permission::Read, "reading budgets")?;
    let budget = visible_budget(&state, &principal, &name).await?;
    let mut views = with_status(&state, &principal, vec![budget]).await?;
    Ok(Json(views.pop().expect("one budget, one view")))
}

/// Create or replace a budget.
#[utoipa::path(
    put,
    path = "/v1/budgets/{name}",
    tag = "budgets",
    params(("name" = String, Path, example = "nlp-monthly")),
    request_body = ObjectSpec,
    responses(
        (status = 200, description = "Replaced (or unchanged)", body = ObjectDocument),
        (status = 201, description = "Created", body = ObjectDocument),
        (status = 400, description = "Not the JSON this takes", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The spec is invalid; the detail names the field", body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "A budget of that name belongs to another team", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn replace(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
    JsonBody(body): JsonBody<ObjectSpec>,
) -> Result<(StatusCode, Json<ObjectDocument>), ApiError> {
    principal.require(Permission::Admin, "changing budgets")?;
    let object = valid(&name, &body.spec)?;
    replace_object(&state, &principal, &object).await
}

/// Delete a budget (its recorded alerts stay).
#[utoipa::path(
    delete,
    path = "/v1/budgets/{name}",
    tag = "budgets",
    params(("name" = String, Path, example = "nlp-monthly")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn delete(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    principal.require(Permission::Admin, "changing budgets")?;
    delete_object(&state, &principal, ObjectKind::Budget, &name).await
}

/// A budget's status: spend to date in the month of `at` (default now), the forecast to month
/// end from the run rate, percent used, state and thresholds crossed.
#[utoipa::path(
    get,
    path = "/v1/budgets/{name}/status",
    tag = "budgets",
    params(("name" = String, Path, example = "nlp-monthly"), AtParams),
    responses(
        (status = 200, body = BudgetStatusView),
        (status = 400, description = "`at` is not an RFC 3339 time", body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The read ran past --query-timeout", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn budget_status_at(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
    QueryParams(params): QueryParams<AtParams>,
) -> Result<Json<BudgetStatusView>, ApiError> {
    principal.require(Permission::Read, "reading budgets")?;
    let at = parse_at(params.at.as_deref())?;
    let budget = visible_budget(&state, &principal, &name).await?;
    let ctx = state.session(&principal)?;
    let catalog = state.lake.catalog().clone();
    let status = state
        .read(async move { budget_status(&catalog, &ctx, &budget, at).await })
        .await?;
    Ok(Json(status))
}

/// The alerts recorded for a budget: one per threshold and month it crossed, latest month first.
#[utoipa::path(
    get,
    path = "/v1/budgets/{name}/alerts",
    tag = "budgets",
    params(("name" = String, Path, example = "nlp-monthly")),
    responses(
        (status = 200, body = Vec<AlertView>),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn alerts(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
) -> Result<Json<Vec<AlertView>>, ApiError> {
    principal.require(Permission::Read, "reading budgets")?;
    visible_budget(&state, &principal, &name).await?;
    let alerts = state.lake.catalog().budget_alerts(&name).await?;
    Ok(Json(alerts.into_iter().map(alert_view).collect()))
}

fn alert_view(alert: BudgetAlert) -> AlertView {
    AlertView {
        budget: alert.budget,
        month: alert.month,
        threshold: alert.threshold,
        spend_to_date: alert.spend,
        amount: alert.amount,
        currency: alert.currency,
        percent_used: alert.percent_used,
        recorded_at: rfc3339(alert.recorded_at),
        delivery: alert.delivery,
        attempts: alert.attempts,
        delivered_at: alert.delivered_at.map(rfc3339),
        last_error: alert.last_error,
    }
}
