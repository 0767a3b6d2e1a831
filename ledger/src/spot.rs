//! Spot economics (docs/design.md §7): did spot capacity pay? Per spot node over a window:
//! net savings = on-demand equivalent − spot cost − recompute cost − declared operations cost,
//! negative when it did not.
//!
//! Rules:
//! - a node is **spot** when its catalog object says `capacity_type: spot`, else when one of its
//!   billing lines in the window has FOCUS `PricingCategory` `Dynamic` (FOCUS's category for spot
//!   and interruptible prices), else when a line's `ChargeDescription` names `spot` (providers
//!   without a pricing category, e.g. "Linux/UNIX Spot Instance-hour");
//! - a billed node's **spot cost** and **on-demand equivalent** are its billing lines'
//!   `EffectiveCost` and `ListCost`, prorated over the window; a node without billing (or a line
//!   without a list cost) is priced by the rate card: its GPU-hours in the ledger at the spot price
//!   and at the `on_demand` price of its GPU model;
//! - **recompute cost**: the GPU-hours that preempted runs of training workloads on the node lost
//!   after their last checkpoint ([`crate::training::Run::lost_gpu_hours`]), at the node's GPU-hour
//!   price in the ledger (its GPU cost over its GPU-hours in the window);
//! - **operations cost**: every `spot_operations_cost` object whose cluster and node patterns match
//!   the node, `per_month` over the window (a month is [`HOURS_PER_MONTH`]) plus `per_gpu_hour` ×
//!   the node's GPU-hours.

use serde::{Deserialize, Serialize};

use crate::build::Node;
use crate::journal::{by_day, glob_match};
use crate::time::Span;

/// Hours in a billing month (8,760 / 12), as cloud price sheets count them.
pub const HOURS_PER_MONTH: f64 = 730.0;

/// Why a node counts as spot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpotEvidence {
    CapacityType,
    PricingCategory,
    ChargeDescription,
}

impl SpotEvidence {
    pub fn name(self) -> &'static str {
        match self {
            SpotEvidence::CapacityType => "capacity_type",
            SpotEvidence::PricingCategory => "pricing_category",
            SpotEvidence::ChargeDescription => "charge_description",
        }
    }
}

/// One billing line of a node, as the spot rule and the costs read it.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeLine<'a> {
    pub charge_period: Span,
    pub effective_cost: f64,
    pub list_cost: Option<f64>,
    pub pricing_category: Option<&'a str>,
    pub charge_description: Option<&'a str>,
}

/// Whether `node` ran on spot capacity, by the first rule that says so (see the module).
pub fn spot_evidence(node: &Node, lines: &[NodeLine]) -> Option<SpotEvidence> {
    if node.capacity_type == "spot" {
        return Some(SpotEvidence::CapacityType);
    }
    if lines.iter().any(|l| {
        l.pricing_category
            .is_some_and(|c| c.eq_ignore_ascii_case("dynamic"))
    }) {
        return Some(SpotEvidence::PricingCategory);
    }
    lines
        .iter()
        .any(|l| {
            l.charge_description
                .is_some_and(|d| d.to_lowercase().contains("spot"))
        })
        .then_some(SpotEvidence::ChargeDescription)
}

/// The declared cost of running on spot that no bill shows (interruption handling, checkpoint
/// storage, on-call time), per matching node (`spot_operations_cost` catalog objects).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperationsCostSpec {
    pub name: String,
    /// Cluster and node name patterns (`*` for any run of characters); default every node.
    #[serde(default = "any")]
    pub cluster: String,
    #[serde(default = "any")]
    pub node: String,
    /// Per node and month, spread over the window's hours.
    #[serde(default)]
    pub per_month: Option<f64>,
    /// Per GPU-hour of the node in the ledger.
    #[serde(default)]
    pub per_gpu_hour: Option<f64>,
    #[serde(default = "crate::objects::default_currency")]
    pub currency: String,
}

fn any() -> String {
    "*".into()
}

