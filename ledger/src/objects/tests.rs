use std::collections::BTreeSet;

use serde_json::json;

use super::*;
use crate::amortize::Strategy;
use crate::build::{ManualCost, Reservation};
use crate::journal::Basis;
use crate::spot::OperationsCostSpec;
use crate::time::MICROS_PER_HOUR;
use crate::value::ValueMappingSpec;

fn node() -> Value {
    json!({"kind": "node", "spec": {"cluster": "demo", "node": "h100-1", "gpu_count": 8, "gpu_model": "H100"}})
}

fn reservation() -> Value {
    json!({"kind": "reservation", "name": "failover", "spec": {
        "cluster": "demo", "node": "h100-1", "gpu_indices": [7, 6, 7],
        "from": "2024-09-18T02:00:00+02:00", "to": "2024-09-19T00:00:00Z", "reason": "ha_redundancy"}})
}

fn rule(name: &str, priority: i64) -> Value {
    json!({"kind": "shared_cost_rule", "spec": {
        "name": name, "priority": priority, "matches": {"service_category": "Networking"},
        "strategy": "fixed", "weights": {"vision": 3, "nlp": 1}, "basis": "gpu_hours"}})
}

fn manual_cost() -> Value {
    json!({"kind": "manual_cost", "spec": {
        "name": "slurm-license-2024-09", "category": "licenses", "amount": 720.5,
        "from": "2024-09-01T00:00:00Z", "to": "2024-10-01T00:00:00Z"}})
}

fn parsed(document: Value) -> Object {
    parse_document(&document).unwrap_or_else(|e| panic!("{document}: {e:?}"))
}

/// The message of an invalid document: `path: message`.
fn error_of(document: Value) -> String {
    match parse_document(&document) {
        Ok(object) => panic!("{document} is valid: {object:?}"),
        Err(error) => error.to_string(),
    }
}

fn with(mut document: Value, path: &[&str], value: Value) -> Value {
    let (last, parents) = path.split_last().unwrap();
    let mut target = &mut document;
    for key in parents {
        target = &mut target[*key];
    }
    target[*last] = value;
    document
}

#[test]
fn a_node_is_named_cluster_slash_node_and_gets_its_defaults() {
    let object = parsed(node());
    assert_eq!(
        (object.kind, object.name.as_str()),
        (ObjectKind::Node, "demo/h100-1")
    );
    assert_eq!(
        object.spec,
        json!({"cluster": "demo", "node": "h100-1", "resource_id": null, "gpu_count": 8,
               "gpu_model": "H100", "capacity_type": "on_demand", "gpu_cost_share": 1.0, "gpu_replicas": 1})
    );
    let typed: Node = object.spec_as().unwrap();
    assert_eq!((typed.gpu_count, typed.gpu_cost_share), (8, 1.0));
    // Naming it as its spec does is accepted (that is what `get` writes).
    assert_eq!(
        parsed(with(node(), &["name"], json!("demo/h100-1"))),
        object
    );
}

#[test]
fn a_reservation_is_normalized_and_converts_to_microsecond_spans() {
    let object = parsed(reservation());
    assert_eq!(object.name, "failover");
    assert_eq!(object.spec["from"], "2024-09-18T00:00:00Z", "in UTC");
    assert_eq!(object.spec["gpu_indices"], json!([6, 7]), "a sorted set");
    assert_eq!(object.spec["note"], Value::Null);
    let spec: ReservationSpec = object.spec_as().unwrap();
    let held = Reservation::from(&spec);
    // 2024-09-18T00:00:00Z is 1_726_617_600 s after the epoch; the reservation lasts 24 h.
    assert_eq!(held.span.start, 1_726_617_600_000_000);
    assert_eq!(held.span.len(), 24 * MICROS_PER_HOUR);
    assert_eq!(held.gpu_indices, Some(vec![6, 7]));
    assert_eq!(
        (held.node.as_str(), held.reason.as_str()),
        ("h100-1", "ha_redundancy")
    );

    let whole_node = parsed(with(reservation(), &["spec", "gpu_indices"], Value::Null));
    let spec: ReservationSpec = whole_node.spec_as().unwrap();
    assert_eq!(Reservation::from(&spec).gpu_indices, None);
}

