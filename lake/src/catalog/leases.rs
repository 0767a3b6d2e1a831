//! Leases: work that exactly one of the replicas sharing a catalog does at a time (the ledger's
//! continuous build). Taking, renewing and releasing are each one statement, so two replicas
//! racing for a lease cannot both hold it.

use sqlx::Row;

use super::Catalog;
use crate::error::Result;

impl Catalog {
    /// Takes or renews the lease `name` for `owner` until `lease_until` (microseconds): true when
    /// `owner` now holds it (it was free, ran out before `now`, or was already `owner`'s).
    pub async fn claim_lease(
        &self,
        name: &str,
        owner: &str,
        now: i64,
        lease_until: i64,
    ) -> Result<bool> {
        let inserted = sqlx::query(
            "INSERT INTO leases (name, owner, lease_until) VALUES ($1, $2, $3)
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(owner)
        .bind(lease_until)
        .execute(&self.pool)
        .await?;
        if inserted.rows_affected() == 1 {
            return Ok(true);
        }
        let taken = sqlx::query(
            "UPDATE leases SET owner = $2, lease_until = $3
             WHERE name = $1 AND (owner = $2 OR lease_until < $4)",
        )
        .bind(name)
        .bind(owner)
        .bind(lease_until)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(taken.rows_affected() == 1)
    }

    /// Gives the lease up, if `owner` still holds it.
    pub async fn release_lease(&self, name: &str, owner: &str) -> Result<()> {
        sqlx::query("UPDATE leases SET lease_until = 0 WHERE name = $1 AND owner = $2")
            .bind(name)
            .bind(owner)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// When the newest input file (telemetry, events, billing, gateway requests) became active or was replaced, or
    /// a declared object the ledger reads changed, and when the ledger was last built (microseconds; 0 for never): the ledger's
    /// lag is the first minus the second when positive.
    pub async fn ledger_freshness(&self) -> Result<(i64, i64)> {
        let row = sqlx::query(
            "SELECT CAST(COALESCE(MAX(activated_at), 0) AS BIGINT) AS activated,
                    CAST(COALESCE(MAX(replaced_at), 0) AS BIGINT) AS replaced
             FROM files WHERE table_name IN ('gpu_samples', 'scheduler_events', 'billing_lines', 'token_usage')",
        )
        .fetch_one(&self.pool)
        .await?;
        let newest_input = row
            .try_get::<i64, _>("activated")?
            .max(row.try_get::<i64, _>("replaced")?);
        let declared = sqlx::query(
            "SELECT CAST(COALESCE(MAX(updated_at), 0) AS BIGINT) AS changed FROM catalog_objects
             WHERE kind IN ('node', 'reservation', 'shared_cost_rule', 'rate_card', 'manual_cost', 'label_policy')",
        )
        .fetch_one(&self.pool)
        .await?;
        let newest_input = newest_input.max(declared.try_get::<i64, _>("changed")?);
        let built = sqlx::query(
            "SELECT CAST(COALESCE(MAX(built_at), 0) AS BIGINT) AS built FROM ledger_days",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok((newest_input, built.try_get("built")?))
    }
}
