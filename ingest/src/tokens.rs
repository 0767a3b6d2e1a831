//! Gateway token usage → `token_usage`: one row per LLM request, from canonical records, LiteLLM
//! spend logs (`LiteLLM_SpendLogs` rows and `StandardLoggingPayload`s) and OpenTelemetry GenAI
//! telemetry (flat attribute maps, or spans of an OTLP/JSON traces export).
//!
//! The input is JSON lines, one or more JSON documents (LiteLLM's samples are pretty-printed), or
//! a JSON array of records. Each record is recognised by its keys, so one input may mix shapes.
//! Token counts keep OpenAI's meaning whatever the source: `input_tokens` includes cached input,
//! `output_tokens` includes reasoning. `model` is the model the client asked for (OTel
//! `gen_ai.request.model`, LiteLLM `model_group` when set); `model_version` the build that answered
//! (`gen_ai.response.model`, the deployment LiteLLM routed a group to) and `quantization` its
//! weight format, when the record says (canonical fields of those names, LiteLLM
//! `spend_logs_metadata` or `quantization:<value>` tags).

use std::borrow::Cow;
use std::collections::HashSet;
use std::io::BufRead;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, StringArray, TimestampMicrosecondArray,
};
use arrow::record_batch::RecordBatch;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use gpuledger_lake::tables::Table;
use serde_json::{Map, Value};

use crate::error::IngestError;
use crate::record::{ParseContext, Rejection, Sink};
use json_records::JsonRecords;

mod json_records;
#[cfg(test)]
mod tests;

/// What one input yielded. `records == landed + duplicates + rejected`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenStats {
    /// Requests read: records, or the GenAI spans of an OTLP export.
    pub records: u64,
    pub landed: u64,
    /// Requests whose `request_id` already landed from this input (the first is kept).
    pub duplicates: u64,
    pub rejected: u64,
    /// Spans of an OTLP export without any `gen_ai.*` attribute (HTTP, database, …): not requests.
    pub skipped_spans: u64,
}

/// Parses gateway usage records and emits `token_usage` batches of at most `ctx.batch_rows` rows.
pub fn parse(
    input: &mut dyn BufRead,
    ctx: &ParseContext,
    sink: &mut dyn Sink,
) -> Result<TokenStats, IngestError> {
    let mut records = JsonRecords::new(input, &ctx.origin);
    let mut landing = Landing::new(sink, ctx.batch_rows);
    let mut shape_checked = false;
    while let Some(raw) = records.next_record()? {
        let value: Value = match serde_json::from_slice(&raw.text) {
            Ok(value) => value,
            Err(error) => {
                let reason = json_error(&error, raw.line);
                landing.reject(raw.line, Invalid::new(WHOLE_RECORD, reason), &raw.lossy())?;
                continue;
            }
        };
        let Value::Object(record) = &value else {
            let reason = format!("expected a JSON object, found {}", kind(&value));
            landing.reject(raw.line, Invalid::new(WHOLE_RECORD, reason), &raw.lossy())?;
            continue;
        };
        let shape = Shape::of(record);
        if !shape_checked {
            shape_checked = true;
            if shape.is_none() {
                return Err(not_token_usage(&ctx.origin, raw.line, record));
            }
        }
        let fields = Fields::root(record);
        match shape {
            Some(Shape::Canonical) => {
                landing.land(raw.line, canonical_row(&fields, ctx.tz), || raw.lossy())?;
            }
            Some(Shape::LiteLlm) => {
                landing.land(raw.line, litellm_row(&fields, ctx.tz), || raw.lossy())?;
            }
            Some(Shape::OtelAttributes) => {
                landing.land(raw.line, otel_row(&fields, ctx.tz), || raw.lossy())?;
            }
            Some(Shape::OtlpExport) => match otlp_spans(&fields) {
                Ok(spans) => land_spans(&mut landing, raw.line, spans, ctx.tz)?,
                Err(invalid) => landing.reject(raw.line, invalid, &raw.lossy())?,
            },
            None => {
                let reason = format!("not a token-usage record: {EXPECTED_KEYS}");
                landing.reject(raw.line, Invalid::new(WHOLE_RECORD, reason), &raw.lossy())?;
            }
        }
    }
    landing.finish()
}

