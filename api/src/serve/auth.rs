//! Bearer tokens: `gpuledger token create --scope read|ingest|admin [--team T]`, checked on every
//! request. A token is `glt_<id>_<secret>`; the catalog keeps its SHA-256 only.
//!
//! - `read`: every GET, and SQL;
//! - `ingest`: the ingest endpoints (and nothing else, so that a collector's token reads nothing);
//! - `admin`: everything, including changes to the catalog and to budgets.
//!
//! A token with a team sees that team's rows only: its queries run in a team-scoped session
//! (`gpuledger_query::scope`), so the restriction lives in the catalog the SQL resolves against,
//! not in each handler.

use axum::extract::{FromRequestParts, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::Response;
use gpuledger_lake::{Catalog, TokenRecord};
use gpuledger_query::Scope;
use rand::RngCore;
use sha2::{Digest, Sha256};

use super::AppState;
use crate::error::ApiError;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Permission {
    Read,
    Ingest,
    Admin,
}

impl Permission {
    pub fn name(self) -> &'static str {
        match self {
            Permission::Read => "read",
            Permission::Ingest => "ingest",
            Permission::Admin => "admin",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        [Permission::Read, Permission::Ingest, Permission::Admin]
            .into_iter()
            .find(|p| p.name() == name)
    }

    /// Whether a token of this permission may do what `needed` allows.
    fn allows(self, needed: Permission) -> bool {
        self == Permission::Admin || self == needed
    }
}

/// The caller of a request, as its token says.
#[derive(Debug, Clone)]
pub struct Principal {
    pub token_id: String,
    pub permission: Permission,
    pub team: Option<String>,
}

impl Principal {
    /// Fails with 403 unless this caller may do `what` (said in the error) with `needed`.
    pub fn require(&self, needed: Permission, what: &str) -> Result<(), ApiError> {
        if self.permission.allows(needed) {
            Ok(())
        } else {
            Err(ApiError::Forbidden(format!(
                "{what} (it needs a '{}' token; this one is '{}')",
                needed.name(),
                self.permission.name()
            )))
        }
    }

    pub fn scope(&self) -> Scope {
        match &self.team {
            Some(team) => Scope::Team(team.clone()),
            None => Scope::All,
        }
    }
}

/// A new token, and the secret that is shown only now.
pub struct NewToken {
    pub record: TokenRecord,
    pub secret: String,
}

pub async fn create_token(
    catalog: &Catalog,
    name: &str,
    permission: Permission,
    team: Option<String>,
) -> Result<NewToken, ApiError> {
    let mut random = [0u8; 24];
    rand::rng().fill_bytes(&mut random);
    let id = hex::encode(&random[..4]);
    let secret = format!("glt_{id}_{}", hex::encode(&random[4..]));
    let record = TokenRecord {
        id,
        name: name.to_string(),
        scope: permission.name().to_string(),
        team,
        created_at: chrono::Utc::now().timestamp_micros(),
        revoked_at: None,
    };
    catalog.create_token(&record, &hash(&secret)).await?;
    Ok(NewToken { record, secret })
}

/// The caller of a token, or `None` when the token is unknown or revoked.
pub async fn authenticate(catalog: &Catalog, secret: &str) -> Result<Option<Principal>, ApiError> {
    let Some(record) = catalog.token_by_hash(&hash(secret)).await? else {
        return Ok(None);
    };
    let permission = Permission::parse(&record.scope).ok_or_else(|| {
        ApiError::Lake(gpuledger_lake::LakeError::Invalid(format!(
            "token {} has an unknown scope '{}'",
            record.id, record.scope
        )))
    })?;
    Ok(Some(Principal {
        token_id: record.id,
        permission,
        team: record.team,
    }))
}

fn hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Middleware: every request under `/v1` carries a valid bearer token.
pub async fn require_token(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let secret = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .ok_or(ApiError::Unauthenticated)?;
    let principal = authenticate(state.lake.catalog(), secret.trim())
        .await?
        .ok_or(ApiError::Unauthenticated)?;
    tracing::debug!(token = %principal.token_id, "authenticated");
    request.extensions_mut().insert(principal);
    Ok(next.run(request).await)
}

impl<S: Send + Sync> FromRequestParts<S> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<Principal>()
            .cloned()
            .ok_or(ApiError::Unauthenticated)
    }
}

/// Who a token is: what the dashboard needs to know to show the right pages.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct Me {
    /// `read`, `ingest` or `admin`.
    pub scope: String,
    /// The team this token is limited to; `null` for a token that sees every team.
    pub team: Option<String>,
}

/// The caller's token: its scope and team.
#[utoipa::path(
    get,
    path = "/v1/me",
    tag = "tokens",
    responses(
        (status = 200, body = Me),
        (status = 401, description = "No valid token", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn me(principal: Principal) -> axum::Json<Me> {
    axum::Json(Me {
        scope: principal.permission.name().into(),
        team: principal.team,
    })
}
