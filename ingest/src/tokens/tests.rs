use std::io::Cursor;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{Float64Type, Int64Type, TimestampMicrosecondType};
use chrono::{DateTime, Utc};
use gpuledger_lake::tables::Table;

use super::rows::TokenRow;
use super::*;
use crate::record::{CollectSink, StrictSink};
use crate::testdata::shared_data;

fn context() -> ParseContext {
    ParseContext::new(
        "usage.jsonl",
        DateTime::from_timestamp(1_700_000_000, 0).unwrap(),
    )
}

fn context_in(tz: Tz) -> ParseContext {
    ParseContext { tz, ..context() }
}

fn run(input: &str, ctx: &ParseContext) -> (TokenStats, CollectSink) {
    let mut sink = CollectSink::default();
    let stats = parse(&mut Cursor::new(input.as_bytes()), ctx, &mut sink).expect("parses");
    (stats, sink)
}

fn run_file(relative: &str, ctx: &ParseContext) -> Option<(TokenStats, CollectSink)> {
    let text = std::fs::read_to_string(shared_data(relative)?).unwrap();
    Some(run(&text, ctx))
}

fn stats(records: u64, landed: u64, duplicates: u64, rejected: u64) -> TokenStats {
    TokenStats {
        records,
        landed,
        duplicates,
        rejected,
        skipped_spans: 0,
    }
}

fn utc(rfc3339: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(rfc3339).unwrap().to_utc()
}

/// A row with only its identity set; tests fill in the rest with struct update syntax.
fn row(ts: &str, request_id: &str, source: Source) -> TokenRow {
    TokenRow {
        ts: utc(ts),
        request_id: request_id.to_string(),
        team: None,
        environment: None,
        cost_center: None,
        namespace: None,
        workload: None,
        model: None,
        model_version: None,
        quantization: None,
        provider: None,
        priority: None,
        input_tokens: None,
        output_tokens: None,
        cached_tokens: None,
        reasoning_tokens: None,
        ttft_ms: None,
        latency_ms: None,
        status: None,
        cache_hit: None,
        gateway_cost: None,
        source,
    }
}

fn some(text: &str) -> Option<String> {
    Some(text.to_string())
}

/// Reads the landed `token_usage` rows back from the Arrow batches, so that every test also
/// checks the batch columns.
fn landed(sink: &CollectSink) -> Vec<TokenRow> {
    let batch = sink.table(Table::TokenUsage);
    let column = |name: &str| batch.column_by_name(name).unwrap();
    let text = |name: &str, i: usize| {
        let values = column(name).as_string::<i32>();
        values.is_valid(i).then(|| values.value(i).to_string())
    };
    let count = |name: &str, i: usize| {
        let values = column(name).as_primitive::<Int64Type>();
        values.is_valid(i).then(|| values.value(i))
    };
    let float = |name: &str, i: usize| {
        let values = column(name).as_primitive::<Float64Type>();
        values.is_valid(i).then(|| values.value(i))
    };
    let ts = column("ts").as_primitive::<TimestampMicrosecondType>();
    let cache_hit = column("cache_hit").as_boolean();
    (0..batch.num_rows())
        .map(|i| TokenRow {
            ts: DateTime::from_timestamp_micros(ts.value(i)).unwrap(),
            request_id: text("request_id", i).unwrap(),
            team: text("team", i),
            environment: text("environment", i),
            cost_center: text("cost_center", i),
            namespace: text("namespace", i),
            workload: text("workload", i),
            model: text("model", i),
            model_version: text("model_version", i),
            quantization: text("quantization", i),
            provider: text("provider", i),
            priority: text("priority", i),
            input_tokens: count("input_tokens", i),
            output_tokens: count("output_tokens", i),
            cached_tokens: count("cached_tokens", i),
            reasoning_tokens: count("reasoning_tokens", i),
            ttft_ms: float("ttft_ms", i),
            latency_ms: float("latency_ms", i),
            status: text("status", i),
            cache_hit: cache_hit.is_valid(i).then(|| cache_hit.value(i)),
            gateway_cost: float("gateway_cost", i),
            source: match text("source", i).unwrap().as_str() {
                "canonical" => Source::Canonical,
                "litellm" => Source::LiteLlm,
                "otel" => Source::Otel,
                other => panic!("unknown source {other}"),
            },
        })
        .collect()
}

fn request_ids(sink: &CollectSink) -> Vec<String> {
    landed(sink).into_iter().map(|row| row.request_id).collect()
}

// Both LiteLLM samples time the same request: startTime 09:20:46.847371, completionStartTime
// and endTime 09:20:46.851954, so TTFT = latency = 0.851954 − 0.847371 s = 0.004583 s = 4.583 ms.
const LITELLM_SAMPLE_MS: f64 = 4.583;

