//! `unit_economics` through the real binary on the LiteLLM sample payloads.

use serde_json::json;

use crate::support::{describe, ledgers, shared};

#[test]
fn litellm_payloads_flow_through_to_a_unit_economics_row() {
    let (Some(spend_log), Some(standard)) = (
        shared("litellm/spend_logs_payload.json"),
        shared("litellm/standard_logging_payload.json"),
    ) else {
        return;
    };
    let query = "select team, model, model_version, quantization, priority, peak, cache_hit,
                        prompt_bucket, output_bucket, served_by, requests,
                        successful_slo_met_requests, slo_missed_requests, input_tokens, output_tokens,
                        tokens_slo_met, direct_cost, cost_per_1m_tokens, slo_missed_cost
                 from unit_economics('2025-01-24', '2025-01-25')";
    for ledger in ledgers() {
        ledger.ingest_ok("tokens", &spend_log, &[]);
        ledger.ingest_ok("tokens", &standard, &[]);
        // Two gpt-4o requests on Friday 2025-01-24 09:20 UTC (peak), 10 prompt + 20 completion
        // tokens each (buckets <1k and <256), both `success`; no slo for gpt-4o, so success alone
        // counts. `model_group` is empty and nothing names a build: `model` is gpt-4o, version and
        // quantization NULL. They name no team, namespace or workload: no GPU workload of the
        // ledger served them, so no cost.
        let rows = ledger.sql(query);
        assert_eq!(
            rows,
            vec![json!({
                "team": null, "model": "gpt-4o", "model_version": null, "quantization": null,
                "priority": null, "peak": true, "cache_hit": null, "prompt_bucket": "<1k",
                "output_bucket": "<256", "served_by": null, "requests": 2,
                "successful_slo_met_requests": 2, "slo_missed_requests": 0, "input_tokens": 20,
                "output_tokens": 40, "tokens_slo_met": 60, "direct_cost": null,
                "cost_per_1m_tokens": null, "slo_missed_cost": null
            })]
        );

        // Both first tokens came 4.583 ms after the request: a 4 ms TTFT target misses both.
        let slo = b"kind: slo\nspec: {model: gpt-4o, priority: '*', ttft_ms: 4}\n";
        let out = ledger.run_with_stdin(&["apply", "-"], slo);
        assert!(out.status.success(), "{}", describe(&out));
        let row = &ledger.sql(query)[0];
        assert_eq!(
            (
                &row["successful_slo_met_requests"],
                &row["slo_missed_requests"],
                &row["tokens_slo_met"]
            ),
            (&json!(0), &json!(2), &json!(0))
        );
    }
}
