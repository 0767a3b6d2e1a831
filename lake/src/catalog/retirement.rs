//! The catalog's side of retiring files (issue 16): which retired objects still have to move
//! under `_superseded/`, which may be deleted, which were made active again while moved; and the
//! compaction swap. Every change is one conditional statement, so the store work that follows
//! (lake/src/retirement.rs, lake/src/compaction.rs) can be interrupted and repeated at any step
//! by any replica.

use sqlx::Row;

use super::{Catalog, NewBatch, insert_file, now_micros};
use crate::error::Result;
use crate::tables::Table;
use crate::writer::WrittenFile;

/// How many keys one `UPDATE … WHERE path IN (…)` names (below every dialect's bind limit).
const PATHS_PER_STATEMENT: usize = 500;

/// A retired file whose object is to be moved or deleted, or an active one to bring back.
#[derive(Debug, Clone, PartialEq)]
pub struct RetiredFile {
    /// The key under `tables/` (`files.path`).
    pub path: String,
}

/// An active file of a table-day that a compaction may merge.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionCandidate {
    pub path: String,
    pub partition_date: String,
    pub batch_id: String,
    pub scope: Option<String>,
    pub rows: i64,
    pub bytes: i64,
    pub min_ts: i64,
    pub activated_at: i64,
}

fn paths(rows: Vec<sqlx::any::AnyRow>) -> Result<Vec<RetiredFile>> {
    rows.iter()
        .map(|r| {
            Ok(RetiredFile {
                path: r.try_get("path")?,
            })
        })
        .collect()
}

impl Catalog {
    /// Retired files whose objects are still under `tables/`.
    pub async fn files_to_move(&self) -> Result<Vec<RetiredFile>> {
        let rows = sqlx::query(
            "SELECT path FROM files
             WHERE replaced_by IS NOT NULL AND moved_at IS NULL AND deleted_at IS NULL ORDER BY path",
        )
        .fetch_all(&self.pool)
        .await?;
        paths(rows)
    }