#[test]
fn rules_keep_their_strategy_and_are_listed_by_priority_then_name() {
    let object = parsed(rule("network", 20));
    assert_eq!(object.name, "network");
    assert_eq!(
        object.spec,
        json!({"name": "network", "priority": 20, "matches": {"service_category": "Networking"},
               "strategy": "fixed", "weights": {"nlp": 1.0, "vision": 3.0}, "basis": "gpu_hours"})
    );
    let spec: SharedCostRuleSpec = object.spec_as().unwrap();
    assert_eq!(spec.extra.priority, 20);
    assert_eq!(spec.base.basis, Basis::GpuHours);
    assert!(
        matches!(spec.base.strategy, Strategy::Fixed { ref weights } if weights["vision"] == 3.0)
    );

    let even = json!({"kind": "shared_cost_rule", "spec": {"name": "a-storage", "priority": 20,
                      "strategy": "even", "basis": {"usage": "bytes"}}});
    let mut objects = [
        parsed(rule("network", 20)),
        parsed(even),
        parsed(rule("z-first", -5)),
        parsed(node()),
    ];
    objects.sort_by(|a, b| a.apply_order().cmp(&b.apply_order()));
    let order: Vec<&str> = objects.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(order, ["demo/h100-1", "z-first", "a-storage", "network"]);
}

#[test]
fn rate_cards_manual_costs_and_the_label_policy() {
    let price = parsed(
        json!({"kind": "rate_card", "spec": {"gpu_model": "H100", "capacity_type": "spot", "price_per_gpu_hour": 2.1}}),
    );
    assert_eq!(price.name, "H100/spot");
    assert_eq!(price.spec["currency"], "USD");
    let spec: RateCardSpec = price.spec_as().unwrap();
    assert_eq!(spec.base.price_per_gpu_hour, 2.1);

    let cost = parsed(manual_cost());
    assert_eq!(cost.name, "slurm-license-2024-09");
    let cost = ManualCost::from(&cost.spec_as::<ManualCostSpec>().unwrap());
    assert_eq!(
        (cost.amount, cost.category.as_str()),
        ("720.5".parse().unwrap(), "licenses")
    );
    assert_eq!(
        cost.period.len(),
        30 * 24 * MICROS_PER_HOUR,
        "September has 30 days"
    );

    let policy = parsed(
        json!({"kind": "label_policy", "spec": {"team": ["vision", "nlp", "vision"], "environment": ["prod"]}}),
    );
    assert_eq!(policy.name, LABEL_POLICY_NAME);
    let policy: LabelPolicy = policy.spec_as().unwrap();
    assert_eq!(
        policy.allowed_teams(),
        Some(["nlp".to_string(), "vision".to_string()].into())
    );
    assert_eq!(LabelPolicy::default().allowed_teams(), None);
}

#[test]
fn an_slo_is_named_model_slash_priority_and_defaults_to_success() {
    let slo = parsed(
        json!({"kind": "slo", "spec": {"model": "meta-llama/Llama-3-8B", "priority": "online", "ttft_ms": 500}}),
    );
    assert_eq!(slo.name, "meta-llama/Llama-3-8B/online");
    let spec: SloSpec = slo.spec_as().unwrap();
    assert_eq!((spec.ttft_ms, spec.latency_ms), (Some(500.0), None));
    assert_eq!(spec.success_statuses, ["success".to_string()].into());
    assert_eq!(
        error_of(json!({"kind": "slo", "spec": {"model": "m", "priority": "urgent"}})),
        "spec.priority: must be one of online, batch, interactive, * (got 'urgent')"
    );
    assert_eq!(
        error_of(json!({"kind": "slo", "spec": {"model": "m", "priority": "*", "latency_ms": -1}})),
        "spec.latency_ms: must be a finite number ≥ 0 (got -1)"
    );
    assert_eq!(
        error_of(
            json!({"kind": "slo", "spec": {"model": "m", "priority": "*", "success_statuses": []}})
        ),
        "spec.success_statuses: must name at least one status (leave it out for [success])"
    );
}

#[test]
fn a_spot_operations_cost_matches_nodes_by_pattern_and_needs_an_amount() {
    let object = parsed(json!({"kind": "spot_operations_cost", "spec": {
        "name": "spot-on-call", "node": "spot-*", "per_month": 730, "per_gpu_hour": 0.05}}));
    assert_eq!(object.name, "spot-on-call");
    let spec: OperationsCostSpec = object.spec_as().unwrap();
    assert_eq!(
        (spec.cluster.as_str(), spec.currency.as_str()),
        ("*", "USD")
    );
    assert!(spec.applies_to("demo", "spot-a100-1") && !spec.applies_to("demo", "h100-1"));
    // 730 per month over a 24 h window is 730 × 24 / 730 = 24.00; 10 GPU-hours × 0.05 = 0.50.
    assert_eq!(spec.amount(24.0, 10.0), 24.5);
    assert_eq!(
        error_of(json!({"kind": "spot_operations_cost", "spec": {"name": "x"}})),
        "spec.per_month: set per_month, per_gpu_hour or both"
    );
    assert_eq!(
        error_of(
            json!({"kind": "spot_operations_cost", "spec": {"name": "x", "per_gpu_hour": -0.1}})
        ),
        "spec.per_gpu_hour: must be a finite number ≥ 0 (got -0.1)"
    );
}

