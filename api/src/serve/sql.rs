//! `POST /v1/sql`: a read-only query in a session scoped to the token, in JSON, CSV, Arrow IPC
//! or Parquet (the `format` field, else the `Accept` header, else JSON).

use axum::extract::State;
use axum::http::header::{ACCEPT, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::ToSchema;

use super::AppState;
use super::auth::{Permission, Principal};
use crate::cli::OutputFormat;
use crate::error::{ApiError, JsonBody, Problem};
use crate::output::write_batches;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SqlRequest {
    /// One query, in PostgreSQL syntax, e.g. `select * from team_costs('2026-11-02', '2026-11-09')`.
    #[schema(min_length = 1, pattern = r"\S")]
    pub query: String,
    /// `json` (an array of row objects), `csv`, `arrow` (IPC stream) or `parquet`, in any case;
    /// absent: the `Accept` header decides.
    #[serde(default)]
    #[schema(
        pattern = "^([Jj][Ss][Oo][Nn]|[Cc][Ss][Vv]|[Aa][Rr][Rr][Oo][Ww]|[Pp][Aa][Rr][Qq][Uu][Ee][Tt])$"
    )]
    pub format: Option<String>,
}

/// The formats by name and by media type.
const FORMATS: [(&str, OutputFormat); 4] = [
    ("json", OutputFormat::Json),
    ("csv", OutputFormat::Csv),
    ("arrow", OutputFormat::Arrow),
    ("parquet", OutputFormat::Parquet),
];

fn negotiate(named: Option<&str>, headers: &HeaderMap) -> Result<OutputFormat, ApiError> {
    if let Some(name) = named {
        return FORMATS
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, f)| *f)
            .ok_or_else(|| {
                ApiError::Invalid(format!(
                    "format: '{name}' is not one of json, csv, arrow, parquet"
                ))
            });
    }
    let Some(accept) = headers.get(ACCEPT).and_then(|v| v.to_str().ok()) else {
        return Ok(OutputFormat::Json);
    };
    for wanted in accept
        .split(',')
        .map(|m| m.split(';').next().unwrap_or("").trim())
    {
        if wanted == "*/*" || wanted.is_empty() {
            return Ok(OutputFormat::Json);
        }
        if let Some((_, format)) = FORMATS
            .iter()
            .find(|(_, f)| f.media_type().split(';').next() == Some(wanted))
        {
            return Ok(*format);
        }
    }
    Err(ApiError::NotAcceptable(format!(
        "cannot answer in {accept}: ask for application/json, text/csv, \
         application/vnd.apache.arrow.stream or application/vnd.apache.parquet"
    )))
}

/// Run a read-only SQL query.
///
/// Every table, view and table function of the ledger (see the SQL reference); a team-scoped
/// token sees its team's rows only. DDL, DML, `COPY` and `SET` are refused; each query runs
/// under a memory and a time limit.
#[utoipa::path(
    post,
    path = "/v1/sql",
    tag = "sql",
    request_body = SqlRequest,
    responses(
        (status = 200, description = "The result", content(
            (Vec<serde_json::Value> = "application/json"),
            (String = "text/csv"),
            (Vec<u8> = "application/vnd.apache.arrow.stream"),
            (Vec<u8> = "application/vnd.apache.parquet"),
        )),
        (status = 400, description = "The body is not the JSON this takes, or the query is not valid SQL or names something unknown", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not a read-only query, or the token may not query", body = Problem, content_type = "application/problem+json"),
        (status = 406, description = "No format the client accepts", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The query failed or went past a limit", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn query(
    State(state): State<AppState>,
    principal: Principal,
    headers: HeaderMap,
    JsonBody(request): JsonBody<SqlRequest>,
) -> Result<Response, ApiError> {
    principal.require(Permission::Read, "queries")?;
    let format = negotiate(request.format.as_deref(), &headers)?;
    let ctx = state.session(&principal)?;
    let result = state
        .run_query(gpuledger_query::user_query::run(
            &ctx,
            &request.query,
            &state.sql.limits,
        ))
        .await?;
    let mut body = Vec::new();
    write_batches(&mut body, &result.schema, &result.batches, format)
        .map_err(|error| ApiError::Internal(format!("encoding the result: {error}")))?;
    Ok((
        [(CONTENT_TYPE, HeaderValue::from_static(format.media_type()))],
        body,
    )
        .into_response())
}
