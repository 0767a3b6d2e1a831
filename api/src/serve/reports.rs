//! `/v1/reports`: the weekly report of an ISO week in any of its formats, and the record of the
//! scheduled exports. The report covers the whole fleet, so a team-scoped token may not read it.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::HeaderValue;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, SecondsFormat, Utc};
use futures::TryFutureExt;
use gpuledger_report::{Format, IsoWeek, TenantLimits, weekly_report_in};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::auth::{Permission, Principal};
use crate::error::{ApiError, Problem};

#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReportFormat {
    Json,
    Csv,
    Html,
    Md,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReportQuery {
    /// json (default; docs/report.schema.json), csv, html (a page with charts) or md.
    #[param(inline)]
    format: Option<ReportFormat>,
}

fn whole_fleet(principal: &Principal) -> Result<(), ApiError> {
    principal.require(Permission::Read, "reading reports")?;
    match &principal.team {
        Some(team) => Err(ApiError::Forbidden(format!(
            "reading the weekly report: it covers the whole fleet, and this token is limited to team '{team}'"
        ))),
        None => Ok(()),
    }
}

/// The weekly report of an ISO week (UTC).
#[utoipa::path(
    get,
    path = "/v1/reports/weekly/{week}",
    tag = "reports",
    params(
        ("week" = String, Path, description = "ISO week, YYYY-Www, of 1970 to 9998",
            example = "2026-W45",
            pattern = "^(19[7-9][0-9]|[2-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])-W(0[1-9]|[1-4][0-9]|5[0-3])$"),
        ReportQuery,
    ),
    responses(
        (status = 200, description = "The report", content(
            (Object = "application/json"),
            (String = "text/csv"),
            (String = "text/html"),
            (String = "text/markdown"),
        )),
        (status = 400, description = "The week or the format is malformed", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "The year has no such week (week 53 of a 52-week year)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The token may not read, or is limited to one team", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The read ran past --query-timeout or --query-memory-mb", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn weekly(
    State(state): State<AppState>,
    principal: Principal,
    Path(week): Path<String>,
    query: Result<Query<ReportQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    whole_fleet(&principal)?;
    let week: IsoWeek = week.parse().map_err(|e| match e {
        gpuledger_report::ReportError::NoSuchWeek { .. } => {
            ApiError::NotFound(format!("week: {e}"))
        }
        e => ApiError::BadRequest(format!("week: {e}")),
    })?;
    let Query(query) = query?;
    let format = match query.format.unwrap_or(ReportFormat::Json) {
        ReportFormat::Json => Format::Json,
        ReportFormat::Csv => Format::Csv,
        ReportFormat::Html => Format::Html,
        ReportFormat::Md => Format::Markdown,
    };
    let lake = state.lake.clone();
    let ctx = state.session(&principal)?;
    let report = state
        .read(
            async move {
                let limits = TenantLimits::declared(&lake).await?;
                weekly_report_in(&ctx, &lake, week, &limits).await
            }
            .map_err(move |e| match ApiError::from(e) {
                ApiError::Internal(message) => {
                    ApiError::Internal(format!("weekly report {week}: {message}"))
                }
                answered => answered,
            }),
        )
        .await?;
    Ok((
        [(
            CONTENT_TYPE,
            HeaderValue::from_static(format.content_type()),
        )],
        format.render(&report),
    )
        .into_response())
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Running,
    Succeeded,
    Failed,
}

/// One week's scheduled export.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReportRun {
    #[schema(example = "2026-W45")]
    pub week: String,
    pub status: RunStatus,
    pub attempts: i64,
    /// Of the latest attempt (RFC 3339, UTC).
    pub started_at: String,
    pub finished_at: Option<String>,
    /// Why the latest attempt failed.
    pub error: Option<String>,
    /// The object-store keys written.
    pub objects: Vec<String>,
}

fn time(micros: i64) -> String {
    DateTime::<Utc>::from_timestamp_micros(micros)
        .unwrap_or_default()
        .to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The scheduled exports of the weekly report, oldest week first.
#[utoipa::path(
    get,
    path = "/v1/reports/runs",
    tag = "reports",
    responses(
        (status = 200, body = Vec<ReportRun>),
        (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The token may not read, or is limited to one team", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn runs(
    State(state): State<AppState>,
    principal: Principal,
) -> Result<Json<Vec<ReportRun>>, ApiError> {
    whole_fleet(&principal)?;
    use gpuledger_lake::catalog::RunStatus as Stored;
    let runs = state.lake.catalog().report_runs().await?;
    Ok(Json(
        runs.into_iter()
            .map(|r| ReportRun {
                week: r.week,
                status: match r.status {
                    Stored::Running => RunStatus::Running,
                    Stored::Succeeded => RunStatus::Succeeded,
                    Stored::Failed => RunStatus::Failed,
                },
                attempts: r.attempts,
                started_at: time(r.started_at),
                finished_at: r.finished_at.map(time),
                error: r.error,
                objects: r.objects,
            })
            .collect(),
    ))
}
