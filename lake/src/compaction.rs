//! Compaction (`gpuledger compact`, and `serve` in the background): the small files of a
//! table-day are merged into few, written by the same writer (sorted by the table's sort columns,
//! zstd, the same row groups), and swapped in the catalog in one transaction
//! (`Catalog::commit_compaction`). The merged files are then retired like restated ones
//! (lake/src/retirement.rs): a query planned on them finishes on them.
//!
//! Rows are copied, never merged or deduplicated, so every sum and count stays what it was. A
//! group is the files of one partition day; for a table restated by scope (billing lines, the
//! ledger's tables) one scope of one batch, so that a later restatement or re-delivery still
//! replaces exactly what it replaced before.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{ArrayRef, new_null_array};
use arrow::compute::{cast, concat_batches};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use chrono::{NaiveDate, Utc};

use crate::Lake;
use crate::catalog::{CompactionCandidate, NewBatch};
use crate::error::{LakeError, Result};
use crate::retirement::{SettleReport, discard, keep_after_failed_commit, settle};
use crate::tables::Table;
use crate::writer::TableWriter;

/// Rows of a compacted file: the writer's row group, so a day of 128 GPUs sampled every 5 s
/// (2.2 M rows) ends as three files.
pub const TARGET_ROWS: i64 = 1024 * 1024;

/// What to compact.
#[derive(Debug, Clone)]
pub struct CompactOptions {
    pub tables: Vec<Table>,
    /// Partition days, both included; `None` is open.
    pub from: Option<NaiveDate>,
    pub to: Option<NaiveDate>,
    /// Files with at least this many rows are left alone; smaller ones are merged up to it.
    pub target_rows: i64,
}

impl Default for CompactOptions {
    fn default() -> Self {
        Self {
            tables: Table::ALL.to_vec(),
            from: None,
            to: None,
            target_rows: TARGET_ROWS,
        }
    }
}

/// What a compaction did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactionReport {
    /// Merges committed (each replaced two files or more by one).
    pub merges: u64,
    pub files_merged: u64,
    pub files_written: u64,
    pub rows: u64,
    /// Merges given up because a source was retired meanwhile (a restatement, another replica).
    pub conflicts: u64,
}

impl std::ops::AddAssign for CompactionReport {
    fn add_assign(&mut self, other: Self) {
        self.merges += other.merges;
        self.files_merged += other.files_merged;
        self.files_written += other.files_written;
        self.rows += other.rows;
        self.conflicts += other.conflicts;
    }
}

/// The catalog lease under which one process at a time compacts and vacuums a lake.
pub const LEASE: &str = "compaction";
/// How long the lease lasts unless renewed (it is, before every merge): a process that died
/// mid-pass frees it after this.
const LEASE_TIME: Duration = Duration::from_secs(600);

/// Merges the small files of every table-day that `options` selects. The merged-away files are
/// retired in the catalog; the next [`settle`] moves them out of `tables/` and the merged
/// files in (until then readers see the table as it was). Safe beside
/// another compaction (a merge whose sources another one retired first is given up), but
/// [`pass`] is what the product runs: under the lease, so every table-day is merged once.
pub async fn compact(lake: &Lake, options: &CompactOptions) -> Result<CompactionReport> {
    compact_under(lake, options, None).await
}

/// Takes or renews the compaction lease for `owner`.
async fn claim(lake: &Lake, owner: &str) -> Result<bool> {
    let now = Utc::now().timestamp_micros();
    lake.catalog()
        .claim_lease(LEASE, owner, now, now + LEASE_TIME.as_micros() as i64)
        .await
}

/// [`compact`], renewing the lease of `owner` (if any) before every merge and stopping when it
/// is lost.
async fn compact_under(
    lake: &Lake,
    options: &CompactOptions,
    owner: Option<&str>,
) -> Result<CompactionReport> {
    let from = options.from.map(|d| d.to_string());
    let to = options.to.map(|d| d.to_string());
    let mut report = CompactionReport::default();
    for &table in &options.tables {
        let candidates = lake
            .catalog()
            .compaction_candidates(table, from.as_deref(), to.as_deref())
            .await?;
        for merge in plan(candidates, options.target_rows) {
            if let Some(owner) = owner
                && !claim(lake, owner).await?
            {
                return Ok(report);
            }
            report += merge_files(lake, table, &merge).await?;
        }
    }
    Ok(report)
}

/// One compaction and vacuum pass, as `gpuledger compact` and `serve` run it: under the
/// catalog's [`LEASE`] (as `owner`), compacts what `options` selects, then settles retired
/// files, deleting those retired longer than `retain` ago. `None` when another process holds
/// the lease.
pub async fn pass(
    lake: &Lake,
    options: &CompactOptions,
    retain: Duration,
    owner: &str,
) -> Result<Option<(CompactionReport, SettleReport)>> {
    if !claim(lake, owner).await? {
        return Ok(None);
    }
    let done = async {
        let compacted = compact_under(lake, options, Some(owner)).await?;
        let settled = settle(lake, Some(retain)).await?;
        Ok((compacted, settled))
    }
    .await;
    lake.catalog().release_lease(LEASE, owner).await?;
    done.map(Some)
}

