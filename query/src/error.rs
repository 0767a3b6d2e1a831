//! The query crate's one error type.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum QueryError {
    /// A DataFusion error that carries none of ours (`From` finds those: see
    /// [`QueryError::from_datafusion`]).
    #[error(transparent)]
    DataFusion(datafusion::error::DataFusionError),

    #[error(transparent)]
    Lake(#[from] gpuledger_lake::LakeError),

    /// A user's SQL that does more than read.
    #[error("{0}")]
    Refused(String),

    /// A statement past one of the bounds of [`crate::sandbox`], refused before planning.
    #[error("the statement is too complex to plan: {0}; simplify it or split it")]
    StatementTooComplex(String),

    #[error("the statement is {bytes} bytes long, past the limit of {limit} bytes")]
    StatementTooLarge { bytes: usize, limit: usize },

    /// A scalar function asked to build a value past the per-value cap.
    #[error(
        "{function}: the result would be {bytes} bytes, past the limit of {limit} bytes for one value"
    )]
    ValueTooLarge {
        function: String,
        bytes: u64,
        limit: u64,
    },

    /// A setting PostgreSQL does not have, asked for by name (`current_setting`).
    #[error("{0}")]
    UnknownSetting(String),

    /// A PostgreSQL feature asked for in a form this server does not answer (rather than a
    /// wrong answer).
    #[error("{0}")]
    NotSupported(String),

    #[error("the query ran longer than its limit of {}s and was stopped", .0.as_secs_f64())]
    Timeout(std::time::Duration),

    /// A computation over the stored ledger (the FOCUS export) reached a day the ledger has not
    /// built yet.
    #[error(
        "the ledger of {day} is not built, and charge {charge} covers it: run `gpuledger ledger build` first"
    )]
    LedgerNotBuilt { day: String, charge: String },

    /// A worker stopped answering while the query ran on it.
    #[error(
        "a query worker stopped while the query ran on it ({down} does not answer), so the query did not complete: run it again (the next query runs on the workers that answer). The connection to it said: {cause}"
    )]
    WorkerLost { down: String, cause: String },

    #[error("the result is larger than {} MiB: aggregate it, or add LIMIT", limit_bytes >> 20)]
    ResultTooLarge { limit_bytes: usize },
}

impl QueryError {
    /// The DataFusion error at the root of this one, when there is one: plans wrap the errors of
    /// the operators they run.
    pub fn datafusion_root(&self) -> Option<&datafusion::error::DataFusionError> {
        match self {
            QueryError::DataFusion(error) => Some(error.find_root()),
            _ => None,
        }
    }
}

/// How a value past the cap travels inside a plan: as a context that names it and carries its
/// figures. A plan that ran on a worker comes back with DataFusion's own errors and contexts
/// intact but other crates' errors reduced to their text (datafusion-distributed's wire), so
/// the context is what keeps the error ours — its class (422, 54000) — wherever it was raised.
const VALUE_TOO_LARGE: &str = "gpuledger: value too large ";

/// A value past the cap, raised inside a plan (a function refusing it), so that
/// [`QueryError::from_datafusion`] finds it again, in this process or after a worker.
pub(crate) fn value_too_large(
    function: String,
    bytes: u64,
    limit: u64,
) -> datafusion::error::DataFusionError {
    let figures = serde_json::json!({"function": function, "bytes": bytes, "limit": limit});
    let message = QueryError::ValueTooLarge {
        function,
        bytes,
        limit,
    }
    .to_string();
    datafusion::error::DataFusionError::Context(
        format!("{VALUE_TOO_LARGE}{figures}"),
        Box::new(datafusion::error::DataFusionError::Execution(message)),
    )
}

/// Every DataFusion error becomes a `QueryError` here, so that one of ours inside it is found
/// wherever the conversion happens (`?`, the Postgres port's error handler).
impl From<datafusion::error::DataFusionError> for QueryError {
    fn from(error: datafusion::error::DataFusionError) -> Self {
        Self::from_datafusion(error)
    }
}

impl QueryError {
    /// A DataFusion error, or the error of ours that an operator or function raised inside it.
    pub fn from_datafusion(error: datafusion::error::DataFusionError) -> Self {
        Self::ours_inside(&error).unwrap_or(QueryError::DataFusion(error))
    }

    /// The error of ours that `error` carries, however DataFusion (or a worker's stream)
    /// wrapped it.
    pub(crate) fn ours_inside(error: &datafusion::error::DataFusionError) -> Option<Self> {
        use datafusion::error::DataFusionError;
        match error {
            DataFusionError::Context(context, inner) => match context.strip_prefix(VALUE_TOO_LARGE)
            {
                Some(figures) => {
                    let figures: serde_json::Value = serde_json::from_str(figures).ok()?;
                    Some(QueryError::ValueTooLarge {
                        function: figures["function"].as_str()?.to_string(),
                        bytes: figures["bytes"].as_u64()?,
                        limit: figures["limit"].as_u64()?,
                    })
                }
                None => Self::ours_inside(inner),
            },
            DataFusionError::Shared(inner) => Self::ours_inside(inner),
            DataFusionError::Diagnostic(_, inner) => Self::ours_inside(inner),
            DataFusionError::External(inner) => inner
                .downcast_ref::<DataFusionError>()
                .and_then(Self::ours_inside),
            DataFusionError::ArrowError(arrow, _) => match arrow.as_ref() {
                arrow::error::ArrowError::ExternalError(inner) => inner
                    .downcast_ref::<DataFusionError>()
                    .and_then(Self::ours_inside),
                _ => None,
            },
            DataFusionError::Collection(errors) => errors.iter().find_map(Self::ours_inside),
            _ => None,
        }
    }
}

/// Lake errors surface inside DataFusion plans as external errors.
pub(crate) fn to_df(error: gpuledger_lake::LakeError) -> datafusion::error::DataFusionError {
    datafusion::error::DataFusionError::External(Box::new(error))
}
