//! LiteLLM spend logs: `LiteLLM_SpendLogs` rows and `StandardLoggingPayload`s.

use chrono_tz::Tz;

use super::Source;
use super::fields::{Checked, Fields};
use super::rows::TokenRow;
use super::usage::{millis_between, normalise_status, provider_usage, tag_value};

/// A `LiteLLM_SpendLogs` row (`request_id`, `spend`, `metadata` as a JSON-encoded string) or a
/// `StandardLoggingPayload` (`id`, `response_cost`, `metadata` as an object): one mapping, since
/// the two share most keys.
pub(super) fn litellm_row(record: &Fields, tz: Tz) -> Checked<TokenRow> {
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