/// Lands the GenAI spans of an OTLP export, each with the line where the export starts.
fn land_spans(
    landing: &mut Landing,
    line: u64,
    spans: Vec<(Map<String, Value>, &Value)>,
    tz: Tz,
) -> Result<(), IngestError> {
    for (flat, span) in spans {
        if !flat.keys().any(|key| key.starts_with(GEN_AI_PREFIX)) {
            landing.stats.skipped_spans += 1;
            continue;
        }
        let row = otel_row(&Fields::root(&flat), tz).map_err(|invalid| {
            let span_id = flat.get("spanId").and_then(Value::as_str).unwrap_or("?");
            Invalid::new(invalid.field, format!("span {span_id}: {}", invalid.reason))
        });
        landing.land(line, row, || span.to_string())?;
    }
    Ok(())
}

/// The `field` of a rejection about the record as a whole (not JSON, not an object, unknown keys).
const WHOLE_RECORD: &str = "(record)";
const GEN_AI_PREFIX: &str = "gen_ai.";
const EXPECTED_KEYS: &str = "expected a canonical record (request_id, ts, input_tokens…), a LiteLLM \
    spend log (startTime, call_type…) or OpenTelemetry GenAI telemetry (gen_ai.* attributes, \
    resourceSpans)";

/// The first record decides whether the input is gateway usage at all.
fn not_token_usage(origin: &str, line: u64, record: &Map<String, Value>) -> IngestError {
    let mut keys: Vec<&str> = record.keys().map(String::as_str).take(8).collect();
    if record.len() > keys.len() {
        keys.push("…");
    }
    IngestError::Format {
        origin: origin.to_string(),
        reason: format!(
            "not gateway token usage: the record at line {line} has keys {}; {EXPECTED_KEYS}",
            keys.join(", ")
        ),
    }
}

/// serde_json counts lines from the record's start; the user needs them counted in the input.
fn json_error(error: &serde_json::Error, record_line: u64) -> String {
    let message = error.to_string();
    let message = message
        .rsplit_once(" at line ")
        .map_or(message.as_str(), |(text, _)| text);
    let line = record_line + error.line().saturating_sub(1) as u64;
    format!(
        "invalid JSON at line {line} column {}: {message}",
        error.column()
    )
}

/// The record shapes this parser knows, recognised by their distinctive keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Canonical,
    LiteLlm,
    OtelAttributes,
    OtlpExport,
}

impl Shape {
    fn of(record: &Map<String, Value>) -> Option<Shape> {
        let has_any = |keys: &[&str]| keys.iter().any(|key| record.contains_key(*key));
        if record.contains_key("resourceSpans") {
            Some(Shape::OtlpExport)
        } else if record.keys().any(|key| key.starts_with(GEN_AI_PREFIX)) {
            Some(Shape::OtelAttributes)
        } else if has_any(&["startTime", "call_type"]) {
            Some(Shape::LiteLlm)
        } else if has_any(&["ts", "request_id", "input_tokens", "output_tokens", "usage"]) {
            Some(Shape::Canonical)
        } else {
            None
        }
    }
}

/// The `source` column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Canonical,
    LiteLlm,
    Otel,
}

impl Source {
    fn name(self) -> &'static str {
        match self {
            Source::Canonical => "canonical",
            Source::LiteLlm => "litellm",
            Source::Otel => "otel",
        }
    }
}

/// One `token_usage` row before it goes into a batch.
#[derive(Debug, Clone, PartialEq)]
struct TokenRow {
    ts: DateTime<Utc>,
    request_id: String,
    team: Option<String>,
    environment: Option<String>,
    cost_center: Option<String>,
    namespace: Option<String>,
    workload: Option<String>,
    model: Option<String>,
    model_version: Option<String>,
    quantization: Option<String>,
    provider: Option<String>,
    priority: Option<String>,
    input_tokens: Option<i64>,
    output_tokens: Option<i64>,
    cached_tokens: Option<i64>,
    reasoning_tokens: Option<i64>,
    ttft_ms: Option<f64>,
    latency_ms: Option<f64>,
    status: Option<String>,
    cache_hit: Option<bool>,
    gateway_cost: Option<f64>,
    source: Source,
}