    /// Records that a retired file's object is under `_superseded/`: false when the file is
    /// active again (a re-delivery brought it back meanwhile) or was recorded already.
    pub async fn record_moved(&self, path: &str) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE files SET moved_at = $2
             WHERE path = $1 AND replaced_by IS NOT NULL AND moved_at IS NULL",
        )
        .bind(path)
        .bind(now_micros())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Whether the file at `path` is active (listed and not retired).
    pub async fn is_active(&self, path: &str) -> Result<bool> {
        let row =
            sqlx::query("SELECT 1 AS active FROM files WHERE path = $1 AND replaced_by IS NULL")
                .bind(path)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.is_some())
    }

    /// Whether the catalog lists the file at `path` and its object is not deleted (active, or
    /// retired within its grace period).
    pub async fn is_listed(&self, path: &str) -> Result<bool> {
        let row =
            sqlx::query("SELECT 1 AS listed FROM files WHERE path = $1 AND deleted_at IS NULL")
                .bind(path)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.is_some())
    }

    /// Active files whose objects are not under `tables/`: committed and not placed yet (under
    /// `_staging/`), or made active again without a copy (under `_superseded/`).
    pub async fn files_to_restore(&self) -> Result<Vec<RetiredFile>> {
        let rows = sqlx::query(
            "SELECT path FROM files WHERE replaced_by IS NULL AND moved_at IS NOT NULL ORDER BY path",
        )
        .fetch_all(&self.pool)
        .await?;
        paths(rows)
    }

    /// Active files made active again (not by their first commit) after `since`: a pass that
    /// moved one of them in a race with its reactivation, and stopped before it could move it
    /// back, left its object under `_superseded/`.
    pub async fn files_reactivated_since(&self, since: i64) -> Result<Vec<RetiredFile>> {
        let rows = sqlx::query(
            "SELECT path FROM files
             WHERE replaced_by IS NULL AND activated_at > created_at AND activated_at > $1 ORDER BY path",
        )
        .bind(since)
        .fetch_all(&self.pool)
        .await?;
        paths(rows)
    }

    /// Records that an active file's object is under `tables/` (placed, or back).
    pub async fn record_restored(&self, path: &str) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE files SET moved_at = NULL WHERE path = $1 AND replaced_by IS NULL AND moved_at IS NOT NULL",
        )
        .bind(path)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Moved files retired (restated, rebuilt or compacted) before `retired_before`
    /// (microseconds): their grace period is over.
    pub async fn files_to_delete(&self, retired_before: i64) -> Result<Vec<RetiredFile>> {
        let rows = sqlx::query(
            "SELECT path FROM files
             WHERE moved_at IS NOT NULL AND deleted_at IS NULL AND replaced_by IS NOT NULL
               AND COALESCE(compacted_at, replaced_at, 0) < $1
             ORDER BY path",
        )
        .bind(retired_before)
        .fetch_all(&self.pool)
        .await?;
        paths(rows)
    }

    /// Claims a retired file's object for deletion, before it is deleted: false when the file is
    /// active again or another pass claimed it. A file marked deleted is never made active
    /// again (a re-delivery lands its own copies instead).
    pub async fn mark_deleted(&self, path: &str) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE files SET deleted_at = $2
             WHERE path = $1 AND replaced_by IS NOT NULL AND deleted_at IS NULL",
        )
        .bind(path)
        .bind(now_micros())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Counts of retired files by where their objects are: (under `tables/` still, under
    /// `_superseded/`, deleted).
    pub async fn retired_counts(&self) -> Result<(i64, i64, i64)> {
        let row = sqlx::query(
            "SELECT CAST(COALESCE(SUM(CASE WHEN moved_at IS NULL AND deleted_at IS NULL THEN 1 ELSE 0 END), 0) AS BIGINT) AS pending,
                    CAST(COALESCE(SUM(CASE WHEN moved_at IS NOT NULL AND deleted_at IS NULL THEN 1 ELSE 0 END), 0) AS BIGINT) AS moved,
                    CAST(COALESCE(SUM(CASE WHEN deleted_at IS NOT NULL THEN 1 ELSE 0 END), 0) AS BIGINT) AS deleted
             FROM files WHERE replaced_by IS NOT NULL",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok((
            row.try_get("pending")?,
            row.try_get("moved")?,
            row.try_get("deleted")?,
        ))
    }

    /// Active files of `table` in the partitions `from..=to` (`YYYY-MM-DD`; `None` is open), by
    /// partition, scope, batch and time: what a compaction groups.
    pub async fn compaction_candidates(
        &self,
        table: Table,
        from: Option<&str>,
        to: Option<&str>,
    ) -> Result<Vec<CompactionCandidate>> {
        let rows = sqlx::query(
            "SELECT path, partition_date, batch_id, scope, row_count, byte_count, min_ts, activated_at
             FROM files
             WHERE table_name = $1 AND replaced_by IS NULL AND partition_date >= $2 AND partition_date <= $3
             ORDER BY partition_date, scope, batch_id, min_ts, path",
        )
        .bind(table.name())
        .bind(from.unwrap_or("0000-00-00"))
        .bind(to.unwrap_or("9999-99-99"))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(CompactionCandidate {
                    path: r.try_get("path")?,
                    partition_date: r.try_get("partition_date")?,
                    batch_id: r.try_get("batch_id")?,
                    scope: r.try_get("scope")?,
                    rows: r.try_get("row_count")?,
                    bytes: r.try_get("byte_count")?,
                    min_ts: r.try_get("min_ts")?,
                    activated_at: r.try_get("activated_at")?,
                })
            })
            .collect()
    }

    /// The compaction swap, in one transaction: `output` (already in the store) becomes active
    /// under `files_batch` and the `sources` are retired in its favour, as merged by
    /// `compaction` (recorded as a batch of source `compaction` that lands no rows). The output
    /// counts as active since the earliest source did, so the ledger sees no new input. False,
    /// and nothing changed, when a source is no longer active (a restatement or another
    /// replica's compaction came first): then the output objects are the caller's to remove.
    pub async fn commit_compaction(
        &self,
        compaction: &NewBatch,
        sources: &[CompactionCandidate],
        output: &[WrittenFile],
        files_batch: &str,
    ) -> Result<bool> {
        let now = now_micros();
        let activated_at = sources.iter().map(|s| s.activated_at).min().unwrap_or(now);
        let mut tx = self.pool.begin().await?;
        let no_rows = super::BatchCounts {
            rows_landed: 0,
            records_rejected: 0,
            rows_replaced: 0,
        };
        super::insert_batches(&mut tx, &[(compaction, no_rows)], None, now).await?;
        let mut retired = 0;
        for chunk in sources.chunks(PATHS_PER_STATEMENT) {
            let list = (0..chunk.len())
                .map(|i| format!("${}", i + 3))
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!(
                "UPDATE files SET replaced_by = $1, compacted_at = $2
                 WHERE replaced_by IS NULL AND path IN ({list})"
            );
            // Only placeholders are formatted into the statement; every key is bound.
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(&compaction.batch_id)
                .bind(now);
            for source in chunk {
                query = query.bind(&source.path);
            }
            retired += query.execute(&mut *tx).await?.rows_affected();
        }
        if retired != sources.len() as u64 {
            tx.rollback().await?;
            return Ok(false);
        }
        for file in output {
            insert_file(&mut tx, file, files_batch, now, activated_at).await?;
        }
        tx.commit().await?;
        Ok(true)
    }
}
