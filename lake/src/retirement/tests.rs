//! Staging and placement: `tables/` holds the active files at every step of a write, whatever
//! step a crash stops it at. (Retirement's moves are tested with compaction, which retires
//! files too: lake/src/compaction/tests.rs.)

use std::time::SystemTime;

use super::*;
use crate::catalog::CommitOutcome;
use crate::compaction::tests::{
    active, active_keys, batch, each_lake, land, land_unplaced, on_disk, upload_scoped,
};
use crate::tables::{Table, batch_with_columns};
use crate::writer::TableWriter;

// 2024-09-18T00:00:00Z in microseconds.
const SEP_18: i64 = 1_726_617_600_000_000;

/// Writes one token request as batch `id` without committing it.
async fn upload(lake: &Lake, id: &str) -> Vec<WrittenFile> {
    use arrow::array::{Int64Array, StringArray, TimestampMicrosecondArray};
    let rows = batch_with_columns(
        Table::TokenUsage,
        vec![
            (
                "ts",
                Arc::new(TimestampMicrosecondArray::from(vec![SEP_18]).with_timezone("UTC")),
            ),
            ("request_id", Arc::new(StringArray::from(vec![id]))),
            ("model", Arc::new(StringArray::from(vec!["llama"]))),
            ("input_tokens", Arc::new(Int64Array::from(vec![100]))),
            ("source", Arc::new(StringArray::from(vec!["canonical"]))),
        ],
    )
    .unwrap();
    TableWriter::new(Arc::clone(lake.store()), id)
        .write(Table::TokenUsage, &rows)
        .await
        .unwrap()
}

/// Sets the modification time of the local object `key` of the lake at `data` to `ago` before now.
fn age(data: &std::path::Path, key: &Path, ago: Duration) {
    let file = std::fs::File::options()
        .write(true)
        .open(data.join(key.as_ref()))
        .unwrap();
    file.set_modified(SystemTime::now() - ago).unwrap();
}

#[tokio::test]
async fn nothing_enters_tables_before_its_commit_is_placed() {
    each_lake(async |lake: Lake, data: &std::path::Path| {
        // Written, not committed: under _staging/ only, read by no one.
        let written = upload(&lake, "w1").await;
        assert!(on_disk(data, "tables").is_empty());
        assert_eq!(
            on_disk(data, "_staging"),
            ["_staging/tables/token_usage/date=2024-09-18/w1-00001.parquet"]
        );
        // Committed (a crash before the placement): active, and queries read it where it
        // waits, but an outside glob still sees nothing.
        let outcome = lake
            .catalog()
            .commit_batch(&batch("w1", "w1"), &written, &[])
            .await
            .unwrap();
        assert!(matches!(outcome, CommitOutcome::Committed { .. }));
        assert!(on_disk(data, "tables").is_empty());
        assert_eq!(active(&lake).await, (1, 1, 100));
        // Placed: under tables/, nowhere else.
        let placed = place(&lake, &written).await;
        assert_eq!(placed.placed, 1);
        assert_eq!(on_disk(data, "tables"), active_keys(&lake).await);
        assert!(on_disk(data, "_staging").is_empty());
        // Placing again (a retried request) changes nothing.
        assert_eq!(place(&lake, &written).await, SettleReport::default());

        // A commit whose placement never ran is placed by the next settle, on any replica.
        land_unplaced(&lake, "w2", SEP_18 + 1_000_000, 2, 7).await;
        assert_eq!(on_disk(data, "tables").len(), 1);
        let settled = settle(&lake, None).await.unwrap();
        assert_eq!(settled.placed, 1);
        assert_eq!(on_disk(data, "tables"), active_keys(&lake).await);
        assert_eq!(active(&lake).await, (2, 3, 114));
    })
    .await;
}

#[tokio::test]
async fn uploads_no_commit_lists_are_deleted_after_a_day() {
    each_lake(async |lake: Lake, data: &std::path::Path| {
        let stale = upload(&lake, "crashed").await;
        let young = upload(&lake, "in-flight").await;
        let committed = land_unplaced(&lake, "slow", SEP_18, 1, 5).await;
        for file in stale.iter().chain(&committed) {
            age(
                data,
                &file.staged(),
                ABANDONED_AFTER + Duration::from_secs(60),
            );
        }
        // Even with no grace period for retired files, an upload younger than a day may be
        // an ingest about to commit: it stays.
        let settled = settle(&lake, Some(Duration::ZERO)).await.unwrap();
        assert_eq!((settled.abandoned, settled.placed), (1, 1));
        assert_eq!(
            on_disk(data, "_staging"),
            [format!("_staging/{}", young[0].path.to_path())]
        );
        assert_eq!(on_disk(data, "tables"), active_keys(&lake).await);
        assert_eq!(active(&lake).await, (1, 1, 5));
        // What a failed commit leaves is discarded at once.
        discard(&lake, &young).await;
        assert!(on_disk(data, "_staging").is_empty());
    })
    .await;
}

