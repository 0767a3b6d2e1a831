//! Table files are under `tables/` exactly while they are active (issue 16):
//! `tables/<table>/**/*.parquet` holds the active files only, so DuckDB, Spark or Trino reading
//! the bucket without gpuledger count every row once. Elsewhere a file waits aside
//! ([`Aside`]): under `_staging/` from its write until its commit is placed, under
//! `_superseded/` from its retirement until its grace period ends.
//!
//! The catalog changes first: a commit lists the new files (their `moved_at` set: not under
//! `tables/`) and retires the files it replaces (a restatement, a ledger rebuild:
//! `retire_scope` in catalog.rs; a compaction: `Catalog::commit_compaction`). Then the store
//! follows, here and only here:
//!
//! - [`place`], right after a commit, moves its files from `_staging/` to `tables/`;
//! - [`settle`] finishes whatever a pass left (a crash, a lost connection, another replica):
//!   1. a retired file still under `tables/` moves to `_superseded/`, and the catalog records
//!      `moved_at`; when the file was made active again meanwhile, it moves back;
//!   2. an active file waiting aside (committed but not placed, or brought back by a
//!      re-delivery) moves to `tables/`;
//!   3. a retired file whose grace period (`--retain-superseded`) is over is claimed in the
//!      catalog (`deleted_at`), then its object is deleted;
//!   4. an upload no commit lists, older than [`ABANDONED_AFTER`], is deleted.
//!
//! Each step is idempotent and conditional in the catalog, so a pass that stops anywhere is
//! finished by the next one, on any replica: an object is never deleted before the catalog has
//! claimed it, and while it moves it is in one of the two places. A query planned on a file's
//! `tables/` key reads it where it waits aside ([`AsideFallback`]).
//!
//! Between a commit and its placement (one rename per file) an outside reader sees the table
//! as it was; the files a commit retires leave before its new files arrive, so a glob may
//! briefly miss a restated scope but never counts one twice.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::Utc;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

use crate::Lake;
use crate::catalog::Catalog;
use crate::error::Result;
use crate::paths::Aside;
use crate::writer::WrittenFile;

/// The grace period of `--retain-superseded` when none is given.
pub const DEFAULT_RETAIN_SUPERSEDED: Duration = Duration::from_secs(3600);

/// How old an upload under `_staging/` that no commit lists must be before it is deleted: far
/// longer than any ingest takes between writing a file and committing it.
pub const ABANDONED_AFTER: Duration = Duration::from_secs(24 * 3600);

/// What one [`settle`] pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SettleReport {
    /// Retired files moved under `_superseded/`.
    pub moved: u64,
    /// Active files moved back under `tables/` from `_superseded/`.
    pub restored: u64,
    /// Committed files moved from `_staging/` to `tables/`.
    pub placed: u64,
    /// Objects deleted after their grace period.
    pub deleted: u64,
    /// Uploads no commit lists (an ingest stopped between writing and committing) deleted.
    pub abandoned: u64,
}

impl std::ops::AddAssign for SettleReport {
    fn add_assign(&mut self, other: Self) {
        self.moved += other.moved;
        self.restored += other.restored;
        self.placed += other.placed;
        self.deleted += other.deleted;
        self.abandoned += other.abandoned;
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
        let moved = Aside::Superseded.of(&live);
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
        match bring_in(
            catalog,
            store,
            &file.path,
            &[Aside::Superseded, Aside::Staged],
        )
        .await?
        {
            Some(Aside::Superseded) => report.restored += 1,
            Some(Aside::Staged) => report.placed += 1,
            None => {}
        }
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
        delete_object(store, &Aside::Superseded.of(&live)).await?;
        // A file retired before it was placed, or a copy left under `tables/` by an
        // interrupted move, goes too: the file is retired.
        delete_object(store, &Aside::Staged.of(&live)).await?;
        delete_object(store, &live).await?;
        report.deleted += 1;
    }
    report.abandoned = delete_abandoned(catalog, store, retain.max(ABANDONED_AFTER)).await?;
    Ok(report)
}

/// Moves the active file `path` from the first of `places` that holds it to `tables/`, and
/// records it there; a file retired meanwhile goes on to `_superseded/`. Returns where the
/// object came from, `None` when it was in none of them (already in `tables/`) or was retired.
async fn bring_in(
    catalog: &Catalog,
    store: &dyn ObjectStore,
    path: &str,
    places: &[Aside],
) -> Result<Option<Aside>> {
    let live = Path::from(path);
    let mut found = None;
    for &place in places {
        match store.rename(&place.of(&live), &live).await {
            Ok(()) => {
                found = Some(place);
                break;
            }
            Err(error) if is_not_found(&error) => {}
            Err(error) => return Err(error.into()),
        }
    }
    if !catalog.record_restored(path).await? && !catalog.is_active(path).await? {
        // Retired while it moved: out of `tables/` again, as its retirement expects.
        move_object(store, &live, &Aside::Superseded.of(&live)).await?;
        return Ok(None);
    }
    Ok(found)
}

/// Deletes uploads under `_staging/` older than `age` that no commit lists: an ingest stopped
/// between writing its files and committing them. (A listed file is placed by step 2, or
/// deleted by step 3 when it was retired before it was placed.)
async fn delete_abandoned(
    catalog: &Catalog,
    store: &dyn ObjectStore,
    age: Duration,
) -> Result<u64> {
    let cutoff = Utc::now() - age;
    let mut stale = Vec::new();
    let mut listing = store.list(Some(&Path::from(Aside::Staged.prefix())));
    while let Some(object) = listing.next().await.transpose()? {
        if object.last_modified < cutoff {
            stale.push(object.location);
        }
    }
    let mut deleted = 0;
    for staged in stale {
        let Some(live) = Aside::Staged.live_of(&staged) else {
            continue;
        };
        if catalog.is_listed(live.as_ref()).await? {
            continue;
        }
        delete_object(store, &staged).await?;
        deleted += 1;
    }
    Ok(deleted)
}