#[test]
fn litellm_spend_log_sample_lands_one_row() {
    let Some((stats, sink)) = run_file("litellm/spend_logs_payload.json", &context()) else {
        return;
    };
    assert_eq!(stats, self::stats(1, 1, 0, 0));
    assert_eq!(
        landed(&sink),
        vec![TokenRow {
            model: some("gpt-4o"),
            provider: some("openai"),
            input_tokens: Some(10),
            output_tokens: Some(20),
            ttft_ms: Some(LITELLM_SAMPLE_MS),
            latency_ms: Some(LITELLM_SAMPLE_MS),
            status: some("success"),
            // `cache_hit: "None"`, `team_id: ""` and null team keys in the metadata: all absent.
            cache_hit: None,
            team: None,
            gateway_cost: Some(0.00022500000000000002),
            ..row(
                "2025-01-24T09:20:46.847371Z",
                "chatcmpl-2283081b-dc89-41f6-93e6-d4f914774027",
                Source::LiteLlm,
            )
        }]
    );
}

#[test]
fn litellm_standard_logging_payload_sample_lands_one_row() {
    let Some((stats, sink)) = run_file("litellm/standard_logging_payload.json", &context()) else {
        return;
    };
    assert_eq!(stats, self::stats(1, 1, 0, 0));
    assert_eq!(
        landed(&sink),
        vec![TokenRow {
            model: some("gpt-4o"),
            provider: some("openai"),
            input_tokens: Some(10),
            output_tokens: Some(20),
            ttft_ms: Some(LITELLM_SAMPLE_MS),
            latency_ms: Some(LITELLM_SAMPLE_MS),
            status: some("success"),
            cache_hit: None,
            gateway_cost: Some(0.00022500000000000002),
            ..row(
                "2025-01-24T09:20:46.847371Z",
                "chatcmpl-2299b6a2-82a3-465a-b47c-04e685a2227f",
                Source::LiteLlm,
            )
        }]
    );
}

#[test]
fn litellm_naive_times_are_read_in_the_context_zone() {
    let Some((_, sink)) = run_file(
        "litellm/spend_logs_payload.json",
        &context_in(chrono_tz::America::New_York),
    ) else {
        return;
    };
    // 09:20:46.847371 in New York in January (EST, UTC−5) is 14:20:46.847371 UTC; the durations
    // do not change.
    let rows = landed(&sink);
    assert_eq!(rows[0].ts, utc("2025-01-24T14:20:46.847371Z"));
    assert_eq!(rows[0].ttft_ms, Some(LITELLM_SAMPLE_MS));
}

#[test]
fn litellm_spend_log_row_maps_team_cache_and_detailed_usage() {
    // One line, as `GET /spend/logs` or a Pub/Sub consumer would write it: metadata and
    // request_tags JSON-encoded, an Anthropic call normalised by LiteLLM to OpenAI's usage shape.
    let metadata = serde_json::json!({
        "user_api_key_team_id": "team-uuid-7",
        "user_api_key_team_alias": "search",
        "usage_object": {
            "prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500,
            "prompt_tokens_details": null, "cache_read_input_tokens": 1000,
            "completion_tokens_details": {"reasoning_tokens": 120}
        },
        "spend_logs_metadata": {"environment": "prod", "cost_center": "cc-42", "priority": "online"}
    });
    let line = serde_json::json!({
        "request_id": "req-1", "call_type": "acompletion", "cache_hit": "False",
        "startTime": "2025-02-01T10:00:00+01:00", "endTime": "2025-02-01T10:00:02.5+01:00",
        "completionStartTime": "2025-02-01T10:00:00.25+01:00",
        "model": "", "model_group": "claude-sonnet", "custom_llm_provider": "anthropic",
        "team_id": "ignored-when-metadata-names-the-team", "metadata": metadata.to_string(),
        "request_tags": "[\"batch\"]", "spend": 0.0123, "prompt_tokens": 1200,
        "completion_tokens": 300, "status": "Failure", "response": "{}"
    });
    let (stats, sink) = run(&line.to_string(), &context());
    assert_eq!(stats, self::stats(1, 1, 0, 0));
    assert_eq!(
        landed(&sink),
        vec![TokenRow {
            team: some("search"),
            environment: some("prod"),
            cost_center: some("cc-42"),
            priority: some("online"),
            // `model: ""`: the deployment is not known, so neither is the version.
            model: some("claude-sonnet"),
            provider: some("anthropic"),
            input_tokens: Some(1200),
            output_tokens: Some(300),
            cached_tokens: Some(1000),
            reasoning_tokens: Some(120),
            // 10:00:00.25 − 10:00:00 = 250 ms; 10:00:02.5 − 10:00:00 = 2500 ms.
            ttft_ms: Some(250.0),
            latency_ms: Some(2500.0),
            status: some("failure"),
            cache_hit: Some(false),
            gateway_cost: Some(0.0123),
            ..row("2025-02-01T09:00:00Z", "req-1", Source::LiteLlm)
        }]
    );
}

