//! Declared catalog objects through the real binary: `apply`, `get`, `delete`.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::support::{Ledger, describe, ledgers};

/// The example of docs/objects.md, one object of every kind: the documentation is tested too.
fn documented_example() -> String {
    let doc = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/objects.md"),
    )
    .unwrap();
    let start = doc.find("```yaml\n").expect("a yaml block") + "```yaml\n".len();
    let end = start + doc[start..].find("```").unwrap();
    doc[start..end].to_string()
}

const EVERY_OBJECT: [&str; 13] = [
    "node/demo/h100-1",
    "reservation/h100-1-failover",
    "shared_cost_rule/network",
    "shared_cost_rule/licenses",
    "shared_cost_rule/gateway",
    "rate_card/A100/spot",
    "manual_cost/slurm-license-2024-09",
    "label_policy/default",
    "slo/llama-3-70b/online",
    "spot_operations_cost/spot-interruption-handling",
    "value_mapping/credit-approvals",
    "budget/nlp-monthly",
    "scrape_target/h100-1-dcgm",
];

fn lines(objects: &[&str], outcome: &str) -> String {
    objects.iter().map(|o| format!("{o} {outcome}\n")).collect()
}

impl Ledger {
    fn write(&self, file: &str, text: &str) -> String {
        let path = self.dir.path().join(file);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    }

    /// `apply` of a file that must succeed; its standard output.
    fn apply_ok(&self, path: &str) -> String {
        let out = self.run(&["apply", path]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "[{}] {}",
            self.backend,
            describe(&out)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn get(&self, kind: &str, format: &str) -> String {
        let out = self.run(&["get", kind, "--format", format]);
        assert!(
            out.status.success(),
            "[{}] {}",
            self.backend,
            describe(&out)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

#[test]
fn every_kind_is_created_then_unchanged_then_updated() {
    for ledger in ledgers() {
        let example = documented_example();
        let file = ledger.write("objects.yaml", &example);
        assert_eq!(ledger.apply_ok(&file), lines(&EVERY_OBJECT, "created"));
        assert_eq!(ledger.apply_ok(&file), lines(&EVERY_OBJECT, "unchanged"));

        let changed = example.replace("gpu_cost_share: 0.9", "gpu_cost_share: 0.8");
        let file = ledger.write("changed.yaml", &changed);
        let expected = format!(
            "node/demo/h100-1 updated\n{}",
            lines(&EVERY_OBJECT[1..], "unchanged")
        );
        assert_eq!(ledger.apply_ok(&file), expected);

        let nodes: Value = serde_json::from_str(&ledger.get("node", "json")).unwrap();
        assert_eq!(
            nodes,
            json!([{"kind": "node", "name": "demo/h100-1", "spec": {
                "cluster": "demo", "node": "h100-1", "resource_id": "i-0abc123def4567890",
                "gpu_count": 8, "gpu_model": "H100", "capacity_type": "on_demand",
                "gpu_cost_share": 0.8, "gpu_replicas": 1}}])
        );
        // Rules are listed in the order they are tried: by priority, not by name.
        assert_eq!(
            ledger.get("shared_cost_rule", "table"),
            "NAME      PRIORITY  STRATEGY      BASIS                 MATCHES\n\
             network   10        proportional  direct_cost           {\"service_category\":\"Networking\"}\n\
             licenses  20        fixed         direct_cost           {\"category\":\"licenses\",\"kind\":\"manual\"}\n\
             gateway   30        usage         {\"usage\":\"requests\"}  {\"tags.service\":\"llm-gateway\"}\n"
        );
    }
}

#[test]
fn get_prints_documents_that_apply_takes_back() {
    for ledger in ledgers() {
        ledger.apply_ok(&ledger.write("objects.yaml", &documented_example()));
        let kinds = [
            "node",
            "reservation",
            "shared_cost_rule",
            "rate_card",
            "manual_cost",
            "label_policy",
            "slo",
            "spot_operations_cost",
            "value_mapping",
            "budget",
            "scrape_target",
        ];
        for kind in kinds {
            for format in ["json", "yaml"] {
                let printed = ledger.get(kind, format);
                let out = ledger.run_with_stdin(&["apply", "-"], printed.as_bytes());
                assert_eq!(
                    out.status.code(),
                    Some(0),
                    "{kind} {format}: {}",
                    describe(&out)
                );
                let applied = String::from_utf8(out.stdout).unwrap();
                assert!(
                    !applied.is_empty() && applied.lines().all(|l| l.ends_with(" unchanged")),
                    "[{}] {kind} as {format} applied back as:\n{applied}",
                    ledger.backend
                );
            }
        }

        // Deleted, then applied back from `get`'s JSON: the same object again.
        let before = ledger.get("node", "json");
        let out = ledger.run(&["delete", "node", "demo/h100-1"]);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "node/demo/h100-1 deleted\n"
        );
        assert_eq!(ledger.get("node", "json").trim(), "[]");
        let out = ledger.run_with_stdin(&["apply", "-"], before.as_bytes());
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "node/demo/h100-1 created\n"
        );
        assert_eq!(ledger.get("node", "json"), before);

        let again = ledger.run(&["delete", "reservation", "no-such"]);
        assert_eq!(again.status.code(), Some(2));
        assert_eq!(
            String::from_utf8_lossy(&again.stderr),
            "error: no reservation named 'no-such'\n"
        );
    }
}

#[test]
fn an_invalid_file_applies_nothing_and_names_every_field() {
    let invalid = r#"
kind: node
spec: {cluster: demo, node: h100-1, gpu_count: 8, gpu_model: H100}
---
kind: node
spec: {cluster: demo, node: h100-2, gpu_count: 8, gpu_model: H100, gpu_cost_share: 1.5}
---
kind: List
items:
  - kind: reservation
    name: overlap
    spec: {cluster: demo, node: h100-1, from: 2024-09-18T00:00:00Z, to: 2024-09-19T00:00:00Z, reason: lunch}
  - kind: rate_card
    spec: {gpu_model: H100, price_per_gpu_hour: cheap}
---
kind: node
spec: {cluster: demo, node: h100-1, gpu_count: 4, gpu_model: H100}
"#;
    for ledger in ledgers() {
        let file = ledger.write("invalid.yaml", invalid);
        let out = ledger.run(&["apply", &file]);
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!(
                "{file}: document 2 (node demo/h100-2): spec.gpu_cost_share: must be between 0 and 1 (got 1.5)\n\
                 {file}: document 3 item 1 (reservation overlap): spec.reason: must be one of ha_redundancy, \
                 release_overlap, gang_wait, warm_pool, maintenance, latency_guarantee (got 'lunch')\n\
                 {file}: document 3 item 2 (rate_card): spec.price_per_gpu_hour: invalid type: string \"cheap\", expected f64\n\
                 {file}: document 4 (node demo/h100-1): declared twice (first in {file}: document 1)\n\
                 error: 4 errors; nothing was applied\n"
            )
        );
        assert_eq!(
            ledger.get("node", "json").trim(),
            "[]",
            "the valid node was not applied either"
        );

        let not_yaml = ledger.write("broken.yaml", "kind: node\nspec: [unclosed\n");
        let out = ledger.run(&["apply", &not_yaml]);
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.starts_with(&format!("{not_yaml}: not valid YAML: "))
                && stderr.contains("line 3"),
            "{stderr}"
        );
    }
}
