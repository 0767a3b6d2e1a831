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

    /// The input is larger, once decompressed, than the limit `limit` names.
    #[error(
        "{origin}: the input is larger than {} MiB once decompressed (the limit {limit})",
        max_bytes >> 20
    )]
    TooLarge {
        origin: String,
        max_bytes: u64,
        limit: &'static str,
    },

    /// A line of a text input is longer than the limit `limit` names.
    #[error(
        "{origin}:{line}: the line is longer than {} KiB (the limit {limit})",
        max_bytes >> 10
    )]
    LineTooLong {
        origin: String,
        line: u64,
        max_bytes: u64,
        limit: &'static str,
    },

    /// A team-scoped sender tried to land rows of another team (or of none): nothing lands.
    #[error("{origin}: {table} row {row}: {reason}")]
    OtherTeam {
        origin: String,
        table: String,
        row: usize,
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