#[test]
fn litellm_logging_payload_with_epoch_times() {
    let line = r#"{"id": "chatcmpl-e", "call_type": "completion", "startTime": 1737710446.847371, "completionStartTime": 1737710446.9, "endTime": 1737710447.5, "model": "gpt-4o-mini", "metadata": {"user_api_key_team_alias": null, "user_api_key_team_id": "team-7"}, "cache_hit": true, "response_cost": 0.5, "prompt_tokens": 7, "completion_tokens": 3, "status": "success", "response": {"usage": {"prompt_tokens": 7, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 4}}}}"#;
    let (_, sink) = run(line, &context());
    assert_eq!(
        landed(&sink),
        vec![TokenRow {
            team: some("team-7"),
            model: some("gpt-4o-mini"),
            input_tokens: Some(7),
            output_tokens: Some(3),
            cached_tokens: Some(4),
            // 1737710446.9 − 1737710446.847371 s = 52 629 µs; 1737710447.5 − … = 652 629 µs.
            ttft_ms: Some(52.629),
            latency_ms: Some(652.629),
            status: some("success"),
            cache_hit: Some(true),
            gateway_cost: Some(0.5),
            ..row("2025-01-24T09:20:46.847371Z", "chatcmpl-e", Source::LiteLlm)
        }]
    );
}

#[test]
fn litellm_model_group_is_the_model_and_the_routed_deployment_its_version() {
    // A spend-log row whose build is named in `spend_logs_metadata`, a logging payload whose
    // quantization comes from a `key:value` request tag, and one tagged in its request metadata.
    let spend_log = serde_json::json!({
        "request_id": "lg-1", "call_type": "acompletion", "startTime": "2026-11-02 09:00:00",
        "model": "hosted_vllm/llama-3-8b-fp8", "model_group": "llama-3-8b",
        "request_tags": "[\"team:nlp\", \"quantization:fp8\"]",
        "metadata": serde_json::json!({
            "spend_logs_metadata": {"model_version": "llama-3-8b-fp8-2026-11", "quantization": "FP8-dynamic"}
        }).to_string(),
    });
    let tagged = serde_json::json!({
        "id": "lg-2", "call_type": "acompletion", "startTime": "2026-11-02 09:00:01",
        "model": "hosted_vllm/llama-3-8b-fp8", "model_group": "llama-3-8b",
        "request_tags": ["quantization: fp8", 7], "metadata": {"spend_logs_metadata": null},
    });
    let in_metadata = serde_json::json!({
        "id": "lg-3", "call_type": "acompletion", "startTime": "2026-11-02 09:00:02",
        "model": "llama-3-8b", "model_group": "", "request_tags": "[]",
        "metadata": {"tags": ["quantization=bf16"]},
    });
    let input = format!("{spend_log}\n{tagged}\n{in_metadata}\n");
    let (stats, sink) = run(&input, &context());
    assert_eq!(stats, self::stats(3, 3, 0, 0));
    let builds: Vec<_> = landed(&sink)
        .into_iter()
        .map(|r| (r.model, r.model_version, r.quantization))
        .collect();
    assert_eq!(
        builds,
        [
            // The metadata's own fields win over tags and the deployment name.
            (
                some("llama-3-8b"),
                some("llama-3-8b-fp8-2026-11"),
                some("FP8-dynamic")
            ),
            // No version in the metadata: the deployment the group was routed to.
            (
                some("llama-3-8b"),
                some("hosted_vllm/llama-3-8b-fp8"),
                some("fp8")
            ),
            // No group: `model` is the model, and nothing names a version.
            (some("llama-3-8b"), None, some("bf16")),
        ]
    );
}

#[test]
fn malformed_litellm_request_tags_are_rejected_by_their_path() {
    let input = r#"{"request_id": "t1", "startTime": "2025-01-24 09:20:46", "request_tags": "[oops"}
{"request_id": "t2", "startTime": "2025-01-24 09:20:46", "request_tags": {"quantization": "fp8"}}
"#;
    let (stats, sink) = run(input, &context());
    assert_eq!(stats, self::stats(2, 0, 0, 2));
    let at: Vec<_> = sink
        .rejected()
        .into_iter()
        .map(|(line, field, reason)| (line, field, reason.split(" (").next().unwrap()))
        .collect();
    assert_eq!(
        at,
        [
            (
                1,
                "request_tags",
                "expected a JSON array, found a string that is not JSON"
            ),
            (2, "request_tags", "expected a JSON array, found an object"),
        ]
    );
}

#[test]
fn malformed_nested_fields_are_rejected_by_their_path() {
    let input = r#"{"request_id": "m1", "startTime": "2025-01-24 09:20:46", "metadata": "{oops"}
{"request_id": "m2", "startTime": "2025-01-24 09:20:46", "metadata": "{\"usage_object\": {\"prompt_tokens\": 5, \"prompt_tokens_details\": {\"cached_tokens\": -1}}}"}
{"id": "m3", "call_type": "completion", "startTime": 1737710446847}
{"resourceSpans": {}}
"#;
    let (stats, sink) = run(input, &context());
    assert_eq!(stats, self::stats(4, 0, 0, 4));
    assert_eq!(
        sink.rejected(),
        [
            (
                1,
                "metadata",
                "expected a JSON object, found a string that is not JSON (key must be a string \
                 at line 1 column 2)"
            ),
            (
                2,
                "metadata.usage_object.prompt_tokens_details.cached_tokens",
                "negative token count -1"
            ),
            // Epoch milliseconds, not seconds.
            (3, "startTime", "epoch time 1737710446847 is not in seconds"),
            (4, "resourceSpans", "expected an array of resource spans"),
        ]
    );
}

