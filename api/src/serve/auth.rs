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

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

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
    catalog
        .create_token(&record, &hex::encode(digest(&secret)))
        .await?;
    Ok(NewToken { record, secret })
}

/// How long a token found valid is trusted before the catalog is asked again. A revoked token
/// stops working within this, over HTTP and the Postgres wire alike (an open Postgres session
/// then ends with FATAL 28000).
pub const TOKEN_RECHECK: Duration = Duration::from_secs(1);

/// Tokens found valid within the last [`TOKEN_RECHECK`], by the SHA-256 of their secret, so that a
/// busy collector's requests cost no catalog statement each. Unknown and revoked tokens are never
/// kept: a token works as soon as it is created, and every guess is checked against the catalog.
pub struct TrustedTokens {
    recheck: Duration,
    max_kept: usize,
    trusted: Mutex<HashMap<[u8; 32], (Principal, Instant)>>,
}

impl Default for TrustedTokens {
    fn default() -> Self {
        // One entry per live token in use: a few hundred bytes each.
        Self::new(TOKEN_RECHECK, 4096)
    }
}

impl TrustedTokens {
    fn new(recheck: Duration, max_kept: usize) -> Self {
        Self {
            recheck,
            max_kept,
            trusted: Mutex::new(HashMap::new()),
        }
    }

    /// The caller of a token, or `None` when the token is unknown or revoked.
    pub async fn authenticate(
        &self,
        catalog: &Catalog,
        secret: &str,
    ) -> Result<Option<Principal>, ApiError> {
        let digest = digest(secret);
        if let Some((principal, _)) = self
            .trusted()
            .get(&digest)
            .filter(|(_, checked)| checked.elapsed() < self.recheck)
        {
            return Ok(Some(principal.clone()));
        }
        // Trusted from when the catalog was asked, not from its answer: a lookup racing a
        // revocation is trusted no longer than `recheck` after the revocation either.
        let asked = Instant::now();
        let Some(record) = catalog.token_by_hash(&hex::encode(digest)).await? else {
            self.trusted().remove(&digest);
            return Ok(None);
        };
        let permission = Permission::parse(&record.scope).ok_or_else(|| {
            ApiError::Lake(gpuledger_lake::LakeError::Invalid(format!(
                "token {} has an unknown scope '{}'",
                record.id, record.scope
            )))
        })?;
        let principal = Principal {
            token_id: record.id,
            permission,
            team: record.team,
        };
        let mut trusted = self.trusted();
        if trusted.len() >= self.max_kept && !trusted.contains_key(&digest) {
            trusted.retain(|_, (_, checked)| asked.duration_since(*checked) < self.recheck);
            if trusted.len() >= self.max_kept {
                trusted.clear();
            }
        }
        trusted.insert(digest, (principal.clone(), asked));
        Ok(Some(principal))
    }

    /// The map holds no invariant a panic could break: a poisoned lock is taken as it is.
    fn trusted(&self) -> MutexGuard<'_, HashMap<[u8; 32], (Principal, Instant)>> {
        self.trusted.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
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
    let principal = state
        .tokens
        .authenticate(state.lake.catalog(), secret.trim())
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

#[cfg(test)]
mod tests {
    use super::*;

    async fn catalog(dir: &tempfile::TempDir) -> Catalog {
        let url = format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("catalog.db").display()
        );
        Catalog::connect(&url).await.unwrap()
    }

    fn team(principal: Option<Principal>) -> Option<String> {
        principal.expect("a valid token").team
    }

    /// Whether `secret` is taken as a valid token now.
    async fn valid(tokens: &TrustedTokens, catalog: &Catalog, secret: &str) -> bool {
        tokens
            .authenticate(catalog, secret)
            .await
            .unwrap()
            .is_some()
    }

    #[tokio::test]
    async fn a_trusted_token_is_its_own_team_and_a_revoked_one_ends_after_the_recheck() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = catalog(&dir).await;
        let recheck = Duration::from_secs(60);
        let tokens = TrustedTokens::new(recheck, 2);
        let a = create_token(&catalog, "a", Permission::Read, Some("team-a".into()))
            .await
            .unwrap();
        let b = create_token(&catalog, "b", Permission::Ingest, Some("team-b".into()))
            .await
            .unwrap();
        // Each token, asked in turns and again from what is kept, is its own team and scope.
        for _ in 0..3 {
            let found = tokens.authenticate(&catalog, &a.secret).await.unwrap();
            assert_eq!(found.as_ref().map(|p| p.permission), Some(Permission::Read));
            assert_eq!(team(found).as_deref(), Some("team-a"));
            let found = tokens.authenticate(&catalog, &b.secret).await.unwrap();
            assert_eq!(
                found.as_ref().map(|p| p.permission),
                Some(Permission::Ingest)
            );
            assert_eq!(team(found).as_deref(), Some("team-b"));
        }
        // A guess, or a secret one character off, is never kept: always asked of the catalog.
        // (A secret that already ends in `0` gets a `1`: the guess must differ.)
        let (head, last) = a.secret.split_at(a.secret.len() - 1);
        let off_by_one = format!("{head}{}", if last == "0" { "1" } else { "0" });
        for guess in ["glt_00000000_00", off_by_one.as_str(), ""] {
            assert!(!valid(&tokens, &catalog, guess).await);
        }
        assert_eq!(tokens.trusted().len(), 2);

        // Revoked: trusted until `recheck` has passed since the catalog was last asked, then
        // refused and forgotten. The clock is moved by ageing what is kept, not by sleeping.
        assert!(catalog.revoke_token(&a.record.id).await.unwrap());
        assert!(valid(&tokens, &catalog, &a.secret).await);
        let age = |by: Duration| {
            for (_, checked) in tokens.trusted().values_mut() {
                *checked = checked.checked_sub(by).unwrap();
            }
        };
        age(recheck - Duration::from_secs(1));
        assert!(valid(&tokens, &catalog, &a.secret).await);
        age(Duration::from_secs(1));
        assert!(!valid(&tokens, &catalog, &a.secret).await);
        assert!(!tokens.trusted().contains_key(&digest(&a.secret)));
        assert_eq!(
            team(tokens.authenticate(&catalog, &b.secret).await.unwrap()).as_deref(),
            Some("team-b")
        );

        // A token created now works at once, and more live tokens than are kept all still work.
        let c = create_token(&catalog, "c", Permission::Admin, None)
            .await
            .unwrap();
        let d = create_token(&catalog, "d", Permission::Read, Some("team-d".into()))
            .await
            .unwrap();
        for _ in 0..2 {
            for (token, expected) in [(&b, Some("team-b")), (&c, None), (&d, Some("team-d"))] {
                let found = tokens.authenticate(&catalog, &token.secret).await.unwrap();
                assert_eq!(team(found).as_deref(), expected);
                assert!(tokens.trusted().len() <= 2);
            }
        }
    }
}
