//! Ingest: parsers for the four real input formats, and the pipeline that lands their records in
//! the lake exactly once.
//!
//! Map of the crate:
//! - `record.rs`: the [`Sink`] every parser pushes to, [`Rejection`], [`ParseContext`];
//! - `dcgm.rs`: dcgm-exporter Prometheus text → `gpu_samples` (+ `gpu_samples_extra`);
//! - `focus.rs`: FOCUS 1.0–1.3 CSV/Parquet → `billing_lines`;
//! - `tokens.rs`: canonical JSON lines, LiteLLM spend logs, OpenTelemetry GenAI → `token_usage`;
//! - `remote_write.rs`: Prometheus remote-write bodies → the dcgm mapping, series by series;
//! - `events.rs`: canonical JSON lines, Kubernetes pods, Kueue, Slurm sacct → `scheduler_events`;
//! - `json_records.rs`: the toolkit's JSON framer (JSON lines, documents, arrays), streaming one
//!   record at a time, shared by `tokens` and `events`;
//! - `time.rs`: the toolkit's timestamps: RFC 3339 or local time in `--tz`, and the range the
//!   lake keeps (1970 to 9999), shared by every parser;
//! - `pipeline.rs`: input decoding (gzip, stdin), idempotency, the writer task, the quarantine;
//! - `fuzzing.rs`: the entry point of the fuzz targets under `fuzz/` and of their corpus replay.

pub mod dcgm;
pub mod error;
pub mod events;
pub mod focus;
#[doc(hidden)]
pub mod fuzzing;
mod json_records;
pub mod pipeline;
pub mod record;
pub mod remote_write;
#[doc(hidden)]
pub mod testdata;
mod time;
pub mod tokens;

pub use error::IngestError;
pub use record::{CollectSink, ParseContext, Rejection, Sink};
