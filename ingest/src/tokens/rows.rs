//! `token_usage` rows: one request before its batch, de-duplicated by request id within the
//! input, and emitted every `batch_rows` rows.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, StringArray, TimestampMicrosecondArray,
};
use arrow::record_batch::RecordBatch;
use chrono::{DateTime, Utc};
use gpuledger_lake::tables::Table;

use crate::error::IngestError;
use crate::record::{Rejection, Sink};

use super::fields::{Checked, Invalid};
use super::{Source, TokenStats};

/// One `token_usage` row before it goes into a batch.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct TokenRow {
    pub(super) ts: DateTime<Utc>,
    pub(super) request_id: String,
    pub(super) team: Option<String>,
    pub(super) environment: Option<String>,
    pub(super) cost_center: Option<String>,
    pub(super) namespace: Option<String>,
    pub(super) workload: Option<String>,
    pub(super) model: Option<String>,
    pub(super) model_version: Option<String>,
    pub(super) quantization: Option<String>,
    pub(super) provider: Option<String>,
    pub(super) priority: Option<String>,
    pub(super) input_tokens: Option<i64>,
    pub(super) output_tokens: Option<i64>,
    pub(super) cached_tokens: Option<i64>,
    pub(super) reasoning_tokens: Option<i64>,
    pub(super) ttft_ms: Option<f64>,
    pub(super) latency_ms: Option<f64>,
    pub(super) status: Option<String>,
    pub(super) cache_hit: Option<bool>,
    pub(super) gateway_cost: Option<f64>,
    pub(super) source: Source,
}

/// Rows on their way to the sink: deduplicated by request id within the input, counted, and
/// emitted every `batch_rows` rows.
pub(super) struct Landing<'a> {
    sink: &'a mut dyn Sink,
    batch_rows: usize,
    rows: Vec<TokenRow>,
    landed_ids: HashSet<String>,
    pub(super) stats: TokenStats,
}

impl<'a> Landing<'a> {
    pub(super) fn new(sink: &'a mut dyn Sink, batch_rows: usize) -> Self {
        let batch_rows = batch_rows.max(1);
        Self {
            sink,
            batch_rows,
            rows: Vec::with_capacity(batch_rows.min(8192)),
            landed_ids: HashSet::new(),
            stats: TokenStats::default(),
        }
    }

    /// Lands a row, or rejects the record; `raw` gives its text only when it is rejected.
    pub(super) fn land(
        &mut self,
        line: u64,
        row: Checked<TokenRow>,
        raw: impl FnOnce() -> String,
    ) -> Result<(), IngestError> {
        let row = match row {
            Ok(row) => row,
            Err(invalid) => return self.reject(line, invalid, &raw()),
        };
        self.stats.records += 1;
        if !self.landed_ids.insert(row.request_id.clone()) {
            self.stats.duplicates += 1;
            return Ok(());
        }
        self.stats.landed += 1;
        self.rows.push(row);
        if self.rows.len() >= self.batch_rows {
            self.flush()?;
        }
        Ok(())
    }

    pub(super) fn reject(
        &mut self,
        line: u64,
        invalid: Invalid,
        raw: &str,
    ) -> Result<(), IngestError> {
        self.stats.records += 1;
        self.stats.rejected += 1;
        self.sink
            .reject(Rejection::new(line, invalid.field, invalid.reason, raw))
    }

    fn flush(&mut self) -> Result<(), IngestError> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let batch = to_batch(&self.rows)?;
        self.rows.clear();
        self.sink.accept(Table::TokenUsage, batch)
    }

    pub(super) fn finish(mut self) -> Result<TokenStats, IngestError> {
        self.flush()?;
        Ok(self.stats)
    }
}

fn to_batch(rows: &[TokenRow]) -> Result<RecordBatch, IngestError> {
    pub(super) fn text(rows: &[TokenRow], column: impl Fn(&TokenRow) -> Option<&str>) -> ArrayRef {
        Arc::new(rows.iter().map(column).collect::<StringArray>())
    }
    pub(super) fn count(rows: &[TokenRow], column: impl Fn(&TokenRow) -> Option<i64>) -> ArrayRef {
        Arc::new(rows.iter().map(column).collect::<Int64Array>())
    }
    pub(super) fn float(rows: &[TokenRow], column: impl Fn(&TokenRow) -> Option<f64>) -> ArrayRef {
        Arc::new(rows.iter().map(column).collect::<Float64Array>())
    }
    let ts =
        TimestampMicrosecondArray::from_iter_values(rows.iter().map(|r| r.ts.timestamp_micros()))
            .with_timezone("UTC");
    let columns: Vec<ArrayRef> = vec![
        Arc::new(ts),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| r.request_id.as_str()),
        )),
        text(rows, |r| r.team.as_deref()),
        text(rows, |r| r.environment.as_deref()),
        text(rows, |r| r.cost_center.as_deref()),
        text(rows, |r| r.namespace.as_deref()),
        text(rows, |r| r.workload.as_deref()),
        text(rows, |r| r.model.as_deref()),
        text(rows, |r| r.model_version.as_deref()),
        text(rows, |r| r.quantization.as_deref()),
        text(rows, |r| r.provider.as_deref()),
        text(rows, |r| r.priority.as_deref()),
        count(rows, |r| r.input_tokens),
        count(rows, |r| r.output_tokens),
        count(rows, |r| r.cached_tokens),
        count(rows, |r| r.reasoning_tokens),
        float(rows, |r| r.ttft_ms),
        float(rows, |r| r.latency_ms),
        text(rows, |r| r.status.as_deref()),
        Arc::new(rows.iter().map(|r| r.cache_hit).collect::<BooleanArray>()),
        float(rows, |r| r.gateway_cost),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| r.source.name()),
        )),
    ];
    Ok(RecordBatch::try_new(Table::TokenUsage.schema(), columns)?)
}