const CANONICAL: &str = r#"{"ts": "2025-03-01T12:00:00Z", "request_id": "r1", "team": "search", "namespace": "llm", "workload": "vllm-llama", "model": "llama-3-70b", "model_version": "llama-3-70b-instruct-awq", "quantization": "awq", "priority": "online", "input_tokens": 512, "output_tokens": 128, "cached_tokens": 256, "ttft_ms": 180.5, "latency_ms": 2400.0, "status": "SUCCESS", "cache_hit": false, "environment": "prod", "cost_center": "cc-1", "provider": "self-hosted", "reasoning_tokens": 0}"#;

#[test]
fn canonical_record_lands_every_column() {
    let (stats, sink) = run(CANONICAL, &context());
    assert_eq!(stats, self::stats(1, 1, 0, 0));
    assert_eq!(
        landed(&sink),
        vec![TokenRow {
            team: some("search"),
            environment: some("prod"),
            cost_center: some("cc-1"),
            namespace: some("llm"),
            workload: some("vllm-llama"),
            model: some("llama-3-70b"),
            model_version: some("llama-3-70b-instruct-awq"),
            quantization: some("awq"),
            provider: some("self-hosted"),
            priority: some("online"),
            input_tokens: Some(512),
            output_tokens: Some(128),
            cached_tokens: Some(256),
            reasoning_tokens: Some(0),
            ttft_ms: Some(180.5),
            latency_ms: Some(2400.0),
            status: some("success"),
            cache_hit: Some(false),
            ..row("2025-03-01T12:00:00Z", "r1", Source::Canonical)
        }]
    );
}

