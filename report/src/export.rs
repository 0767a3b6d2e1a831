//! The scheduled export of the weekly report (`gpuledger serve --report-schedule`).
//!
//! At each firing of the cron schedule, the weeks that are due and not yet exported are written
//! to `reports/weekly/<YYYY-Www>/report.{json,csv,html}` (keys from `gpuledger_lake::paths`).
//! Each object is one `put` of the whole body, so a reader sees the old or the new object, never
//! half of one; bodies carry no generation time, so a re-run writes the same bytes for the same
//! data. Weeks missed while the service was down are caught up at start. A run is recorded in
//! the catalog (`report_runs`, `system.report_runs`) and claimed there with a lease first, so
//! several replicas export each week once. A failed week is retried with backoff on its own: it
//! does not hold up the next week.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use gpuledger_lake::Lake;
use gpuledger_lake::catalog::RunStatus;
use gpuledger_lake::paths::WeeklyReportPath;
use object_store::{ObjectStoreExt, PutPayload};

use crate::compute::weekly_report;
use crate::error::{ReportError, Result};
use crate::model::TenantLimits;
use crate::render::Format;
use crate::week::IsoWeek;

/// Monday 06:00 UTC (the cron crate's fields: sec min hour day-of-month month day-of-week).
pub const DEFAULT_SCHEDULE: &str = "0 0 6 * * Mon";

/// How long a claim holds a week: an export still running after that is taken to have died.
const LEASE: TimeDelta = TimeDelta::minutes(15);
/// The first retry of a failed week waits this long, each further one twice as long …
const FIRST_RETRY: TimeDelta = TimeDelta::minutes(1);
/// … up to this.
const MAX_RETRY: TimeDelta = TimeDelta::hours(1);
/// The scheduler looks again at least this often (for retries and lapsed leases).
const POLL: Duration = Duration::from_secs(60);
/// How far back the latest firing is looked for: a weekly report needs at least weekly firings.
const LOOKBACK: TimeDelta = TimeDelta::days(8);

/// The time, as the scheduler sees it: tests set it.
pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// Writes the report of `week` to the object store in every exported format; the keys written.
pub async fn export_week(lake: &Lake, week: IsoWeek) -> Result<Vec<String>> {
    let report = weekly_report(lake, week, &TenantLimits::declared(lake).await?).await?;
    let mut keys = Vec::new();
    for format in Format::EXPORTED {
        let path = WeeklyReportPath {
            week: week.to_string(),
            extension: format.extension().into(),
        }
        .to_path();
        lake.store()
            .put(&path, PutPayload::from(format.render(&report)))
            .await?;
        keys.push(path.to_string());
    }
    Ok(keys)
}

/// What one export attempt did.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    pub week: IsoWeek,
    /// The keys written, or the error.
    pub outcome: Result<Vec<String>, String>,
}

/// What must hold before a week is exported. `serve` waits for its live ledger to take in every
/// input committed so far, so that a report never shows a ledger older than its inputs; a
/// failure fails the attempt, which is retried with backoff.
#[async_trait::async_trait]
pub trait LedgerReady: Send + Sync {
    async fn ready(&self) -> std::result::Result<(), String>;
}

pub struct Scheduler<C: Clock> {
    lake: Lake,
    schedule: cron::Schedule,
    clock: C,
    /// This replica, in the catalog's claims.
    owner: String,
    ledger: Option<Arc<dyn LedgerReady>>,
}

pub fn parse_schedule(expression: &str) -> Result<cron::Schedule> {
    expression
        .parse()
        .map_err(|e: cron::error::Error| ReportError::Schedule {
            schedule: expression.to_string(),
            reason: e.to_string(),
        })
}

impl<C: Clock> Scheduler<C> {
    pub fn new(lake: Lake, schedule: cron::Schedule, clock: C) -> Self {
        Self {
            lake,
            schedule,
            clock,
            owner: uuid::Uuid::new_v4().to_string(),
            ledger: None,
        }
    }

    /// Waits for `ledger` before every export.
    pub fn after_ledger(mut self, ledger: impl LedgerReady + 'static) -> Self {
        self.ledger = Some(Arc::new(ledger));
        self
    }

    /// The week the latest firing at or before `now` exports: the one before the firing's week.
    fn latest_due(&self, now: DateTime<Utc>) -> Option<IsoWeek> {
        let fired = self
            .schedule
            .after(&(now - LOOKBACK))
            .take_while(|t| *t <= now)
            .last()?;
        Some(IsoWeek::of(fired.date_naive()).previous())
    }

