//! The API's one error type, and the one place that maps every error to an HTTP status, a
//! problem+json body (RFC 9457) and a SQLSTATE (for the Postgres wire).
//!
//! Messages that reach a client say what was wrong with the request; internal failures are
//! logged in full and answered with a generic sentence, so nothing internal leaks.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use datafusion::error::DataFusionError;
use gpuledger_build::BuildError;
use gpuledger_ingest::IngestError;
use gpuledger_lake::LakeError;
use gpuledger_query::QueryError;
use gpuledger_report::ReportError;
use serde::Serialize;
use utoipa::ToSchema;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("a bearer token is required")]
    Unauthenticated,
    #[error("this token's scope does not allow {0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
    /// The request was understood but its content is invalid: the message names the field.
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    NotAcceptable(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    /// The client stopped sending its request.
    #[error("{0}")]
    RequestTimeout(String),
    #[error(transparent)]
    Query(#[from] QueryError),
    #[error(transparent)]
    Lake(#[from] LakeError),
    #[error(transparent)]
    Ingest(#[from] IngestError),
    /// The ledger could not be built or checked.
    #[error(transparent)]
    Build(#[from] BuildError),
    #[error("the service is shutting down")]
    Unavailable,
    /// A failure of the service itself; logged, never shown.
    #[error("{0}")]
    Internal(String),
}

/// What a client is told: RFC 9457 problem details.
#[derive(Debug, Serialize, ToSchema)]
pub struct Problem {
    /// A URI naming the kind of problem (`about:blank` when the status says it all).
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    /// The SQLSTATE the same error has on the Postgres wire.
    pub sqlstate: String,
}

/// How an error is classified: its HTTP status, SQLSTATE and title.
struct Class {
    status: StatusCode,
    sqlstate: &'static str,
    title: &'static str,
}

const fn class(status: StatusCode, sqlstate: &'static str, title: &'static str) -> Class {
    Class {
        status,
        sqlstate,
        title,
    }
}

impl ApiError {
    fn class(&self) -> Class {
        match self {
            ApiError::Unauthenticated => class(StatusCode::UNAUTHORIZED, "28000", "Unauthorized"),
            ApiError::Forbidden(_) => class(StatusCode::FORBIDDEN, "42501", "Forbidden"),
            ApiError::NotFound(_) => class(StatusCode::NOT_FOUND, "42704", "Not found"),
            ApiError::BadRequest(_) => class(StatusCode::BAD_REQUEST, "22023", "Bad request"),
            ApiError::Invalid(_) => {
                class(StatusCode::UNPROCESSABLE_ENTITY, "22023", "Invalid content")
            }
            ApiError::Conflict(_) => class(StatusCode::CONFLICT, "23505", "Conflict"),
            ApiError::NotAcceptable(_) => {
                class(StatusCode::NOT_ACCEPTABLE, "0A000", "Not acceptable")
            }
            ApiError::PayloadTooLarge(_) => {
                class(StatusCode::PAYLOAD_TOO_LARGE, "54000", "Payload too large")
            }
            ApiError::RequestTimeout(_) => {
                class(StatusCode::REQUEST_TIMEOUT, "57014", "Request timeout")
            }
            ApiError::Query(error) | ApiError::Build(BuildError::Query(error)) => {
                query_class(error)
            }
            ApiError::Ingest(IngestError::OtherTeam { .. }) => {
                class(StatusCode::FORBIDDEN, "42501", "Forbidden")
            }
            ApiError::Ingest(IngestError::TooLarge { .. } | IngestError::LineTooLong { .. }) => {
                class(StatusCode::PAYLOAD_TOO_LARGE, "54000", "Payload too large")
            }
            ApiError::Ingest(
                IngestError::Read { .. } | IngestError::Format { .. } | IngestError::Strict { .. },
            ) => class(
                StatusCode::UNPROCESSABLE_ENTITY,
                "22P02",
                "The input could not be read",
            ),
            ApiError::Ingest(_)
            | ApiError::Lake(_)
            | ApiError::Build(_)
            | ApiError::Internal(_) => internal(),
            ApiError::Unavailable => class(StatusCode::SERVICE_UNAVAILABLE, "57P01", "Unavailable"),
        }
    }

    /// The SQLSTATE of this error on the Postgres wire.
    pub fn sqlstate(&self) -> &'static str {
        self.class().sqlstate
    }

    pub fn status(&self) -> StatusCode {
        self.class().status
    }

    /// What the client is told: the message, unless the error is internal.
    pub fn public_message(&self) -> String {
        if let ApiError::Query(QueryError::WorkerLost { .. }) = self {
            // The worker's address stays in the log.
            return "a query worker stopped while the query ran on it, so the query did not complete: run it again".into();
        }
        if self.status().is_server_error() && !matches!(self, ApiError::Unavailable) {
            "the server could not complete the request; the error is in its log".into()
        } else {
            self.to_string()
        }
    }

    pub fn problem(&self) -> Problem {
        let class = self.class();
        Problem {
            kind: "about:blank".into(),
            title: class.title.into(),
            status: class.status.as_u16(),
            detail: self.public_message(),
            sqlstate: class.sqlstate.into(),
        }
    }
}

fn internal() -> Class {
    class(StatusCode::INTERNAL_SERVER_ERROR, "XX000", "Internal error")
}

fn query_class(error: &QueryError) -> Class {
    match error {
        QueryError::Refused(_) => class(StatusCode::FORBIDDEN, "42501", "Not a read-only query"),
        QueryError::Timeout(_) => class(
            StatusCode::UNPROCESSABLE_ENTITY,
            "57014",
            "Query time limit exceeded",
        ),
        QueryError::UnknownSetting(_) => class(StatusCode::BAD_REQUEST, "42704", "Unknown setting"),
        QueryError::NotSupported(_) => {
            class(StatusCode::BAD_REQUEST, "0A000", "Feature not supported")
        }
        QueryError::StatementTooComplex(_) => {
            class(StatusCode::BAD_REQUEST, "54001", "Statement too complex")
        }
        QueryError::StatementTooLarge { .. } => {
            class(StatusCode::BAD_REQUEST, "54000", "Statement too large")
        }
        QueryError::ValueTooLarge { .. } => class(
            StatusCode::UNPROCESSABLE_ENTITY,
            "54000",
            "Value size limit exceeded",
        ),
        QueryError::ResultTooLarge { .. } => class(
            StatusCode::UNPROCESSABLE_ENTITY,
            "54000",
            "Result size limit exceeded",
        ),
        QueryError::LedgerNotBuilt { .. } => {
            class(StatusCode::CONFLICT, "55000", "Ledger not built")
        }
        QueryError::WorkerLost { .. } => class(
            StatusCode::SERVICE_UNAVAILABLE,
            "58000",
            "Query worker lost",
        ),
        QueryError::Lake(_) => internal(),
        QueryError::DataFusion(_) => match error.datafusion_root() {
            Some(DataFusionError::ResourcesExhausted(_)) => class(
                StatusCode::UNPROCESSABLE_ENTITY,
                "53200",
                "Query memory limit exceeded",
            ),
            Some(DataFusionError::SQL(..)) => {
                class(StatusCode::BAD_REQUEST, "42601", "SQL syntax error")
            }
            Some(DataFusionError::Plan(message)) if message.contains("not found") => {
                class(StatusCode::BAD_REQUEST, "42P01", "Unknown name")
            }
            Some(
                DataFusionError::Plan(_)
                | DataFusionError::SchemaError(..)
                | DataFusionError::NotImplemented(_),
            ) => class(StatusCode::BAD_REQUEST, "42000", "Invalid query"),
            Some(DataFusionError::Execution(_) | DataFusionError::ArrowError(..)) => class(
                StatusCode::UNPROCESSABLE_ENTITY,
                "22000",
                "The query failed",
            ),
            _ => internal(),
        },
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let problem = self.problem();
        if self.status().is_server_error() {
            tracing::error!(error = %self, "request failed");
        }
        let mut response = (self.status(), Json(problem)).into_response();
        response.headers_mut().insert(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/problem+json"),
        );
        response
    }
}

/// A JSON request body whose every rejection (no JSON content type, broken JSON, a missing or
/// unknown field) is a problem+json 400 naming what was wrong, like every other error.
#[derive(Debug, axum::extract::FromRequest)]
#[from_request(via(Json), rejection(ApiError))]
pub struct JsonBody<T>(pub T);

/// Query parameters whose every rejection (a missing parameter, a wrong type) is a
/// problem+json 400 naming the parameter.
#[derive(Debug, axum::extract::FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct QueryParams<T>(pub T);

/// A report's failure answers as the part that failed: a query's class (past the memory or time
/// limit, a worker lost), the lake's or the ledger's; the rest is the service's own.
impl From<ReportError> for ApiError {
    fn from(error: ReportError) -> Self {
        match error {
            ReportError::Query(error) => ApiError::Query(error),
            ReportError::Lake(error) => ApiError::Lake(error),
            ReportError::Ledger(error) => ApiError::Build(error),
            error => ApiError::Internal(error.to_string()),
        }
    }
}

impl From<axum::extract::rejection::JsonRejection> for ApiError {
    fn from(rejection: axum::extract::rejection::JsonRejection) -> Self {
        ApiError::BadRequest(rejection.body_text())
    }
}

impl From<axum::extract::rejection::PathRejection> for ApiError {
    fn from(rejection: axum::extract::rejection::PathRejection) -> Self {
        ApiError::BadRequest(rejection.body_text())
    }
}

impl From<axum::extract::rejection::QueryRejection> for ApiError {
    fn from(rejection: axum::extract::rejection::QueryRejection) -> Self {
        ApiError::BadRequest(rejection.body_text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report that runs past the query memory limit answers as a query that does, not as the
    /// service's own failure.
    #[test]
    fn a_report_past_a_query_limit_answers_as_a_query_does() {
        let exhausted = || {
            ReportError::Query(QueryError::from(DataFusionError::ResourcesExhausted(
                "hash aggregate".into(),
            )))
        };
        let error = ApiError::from(exhausted());
        assert_eq!(
            (error.status(), error.sqlstate()),
            (StatusCode::UNPROCESSABLE_ENTITY, "53200")
        );
        let rows = ApiError::from(ReportError::Rows("bad".into()));
        assert_eq!(rows.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
