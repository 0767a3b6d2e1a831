//! The query crate's one error type.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum QueryError {
    #[error(transparent)]
    DataFusion(#[from] datafusion::error::DataFusionError),

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

impl QueryError {
    /// A DataFusion error, or the error of ours that an operator or function raised inside it.
    pub fn from_datafusion(error: datafusion::error::DataFusionError) -> Self {
        use datafusion::error::DataFusionError;
        if let DataFusionError::External(inner) = error.find_root()
            && let Some(ours) = inner.downcast_ref::<QueryError>()
            && let QueryError::ValueTooLarge {
                function,
                bytes,
                limit,
            } = ours
        {
            return QueryError::ValueTooLarge {
                function: function.clone(),
                bytes: *bytes,
                limit: *limit,
            };
        }
        QueryError::DataFusion(error)
    }
}

/// Lake errors surface inside DataFusion plans as external errors.
pub(crate) fn to_df(error: gpuledger_lake::LakeError) -> datafusion::error::DataFusionError {
    datafusion::error::DataFusionError::External(Box::new(error))
}
