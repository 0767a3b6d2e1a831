//! One ledger build: from the window's events, telemetry, billing and catalog objects to
//! allocations, `gpu_hours`, `cost_entries` and the balance. Pure: the query crate loads the
//! inputs from the lake and writes the outputs back.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::allocation::{
    Allocation, Event, EventKind, NodeGpus, PodGpus, Warning, build_allocations,
};
use crate::amortize::UNATTRIBUTED;
use crate::gpu_hours::{
    ClassifyConfig, GpuHour, GpuTimeline, Owner, PriceSegment, UsageSample, gpu_hours,
    observed_hours, union,
};
use crate::journal::{
    Balance, CostEntry, SharedCostRule, SharedItem, UsageMeasures, by_day, journal,
};
use crate::money::Money;
use crate::price::split_node_line;
use crate::time::{MICROS_PER_HOUR, Micros, Span, floor_hour};

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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    pub effective_cost: Money,
    pub resource_id: Option<String>,
    /// FOCUS columns in snake_case and `tags.<key>`, for the shared-cost rules.
    pub attributes: BTreeMap<String, String>,
}

/// A cost entered by hand (licenses, people, …).
#[derive(Debug, Clone, PartialEq)]
pub struct ManualCost {
    pub name: String,
    pub category: String,
    pub amount: Money,
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
    /// The whole GPU's readings, sorted by time, one per time.
    pub samples: Vec<UsageSample>,
    /// Readings of series labelled with a pod (MIG instances, shares of a time-sliced GPU), by
    /// (namespace, pod), each sorted by time.
    pub pod_samples: BTreeMap<(String, String), Vec<UsageSample>>,
    /// `DCGM_FI_DEV_XID_ERRORS` readings (the last XID the GPU raised), sorted by time.
    pub xid: Vec<(Micros, u32)>,
}

#[derive(Debug, Clone, Default)]
pub struct LedgerInputs {
    pub window: Span,
    pub nodes: Vec<Node>,
    pub events: Vec<Event>,
    /// (cluster, node, gpu index) → telemetry. Read only by [`rebuild`], the whole build in
    /// memory (the tests' and the property scenarios'); the lake's build folds each node's
    /// telemetry where its GPU-hours are computed and passes it to [`node_gpu_hours`] instead.
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
    pub usage: UsageMeasures,
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

/// (cluster, node).
pub type NodeKey = (String, String);

/// The team that pays for an allocation: its `team` label when the policy allows it, else
/// [`UNATTRIBUTED`] — never dropped.
pub fn resolve_team(label: Option<&str>, allowed: Option<&BTreeSet<String>>) -> String {
    match (label, allowed) {
        (Some(team), Some(allowed)) if allowed.contains(team) => team.to_string(),
        (Some(team), None) => team.to_string(),
        _ => UNATTRIBUTED.to_string(),
    }
}

/// Builds the whole window.
pub fn build(inputs: &LedgerInputs) -> LedgerOutput {
    rebuild(inputs, &[inputs.window], Vec::new())
}

/// Recomputes the GPU-hours of `hours` only (late data touched them), keeps the stored rows of
/// the other hours as they are, and recomputes the window's journal and balance from all rows.
///
/// In three steps, so that the middle one can run elsewhere: [`prepare`] the fleet-wide part
/// (prices, allocations, faults), [`node_gpu_hours`] on each node with its telemetry, and
/// [`finish`] the journal and balance over every node's rows.
pub fn rebuild(inputs: &LedgerInputs, hours: &[Span], kept: Vec<GpuHour>) -> LedgerOutput {
    let prepared = prepare(inputs, hours);
    let rows = prepared
        .nodes
        .iter()
        .flat_map(|work| {
            node_gpu_hours(&prepared.plan, work, |gpu_index| {
                inputs.telemetry.get(&(
                    work.node.cluster.clone(),
                    work.node.node.clone(),
                    gpu_index,
                ))
            })
        })
        .collect();
    finish(inputs, prepared, rows, kept)
}

/// The per-GPU work of one node, all but its telemetry: the unit a ledger build shards by (no
/// `gpu_hours` row depends on another node's data).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeWork {
    pub node: Node,
    pub price: Option<NodePrice>,
    /// The node's allocations, in the build's order.
    pub allocations: Vec<Allocation>,
    /// The reservations declared on the node.
    pub reservations: Vec<Reservation>,
    /// When the node was down (`node_down` … `node_up`), within the window.
    pub faults: Vec<Span>,
}

