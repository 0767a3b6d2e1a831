//! Canonical records: the product's own field names (`request_id`, `ts`, `input_tokens`, …).

use chrono_tz::Tz;

use super::Source;
use super::fields::{Checked, Fields};
use super::rows::TokenRow;
use super::usage::{UsageCounts, normalise_status, provider_usage};

pub(super) fn canonical_row(record: &Fields, tz: Tz) -> Checked<TokenRow> {
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
