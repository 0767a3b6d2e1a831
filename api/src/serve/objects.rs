//! `/v1/objects/{kind}[/{name}]`: the ledger's catalog objects — nodes, reservations,
//! shared-cost rules, rate cards, manual costs, the label policy, SLOs, … — listed, read,
//! created, replaced and deleted. The same validation as `gpuledger apply`: errors name the
//! field. A team-scoped token sees, and may change, only objects whose `spec.team` is its team.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use gpuledger_lake::catalog::PutOutcome;
use gpuledger_ledger::objects::{Object, ObjectKind, validate};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::AppState;
use super::auth::{Permission, Principal};
use crate::error::{ApiError, JsonBody, Problem};

/// An object as `gpuledger apply` takes it and `gpuledger get --format json` prints it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ObjectDocument {
    /// The object's kind, e.g. `reservation`.
    pub kind: String,
    pub name: String,
    /// The kind's fields (docs/objects.md).
    #[schema(value_type = Object)]
    pub spec: Value,
}

/// A new object: its name, unless the spec names it (a node's `cluster`/`node`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewObject {
    #[serde(default)]
    pub name: Option<String>,
    #[schema(value_type = Object)]
    pub spec: Value,
}

/// The replacement spec of an object.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ObjectSpec {
    #[schema(value_type = Object)]
    pub spec: Value,
}

fn kind(name: &str) -> Result<ObjectKind, ApiError> {
    name.parse().map_err(ApiError::NotFound)
}

/// Whether `principal` may see an object with this spec.
pub(super) fn visible(principal: &Principal, spec: &Value) -> bool {
    match &principal.team {
        None => true,
        Some(team) => spec.get("team").and_then(Value::as_str) == Some(team.as_str()),
    }
}

pub(super) fn valid(
    kind: ObjectKind,
    name: Option<&str>,
    spec: &Value,
) -> Result<Object, ApiError> {
    validate(kind, name, spec).map_err(|error| ApiError::Invalid(error.to_string()))
}

pub(super) fn document(object: &Object) -> ObjectDocument {
    ObjectDocument {
        kind: object.kind.name().into(),
        name: object.name.clone(),
        spec: object.spec.clone(),
    }
}

pub(super) async fn stored(
    state: &AppState,
    principal: &Principal,
    kind: ObjectKind,
) -> Result<Vec<Object>, ApiError> {
    let mut objects = state.lake.catalog().documents(kind).await?;
    objects.retain(|o| visible(principal, &o.spec));
    Ok(objects)
}

pub(super) fn not_found(kind: ObjectKind, name: &str) -> ApiError {
    ApiError::NotFound(format!("no {kind} named '{name}'"))
}

/// List the objects of a kind.
#[utoipa::path(
    get,
    path = "/v1/objects/{kind}",
    tag = "objects",
    params(("kind" = String, Path, description = "node, reservation, shared_cost_rule, rate_card, manual_cost, label_policy, slo, …", example = "reservation")),
    responses(
        (status = 200, body = Vec<ObjectDocument>),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown kind", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list(
    State(state): State<AppState>,
    principal: Principal,
    Path(kind_name): Path<String>,
) -> Result<Json<Vec<ObjectDocument>>, ApiError> {
    principal.require(Permission::Read, "reading catalog objects")?;
    let kind = kind(&kind_name)?;
    let objects = stored(&state, &principal, kind).await?;
    Ok(Json(objects.iter().map(document).collect()))
}