/// What the work of every node shares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuHoursPlan {
    pub window: Span,
    /// The hours recomputed.
    pub hours: Vec<Span>,
    pub config: ClassifyConfig,
    pub allowed_teams: Option<BTreeSet<String>>,
}

/// A build's fleet-wide first step: every node's work, and what the journal needs afterwards.
pub struct Prepared {
    pub plan: GpuHoursPlan,
    /// One per node, in the order of (cluster, node).
    pub nodes: Vec<NodeWork>,
    pub allocations: Vec<Allocation>,
    pub warnings: Vec<Warning>,
    priced: Priced,
}

/// Prices the window's billing onto nodes, builds the allocations from the events, and hands
/// each node its share of both.
pub fn prepare(inputs: &LedgerInputs, hours: &[Span]) -> Prepared {
    let window = inputs.window;
    let nodes: BTreeMap<NodeKey, &Node> = inputs
        .nodes
        .iter()
        .map(|n| ((n.cluster.clone(), n.node.clone()), n))
        .collect();
    let mut priced = price(inputs, &nodes);
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
    warnings.append(&mut priced.warnings);
    let mut node_allocations: HashMap<NodeKey, Vec<Allocation>> = HashMap::new();
    for a in &allocations {
        node_allocations
            .entry((a.cluster.clone(), a.node.clone()))
            .or_default()
            .push(a.clone());
    }
    let mut faults = fault_spans(&inputs.events, window);
    let works = nodes
        .into_iter()
        .map(|(key, node)| NodeWork {
            price: priced.prices.get(&key).cloned(),
            allocations: node_allocations.remove(&key).unwrap_or_default(),
            reservations: inputs
                .reservations
                .iter()
                .filter(|r| r.cluster == key.0 && r.node == key.1)
                .cloned()
                .collect(),
            faults: faults.remove(&key).unwrap_or_default(),
            node: node.clone(),
        })
        .collect();
    Prepared {
        plan: GpuHoursPlan {
            window,
            hours: hours.to_vec(),
            config: inputs.config,
            allowed_teams: inputs.allowed_teams.clone(),
        },
        nodes: works,
        allocations,
        warnings,
        priced,
    }
}

