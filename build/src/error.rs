use thiserror::Error;

/// Why the ledger could not be built or checked.
#[derive(Debug, Error)]
pub enum BuildError {
    /// Reading the inputs or the stored ledger failed.
    #[error(transparent)]
    Query(#[from] gpuledger_query::QueryError),

    #[error(transparent)]
    DataFusion(#[from] datafusion::error::DataFusionError),

    #[error(transparent)]
    Lake(#[from] gpuledger_lake::LakeError),

    /// The ledger could not be built as asked (a declared object it cannot use, a batch id
    /// that collides).
    #[error("ledger: {0}")]
    Ledger(String),
}
