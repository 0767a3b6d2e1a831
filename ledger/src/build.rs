//! One ledger build: from the window's events, telemetry, billing and catalog objects to
//! allocations, `gpu_hours`, `cost_entries` and the balance. Pure: the query crate loads the
//! inputs from the lake and writes the outputs back.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::allocation::{
    Allocation, Event, EventKind, NodeGpus, PodGpus, Warning, build_allocations,
};
use crate::amortize::UNATTRIBUTED;
use crate::gpu_hours::{
    ClassifyConfig, GpuHour, GpuTimeline, Owner, PriceSegment, UsageSample, gpu_hours,
    observed_hours,
};
use crate::journal::{
    Balance, CostEntry, DailyBasis, SharedCostRule, SharedItem, amortize, by_day, consolidate,
};
use crate::price::split_node_line;
use crate::time::{Micros, Span, floor_day};

/// A node of the inventory (`gpuledger apply` kind `node`, or a `node_up` event).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub cluster: String,
    pub node: String,
    /// The node as billing names it (an instance id or ARN); lines match when they are equal or
    /// the line's id ends with it.
    #[serde(default)]
    pub resource_id: Option<String>,
    pub gpu_count: u32,
    pub gpu_model: String,
    /// `on_demand`, `spot` or `reserved`.
    #[serde(default = "default_capacity")]
    pub capacity_type: String,
    /// The part of the node's cost that belongs to its GPUs.
    #[serde(default = "one")]
    pub gpu_cost_share: f64,
    /// Time-slicing replicas per GPU (1 when not time-sliced).
    #[serde(default = "one_u32")]
    pub gpu_replicas: u32,
}

fn default_capacity() -> String {
    "on_demand".into()
}
fn one() -> f64 {
    1.0
}
fn one_u32() -> u32 {
    1
}

/// A declared reservation: idle time it covers is intentional.
#[derive(Debug, Clone, PartialEq)]
pub struct Reservation {
    pub cluster: String,
    pub node: String,
    /// `None` for every GPU of the node.
    pub gpu_indices: Option<Vec<u32>>,
    pub span: Span,
    pub reason: String,
}

/// A billing line as the ledger needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct BillingItem {
    pub charge_period: Span,
    pub effective_cost: f64,
    pub resource_id: Option<String>,
    /// FOCUS columns in snake_case and `tags.<key>`, for the shared-cost rules.
    pub attributes: BTreeMap<String, String>,
}

/// A cost entered by hand (licenses, people, …).
#[derive(Debug, Clone, PartialEq)]
pub struct ManualCost {
    pub name: String,
    pub category: String,
    pub amount: f64,
    pub period: Span,
}

/// Price per GPU-hour by GPU model and capacity type, for nodes billing does not cover.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateCardEntry {
    pub gpu_model: String,
    #[serde(default = "default_capacity")]
    pub capacity_type: String,
    pub price_per_gpu_hour: f64,
}

/// Telemetry of one GPU.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuTelemetry {
    pub gpu_uuid: Option<String>,
    /// Sorted by time.
    pub samples: Vec<UsageSample>,
}

#[derive(Debug, Clone, Default)]
pub struct LedgerInputs {
    pub window: Span,
    pub nodes: Vec<Node>,
    pub events: Vec<Event>,
    /// (cluster, node, gpu index) → telemetry.
    pub telemetry: HashMap<(String, String, u32), GpuTelemetry>,
    pub pod_gpus: PodGpus,
    pub reservations: Vec<Reservation>,
    pub billing: Vec<BillingItem>,
    pub manual_costs: Vec<ManualCost>,
    pub rules: Vec<SharedCostRule>,
    pub rate_card: Vec<RateCardEntry>,
    /// Allowed teams; `None` accepts every team label.
    pub allowed_teams: Option<BTreeSet<String>>,
    /// Usage measures for `usage` rules: measure → (day, team) → amount.
    pub usage: BTreeMap<String, BTreeMap<(Micros, String), f64>>,
    pub config: ClassifyConfig,
}