/// The `gpu_hours` rows of one node's GPUs in the plan's hours; `telemetry` gives a GPU's
/// telemetry by its index.
pub fn node_gpu_hours<'t>(
    plan: &GpuHoursPlan,
    work: &NodeWork,
    telemetry: impl Fn(u32) -> Option<&'t GpuTelemetry>,
) -> Vec<GpuHour> {
    let window = plan.window;
    let node = &work.node;
    let within_hours = |span: Span| -> Vec<Span> {
        plan.hours
            .iter()
            .map(|h| span.intersect(h))
            .filter(|s| !s.is_empty())
            .collect()
    };
    let owner = |a: &Allocation| Owner {
        team: resolve_team(a.labels.team.as_deref(), plan.allowed_teams.as_ref()),
        namespace: a.namespace.clone(),
        workload: a.workload.clone(),
    };
    let mut rows = Vec::new();
    for gpu_index in 0..node.gpu_count {
        let telemetry = telemetry(gpu_index);
        let gpu_allocations: Vec<&Allocation> = work
            .allocations
            .iter()
            .filter(|a| a.gpu_index == gpu_index)
            .collect();
        // Observed: every hour with a sample, and every hour an allocation covers.
        let mut observed = observed_hours(telemetry.map_or(&[], |t| &t.samples));
        observed.extend(gpu_allocations.iter().map(|a| whole_hours(a.span)));
        let mut existence: Vec<Span> = match &work.price {
            Some(NodePrice::Billed(segments)) => segments.iter().map(|p| p.span).collect(),
            _ => Vec::new(),
        };
        existence.extend(observed.iter().map(|s| s.intersect(&window)));
        let existence: Vec<Span> = existence.into_iter().flat_map(within_hours).collect();
        let prices = match &work.price {
            Some(NodePrice::Billed(segments)) => segments.clone(),
            Some(NodePrice::RateCard(rate)) => union(&existence)
                .into_iter()
                .map(|span| PriceSegment {
                    span,
                    price_per_hour: *rate,
                })
                .collect(),
            None => Vec::new(),
        };
        let timeline = GpuTimeline {
            cluster: node.cluster.clone(),
            node: node.node.clone(),
            gpu_index,
            gpu_uuid: telemetry.and_then(|t| t.gpu_uuid.clone()),
            existence,
            allocations: gpu_allocations,
            reservations: work
                .reservations
                .iter()
                .filter(|r| {
                    r.gpu_indices
                        .as_ref()
                        .is_none_or(|g| g.contains(&gpu_index))
                })
                .map(|r| (r.span.intersect(&window), r.reason.clone()))
                .collect(),
            faults: work
                .faults
                .iter()
                .copied()
                .chain(
                    telemetry
                        .into_iter()
                        .flat_map(|t| xid_faults(&t.xid, window)),
                )
                .collect(),
            samples: telemetry.map_or(Cow::Owned(Vec::new()), |t| Cow::Borrowed(&t.samples)),
            pod_samples: telemetry.map_or_else(Cow::default, |t| Cow::Borrowed(&t.pod_samples)),
            prices,
        };
        rows.extend(gpu_hours(&timeline, &plan.config, owner));
    }
    rows
}

/// The build's last step: every node's `rows` and the `kept` ones in one order, then the
/// journal and balance over them.
pub fn finish(
    inputs: &LedgerInputs,
    prepared: Prepared,
    mut rows: Vec<GpuHour>,
    kept: Vec<GpuHour>,
) -> LedgerOutput {
    rows.extend(kept);
    // A total order, so that kept and recomputed rows journal alike whatever their origin (and
    // whichever shard computed them).
    fn row_order(r: &GpuHour) -> impl Ord + '_ {
        (
            (&r.cluster, &r.node, r.gpu_index, r.hour),
            (&r.owner, &r.reserved_reason),
        )
    }
    rows.sort_by(|a, b| row_order(a).cmp(&row_order(b)));
    let (cost_entries, balance) = journal_stage(inputs, &prepared.priced, &rows);
    LedgerOutput {
        allocations: prepared.allocations,
        gpu_hours: rows,
        cost_entries,
        balance,
        warnings: prepared.warnings,
    }
}

/// Billing and manual costs, split into GPU prices per node and shared items.
struct Priced {
    /// Billed GPU prices per node; nodes priced by the rate card have their one price here.
    prices: HashMap<NodeKey, NodePrice>,
    shared_items: Vec<SharedItem>,
    billed: Money,
    manual: Money,
    warnings: Vec<Warning>,
}

/// What a node's GPU time costs in the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum NodePrice {
    /// The prices its billing lines set, each over its span.
    Billed(Vec<PriceSegment>),
    /// The rate card's price per GPU-hour, over the time its GPUs are seen.
    RateCard(f64),
}

/// Whether a billing line's `resource_id` names `node`.
pub fn matches_node(line_resource: &str, node: &Node) -> bool {
    node.resource_id
        .as_deref()
        .is_some_and(|r| !r.is_empty() && (line_resource == r || line_resource.ends_with(r)))
}

/// The node a billing line is for: the first (by cluster and name) whose resource id it names.
pub fn line_node<'a>(line: &BillingItem, nodes: &BTreeMap<NodeKey, &'a Node>) -> Option<&'a Node> {
    let id = line.resource_id.as_deref()?;
    nodes.values().copied().find(|n| matches_node(id, n))
}

