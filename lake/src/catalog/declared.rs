//! Declared objects read back: the one way every reader — the ledger build, the table
//! functions, `/v1/objects` and `/v1/budgets`, the budget alerts, the scrape scheduler, the
//! weekly report, `gpuledger get` — reads what `gpuledger apply` (or the API) stored. Specs are
//! validated by the ledger before they are put; an object that no longer reads as its kind (a
//! release changed the kind's fields) is an error that names it, never skipped in silence.

use gpuledger_ledger::objects::{Object, ObjectKind, Spec};

use super::Catalog;
use crate::error::{LakeError, Result};

/// A declared object of the kind `S` describes, typed.
#[derive(Debug, Clone, PartialEq)]
pub struct TypedObject<S> {
    /// The object as stored (`{kind, name, spec}`, the document `apply` takes back).
    pub object: Object,
    pub spec: S,
    /// When its spec last changed, microseconds since the epoch.
    pub updated_at: i64,
}

impl<S> TypedObject<S> {
    pub fn name(&self) -> &str {
        &self.object.name
    }
}

impl Catalog {
    /// The declared objects of `kind` as documents, in the order they apply (by the kind's
    /// order field, such as a rule's priority, then by name).
    pub async fn documents(&self, kind: ObjectKind) -> Result<Vec<Object>> {
        Ok(self
            .in_apply_order(kind)
            .await?
            .into_iter()
            .map(|(object, _)| object)
            .collect())
    }

    /// The declared objects of `S`'s kind, typed, in the order they apply.
    pub async fn objects_of<S: Spec>(&self) -> Result<Vec<TypedObject<S>>> {
        self.in_apply_order(S::KIND)
            .await?
            .into_iter()
            .map(|(object, updated_at)| {
                let spec = object.spec_as::<S>().map_err(|error| {
                    LakeError::Invalid(format!(
                        "catalog object {} '{}' no longer reads as a {}: {error}",
                        S::KIND,
                        object.name,
                        S::KIND
                    ))
                })?;
                Ok(TypedObject {
                    object,
                    spec,
                    updated_at,
                })
            })
            .collect()
    }

    /// The objects of `kind` with when each last changed, sorted as they apply.
    async fn in_apply_order(&self, kind: ObjectKind) -> Result<Vec<(Object, i64)>> {
        let mut objects: Vec<(Object, i64)> = self
            .objects(kind.name())
            .await?
            .into_iter()
            .map(|stored| {
                let object = Object {
                    kind,
                    name: stored.name,
                    spec: stored.spec,
                };
                (object, stored.updated_at)
            })
            .collect();
        objects.sort_by(|(a, _), (b, _)| a.apply_order().cmp(&b.apply_order()));
        Ok(objects)
    }
}