/// Why a record cannot land: the field as the input names it, and a reason a user understands.
#[derive(Debug, Clone, PartialEq)]
struct Invalid {
    field: String,
    reason: String,
}

impl Invalid {
    fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

type Checked<T> = Result<T, Invalid>;

fn canonical_row(record: &Fields, tz: Tz) -> Checked<TokenRow> {
    let request_id = record.required(record.label("request_id")?, "request_id", "request id")?;
    let ts = record.required(record.time("ts", tz)?, "ts", "request time")?;
    // A raw provider `usage` object may stand in for the token fields; `usage: null` is no counts.
    let usage = if record.has("usage") {
        provider_usage(&record.object("usage")?)?
    } else {
        UsageCounts::default()
    };
    Ok(TokenRow {
        ts,
        request_id,
        team: record.label("team")?,
        environment: record.label("environment")?,
        cost_center: record.label("cost_center")?,
        namespace: record.label("namespace")?,
        workload: record.label("workload")?,
        model: record.label("model")?,
        model_version: record.label("model_version")?,
        quantization: record.label("quantization")?,
        provider: record.label("provider")?,
        priority: record.label("priority")?,
        input_tokens: record.tokens("input_tokens")?.or(usage.input),
        output_tokens: record.tokens("output_tokens")?.or(usage.output),
        cached_tokens: record.tokens("cached_tokens")?.or(usage.cached),
        reasoning_tokens: record.tokens("reasoning_tokens")?.or(usage.reasoning),
        ttft_ms: record.milliseconds("ttft_ms")?,
        latency_ms: record.milliseconds("latency_ms")?,
        status: record.label("status")?.map(normalise_status),
        cache_hit: record.cache_hit("cache_hit")?,
        gateway_cost: record.number("gateway_cost")?,
        source: Source::Canonical,
    })
}

/// A `LiteLLM_SpendLogs` row (`request_id`, `spend`, `metadata` as a JSON-encoded string) or a
/// `StandardLoggingPayload` (`id`, `response_cost`, `metadata` as an object): one mapping, since
/// the two share most keys.
fn litellm_row(record: &Fields, tz: Tz) -> Checked<TokenRow> {
    let id_key = if record.has("request_id") || !record.has("id") {
        "request_id"
    } else {
        "id"
    };
    let request_id = record.required(record.label(id_key)?, id_key, "request id")?;
    let start = record.required(record.time("startTime", tz)?, "startTime", "request time")?;
    let end = record.time("endTime", tz)?;
    let first_token = record.time("completionStartTime", tz)?;

    let metadata = record.embedded_object("metadata")?;
    let metadata = Fields::nested(metadata.as_deref(), "metadata");
    // Spend-log rows carry the provider usage in their metadata, logging payloads in the response
    // (which a spend-log row stores JSON-encoded, like its metadata).
    let response;
    let usage = if metadata.has("usage_object") {
        metadata.object("usage_object")?
    } else {
        response = record.embedded_object("response")?;
        Fields::nested(response.as_deref(), "response").object("usage")?
    };
    let usage = provider_usage(&usage)?;
    // `spend_logs_metadata` is the free-form dict LiteLLM users attach to requests for attribution.
    let attribution = metadata.object("spend_logs_metadata")?;
    let team = metadata
        .first(
            &["user_api_key_team_alias", "user_api_key_team_id"],
            Fields::label,
        )?
        .or(record.label("team_id")?)
        .or(attribution.label("team")?);
    // `model_group` is the public alias the client asked for (what SLOs and workloads name);
    // `model` then is the deployment LiteLLM routed it to: the build that answered.
    let model_group = record.label("model_group")?;
    let deployment = record.label("model")?;
    // Tags as LiteLLM users attach them: `request_tags`, or `tags` in the request's metadata.
    let mut tags = record.embedded_tags("request_tags")?;
    tags.extend(metadata.embedded_tags("tags")?);
    let tagged = |key: &str| tag_value(&tags, key);
    let model_version = attribution
        .label("model_version")?
        .or_else(|| tagged("model_version"))
        .or(model_group.as_ref().and(deployment.clone()));
    let quantization = attribution
        .label("quantization")?
        .or_else(|| tagged("quantization"));

    Ok(TokenRow {
        ts: start,
        request_id,
        team,
        environment: attribution.label("environment")?,
        cost_center: attribution.label("cost_center")?,
        namespace: attribution.label("namespace")?,
        workload: attribution.label("workload")?,
        model: model_group.or(deployment),
        model_version,
        quantization,
        provider: record.label("custom_llm_provider")?,
        priority: attribution.label("priority")?,
        input_tokens: record.tokens("prompt_tokens")?.or(usage.input),
        output_tokens: record.tokens("completion_tokens")?.or(usage.output),
        cached_tokens: usage.cached,
        reasoning_tokens: usage.reasoning,
        ttft_ms: first_token.map(|first_token| millis_between(start, first_token)),
        latency_ms: end.map(|end| millis_between(start, end)),
        status: record.label("status")?.map(normalise_status),
        cache_hit: record.cache_hit("cache_hit")?,
        gateway_cost: record.first(&["spend", "response_cost"], Fields::number)?,
        source: Source::LiteLlm,
    })
}

/// OpenTelemetry GenAI attributes, with current and deprecated names, plus the resource
/// attributes that place the caller in Kubernetes.
fn otel_row(attributes: &Fields, tz: Tz) -> Checked<TokenRow> {
    let request_id = attributes.required(
        attributes.label("gen_ai.response.id")?,
        "gen_ai.response.id",
        "request id",
    )?;
    let start = attributes
        .unix_nanos("startTimeUnixNano")?
        .or(attributes.unix_nanos("timeUnixNano")?)
        .or(attributes.time("time", tz)?)
        .or(attributes.time("timestamp", tz)?);
    let start = attributes.required(start, "time", "request time (startTimeUnixNano or time)")?;
    let end = attributes.unix_nanos("endTimeUnixNano")?;
    // Instrumentations leave the span status unset on success and set `error.type` on failure.
    let failed = attributes.has("error.type")
        || attributes
            .label("otel.status_code")?
            .is_some_and(|code| code == "ERROR");

    Ok(TokenRow {
        ts: start,
        request_id,
        team: None,
        environment: attributes.first(
            &["deployment.environment.name", "deployment.environment"],
            Fields::label,
        )?,
        cost_center: None,
        namespace: attributes.label("k8s.namespace.name")?,
        workload: attributes.first(
            &[
                "k8s.deployment.name",
                "k8s.statefulset.name",
                "k8s.job.name",
                "service.name",
            ],
            Fields::label,
        )?,
        // The model asked for; the one that answered is its version (`gpt-4o-2024-08-06`).
        model: attributes.first(
            &["gen_ai.request.model", "gen_ai.response.model"],
            Fields::label,
        )?,
        model_version: attributes.label("gen_ai.response.model")?,
        quantization: None,
        provider: attributes.first(&["gen_ai.provider.name", "gen_ai.system"], Fields::label)?,
        priority: None,
        input_tokens: attributes.first(
            &["gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"],
            Fields::tokens,
        )?,
        output_tokens: attributes.first(
            &[
                "gen_ai.usage.output_tokens",
                "gen_ai.usage.completion_tokens",
            ],
            Fields::tokens,
        )?,
        cached_tokens: attributes.tokens("gen_ai.usage.cache_read.input_tokens")?,
        reasoning_tokens: attributes.tokens("gen_ai.usage.reasoning.output_tokens")?,
        ttft_ms: None,
        latency_ms: end.map(|end| millis_between(start, end)),
        status: Some(if failed { "failure" } else { "success" }.to_string()),
        cache_hit: None,
        gateway_cost: None,
        source: Source::Otel,
    })
}

/// Flattens each span of an OTLP/JSON traces export into one attribute map: the resource's
/// attributes, then the span's (which win), its `startTimeUnixNano`/`endTimeUnixNano` and
/// `spanId`, and its status as `otel.status_code` (the name OTel's non-OTLP exporters use).
/// Returns each map with the span as it was read.
fn otlp_spans<'a>(export: &Fields<'a>) -> Checked<Vec<(Map<String, Value>, &'a Value)>> {
    let Some(Value::Array(resource_spans)) = export.get("resourceSpans") else {
        return Err(Invalid::new(
            "resourceSpans",
            "expected an array of resource spans",
        ));
    };
    let children = |value: &'a Value, key: &str| {
        value
            .get(key)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
    };
    let mut spans = Vec::new();
    for resource_span in resource_spans {
        let resource = otlp_attributes(resource_span.pointer("/resource/attributes"));
        for scope_span in children(resource_span, "scopeSpans") {
            for span in children(scope_span, "spans") {
                let mut flat = resource.clone();
                flat.extend(otlp_attributes(span.get("attributes")));
                for key in ["startTimeUnixNano", "endTimeUnixNano", "spanId"] {
                    if let Some(value) = span.get(key) {
                        flat.insert(key.to_string(), value.clone());
                    }
                }
                if let Some(code) = span.pointer("/status/code") {
                    flat.insert("otel.status_code".to_string(), otlp_status(code).into());
                }
                spans.push((flat, span));
            }
        }
    }
    Ok(spans)
}