#[test]
fn a_value_mapping_needs_a_known_metric_a_condition_and_a_positive_per() {
    let document = json!({"kind": "value_mapping", "spec": {
        "name": "credit-approvals", "product_line": "credit", "metric": "p95_latency_ms",
        "at_most": 350, "model": "llama-3-8b", "event": "credit approvals", "value": 1240,
        "per": 10000}});
    let object = parsed(document.clone());
    assert_eq!(object.name, "credit-approvals");
    let spec: ValueMappingSpec = object.spec_as().unwrap();
    assert_eq!(
        (spec.counts.as_str(), spec.currency.as_str()),
        ("requests", "USD")
    );
    assert_eq!(
        error_of(with(
            document.clone(),
            &["spec", "metric"],
            json!("p90_latency_ms")
        )),
        "spec.metric: must be one of p50_latency_ms, p95_latency_ms, p99_latency_ms, p50_ttft_ms, p95_ttft_ms, p99_ttft_ms, success_rate, slo_met_share, requests, tokens (got 'p90_latency_ms')"
    );
    assert_eq!(
        error_of(with(document.clone(), &["spec", "at_most"], Value::Null)),
        "spec.at_most: set the condition: at_most, at_least or both"
    );
    assert_eq!(
        error_of(with(document, &["spec", "per"], json!(0))),
        "spec.per: must be a number > 0 (got 0)"
    );
}

#[test]
fn a_document_round_trips_without_its_unset_fields() {
    let object = parsed(reservation());
    let document = object.to_document();
    assert_eq!(document["kind"], "reservation");
    assert!(document["spec"].get("note").is_none(), "{document}");
    assert_eq!(parsed(document), object);
}

#[test]
fn type_errors_name_the_field_path() {
    assert_eq!(
        error_of(with(node(), &["spec", "gpu_count"], json!("eight"))),
        "spec.gpu_count: invalid type: string \"eight\", expected u32"
    );
    assert_eq!(
        error_of(with(
            reservation(),
            &["spec", "gpu_indices"],
            json!([0, -1])
        )),
        "spec.gpu_indices[1]: invalid value: integer `-1`, expected u32"
    );
    // Fields of a ledger type extended by the catalog keep their paths too.
    let rate_card =
        json!({"kind": "rate_card", "spec": {"gpu_model": "H100", "price_per_gpu_hour": "2.10"}});
    assert_eq!(
        error_of(rate_card),
        "spec.price_per_gpu_hour: invalid type: string \"2.10\", expected f64"
    );
    // The rule's strategy is flattened into it (serde loses paths there): its errors are still named.
    assert_eq!(
        error_of(with(
            rule("network", 1),
            &["spec", "strategy"],
            json!("even_split")
        )),
        "spec.strategy: unknown variant `even_split`, expected one of `proportional`, `even`, `fixed`, `usage`"
    );
    assert_eq!(
        error_of(with(
            rule("network", 1),
            &["spec", "weights", "nlp"],
            json!("1")
        )),
        "spec.weights.nlp: invalid type: string \"1\", expected f64"
    );
    assert_eq!(
        error_of(with(
            rule("network", 1),
            &["spec", "basis"],
            json!("gpu_seconds")
        )),
        "spec.basis: unknown variant `gpu_seconds`, expected one of `direct_cost`, `gpu_hours`, `usage`"
    );
    assert_eq!(
        error_of(with(node(), &["spec"], json!(["demo", "h100-1"]))),
        "spec: must be a mapping of the node's fields"
    );
    assert_eq!(
        error_of(with(rule("network", 1), &["spec", "priority"], json!(1.5))),
        "spec.priority: invalid type: floating point `1.5`, expected i64"
    );
    assert_eq!(
        error_of(with(manual_cost(), &["spec", "from"], json!("2024-09-01"))),
        "spec.from: '2024-09-01' is not an RFC 3339 time such as 2024-09-18T00:00:00Z (premature end of input)"
    );
}

