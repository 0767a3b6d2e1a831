//! Gateway token usage through the real binary.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, StringArray, TimestampMicrosecondArray};
use gpuledger_lake::tables::{Table, batch_with_columns};
use gpuledger_lake::{Lake, LakeConfig};
use serde_json::json;

use crate::support::{Ledger, commit_without_columns, ledgers, shared};

#[test]
fn litellm_payloads_land_and_a_request_counts_once_across_files() {
    let (Some(spend_log), Some(standard)) = (
        shared("litellm/spend_logs_payload.json"),
        shared("litellm/standard_logging_payload.json"),
    ) else {
        return;
    };
    for ledger in ledgers() {
        ledger.ingest_ok("tokens", &spend_log, &[]);
        ledger.ingest_ok("tokens", &standard, &[]);
        let rows =
            ledger.sql("select source, model, request_id from token_usage order by request_id");
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert!(rows.iter().all(|r| r["source"] == "litellm"));
        assert_eq!(
            rows[0]["request_id"],
            "chatcmpl-2283081b-dc89-41f6-93e6-d4f914774027"
        );

        // The same request delivered again in another file (here as a canonical line) lands nothing new.
        let again = ledger.dir.path().join("again.jsonl");
        std::fs::write(
            &again,
            "{\"ts\":\"2025-01-24T09:20:46.847371Z\",\"request_id\":\"chatcmpl-2283081b-dc89-41f6-93e6-d4f914774027\",\"model\":\"gpt-4o\",\"input_tokens\":1,\"output_tokens\":1}\n\
             {\"ts\":\"2025-01-24T09:21:00Z\",\"request_id\":\"req-new\",\"model\":\"gpt-4o\",\"input_tokens\":10,\"output_tokens\":20}\n",
        )
        .unwrap();
        let out = ledger.ingest_ok("tokens", &again, &[]);
        assert!(out.contains("1 requests were already in the lake"), "{out}");
        assert_eq!(ledger.scalar("select count(*) from token_usage"), 3);
        assert_eq!(
            ledger.scalar("select count(distinct request_id) from token_usage"),
            3
        );
    }
}

/// `model_version` and `quantization` joined `token_usage` after files had been written without
/// them: such a file still reads, its rows with NULL in both, beside files that have them.
#[test]
fn files_written_before_model_version_and_quantization_read_them_as_null() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for ledger in ledgers() {
        let new = ledger.dir.path().join("new.jsonl");
        std::fs::write(
            &new,
            r#"{"ts": "2026-11-02T10:00:00Z", "request_id": "new", "model": "llama-3-8b", "model_version": "llama-3-8b-instruct-fp8", "quantization": "fp8", "input_tokens": 600, "output_tokens": 300, "status": "success"}"#,
        )
        .unwrap();
        ledger.ingest_ok("tokens", &new, &[]);
        runtime.block_on(land_file_without_the_build_columns(&ledger));

        let rows = ledger.sql(
            "select request_id, model, model_version, quantization, output_tokens from token_usage \
             order by request_id",
        );
        assert_eq!(
            rows,
            [
                json!({"request_id": "new", "model": "llama-3-8b",
                       "model_version": "llama-3-8b-instruct-fp8", "quantization": "fp8",
                       "output_tokens": 300}),
                json!({"request_id": "old", "model": "llama-3-8b", "model_version": null,
                       "quantization": null, "output_tokens": 1500}),
            ],
            "[{}]",
            ledger.backend
        );
        // Filters on the missing columns see NULL too.
        assert_eq!(
            ledger.scalar("select count(*) from token_usage where quantization is null"),
            1
        );
        // unit_economics keeps the old request apart: no build known, output bucket 1k-4k
        // (1500 tokens) against the fp8 request's 256-1k (300). Fp8 sorts first, NULL last.
        let rows = ledger.sql(
            "select model, model_version, quantization, output_bucket, requests \
             from unit_economics('2026-11-02', '2026-11-03') order by quantization",
        );
        assert_eq!(
            rows,
            [
                json!({"model": "llama-3-8b", "model_version": "llama-3-8b-instruct-fp8",
                       "quantization": "fp8", "output_bucket": "256-1k", "requests": 1}),
                json!({"model": "llama-3-8b", "model_version": null, "quantization": null,
                       "output_bucket": "1k-4k", "requests": 1}),
            ],
            "[{}]",
            ledger.backend
        );
    }
}

/// Lands request `old` (2026-11-02 09:00, llama-3-8b, 100 + 1500 tokens) as a Parquet file with
/// `token_usage`'s schema before `model_version` and `quantization`, written and committed as
/// ingest did then.
async fn land_file_without_the_build_columns(ledger: &Ledger) {
    let lake = Lake::open(&LakeConfig {
        data: ledger.data_dir().display().to_string(),
        catalog: Some(ledger.catalog.clone()),
    })
    .await
    .unwrap();
    let text = |value: &str| Arc::new(StringArray::from(vec![value])) as ArrayRef;
    let count = |value: i64| Arc::new(Int64Array::from(vec![value])) as ArrayRef;
    // 2026-11-02T09:00:00Z
    let ts = TimestampMicrosecondArray::from(vec![1_793_610_000_000_000]).with_timezone("UTC");
    let current = batch_with_columns(
        Table::TokenUsage,
        vec![
            ("ts", Arc::new(ts)),
            ("request_id", text("old")),
            ("model", text("llama-3-8b")),
            ("input_tokens", count(100)),
            ("output_tokens", count(1500)),
            ("status", text("success")),
            ("source", text("canonical")),
        ],
    )
    .unwrap();
    commit_without_columns(
        &lake,
        &ledger.data_dir(),
        Table::TokenUsage,
        &current,
        &["model_version", "quantization"],
        "tokens",
    )
    .await;
}
