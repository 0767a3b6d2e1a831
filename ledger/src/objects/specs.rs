//! The spec of each kind: its typed form (the ledger's own types where it has them), the checks
//! its types cannot say, and its name.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::amortize::Strategy;
use crate::budget::BudgetSpec;
use crate::build::{ManualCost, Node, RateCardEntry, Reservation};
use crate::journal::{Basis, SharedCostRule};
use crate::spot::OperationsCostSpec;
use crate::unit_economics::{ANY_PRIORITY, PRIORITIES, SloSpec};
use crate::value::{COUNTS, METRICS, ValueMappingSpec};

use super::checks::{
    at_least_one, check_name, currency, name_part, non_negative, not_empty, one_of, period,
    rfc3339, span,
};
use super::{ObjectKind, Spec, ValidationError, deserialize, join};

pub const CAPACITY_TYPES: [&str; 3] = ["on_demand", "spot", "reserved"];

/// Why reserved GPUs sit idle on purpose (docs/design.md §5).
pub const RESERVATION_REASONS: [&str; 6] = [
    "ha_redundancy",
    "release_overlap",
    "gang_wait",
    "warm_pool",
    "maintenance",
    "latency_guarantee",
];

/// The one label policy's name: applying another policy replaces it.
pub const LABEL_POLICY_NAME: &str = "default";

impl Spec for Node {
    const KIND: ObjectKind = ObjectKind::Node;

    fn from_spec(spec: &Value) -> Result<Self, ValidationError> {
        deserialize(spec)
    }

    fn natural_name(&self) -> Option<String> {
        Some(format!("{}/{}", self.cluster, self.node))
    }

    fn check(&self) -> Result<(), ValidationError> {
        name_part("cluster", &self.cluster)?;
        name_part("node", &self.node)?;
        if let Some(resource_id) = &self.resource_id {
            not_empty("resource_id", resource_id)?;
        }
        at_least_one("gpu_count", self.gpu_count)?;
        not_empty("gpu_model", &self.gpu_model)?;
        one_of("capacity_type", &self.capacity_type, &CAPACITY_TYPES)?;
        if !(0.0..=1.0).contains(&self.gpu_cost_share) {
            return Err(ValidationError::new(
                "gpu_cost_share",
                format!("must be between 0 and 1 (got {})", self.gpu_cost_share),
            ));
        }
        at_least_one("gpu_replicas", self.gpu_replicas)
    }
}

/// GPUs held idle on purpose, so their idle time is `reserved:<reason>`, not waste.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReservationSpec {
    pub cluster: String,
    pub node: String,
    /// The reserved GPUs by index; absent for every GPU of the node.
    #[serde(default)]
    pub gpu_indices: Option<BTreeSet<u32>>,
    #[serde(with = "rfc3339")]
    pub from: DateTime<Utc>,
    #[serde(with = "rfc3339")]
    pub to: DateTime<Utc>,
    /// One of [`RESERVATION_REASONS`].
    pub reason: String,
    #[serde(default)]
    pub note: Option<String>,
}

impl Spec for ReservationSpec {
    const KIND: ObjectKind = ObjectKind::Reservation;

    fn from_spec(spec: &Value) -> Result<Self, ValidationError> {
        deserialize(spec)
    }

    fn natural_name(&self) -> Option<String> {
        None
    }

    fn check(&self) -> Result<(), ValidationError> {
        not_empty("cluster", &self.cluster)?;
        not_empty("node", &self.node)?;
        if self.gpu_indices.as_ref().is_some_and(BTreeSet::is_empty) {
            return Err(ValidationError::new(
                "gpu_indices",
                "must list at least one GPU (leave gpu_indices out to reserve every GPU of the node)",
            ));
        }
        period(self.from, self.to)?;
        one_of("reason", &self.reason, &RESERVATION_REASONS)
    }
}

impl From<&ReservationSpec> for Reservation {
    fn from(spec: &ReservationSpec) -> Self {
        Reservation {
            cluster: spec.cluster.clone(),
            node: spec.node.clone(),
            gpu_indices: spec
                .gpu_indices
                .as_ref()
                .map(|indices| indices.iter().copied().collect()),
            span: span(spec.from, spec.to),
            reason: spec.reason.clone(),
        }
    }
}

