//! Declared catalog objects (`gpuledger apply`): their kinds, typed specs, names and validation.
//! Serde only, no I/O: the CLI reads the files, the lake stores the normal form returned here,
//! and the ledger build reads it back into the typed specs.
//!
//! A document is `{kind, name?, spec}`. Validation reads the spec into its typed form (the
//! ledger's own types where it has them: `Node`, `RateCardEntry`, `SharedCostRule`), rejects
//! fields the kind does not know, checks what types cannot say, and names the object. Errors
//! name the field path as the document spells it (`spec.gpu_cost_share`) and the rule broken.
//!
//! One layer per file: `kind` (the kinds), this file (documents, the [`Spec`] trait, validation),
//! `specs` (each kind's spec), `checks` (field checks shared by the specs).
//!
//! Adding a kind: a variant of [`ObjectKind`] with an arm in its matches (`kind.rs`) and in
//! [`validate`], and a [`Spec`] impl for the kind's spec type (`specs.rs`).

use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

use crate::budget::BudgetSpec;
use crate::build::Node;
use crate::spot::OperationsCostSpec;
use crate::unit_economics::SloSpec;
use crate::value::ValueMappingSpec;

mod checks;
mod kind;
mod specs;
#[cfg(test)]
mod tests;

use checks::check_name;
pub use kind::ObjectKind;
pub(crate) use specs::default_currency;
pub use specs::{
    CAPACITY_TYPES, Currency, Extended, LABEL_POLICY_NAME, LabelPolicy, ManualCostSpec, Priority,
    RESERVATION_REASONS, RateCardSpec, ReservationSpec, ScrapeTargetSpec, SharedCostRuleSpec,
};

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