impl OperationsCostSpec {
    pub fn applies_to(&self, cluster: &str, node: &str) -> bool {
        glob_match(&self.cluster, cluster) && glob_match(&self.node, node)
    }

    /// The cost for one node over a window of `window_hours` in which it ran `gpu_hours`.
    pub fn amount(&self, window_hours: f64, gpu_hours: f64) -> f64 {
        self.per_month.unwrap_or(0.0) * window_hours / HOURS_PER_MONTH
            + self.per_gpu_hour.unwrap_or(0.0) * gpu_hours
    }
}

/// What the ledger knows about one spot node over a window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpotNode {
    /// The node's GPU-hours in `gpu_hours` (every class) and their cost.
    pub gpu_hours: f64,
    pub gpu_cost: f64,
    /// `(effective, list)` of its billing lines prorated over the window; `None` without lines.
    pub billed: Option<(f64, Option<f64>)>,
    /// The rate card's `on_demand` price of its GPU model.
    pub on_demand_rate: Option<f64>,
    /// GPU-hours preempted training runs on it lost after their last checkpoint.
    pub lost_gpu_hours: f64,
    pub operations_cost: f64,
}

/// Sums a node's billing lines over a window: `(effective, list)`, the list cost `None` when a
/// line lacks it; `None` without lines.
pub fn billed_in(lines: &[NodeLine], window: Span) -> Option<(f64, Option<f64>)> {
    let prorated = |amount: f64, period: Span| -> f64 {
        by_day(crate::money::Money::from_f64(amount), period, window)
            .into_iter()
            .map(|(_, part)| part)
            .sum::<crate::money::Money>()
            .to_f64()
    };
    (!lines.is_empty()).then(|| {
        let effective = lines
            .iter()
            .map(|l| prorated(l.effective_cost, l.charge_period))
            .fold(0.0, |total, part| total + part);
        let list = lines
            .iter()
            .map(|l| l.list_cost.map(|list| prorated(list, l.charge_period)))
            .try_fold(0.0, |total, part| part.map(|part| total + part));
        (effective, list)
    })
}

/// Where the on-demand equivalent came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnDemandSource {
    ListCost,
    RateCard,
}

impl OnDemandSource {
    pub fn name(self) -> &'static str {
        match self {
            OnDemandSource::ListCost => "list_cost",
            OnDemandSource::RateCard => "rate_card",
        }
    }
}

/// One node's spot economics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Savings {
    /// `None` when neither a list cost nor an on-demand rate is known.
    pub on_demand: Option<(f64, OnDemandSource)>,
    pub spot_cost: f64,
    /// The node's GPU-hour price in the ledger; `None` without GPU-hours.
    pub gpu_price: Option<f64>,
    pub recompute_cost: f64,
    pub operations_cost: f64,
}

impl Savings {
    /// On-demand equivalent − spot cost.
    pub fn discount(&self) -> Option<f64> {
        self.on_demand
            .map(|(on_demand, _)| on_demand - self.spot_cost)
    }

    /// Discount − recompute cost − operations cost; negative when spot did not pay.
    pub fn net(&self) -> Option<f64> {
        self.discount()
            .map(|discount| discount - self.recompute_cost - self.operations_cost)
    }
}

pub fn savings(node: &SpotNode) -> Savings {
    let gpu_price = (node.gpu_hours > 0.0).then(|| node.gpu_cost / node.gpu_hours);
    let rate_card = node
        .on_demand_rate
        .map(|rate| (rate * node.gpu_hours, OnDemandSource::RateCard));
    let (spot_cost, on_demand) = match node.billed {
        Some((effective, Some(list))) => (effective, Some((list, OnDemandSource::ListCost))),
        Some((effective, None)) => (effective, rate_card),
        None => (node.gpu_cost, rate_card),
    };
    Savings {
        on_demand,
        spot_cost,
        gpu_price,
        recompute_cost: node.lost_gpu_hours * gpu_price.unwrap_or(0.0),
        operations_cost: node.operations_cost,
    }
}

#[cfg(test)]
mod tests;
