//! Ingest over HTTP: `POST /v1/ingest/{source}` takes the CLI's formats, and `POST /v1/prom/write`
//! takes Prometheus remote-write. Both run the CLI's pipeline (exactly once by content hash,
//! quarantine, strict) on the body as it streams in (a body of a small declared length, such as
//! one scrape, is read whole first), and answer `202 Accepted` only once the batch is committed
//! in the catalog.
//!
//! An `Idempotency-Key` header makes a retry safe: the first response to a key is kept in the
//! catalog, and the same key again gets that response back (with `Idempotent-Replayed: true`)
//! and lands nothing.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::body::{Body, Bytes};
use axum::extract::{OriginalUri, Path, State};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use gpuledger_ingest::IngestError;
use gpuledger_ingest::ParseContext;
use gpuledger_ingest::pipeline::{
    IngestOptions, IngestReport, Input, Outcome, PARSED_INLINE, Source, ingest,
};
use gpuledger_lake::catalog::StoredResponse;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::auth::{Permission, Principal};
use crate::error::{ApiError, Problem, QueryParams};

/// Rejections listed in a response; the quarantine has them all.
const REJECTIONS_SHOWN: usize = 20;

/// The longest Idempotency-Key taken.
const MAX_KEY_LEN: usize = 255;

/// Header that marks a response given again for a known Idempotency-Key.
const REPLAYED: &str = "idempotent-replayed";

/// The options of `gpuledger ingest`, as query parameters.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct IngestParams {
    /// Cluster name for inputs that do not carry one (dcgm text, Slurm without a Cluster field).
    cluster: Option<String>,
    /// Time of an untimestamped dcgm scrape (RFC 3339); when the request arrived if not given.
    #[param(value_type = Option<String>, format = DateTime, example = "2026-11-02T10:00:00Z")]
    at: Option<DateTime<Utc>>,
    /// Time zone of naive timestamps (Slurm local times, LiteLLM), e.g. Europe/Berlin; UTC if not given.
    tz: Option<String>,
    /// A date format for FOCUS files that do not use ISO 8601, e.g. `%m/%d/%y`.
    date_format: Option<String>,
    /// Reject the whole input on the first bad record (422) instead of quarantining it.
    #[serde(default)]
    strict: bool,
}

/// Where remote-write samples without a `cluster` label land.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PromWriteParams {
    /// Cluster name for series without a `cluster` label.
    cluster: Option<String>,
}

/// What an ingest landed.
#[derive(Debug, Serialize, ToSchema)]
pub struct IngestResponse {
    /// The batch that landed the input; when `duplicate`, the batch that landed it before.
    pub batch_id: String,
    /// dcgm, focus, aws-cur, azure-ea, tokens, events or remote_write.
    pub source: String,
    /// The same input (or Idempotency-Key) was ingested before: nothing new landed.
    pub duplicate: bool,
    /// `landed`; `unchanged` (the same input was ingested before and is active: nothing
    /// changed); or `reactivated` (the same input as an earlier billing delivery that a later one
    /// had replaced: active again, `rows_replaced` rows of the later one retired).
    pub outcome: &'static str,
    /// What happened, in a sentence.
    pub message: String,
    /// Records read (dcgm: sample lines; remote-write: samples).
    pub records_read: u64,
    /// Rows landed per table.
    pub rows: BTreeMap<String, u64>,
    /// Records rejected, in all.
    pub quarantined: u64,
    /// Rejected records kept whole in the quarantine: the first `--ingest-max-rejections` (1,000
    /// by default) of them; a flood of bad lines is counted, not stored.
    pub quarantine_kept: u64,
    /// The first quarantined records (at most 20); `select * from quarantine where batch_id = …`
    /// has all those kept.
    pub rejections: Vec<RejectedRecord>,
    /// Rows already in the lake (or repeated in this input), skipped: gateway requests by
    /// request id, scheduler events by identity.
    pub duplicates_skipped: u64,
    /// Rows of another delivery of the same billing period that this one replaced.
    pub rows_replaced: u64,
    /// Remote-write: series that are not dcgm-exporter's, not landed.
    pub ignored_series: u64,
    /// FOCUS: Mandatory columns the input lacks; its rows landed with nulls there.
    pub missing_columns: Vec<&'static str>,
}

