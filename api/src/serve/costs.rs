//! The cost endpoints: `/v1/costs` (GPU-hour costs by window and dimension, in the shape OpenCost
//! users know from `/allocation`) and the ledger's table functions over a window — `/v1/idle`,
//! `/v1/recommendations`, `/v1/unit-economics`, `/v1/training-economics`, `/v1/spot-savings`, `/v1/value-report`.
//! Everything reads through the token's session, so a team-scoped token sees its team's rows.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderValue;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, NaiveDate, Utc};
use gpuledger_ledger::budget::Month;
use gpuledger_query::spend::{
    COST_DIMENSIONS, CostRow, CostsQuery, LABEL_DIMENSIONS, Step, costs as cost_rows,
    table_function_rows,
};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::auth::{Permission, Principal};
use super::budgets::rfc3339;
use crate::cli::OutputFormat;
use crate::error::{ApiError, Problem, QueryParams};
use crate::output::write_batches;

pub(super) use gpuledger_ledger::time::MICROS_PER_DAY;

/// A table function served over a window.
struct Function {
    name: &'static str,
    /// Whether its rows carry a team; those of one that does not are refused to team tokens.
    team_rows: bool,
    /// The longest window it takes, for one that walks the window day by day.
    max_days: Option<i64>,
}

const IDLE_SUMMARY: Function = Function {
    name: "idle_summary",
    team_rows: false,
    max_days: None,
};
const RECOMMENDATIONS: Function = Function {
    name: "recommendations",
    team_rows: true,
    max_days: None,
};
const UNIT_ECONOMICS: Function = Function {
    name: "unit_economics",
    team_rows: true,
    max_days: None,
};
const TRAINING_ECONOMICS: Function = Function {
    name: "training_economics",
    team_rows: true,
    max_days: None,
};
const SPOT_SAVINGS: Function = Function {
    name: "spot_savings",
    team_rows: false,
    max_days: None,
};
const VALUE_REPORT: Function = Function {
    name: "value_report",
    team_rows: false,
    max_days: Some(366),
};

/// Reads `from`/`to`: a date (midnight UTC) or an RFC 3339 time; the error names the parameter.
fn parse_time(parameter: &str, text: &str) -> Result<i64, ApiError> {
    if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Ok(date
            .and_hms_opt(0, 0, 0)
            .expect("midnight")
            .and_utc()
            .timestamp_micros());
    }
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc).timestamp_micros())
        .map_err(|_| {
            ApiError::BadRequest(format!(
                "{parameter}: '{text}' is not a date (2026-11-01) or an RFC 3339 time (2026-11-01T00:00:00Z)"
            ))
        })
}

/// The document's time parameters (`from`, `to`) as [`parse_time`] reads them: a date (midnight
/// UTC) or an RFC 3339 time, one of two string formats, where the derived document says only
/// "string".
pub(super) fn document_time_parameters(openapi: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, OneOfBuilder, SchemaFormat, Type};
    let string = |format| {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(format)))
    };
    let date_or_time: utoipa::openapi::Schema = OneOfBuilder::new()
        .item(string(KnownFormat::Date))
        .item(string(KnownFormat::DateTime))
        .build()
        .into();
    for item in openapi.paths.paths.values_mut() {
        let Some(get) = item.get.as_mut() else {
            continue;
        };
        for parameter in get.parameters.iter_mut().flatten() {
            let utoipa::openapi::RefOr::T(parameter) = parameter else {
                continue;
            };
            if parameter.name == "from" || parameter.name == "to" {
                parameter.schema = Some(date_or_time.clone().into());
            }
        }
    }
}

