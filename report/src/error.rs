//! The report crate's one error type.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum ReportError {
    /// A week that is not `YYYY-Www`; the message says why.
    #[error("week '{week}' is not an ISO week such as 2026-W45: {reason}")]
    Week { week: String, reason: String },

    /// A well-formed week that the year does not have (week 53 of a 52-week year).
    #[error("{year} has no ISO week {week}")]
    NoSuchWeek { year: i32, week: u32 },

    #[error("report schedule '{schedule}' is not a cron expression: {reason}")]
    Schedule { schedule: String, reason: String },

    #[error(transparent)]
    Query(#[from] gpuledger_query::QueryError),

    #[error(transparent)]
    Lake(#[from] gpuledger_lake::LakeError),

    /// The ledger's balance or declared objects could not be read.
    #[error(transparent)]
    Ledger(#[from] gpuledger_build::BuildError),

    #[error("object store: {0}")]
    ObjectStore(#[from] object_store::Error),

    #[error("reading a section's rows: {0}")]
    Rows(String),
}

impl From<datafusion::error::DataFusionError> for ReportError {
    fn from(error: datafusion::error::DataFusionError) -> Self {
        ReportError::Query(error.into())
    }
}

pub type Result<T, E = ReportError> = std::result::Result<T, E>;
