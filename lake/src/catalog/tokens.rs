//! API tokens in the catalog: created, looked up by the hash of their secret, listed, revoked.

use sqlx::Row;

use super::{Catalog, now_micros};
use crate::error::Result;

/// A token as stored: never its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRecord {
    pub id: String,
    pub name: String,
    /// `read`, `ingest` or `admin`; the API decides what each may do.
    pub scope: String,
    pub team: Option<String>,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
}

impl Catalog {
    pub async fn create_token(&self, token: &TokenRecord, secret_hash: &str) -> Result<()> {
        sqlx::query(
            "INSERT INTO api_tokens (id, name, secret_hash, scope, team, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&token.id)
        .bind(&token.name)
        .bind(secret_hash)
        .bind(&token.scope)
        .bind(&token.team)
        .bind(token.created_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The live (not revoked) token whose secret hashes to `secret_hash`; read beside the writes,
    /// so authentication never waits for a commit.
    pub async fn token_by_hash(&self, secret_hash: &str) -> Result<Option<TokenRecord>> {
        let row = sqlx::query(
            "SELECT id, name, scope, team, created_at, revoked_at FROM api_tokens \
             WHERE secret_hash = $1 AND revoked_at IS NULL",
        )
        .bind(secret_hash)
        .fetch_optional(&self.reads)
        .await?;
        Ok(row.as_ref().map(token_from_row))
    }

    pub async fn tokens(&self) -> Result<Vec<TokenRecord>> {
        let rows = sqlx::query(
            "SELECT id, name, scope, team, created_at, revoked_at FROM api_tokens ORDER BY created_at, id",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(token_from_row).collect())
    }

    /// Revokes a token; false when no live token has this id.
    pub async fn revoke_token(&self, id: &str) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE api_tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL",
        )
        .bind(now_micros())
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }
}

fn token_from_row(r: &sqlx::any::AnyRow) -> TokenRecord {
    TokenRecord {
        id: r.get("id"),
        name: r.get("name"),
        scope: r.get("scope"),
        team: r.get("team"),
        created_at: r.get("created_at"),
        revoked_at: r.get("revoked_at"),
    }
}