/// The rate of each node that no billing line prices in `window` — the nodes a build of that
/// window costs by the rate card — worked out from the declared inputs alone, so that
/// `ledger check` recomputes the rate-card side instead of reading the journal's figure back.
pub fn rate_card_rates(
    nodes: &[Node],
    billing: &[BillingItem],
    rate_card: &[RateCardEntry],
    window: Span,
) -> BTreeMap<NodeKey, f64> {
    let nodes: BTreeMap<NodeKey, &Node> = nodes
        .iter()
        .map(|n| ((n.cluster.clone(), n.node.clone()), n))
        .collect();
    let billed: BTreeSet<NodeKey> = billing
        .iter()
        .filter_map(|line| {
            let node = line_node(line, &nodes)?;
            let price = split_node_line(
                line.effective_cost,
                line.charge_period,
                node.gpu_count,
                node.gpu_cost_share,
            )
            .gpu_price?;
            (!price.span.intersect(&window).is_empty())
                .then(|| (node.cluster.clone(), node.node.clone()))
        })
        .collect();
    nodes
        .into_iter()
        .filter(|(key, _)| !billed.contains(key))
        .filter_map(|(key, node)| Some((key, rate_card_price(rate_card, node)?)))
        .collect()
}

/// Where one billing line's cost goes: a node's line prices the node's GPUs over its period
/// (`price.rs`) and leaves the non-GPU part to the shared pools as `node_overhead`; any other
/// line is shared whole.
#[derive(Debug, Clone, PartialEq)]
pub struct LineParts {
    /// The price per GPU-hour on each GPU of the node the line is for.
    pub gpu_price: Option<(NodeKey, PriceSegment)>,
    pub shared: Option<SharedItem>,
}

pub fn line_parts(line: &BillingItem, node: Option<&Node>) -> LineParts {
    let Some(node) = node else {
        return LineParts {
            gpu_price: None,
            shared: Some(SharedItem {
                period: line.charge_period,
                amount: line.effective_cost,
                source: "billing".into(),
                attributes: line.attributes.clone(),
            }),
        };
    };
    let split = split_node_line(
        line.effective_cost,
        line.charge_period,
        node.gpu_count,
        node.gpu_cost_share,
    );
    let shared = (!split.shared.is_zero()).then(|| {
        let mut attributes = line.attributes.clone();
        attributes.insert("kind".into(), "node_overhead".into());
        attributes.insert("node".into(), node.node.clone());
        SharedItem {
            period: line.charge_period,
            amount: split.shared,
            source: "billing".into(),
            attributes,
        }
    });
    LineParts {
        gpu_price: split
            .gpu_price
            .map(|price| ((node.cluster.clone(), node.node.clone()), price)),
        shared,
    }
}

