//! dcgm-exporter scrapes (Prometheus text exposition 0.0.4, or OpenMetrics from another agent) →
//! the wide `gpu_samples` table (one row per timestamp and series, one column per known DCGM
//! field) and the long `gpu_samples_extra` table (every other metric, never dropped).
//!
//! This is the hottest parser of the product (a fleet scrape every 15–30 s), so it works on bytes
//! and allocates only when it meets something new. Within a scrape every metric of one GPU repeats
//! the very same `{...}` label text, so that text is the cache key: a label set is parsed and mapped
//! to its identity columns the first time the process sees it (`series::LearnedSeries`: a service
//! gets the same exporters' label sets every scrape). Afterwards a line costs a search for `}` from
//! the end, one comparison with the label text predicted from the previous metric's order (a hash
//! lookup when the guess is wrong) and a number parse: about 7 million samples per second on one
//! core (`benches/dcgm_ingest.rs`).
//!
//! Quirks of real dumps handled here (FORMATS.md §2): `Hostname` and `hostname`, the old-namespace
//! label names, DCGM "blank" sentinels printed as readings (dropped and counted), non-numeric values
//! such as `ERROR - FAILED TO CONVERT TO STRING` (rejected, the rest of the scrape lands), and label
//! sets abbreviated as `{gpu="0",...}` in documentation excerpts.
//!
//! Input order does not matter. Every cell of one series at one time lands in the same wide row
//! whatever order the lines come in: scrape by scrape (one exposition after another), family by
//! family (each metric once with every scrape's samples, as multi-scrape dumps list them), any
//! interleaving, and remote-write's series-by-series samples. The rows held in memory are found by
//! (series, time) in a hash map, and leave sorted by the table's sort order (cluster, node, GPU
//! UUID, MIG instance, time, then the other identity columns), so the same samples give the same
//! batches in every order. Rows are held until about `InputLimits::batch_rows` of them are open:
//! when a new time starts and the scrape that follows would not fit (a scrape is predicted to be as
//! large as the last one), or at twice that many rows whatever the time, the held rows are emitted.
//! Scrape-grouped input therefore lands each (series, time) once unless one scrape alone exceeds
//! the batch size; in other orders a (series, time) whose cells straddle two emissions lands as two
//! partial rows (the ledger merges rows per series and time when it reads them, and compaction will
//! merge them on disk). With the default batch size a typical file or HTTP body lands each
//! (series, time) once. A second value of one metric for one series and time is rejected as a
//! duplicate while the first is held (and, in `gpu_samples_extra`, also when the first was the
//! series' latest), in any order.
//!
//! One layer per file: `lexer` (bytes → lines, label blocks, values, timestamps), `series` (label
//! sets → identity columns; metric names → wide columns or the long table), `readings` (which
//! values are readings), `rows` (held rows → sorted batches). This file drives them line by line.

use std::io::BufRead;
use std::ops::ControlFlow;
use std::sync::Arc;

use gpuledger_lake::tables::Table;

use crate::error::IngestError;
use crate::record::{MAX_BATCH_ROWS, ParseContext, Rejection, Sink};

mod lexer;
mod readings;
mod rows;
mod series;
#[cfg(test)]
pub(crate) mod tests;

use lexer::{ScannedLabels, for_each_line, skip_blanks, trim_blanks, value_and_timestamp};
use readings::{check_reading, is_blank};
use rows::{Duplicate, ExtraRows, WideRows};
use series::{CLUSTER_FALLBACK, LearnedSeries, Metric, MetricTable, SeriesContext, SeriesTable};

/// What one input yielded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DcgmStats {
    /// Lines read, comments and blank lines included.
    pub lines: u64,
    /// Sample values that landed (in either table).
    pub samples: u64,
    pub rows_wide: u64,
    pub rows_extra: u64,
    /// DCGM blank values (no data, not supported, …) and remote-write staleness markers: not
    /// readings, so not landed. A NaN written as a value is no blank: it is rejected.
    pub sentinels_dropped: u64,
    pub rejected: u64,
    /// Sample lines without a timestamp, read as taken at `ParseContext::at`.
    pub untimestamped: u64,
}

/// Parses one dcgm-exporter text input and streams its rows to `sink`: `gpu_samples` batches of at
/// most `ctx.limits.batch_rows` rows as the held rows fill (see the module doc), `gpu_samples_extra`
/// batches as they fill.
pub fn parse(
    input: &mut dyn BufRead,
    ctx: &ParseContext,
    sink: &mut dyn Sink,
) -> Result<DcgmStats, IngestError> {
    let mut parser = Parser::new(ctx);
    for_each_line(input, &ctx.origin, |line| parser.line(line, sink))?;
    parser.finish(sink)
}

/// Samples that arrive already split into metric name, labels, values and times (Prometheus
/// remote-write) land through the same series mapping and wide rows as text lines, in any order.
pub struct SampleFeed<'c> {
    parser: Parser<'c>,
}

impl<'c> SampleFeed<'c> {
    pub fn new(ctx: &'c ParseContext) -> Self {
        Self {
            parser: Parser::new(ctx),
        }
    }