/// A ledger type with fields only the catalog keeps beside it (a rule's priority, a price's
/// currency), written as one flat spec.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Extended<T, X> {
    #[serde(flatten)]
    pub base: T,
    #[serde(flatten)]
    pub extra: X,
}

impl<T: DeserializeOwned, X: DeserializeOwned> Extended<T, X> {
    /// Both parts read the same flat spec, each its own fields (unknown fields are rejected
    /// afterwards). Not `#[serde(flatten)]` on the way in: serde buffers flattened fields, and
    /// errors inside them lose their path.
    fn read(spec: &Value) -> Result<Self, ValidationError> {
        Ok(Self {
            base: deserialize(spec)?,
            extra: deserialize(spec)?,
        })
    }
}

/// Rules are tried by ascending priority (then name); the first that matches a cost takes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Priority {
    pub priority: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Currency {
    /// An ISO 4217 code.
    #[serde(default = "default_currency")]
    pub currency: String,
}

pub(crate) fn default_currency() -> String {
    "USD".into()
}

/// A shared-cost rule and its priority; the ledger build takes the rules in [`Object::apply_order`].
pub type SharedCostRuleSpec = Extended<SharedCostRule, Priority>;
pub type RateCardSpec = Extended<RateCardEntry, Currency>;

impl Spec for SharedCostRuleSpec {
    const KIND: ObjectKind = ObjectKind::SharedCostRule;

    fn from_spec(spec: &Value) -> Result<Self, ValidationError> {
        Self::read(spec).map_err(|error| {
            if !error.path.is_empty() {
                return error;
            }
            // The strategy is flattened into the rule (`strategy: fixed` beside `weights`) and
            // serde reads flattened fields from a buffer that loses their paths: an error left at
            // the rule itself comes from there.
            match spec
                .get("weights")
                .map(deserialize::<BTreeMap<String, f64>>)
            {
                Some(Err(error)) => error.under("weights"),
                _ => ValidationError::new("strategy", error.message),
            }
        })
    }

    fn natural_name(&self) -> Option<String> {
        Some(self.base.name.clone())
    }

    fn check(&self) -> Result<(), ValidationError> {
        let rule = &self.base;
        check_name("name", &rule.name)?;
        for (key, pattern) in &rule.matches {
            not_empty("matches", key)?;
            not_empty(&join("matches", key), pattern)?;
        }
        if let Strategy::Fixed { weights } = &rule.strategy {
            for (team, weight) in weights {
                not_empty("weights", team)?;
                non_negative(&join("weights", team), *weight)?;
            }
            if !weights.values().any(|w| *w > 0.0) {
                return Err(ValidationError::new(
                    "weights",
                    "must give at least one team a positive weight",
                ));
            }
        }
        match &rule.basis {
            Basis::Usage(measure) => not_empty("basis.usage", measure),
            _ if rule.strategy == Strategy::Usage => Err(ValidationError::new(
                "basis",
                "the usage strategy spreads by a usage measure: set basis to {usage: <measure>}",
            )),
            _ => Ok(()),
        }
    }
}

impl Spec for RateCardSpec {
    const KIND: ObjectKind = ObjectKind::RateCard;

    fn from_spec(spec: &Value) -> Result<Self, ValidationError> {
        Self::read(spec)
    }

    fn natural_name(&self) -> Option<String> {
        Some(format!(
            "{}/{}",
            self.base.gpu_model, self.base.capacity_type
        ))
    }

    fn check(&self) -> Result<(), ValidationError> {
        name_part("gpu_model", &self.base.gpu_model)?;
        one_of("capacity_type", &self.base.capacity_type, &CAPACITY_TYPES)?;
        non_negative("price_per_gpu_hour", self.base.price_per_gpu_hour)?;
        currency("currency", &self.extra.currency)
    }
}

