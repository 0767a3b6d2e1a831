//! What the demo declares with `gpuledger apply`: the node inventory, the reservations, the
//! shared-cost rules, a rate card for the on-premises nodes, a license entered by hand, the label
//! policy, the SLOs and the value mappings. Documents are `{kind, name?, spec}`, as `apply` reads them.
//!
//! Each kind has its own function; [`documents`] lists them all, so a new kind is one more
//! function and one more line there.

use serde_json::{Value, json};

use crate::events::timestamp;
use crate::scenario::{
    CLUSTER, Capacity, POLICY_COST_CENTERS, POLICY_ENVIRONMENTS, POLICY_MODELS, POLICY_TEAMS,
    POLICY_WORKLOAD_TYPES, Scenario,
};

/// The price per GPU-hour of the on-premises A100s (depreciation, power, space).
pub const ON_PREM_A100_PER_GPU_HOUR: f64 = 1.85;
/// The GPU software license, per GPU per day.
pub const LICENSE_PER_GPU_DAY: f64 = 2.5;

/// Every document the demo applies, in one list.
pub fn documents(scenario: &Scenario) -> Vec<Value> {
    [
        nodes(scenario),
        reservations(scenario),
        shared_cost_rules(),
        rate_card(),
        manual_costs(scenario),
        label_policy(),
        slos(),
        value_mappings(),
    ]
    .concat()
}

pub fn nodes(scenario: &Scenario) -> Vec<Value> {
    scenario
        .nodes
        .iter()
        .map(|node| {
            let mut spec = json!({
                "cluster": CLUSTER,
                "node": node.name,
                "gpu_count": node.gpus,
                "gpu_model": node.model().name,
                "capacity_type": node.role.capacity().catalog_name(),
                // The instance's CPUs, memory and disks are the rest of its bill: shared cost.
                "gpu_cost_share": if node.role.capacity() == Capacity::OnPrem { 1.0 } else { 0.85 },
            });
            if let Some(id) = &node.resource_id {
                spec["resource_id"] = json!(id);
            }
            json!({"kind": "node", "spec": spec})
        })
        .collect()
}

pub fn reservations(scenario: &Scenario) -> Vec<Value> {
    let start = scenario.spec.start_time();
    scenario
        .reservations
        .iter()
        .map(|r| {
            let mut spec = json!({
                "cluster": CLUSTER,
                "node": scenario.nodes[r.node].name,
                "from": timestamp(start, r.from),
                "to": timestamp(start, r.to),
                "reason": r.reason,
                "note": r.note,
            });
            if let Some(gpus) = &r.gpus {
                spec["gpu_indices"] = json!(gpus);
            }
            json!({"kind": "reservation", "name": r.name, "spec": spec})
        })
        .collect()
}

pub fn shared_cost_rules() -> Vec<Value> {
    let rule = |spec: Value| json!({"kind": "shared_cost_rule", "spec": spec});
    vec![
        rule(json!({"name": "llm-gateway", "priority": 10,
                    "matches": {"tags.service": "llm-gateway"},
                    "strategy": "usage", "basis": {"usage": "requests"}})),
        rule(json!({"name": "network", "priority": 20,
                    "matches": {"service_category": "Networking"},
                    "strategy": "proportional", "basis": "direct_cost"})),
        rule(json!({"name": "storage", "priority": 30,
                    "matches": {"service_category": "Storage"},
                    "strategy": "proportional", "basis": "gpu_hours"})),
        rule(json!({"name": "control-plane", "priority": 40,
                    "matches": {"service_name": "Amazon Elastic Kubernetes Service"},
                    "strategy": "even"})),
        rule(json!({"name": "licenses", "priority": 50,
                    "matches": {"kind": "manual", "category": "licenses"},
                    "strategy": "fixed",
                    "weights": {"research": 3, "vision": 2, "assistant": 2, "search": 2, "platform": 1}})),
    ]
}

pub fn rate_card() -> Vec<Value> {
    vec![json!({"kind": "rate_card", "spec": {
        "gpu_model": "A100", "capacity_type": "reserved",
        "price_per_gpu_hour": ON_PREM_A100_PER_GPU_HOUR, "currency": "USD"}})]
}