/// OTLP/JSON `[{key, value: {stringValue | intValue | …}}]` → a map of plain values. Scalars lose
/// their wrapper (`intValue` stays a string, as proto3 JSON writes 64-bit integers); arrays and
/// key-value lists keep theirs, no GenAI usage attribute being one.
fn otlp_attributes(attributes: Option<&Value>) -> Map<String, Value> {
    let entries = attributes
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    entries
        .iter()
        .filter_map(|entry| {
            let key = entry.get("key")?.as_str()?;
            let value = entry.get("value")?.as_object()?.values().next()?;
            Some((key.to_string(), value.clone()))
        })
        .collect()
}

/// An OTLP status code, numeric or by enum name, as `UNSET`, `OK` or `ERROR`.
fn otlp_status(code: &Value) -> &'static str {
    match code {
        Value::Number(n) if n.as_u64() == Some(1) => "OK",
        Value::Number(n) if n.as_u64() == Some(2) => "ERROR",
        Value::String(s) if s == "STATUS_CODE_OK" => "OK",
        Value::String(s) if s == "STATUS_CODE_ERROR" => "ERROR",
        _ => "UNSET",
    }
}

/// Token counts of a provider `usage` object, in OpenAI's meaning (input includes cached input,
/// output includes reasoning) whichever provider shape it has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct UsageCounts {
    input: Option<i64>,
    output: Option<i64>,
    cached: Option<i64>,
    reasoning: Option<i64>,
}