#[test]
fn duplicate_request_ids_count_once_and_the_first_is_kept() {
    let input = "\
{\"ts\": \"2025-03-01T12:00:00Z\", \"request_id\": \"a\", \"input_tokens\": 1, \"output_tokens\": 1}
{\"ts\": \"2025-03-01T12:00:01Z\", \"request_id\": \"b\", \"input_tokens\": 2, \"output_tokens\": 2}
{\"ts\": \"2025-03-01T12:00:02Z\", \"request_id\": \"a\", \"input_tokens\": 99, \"output_tokens\": 99}
{\"ts\": \"2025-03-01T12:00:03Z\", \"request_id\": \"a\", \"input_tokens\": 98, \"output_tokens\": 98}
";
    let (stats, sink) = run(input, &context());
    assert_eq!(stats, self::stats(4, 2, 2, 0));
    assert!(sink.rejections.is_empty());
    let rows = landed(&sink);
    assert_eq!(request_ids(&sink), ["a", "b"]);
    assert_eq!(rows[0].input_tokens, Some(1));
}

#[test]
fn a_rejected_record_does_not_claim_its_request_id() {
    let input = "\
{\"ts\": \"2025-03-01T12:00:00Z\", \"request_id\": \"a\", \"input_tokens\": -1}
{\"ts\": \"2025-03-01T12:00:01Z\", \"request_id\": \"a\", \"input_tokens\": 5}
";
    let (stats, sink) = run(input, &context());
    assert_eq!(stats, self::stats(2, 1, 0, 1));
    assert_eq!(landed(&sink)[0].input_tokens, Some(5));
}

#[test]
fn bad_lines_are_rejected_with_their_line_and_field_while_the_rest_lands() {
    let input = "\
{\"ts\": \"2025-03-01T12:00:00Z\", \"request_id\": \"ok-1\", \"input_tokens\": 10}

{\"ts\": \"2025-03-01T12:00:00Z\", \"request_id\": \"neg\", \"input_tokens\": -3}
{\"ts\": \"2025-03-01T12:00:00Z\", \"input_tokens\": 3}
{\"ts\": \"2025-03-01T12:00:00Z\", \"request_id\": \"trunc\", \"input_tok
{\"ts\": \"2025-03-01T12:00:00Z\", \"request_id\": \"frac\", \"output_tokens\": 10.5}
{\"ts\": \"2025-03-01T12:00:00Z\", \"request_id\": \"word\", \"cached_tokens\": \"many\"}
{\"request_id\": \"no-time\", \"input_tokens\": 3}
{\"ts\": \"yesterday\", \"request_id\": \"bad-time\"}
[1, 2]
{\"ts\": \"2025-03-01T12:00:00Z\", \"request_id\": \"hit\", \"cache_hit\": \"maybe\"}
{\"ts\": \"2025-03-01T12:00:00Z\", \"request_id\": \"ok-2\", \"output_tokens\": 7.0, \"input_tokens\": \"8\"}
";
    let (stats, sink) = run(input, &context());
    assert_eq!(stats, self::stats(11, 2, 0, 9));
    assert_eq!(request_ids(&sink), ["ok-1", "ok-2"]);
    // Whole floats and digit strings are whole numbers of tokens.
    let ok_2 = &landed(&sink)[1];
    assert_eq!((ok_2.input_tokens, ok_2.output_tokens), (Some(8), Some(7)));
    assert_eq!(
        sink.rejected(),
        [
            (3, "input_tokens", "negative token count -3"),
            (4, "request_id", "missing request id"),
            (
                5,
                "(record)",
                "invalid JSON at line 5 column 64: EOF while parsing a string"
            ),
            (
                6,
                "output_tokens",
                "token count is not a whole number: 10.5"
            ),
            (
                7,
                "cached_tokens",
                "token count is not a whole number: \"many\""
            ),
            (8, "ts", "missing request time"),
            (
                9,
                "ts",
                "'yesterday' is not a timestamp (expected RFC 3339 such as 2025-01-24T09:20:46Z, \
                 or YYYY-MM-DDTHH:MM:SS in the input's time zone)"
            ),
            (10, "(record)", "expected a JSON object, found an array"),
            (
                11,
                "cache_hit",
                "expected true, false or none, found 'maybe'"
            ),
        ]
    );
    assert_eq!(sink.rejections[0].raw, input.lines().nth(2).unwrap());
}

#[test]
fn status_and_cache_hit_are_normalised() {
    let input = "\
{\"ts\": \"2025-03-01T12:00:00Z\", \"request_id\": \"1\", \"status\": \"ERROR\", \"cache_hit\": \"True\"}
{\"ts\": \"2025-03-01T12:00:00Z\", \"request_id\": \"2\", \"status\": \"ok\", \"cache_hit\": \"None\"}
{\"ts\": \"2025-03-01T12:00:00Z\", \"request_id\": \"3\", \"status\": \"Timeout\", \"cache_hit\": null}
{\"ts\": \"2025-03-01T12:00:00Z\", \"request_id\": \"4\", \"status\": \"failure\", \"cache_hit\": true}
";
    let (_, sink) = run(input, &context());
    let got: Vec<_> = landed(&sink)
        .into_iter()
        .map(|row| (row.status, row.cache_hit))
        .collect();
    assert_eq!(
        got,
        [
            (some("failure"), Some(true)),
            (some("success"), None),
            (some("Timeout"), None),
            (some("failure"), Some(true)),
        ]
    );
}

#[test]
fn naive_canonical_times_are_read_in_the_context_zone() {
    let input = "\
{\"ts\": \"2025-07-01T14:30:00\", \"request_id\": \"summer\"}
{\"ts\": \"2025-01-15 14:30:00.250\", \"request_id\": \"winter\"}
{\"ts\": \"2025-07-01T14:30:00Z\", \"request_id\": \"zoned\"}
{\"ts\": \"2025-03-30T02:30:00\", \"request_id\": \"gap\"}
";
    let (stats, sink) = run(input, &context_in(chrono_tz::Europe::Berlin));
    assert_eq!(stats, self::stats(4, 3, 0, 1));
    let times: Vec<_> = landed(&sink).into_iter().map(|row| row.ts).collect();
    assert_eq!(
        times,
        [
            utc("2025-07-01T12:30:00Z"),    // CEST, UTC+2
            utc("2025-01-15T13:30:00.25Z"), // CET, UTC+1
            utc("2025-07-01T14:30:00Z"),    // an explicit zone wins over the context's
        ]
    );
    // Berlin clocks jumped from 02:00 to 03:00 on 2025-03-30.
    assert_eq!(
        sink.rejected(),
        [(
            4,
            "ts",
            "'2025-03-30T02:30:00' does not exist in time zone Europe/Berlin (clocks jumped \
             forward): is Europe/Berlin the time zone the input was written in?"
        )]
    );
}

#[test]
fn batches_are_split_at_batch_rows() {
    let input: String = (0..5)
        .map(|i| format!("{{\"ts\": \"2025-03-01T12:00:0{i}Z\", \"request_id\": \"r{i}\"}}\n"))
        .collect();
    let mut ctx = context();
    ctx.limits.batch_rows = 2;
    let (stats, sink) = run(&input, &ctx);
    assert_eq!(stats.landed, 5);
    let sizes: Vec<_> = sink
        .batches
        .iter()
        .map(|(_, batch)| batch.num_rows())
        .collect();
    assert_eq!(sizes, [2, 2, 1]);
    assert!(
        sink.batches
            .iter()
            .all(|(table, _)| *table == Table::TokenUsage)
    );
    assert_eq!(request_ids(&sink), ["r0", "r1", "r2", "r3", "r4"]);
}

#[test]
fn otel_flat_attributes_with_current_and_deprecated_names() {
    let input = r#"{"time": "2025-03-10T12:00:00Z", "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o", "gen_ai.response.model": "gpt-4o-2024-08-06", "gen_ai.response.id": "chatcmpl-new", "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 40, "gen_ai.usage.cache_read.input_tokens": 64, "gen_ai.usage.reasoning.output_tokens": 12, "k8s.namespace.name": "chat", "service.name": "assistant-api", "deployment.environment.name": "staging"}
{"timestamp": "2025-03-10T12:00:05Z", "gen_ai.system": "anthropic", "gen_ai.request.model": "claude-3-5-sonnet", "gen_ai.response.id": "msg_old", "gen_ai.usage.prompt_tokens": 20, "gen_ai.usage.completion_tokens": 8, "error.type": "timeout"}
{"time": "2025-03-10T12:00:09Z", "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 1}
"#;
    let (stats, sink) = run(input, &context());
    assert_eq!(stats, self::stats(3, 2, 0, 1));
    assert_eq!(
        landed(&sink),
        vec![
            TokenRow {
                environment: some("staging"),
                namespace: some("chat"),
                workload: some("assistant-api"),
                // Asked for gpt-4o; gpt-4o-2024-08-06 answered.
                model: some("gpt-4o"),
                model_version: some("gpt-4o-2024-08-06"),
                provider: some("openai"),
                input_tokens: Some(100),
                output_tokens: Some(40),
                cached_tokens: Some(64),
                reasoning_tokens: Some(12),
                status: some("success"),
                ..row("2025-03-10T12:00:00Z", "chatcmpl-new", Source::Otel)
            },
            TokenRow {
                model: some("claude-3-5-sonnet"),
                provider: some("anthropic"),
                input_tokens: Some(20),
                output_tokens: Some(8),
                status: some("failure"),
                ..row("2025-03-10T12:00:05Z", "msg_old", Source::Otel)
            },
        ]
    );
    assert_eq!(
        sink.rejected(),
        [(3, "gen_ai.response.id", "missing request id")]
    );
}

/// An OTLP/JSON traces export as the collector's file exporter or `otlphttp` writes it: a GenAI
/// span with 64-bit integers as strings, a failed one with a numeric status code, an HTTP span
/// with no GenAI attribute, and a GenAI span with a negative count.
const OTLP_EXPORT: &str = r#"{
  "resourceSpans": [
    {
      "resource": {
        "attributes": [
          {"key": "service.name", "value": {"stringValue": "rag-api"}},
          {"key": "k8s.namespace.name", "value": {"stringValue": "search"}},
          {"key": "k8s.deployment.name", "value": {"stringValue": "rag-api-v2"}}
        ]
      },
      "scopeSpans": [
        {
          "scope": {"name": "opentelemetry.instrumentation.openai_v2"},
          "spans": [
            {
              "traceId": "5b8efff798038103d269b633813fc60c",
              "spanId": "eee19b7ec3c1b174",
              "name": "chat gpt-4o",
              "startTimeUnixNano": "1741608000000000000",
              "endTimeUnixNano": "1741608001250000000",
              "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                {"key": "gen_ai.system", "value": {"stringValue": "openai"}},
                {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o"}},
                {"key": "gen_ai.response.id", "value": {"stringValue": "chatcmpl-otlp-1"}},
                {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "1500"}},
                {"key": "gen_ai.usage.output_tokens", "value": {"intValue": 250}},
                {"key": "gen_ai.response.finish_reasons", "value": {"arrayValue": {"values": [{"stringValue": "stop"}]}}}
              ],
              "status": {}
            },
            {
              "traceId": "5b8efff798038103d269b633813fc60c",
              "spanId": "aaa19b7ec3c1b175",
              "name": "chat gpt-4o",
              "startTimeUnixNano": "1741608002000000000",
              "endTimeUnixNano": "1741608002500000000",
              "attributes": [
                {"key": "gen_ai.provider.name", "value": {"stringValue": "azure.ai.openai"}},
                {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o"}},
                {"key": "gen_ai.response.id", "value": {"stringValue": "chatcmpl-otlp-2"}},
                {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "30"}},
                {"key": "k8s.namespace.name", "value": {"stringValue": "search-canary"}}
              ],
              "status": {"code": 2, "message": "rate limited"}
            },
            {
              "traceId": "5b8efff798038103d269b633813fc60c",
              "spanId": "bbb19b7ec3c1b176",
              "name": "POST /v1/answer",
              "startTimeUnixNano": "1741607999000000000",
              "endTimeUnixNano": "1741608003000000000",
              "attributes": [{"key": "http.request.method", "value": {"stringValue": "POST"}}]
            },
            {
              "spanId": "ccc19b7ec3c1b177",
              "startTimeUnixNano": "1741608004000000000",
              "attributes": [
                {"key": "gen_ai.response.id", "value": {"stringValue": "chatcmpl-otlp-3"}},
                {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "-2"}}
              ]
            }
          ]
        }
      ]
    }
  ]
}
"#;

/// A resource's attributes are read under each of its spans, not copied into each: an export
/// of 120,000 empty spans under a 600 KB resource (under 1 MiB on one line) held 72 GB. The
/// resource's attributes are kept once, outside the spans'; each span is read with the
/// resource's `gen_ai.system`, and rejected for its missing id.
#[test]
fn an_exports_resource_is_shared_by_its_spans_not_copied() {
    let padding = "x".repeat(600_000);
    let small = format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[{{"key":"padding","value":{{"stringValue":"{padding}"}}}}]}},"scopeSpans":[{{"spans":[{{}},{{}}]}}]}}]}}"#
    );
    let small: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&small).unwrap();
    let resources = super::otel::otlp_spans(&Fields::root(&small)).unwrap();
    assert_eq!(resources.len(), 1);
    assert_eq!(
        resources[0].attributes["padding"].as_str().map(str::len),
        Some(600_000)
    );
    assert!(resources[0].spans.iter().all(|(span, _)| span.is_empty()));

    let spans = vec!["{}"; 120_000].join(",");
    let export = format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[{{"key":"padding","value":{{"stringValue":"{padding}"}}}},{{"key":"gen_ai.system","value":{{"stringValue":"openai"}}}}]}},"scopeSpans":[{{"spans":[{spans}]}}]}}]}}"#
    );
    assert!(export.len() < 1 << 20, "{} bytes", export.len());
    let (stats, sink) = run(&export, &context());
    assert_eq!(stats, self::stats(120_000, 0, 0, 120_000));
    assert_eq!(
        sink.rejected()[0],
        (1, "gen_ai.response.id", "span ?: missing request id")
    );
    assert_eq!(sink.rejections[0].raw, "{}");
}