pub fn manual_costs(scenario: &Scenario) -> Vec<Value> {
    let start = scenario.spec.start_time();
    let amount = LICENSE_PER_GPU_DAY * scenario.spec.gpus as f64 * scenario.spec.days as f64;
    vec![json!({"kind": "manual_cost", "spec": {
        "name": "nvidia-ai-enterprise", "category": "licenses", "amount": amount, "currency": "USD",
        "from": timestamp(start, 0), "to": timestamp(start, scenario.window_seconds())}})]
}

pub fn label_policy() -> Vec<Value> {
    vec![json!({"kind": "label_policy", "spec": {
        "team": POLICY_TEAMS,
        "environment": POLICY_ENVIRONMENTS,
        "workload_type": POLICY_WORKLOAD_TYPES,
        "model": POLICY_MODELS,
        "cost_center": POLICY_COST_CENTERS}})]
}

pub fn slos() -> Vec<Value> {
    let slo = |spec: Value| json!({"kind": "slo", "spec": spec});
    vec![
        slo(
            json!({"model": "llama-3-70b", "priority": "online", "ttft_ms": 800, "latency_ms": 30000}),
        ),
        slo(json!({"model": "llama-3-70b", "priority": "*", "ttft_ms": 5000})),
        slo(
            json!({"model": "mistral-7b", "priority": "online", "ttft_ms": 300, "latency_ms": 8000}),
        ),
        slo(json!({"model": "bge-large", "priority": "*", "latency_ms": 150})),
    ]
}

#[cfg(test)]
mod tests;

/// What the inference services are worth to the business: a support conversation the assistant
/// answered within its p95 time-to-first-token target deflects a ticket, and an embedding batch
/// indexes documents for search when the service is reliable; each holds on some days only.
pub fn value_mappings() -> Vec<Value> {
    let mapping = |spec: Value| json!({"kind": "value_mapping", "spec": spec});
    vec![
        mapping(
            json!({"name": "assistant-ticket-deflection", "product_line": "assistant",
                       "metric": "p95_ttft_ms", "at_most": 1100, "model": "llama-3-70b",
                       "namespace": "assistant", "event": "support tickets deflected",
                       "counts": "slo_met_requests", "value": 4, "per": 1, "currency": "USD"}),
        ),
        mapping(json!({"name": "search-indexing", "product_line": "search",
                       "metric": "success_rate", "at_least": 0.985, "model": "bge-large",
                       "namespace": "search", "event": "documents indexed",
                       "counts": "requests", "value": 50, "per": 1000, "currency": "USD"})),
    ]
}

/// What a demo budget is sized against: the month's spend so far, or its forecast to the month's
/// end, and the percent of the budget that figure should use.
#[derive(Debug, Clone, Copy)]
pub enum Sizing {
    Spend(f64),
    Forecast(f64),
}

/// The demo's monthly budgets: (name, what it watches, whose spend, how it is sized). They are
/// sized from the measured spend of the month the demo's data ends in ([`budgets`]), so that
/// whatever the dates, the research team's budget is over, the assistant's namespace is past its
/// 80 % warning, and search's cost center stays within, its forecast included.
pub const BUDGETS: [(&str, &str, &str, Sizing); 3] = [
    ("research-monthly", "team", "research", Sizing::Spend(125.0)),
    (
        "assistant-namespace",
        "namespace",
        "assistant",
        Sizing::Spend(85.0),
    ),
    (
        "search-cost-center",
        "cost_center",
        "cc-4004",
        Sizing::Forecast(70.0),
    ),
];

/// The budget documents, given each of [`BUDGETS`]' (spend so far, forecast), in order. Amounts
/// are rounded to two significant digits, as a person would set them (which moves each share by
/// at most 5 %: research stays over, the assistant within 80–100 %, search's forecast under).
pub fn budgets(measured: &[(f64, f64)]) -> Vec<Value> {
    BUDGETS
        .iter()
        .zip(measured)
        .map(|(&(name, field, owner, sizing), &(spend, forecast))| {
            let (figure, percent) = match sizing {
                Sizing::Spend(percent) => (spend, percent),
                Sizing::Forecast(percent) => (forecast, percent),
            };
            let amount = two_significant_digits(figure * 100.0 / percent).max(1.0);
            let mut spec = json!({"amount": amount, "currency": "USD"});
            spec[field] = json!(owner);
            json!({"kind": "budget", "name": name, "spec": spec})
        })
        .collect()
}

fn two_significant_digits(x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    let unit = 10f64.powi(x.log10().floor() as i32 - 1);
    (x / unit).round() * unit
}