/// Read one object.
#[utoipa::path(
    get,
    path = "/v1/objects/{kind}/{name}",
    tag = "objects",
    params(("kind" = String, Path, example = "reservation"), ("name" = String, Path, example = "warm-pool")),
    responses(
        (status = 200, body = ObjectDocument),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get(
    State(state): State<AppState>,
    principal: Principal,
    Path((kind_name, name)): Path<(String, String)>,
) -> Result<Json<ObjectDocument>, ApiError> {
    principal.require(Permission::Read, "reading catalog objects")?;
    let kind = kind(&kind_name)?;
    stored(&state, &principal, kind)
        .await?
        .iter()
        .find(|o| o.name == name)
        .map(|o| Json(document(o)))
        .ok_or_else(|| not_found(kind, &name))
}

/// Create an object; 409 when one of that name exists (404 when it is another team's).
#[utoipa::path(
    post,
    path = "/v1/objects/{kind}",
    tag = "objects",
    params(("kind" = String, Path, example = "reservation")),
    request_body = NewObject,
    responses(
        (status = 201, body = ObjectDocument),
        (status = 400, description = "The body is not the JSON this takes", body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown kind, or an object of that name belongs to another team", body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The spec is invalid; the detail names the field", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    Path(kind_name): Path<String>,
    JsonBody(new): JsonBody<NewObject>,
) -> Result<(StatusCode, Json<ObjectDocument>), ApiError> {
    principal.require(Permission::Admin, "changing catalog objects")?;
    let kind = kind(&kind_name)?;
    let object = valid(kind, new.name.as_deref(), &new.spec)?;
    create_object(&state, &principal, &object).await
}

/// Create or replace an object.
#[utoipa::path(
    put,
    path = "/v1/objects/{kind}/{name}",
    tag = "objects",
    params(("kind" = String, Path, example = "reservation"), ("name" = String, Path, example = "warm-pool")),
    request_body = ObjectSpec,
    responses(
        (status = 200, description = "Replaced (or unchanged)", body = ObjectDocument),
        (status = 201, description = "Created", body = ObjectDocument),
        (status = 400, description = "The body is not the JSON this takes", body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown kind, or an object of that name belongs to another team", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The spec is invalid, or names another object", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn replace(
    State(state): State<AppState>,
    principal: Principal,
    Path((kind_name, name)): Path<(String, String)>,
    JsonBody(body): JsonBody<ObjectSpec>,
) -> Result<(StatusCode, Json<ObjectDocument>), ApiError> {
    principal.require(Permission::Admin, "changing catalog objects")?;
    let kind = kind(&kind_name)?;
    let object = valid(kind, Some(&name), &body.spec)?;
    if object.name != name {
        return Err(ApiError::Invalid(format!(
            "spec: names the {kind} '{}', not '{name}'",
            object.name
        )));
    }
    replace_object(&state, &principal, &object).await
}

/// The one ownership rule of every route that writes catalog objects (`/v1/objects`,
/// `/v1/budgets`): a team-scoped token writes only objects whose `spec.team` is its team (403
/// otherwise), and another team's object is, to it, not there — replacing or deleting it is 404,
/// and creating one of its name is 404 too, never a 409 that would confirm the name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Existing {
    None,
    Own,
    Others,
}

async fn existing(
    state: &AppState,
    principal: &Principal,
    kind: ObjectKind,
    name: &str,
) -> Result<Existing, ApiError> {
    let objects = state.lake.catalog().documents(kind).await?;
    Ok(match objects.iter().find(|o| o.name == name) {
        None => Existing::None,
        Some(o) if visible(principal, &o.spec) => Existing::Own,
        Some(_) => Existing::Others,
    })
}

/// Creates `object` (validated): 201, or 409 when the token's own object of that name exists.
pub(super) async fn create_object(
    state: &AppState,
    principal: &Principal,
    object: &Object,
) -> Result<(StatusCode, Json<ObjectDocument>), ApiError> {
    require_visible(principal, object)?;
    match existing(state, principal, object.kind, &object.name).await? {
        Existing::None => put(state, object).await,
        Existing::Own => Err(ApiError::Conflict(format!(
            "a {} named '{}' exists: PUT replaces it",
            object.kind, object.name
        ))),
        Existing::Others => Err(not_found(object.kind, &object.name)),
    }
}

/// Creates or replaces `object` (validated): 201 or 200.
pub(super) async fn replace_object(
    state: &AppState,
    principal: &Principal,
    object: &Object,
) -> Result<(StatusCode, Json<ObjectDocument>), ApiError> {
    require_visible(principal, object)?;
    match existing(state, principal, object.kind, &object.name).await? {
        Existing::Others => Err(not_found(object.kind, &object.name)),
        Existing::None | Existing::Own => put(state, object).await,
    }
}

/// Deletes the object `name` of `kind`: 204, or 404 when the token has no such object.
pub(super) async fn delete_object(
    state: &AppState,
    principal: &Principal,
    kind: ObjectKind,
    name: &str,
) -> Result<StatusCode, ApiError> {
    if existing(state, principal, kind, name).await? != Existing::Own
        || !state
            .lake
            .catalog()
            .delete_object(kind.name(), name)
            .await?
    {
        return Err(not_found(kind, name));
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Stores `object`, created or replaced: 201 or 200 with the stored document.
async fn put(
    state: &AppState,
    object: &Object,
) -> Result<(StatusCode, Json<ObjectDocument>), ApiError> {
    let outcome = state
        .lake
        .catalog()
        .put_object(object.kind.name(), &object.name, &object.spec)
        .await?;
    let status = match outcome {
        PutOutcome::Created => StatusCode::CREATED,
        _ => StatusCode::OK,
    };
    Ok((status, Json(document(object))))
}

/// Delete an object.
#[utoipa::path(
    delete,
    path = "/v1/objects/{kind}/{name}",
    tag = "objects",
    params(("kind" = String, Path, example = "reservation"), ("name" = String, Path, example = "warm-pool")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn delete(
    State(state): State<AppState>,
    principal: Principal,
    Path((kind_name, name)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    principal.require(Permission::Admin, "changing catalog objects")?;
    let kind = kind(&kind_name)?;
    delete_object(&state, &principal, kind, &name).await
}

/// A team-scoped token may only write objects of its own team.
fn require_visible(principal: &Principal, object: &Object) -> Result<(), ApiError> {
    if visible(principal, &object.spec) {
        Ok(())
    } else {
        Err(ApiError::Forbidden(format!(
            "changing a {} outside the token's team",
            object.kind
        )))
    }
}