#[derive(Debug, Clone, Default)]
pub struct LedgerOutput {
    pub allocations: Vec<Allocation>,
    pub gpu_hours: Vec<GpuHour>,
    pub cost_entries: Vec<CostEntry>,
    pub balance: Balance,
    pub warnings: Vec<Warning>,
}

type NodeKey = (String, String);

pub fn build(inputs: &LedgerInputs) -> LedgerOutput {
    let window = inputs.window;
    let nodes: BTreeMap<NodeKey, &Node> = inputs
        .nodes
        .iter()
        .map(|n| ((n.cluster.clone(), n.node.clone()), n))
        .collect();
    let node_gpus: HashMap<NodeKey, NodeGpus> = nodes
        .iter()
        .map(|(k, n)| {
            (
                k.clone(),
                NodeGpus {
                    gpu_count: n.gpu_count,
                    gpu_model: n.gpu_model.clone(),
                    replicas: n.gpu_replicas,
                },
            )
        })
        .collect();
    let (allocations, mut warnings) =
        build_allocations(&inputs.events, window, &node_gpus, &inputs.pod_gpus);
    let team_of = |a: &Allocation| -> String {
        match (&a.labels.team, &inputs.allowed_teams) {
            (Some(team), Some(allowed)) if allowed.contains(team) => team.clone(),
            (Some(team), None) => team.clone(),
            _ => UNATTRIBUTED.to_string(),
        }
    };

    // Billing: node lines become GPU prices plus a shared remainder; other lines are shared.
    let mut shared_items: Vec<SharedItem> = Vec::new();
    let mut prices: HashMap<NodeKey, Vec<PriceSegment>> = HashMap::new();
    let mut billed = 0.0;
    for line in &inputs.billing {
        let in_window: f64 = by_day(line.effective_cost, line.charge_period, window)
            .iter()
            .map(|(_, a)| a)
            .sum();
        billed += in_window;
        let node = line.resource_id.as_deref().and_then(|id| {
            nodes.values().find(|n| {
                n.resource_id
                    .as_deref()
                    .is_some_and(|r| !r.is_empty() && (id == r || id.ends_with(r)))
            })
        });
        let Some(node) = node else {
            shared_items.push(SharedItem {
                period: line.charge_period,
                amount: line.effective_cost,
                source: "billing".into(),
                attributes: line.attributes.clone(),
            });
            continue;
        };
        let split = split_node_line(
            line.effective_cost,
            line.charge_period,
            node.gpu_count,
            node.gpu_cost_share,
        );
        if let Some(price) = split.gpu_price {
            let span = price.span.intersect(&window);
            if !span.is_empty() {
                prices
                    .entry((node.cluster.clone(), node.node.clone()))
                    .or_default()
                    .push(PriceSegment { span, ..price });
            }
        }
        if split.shared != 0.0 {
            let mut attributes = line.attributes.clone();
            attributes.insert("kind".into(), "node_overhead".into());
            attributes.insert("node".into(), node.node.clone());
            shared_items.push(SharedItem {
                period: line.charge_period,
                amount: split.shared,
                source: "billing".into(),
                attributes,
            });
        }
    }
    let mut manual = 0.0;
    for cost in &inputs.manual_costs {
        manual += by_day(cost.amount, cost.period, window)
            .iter()
            .map(|(_, a)| a)
            .sum::<f64>();
        let attributes = [
            ("kind", "manual"),
            ("category", cost.category.as_str()),
            ("name", cost.name.as_str()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        shared_items.push(SharedItem {
            period: cost.period,
            amount: cost.amount,
            source: "manual".into(),
            attributes,
        });
    }

    let faults = fault_spans(&inputs.events, window);
    let mut rows: Vec<GpuHour> = Vec::new();
    let mut rate_card_cost = 0.0;
    let mut rate_card_nodes: BTreeSet<NodeKey> = BTreeSet::new();
    for (key, node) in &nodes {
        let billed_prices = prices.remove(key).unwrap_or_default();
        let rate = billed_prices
            .is_empty()
            .then(|| rate_card_price(&inputs.rate_card, node))
            .flatten();
        if rate.is_some() {
            rate_card_nodes.insert(key.clone());
        }
        if billed_prices.is_empty() && rate.is_none() {
            warnings.push(Warning {
                ts: window.start,
                subject: format!("{}/{}", key.0, key.1),
                message:
                    "no billing line and no rate-card price: its GPU time is counted at zero cost"
                        .into(),
            });
        }
        for gpu_index in 0..node.gpu_count {
            let telemetry = inputs
                .telemetry
                .get(&(key.0.clone(), key.1.clone(), gpu_index));
            let gpu_allocations: Vec<&Allocation> = allocations
                .iter()
                .filter(|a| a.cluster == key.0 && a.node == key.1 && a.gpu_index == gpu_index)
                .collect();
            let observed = observed_hours(
                telemetry
                    .iter()
                    .flat_map(|t| t.samples.iter().map(|s| s.ts))
                    .chain(
                        gpu_allocations
                            .iter()
                            .flat_map(|a| [a.span.start, a.span.end - 1]),
                    ),
            );
            let mut existence: Vec<Span> = billed_prices.iter().map(|p| p.span).collect();
            existence.extend(
                observed
                    .iter()
                    .map(|s| s.intersect(&window))
                    .filter(|s| !s.is_empty()),
            );
            let gpu_prices = match rate {
                Some(price_per_hour) => existence
                    .iter()
                    .map(|&span| PriceSegment {
                        span,
                        price_per_hour,
                    })
                    .collect::<Vec<_>>(),
                None => billed_prices.clone(),
            };
            let timeline = GpuTimeline {
                cluster: key.0.clone(),
                node: key.1.clone(),
                gpu_index,
                gpu_uuid: telemetry.and_then(|t| t.gpu_uuid.clone()),
                existence,
                allocations: gpu_allocations,
                reservations: inputs
                    .reservations
                    .iter()
                    .filter(|r| r.cluster == key.0 && r.node == key.1)
                    .filter(|r| {
                        r.gpu_indices
                            .as_ref()
                            .is_none_or(|g| g.contains(&gpu_index))
                    })
                    .map(|r| (r.span.intersect(&window), r.reason.clone()))
                    .collect(),
                faults: faults.get(key).cloned().unwrap_or_default(),
                samples: telemetry.map(|t| t.samples.clone()).unwrap_or_default(),
                prices: dedupe_rate_segments(gpu_prices, rate.is_some()),
            };
            let gpu_rows = gpu_hours(&timeline, &inputs.config, |a| Owner {
                team: team_of(a),
                namespace: a.namespace.clone(),
                workload: a.workload.clone(),
            });
            if rate.is_some() {
                rate_card_cost += gpu_rows.iter().map(|r| r.cost).sum::<f64>();
            }
            rows.extend(gpu_rows);
        }
    }
    for (key, _) in prices {
        warnings.push(Warning {
            ts: window.start,
            subject: format!("{}/{}", key.0, key.1),
            message: "billing matched a node that is not in the inventory".into(),
        });
    }

    let mut entries = Vec::new();
    let mut basis = DailyBasis::default();
    for row in &rows {
        let day = floor_day(row.hour);
        let from_rate_card = rate_card_nodes.contains(&(row.cluster.clone(), row.node.clone()));
        let source = if from_rate_card {
            "rate_card"
        } else {
            "billing"
        }
        .to_string();
        let mut entry = |team: Option<String>, bucket: String, amount: f64| {
            if amount != 0.0 {
                entries.push(CostEntry {
                    day,
                    team,
                    bucket,
                    rule: None,
                    source: source.clone(),
                    amount,
                });
            }
        };
        match &row.owner {
            Some(owner) => {
                entry(
                    Some(owner.team.clone()),
                    "direct".into(),
                    row.class_costs.busy,
                );
                entry(
                    Some(owner.team.clone()),
                    "allocated_idle".into(),
                    row.class_costs.allocated_idle,
                );
                *basis
                    .direct_cost
                    .entry((day, owner.team.clone()))
                    .or_default() += row.cost;
                *basis
                    .gpu_hours
                    .entry((day, owner.team.clone()))
                    .or_default() += row.alloc_seconds / 3600.0;
            }
            None => {
                if let Some(reason) = &row.reserved_reason {
                    entry(None, format!("reserved:{reason}"), row.class_costs.reserved);
                }
                entry(None, "unexplained".into(), row.class_costs.unexplained);
                entry(None, "fault".into(), row.class_costs.fault);
            }
        }
    }
    basis.usage = inputs.usage.clone();
    entries.extend(amortize(&shared_items, &inputs.rules, &basis, window));
    let cost_entries = consolidate(entries);
    let balance = Balance {
        billed,
        manual,
        rate_card: rate_card_cost,
        accounted: cost_entries.iter().map(|e| e.amount).sum(),
    };
    LedgerOutput {
        allocations,
        gpu_hours: rows,
        cost_entries,
        balance,
        warnings,
    }
}

fn rate_card_price(rate_card: &[RateCardEntry], node: &Node) -> Option<f64> {
    rate_card
        .iter()
        .find(|r| r.gpu_model == node.gpu_model && r.capacity_type == node.capacity_type)
        .or_else(|| rate_card.iter().find(|r| r.gpu_model == node.gpu_model))
        .map(|r| r.price_per_gpu_hour)
}

/// Rate-card prices are laid over the GPU's existence, whose spans may overlap (billing and
/// observation): keep each instant priced once.
fn dedupe_rate_segments(segments: Vec<PriceSegment>, from_rate_card: bool) -> Vec<PriceSegment> {
    if !from_rate_card || segments.is_empty() {
        return segments;
    }
    let price = segments[0].price_per_hour;
    let mut spans: Vec<Span> = segments.into_iter().map(|s| s.span).collect();
    spans.sort();
    let mut merged: Vec<Span> = Vec::new();
    for span in spans {
        match merged.last_mut() {
            Some(last) if span.start <= last.end => last.end = last.end.max(span.end),
            _ => merged.push(span),
        }
    }
    merged
        .into_iter()
        .map(|span| PriceSegment {
            span,
            price_per_hour: price,
        })
        .collect()
}

/// Node faults from `node_down` … `node_up` events (open at the window's end when not back up).
fn fault_spans(events: &[Event], window: Span) -> HashMap<NodeKey, Vec<Span>> {
    let mut by_node: BTreeMap<NodeKey, Vec<(Micros, EventKind)>> = BTreeMap::new();
    for e in events {
        if let (Some(kind @ (EventKind::NodeDown | EventKind::NodeUp)), Some(node)) =
            (e.kind, &e.node)
        {
            by_node
                .entry((e.cluster.clone(), node.clone()))
                .or_default()
                .push((e.ts, kind));
        }
    }
    let mut faults = HashMap::new();
    for (key, mut events) in by_node {
        events.sort();
        let mut down: Option<Micros> = None;
        let mut spans = Vec::new();
        for (ts, kind) in events {
            match kind {
                EventKind::NodeDown => {
                    down.get_or_insert(ts);
                }
                _ => {
                    if let Some(start) = down.take() {
                        spans.push(Span::new(start, ts).intersect(&window));
                    }
                }
            }
        }
        if let Some(start) = down {
            spans.push(Span::new(start, window.end).intersect(&window));
        }
        spans.retain(|s| !s.is_empty());
        faults.insert(key, spans);
    }
    faults
}

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