/// Groups the active files of one table by day (and scope and batch, for restated tables) and
/// cuts each group's small files, in time order, into runs of at most `target_rows` rows. Runs
/// of one file are left alone.
pub fn plan(
    candidates: Vec<CompactionCandidate>,
    target_rows: i64,
) -> Vec<Vec<CompactionCandidate>> {
    let mut groups: BTreeMap<(String, Option<String>, Option<String>), Vec<CompactionCandidate>> =
        BTreeMap::new();
    for file in candidates {
        let batch = file.scope.as_ref().map(|_| file.batch_id.clone());
        groups
            .entry((file.partition_date.clone(), file.scope.clone(), batch))
            .or_default()
            .push(file);
    }
    let mut merges = Vec::new();
    for (_, mut files) in groups {
        files.retain(|f| f.rows < target_rows);
        files.sort_by(|a, b| (a.min_ts, &a.path).cmp(&(b.min_ts, &b.path)));
        let mut run: Vec<CompactionCandidate> = Vec::new();
        let mut rows = 0;
        for file in files {
            if !run.is_empty() && rows + file.rows > target_rows {
                if run.len() > 1 {
                    merges.push(std::mem::take(&mut run));
                }
                run.clear();
                rows = 0;
            }
            rows += file.rows;
            run.push(file);
        }
        if run.len() > 1 {
            merges.push(run);
        }
    }
    merges
}

async fn merge_files(
    lake: &Lake,
    table: Table,
    sources: &[CompactionCandidate],
) -> Result<CompactionReport> {
    let first = &sources[0];
    let started_at = Utc::now().timestamp_micros();
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let batch_id = format!(
        "compact-{}-{}-{}",
        table,
        first.partition_date,
        &suffix[..12]
    );
    // Read through the fallback: a source retired meanwhile is still readable, and the swap
    // below notices it is no longer active.
    let schema = table.schema();
    let mut batches = Vec::new();
    for source in sources {
        for batch in lake.read_file(&source.path).await? {
            batches.push(conform(&batch, &schema)?);
        }
    }
    let merged = concat_batches(&schema, &batches)?;
    drop(batches);
    let mut writer = TableWriter::new(Arc::clone(lake.store()), batch_id.clone());
    let written = writer.write(table, &merged).await?;
    let rows = merged.num_rows() as u64;
    drop(merged);
    if written.iter().any(|f| f.scope != first.scope) {
        // Files written by another release under another scope key: not this merge's to join.
        discard(lake, &written).await;
        tracing::warn!(%table, day = %first.partition_date, "compaction skipped: the files' scope changed");
        return Ok(CompactionReport::default());
    }
    let compaction = NewBatch {
        batch_id: batch_id.clone(),
        source: "compaction".into(),
        origin: format!("compact {table} {}", first.partition_date),
        content_hash: batch_id.clone(),
        idempotency_key: None,
        records_read: rows,
        started_at,
    };
    // A restated table's merged file stays its delivery's: a re-delivery finds it by batch.
    let files_batch = match &first.scope {
        Some(_) => first.batch_id.clone(),
        None => batch_id.clone(),
    };
    let swapped = lake
        .catalog()
        .commit_compaction(&compaction, sources, &written, &files_batch)
        .await;
    if !matches!(swapped, Ok(true)) {
        match swapped {
            Err(error) => {
                keep_after_failed_commit(&written);
                return Err(error);
            }
            _ => discard(lake, &written).await,
        }
        return Ok(CompactionReport {
            conflicts: 1,
            ..Default::default()
        });
    }
    Ok(CompactionReport {
        merges: 1,
        files_merged: sources.len() as u64,
        files_written: written.len() as u64,
        rows,
        conflicts: 0,
    })
}

/// A batch read from a file in the table's current schema: columns added since are NULL, and
/// columns an earlier release wrote with another type (Float64 money) are cast, as scans do.
fn conform(batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    let columns = schema
        .fields()
        .iter()
        .map(|field| match batch.column_by_name(field.name()) {
            Some(column) if column.data_type() == field.data_type() => Ok(Arc::clone(column)),
            Some(column) => Ok(cast(column, field.data_type())?),
            None => Ok(new_null_array(field.data_type(), batch.num_rows())),
        })
        .collect::<Result<Vec<ArrayRef>>>()?;
    RecordBatch::try_new(Arc::clone(schema), columns).map_err(|e| {
        LakeError::Invalid(format!(
            "compaction: a file does not fit the table's schema: {e}"
        ))
    })
}

#[cfg(test)]
pub(crate) mod tests;
