//! Gateway token usage through the real binary.

use crate::support::{ledgers, shared};

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
