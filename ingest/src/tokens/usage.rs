//! What the row builders share: a provider `usage` object's counts in OpenAI's meaning, tags,
//! statuses and durations.

use chrono::{DateTime, Utc};

use super::fields::{Checked, Fields};

/// Token counts of a provider `usage` object, in OpenAI's meaning (input includes cached input,
/// output includes reasoning) whichever provider shape it has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct UsageCounts {
    pub(super) input: Option<i64>,
    pub(super) output: Option<i64>,
    pub(super) cached: Option<i64>,
    pub(super) reasoning: Option<i64>,
}

pub(super) fn provider_usage(usage: &Fields) -> Checked<UsageCounts> {
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
pub(super) fn tag_value(tags: &[String], key: &str) -> Option<String> {
    tags.iter().find_map(|tag| {
        let (name, value) = tag.split_once([':', '='])?;
        let value = value.trim();
        (name.trim() == key && !value.is_empty()).then(|| value.to_string())
    })
}

/// `success` and `failure` under their usual spellings; any other status as it was written.
pub(super) fn normalise_status(status: String) -> String {
    match status.to_ascii_lowercase().as_str() {
        "success" | "succeeded" | "ok" => "success".to_string(),
        "failure" | "failed" | "error" => "failure".to_string(),
        _ => status,
    }
}

pub(super) fn millis_between(from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    (to.timestamp_micros() - from.timestamp_micros()) as f64 / 1000.0
}
