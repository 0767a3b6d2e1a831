//! Retired files leave `tables/` (issue 16): `tables/<table>/**/*.parquet` holds the active files
//! only, so DuckDB, Spark or Trino reading the bucket without gpuledger count every row once.
//!
//! A file stops being active in the catalog first, in the transaction that replaces it (a
//! restatement, a ledger rebuild: `retire_scope` in catalog.rs; a compaction:
//! `Catalog::commit_compaction`). [`settle`] then makes the store follow, and is the one place
//! that moves or deletes a table file:
//!
//! 1. a retired file still under `tables/` moves to `_superseded/tables/…` (`SupersededPath`),
//!    and the catalog records `moved_at`; when the file was made active again meanwhile, it
//!    moves back;
//! 2. an active file under `_superseded/` (a re-delivery brought it back) moves back to `tables/`;
//! 3. a moved file whose grace period (`--retain-superseded`) is over is claimed in the catalog
//!    (`deleted_at`), then its object is deleted.
//!
//! Each step is idempotent and conditional in the catalog, so a pass that stops anywhere (a
//! crash, a lost connection) is finished by the next one, on any replica: an object is never
//! deleted before the catalog has claimed it, and while it moves it is in one of the two places.
//! A query planned on a file's `tables/` key before it moved reads it under `_superseded/`
//! ([`SupersededFallback`]), until the grace period is over.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::Utc;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

use crate::Lake;
use crate::error::Result;
use crate::paths::SupersededPath;

/// The grace period of `--retain-superseded` when none is given.
pub const DEFAULT_RETAIN_SUPERSEDED: Duration = Duration::from_secs(3600);

/// What one [`settle`] pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SettleReport {
    /// Retired files moved under `_superseded/`.
    pub moved: u64,
    /// Active files moved back under `tables/`.
    pub restored: u64,
    /// Objects deleted after their grace period.
    pub deleted: u64,
}

impl std::ops::AddAssign for SettleReport {
    fn add_assign(&mut self, other: Self) {
        self.moved += other.moved;
        self.restored += other.restored;
        self.deleted += other.deleted;
    }
}

fn is_not_found(error: &object_store::Error) -> bool {
    matches!(error, object_store::Error::NotFound { .. })
}

/// Moves `from` to `to`; an object already gone from `from` but present at `to` counts as moved
/// (a pass stopped after the move, before the catalog heard of it). False when it is in neither.
async fn move_object(store: &dyn ObjectStore, from: &Path, to: &Path) -> Result<bool> {
    match store.rename(from, to).await {
        Ok(()) => Ok(true),
        Err(error) if is_not_found(&error) => match store.head(to).await {
            Ok(_) => Ok(true),
            Err(error) if is_not_found(&error) => Ok(false),
            Err(error) => Err(error.into()),
        },
        Err(error) => Err(error.into()),
    }
}

async fn delete_object(store: &dyn ObjectStore, path: &Path) -> Result<()> {
    match store.delete(path).await {
        Ok(()) => Ok(()),
        Err(error) if is_not_found(&error) => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// Makes the store follow the catalog: retired files out of `tables/`, files made active again
/// back in, and, given a grace period `retain`, retired objects older than that deleted. See
/// the module documentation.
pub async fn settle(lake: &Lake, retain: Option<Duration>) -> Result<SettleReport> {
    settle_with(lake, retain, true).await
}

async fn settle_with(
    lake: &Lake,
    retain: Option<Duration>,
    recheck_reactivated: bool,
) -> Result<SettleReport> {
    let (catalog, store) = (lake.catalog(), lake.store().as_ref());
    let mut report = SettleReport::default();
    for file in catalog.files_to_move().await? {
        let live = Path::from(file.path.as_str());
        let moved = SupersededPath::of(&live).to_path();
        if !move_object(store, &live, &moved).await? {
            tracing::warn!(path = %live, "a retired file's object is missing: recorded as deleted");
            catalog.record_moved(&file.path).await?;
            catalog.mark_deleted(&file.path).await?;
            continue;
        }
        if catalog.record_moved(&file.path).await? {
            report.moved += 1;
        } else if catalog.is_active(&file.path).await? {
            // Made active again while it moved: back where readers look for it.
            move_object(store, &moved, &live).await?;
        }
    }
    let now = Utc::now().timestamp_micros();
    let window = retain
        .unwrap_or_default()
        .max(DEFAULT_RETAIN_SUPERSEDED)
        .as_micros() as i64;
    let mut back = catalog.files_to_restore().await?;
    if recheck_reactivated {
        back.extend(catalog.files_reactivated_since(now - window).await?);
    }
    back.sort_by(|a, b| a.path.cmp(&b.path));
    back.dedup();
    for file in back {
        let live = Path::from(file.path.as_str());
        let moved = SupersededPath::of(&live).to_path();
        match store.head(&moved).await {
            Ok(_) => {
                move_object(store, &moved, &live).await?;
                report.restored += 1;
            }
            Err(error) if is_not_found(&error) => {}
            Err(error) => return Err(error.into()),
        }
        catalog.record_restored(&file.path).await?;
    }
    let Some(retain) = retain else {
        return Ok(report);
    };
    let cutoff = now - retain.as_micros() as i64;
    for file in catalog.files_to_delete(cutoff).await? {
        if !catalog.mark_deleted(&file.path).await? {
            continue;
        }
        let live = Path::from(file.path.as_str());
        delete_object(store, &SupersededPath::of(&live).to_path()).await?;
        // A copy left under `tables/` by an interrupted move goes too: the file is retired.
        delete_object(store, &live).await?;
        report.deleted += 1;
    }
    Ok(report)
}

/// [`settle`] for the write paths right after a commit that retired files: their objects leave
/// `tables/`; deleting them after the grace period is the vacuum's (`serve`, `gpuledger
/// compact`). A failure is logged, not returned: the commit stands, and the next pass finishes.
pub async fn settle_after_commit(lake: &Lake) -> SettleReport {
    match settle_with(lake, None, false).await {
        Ok(report) => report,
        Err(error) => {
            tracing::warn!(%error, "retired files stay where they are until the next pass");
            SettleReport::default()
        }
    }
}

/// The object store queries read through: a table file not found under `tables/` is read from
/// `_superseded/`, where a restatement, a rebuild or a compaction moved it while a query that
/// had listed it was running. Writes and listings go to the store unchanged.
#[derive(Debug)]
pub struct SupersededFallback {
    inner: Arc<dyn ObjectStore>,
}

impl SupersededFallback {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore> {
        Arc::new(Self { inner })
    }
}

impl std::fmt::Display for SupersededFallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SupersededFallback({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for SupersededFallback {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        match self.inner.get_opts(location, options.clone()).await {
            Err(error) if is_not_found(&error) && SupersededPath::applies_to(location) => {
                let moved = SupersededPath::of(location).to_path();
                let mut found = self
                    .inner
                    .get_opts(&moved, options)
                    .await
                    .map_err(|_| error)?;
                // DataFusion checks that what it reads is what it listed.
                found.meta.location = location.clone();
                Ok(found)
            }
            other => other,
        }
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        match self.inner.get_ranges(location, ranges).await {
            Err(error) if is_not_found(&error) && SupersededPath::applies_to(location) => {
                let moved = SupersededPath::of(location).to_path();
                self.inner
                    .get_ranges(&moved, ranges)
                    .await
                    .map_err(|_| error)
            }
            other => other,
        }
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

// Tested with compaction, which retires files too: lake/src/compaction/tests.rs.