#[test]
fn missing_and_unknown_fields_are_named() {
    let mut document = node();
    document["spec"]
        .as_object_mut()
        .unwrap()
        .remove("gpu_model");
    assert_eq!(error_of(document), "spec.gpu_model: is required");
    assert_eq!(
        error_of(with(node(), &["spec", "gpu_cost_shares"], json!(0.5))),
        "spec.gpu_cost_shares: unknown field; known here: capacity_type, cluster, gpu_cost_share, gpu_count, \
         gpu_model, gpu_replicas, node, resource_id"
    );
    // `weights` belongs to the fixed strategy only.
    assert!(
        error_of(with(
            rule("network", 1),
            &["spec", "strategy"],
            json!("even")
        ))
        .starts_with(
            "spec.weights: unknown field; known here: basis, matches, name, priority, strategy"
        ),
    );
    assert_eq!(
        error_of(json!({"kind": "node", "spec": {}, "metadata": {}})),
        "metadata: unknown field `metadata`, expected one of `kind`, `name`, `spec`"
    );
    assert_eq!(error_of(json!({"kind": "node"})), "spec: is required");
    assert_eq!(
        error_of(json!({"kind": "nodes", "spec": {}})),
        "kind: unknown kind 'nodes'; known kinds: node, reservation, shared_cost_rule, rate_card, manual_cost, label_policy, slo, spot_operations_cost, value_mapping, budget, scrape_target"
    );
    assert_eq!(
        error_of(json!("node")),
        "a document is a mapping with kind and spec (and name where the kind needs one)"
    );
}

#[test]
fn rules_beyond_types_are_named() {
    let cases = [
        (
            with(node(), &["spec", "gpu_cost_share"], json!(1.5)),
            "spec.gpu_cost_share: must be between 0 and 1 (got 1.5)",
        ),
        (
            with(node(), &["spec", "gpu_count"], json!(0)),
            "spec.gpu_count: must be at least 1",
        ),
        (
            with(node(), &["spec", "gpu_replicas"], json!(0)),
            "spec.gpu_replicas: must be at least 1",
        ),
        (
            with(node(), &["spec", "capacity_type"], json!("ondemand")),
            "spec.capacity_type: must be one of on_demand, spot, reserved (got 'ondemand')",
        ),
        (
            with(node(), &["spec", "cluster"], json!(" ")),
            "spec.cluster: must not be empty",
        ),
        (
            with(node(), &["spec", "node"], json!("rack/1")),
            "spec.node: must not contain '/' (got 'rack/1'): it names the object with another field",
        ),
        (
            with(reservation(), &["spec", "reason"], json!("lunch")),
            "spec.reason: must be one of ha_redundancy, release_overlap, gang_wait, warm_pool, maintenance, latency_guarantee (got 'lunch')",
        ),
        (
            with(
                reservation(),
                &["spec", "to"],
                json!("2024-09-17T23:00:00Z"),
            ),
            "spec.to: must be after from (2024-09-18T00:00:00Z)",
        ),
        (
            with(reservation(), &["spec", "gpu_indices"], json!([])),
            "spec.gpu_indices: must list at least one GPU (leave gpu_indices out to reserve every GPU of the node)",
        ),
        (
            with(manual_cost(), &["spec", "currency"], json!("usd")),
            "spec.currency: must be an ISO 4217 code such as USD (got 'usd')",
        ),
        (
            with(
                rule("network", 1),
                &["spec", "weights"],
                json!({"vision": 0}),
            ),
            "spec.weights: must give at least one team a positive weight",
        ),
        (
            with(
                rule("network", 1),
                &["spec", "matches", "tags.team"],
                json!(""),
            ),
            "spec.matches.tags.team: must not be empty",
        ),
        (
            json!({"kind": "shared_cost_rule", "spec": {"name": "r", "priority": 1, "strategy": "usage"}}),
            "spec.basis: the usage strategy spreads by a usage measure: set basis to {usage: <measure>}",
        ),
        (
            json!({"kind": "rate_card", "spec": {"gpu_model": "H100", "price_per_gpu_hour": -2}}),
            "spec.price_per_gpu_hour: must be a finite number ≥ 0 (got -2)",
        ),
        (
            json!({"kind": "label_policy", "spec": {"team": []}}),
            "spec.team: must allow at least one value (leave the label out to allow any value)",
        ),
    ];
    for (document, expected) in cases {
        assert_eq!(error_of(document), expected);
    }
}

