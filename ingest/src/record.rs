//! What every parser produces: batches for the lake and rejections for the quarantine, pushed to
//! a [`Sink`] as they are parsed so that large inputs stream through in bounded memory.

use arrow::record_batch::RecordBatch;
use chrono::{DateTime, Utc};
use gpuledger_lake::tables::Table;

use crate::error::IngestError;
use crate::pipeline::InputLimits;

pub use gpuledger_lake::Rejection;

/// Where parsed output goes. The pipeline's sink writes batches to Parquet as they arrive and
/// collects rejections; in `--strict` mode `reject` fails and the parser stops.
pub trait Sink {
    fn accept(&mut self, table: Table, batch: RecordBatch) -> Result<(), IngestError>;
    fn reject(&mut self, rejection: Rejection) -> Result<(), IngestError>;
}

/// The error that stops a `--strict` ingest of `origin` at its first rejection.
pub fn strict_stop(origin: &str, rejection: Rejection) -> IngestError {
    IngestError::Strict {
        origin: origin.to_string(),
        line: rejection.line,
        field: rejection.field,
        reason: rejection.reason,
    }
}

/// The default of [`InputLimits::batch_rows`] and `--ingest-batch-rows`.
pub const DEFAULT_BATCH_ROWS: usize = 256 * 1024;
/// The largest [`InputLimits::batch_rows`] a parser uses (larger asks are taken as this): the
/// dcgm parser holds up to twice a batch and numbers held rows in 32 bits.
pub const MAX_BATCH_ROWS: usize = 16 << 20;

/// What a parser needs to know besides the bytes.
#[derive(Debug, Clone)]
pub struct ParseContext {
    /// Name of the input for messages: the file path, or `-` for stdin.
    pub origin: String,
    /// Cluster name for inputs that do not carry one (dcgm text, Slurm without a Cluster field).
    pub cluster: Option<String>,
    /// Time of an untimestamped scrape (dcgm `--at`); the ingest start time when not given.
    pub at: DateTime<Utc>,
    /// Time zone of naive timestamps (Slurm local time, LiteLLM naive times). UTC by default.
    pub tz: chrono_tz::Tz,
    /// An explicit date format for FOCUS files that do not use ISO 8601 (e.g. `%m/%d/%y`).
    pub date_format: Option<String>,
    /// Labels added to every dcgm series that lacks them (a scrape target's labels).
    pub labels: Vec<(String, String)>,
    /// The input's limits as the parser sees them: rows per emitted batch, and the most bytes it
    /// may decompress itself (remote-write's snappy). Set by the pipeline from
    /// [`crate::pipeline::IngestOptions::limits`], the one place callers give them.
    pub(crate) limits: InputLimits,
}

impl ParseContext {
    pub fn new(origin: impl Into<String>, at: DateTime<Utc>) -> Self {
        Self {
            origin: origin.into(),
            cluster: None,
            at,
            tz: chrono_tz::UTC,
            date_format: None,
            labels: Vec::new(),
            limits: InputLimits::default(),
        }
    }
}

/// A sink that keeps everything in memory: for tests and small inputs.
#[derive(Debug, Default)]
pub struct CollectSink {
    pub batches: Vec<(Table, RecordBatch)>,
    pub rejections: Vec<Rejection>,
}

impl CollectSink {
    /// All batches of one table, concatenated.
    pub fn table(&self, table: Table) -> RecordBatch {
        let batches: Vec<_> = self
            .batches
            .iter()
            .filter(|(t, _)| *t == table)
            .map(|(_, b)| b.clone())
            .collect();
        arrow::compute::concat_batches(&table.schema(), &batches).expect("same schema")
    }

    /// Each rejection's (line, field, reason), in order.
    pub fn rejected(&self) -> Vec<(u64, &str, &str)> {
        self.rejections
            .iter()
            .map(|r| (r.line, r.field.as_str(), r.reason.as_str()))
            .collect()
    }

    /// Each rejection's (line, field), in order.
    pub fn rejected_fields(&self) -> Vec<(u64, &str)> {
        self.rejections
            .iter()
            .map(|r| (r.line, r.field.as_str()))
            .collect()
    }

    pub fn rows(&self, table: Table) -> usize {
        self.batches
            .iter()
            .filter(|(t, _)| *t == table)
            .map(|(_, b)| b.num_rows())
            .sum()
    }
}

impl Sink for CollectSink {
    fn accept(&mut self, table: Table, batch: RecordBatch) -> Result<(), IngestError> {
        self.batches.push((table, batch));
        Ok(())
    }
    fn reject(&mut self, rejection: Rejection) -> Result<(), IngestError> {
        self.rejections.push(rejection);
        Ok(())
    }
}

/// A sink in `--strict` mode that keeps nothing: the first rejection stops the parse.
#[cfg(test)]
pub(crate) struct StrictSink;

#[cfg(test)]
impl Sink for StrictSink {
    fn accept(&mut self, _: Table, _: RecordBatch) -> Result<(), IngestError> {
        Ok(())
    }
    fn reject(&mut self, rejection: Rejection) -> Result<(), IngestError> {
        Err(strict_stop("test", rejection))
    }
}