fn provider_usage(usage: &Fields) -> Checked<UsageCounts> {
    if usage.has("prompt_tokens") || usage.has("completion_tokens") {
        // OpenAI Chat Completions; LiteLLM's `usage_object` adds Anthropic's cache-read key.
        Ok(UsageCounts {
            input: usage.tokens("prompt_tokens")?,
            output: usage.tokens("completion_tokens")?,
            cached: usage
                .object("prompt_tokens_details")?
                .tokens("cached_tokens")?
                .or(usage.tokens("cache_read_input_tokens")?),
            reasoning: usage
                .object("completion_tokens_details")?
                .tokens("reasoning_tokens")?,
        })
    } else if usage.has("inputTokens") || usage.has("outputTokens") {
        // Bedrock Converse.
        uncached_input_usage(
            usage,
            [
                "inputTokens",
                "outputTokens",
                "cacheReadInputTokens",
                "cacheWriteInputTokens",
            ],
        )
    } else if usage.has("cache_read_input_tokens") || usage.has("cache_creation_input_tokens") {
        // Anthropic Messages.
        uncached_input_usage(
            usage,
            [
                "input_tokens",
                "output_tokens",
                "cache_read_input_tokens",
                "cache_creation_input_tokens",
            ],
        )
    } else {
        // OpenAI Responses API (Anthropic without caching has the same two keys and meaning).
        Ok(UsageCounts {
            input: usage.tokens("input_tokens")?,
            output: usage.tokens("output_tokens")?,
            cached: usage
                .object("input_tokens_details")?
                .tokens("cached_tokens")?,
            reasoning: usage
                .object("output_tokens_details")?
                .tokens("reasoning_tokens")?,
        })
    }
}