    /// The samples of one series as (value, µs) pairs. `record` numbers them in the quarantine
    /// (such input has no lines); a `__name__` among `labels` is ignored.
    pub fn push_series(
        &mut self,
        record: u64,
        metric: &str,
        labels: &[(String, String)],
        samples: impl IntoIterator<Item = (f64, i64)>,
        sink: &mut dyn Sink,
    ) -> Result<(), IngestError> {
        let parser = &mut self.parser;
        parser.line_number = record;
        let scanned = ScannedLabels {
            pairs: labels.to_vec(),
            abbreviated: false,
        };
        let series = parser.series.resolve(scanned, Arc::from(&b""[..]));
        let metric_id = parser.metrics.resolve(metric.as_bytes());
        for (value, ts) in samples {
            let landed = match &series {
                &Ok(series) => parser.land(
                    &Sample {
                        metric: metric_id,
                        series,
                        value,
                        ts,
                    },
                    sink,
                )?,
                Err(error) => Err(error.clone()),
            };
            if let Err(error) = landed {
                let labels: Vec<String> = labels
                    .iter()
                    .filter(|(name, _)| name != "__name__")
                    .map(|(name, value)| format!("{name}={value:?}"))
                    .collect();
                let text = format!("{metric}{{{}}} {value} {}", labels.join(","), ts / 1000);
                parser.reject(error, text.as_bytes(), sink)?;
            }
        }
        Ok(())
    }

    pub fn finish(self, sink: &mut dyn Sink) -> Result<DcgmStats, IngestError> {
        self.parser.finish(sink)
    }
}

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// A line that cannot land: which field, and why, in the words a user reads in the quarantine.
#[derive(Debug, Clone)]
struct LineError {
    field: String,
    reason: String,
}

impl LineError {
    fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }

    fn labels(reason: impl Into<String>) -> Self {
        Self::new("labels", reason)
    }
}

/// One parsed sample line.
struct Sample {
    metric: Metric,
    series: usize,
    value: f64,
    /// µs since the epoch, UTC.
    ts: i64,
}

struct Parser<'c> {
    ctx: &'c ParseContext,
    /// `ctx.at` in µs: the time of samples written without a timestamp.
    at: i64,
    batch_rows: usize,
    line_number: u64,
    stats: DcgmStats,
    /// A sample line was seen: from then on a broken line is rejected, not taken as a wrong format.
    seen_sample_line: bool,
    metrics: MetricTable,
    series: SeriesTable,
    wide: WideRows,
    extra: ExtraRows,
}

impl<'c> Parser<'c> {
    fn new(ctx: &'c ParseContext) -> Self {
        Self::learning(ctx, LearnedSeries::shared())
    }

    /// A parser that resolves label sets through `learned`.
    fn learning(ctx: &'c ParseContext, learned: Arc<LearnedSeries>) -> Self {
        let context = SeriesContext {
            default_cluster: ctx
                .cluster
                .clone()
                .unwrap_or_else(|| CLUSTER_FALLBACK.to_owned()),
            target_labels: ctx.labels.clone(),
        };
        Self {
            ctx,
            at: ctx.at.timestamp_micros(),
            batch_rows: ctx.limits.batch_rows.clamp(1, MAX_BATCH_ROWS),
            line_number: 0,
            stats: DcgmStats::default(),
            seen_sample_line: false,
            metrics: MetricTable::default(),
            series: SeriesTable::new(context, learned),
            wide: WideRows::new(),
            extra: ExtraRows::default(),
        }
    }

    /// Handles one line; `Break` at OpenMetrics' `# EOF`.
    fn line(&mut self, raw: &[u8], sink: &mut dyn Sink) -> Result<ControlFlow<()>, IngestError> {
        self.line_number += 1;
        self.stats.lines += 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        // A file saved by a Windows editor may start with a byte-order mark.
        let raw = if self.line_number == 1 {
            raw.strip_prefix(UTF8_BOM).unwrap_or(raw)
        } else {
            raw
        };
        let text = trim_blanks(raw);
        match text.first() {
            None => return Ok(ControlFlow::Continue(())),
            Some(b'#') if text == b"# EOF" => return Ok(ControlFlow::Break(())),
            Some(b'#') => return Ok(ControlFlow::Continue(())),
            Some(_) => {}
        }
        let Some((metric, name_len)) = self.metrics.split_name(text) else {
            if !self.seen_sample_line {
                return Err(self.not_prometheus_text(text));
            }
            let error = LineError::new(
                "metric",
                "line is not 'metric_name{labels} value [timestamp]'",
            );
            return self
                .reject(error, text, sink)
                .map(|()| ControlFlow::Continue(()));
        };
        self.seen_sample_line = true;
        let landed = match self.parse_sample(text, metric, name_len) {
            Ok(sample) => self.land(&sample, sink)?,
            Err(error) => Err(error),
        };
        match landed {
            Ok(()) => Ok(ControlFlow::Continue(())),
            Err(error) => self
                .reject(error, text, sink)
                .map(|()| ControlFlow::Continue(())),
        }
    }