/// A quarantined record.
#[derive(Debug, Serialize, ToSchema)]
pub struct RejectedRecord {
    /// The input's name: `http:<source>` for a request body.
    pub file: String,
    /// 1-based line (remote-write: the series' position in the request).
    pub line: u64,
    pub field: String,
    pub reason: String,
}

impl From<&IngestReport> for IngestResponse {
    fn from(report: &IngestReport) -> Self {
        let (batch_id, outcome, message, rows_replaced) = match &report.outcome {
            Outcome::Landed { rows_replaced } => (
                report.batch_id.clone(),
                "landed",
                landed_message(report),
                *rows_replaced,
            ),
            Outcome::AlreadyIngested { batch_id } => (
                batch_id.clone(),
                "unchanged",
                format!("identical to batch {batch_id}, which is active: nothing changed"),
                0,
            ),
            Outcome::Reactivated {
                batch_id,
                rows_restored,
                rows_replaced,
            } => (
                batch_id.clone(),
                "reactivated",
                format!(
                    "re-delivery of an earlier delivery (batch {batch_id}): active again, \
                     {rows_restored} rows restored, {rows_replaced} rows replaced"
                ),
                *rows_replaced,
            ),
        };
        Self {
            batch_id,
            source: report.source.name().into(),
            duplicate: outcome != "landed",
            outcome,
            message,
            records_read: report.records_read,
            rows: report
                .rows
                .iter()
                .map(|(table, n)| (table.name().to_string(), *n))
                .collect(),
            quarantined: report.records_rejected,
            quarantine_kept: report.rejections.len() as u64,
            rejections: report
                .rejections
                .iter()
                .take(REJECTIONS_SHOWN)
                .map(|r| RejectedRecord {
                    file: report.origin.clone(),
                    line: r.line,
                    field: r.field.clone(),
                    reason: r.reason.clone(),
                })
                .collect(),
            duplicates_skipped: report.duplicates_skipped,
            rows_replaced,
            ignored_series: report.ignored_series,
            missing_columns: report.missing_columns.clone(),
        }
    }
}

/// "landed N rows", and the mandatory columns the input lacks.
fn landed_message(report: &IngestReport) -> String {
    let landed = format!("landed {} rows", report.rows_landed());
    match report.missing_columns.as_slice() {
        [] => landed,
        missing => format!(
            "{landed}; the input lacks the FOCUS Mandatory columns {}, null in every row",
            missing.join(", ")
        ),
    }
}

/// The formats of `POST /v1/ingest/{source}`.
#[derive(ToSchema)]
#[schema(rename_all = "kebab-case")]
#[allow(dead_code)] // a schema for the OpenAPI document only: the path is parsed as a `Source`
enum FileSource {
    Dcgm,
    Focus,
    AwsCur,
    AzureEa,
    Tokens,
    Events,
}

/// Raw bytes: gzip, a FOCUS Parquet file, or a remote-write body.
#[derive(ToSchema)]
#[schema(value_type = String, format = Binary)]
#[allow(dead_code)] // a schema for the OpenAPI document only
struct BinaryInput(Vec<u8>);

