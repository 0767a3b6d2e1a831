//! Budget alerts in the catalog: recorded once per (budget, month, threshold), whichever replica
//! gets there first, with the delivery of the webhook call beside them.

use sqlx::Row;

use super::Catalog;
use crate::error::Result;

/// An alert as recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetAlert {
    pub budget: String,
    /// `YYYY-MM`.
    pub month: String,
    pub threshold: f64,
    pub spend: f64,
    pub amount: f64,
    pub currency: String,
    pub percent_used: f64,
    /// Microseconds.
    pub recorded_at: i64,
    pub webhook: Option<String>,
    /// `none` (no webhook), `pending`, `delivered` or `failed`.
    pub delivery: String,
    pub attempts: i64,
    pub delivered_at: Option<i64>,
    pub last_error: Option<String>,
}

impl Catalog {
    /// Records an alert unless one for the same budget, month and threshold exists; true when
    /// this call recorded it (and so owns its delivery).
    pub async fn record_budget_alert(&self, alert: &BudgetAlert) -> Result<bool> {
        let done = sqlx::query(
            "INSERT INTO budget_alerts (budget, month, threshold, spend, amount, currency, \
             percent_used, recorded_at, webhook, delivery, attempts) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
             ON CONFLICT (budget, month, threshold) DO NOTHING",
        )
        .bind(&alert.budget)
        .bind(&alert.month)
        .bind(alert.threshold)
        .bind(alert.spend)
        .bind(alert.amount)
        .bind(&alert.currency)
        .bind(alert.percent_used)
        .bind(alert.recorded_at)
        .bind(&alert.webhook)
        .bind(&alert.delivery)
        .bind(alert.attempts)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Notes how the delivery of an alert went so far.
    pub async fn set_budget_alert_delivery(
        &self,
        alert: &BudgetAlert,
        delivery: &str,
        attempts: i64,
        delivered_at: Option<i64>,
        last_error: Option<&str>,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE budget_alerts SET delivery = $1, attempts = $2, delivered_at = $3, last_error = $4 \
             WHERE budget = $5 AND month = $6 AND threshold = $7",
        )
        .bind(delivery)
        .bind(attempts)
        .bind(delivered_at)
        .bind(last_error)
        .bind(&alert.budget)
        .bind(&alert.month)
        .bind(alert.threshold)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The alerts of one budget, the latest month first, then by threshold.
    pub async fn budget_alerts(&self, budget: &str) -> Result<Vec<BudgetAlert>> {
        let rows = sqlx::query(
            "SELECT budget, month, threshold, spend, amount, currency, percent_used, recorded_at, \
             webhook, delivery, attempts, delivered_at, last_error \
             FROM budget_alerts WHERE budget = $1 ORDER BY month DESC, threshold",
        )
        .bind(budget)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(BudgetAlert {
                    budget: r.try_get("budget")?,
                    month: r.try_get("month")?,
                    threshold: r.try_get("threshold")?,
                    spend: r.try_get("spend")?,
                    amount: r.try_get("amount")?,
                    currency: r.try_get("currency")?,
                    percent_used: r.try_get("percent_used")?,
                    recorded_at: r.try_get("recorded_at")?,
                    webhook: r.try_get("webhook")?,
                    delivery: r.try_get("delivery")?,
                    attempts: r.try_get("attempts")?,
                    delivered_at: r.try_get("delivered_at")?,
                    last_error: r.try_get("last_error")?,
                })
            })
            .collect()
    }

    /// The time span all live files cover, `[min_ts, max_ts]` in microseconds; `None` for an
    /// empty lake. Queries over absurd windows clamp to it.
    pub async fn data_extent(&self) -> Result<Option<(i64, i64)>> {
        let row = sqlx::query(
            "SELECT min(min_ts) AS first, max(max_ts) AS last FROM files WHERE replaced_by IS NULL",
        )
        .fetch_one(&self.pool)
        .await?;
        let first: Option<i64> = row.try_get("first")?;
        let last: Option<i64> = row.try_get("last")?;
        Ok(first.zip(last))
    }
}
