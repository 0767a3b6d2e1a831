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
//!
//! One layer per file: the toolkit's `json_records` frames the input; `fields` reads one record
//! with checks; `canonical`, `litellm` and `otel` map each shape to a row, sharing `usage`;
//! `rows` de-duplicates and batches. This file recognises shapes and drives them.

use std::io::BufRead;

use chrono_tz::Tz;
use serde_json::{Map, Value};

use crate::error::IngestError;
use crate::json_records::JsonRecords;
use crate::record::{ParseContext, Sink};

mod canonical;
mod fields;
mod litellm;
mod otel;
mod rows;
#[cfg(test)]
mod tests;
mod usage;

use canonical::canonical_row;
use fields::{Fields, Invalid, kind};
use litellm::litellm_row;
use otel::{OtlpResource, otel_row, otlp_spans};
use rows::Landing;

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

/// Parses gateway usage records and emits `token_usage` batches of at most `ctx.limits.batch_rows` rows.
pub fn parse(
    input: &mut dyn BufRead,
    ctx: &ParseContext,
    sink: &mut dyn Sink,
) -> Result<TokenStats, IngestError> {
    let mut records = JsonRecords::new(input, &ctx.origin, "JSON gateway usage");
    let mut landing = Landing::new(sink, ctx.limits.batch_rows);
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
    resources: Vec<OtlpResource>,
    tz: Tz,
) -> Result<(), IngestError> {
    for resource in &resources {
        let resource_is_gen_ai = has_gen_ai_key(&resource.attributes);
        for (flat, span) in &resource.spans {
            if !(resource_is_gen_ai || has_gen_ai_key(flat)) {
                landing.stats.skipped_spans += 1;
                continue;
            }
            let row =
                otel_row(&Fields::layered(flat, &resource.attributes), tz).map_err(|invalid| {
                    let span_id = flat.get("spanId").and_then(Value::as_str).unwrap_or("?");
                    Invalid::new(invalid.field, format!("span {span_id}: {}", invalid.reason))
                });
            landing.land(line, row, || span.to_string())?;
        }
    }
    Ok(())
}

fn has_gen_ai_key(attributes: &Map<String, Value>) -> bool {
    attributes.keys().any(|key| key.starts_with(GEN_AI_PREFIX))
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
