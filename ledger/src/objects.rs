//! Declared catalog objects (`gpuledger apply`): their kinds, typed specs, names and validation.
//! Serde only, no I/O: the CLI reads the files, the lake stores the normal form returned here,
//! and the ledger build reads it back into the typed specs.
//!
//! A document is `{kind, name?, spec}`. Validation reads the spec into its typed form (the
//! ledger's own types where it has them: `Node`, `RateCardEntry`, `SharedCostRule`), rejects
//! fields the kind does not know, checks what types cannot say, and names the object. Errors
//! name the field path as the document spells it (`spec.gpu_cost_share`) and the rule broken.
//!
//! Adding a kind: a variant of [`ObjectKind`] with an arm in its matches and in [`validate`], and
//! a [`Spec`] impl for the kind's spec type.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

use crate::amortize::Strategy;
use crate::budget::BudgetSpec;
use crate::build::{ManualCost, Node, RateCardEntry, Reservation};
use crate::journal::{Basis, SharedCostRule};
use crate::spot::OperationsCostSpec;
use crate::time::Span;
use crate::unit_economics::{ANY_PRIORITY, PRIORITIES, SloSpec};
use crate::value::{COUNTS, METRICS, ValueMappingSpec};

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

/// What is wrong with a document: the field path from the document's root (empty for the
/// document itself) and the rule broken.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub struct ValidationError {
    pub path: String,
    pub message: String,
}

impl ValidationError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }

    /// The same error, seen from the value that holds `prefix`.
    fn under(self, prefix: &str) -> Self {
        Self {
            path: join(prefix, &self.path),
            ..self
        }
    }
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// An invalid document, with what it declares as far as that could be told.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{error}")]
pub struct DocumentError {
    pub kind: Option<String>,
    pub name: Option<String>,
    pub error: ValidationError,
}

impl DocumentError {
    /// `node demo/h100-1`, `reservation`, … for pointing at the object in a message.
    pub fn subject(&self) -> Option<String> {
        match (&self.kind, &self.name) {
            (Some(kind), Some(name)) => Some(format!("{kind} {name}")),
            (Some(kind), None) => Some(kind.clone()),
            (None, _) => None,
        }
    }
}

/// A valid object: its name, unique within its kind, and its spec in normal form (every field
/// present, defaults filled in, times in UTC, sets sorted), so equal specs compare equal.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    pub kind: ObjectKind,
    pub name: String,
    pub spec: Value,
}

impl Object {
    /// The document `apply` accepts back: `{kind, name, spec}`, unset optional fields left out.
    pub fn to_document(&self) -> Value {
        serde_json::json!({
            "kind": self.kind.name(),
            "name": self.name,
            "spec": without_nulls(&self.spec),
        })
    }

    /// The typed spec, as the ledger build reads it.
    pub fn spec_as<S: Spec>(&self) -> Result<S, ValidationError> {
        if self.kind != S::KIND {
            return Err(ValidationError::new(
                "kind",
                format!("is {}, not {}", self.kind, S::KIND),
            ));
        }
        S::from_spec(&self.spec).map_err(|e| e.under("spec"))
    }

    /// Where the object stands in the order objects apply: by kind, by the kind's order field
    /// (a rule's priority), then by name.
    pub fn apply_order(&self) -> (ObjectKind, i64, &str) {
        let order = self
            .kind
            .order_field()
            .and_then(|field| self.spec.get(field))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        (self.kind, order, &self.name)
    }
}

/// Validates a spec of `kind`; `name` is the document's, required where the spec does not name
/// its object.
pub fn validate(
    kind: ObjectKind,
    name: Option<&str>,
    spec: &Value,
) -> Result<Object, DocumentError> {
    match kind {
        ObjectKind::Node => validate_as::<Node>(name, spec),
        ObjectKind::Reservation => validate_as::<ReservationSpec>(name, spec),
        ObjectKind::SharedCostRule => validate_as::<SharedCostRuleSpec>(name, spec),
        ObjectKind::RateCard => validate_as::<RateCardSpec>(name, spec),
        ObjectKind::ManualCost => validate_as::<ManualCostSpec>(name, spec),
        ObjectKind::LabelPolicy => validate_as::<LabelPolicy>(name, spec),
        ObjectKind::Slo => validate_as::<SloSpec>(name, spec),
        ObjectKind::SpotOperationsCost => validate_as::<OperationsCostSpec>(name, spec),
        ObjectKind::ValueMapping => validate_as::<ValueMappingSpec>(name, spec),
        ObjectKind::Budget => validate_as::<BudgetSpec>(name, spec),
        ObjectKind::ScrapeTarget => validate_as::<ScrapeTargetSpec>(name, spec),
    }
}

/// One manifest document as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    kind: String,
    #[serde(default)]
    name: Option<String>,
    spec: Value,
}

