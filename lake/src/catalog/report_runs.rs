//! The weekly report's export runs: one row per ISO week, which is also the claim that lets one
//! replica of several export a week while the others skip it.

use sqlx::Row;

use super::Catalog;
use crate::error::{LakeError, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    Running,
    Succeeded,
    Failed,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
        }
    }

    fn parse(s: &str) -> Result<Self> {
        match s {
            "running" => Ok(RunStatus::Running),
            "succeeded" => Ok(RunStatus::Succeeded),
            "failed" => Ok(RunStatus::Failed),
            other => Err(LakeError::Invalid(format!(
                "unknown report run status '{other}'"
            ))),
        }
    }
}

/// An export of one week, as recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportRun {
    pub week: String,
    pub status: RunStatus,
    pub attempts: i64,
    pub started_at: i64,
    pub finished_at: Option<i64>,
    pub error: Option<String>,
    /// The object-store keys written.
    pub objects: Vec<String>,
    pub lease_owner: String,
    pub lease_until: i64,
    pub next_attempt_at: Option<i64>,
}

impl Catalog {
    /// Takes the export of `week` for `owner` until `lease_until` (microseconds), when nobody
    /// holds it: the week was never run, its last attempt failed and its retry is due
    /// (`next_attempt_at <= now`), or a running attempt's lease ran out (its replica died). With
    /// `rerun`, a succeeded week is taken too. True when this caller now holds it. Each branch is
    /// one statement, so two replicas racing for a week cannot both win.
    pub async fn claim_report_run(
        &self,
        week: &str,
        owner: &str,
        now: i64,
        lease_until: i64,
        rerun: bool,
    ) -> Result<bool> {
        let inserted = sqlx::query(
            "INSERT INTO report_runs (week, status, attempts, started_at, objects, lease_owner, lease_until)
             VALUES ($1, 'running', 1, $2, '[]', $3, $4) ON CONFLICT (week) DO NOTHING",
        )
        .bind(week)
        .bind(now)
        .bind(owner)
        .bind(lease_until)
        .execute(&self.pool)
        .await?;
        if inserted.rows_affected() == 1 {
            return Ok(true);
        }
        let taken = sqlx::query(
            "UPDATE report_runs SET status = 'running', attempts = attempts + 1, started_at = $2,
                 finished_at = NULL, lease_owner = $3, lease_until = $4
             WHERE week = $1 AND (
                 (status = 'failed' AND next_attempt_at <= $2)
                 OR (status = 'running' AND lease_until < $2)
                 OR (status = 'succeeded' AND $5 = 1))",
        )
        .bind(week)
        .bind(now)
        .bind(owner)
        .bind(lease_until)
        .bind(i64::from(rerun))
        .execute(&self.pool)
        .await?;
        Ok(taken.rows_affected() == 1)
    }

    /// Records how the attempt `owner` holds ended; nothing when its lease was taken over since.
    /// A failure is retried from `next_attempt_at` on.
    pub async fn finish_report_run(
        &self,
        week: &str,
        owner: &str,
        now: i64,
        outcome: std::result::Result<&[String], (&str, i64)>,
    ) -> Result<()> {
        let (status, objects, error, next_attempt_at) = match outcome {
            Ok(objects) => (RunStatus::Succeeded, objects, None, None),
            Err((error, next)) => (RunStatus::Failed, &[][..], Some(error), Some(next)),
        };
        sqlx::query(
            "UPDATE report_runs SET status = $3, finished_at = $4, objects = $5, error = $6,
                 next_attempt_at = $7
             WHERE week = $1 AND lease_owner = $2 AND status = 'running'",
        )
        .bind(week)
        .bind(owner)
        .bind(status.as_str())
        .bind(now)
        .bind(serde_json::to_string(objects).expect("strings serialize"))
        .bind(error)
        .bind(next_attempt_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Every recorded run, oldest week first.
    pub async fn report_runs(&self) -> Result<Vec<ReportRun>> {
        let rows = sqlx::query(
            "SELECT week, status, attempts, started_at, finished_at, error, objects, lease_owner,
                    lease_until, next_attempt_at
             FROM report_runs ORDER BY week",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let objects: String = r.get("objects");
                Ok(ReportRun {
                    week: r.get("week"),
                    status: RunStatus::parse(r.get("status"))?,
                    attempts: r.get("attempts"),
                    started_at: r.get("started_at"),
                    finished_at: r.get("finished_at"),
                    error: r.get("error"),
                    objects: serde_json::from_str(&objects)
                        .map_err(|e| LakeError::Invalid(format!("report_runs.objects: {e}")))?,
                    lease_owner: r.get("lease_owner"),
                    lease_until: r.get("lease_until"),
                    next_attempt_at: r.get("next_attempt_at"),
                })
            })
            .collect()
    }
}