    /// Lands one sample, however it was read: drops blanks, and refuses a second value for the
    /// same cell (the caller rejects it).
    fn land(
        &mut self,
        sample: &Sample,
        sink: &mut dyn Sink,
    ) -> Result<Result<(), LineError>, IngestError> {
        if is_blank(sample.value) {
            self.stats.sentinels_dropped += 1;
            return Ok(Ok(()));
        }
        if !crate::time::is_landable(sample.ts) {
            return Ok(Err(LineError::new(
                "timestamp",
                format!(
                    "{} ms since the epoch is outside 1970-01-01 to 9999-12-31",
                    sample.ts.div_euclid(1000)
                ),
            )));
        }
        if let Err(error) = check_reading(
            &self.metrics.names[sample.metric.id],
            sample.metric.column,
            sample.value,
        ) {
            return Ok(Err(error));
        }
        if self.record(sample, sink)?.is_err() {
            let metric = &self.metrics.names[sample.metric.id];
            return Ok(Err(LineError::new(
                metric,
                "duplicate sample: the series already has a value of this metric at this timestamp",
            )));
        }
        self.stats.samples += 1;
        if self.extra.ts.len() >= self.batch_rows {
            self.emit_extra(sink)?;
        }
        Ok(Ok(()))
    }

    fn parse_sample(
        &mut self,
        text: &[u8],
        metric: Metric,
        name_len: usize,
    ) -> Result<Sample, LineError> {
        let name = &text[..name_len];
        let after_name = skip_blanks(text, name_len);
        let (series, rest) = if text.get(after_name) == Some(&b'{') {
            self.series.lookup(&text[after_name + 1..])?
        } else {
            (self.series.unlabelled()?, &text[after_name..])
        };
        let (value, ts) = value_and_timestamp(rest, name)?;
        if ts.is_none() {
            self.stats.untimestamped += 1;
        }
        Ok(Sample {
            metric,
            series,
            value,
            ts: ts.unwrap_or(self.at),
        })
    }

    /// Puts a sample in its wide row (GPU series of a known field) or in the long table; emits
    /// the held rows first when a new row would overfill them.
    fn record(
        &mut self,
        sample: &Sample,
        sink: &mut dyn Sink,
    ) -> Result<Result<(), Duplicate>, IngestError> {
        let series = &self.series.list[sample.series];
        let (Some(column), true) = (sample.metric.column, series.is_gpu) else {
            return Ok(self.extra.push(sample));
        };
        let row = match series.open_row {
            Some((ts, row)) if ts == sample.ts => row,
            _ => {
                let row_series = series.row_series;
                let row = match self.wide.row(row_series, sample.ts, self.batch_rows) {
                    Some(row) => row,
                    None => {
                        self.emit_wide(sink)?;
                        self.wide
                            .row(row_series, sample.ts, self.batch_rows)
                            .expect("no rows held: room for one")
                    }
                };
                self.series.list[sample.series].open_row = Some((sample.ts, row));
                row
            }
        };
        let cell = &mut self.wide.values[column][row];
        if !cell.is_nan() {
            return Ok(Err(Duplicate));
        }
        *cell = sample.value;
        Ok(Ok(()))
    }

    /// Emits every held row, sorted, in batches of at most `batch_rows`.
    fn emit_wide(&mut self, sink: &mut dyn Sink) -> Result<(), IngestError> {
        self.series.rank();
        let order = self.wide.sorted(&self.series.ranks);
        for rows in order.chunks(self.batch_rows) {
            let batch = self.wide.batch(rows, &self.series.list)?;
            self.stats.rows_wide += rows.len() as u64;
            sink.accept(Table::GpuSamples, batch)?;
        }
        self.wide.clear();
        for series in &mut self.series.list {
            series.open_row = None;
        }
        Ok(())
    }

    fn emit_extra(&mut self, sink: &mut dyn Sink) -> Result<(), IngestError> {
        let batch = self.extra.batch(&self.series.list, &self.metrics.names)?;
        self.stats.rows_extra += batch.num_rows() as u64;
        self.extra.clear();
        sink.accept(Table::GpuSamplesExtra, batch)
    }

    fn finish(mut self, sink: &mut dyn Sink) -> Result<DcgmStats, IngestError> {
        if !self.wide.is_empty() {
            self.emit_wide(sink)?;
        }
        if !self.extra.ts.is_empty() {
            self.emit_extra(sink)?;
        }
        Ok(self.stats)
    }

    fn reject(
        &mut self,
        error: LineError,
        text: &[u8],
        sink: &mut dyn Sink,
    ) -> Result<(), IngestError> {
        self.stats.rejected += 1;
        let raw = String::from_utf8_lossy(text);
        sink.reject(Rejection::new(
            self.line_number,
            error.field,
            error.reason,
            &raw,
        ))
    }

    fn not_prometheus_text(&self, text: &[u8]) -> IngestError {
        let shown: String = String::from_utf8_lossy(text).chars().take(80).collect();
        IngestError::Format {
            origin: self.ctx.origin.clone(),
            reason: format!(
                "not Prometheus text exposition (dcgm-exporter /metrics): line {} does not start \
                 with a metric name: '{shown}'",
                self.line_number
            ),
        }
    }
}
