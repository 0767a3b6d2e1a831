//! The budget evaluator: every `--budget-interval` it takes the status of every budget now, and
//! records each threshold crossed in `budget_alerts`. The catalog's primary key makes a crossing
//! once-only across rounds, restarts and replicas; the one evaluator whose insert landed POSTs
//! the alert to the budget's webhook, retried with exponential backoff, and records how the
//! delivery went. Alerts only warn: nothing here touches a workload.

use std::time::Duration;

use chrono::Utc;
use gpuledger_lake::BudgetAlert;
use gpuledger_ledger::budget::BudgetSpec;
use gpuledger_ledger::objects::Object;
use serde_json::json;

use super::AppState;
use super::budgets::{BudgetStatusView, budget_status, rfc3339};
use crate::error::ApiError;

/// Webhook calls per alert, and the wait before the first retry (doubled after each).
const ATTEMPTS: i64 = 5;
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// The client webhooks are called with.
pub fn webhook_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(WEBHOOK_TIMEOUT)
        .build()
        .expect("an HTTP client with rustls")
}

/// A round of the evaluator `serve` runs every `--budget-interval` from start (never with `0s`,
/// which turns budget alerts off).
pub async fn run_round(state: &AppState, client: &reqwest::Client) {
    if let Err(error) = evaluate(state, client).await {
        tracing::error!(%error, "budget evaluation failed");
    }
}

/// One round over every budget, on a ledger brought up to date first.
async fn evaluate(state: &AppState, client: &reqwest::Client) -> Result<(), ApiError> {
    state.ledger.current(&state.lake).await?;
    let ctx = state.unscoped_session()?;
    let now = Utc::now();
    let catalog = state.lake.catalog();
    for budget in catalog.objects_of::<BudgetSpec>().await? {
        let status = budget_status(catalog, &ctx, &budget, now).await?;
        let spec = &budget.spec;
        for threshold in &status.thresholds_crossed {
            let alert = BudgetAlert {
                budget: budget.name().to_string(),
                month: status.month.clone(),
                threshold: *threshold,
                spend: status.spend_to_date,
                amount: status.amount,
                currency: status.currency.clone(),
                percent_used: status.percent_used,
                recorded_at: now.timestamp_micros(),
                webhook: spec.webhook.clone(),
                delivery: if spec.webhook.is_some() {
                    "pending"
                } else {
                    "none"
                }
                .into(),
                attempts: 0,
                delivered_at: None,
                last_error: None,
            };
            if !catalog.record_budget_alert(&alert).await? {
                continue;
            }
            state.metrics.budget_alerts.inc();
            tracing::warn!(budget = %alert.budget, month = %alert.month, threshold = alert.threshold,
                percent_used = alert.percent_used, "budget threshold crossed");
            if let Some(webhook) = spec.webhook.clone() {
                let payload = payload(&budget.object, &status, &alert);
                tokio::spawn(deliver(
                    state.clone(),
                    client.clone(),
                    webhook,
                    alert,
                    payload,
                ));
            }
        }
    }
    Ok(())
}

/// What the webhook receives.
fn payload(object: &Object, status: &BudgetStatusView, alert: &BudgetAlert) -> serde_json::Value {
    json!({
        "kind": "budget_alert",
        "budget": object.name,
        "spec": object.spec,
        "month": alert.month,
        "threshold": alert.threshold,
        "recorded_at": rfc3339(alert.recorded_at),
        "status": status,
    })
}

/// POSTs `payload` until a 2xx answer or [`ATTEMPTS`] calls, recording each outcome.
async fn deliver(
    state: AppState,
    client: reqwest::Client,
    webhook: String,
    alert: BudgetAlert,
    payload: serde_json::Value,
) {
    let catalog = state.lake.catalog();
    let mut backoff = FIRST_BACKOFF;
    for attempt in 1..=ATTEMPTS {
        let outcome = client.post(&webhook).json(&payload).send().await;
        let error = match outcome {
            Ok(response) if response.status().is_success() => None,
            Ok(response) => Some(format!("the webhook answered {}", response.status())),
            Err(error) => Some(format!("the webhook could not be reached: {error}")),
        };
        let (delivery, delivered_at) = match (&error, attempt == ATTEMPTS) {
            (None, _) => ("delivered", Some(Utc::now().timestamp_micros())),
            (Some(_), true) => ("failed", None),
            (Some(_), false) => ("pending", None),
        };
        if let Err(failure) = catalog
            .set_budget_alert_delivery(&alert, delivery, attempt, delivered_at, error.as_deref())
            .await
        {
            tracing::error!(error = %failure, budget = %alert.budget, "recording a webhook delivery");
        }
        match error {
            None => return,
            Some(error) => {
                tracing::warn!(budget = %alert.budget, attempt, %error, "budget webhook failed");
                if attempt < ATTEMPTS {
                    tokio::time::sleep(backoff).await;
                    backoff *= 2;
                }
            }
        }
    }
}
