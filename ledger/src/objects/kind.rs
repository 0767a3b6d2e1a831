//! The kinds of declared objects, as `gpuledger apply` and the API name them.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    Node,
    Reservation,
    SharedCostRule,
    RateCard,
    ManualCost,
    LabelPolicy,
    Slo,
    SpotOperationsCost,
    ValueMapping,
    Budget,
    ScrapeTarget,
}

impl ObjectKind {
    pub const ALL: [ObjectKind; 11] = [
        ObjectKind::Node,
        ObjectKind::Reservation,
        ObjectKind::SharedCostRule,
        ObjectKind::RateCard,
        ObjectKind::ManualCost,
        ObjectKind::LabelPolicy,
        ObjectKind::Slo,
        ObjectKind::SpotOperationsCost,
        ObjectKind::ValueMapping,
        ObjectKind::Budget,
        ObjectKind::ScrapeTarget,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ObjectKind::Node => "node",
            ObjectKind::Reservation => "reservation",
            ObjectKind::SharedCostRule => "shared_cost_rule",
            ObjectKind::RateCard => "rate_card",
            ObjectKind::ManualCost => "manual_cost",
            ObjectKind::LabelPolicy => "label_policy",
            ObjectKind::Slo => "slo",
            ObjectKind::SpotOperationsCost => "spot_operations_cost",
            ObjectKind::ValueMapping => "value_mapping",
            ObjectKind::Budget => "budget",
            ObjectKind::ScrapeTarget => "scrape_target",
        }
    }

    /// Spec fields a listing shows beside the name.
    pub fn columns(self) -> &'static [&'static str] {
        match self {
            ObjectKind::Node => &["gpu_model", "gpu_count", "capacity_type", "resource_id"],
            ObjectKind::Reservation => &["cluster", "node", "gpu_indices", "from", "to", "reason"],
            ObjectKind::SharedCostRule => &["priority", "strategy", "basis", "matches"],
            ObjectKind::RateCard => &["price_per_gpu_hour", "currency"],
            ObjectKind::ManualCost => &["category", "amount", "currency", "from", "to"],
            ObjectKind::LabelPolicy => &[
                "team",
                "environment",
                "workload_type",
                "model",
                "cost_center",
            ],
            ObjectKind::Slo => &["ttft_ms", "latency_ms", "success_statuses", "objective"],
            ObjectKind::ValueMapping => &[
                "product_line",
                "metric",
                "at_most",
                "at_least",
                "event",
                "value",
                "per",
                "currency",
            ],
            ObjectKind::SpotOperationsCost => {
                &["cluster", "node", "per_month", "per_gpu_hour", "currency"]
            }
            ObjectKind::Budget => &[
                "team",
                "namespace",
                "cost_center",
                "amount",
                "currency",
                "thresholds",
            ],
            ObjectKind::ScrapeTarget => &["url", "interval", "cluster", "labels"],
        }
    }

    /// The integer spec field that orders objects of this kind before their names, where order
    /// matters: the first shared-cost rule that matches a cost takes it.
    pub fn order_field(self) -> Option<&'static str> {
        match self {
            ObjectKind::SharedCostRule => Some("priority"),
            _ => None,
        }
    }
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ObjectKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ObjectKind::ALL
            .into_iter()
            .find(|kind| kind.name() == s)
            .ok_or_else(|| {
                let known: Vec<&str> = ObjectKind::ALL.iter().map(|k| k.name()).collect();
                format!("unknown kind '{s}'; known kinds: {}", known.join(", "))
            })
    }
}
