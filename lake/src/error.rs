//! The lake crate's one error type.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum LakeError {
    #[error("object store: {0}")]
    ObjectStore(#[from] object_store::Error),

    #[error("invalid data location '{location}': {reason}")]
    Location { location: String, reason: String },

    #[error("catalog: {0}")]
    Catalog(#[from] sqlx::Error),

    #[error("catalog migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),

    #[error("parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),

    #[error("arrow: {0}")]
    Arrow(#[from] arrow::error::ArrowError),

    #[error("invalid path '{path}': {reason}")]
    Path { path: String, reason: String },

    #[error("{0}")]
    Invalid(String),

    /// A read command pointed at a place that holds no lake: nothing is created there.
    #[error(
        "no gpuledger lake at {0}: `gpuledger ingest`, `apply`, `demo` or `migrate` creates one"
    )]
    NoLake(String),
}

pub type Result<T, E = LakeError> = std::result::Result<T, E>;
