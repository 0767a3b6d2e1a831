//! The ingest crate's one error type.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum IngestError {
    /// The input cannot be read at all (missing file, broken gzip stream, …).
    #[error("{origin}: cannot read input: {source}")]
    Read {
        origin: String,
        source: std::io::Error,
    },

    /// The input as a whole is not of the expected format (no header, not FOCUS, …).
    #[error("{origin}: {reason}")]
    Format { origin: String, reason: String },

    /// `--strict` stops at the first rejected record.
    #[error("{origin}:{line}: field '{field}': {reason} (strict mode rejects the whole input)")]
    Strict {
        origin: String,
        line: u64,
        field: String,
        reason: String,
    },

    #[error("building Arrow batch: {0}")]
    Arrow(#[from] arrow::error::ArrowError),

    #[error(transparent)]
    Lake(#[from] gpuledger_lake::LakeError),

    /// The consumer of parsed batches went away (the writer failed; its error is reported instead).
    #[error("ingest pipeline closed: {0}")]
    Pipeline(String),
}
