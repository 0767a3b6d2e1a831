//! OpenTelemetry GenAI: flat attribute maps, and the spans of an OTLP/JSON traces export.

use chrono_tz::Tz;
use serde_json::{Map, Value};

use super::Source;
use super::fields::{Checked, Fields, Invalid};
use super::rows::TokenRow;
use super::usage::millis_between;

/// OpenTelemetry GenAI attributes, with current and deprecated names, plus the resource
/// attributes that place the caller in Kubernetes.
pub(super) fn otel_row(attributes: &Fields, tz: Tz) -> Checked<TokenRow> {
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

/// The spans of one resource of an OTLP/JSON traces export, each flattened into one attribute
/// map: its attributes, its `startTimeUnixNano`/`endTimeUnixNano` and `spanId`, and its status as
/// `otel.status_code` (the name OTel's non-OTLP exporters use), with the span as it was read.
/// The resource's attributes are read under each span's ([`Fields::layered`]), never copied into
/// them: an export's size bounds the memory, whatever the number of spans.
pub(super) struct OtlpResource<'a> {
    pub(super) attributes: Map<String, Value>,
    pub(super) spans: Vec<(Map<String, Value>, &'a Value)>,
}

pub(super) fn otlp_spans<'a>(export: &Fields<'a>) -> Checked<Vec<OtlpResource<'a>>> {
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
    let mut resources = Vec::new();
    for resource_span in resource_spans {
        let mut spans = Vec::new();
        for scope_span in children(resource_span, "scopeSpans") {
            for span in children(scope_span, "spans") {
                let mut flat = otlp_attributes(span.get("attributes"));
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
        resources.push(OtlpResource {
            attributes: otlp_attributes(resource_span.pointer("/resource/attributes")),
            spans,
        });
    }
    Ok(resources)
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