/// Anthropic and Bedrock count input without the tokens read from or written to the prompt
/// cache; those are added back so that `input_tokens` means the same for every provider.
fn uncached_input_usage(
    usage: &Fields,
    [input, output, read, write]: [&str; 4],
) -> Checked<UsageCounts> {
    let cache_read = usage.tokens(read)?;
    let cache_write = usage.tokens(write)?;
    Ok(UsageCounts {
        input: usage.tokens(input)?.map(|uncached| {
            uncached
                .saturating_add(cache_read.unwrap_or(0))
                .saturating_add(cache_write.unwrap_or(0))
        }),
        output: usage.tokens(output)?,
        cached: cache_read,
        reasoning: None,
    })
}

/// The value of the first `key:value` (or `key=value`) tag, e.g. `quantization:fp8`.
fn tag_value(tags: &[String], key: &str) -> Option<String> {
    tags.iter().find_map(|tag| {
        let (name, value) = tag.split_once([':', '='])?;
        let value = value.trim();
        (name.trim() == key && !value.is_empty()).then(|| value.to_string())
    })
}

/// `success` and `failure` under their usual spellings; any other status as it was written.
fn normalise_status(status: String) -> String {
    match status.to_ascii_lowercase().as_str() {
        "success" | "succeeded" | "ok" => "success".to_string(),
        "failure" | "failed" | "error" => "failure".to_string(),
        _ => status,
    }
}

fn millis_between(from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    (to.timestamp_micros() - from.timestamp_micros()) as f64 / 1000.0
}

/// A JSON object of one record, read field by field; fields are named by their path in the input
/// (`metadata.usage_object.prompt_tokens`) for rejections. An absent object reads as all-null.
struct Fields<'a> {
    map: Option<&'a Map<String, Value>>,
    path: String,
}

impl<'a> Fields<'a> {
    fn root(map: &'a Map<String, Value>) -> Self {
        Self {
            map: Some(map),
            path: String::new(),
        }
    }

    fn nested(map: Option<&'a Map<String, Value>>, path: &str) -> Self {
        Self {
            map,
            path: path.to_string(),
        }
    }

    fn name(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// The value of `key`; JSON `null` counts as absent.
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map?.get(key).filter(|value| !value.is_null())
    }

    fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    fn required<T>(&self, value: Option<T>, key: &str, what: &str) -> Checked<T> {
        value.ok_or_else(|| Invalid::new(self.name(key), format!("missing {what}")))
    }

    /// The first of `keys` that `read` finds a value for.
    fn first<T>(
        &self,
        keys: &[&str],
        read: impl Fn(&Self, &str) -> Checked<Option<T>>,
    ) -> Checked<Option<T>> {
        for key in keys {
            if let Some(value) = read(self, key)? {
                return Ok(Some(value));
            }
        }
        Ok(None)
    }