/// A cost entered by hand (licenses, people, support, …), spread evenly over `[from, to)` and
/// amortized like other shared costs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManualCostSpec {
    pub name: String,
    /// Free text such as `licenses` or `people`; shared-cost rules can match on it.
    pub category: String,
    /// The whole amount over the period; negative for a credit.
    pub amount: f64,
    #[serde(default = "default_currency")]
    pub currency: String,
    #[serde(with = "rfc3339")]
    pub from: DateTime<Utc>,
    #[serde(with = "rfc3339")]
    pub to: DateTime<Utc>,
}

impl Spec for ManualCostSpec {
    const KIND: ObjectKind = ObjectKind::ManualCost;

    fn from_spec(spec: &Value) -> Result<Self, ValidationError> {
        deserialize(spec)
    }

    fn natural_name(&self) -> Option<String> {
        Some(self.name.clone())
    }

    fn check(&self) -> Result<(), ValidationError> {
        check_name("name", &self.name)?;
        not_empty("category", &self.category)?;
        if !self.amount.is_finite() {
            return Err(ValidationError::new("amount", "must be a finite number"));
        }
        currency("currency", &self.currency)?;
        period(self.from, self.to)
    }
}

impl From<&ManualCostSpec> for ManualCost {
    fn from(spec: &ManualCostSpec) -> Self {
        ManualCost {
            name: spec.name.clone(),
            category: spec.category.clone(),
            amount: crate::money::Money::from_f64(spec.amount),
            period: span(spec.from, spec.to),
        }
    }
}

/// The allowed values of each attribution label (docs/design.md §3). A label left out accepts any
/// value; a value outside its list still lands, and is reported as unattributed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LabelPolicy {
    #[serde(default)]
    pub team: Option<BTreeSet<String>>,
    #[serde(default)]
    pub environment: Option<BTreeSet<String>>,
    #[serde(default)]
    pub workload_type: Option<BTreeSet<String>>,
    #[serde(default)]
    pub model: Option<BTreeSet<String>>,
    #[serde(default)]
    pub cost_center: Option<BTreeSet<String>>,
}

impl LabelPolicy {
    /// The teams the ledger attributes cost to; `None` accepts every team.
    pub fn allowed_teams(&self) -> Option<BTreeSet<String>> {
        self.team.clone()
    }

    pub(super) fn labels(&self) -> [(&'static str, &Option<BTreeSet<String>>); 5] {
        [
            ("team", &self.team),
            ("environment", &self.environment),
            ("workload_type", &self.workload_type),
            ("model", &self.model),
            ("cost_center", &self.cost_center),
        ]
    }
}

impl Spec for LabelPolicy {
    const KIND: ObjectKind = ObjectKind::LabelPolicy;

    fn from_spec(spec: &Value) -> Result<Self, ValidationError> {
        deserialize(spec)
    }

    fn natural_name(&self) -> Option<String> {
        Some(LABEL_POLICY_NAME.to_string())
    }

    fn check(&self) -> Result<(), ValidationError> {
        for (label, allowed) in self.labels() {
            let Some(allowed) = allowed else { continue };
            if allowed.is_empty() {
                return Err(ValidationError::new(
                    label,
                    "must allow at least one value (leave the label out to allow any value)",
                ));
            }
            for value in allowed {
                not_empty(label, value)?;
            }
        }
        Ok(())
    }
}

/// Named `model/priority`: the priority never holds a `/`, so a model name may.
impl Spec for SloSpec {
    const KIND: ObjectKind = ObjectKind::Slo;

    fn from_spec(spec: &Value) -> Result<Self, ValidationError> {
        deserialize(spec)
    }

    fn natural_name(&self) -> Option<String> {
        Some(format!("{}/{}", self.model, self.priority))
    }