#[test]
fn otlp_json_export_lands_its_genai_spans() {
    let (stats, sink) = run(OTLP_EXPORT, &context());
    assert_eq!(
        stats,
        TokenStats {
            skipped_spans: 1,
            ..self::stats(3, 2, 0, 1)
        }
    );
    let resource = |ts, id| TokenRow {
        namespace: some("search"),
        workload: some("rag-api-v2"),
        model: some("gpt-4o"),
        ..row(ts, id, Source::Otel)
    };
    assert_eq!(
        landed(&sink),
        vec![
            TokenRow {
                provider: some("openai"),
                input_tokens: Some(1500),
                output_tokens: Some(250),
                // 1741608001.25 s − 1741608000 s
                latency_ms: Some(1250.0),
                status: some("success"),
                ..resource("2025-03-10T12:00:00Z", "chatcmpl-otlp-1")
            },
            TokenRow {
                // A span attribute wins over the resource's.
                namespace: some("search-canary"),
                provider: some("azure.ai.openai"),
                input_tokens: Some(30),
                latency_ms: Some(500.0),
                status: some("failure"),
                ..resource("2025-03-10T12:00:02Z", "chatcmpl-otlp-2")
            },
        ]
    );
    // Every span of the export has the line where the export starts.
    assert_eq!(
        sink.rejected(),
        [(
            1,
            "gen_ai.usage.output_tokens",
            "span ccc19b7ec3c1b177: negative token count -2"
        )]
    );
    assert!(sink.rejections[0].raw.starts_with(r#"{"attributes":"#));
}

#[test]
fn otlp_exports_as_json_lines() {
    // The collector's file exporter writes one export request per line.
    let compact: Value = serde_json::from_str(OTLP_EXPORT).unwrap();
    let input = format!("{compact}\n{compact}\n");
    let (stats, sink) = run(&input, &context());
    // The second export repeats the first: its requests are duplicates.
    assert_eq!(
        stats,
        TokenStats {
            skipped_spans: 2,
            ..self::stats(6, 2, 2, 2)
        }
    );
    assert_eq!(sink.rejected()[1].0, 2);
}

#[test]
fn pretty_printed_array_of_records_with_line_numbers() {
    let input = r#"[
  {
    "ts": "2025-03-01T12:00:00Z",
    "request_id": "arr-1",
    "note": "brackets ] and } and \" inside strings do not split records"
  },
  {"request_id": "arr-2", "ts": "2025-03-01T12:00:01Z"}, {"request_id": "arr-3", "ts": "later"},
  {
    "ts": "2025-03-01T12:00:02Z",
    "input_tokens": 4
  },
  {"startTime": "2025-01-24 09:20:46", "request_id": "arr-5", "prompt_tokens": 2}
]
"#;
    let (stats, sink) = run(input, &context());
    assert_eq!(stats, self::stats(5, 3, 0, 2));
    assert_eq!(request_ids(&sink), ["arr-1", "arr-2", "arr-5"]);
    assert_eq!(landed(&sink)[2].source, Source::LiteLlm);
    let at: Vec<_> = sink
        .rejected()
        .into_iter()
        .map(|(line, field, _)| (line, field))
        .collect();
    assert_eq!(at, [(7, "ts"), (8, "request_id")]);
}

#[test]
fn concatenated_pretty_documents_and_a_truncated_one() {
    let input = "{\n  \"ts\": \"2025-03-01T12:00:00Z\",\n  \"request_id\": \"doc-1\"\n}\n\
                 {\n  \"ts\": \"2025-03-01T12:00:01Z\",\n  \"request_id\": \"doc-2\"\n}\n\
                 {\n  \"ts\": \"2025-03-01T12:00:02Z\",\n  \"request_id\": \n";
    let (stats, sink) = run(input, &context());
    assert_eq!(stats, self::stats(3, 2, 0, 1));
    assert_eq!(request_ids(&sink), ["doc-1", "doc-2"]);
    assert_eq!(
        sink.rejected(),
        [(
            9,
            "(record)",
            "invalid JSON at line 12 column 0: EOF while parsing a value"
        )]
    );
}

/// The `usage` blocks of APISIX's provider fixtures, carried by canonical records:
/// (fixture, input, output, cached, reasoning).
#[test]
fn canonical_records_map_provider_usage_objects() {
    let cases: [(&str, [Option<i64>; 4]); 10] = [
        ("openai/chat-basic.json", [Some(23), Some(8), None, None]),
        (
            "openai/chat-with-reasoning.json",
            [Some(30), Some(15), Some(10), None],
        ),
        ("openai/null-details.json", [Some(10), Some(5), None, None]),
        ("openai/null-usage.json", [None, None, None, None]),
        (
            "openai/responses-basic.json",
            [Some(10), Some(5), None, None],
        ),
        (
            "openai/responses-with-cache.json",
            [Some(40), Some(20), Some(12), Some(8)],
        ),
        (
            "anthropic/messages-basic.json",
            [Some(10), Some(8), None, None],
        ),
        // Anthropic's input excludes the cache: 50 + 200 read + 100 written.
        (
            "anthropic/messages-with-cache.json",
            [Some(350), Some(30), Some(200), None],
        ),
        (
            "bedrock/converse-basic.json",
            [Some(13), Some(5), None, None],
        ),
        // The final chunk of a stream with `include_usage`.
        (
            "openai/chat-streaming-with-cache.sse",
            [Some(30), Some(15), Some(10), Some(7)],
        ),
    ];
    for (fixture, expected) in cases {
        let Some(path) = shared_data(&format!("apisix-ai-fixtures/{fixture}")) else {
            return;
        };
        let text = std::fs::read_to_string(path).unwrap();
        let usage = if fixture.ends_with(".sse") {
            text.lines()
                .filter_map(|line| line.strip_prefix("data: "))
                .filter_map(|data| serde_json::from_str::<Value>(data).ok())
                .map(|chunk| chunk["usage"].clone())
                .rfind(|usage| !usage.is_null())
                .unwrap()
        } else {
            serde_json::from_str::<Value>(&text).unwrap()["usage"].clone()
        };
        let record = serde_json::json!({"ts": "2025-03-01T12:00:00Z", "request_id": fixture, "usage": usage});
        let (stats, sink) = run(&record.to_string(), &context());
        assert_eq!(stats.landed, 1, "{fixture}");
        let row = &landed(&sink)[0];
        let got = [
            row.input_tokens,
            row.output_tokens,
            row.cached_tokens,
            row.reasoning_tokens,
        ];
        assert_eq!(got, expected, "{fixture}");
    }
}

#[test]
fn explicit_token_fields_win_over_the_usage_object() {
    let line = r#"{"ts": "2025-03-01T12:00:00Z", "request_id": "x", "input_tokens": 9, "usage": {"prompt_tokens": 30, "completion_tokens": 15}}"#;
    let (_, sink) = run(line, &context());
    let row = &landed(&sink)[0];
    assert_eq!((row.input_tokens, row.output_tokens), (Some(9), Some(15)));
}

#[test]
fn input_that_is_not_json_is_a_format_error() {
    let mut sink = CollectSink::default();
    let error = parse(
        &mut Cursor::new("\n\nts,request_id\n1,2\n"),
        &context(),
        &mut sink,
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "usage.jsonl: not JSON gateway usage: expected JSON lines, a JSON document or a JSON \
         array, found 'ts,request_id' at line 3"
    );
}

#[test]
fn json_of_another_kind_is_a_format_error() {
    let mut sink = CollectSink::default();
    let input = r#"{"kind": "Pod", "metadata": {"name": "trainer-0"}}"#;
    let error = parse(&mut Cursor::new(input), &context(), &mut sink).unwrap_err();
    assert!(matches!(error, IngestError::Format { .. }), "{error}");
    assert!(
        error
            .to_string()
            .contains("the record at line 1 has keys kind, metadata"),
        "{error}"
    );
    assert!(sink.batches.is_empty() && sink.rejections.is_empty());
}

#[test]
fn empty_input_lands_nothing() {
    let (stats, sink) = run("\n  \n", &context());
    assert_eq!(stats, TokenStats::default());
    assert!(sink.batches.is_empty());
}

#[test]
fn a_failing_sink_stops_the_parse() {
    let input = format!("{CANONICAL}\n{{\"ts\": \"2025-03-01T12:00:00Z\"}}\n{CANONICAL}\n");
    let error = parse(&mut Cursor::new(input), &context(), &mut StrictSink).unwrap_err();
    assert!(
        matches!(error, IngestError::Strict { line: 2, .. }),
        "{error}"
    );
}