#[test]
fn a_wrong_weight_is_named_by_its_team() {
    let error = parse_document(&with(
        rule("network", 1),
        &["spec", "weights"],
        json!({"vision": -1, "nlp": 1}),
    ))
    .unwrap_err();
    assert_eq!(
        error.error,
        ValidationError::new(
            "spec.weights.vision",
            "must be a finite number ≥ 0 (got -1)"
        )
    );
    assert_eq!(error.subject().as_deref(), Some("shared_cost_rule network"));
}

#[test]
fn names_come_from_the_spec_or_the_document() {
    let mut unnamed = reservation();
    unnamed.as_object_mut().unwrap().remove("name");
    let error = parse_document(&unnamed).unwrap_err();
    assert_eq!(
        error.to_string(),
        "name: is required: a reservation is named by its document"
    );
    assert_eq!(error.subject().as_deref(), Some("reservation"));
    assert_eq!(
        error_of(with(node(), &["name"], json!("h100-1"))),
        "name: a node is named by its spec: 'demo/h100-1', not 'h100-1' (leave name out)"
    );
    assert_eq!(
        error_of(with(reservation(), &["name"], json!("failover "))),
        "name: must not start or end with blanks or contain control characters (got \"failover \")"
    );
    // An object whose spec is wrong is still pointed at by the name it would have.
    let error = parse_document(&with(node(), &["spec", "gpu_count"], json!(0))).unwrap_err();
    assert_eq!(error.subject().as_deref(), Some("node demo/h100-1"));
}

#[test]
fn lists_of_documents_are_split() {
    let single = split_list(node()).unwrap();
    assert_eq!(single, [(None, node())]);
    let list = json!({"kind": "List", "items": [node(), reservation()]});
    let items = split_list(list).unwrap();
    assert_eq!(items, [(Some(1), node()), (Some(2), reservation())]);
    assert_eq!(split_list(json!([node()])).unwrap(), [(Some(1), node())]);
    assert_eq!(
        split_list(json!({"kind": "List", "items": node()}))
            .unwrap_err()
            .to_string(),
        "items: must be a list of documents"
    );
    assert_eq!(
        split_list(json!({"kind": "List", "apiVersion": "v1", "items": []}))
            .unwrap_err()
            .to_string(),
        "apiVersion: unknown field (a List has kind and items)"
    );
}

#[test]
fn kinds_have_unique_names_that_parse_back() {
    for kind in ObjectKind::ALL {
        assert_eq!(kind.name().parse::<ObjectKind>(), Ok(kind));
    }
    let names: BTreeSet<&str> = ObjectKind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(names.len(), ObjectKind::ALL.len());
}

#[test]
fn a_scrape_target_is_named_by_its_document_and_its_errors_name_the_field() {
    let target = |spec: Value| json!({"kind": "scrape_target", "name": "node-1", "spec": spec});
    let object = parsed(target(
        json!({"url": "http://node-1:9400/metrics", "cluster": "prod"}),
    ));
    assert_eq!(object.name, "node-1");
    // The default interval is written into the normal form.
    assert_eq!(
        object.spec,
        json!({"url": "http://node-1:9400/metrics", "interval": "30s", "cluster": "prod", "labels": {}})
    );
    let spec: ScrapeTargetSpec = serde_json::from_value(object.spec).unwrap();
    assert_eq!(spec.period().unwrap(), std::time::Duration::from_secs(30));

    let cases = [
        (
            json!({"url": "node-1:9400", "cluster": "prod"}),
            "spec.url: must be an http:// or https:// URL such as http://node-1:9400/metrics (got 'node-1:9400')",
        ),
        (
            json!({"url": "http://n/metrics", "interval": "0s", "cluster": "prod"}),
            "spec.interval: must be a number and a unit s, m or h, at least 1s (got '0s')",
        ),
        (
            json!({"url": "http://n/metrics", "interval": "15 sec", "cluster": "prod"}),
            "spec.interval: must be a number and a unit s, m or h, at least 1s (got '15 sec')",
        ),
        (
            json!({"url": "http://n/metrics"}),
            "spec.cluster: is required",
        ),
        (
            json!({"url": "http://n/metrics", "cluster": "prod", "labels": {"rack-id": "r1"}}),
            "spec.labels.rack-id: is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with __)",
        ),
    ];
    for (spec, expected) in cases {
        assert_eq!(error_of(target(spec)), expected);
    }
}