/// Reads and validates one `{kind, name?, spec}` document.
pub fn parse_document(document: &Value) -> Result<Object, DocumentError> {
    let field = |key: &str| {
        document
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let invalid = |error| DocumentError {
        kind: field("kind"),
        name: field("name"),
        error,
    };
    if !document.is_object() {
        return Err(invalid(ValidationError::new(
            "",
            "a document is a mapping with kind and spec (and name where the kind needs one)",
        )));
    }
    let Document { kind, name, spec } = deserialize(document).map_err(invalid)?;
    let kind: ObjectKind = kind
        .parse()
        .map_err(|message| invalid(ValidationError::new("kind", message)))?;
    validate(kind, name.as_deref(), &spec)
}

/// The documents one parsed value holds, with their 1-based item numbers when it is a list:
/// a sequence of documents, or a `{kind: List, items: [...]}` wrapper.
pub fn split_list(value: Value) -> Result<Vec<(Option<usize>, Value)>, ValidationError> {
    let items = match value {
        Value::Array(items) => items,
        Value::Object(mut map) if map.get("kind").and_then(Value::as_str) == Some("List") => {
            if let Some(key) = map.keys().find(|k| *k != "kind" && *k != "items") {
                return Err(ValidationError::new(
                    key.as_str(),
                    "unknown field (a List has kind and items)",
                ));
            }
            match map.remove("items") {
                Some(Value::Array(items)) => items,
                Some(_) => {
                    return Err(ValidationError::new("items", "must be a list of documents"));
                }
                None => return Err(ValidationError::new("items", "is required")),
            }
        }
        document => return Ok(vec![(None, document)]),
    };
    Ok(items
        .into_iter()
        .enumerate()
        .map(|(i, item)| (Some(i + 1), item))
        .collect())
}

/// The typed form of one kind's `spec`.
pub trait Spec: Serialize + Sized {
    const KIND: ObjectKind;

    /// Reads a spec; the error names the field path within the spec.
    fn from_spec(spec: &Value) -> Result<Self, ValidationError>;

    /// The name the spec gives its object; `None` when the document must name it.
    fn natural_name(&self) -> Option<String>;

    /// What types cannot say: ranges, allowed values, the order of times.
    fn check(&self) -> Result<(), ValidationError>;
}

fn validate_as<S: Spec>(given: Option<&str>, spec: &Value) -> Result<Object, DocumentError> {
    let invalid = |name: Option<String>, error: ValidationError| DocumentError {
        kind: Some(S::KIND.name().to_string()),
        name,
        error,
    };
    if !spec.is_object() {
        let message = format!("must be a mapping of the {}'s fields", S::KIND);
        return Err(invalid(
            given.map(str::to_string),
            ValidationError::new("spec", message),
        ));
    }
    let typed =
        S::from_spec(spec).map_err(|e| invalid(given.map(str::to_string), e.under("spec")))?;
    let natural = typed.natural_name();
    let label = given.map(str::to_string).or_else(|| natural.clone());
    let normal = serde_json::to_value(&typed).expect("a spec serializes to JSON");
    reject_unknown_fields(spec, &normal, "")
        .and_then(|()| typed.check())
        .map_err(|e| invalid(label.clone(), e.under("spec")))?;
    let name = object_name(S::KIND, natural, given).map_err(|e| invalid(label, e))?;
    Ok(Object {
        kind: S::KIND,
        name,
        spec: normal,
    })
}

fn object_name(
    kind: ObjectKind,
    natural: Option<String>,
    given: Option<&str>,
) -> Result<String, ValidationError> {
    match (natural, given) {
        (Some(natural), None) => Ok(natural),
        (Some(natural), Some(given)) if given == natural => Ok(natural),
        (Some(natural), Some(given)) => Err(ValidationError::new(
            "name",
            format!("a {kind} is named by its spec: '{natural}', not '{given}' (leave name out)"),
        )),
        (None, Some(given)) => {
            check_name("name", given)?;
            Ok(given.to_string())
        }
        (None, None) => Err(ValidationError::new(
            "name",
            format!("is required: a {kind} is named by its document"),
        )),
    }
}

/// Every field a spec type reads comes back when it is written (unset options as null), so a
/// field of the input that its normal form lacks is one the kind does not know: most likely a
/// typo, which would otherwise fall back to a default without a word.
fn reject_unknown_fields(input: &Value, normal: &Value, path: &str) -> Result<(), ValidationError> {
    match (input, normal) {
        (Value::Object(given), Value::Object(known)) => {
            for (key, value) in given {
                let path = join(path, key);
                match known.get(key) {
                    Some(normal) => reject_unknown_fields(value, normal, &path)?,
                    None => {
                        let known: Vec<&str> = known.keys().map(String::as_str).collect();
                        return Err(ValidationError::new(
                            path,
                            format!("unknown field; known here: {}", known.join(", ")),
                        ));
                    }
                }
            }
        }
        (Value::Array(given), Value::Array(known)) if given.len() == known.len() => {
            for (i, (value, normal)) in given.iter().zip(known).enumerate() {
                reject_unknown_fields(value, normal, &format!("{path}[{i}]"))?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Reads `T` from a JSON value; the error names the field path.
fn deserialize<T: DeserializeOwned>(value: &Value) -> Result<T, ValidationError> {
    serde_path_to_error::deserialize(value).map_err(|error| {
        let path = match error.path().to_string() {
            root if root == "." => String::new(),
            path => path,
        };
        let message = error.into_inner().to_string();
        // serde reports a missing field at the value that lacks it: point at the field itself.
        match message
            .strip_prefix("missing field `")
            .and_then(|m| m.strip_suffix('`'))
        {
            Some(field) => ValidationError::new(join(&path, field), "is required"),
            None => ValidationError::new(path, message),
        }
    })
}

fn join(path: &str, child: &str) -> String {
    match (path.is_empty(), child.is_empty() || child.starts_with('[')) {
        (true, _) => child.to_string(),
        (false, true) => format!("{path}{child}"),
        (false, false) => format!("{path}.{child}"),
    }
}

fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

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

    fn labels(&self) -> [(&'static str, &Option<BTreeSet<String>>); 5] {
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

fn not_empty(path: &str, value: &str) -> Result<(), ValidationError> {
    if value.trim().is_empty() {
        return Err(ValidationError::new(path, "must not be empty"));
    }
    Ok(())
}

/// A part of a `a/b` name: `/` inside it would make two objects' names collide.
fn name_part(path: &str, value: &str) -> Result<(), ValidationError> {
    check_name(path, value)?;
    if value.contains('/') {
        return Err(ValidationError::new(
            path,
            format!("must not contain '/' (got '{value}'): it names the object with another field"),
        ));
    }
    Ok(())
}

/// A name a user types on the command line: no blanks around it, no control characters.
fn check_name(path: &str, name: &str) -> Result<(), ValidationError> {
    not_empty(path, name)?;
    if name.trim() != name || name.chars().any(char::is_control) {
        return Err(ValidationError::new(
            path,
            format!(
                "must not start or end with blanks or contain control characters (got {name:?})"
            ),
        ));
    }
    Ok(())
}

fn at_least_one(path: &str, value: u32) -> Result<(), ValidationError> {
    if value < 1 {
        return Err(ValidationError::new(path, "must be at least 1"));
    }
    Ok(())
}

fn non_negative(path: &str, value: f64) -> Result<(), ValidationError> {
    if !(value.is_finite() && value >= 0.0) {
        return Err(ValidationError::new(
            path,
            format!("must be a finite number ≥ 0 (got {value})"),
        ));
    }
    Ok(())
}

fn one_of(path: &str, value: &str, allowed: &[&str]) -> Result<(), ValidationError> {
    if !allowed.contains(&value) {
        return Err(ValidationError::new(
            path,
            format!("must be one of {} (got '{value}')", allowed.join(", ")),
        ));
    }
    Ok(())
}

fn currency(path: &str, code: &str) -> Result<(), ValidationError> {
    if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(ValidationError::new(
            path,
            format!("must be an ISO 4217 code such as USD (got '{code}')"),
        ));
    }
    Ok(())
}

fn period(from: DateTime<Utc>, to: DateTime<Utc>) -> Result<(), ValidationError> {
    if to <= from {
        return Err(ValidationError::new(
            "to",
            format!("must be after from ({})", rfc3339::format(&from)),
        ));
    }
    Ok(())
}

fn span(from: DateTime<Utc>, to: DateTime<Utc>) -> Span {
    Span::new(from.timestamp_micros(), to.timestamp_micros())
}

/// Times as RFC 3339 text with an offset; written back in UTC.
mod rfc3339 {
    use chrono::{DateTime, SecondsFormat, Utc};
    use serde::{Deserialize, Deserializer, Serializer, de};

    pub fn format(time: &DateTime<Utc>) -> String {
        time.to_rfc3339_opts(SecondsFormat::AutoSi, true)
    }

    pub fn serialize<S: Serializer>(
        time: &DateTime<Utc>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&format(time))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<DateTime<Utc>, D::Error> {
        let text = String::deserialize(deserializer)?;
        DateTime::parse_from_rfc3339(&text)
            .map(|time| time.with_timezone(&Utc))
            .map_err(|error| {
                de::Error::custom(format!(
                    "'{text}' is not an RFC 3339 time such as 2024-09-18T00:00:00Z ({error})"
                ))
            })
    }
}

#[cfg(test)]
mod tests;