    fn check(&self) -> Result<(), ValidationError> {
        check_name("model", &self.model)?;
        let mut priorities = PRIORITIES.to_vec();
        priorities.push(ANY_PRIORITY);
        one_of("priority", &self.priority, &priorities)?;
        for (path, target) in [("ttft_ms", self.ttft_ms), ("latency_ms", self.latency_ms)] {
            if let Some(target) = target {
                non_negative(path, target)?;
            }
        }
        if self.success_statuses.is_empty() {
            return Err(ValidationError::new(
                "success_statuses",
                "must name at least one status (leave it out for [success])",
            ));
        }
        for status in &self.success_statuses {
            not_empty("success_statuses", status)?;
        }
        if let Some(objective) = self.objective
            && !(0.0..=1.0).contains(&objective)
        {
            return Err(ValidationError::new(
                "objective",
                format!("must be between 0 and 1 (got {objective})"),
            ));
        }
        Ok(())
    }
}

impl Spec for OperationsCostSpec {
    const KIND: ObjectKind = ObjectKind::SpotOperationsCost;

    fn from_spec(spec: &Value) -> Result<Self, ValidationError> {
        deserialize(spec)
    }

    fn natural_name(&self) -> Option<String> {
        Some(self.name.clone())
    }

    fn check(&self) -> Result<(), ValidationError> {
        check_name("name", &self.name)?;
        not_empty("cluster", &self.cluster)?;
        not_empty("node", &self.node)?;
        let amounts = [
            ("per_month", self.per_month),
            ("per_gpu_hour", self.per_gpu_hour),
        ];
        if amounts.iter().all(|(_, amount)| amount.is_none()) {
            return Err(ValidationError::new(
                "per_month",
                "set per_month, per_gpu_hour or both",
            ));
        }
        for (path, amount) in amounts {
            if let Some(amount) = amount {
                non_negative(path, amount)?;
            }
        }
        currency("currency", &self.currency)
    }
}

impl Spec for ValueMappingSpec {
    const KIND: ObjectKind = ObjectKind::ValueMapping;

    fn from_spec(spec: &Value) -> Result<Self, ValidationError> {
        deserialize(spec)
    }

    fn natural_name(&self) -> Option<String> {
        Some(self.name.clone())
    }

    fn check(&self) -> Result<(), ValidationError> {
        check_name("name", &self.name)?;
        not_empty("product_line", &self.product_line)?;
        one_of("metric", &self.metric, &METRICS)?;
        if self.at_most.is_none() && self.at_least.is_none() {
            return Err(ValidationError::new(
                "at_most",
                "set the condition: at_most, at_least or both",
            ));
        }
        for (path, bound) in [("at_most", self.at_most), ("at_least", self.at_least)] {
            if bound.is_some_and(|b| !b.is_finite()) {
                return Err(ValidationError::new(path, "must be a finite number"));
            }
        }
        for (path, filter) in [
            ("model", &self.model),
            ("team", &self.team),
            ("namespace", &self.namespace),
        ] {
            if let Some(filter) = filter {
                not_empty(path, filter)?;
            }
        }
        not_empty("event", &self.event)?;
        one_of("counts", &self.counts, &COUNTS)?;
        non_negative("value", self.value)?;
        if !(self.per.is_finite() && self.per > 0.0) {
            return Err(ValidationError::new(
                "per",
                format!("must be a number > 0 (got {})", self.per),
            ));
        }
        currency("currency", &self.currency)
    }
}

/// Named by its document. Its `team` (when it watches a team) is what a team-scoped token sees.
impl Spec for BudgetSpec {
    const KIND: ObjectKind = ObjectKind::Budget;

    fn from_spec(spec: &Value) -> Result<Self, ValidationError> {
        let mut budget: BudgetSpec = deserialize(spec)?;
        // The normal form lists thresholds in ascending order.
        budget.thresholds.sort_by(f64::total_cmp);
        Ok(budget)
    }

    fn natural_name(&self) -> Option<String> {
        None
    }