    fn object(&self, key: &str) -> Checked<Fields<'a>> {
        match self.get(key) {
            None => Ok(Fields::nested(None, &self.name(key))),
            Some(Value::Object(map)) => Ok(Fields::nested(Some(map), &self.name(key))),
            Some(other) => Err(self.wrong_type(key, "a JSON object", other)),
        }
    }

    /// A list of tags, also JSON-encoded in a string (a spend-log row's `request_tags`); entries
    /// that are not strings are no tags.
    fn embedded_tags(&self, key: &str) -> Checked<Vec<String>> {
        let parsed;
        let values = match self.get(key) {
            None => return Ok(Vec::new()),
            Some(Value::Array(values)) => values,
            Some(Value::String(text)) => {
                parsed = serde_json::from_str::<Value>(text).map_err(|error| {
                    Invalid::new(
                        self.name(key),
                        format!("expected a JSON array, found a string that is not JSON ({error})"),
                    )
                })?;
                match &parsed {
                    Value::Array(values) => values,
                    Value::Null => return Ok(Vec::new()),
                    other => {
                        return Err(self.wrong_type(
                            key,
                            "a JSON array encoded as a string",
                            other,
                        ));
                    }
                }
            }
            Some(other) => return Err(self.wrong_type(key, "a JSON array", other)),
        };
        Ok(values
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect())
    }

    /// An object that may arrive JSON-encoded in a string, as LiteLLM publishes a spend-log
    /// row's `metadata`.
    fn embedded_object(&self, key: &str) -> Checked<Option<Cow<'a, Map<String, Value>>>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Object(map)) => Ok(Some(Cow::Borrowed(map))),
            Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(map)) => Ok(Some(Cow::Owned(map))),
                Ok(Value::Null) => Ok(None),
                Ok(other) => Err(self.wrong_type(key, "a JSON object encoded as a string", &other)),
                Err(error) => Err(Invalid::new(
                    self.name(key),
                    format!("expected a JSON object, found a string that is not JSON ({error})"),
                )),
            },
            Some(other) => Err(self.wrong_type(key, "a JSON object", other)),
        }
    }

    /// A label; empty strings are no label (LiteLLM writes `""` for an absent team), numbers and
    /// booleans are kept as written.
    fn label(&self, key: &str) -> Checked<Option<String>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.trim())
                .filter(|t| !t.is_empty())
                .map(String::from)),
            Some(value @ (Value::Number(_) | Value::Bool(_))) => Ok(Some(value.to_string())),
            Some(other) => Err(self.wrong_type(key, "a string", other)),
        }
    }

    /// A token count: a non-negative whole number, also as a string (OTLP/JSON writes 64-bit
    /// integers as strings) or as a float without fraction (as Python exporters may write it).
    fn tokens(&self, key: &str) -> Checked<Option<i64>> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        let count = match value {
            Value::Number(n) => n.as_i64().or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 2f64.powi(53))
                    .map(|f| f as i64)
            }),
            Value::String(text) => text.trim().parse::<i64>().ok(),
            _ => None,
        };
        match count {
            Some(count) if count >= 0 => Ok(Some(count)),
            Some(count) => Err(Invalid::new(
                self.name(key),
                format!("negative token count {count}"),
            )),
            None => Err(Invalid::new(
                self.name(key),
                format!("token count is not a whole number: {}", shown(value)),
            )),
        }
    }

    fn number(&self, key: &str) -> Checked<Option<f64>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(other) => Err(self.wrong_type(key, "a number", other)),
        }
    }

    /// A duration in milliseconds: a number from 0 to a day (a request no gateway times out within
    /// a day is no measurement, and no wait is negative).
    fn milliseconds(&self, key: &str) -> Checked<Option<f64>> {
        const DAY_MS: f64 = 86_400_000.0;
        match self.number(key)? {
            Some(ms) if !(0.0..=DAY_MS).contains(&ms) => Err(Invalid::new(
                self.name(key),
                format!("{ms} ms is not a duration from 0 to a day ({DAY_MS} ms)"),
            )),
            ms => Ok(ms),
        }
    }

    /// Boolean, or the strings LiteLLM stores: Python's `str(bool | None)`, `"True"`/`"False"`/`"None"`.
    fn cache_hit(&self, key: &str) -> Checked<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(hit)) => Ok(Some(*hit)),
            Some(Value::String(text)) => match text.trim().to_ascii_lowercase().as_str() {
                "true" => Ok(Some(true)),
                "false" => Ok(Some(false)),
                "none" | "null" | "" => Ok(None),
                _ => Err(Invalid::new(
                    self.name(key),
                    format!("expected true, false or none, found '{text}'"),
                )),
            },
            Some(other) => Err(self.wrong_type(key, "a boolean", other)),
        }
    }

    /// A request time: 1970 to 9999, like every time the lake keeps (a date it can partition by).
    fn time(&self, key: &str, tz: Tz) -> Checked<Option<DateTime<Utc>>> {
        self.get(key)
            .map(|value| {
                parse_time(value, tz)
                    .and_then(crate::time::landable)
                    .map_err(|reason| Invalid::new(self.name(key), reason))
            })
            .transpose()
    }

    /// Epoch nanoseconds, as OTLP writes span times (a string in proto3 JSON, or a number).
    fn unix_nanos(&self, key: &str) -> Checked<Option<DateTime<Utc>>> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        let nanos = match value {
            Value::Number(n) => n.as_i64(),
            Value::String(text) => text.trim().parse::<i64>().ok(),
            _ => None,
        };
        match nanos {
            Some(nanos) if nanos >= 0 => Ok(Some(DateTime::from_timestamp_nanos(nanos))),
            Some(nanos) => Err(Invalid::new(
                self.name(key),
                format!("{nanos} ns since the epoch is before 1970-01-01"),
            )),
            None => Err(Invalid::new(
                self.name(key),
                format!("expected epoch nanoseconds, found {}", shown(value)),
            )),
        }
    }

    fn wrong_type(&self, key: &str, expected: &str, found: &Value) -> Invalid {
        Invalid::new(
            self.name(key),
            format!("expected {expected}, found {}", kind(found)),
        )
    }
}