pub(super) fn window(from: &str, to: &str) -> Result<(i64, i64), ApiError> {
    let (from, to) = (parse_time("from", from)?, parse_time("to", to)?);
    if to <= from {
        return Err(ApiError::BadRequest(
            "to: must be after from (the window is [from, to))".into(),
        ));
    }
    Ok((from, to))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CostsParams {
    /// Window start, inclusive: a date (midnight UTC) or an RFC 3339 time.
    #[param(example = "2026-11-01")]
    pub from: String,
    /// Window end, exclusive.
    #[param(example = "2026-12-01")]
    pub to: String,
    /// Comma-separated dimensions to group by: cluster, node, team, namespace, workload, model,
    /// cost_center, environment, workload_type; an attribution label also as `label:<key>`.
    /// Default team.
    #[param(example = "team,namespace")]
    pub aggregate: Option<String>,
    /// day (default), week (ISO, from Monday) or month.
    #[param(example = "day")]
    pub step: Option<String>,
    /// Comma-separated `dimension:value` pairs; values of one dimension are alternatives, and
    /// every dimension named must match, e.g. `team:nlp,team:vision,namespace:ml` or
    /// `label:workload_type:training`.
    #[param(example = "team:nlp")]
    pub filter: Option<String>,
}

/// The costs of one group in one window.
#[derive(Debug, Serialize, ToSchema)]
pub struct CostGroup {
    /// The group's values of the aggregate joined by `/`; `__unallocated__` stands for a GPU's
    /// unallocated part (no team, namespace, …).
    pub name: String,
    /// The group's value of each aggregated dimension (null: unallocated).
    pub properties: BTreeMap<String, Option<String>>,
    /// Every GPU-hour of the group, allocated or idle.
    pub gpu_hours: f64,
    pub allocated_gpu_hours: f64,
    /// The sum of the five costs below.
    pub cost: f64,
    pub cost_busy: f64,
    pub cost_allocated_idle: f64,
    pub cost_reserved: f64,
    pub cost_unexplained: f64,
    pub cost_fault: f64,
}

/// One window and its groups, keyed by name.
#[derive(Debug, Serialize, ToSchema)]
pub struct CostWindow {
    /// RFC 3339, clipped to the asked window.
    pub start: String,
    pub end: String,
    pub groups: BTreeMap<String, CostGroup>,
}

/// `/v1/costs`: the windows that hold costs, in time order.
#[derive(Debug, Serialize, ToSchema)]
pub struct CostsView {
    pub from: String,
    pub to: String,
    pub step: String,
    pub aggregate: Vec<String>,
    pub windows: Vec<CostWindow>,
}

/// A dimension by its name, or an attribution label as `label:<key>` (the labels the ledger
/// keeps on allocations).
fn dimension(parameter: &str, name: &str) -> Result<String, ApiError> {
    let name = name.trim();
    if let Some(key) = name.strip_prefix("label:") {
        return if LABEL_DIMENSIONS.contains(&key) {
            Ok(key.to_string())
        } else {
            Err(ApiError::BadRequest(format!(
                "{parameter}: '{name}': the ledger keeps the attribution labels {}",
                LABEL_DIMENSIONS.join(", ")
            )))
        };
    }
    if COST_DIMENSIONS.contains(&name) {
        Ok(name.to_string())
    } else {
        Err(ApiError::BadRequest(format!(
            "{parameter}: '{name}' is not one of {}, or label:<key>",
            COST_DIMENSIONS.join(", ")
        )))
    }
}

fn costs_query(params: &CostsParams) -> Result<CostsQuery, ApiError> {
    let (from, to) = window(&params.from, &params.to)?;
    let step = match params.step.as_deref().unwrap_or("day") {
        "day" => Step::Day,
        "week" => Step::Week,
        "month" => Step::Month,
        other => {
            return Err(ApiError::BadRequest(format!(
                "step: '{other}' is not one of day, week, month"
            )));
        }
    };
    let mut aggregate = Vec::new();
    for name in params.aggregate.as_deref().unwrap_or("team").split(',') {
        let name = dimension("aggregate", name)?;
        if !aggregate.contains(&name) {
            aggregate.push(name);
        }
    }
    let mut filters: Vec<(String, Vec<String>)> = Vec::new();
    for pair in params
        .filter
        .as_deref()
        .unwrap_or("")
        .split(',')
        .filter(|p| !p.trim().is_empty())
    {
        // `label:<key>:<value>` names its dimension in two parts.
        let split = match pair.trim().strip_prefix("label:") {
            Some(rest) => rest
                .split_once(':')
                .map(|(key, value)| (format!("label:{key}"), value)),
            None => pair
                .split_once(':')
                .map(|(name, value)| (name.to_string(), value)),
        };
        let Some((name, value)) = split else {
            return Err(ApiError::BadRequest(format!(
                "filter: '{pair}' is not dimension:value, e.g. team:nlp"
            )));
        };
        let name = dimension("filter", &name)?;
        let value = value.trim().to_string();
        match filters.iter_mut().find(|(n, _)| *n == name) {
            Some((_, values)) => values.push(value),
            None => filters.push((name, vec![value])),
        }
    }
    Ok(CostsQuery {
        from,
        to,
        step,
        aggregate,
        filters,
    })
}

fn window_end(step: Step, start: i64) -> i64 {
    match step {
        Step::Day => start + MICROS_PER_DAY,
        Step::Week => start + 7 * MICROS_PER_DAY,
        Step::Month => DateTime::<Utc>::from_timestamp_micros(start)
            .map(|t| Month::of(t).end)
            .unwrap_or(i64::MAX),
    }
}

fn group(aggregate: &[String], row: CostRow) -> CostGroup {
    let name = row
        .keys
        .iter()
        .map(|k| k.as_deref().unwrap_or("__unallocated__"))
        .collect::<Vec<_>>()
        .join("/");
    let [
        gpu_hours,
        allocated_gpu_hours,
        cost,
        cost_busy,
        cost_allocated_idle,
        cost_reserved,
        cost_unexplained,
        cost_fault,
    ] = row.measures;
    CostGroup {
        name,
        properties: aggregate.iter().cloned().zip(row.keys).collect(),
        gpu_hours,
        allocated_gpu_hours,
        cost,
        cost_busy,
        cost_allocated_idle,
        cost_reserved,
        cost_unexplained,
        cost_fault,
    }
}

/// GPU-hour costs by window and dimension.
///
/// Sums `gpu_hours` (the GPU-hour ledger: direct cost and each idle class; shared costs spread
/// over teams are in `team_costs`) over the windows of `step` in `[from, to)`, grouped by the
/// dimensions of `aggregate`. Only windows with costs are listed.
#[utoipa::path(
    get,
    path = "/v1/costs",
    tag = "costs",
    params(CostsParams),
    responses(
        (status = 200, body = CostsView),
        (status = 400, description = "A parameter is invalid: the detail names it", body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The read ran past --query-timeout", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn costs(
    State(state): State<AppState>,
    principal: Principal,
    QueryParams(params): QueryParams<CostsParams>,
) -> Result<Json<CostsView>, ApiError> {
    principal.require(Permission::Read, "reading costs")?;
    let query = costs_query(&params)?;
    let ctx = state.session(&principal)?;
    let asked = query.clone();
    let rows = state
        .read(async move { Ok(cost_rows(&ctx, &asked).await?) })
        .await?;
    let mut windows: Vec<CostWindow> = Vec::new();
    let mut current = None;
    for row in rows {
        let start = row.window_start;
        if current != Some(start) {
            current = Some(start);
            windows.push(CostWindow {
                start: rfc3339(start.max(query.from)),
                end: rfc3339(window_end(query.step, start).min(query.to)),
                groups: BTreeMap::new(),
            });
        }
        let group = group(&query.aggregate, row);
        let window = windows.last_mut().expect("pushed above");
        window.groups.insert(group.name.clone(), group);
    }
    Ok(Json(CostsView {
        from: rfc3339(query.from),
        to: rfc3339(query.to),
        step: query.step.name().into(),
        aggregate: query.aggregate,
        windows,
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WindowParams {
    /// Window start, inclusive: a date (midnight UTC) or an RFC 3339 time.
    #[param(example = "2026-11-01")]
    pub from: String,
    /// Window end, exclusive.
    #[param(example = "2026-12-01")]
    pub to: String,
}

/// The rows of table `function(from, to)` as a JSON array.
async fn function_rows(
    state: &AppState,
    principal: &Principal,
    function: Function,
    params: &WindowParams,
) -> Result<Response, ApiError> {
    principal.require(Permission::Read, "reading costs")?;
    let name = function.name;
    if let Some(team) = &principal.team
        && !function.team_rows
    {
        return Err(ApiError::Forbidden(format!(
            "{name} to a token scoped to team '{team}': its rows belong to no team"
        )));
    }
    let (from, to) = window(&params.from, &params.to)?;
    if let Some(days) = function.max_days
        && to.saturating_sub(from) > days * MICROS_PER_DAY
    {
        return Err(ApiError::BadRequest(format!(
            "to: the window may span at most {days} days (it is evaluated day by day)"
        )));
    }
    let ctx = state.session(principal)?;
    let batches = state
        .read(async move { Ok(table_function_rows(&ctx, name, from, to).await?) })
        .await?;
    let schema = match batches.first() {
        Some(batch) => batch.schema(),
        None => return Ok(Json(Vec::<serde_json::Value>::new()).into_response()),
    };
    let mut body = Vec::new();
    write_batches(&mut body, &schema, &batches, OutputFormat::Json)
        .map_err(|error| ApiError::Internal(format!("encoding {name}: {error}")))?;
    if body.iter().all(u8::is_ascii_whitespace) {
        body = b"[]".to_vec();
    }
    Ok((
        [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        body,
    )
        .into_response())
}

/// A `GET` endpoint that answers the rows of one table function over `?from&to`, documented for
/// the OpenAPI document like every handler.
macro_rules! table_function_endpoint {
    ($(#[doc = $doc:tt])* $name:ident, $path:tt, $function:ident, $rows:tt, $invalid:tt) => {
        $(#[doc = $doc])*
        #[utoipa::path(
            get,
            path = $path,
            tag = "costs",
            params(WindowParams),
            responses(
                (status = 200, description = $rows, body = Vec<serde_json::Value>),
                (status = 400, description = $invalid, body = Problem, content_type = "application/problem+json"),
                (status = 401, body = Problem, content_type = "application/problem+json"),
                (status = 403, body = Problem, content_type = "application/problem+json"),
                (status = 422, description = "The read ran past --query-timeout", body = Problem, content_type = "application/problem+json"),
            )
        )]
        pub async fn $name(
            State(state): State<AppState>,
            principal: Principal,
            QueryParams(params): QueryParams<WindowParams>,
        ) -> Result<Response, ApiError> {
            function_rows(&state, &principal, $function, &params).await
        }
    };
}

table_function_endpoint!(
    /// Idle GPU-hours and their cost by class and reason (`idle_summary`). Its rows belong to no
    /// team: a team-scoped token is refused (403).
    idle, "/v1/idle", IDLE_SUMMARY,
    "The rows of idle_summary(from, to) (docs/ledger.md)",
    "A parameter is invalid: the detail names it"
);
table_function_endpoint!(
    /// What could be reclaimed, one action per row with its money and owner
    /// (`recommendations`): allocated-idle workloads and nodes with unexplained idle, largest
    /// first. A team-scoped token gets its team's rows.
    recommendations, "/v1/recommendations", RECOMMENDATIONS,
    "The rows of recommendations(from, to) (docs/ledger.md)",
    "A parameter is invalid: the detail names it"
);
table_function_endpoint!(
    /// Cost per 1M SLO-met tokens and per successful request (`unit_economics`).
    unit_economics, "/v1/unit-economics", UNIT_ECONOMICS,
    "The rows of unit_economics(from, to) (docs/ledger.md)",
    "A parameter is invalid: the detail names it"
);
table_function_endpoint!(
    /// Training runs: effective GPU-hours and failure recompute cost (`training_economics`).
    training_economics, "/v1/training-economics", TRAINING_ECONOMICS,
    "The rows of training_economics(from, to) (docs/ledger.md)",
    "A parameter is invalid: the detail names it"
);
table_function_endpoint!(
    /// Spot savings net of recompute and operations cost (`spot_savings`). Its rows belong to no
    /// team: a team-scoped token is refused (403).
    spot_savings, "/v1/spot-savings", SPOT_SAVINGS,
    "The rows of spot_savings(from, to) (docs/ledger.md)",
    "A parameter is invalid: the detail names it"
);
table_function_endpoint!(
    /// Value beside cost per product line (`value_report`); at most 366 days, as it is evaluated
    /// day by day. Its rows belong to no team: a team-scoped token is refused (403).
    value_report, "/v1/value-report", VALUE_REPORT,
    "The rows of value_report(from, to) (docs/ledger.md)",
    "A parameter is invalid, or the window longer than 366 days: the detail names it"
);