fn price(inputs: &LedgerInputs, nodes: &BTreeMap<NodeKey, &Node>) -> Priced {
    let window = inputs.window;
    let mut priced = Priced {
        prices: HashMap::new(),
        shared_items: Vec::new(),
        billed: Money::ZERO,
        manual: Money::ZERO,
        warnings: Vec::new(),
    };
    let mut billed_segments: HashMap<NodeKey, Vec<PriceSegment>> = HashMap::new();
    // Node lines become GPU prices plus the node's non-GPU remainder; other lines are shared.
    // In one canonical order, so that the same lines price alike however they arrived.
    let mut lines: Vec<&BillingItem> = inputs.billing.iter().collect();
    lines.sort_by(|a, b| {
        let key = |l: &BillingItem| {
            (
                l.charge_period,
                l.resource_id.clone(),
                l.effective_cost,
                l.attributes.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
    for line in lines {
        priced.billed += by_day(line.effective_cost, line.charge_period, window)
            .iter()
            .map(|(_, a)| a)
            .sum::<Money>();
        let parts = line_parts(line, line_node(line, nodes));
        if let Some((node, price)) = parts.gpu_price {
            let span = price.span.intersect(&window);
            if !span.is_empty() {
                billed_segments
                    .entry(node)
                    .or_default()
                    .push(PriceSegment { span, ..price });
            }
        }
        priced.shared_items.extend(parts.shared);
    }
    for cost in &inputs.manual_costs {
        priced.manual += by_day(cost.amount, cost.period, window)
            .iter()
            .map(|(_, a)| a)
            .sum::<Money>();
        let attributes = [
            ("kind", "manual"),
            ("category", cost.category.as_str()),
            ("name", cost.name.as_str()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        priced.shared_items.push(SharedItem {
            period: cost.period,
            amount: cost.amount,
            source: "manual".into(),
            attributes,
        });
    }
    for (key, node) in nodes {
        match billed_segments.remove(key) {
            Some(segments) => {
                priced.prices.insert(key.clone(), NodePrice::Billed(segments));
            }
            None => match rate_card_price(&inputs.rate_card, node) {
                Some(rate) => {
                    priced.prices.insert(key.clone(), NodePrice::RateCard(rate));
                }
                None => priced.warnings.push(Warning {
                    ts: window.start,
                    subject: format!("{}/{}", key.0, key.1),
                    message: "no billing line and no rate-card price: its GPU time is counted at zero cost".into(),
                }),
            },
        }
    }
    priced
}

fn journal_stage(
    inputs: &LedgerInputs,
    priced: &Priced,
    rows: &[GpuHour],
) -> (Vec<CostEntry>, Balance) {
    let from_rate_card = |row: &GpuHour| {
        matches!(
            priced.prices.get(&(row.cluster.clone(), row.node.clone())),
            Some(NodePrice::RateCard(_))
        )
    };
    let cost_entries = journal(
        rows,
        |row| {
            if from_rate_card(row) {
                "rate_card"
            } else {
                "billing"
            }
        },
        &priced.shared_items,
        &inputs.rules,
        &inputs.usage,
        inputs.window,
    );
    let balance = Balance {
        billed: priced.billed,
        manual: priced.manual,
        rate_card: rows
            .iter()
            .filter(|r| from_rate_card(r))
            .map(|r| r.cost)
            .sum(),
        accounted: cost_entries.iter().map(|e| e.amount).sum(),
    };
    (cost_entries, balance)
}

fn rate_card_price(rate_card: &[RateCardEntry], node: &Node) -> Option<f64> {
    rate_card
        .iter()
        .find(|r| r.gpu_model == node.gpu_model && r.capacity_type == node.capacity_type)
        .or_else(|| rate_card.iter().find(|r| r.gpu_model == node.gpu_model))
        .map(|r| r.price_per_gpu_hour)
}

/// The whole hours a span touches.
fn whole_hours(span: Span) -> Span {
    Span::new(
        floor_hour(span.start),
        floor_hour(span.end - 1) + MICROS_PER_HOUR,
    )
}

/// The XIDs that mean the GPU cannot run work until it is reset or replaced (NVIDIA's XID
/// catalogue): 48 double-bit ECC error, 63 and 64 row remapping (pending / failed), 74 NVLink
/// error, 79 fallen off the bus, 94 and 95 contained and uncontained ECC errors. Other XIDs
/// (13 graphics engine exception, 31 MMU fault, 43 a stopped process, …) are the workload's own
/// faults, not the device's.
pub const FAULT_XIDS: [u32; 7] = [48, 63, 64, 74, 79, 94, 95];

/// GPU faults from `DCGM_FI_DEV_XID_ERRORS`: from the first reading of a fault XID until the
/// GPU reports something else (0 after a reset, or another XID). dcgm-exporter keeps the last
/// XID until the GPU is reset, and a GPU that fell off the bus reports nothing more, so a fault
/// with no later reading lasts until the window's end.
fn xid_faults(readings: &[(Micros, u32)], window: Span) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut since: Option<Micros> = None;
    for &(ts, xid) in readings {
        match (FAULT_XIDS.contains(&xid), since) {
            (true, None) => since = Some(ts),
            (false, Some(start)) => {
                spans.push(Span::new(start, ts));
                since = None;
            }
            _ => {}
        }
    }
    if let Some(start) = since {
        spans.push(Span::new(start, window.end.max(start)));
    }
    spans
        .into_iter()
        .map(|s| s.intersect(&window))
        .filter(|s| !s.is_empty())
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
pub(crate) mod tests;