#[tokio::test]
async fn a_file_retired_before_it_was_placed_never_enters_tables() {
    each_lake(async |lake: Lake, data: &std::path::Path| {
        // Billing-like scoped files: d1 is committed, and d2 restates its scope before d1's
        // placement runs (two ingests racing); then d1's placement runs late.
        let (d1, d2) = (
            [upload_scoped(&lake, "d1", 4).await],
            [upload_scoped(&lake, "d2", 3).await],
        );
        for (id, files) in [("d1", &d1), ("d2", &d2)] {
            lake.catalog()
                .commit_batch(&batch(id, id), files, &[])
                .await
                .unwrap();
        }
        assert_eq!(settle_after_commit(&lake).await.placed, 1);
        assert_eq!(place(&lake, &d1).await.placed, 0);
        let d2_key = d2[0].path.to_path().to_string();
        assert_eq!(on_disk(data, "tables"), [d2_key]);
        assert_eq!(
            on_disk(data, "_superseded"),
            [format!("_superseded/{}", d1[0].path.to_path())]
        );
        // Its grace period over, it is deleted like any retired file.
        let settled = settle(&lake, Some(Duration::ZERO)).await.unwrap();
        assert_eq!(settled.deleted, 1);
        assert!(on_disk(data, "_superseded").is_empty());
        assert!(on_disk(data, "_staging").is_empty());
    })
    .await;
}

#[tokio::test]
async fn a_landed_file_reads_the_same_before_and_after_its_placement() {
    each_lake(async |lake: Lake, _data: &std::path::Path| {
        let files = land_unplaced(&lake, "p", SEP_18, 3, 2).await;
        let before = active(&lake).await;
        place(&lake, &files).await;
        assert_eq!(before, active(&lake).await);
        assert_eq!(before, (1, 3, 6));
        land(&lake, "q", SEP_18 + 9_000_000, 1, 1).await;
        assert_eq!(active(&lake).await, (2, 4, 7));
    })
    .await;
}

/// A store that moves an object the moment a read finds nothing where it is about to arrive:
/// the worst timing for a reader, which looked at the file's new place just before it got there.
/// The moves happen one after another, each once.
#[derive(Debug)]
struct MovesWhenMissed {
    inner: Arc<dyn ObjectStore>,
    /// (from, to) in order.
    moves: Vec<(Path, Path)>,
    made: std::sync::atomic::AtomicUsize,
}

impl MovesWhenMissed {
    async fn after_miss<T>(
        &self,
        location: &Path,
        read: object_store::Result<T>,
    ) -> object_store::Result<T> {
        use std::sync::atomic::Ordering::SeqCst;
        let next = self.made.load(SeqCst);
        if let Some((from, to)) = self.moves.get(next)
            && matches!(read, Err(object_store::Error::NotFound { .. }))
            && location == to
        {
            self.inner.rename(from, to).await.unwrap();
            self.made.store(next + 1, SeqCst);
        }
        read
    }
}

impl std::fmt::Display for MovesWhenMissed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MovesWhenMissed({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for MovesWhenMissed {
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
        let read = self.inner.get_opts(location, options).await;
        self.after_miss(location, read).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        let read = self.inner.get_ranges(location, ranges).await;
        self.after_miss(location, read).await
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

#[tokio::test]
async fn a_table_file_that_moves_while_it_is_read_is_still_read() {
    let live = Path::from("tables/gpu_samples/date=2024-09-18/b-00001.parquet");
    let (tables, staged, superseded) = (
        live.clone(),
        Aside::Staged.of(&live),
        Aside::Superseded.of(&live),
    );
    // The moves a reader can miss: into a place it looks at before the one the file leaves
    // (it reads tables/, _staging/, _superseded/ in that order; a move the other way is found
    // where it arrives). Placement, a file made active again, and one moved twice, which only
    // a third look finds.
    let cases = [
        vec![(staged.clone(), tables.clone())],
        vec![(superseded.clone(), tables.clone())],
        vec![(superseded.clone(), staged.clone())],
        vec![
            (superseded.clone(), staged.clone()),
            (staged.clone(), tables.clone()),
        ],
    ];
    for moves in cases {
        for ranged in [false, true] {
            let inner: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
            inner
                .put(&moves[0].0, PutPayload::from_static(b"PAR1"))
                .await
                .unwrap();
            let moving = Arc::new(MovesWhenMissed {
                inner,
                moves: moves.clone(),
                made: 0.into(),
            });
            let store = AsideFallback::over(Arc::clone(&moving) as Arc<dyn ObjectStore>);
            let read = if ranged {
                store
                    .get_ranges(&live, &[1..2, 2..3])
                    .await
                    .map(|r| r.concat())
            } else {
                match store.get(&live).await {
                    Ok(found) => {
                        assert_eq!(found.meta.location, live, "as DataFusion listed it");
                        found.bytes().await.map(|b| b.to_vec())
                    }
                    Err(error) => Err(error),
                }
            };
            let expected: &[u8] = if ranged { b"AR" } else { b"PAR1" };
            assert_eq!(
                read.unwrap_or_else(|e| panic!("{moves:?} (ranged: {ranged}): {e}")),
                expected
            );
            assert_eq!(
                moving.made.load(std::sync::atomic::Ordering::SeqCst),
                moves.len(),
                "every move happened under the read: {moves:?}"
            );
        }
    }
    // A file in no place at all is an error naming its `tables/` key.
    let store = AsideFallback::over(Arc::new(object_store::memory::InMemory::new()));
    let error = store.get(&live).await.unwrap_err();
    assert!(error.to_string().contains(live.as_ref()), "{error}");
}
