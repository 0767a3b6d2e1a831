//! Prometheus remote-write 1.0: a `WriteRequest` protobuf, snappy-compressed in block format, as a
//! Prometheus that scrapes dcgm-exporter forwards it. DCGM series land in `gpu_samples` and
//! `gpu_samples_extra` through the dcgm module's own mapping ([`dcgm::SampleFeed`]), exactly as the
//! same scrape would as text; every other series is counted as ignored.
//!
//! The messages are the few fields of prometheus/prompb/types.proto and remote.proto this needs,
//! derived by hand; prost skips the rest (metadata, exemplars, histograms).

use std::io::BufRead;

use prost::Message;

use crate::dcgm::{self, DcgmStats};
use crate::error::IngestError;
use crate::record::{ParseContext, Sink};

#[derive(Clone, PartialEq, Message)]
pub struct WriteRequest {
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TimeSeries {
    /// Sorted by name; the metric name is the `__name__` label.
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Label {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    #[prost(double, tag = "1")]
    pub value: f64,
    /// Milliseconds since the epoch.
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

/// Series of dcgm-exporter: `DCGM_FI_*` fields and the exporter's own `DCGM_EXP_*`.
const DCGM_PREFIX: &str = "DCGM_";

/// What one request yielded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RemoteWriteStats {
    /// Samples of every series, ignored ones included.
    pub samples: u64,
    /// Series that are not dcgm-exporter's: not landed.
    pub ignored_series: u64,
    pub dcgm: DcgmStats,
}

/// Decodes one remote-write body and streams its DCGM samples to `sink` series by series (a wide
/// row gathers every field of a GPU at one timestamp, whichever series and order they came in).
/// A bad sample is rejected with its series' 1-based position in the request as its line.
pub fn parse(
    input: &mut dyn BufRead,
    ctx: &ParseContext,
    sink: &mut dyn Sink,
) -> Result<RemoteWriteStats, IngestError> {
    let format = |reason: String| IngestError::Format {
        origin: ctx.origin.clone(),
        reason,
    };
    let mut compressed = Vec::new();
    input
        .read_to_end(&mut compressed)
        .map_err(|source| IngestError::Read {
            origin: ctx.origin.clone(),
            source,
        })?;
    if let Some(limit) = ctx.limits.max_decompressed
        && snap::raw::decompress_len(&compressed).is_ok_and(|len| len as u64 > limit.bytes)
    {
        return Err(IngestError::TooLarge {
            origin: ctx.origin.clone(),
            max_bytes: limit.bytes,
            limit: limit.name,
        });
    }
    let body = snap::raw::Decoder::new()
        .decompress_vec(&compressed)
        .map_err(|error| {
            format(format!(
                "not a snappy-compressed (block format) body: {error}"
            ))
        })?;
    let request = WriteRequest::decode(body.as_slice()).map_err(|error| {
        format(format!(
            "not a Prometheus remote-write WriteRequest: {error}"
        ))
    })?;

    let mut stats = RemoteWriteStats::default();
    let mut feed = dcgm::SampleFeed::new(ctx);
    for (position, timeseries) in request.timeseries.iter().enumerate() {
        stats.samples += timeseries.samples.len() as u64;
        let name = timeseries
            .labels
            .iter()
            .find(|label| label.name == "__name__")
            .map(|label| label.value.as_str())
            .unwrap_or_default();
        if !name.starts_with(DCGM_PREFIX) {
            stats.ignored_series += 1;
            continue;
        }
        let labels: Vec<(String, String)> = timeseries
            .labels
            .iter()
            .map(|label| (label.name.clone(), label.value.clone()))
            .collect();
        let samples = timeseries
            .samples
            .iter()
            .map(|sample| (sample.value, sample.timestamp.saturating_mul(1000)));
        feed.push_series(position as u64 + 1, name, &labels, samples, sink)?;
    }
    stats.dcgm = feed.finish(sink)?;
    Ok(stats)
}

#[cfg(test)]
mod tests;
