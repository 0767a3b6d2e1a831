//! The first response to each Idempotency-Key of the ingest endpoints, kept so that a client's
//! retry gets the same answer (and lands nothing).

use sqlx::Row;

use super::{Catalog, now_micros};
use crate::error::Result;

/// A response as it was first given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    pub route: String,
    pub batch_id: String,
    pub status: u16,
    /// The JSON body.
    pub body: String,
}

impl Catalog {
    pub async fn idempotent_response(&self, key: &str) -> Result<Option<StoredResponse>> {
        let row = sqlx::query(
            "SELECT route, batch_id, status, response FROM idempotency_keys WHERE idempotency_key = $1",
        )
        .bind(key)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| {
            Ok(StoredResponse {
                route: r.try_get("route")?,
                batch_id: r.try_get("batch_id")?,
                status: u16::try_from(r.try_get::<i64, _>("status")?).unwrap_or(0),
                body: r.try_get("response")?,
            })
        })
        .transpose()
    }

    /// Keeps the first response to `key`; a later one for the same key is not stored.
    pub async fn record_idempotent_response(
        &self,
        key: &str,
        response: &StoredResponse,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO idempotency_keys (idempotency_key, route, batch_id, status, response, created_at)
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (idempotency_key) DO NOTHING",
        )
        .bind(key)
        .bind(&response.route)
        .bind(&response.batch_id)
        .bind(i64::from(response.status))
        .bind(&response.body)
        .bind(now_micros())
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