/// A time as gateways write it: RFC 3339; a naive date-time, read in `tz` (LiteLLM writes
/// `2025-01-24 09:20:46.847371`); or epoch seconds (StandardLoggingPayload times may be floats).
fn parse_time(value: &Value, tz: Tz) -> Result<DateTime<Utc>, String> {
    match value {
        Value::Number(n) => {
            // Epoch milliseconds or nanoseconds would land tens of millennia ahead: refuse them.
            let Some(seconds) = n.as_f64().filter(|seconds| seconds.abs() < 1e11) else {
                return Err(format!("epoch time {n} is not in seconds"));
            };
            DateTime::from_timestamp_micros((seconds * 1e6).round() as i64)
                .ok_or_else(|| format!("epoch time {n} is out of range"))
        }
        Value::String(text) => crate::time::parse(text.trim(), tz),
        other => Err(format!("expected a timestamp, found {}", kind(other))),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A scalar as written; containers by their kind only (they may be large).
fn shown(value: &Value) -> String {
    match value {
        Value::Array(_) | Value::Object(_) => kind(value).to_string(),
        scalar => scalar.to_string(),
    }
}

/// Rows on their way to the sink: deduplicated by request id within the input, counted, and
/// emitted every `batch_rows` rows.
struct Landing<'a> {
    sink: &'a mut dyn Sink,
    batch_rows: usize,
    rows: Vec<TokenRow>,
    landed_ids: HashSet<String>,
    stats: TokenStats,
}

impl<'a> Landing<'a> {
    fn new(sink: &'a mut dyn Sink, batch_rows: usize) -> Self {
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
    fn land(
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

    fn reject(&mut self, line: u64, invalid: Invalid, raw: &str) -> Result<(), IngestError> {
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

    fn finish(mut self) -> Result<TokenStats, IngestError> {
        self.flush()?;
        Ok(self.stats)
    }
}

fn to_batch(rows: &[TokenRow]) -> Result<RecordBatch, IngestError> {
    fn text(rows: &[TokenRow], column: impl Fn(&TokenRow) -> Option<&str>) -> ArrayRef {
        Arc::new(rows.iter().map(column).collect::<StringArray>())
    }
    fn count(rows: &[TokenRow], column: impl Fn(&TokenRow) -> Option<i64>) -> ArrayRef {
        Arc::new(rows.iter().map(column).collect::<Int64Array>())
    }
    fn float(rows: &[TokenRow], column: impl Fn(&TokenRow) -> Option<f64>) -> ArrayRef {
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
