//! The query crate's one error type.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum QueryError {
    #[error(transparent)]
    DataFusion(#[from] datafusion::error::DataFusionError),

    #[error(transparent)]
    Lake(#[from] gpuledger_lake::LakeError),

    /// The ledger could not be built as asked.
    #[error("ledger: {0}")]
    Ledger(String),
}

/// Lake errors surface inside DataFusion plans as external errors.
pub(crate) fn to_df(error: gpuledger_lake::LakeError) -> datafusion::error::DataFusionError {
    datafusion::error::DataFusionError::External(Box::new(error))
}