    fn check(&self) -> Result<(), ValidationError> {
        match self.targets().as_slice() {
            [] => {
                return Err(ValidationError::new(
                    "team",
                    "set exactly one of team, namespace, cost_center",
                ));
            }
            [(_, _)] => {}
            [(first, _), (second, _), ..] => {
                return Err(ValidationError::new(
                    *second,
                    format!("set exactly one of team, namespace, cost_center ({first} is set)"),
                ));
            }
        }
        for (path, target) in [
            ("team", &self.team),
            ("namespace", &self.namespace),
            ("cost_center", &self.cost_center),
        ] {
            if let Some(target) = target {
                check_name(path, target)?;
            }
        }
        if !(self.amount.is_finite() && self.amount > 0.0) {
            return Err(ValidationError::new(
                "amount",
                format!("must be a number > 0 (got {})", self.amount),
            ));
        }
        currency("currency", &self.currency)?;
        if self.thresholds.is_empty() {
            return Err(ValidationError::new(
                "thresholds",
                "must list at least one percentage (leave it out for [50, 80, 100])",
            ));
        }
        for (i, threshold) in self.thresholds.iter().enumerate() {
            if !(threshold.is_finite() && *threshold > 0.0 && *threshold <= 1000.0) {
                return Err(ValidationError::new(
                    format!("thresholds[{i}]"),
                    format!("must be a percentage > 0 and ≤ 1000 (got {threshold})"),
                ));
            }
            if i > 0 && self.thresholds[i - 1] == *threshold {
                return Err(ValidationError::new(
                    format!("thresholds[{i}]"),
                    format!("{threshold} is listed twice"),
                ));
            }
        }
        if let Some(webhook) = &self.webhook {
            let url = url::Url::parse(webhook).map_err(|error| {
                ValidationError::new("webhook", format!("is not a URL ({error})"))
            })?;
            if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
                return Err(ValidationError::new(
                    "webhook",
                    format!("must be an http:// or https:// URL with a host (got '{webhook}')"),
                ));
            }
        }
        Ok(())
    }
}

/// A dcgm-exporter `/metrics` URL that `gpuledger serve` scrapes on an interval, landing each
/// scrape like `gpuledger ingest dcgm` with the scrape time as its timestamp.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScrapeTargetSpec {
    pub url: String,
    /// How often, e.g. `15s` or `1m`.
    #[serde(default = "default_scrape_interval")]
    pub interval: String,
    pub cluster: String,
    /// Labels added to every series that lacks them, like Prometheus target labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

fn default_scrape_interval() -> String {
    "30s".into()
}

impl ScrapeTargetSpec {
    /// The interval as a duration (checked on validation).
    pub fn period(&self) -> Result<std::time::Duration, ValidationError> {
        let invalid = || {
            ValidationError::new(
                "interval",
                format!(
                    "must be a number and a unit s, m or h, at least 1s (got '{}')",
                    self.interval
                ),
            )
        };
        let text = self.interval.trim();
        let split = text
            .find(|c: char| !c.is_ascii_digit())
            .ok_or_else(invalid)?;
        let count: u64 = text[..split].parse().map_err(|_| invalid())?;
        let unit = match &text[split..] {
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            _ => return Err(invalid()),
        };
        match count.checked_mul(unit) {
            Some(seconds) if seconds >= 1 => Ok(std::time::Duration::from_secs(seconds)),
            _ => Err(invalid()),
        }
    }
}

impl Spec for ScrapeTargetSpec {
    const KIND: ObjectKind = ObjectKind::ScrapeTarget;

    fn from_spec(spec: &Value) -> Result<Self, ValidationError> {
        deserialize(spec)
    }

    fn natural_name(&self) -> Option<String> {
        None
    }

    fn check(&self) -> Result<(), ValidationError> {
        let scheme_ok = ["http://", "https://"]
            .iter()
            .any(|scheme| self.url.starts_with(scheme) && self.url.len() > scheme.len());
        if !scheme_ok || self.url.chars().any(char::is_whitespace) {
            return Err(ValidationError::new(
                "url",
                format!(
                    "must be an http:// or https:// URL such as http://node-1:9400/metrics (got '{}')",
                    self.url
                ),
            ));
        }
        self.period()?;
        check_name("cluster", &self.cluster)?;
        for (name, value) in &self.labels {
            let valid_name = name
                .chars()
                .enumerate()
                .all(|(i, c)| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()));
            if name.is_empty() || !valid_name || name.starts_with("__") {
                return Err(ValidationError::new(
                    format!("labels.{name}"),
                    "is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with __)",
                ));
            }
            not_empty(&format!("labels.{name}"), value)?;
        }
        Ok(())
    }
}