    /// The weeks to export at `now`: those after the latest recorded week up to the latest due
    /// one (only that one when nothing was ever recorded), and recorded weeks not yet exported.
    async fn due(&self, now: DateTime<Utc>) -> Result<Vec<IsoWeek>> {
        let runs = self.lake.catalog().report_runs().await?;
        let recorded: Vec<(IsoWeek, RunStatus)> = runs
            .iter()
            .filter_map(|r| Some((r.week.parse().ok()?, r.status)))
            .collect();
        let mut weeks: Vec<IsoWeek> = recorded
            .iter()
            .filter(|(_, status)| *status != RunStatus::Succeeded)
            .map(|(week, _)| *week)
            .collect();
        if let Some(latest) = self.latest_due(now) {
            let mut week = match recorded.iter().map(|(w, _)| *w).max() {
                Some(last) => last.next(),
                None => latest,
            };
            while week <= latest {
                weeks.push(week);
                week = week.next();
            }
        }
        weeks.sort();
        weeks.dedup();
        Ok(weeks)
    }

    /// Exports every due week this replica can claim; what each attempt did.
    pub async fn tick(&self) -> Result<Vec<Attempt>> {
        let now = self.clock.now();
        let mut attempts = Vec::new();
        for week in self.due(now).await? {
            if let Some(attempt) = self.export(week, false).await? {
                attempts.push(attempt);
            }
        }
        Ok(attempts)
    }

    /// Exports `week` when this replica can claim it (with `rerun`, even when it was exported
    /// already); `None` when another replica holds it, it is exported, or its retry is not due.
    pub async fn export(&self, week: IsoWeek, rerun: bool) -> Result<Option<Attempt>> {
        let catalog = self.lake.catalog();
        let name = week.to_string();
        let now = self.clock.now();
        let claimed = catalog
            .claim_report_run(
                &name,
                &self.owner,
                now.timestamp_micros(),
                (now + LEASE).timestamp_micros(),
                rerun,
            )
            .await?;
        if !claimed {
            return Ok(None);
        }
        // On a task of its own, so that a panic fails this attempt (retried with backoff, the
        // panic in the log) instead of ending the schedule until a restart.
        let (lake, ledger) = (self.lake.clone(), self.ledger.clone());
        let outcome = tokio::spawn(async move {
            if let Some(ledger) = ledger {
                ledger
                    .ready()
                    .await
                    .map_err(|error| format!("the ledger is not current: {error}"))?;
            }
            export_week(&lake, week).await.map_err(|e| e.to_string())
        })
        .await
        .unwrap_or_else(|stopped| Err(format!("the export stopped: {stopped}")));
        let finished = self.clock.now();
        match &outcome {
            Ok(keys) => {
                tracing::info!(%week, objects = keys.len(), "weekly report exported");
                catalog
                    .finish_report_run(&name, &self.owner, finished.timestamp_micros(), Ok(keys))
                    .await?;
            }
            Err(error) => {
                let attempts = catalog
                    .report_runs()
                    .await?
                    .into_iter()
                    .find(|r| r.week == name)
                    .map_or(1, |r| r.attempts);
                let retry_at = finished + backoff(attempts);
                tracing::warn!(%week, %error, %retry_at, "weekly report export failed");
                catalog
                    .finish_report_run(
                        &name,
                        &self.owner,
                        finished.timestamp_micros(),
                        Err((error, retry_at.timestamp_micros())),
                    )
                    .await?;
            }
        }
        Ok(Some(Attempt { week, outcome }))
    }

    /// Runs until `shutdown` completes: a tick at start (the catch-up), then at every firing,
    /// and at least every minute for retries; `observe` sees every attempt (for metrics).
    /// Errors are logged; the loop goes on.
    pub async fn run(&self, observe: impl Fn(&Attempt), shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            match self.tick().await {
                Ok(attempts) => attempts.iter().for_each(&observe),
                Err(error) => tracing::warn!(%error, "weekly report schedule"),
            }
            let now = self.clock.now();
            let wait = self
                .schedule
                .after(&now)
                .next()
                .and_then(|next| (next - now).to_std().ok())
                .map_or(POLL, |until_next| until_next.min(POLL));
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = &mut shutdown => return,
            }
        }
    }
}

/// The wait before retrying after the `attempts`-th failure.
fn backoff(attempts: i64) -> TimeDelta {
    let doublings = attempts.clamp(1, 16) - 1;
    (FIRST_RETRY * (1i32 << doublings)).min(MAX_RETRY)
}

#[cfg(test)]
mod tests;
