//! `/v1/export/focus`: the bill of a window in FOCUS 1.3 with split cost allocation
//! (`gpuledger_query::focus_export`). Its rows hold every team's money, so a team-scoped token
//! may not read it.

use axum::extract::State;
use axum::http::HeaderValue;
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use gpuledger_ledger::time::Span;
use gpuledger_query::focus_export::focus_allocated;
use serde::Deserialize;
use utoipa::IntoParams;

use super::AppState;
use super::auth::{Permission, Principal};
use super::costs::{MICROS_PER_DAY, window};
use crate::cli::FocusFormat;
use crate::error::{ApiError, Problem, QueryParams};
use crate::output::write_focus;

/// The longest window one export covers.
const MAX_DAYS: i64 = 366;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FocusParams {
    /// Charges whose period starts at or after this: a date (midnight UTC) or an RFC 3339 time.
    #[param(example = "2026-11-01")]
    pub from: String,
    /// … and before this.
    #[param(example = "2026-12-01")]
    pub to: String,
    /// csv (default) or parquet.
    #[param(inline)]
    pub format: Option<FocusFormat>,
}

/// The bill of `[from, to)` in FOCUS 1.3, each charge split into rows by team, workload,
/// reserved, unexplained and shared costs, with the `Allocated*` columns (docs/focus-export.md).
/// A charge's rows add back to it; the export's total is the bill's.
#[utoipa::path(
    get,
    path = "/v1/export/focus",
    tag = "costs",
    params(FocusParams),
    responses(
        (status = 200, description = "The export", content(
            (String = "text/csv"),
            (Vec<u8> = "application/vnd.apache.parquet"),
        )),
        (status = 400, description = "A parameter is invalid: the detail names it", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The token may not read, or is limited to one team", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A day the charges cover is not built yet", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The read ran past --query-timeout", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn focus(
    State(state): State<AppState>,
    principal: Principal,
    QueryParams(params): QueryParams<FocusParams>,
) -> Result<Response, ApiError> {
    principal.require(Permission::Read, "exporting the bill")?;
    if let Some(team) = &principal.team {
        return Err(ApiError::Forbidden(format!(
            "exporting the bill: it holds every team's money, and this token is limited to team '{team}'"
        )));
    }
    let (from, to) = window(&params.from, &params.to)?;
    if to - from > MAX_DAYS * MICROS_PER_DAY {
        return Err(ApiError::BadRequest(format!(
            "to: one export covers at most {MAX_DAYS} days"
        )));
    }
    let format = params.format.unwrap_or(FocusFormat::Csv);
    let ctx = state.session(&principal)?;
    let catalog = state.lake.catalog().clone();
    let batches = state
        .read(async move { Ok(focus_allocated(&ctx, &catalog, Span::new(from, to)).await?) })
        .await?;
    let mut body = Vec::new();
    write_focus(&mut body, &batches, format)
        .map_err(|error| ApiError::Internal(format!("encoding the FOCUS export: {error}")))?;
    let content_type = match format {
        FocusFormat::Csv => "text/csv",
        FocusFormat::Parquet => "application/vnd.apache.parquet",
    };
    Ok((
        [
            (CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                CONTENT_DISPOSITION,
                HeaderValue::from_static(match format {
                    FocusFormat::Csv => "attachment; filename=\"focus-allocated.csv\"",
                    FocusFormat::Parquet => "attachment; filename=\"focus-allocated.parquet\"",
                }),
            ),
        ],
        body,
    )
        .into_response())
}