/// Land a file's worth of input.
///
/// The body is what `gpuledger ingest <source>` reads from a file: dcgm-exporter text, FOCUS CSV
/// or Parquet, gateway JSON lines, scheduler events (JSON lines or Slurm `sacct --parsable2`),
/// gzip-compressed or not (detected from the bytes, whatever the Content-Type says). It is
/// streamed into the pipeline, never held whole. The same body with the same parameters again
/// lands nothing (`duplicate`); bad records are quarantined and the rest lands.
#[utoipa::path(
    post,
    path = "/v1/ingest/{source}",
    tag = "ingest",
    params(
        ("source" = inline(FileSource), Path, description = "The input's format, as `gpuledger ingest <source>` takes it"),
        IngestParams,
        ("Idempotency-Key" = Option<String>, Header, description = "A client-chosen key (1–255 characters): the same key again returns the first response and lands nothing"),
    ),
    request_body(
        description = "The input, as a file of the source's format holds it (gzip accepted)",
        content(
            (String = "text/plain"),
            (String = "text/csv"),
            (String = "application/x-ndjson"),
            ("application/json"),
            (inline(BinaryInput) = "application/gzip"),
            (inline(BinaryInput) = "application/octet-stream"),
        )
    ),
    responses(
        (status = 202, description = "The batch is committed (or was before: `duplicate`)", body = IngestResponse),
        (status = 400, description = "A query parameter or the Idempotency-Key is invalid", body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The token is neither ingest nor admin", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown source", body = Problem, content_type = "application/problem+json"),
        (status = 408, description = "The body stopped arriving for --body-timeout", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is larger than --ingest-max-mb, larger than --ingest-max-decompressed-mb once decompressed, or has a line longer than --ingest-max-line-kb", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The input is not of the source's format, or strict mode met a bad record", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn ingest_file(
    State(state): State<AppState>,
    principal: Principal,
    Path(source): Path<String>,
    QueryParams(params): QueryParams<IngestParams>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    principal.require(Permission::Ingest, "ingest")?;
    let source: Source = source.parse().map_err(ApiError::NotFound)?;
    let tz = match params.tz.as_deref() {
        None => chrono_tz::UTC,
        Some(name) => name
            .parse()
            .map_err(|_| ApiError::BadRequest(format!("tz: '{name}' is not a time zone")))?,
    };
    let origin = format!("http:{source}");
    let mut context = ParseContext::new(origin, params.at.unwrap_or_else(Utc::now));
    context.cluster = params.cluster;
    context.tz = tz;
    context.date_format = params.date_format;
    let mut options = IngestOptions::new(source, context);
    options.strict = params.strict;
    options.at_declared = params.at.is_some();
    options.sender = Some(principal.token_id.clone());
    options.only_team = principal.team.clone();
    run(&state, &principal, uri.path(), &headers, body, options).await
}

/// Prometheus remote-write 1.0 receiver.
///
/// A snappy-compressed (block format) protobuf `WriteRequest`, as Prometheus sends it
/// (`remote_write: [{url: http://gpuledger:8080/v1/prom/write, authorization: {credentials: <token>}}]`).
/// DCGM series land in `gpu_samples` (and `gpu_samples_extra`) as the same scrape would as text;
/// other series are counted in `ignored_series`. A re-sent body lands nothing.
#[utoipa::path(
    post,
    path = "/v1/prom/write",
    tag = "ingest",
    params(
        PromWriteParams,
        ("Idempotency-Key" = Option<String>, Header, description = "A client-chosen key (1–255 characters): the same key again returns the first response and lands nothing"),
    ),
    request_body(
        description = "snappy(WriteRequest protobuf)",
        content((inline(BinaryInput) = "application/x-protobuf"))
    ),
    responses(
        (status = 202, description = "The batch is committed (or was before: `duplicate`)", body = IngestResponse),
        (status = 400, description = "A query parameter or the Idempotency-Key is invalid", body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The token is neither ingest nor admin", body = Problem, content_type = "application/problem+json"),
        (status = 408, description = "The body stopped arriving for --body-timeout", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is larger than --ingest-max-mb, or than --ingest-max-decompressed-mb once decompressed", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The body is not a snappy-compressed WriteRequest", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn prom_write(
    State(state): State<AppState>,
    principal: Principal,
    QueryParams(params): QueryParams<PromWriteParams>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    principal.require(Permission::Ingest, "ingest")?;
    let mut context = ParseContext::new("http:remote_write", Utc::now());
    context.cluster = params.cluster;
    let mut options = IngestOptions::new(Source::RemoteWrite, context);
    options.at_declared = false;
    options.sender = Some(principal.token_id.clone());
    options.only_team = principal.team.clone();
    run(&state, &principal, uri.path(), &headers, body, options).await
}

/// The steps both endpoints share: the key, the size limit, the pipeline, the metrics, the answer.
async fn run(
    state: &AppState,
    principal: &Principal,
    route: &str,
    headers: &HeaderMap,
    body: Body,
    mut options: IngestOptions,
) -> Result<Response, ApiError> {
    // A key is the client's within one token and route: another token (or route) reusing it
    // neither sees this response nor loses its own data.
    let key = idempotency_key(headers)?
        .map(|key| format!("{}\u{1f}{route}\u{1f}{key}", principal.token_id));
    let catalog = state.lake.catalog();
    if let Some(key) = &key
        && let Some(stored) = catalog.idempotent_response(key).await?
    {
        return Ok(answer(stored.status, stored.body, true));
    }
    let limit = state.ingest_max_bytes;
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit) {
        tokio::spawn(discard(body.into_data_stream()));
        return Err(too_large(limit));
    }
    options.idempotency_key = key.clone();
    options.limits = state.ingest_limits;
    options.retry_window = state.ingest_retry_window;
    options.group = state.group_commit.clone();
    let cut_off = Arc::new(AtomicBool::new(false));
    let stalled = Arc::new(AtomicBool::new(false));
    let origin = options.context.origin.clone();
    let input = match declared {
        // Small enough to parse on this task once it is here (one scrape): read whole.
        Some(length) if length <= PARSED_INLINE as u64 => Input::Bytes {
            bytes: read_whole(body, length, state.body_timeout, &origin).await?,
            origin,
        },
        _ => Input::Reader {
            origin,
            reader: Box::new(BodyReader::spawn(
                body,
                limit,
                state.body_timeout,
                Arc::clone(&cut_off),
                Arc::clone(&stalled),
            )),
            size: declared,
        },
    };
    let report = match ingest(&state.lake, input, options).await {
        Ok(report) => report,
        Err(_) if cut_off.load(Ordering::SeqCst) => return Err(too_large(limit)),
        Err(_) if stalled.load(Ordering::SeqCst) => return Err(body_stalled(state.body_timeout)),
        Err(error) => return Err(error.into()),
    };
    state.metrics.observe_ingest(&report);
    let response = IngestResponse::from(&report);
    let body = serde_json::to_string(&response)
        .map_err(|error| ApiError::Internal(format!("encoding the response: {error}")))?;
    if let Some(key) = &key {
        let stored = StoredResponse {
            route: route.to_string(),
            batch_id: response.batch_id.clone(),
            status: StatusCode::ACCEPTED.as_u16(),
            body: body.clone(),
        };
        catalog.record_idempotent_response(key, &stored).await?;
    }
    Ok(answer(StatusCode::ACCEPTED.as_u16(), body, false))
}

fn answer(status: u16, body: String, replayed: bool) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::ACCEPTED);
    let mut response = (
        status,
        [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        body,
    )
        .into_response();
    if replayed {
        response
            .headers_mut()
            .insert(REPLAYED, HeaderValue::from_static("true"));
    }
    response
}

fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    let key = value
        .to_str()
        .ok()
        .filter(|key| !key.is_empty() && key.len() <= MAX_KEY_LEN)
        .ok_or_else(|| {
            ApiError::BadRequest(format!(
                "Idempotency-Key: must be 1 to {MAX_KEY_LEN} visible ASCII characters"
            ))
        })?;
    Ok(Some(key.to_string()))
}

/// A body of a small declared `length`, read whole; the same errors as when it streams to the
/// parser: 408 when no chunk came for `timeout`, a read error when the client broke it off.
async fn read_whole(
    body: Body,
    length: u64,
    timeout: std::time::Duration,
    origin: &str,
) -> Result<Bytes, ApiError> {
    let mut bytes = Vec::with_capacity(length as usize);
    let mut stream = body.into_data_stream();
    loop {
        match tokio::time::timeout(timeout, stream.next()).await {
            // The connection ends the body at its declared length; should it not, the body
            // still never grows past it here.
            Ok(Some(Ok(chunk))) if (bytes.len() + chunk.len()) as u64 > length => {
                return Err(ApiError::BadRequest(format!(
                    "the body is longer than its Content-Length ({length} bytes)"
                )));
            }
            Ok(Some(Ok(chunk))) => bytes.extend_from_slice(&chunk),
            Ok(Some(Err(error))) => {
                return Err(IngestError::Read {
                    origin: origin.to_string(),
                    source: std::io::Error::other(error),
                }
                .into());
            }
            Ok(None) => return Ok(Bytes::from(bytes)),
            Err(_) => return Err(body_stalled(timeout)),
        }
    }
}

fn body_stalled(timeout: std::time::Duration) -> ApiError {
    ApiError::RequestTimeout(format!(
        "the body stopped arriving for {} (--body-timeout)",
        humantime::format_duration(timeout)
    ))
}

fn too_large(limit: u64) -> ApiError {
    ApiError::PayloadTooLarge(format!(
        "the body is larger than {} MiB (--ingest-max-mb)",
        limit >> 20
    ))
}

/// The most of a refused body that is read and dropped.
const DISCARD_MAX: u64 = 64 << 20;

/// Reads and drops the rest of a refused body, up to [`DISCARD_MAX`]: clients send the whole body
/// before they read the answer, and would see a reset connection instead of their 413.
async fn discard(mut stream: axum::body::BodyDataStream) {
    let mut discarded = 0u64;
    while let Some(Ok(chunk)) = stream.next().await {
        discarded += chunk.len() as u64;
        if discarded > DISCARD_MAX {
            break;
        }
    }
}

/// A request body as a blocking reader for the parser's thread. A task pulls the body chunk by
/// chunk into a short channel, so at most a few chunks are held at once, and cuts it off with an
/// error past `limit` bytes.
struct BodyReader {
    chunks: mpsc::Receiver<std::io::Result<Bytes>>,
    current: Bytes,
}

impl BodyReader {
    /// Chunks in flight between the body and the parser.
    const CHANNEL: usize = 8;

    /// `stalled` is set when no chunk came for `timeout`: the body is cut off there.
    fn spawn(
        body: Body,
        limit: u64,
        timeout: std::time::Duration,
        cut_off: Arc<AtomicBool>,
        stalled: Arc<AtomicBool>,
    ) -> Self {
        let (sender, chunks) = mpsc::channel(Self::CHANNEL);
        tokio::spawn(async move {
            let mut stream = body.into_data_stream();
            let mut received = 0u64;
            loop {
                let chunk = match tokio::time::timeout(timeout, stream.next()).await {
                    Ok(Some(chunk)) => chunk,
                    Ok(None) => break,
                    Err(_) => {
                        stalled.store(true, Ordering::SeqCst);
                        let _ = sender
                            .send(Err(std::io::Error::other("the body stopped arriving")))
                            .await;
                        break;
                    }
                };
                let item = chunk.map_err(std::io::Error::other).and_then(|chunk| {
                    received += chunk.len() as u64;
                    if received > limit {
                        cut_off.store(true, Ordering::SeqCst);
                        Err(std::io::Error::other("the body is larger than the limit"))
                    } else {
                        Ok(chunk)
                    }
                });
                let failed = item.is_err();
                // The parser stopped reading (it failed, or the input ended): so do we.
                if sender.send(item).await.is_err() || failed {
                    break;
                }
            }
            if cut_off.load(Ordering::SeqCst) {
                discard(stream).await;
            }
        });
        Self {
            chunks,
            current: Bytes::new(),
        }
    }
}

impl Read for BodyReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.chunks.blocking_recv() {
                Some(chunk) => self.current = chunk?,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current.split_to(n));
        Ok(n)
    }
}