/// Right after a commit: its files (`written`) move from `_staging/` to `tables/`. A failure
/// is logged, not returned: the commit stands, readers find the files where they wait, and the
/// next [`settle`] places them.
pub async fn place(lake: &Lake, written: &[WrittenFile]) -> SettleReport {
    let mut report = SettleReport::default();
    for file in written {
        let path = file.path.to_path().to_string();
        match bring_in(
            lake.catalog(),
            lake.store().as_ref(),
            &path,
            &[Aside::Staged],
        )
        .await
        {
            Ok(Some(_)) => report.placed += 1,
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(%path, %error, "a committed file waits under _staging/ until the next pass");
                return report;
            }
        }
    }
    report
}

/// Deletes the uploads of a batch that was certainly not committed (its writing failed, or it
/// repeated a batch the catalog holds); after a commit that failed, [`keep_after_failed_commit`].
/// Best effort: no catalog row lists them, so nothing reads them, and the next vacuum deletes
/// what is left after [`ABANDONED_AFTER`].
pub async fn discard(lake: &Lake, written: &[WrittenFile]) {
    for file in written {
        if let Err(error) = delete_object(lake.store().as_ref(), &file.staged()).await {
            tracing::warn!(path = %file.staged(), %error, "could not remove an uncommitted upload");
        }
    }
}

/// After a commit that failed with an error: its uploads stay under `_staging/`, never
/// [`discard`]ed. The commit may have landed with its answer lost (the connection dropped after
/// the catalog committed), and then they are the only copy of what it accepted: the next
/// [`settle`] places them if a commit lists them, and the vacuum deletes them after
/// [`ABANDONED_AFTER`] if none does.
pub fn keep_after_failed_commit(written: &[WrittenFile]) {
    if !written.is_empty() {
        tracing::warn!(
            files = written.len(),
            "a commit failed: its uploads wait under _staging/ until the vacuum knows whether it landed"
        );
    }
}

/// [`settle`] for the write paths right after a commit that retired files: their objects leave
/// `tables/`, then the committed files waiting under `_staging/` enter it; deleting retired
/// objects after the grace period is the vacuum's (`serve`, `gpuledger compact`). A failure is
/// logged, not returned: the commit stands, and the next pass finishes.
pub async fn settle_after_commit(lake: &Lake) -> SettleReport {
    match settle_with(lake, None, false).await {
        Ok(report) => report,
        Err(error) => {
            tracing::warn!(%error, "retired files stay where they are until the next pass");
            SettleReport::default()
        }
    }
}

/// The object store table files are read through ([`Lake::table_reader`]): a table file not
/// found under `tables/` is read where it waits aside: under `_staging/` when its commit is
/// not placed yet, under `_superseded/` when a restatement, a rebuild or a compaction moved it
/// while a query that had listed it was running, and wherever it went when it moves while the
/// read looks for it. Writes and listings go to the store unchanged.
#[derive(Debug)]
pub struct AsideFallback {
    inner: Arc<dyn ObjectStore>,
}

/// Where [`AsideFallback`] looks, in order: `tables/` (the common case), then the places aside,
/// a just-committed file first.
const READ_ORDER: [Option<Aside>; 3] = [None, Some(Aside::Staged), Some(Aside::Superseded)];

/// Rounds of [`READ_ORDER`] before a table file is taken as gone. One round can miss a file
/// that moves meanwhile (placed from `_staging/` after its `tables/` key was looked up, retired
/// to `_superseded/` after that key was): it is always in one place, but not where and when the
/// read looked. The next round finds it; a file still nowhere after three is gone (deleted after
/// its grace period).
const READ_ROUNDS: usize = 3;

impl AsideFallback {
    pub fn over(inner: Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore> {
        Arc::new(Self { inner })
    }

    /// `read` of the table file `location` wherever it is at the moment; other keys as they are.
    async fn read_wherever<T, F>(
        &self,
        location: &Path,
        read: impl Fn(Arc<dyn ObjectStore>, Path) -> F,
    ) -> object_store::Result<T>
    where
        F: Future<Output = object_store::Result<T>>,
    {
        if !Aside::applies_to(location) {
            return read(Arc::clone(&self.inner), location.clone()).await;
        }
        let mut missing = None;
        for _ in 0..READ_ROUNDS {
            for place in READ_ORDER {
                let key = place.map_or_else(|| location.clone(), |aside| aside.of(location));
                match read(Arc::clone(&self.inner), key).await {
                    Err(error) if is_not_found(&error) => {
                        missing.get_or_insert(error);
                    }
                    other => return other,
                }
            }
        }
        Err(missing.expect("looked at least once"))
    }
}

impl std::fmt::Display for AsideFallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AsideFallback({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for AsideFallback {
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
        // The options go to every place unchanged: no reader of table files sets a condition
        // (`if_match`, a version), which a store's copy-and-delete rename could break.
        let mut found = self
            .read_wherever(location, |store, key| {
                let options = options.clone();
                async move { store.get_opts(&key, options).await }
            })
            .await?;
        // DataFusion checks that what it reads is what it listed.
        found.meta.location = location.clone();
        Ok(found)
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.read_wherever(location, |store, key| async move {
            store.get_ranges(&key, ranges).await
        })
        .await
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

#[cfg(test)]
mod tests;
