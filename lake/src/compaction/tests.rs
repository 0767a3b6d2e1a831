use arrow::array::{AsArray, Int64Array, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::Int64Type;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};

use super::*;
use crate::catalog::CommitOutcome;
use crate::paths::Aside;
use crate::retirement::{place, settle};
use crate::tables::batch_with_columns;
use crate::testing::catalog_urls;
use crate::writer::WrittenFile;
use crate::{LakeConfig, catalog::NewBatch};

// 2024-09-18T00:00:00Z in microseconds.
const SEP_18: i64 = 1_726_617_600_000_000;

/// A lake in a temporary directory on each catalog backend the test command provides.
pub(crate) async fn each_lake(test: impl AsyncFn(Lake, &std::path::Path)) {
    let dir = tempfile::tempdir().unwrap();
    for (backend, url) in catalog_urls(dir.path()).await {
        eprintln!("catalog backend: {backend}");
        let data = dir.path().join(backend);
        let lake = Lake::open(&LakeConfig {
            data: data.display().to_string(),
            catalog: Some(url),
        })
        .await
        .unwrap();
        test(lake, &data).await;
    }
}

pub(crate) fn batch(id: &str, hash: &str) -> NewBatch {
    NewBatch {
        batch_id: id.into(),
        source: "tokens".into(),
        origin: format!("{id}.json"),
        content_hash: hash.into(),
        idempotency_key: None,
        records_read: 1,
        started_at: 0,
    }
}

/// Lands `n` requests of `tokens` input tokens each, one second apart from `start`, as batch
/// `id`, and places its file as the ingest pipeline does.
pub(crate) async fn land(
    lake: &Lake,
    id: &str,
    start: i64,
    n: i64,
    tokens: i64,
) -> Vec<WrittenFile> {
    let files = land_unplaced(lake, id, start, n, tokens).await;
    place(lake, &files).await;
    files
}

/// [`land`] stopped after its commit, before its file is placed under `tables/`.
pub(crate) async fn land_unplaced(
    lake: &Lake,
    id: &str,
    start: i64,
    n: i64,
    tokens: i64,
) -> Vec<WrittenFile> {
    let ts: Vec<i64> = (0..n).map(|i| start + i * 1_000_000).collect();
    let ids: Vec<String> = (0..n).map(|i| format!("{id}-{i}")).collect();
    let rows = batch_with_columns(
        Table::TokenUsage,
        vec![
            (
                "ts",
                Arc::new(TimestampMicrosecondArray::from(ts).with_timezone("UTC")),
            ),
            ("request_id", Arc::new(StringArray::from(ids))),
            (
                "model",
                Arc::new(StringArray::from(vec!["llama"; n as usize])),
            ),
            (
                "input_tokens",
                Arc::new(Int64Array::from(vec![tokens; n as usize])),
            ),
            (
                "source",
                Arc::new(StringArray::from(vec!["canonical"; n as usize])),
            ),
        ],
    )
    .unwrap();
    let files = TableWriter::new(Arc::clone(lake.store()), id)
        .write(Table::TokenUsage, &rows)
        .await
        .unwrap();
    let outcome = lake
        .catalog()
        .commit_batch(&batch(id, id), &files, &[])
        .await
        .unwrap();
    assert!(
        matches!(outcome, CommitOutcome::Committed { .. }),
        "{outcome:?}"
    );
    files
}

/// A stand-in billing file of `rows` rows for the scope `acct|2024-09`, uploaded as batch
/// `id` and not committed: for the catalog's restatement paths, which never read it.
pub(crate) async fn upload_scoped(lake: &Lake, id: &str, rows: u64) -> WrittenFile {
    let file = WrittenFile {
        path: crate::paths::TableFilePath::new(
            Table::BillingLines,
            NaiveDate::from_ymd_opt(2024, 9, 18).unwrap(),
            id,
            1,
        ),
        scope: Some("acct|2024-09".into()),
        rows,
        bytes: 4,
        min_ts: SEP_18,
        max_ts: SEP_18,
    };
    lake.store()
        .put(&file.staged(), PutPayload::from_static(b"PAR1"))
        .await
        .unwrap();
    file
}

/// (files, rows, sum of input_tokens) over the active files, read from their objects as
/// queries read them.
pub(crate) async fn active(lake: &Lake) -> (usize, usize, i64) {
    let files = lake
        .catalog()
        .active_files(Table::TokenUsage, None, None)
        .await
        .unwrap();
    let (mut rows, mut sum) = (0, 0);
    for file in &files {
        for batch in lake.read_file(&file.path).await.unwrap() {
            rows += batch.num_rows();
            let tokens = batch.column_by_name("input_tokens").unwrap();
            sum += tokens
                .as_primitive::<Int64Type>()
                .iter()
                .flatten()
                .sum::<i64>();
        }
    }
    (files.len(), rows, sum)
}

/// Every `.parquet` under `<data>/<prefix>`, as keys relative to `data`.
pub(crate) fn on_disk(data: &std::path::Path, prefix: &str) -> Vec<String> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "parquet") {
                out.push(path);
            }
        }
    }
    let mut found = Vec::new();
    walk(&data.join(prefix), &mut found);
    let mut keys: Vec<String> = found
        .iter()
        .map(|p| p.strip_prefix(data).unwrap().display().to_string())
        .collect();
    keys.sort();
    keys
}

pub(crate) async fn active_keys(lake: &Lake) -> Vec<String> {
    let mut keys: Vec<String> = lake
        .catalog()
        .active_files(Table::TokenUsage, None, None)
        .await
        .unwrap()
        .into_iter()
        .map(|f| f.path)
        .collect();
    keys.sort();
    keys
}

#[tokio::test]
async fn small_files_merge_into_few_and_every_row_stays() {
    each_lake(async |lake: Lake, data: &std::path::Path| {
        // Five pushes on Sep 18 (3 rows each), one on Sep 19.
        for i in 0..5 {
            land(&lake, &format!("p{i}"), SEP_18 + i * 10_000_000, 3, 10 + i).await;
        }
        land(&lake, "next-day", SEP_18 + 86_400_000_000, 2, 7).await;
        assert_eq!(
            active(&lake).await,
            (6, 17, 3 * (10 + 11 + 12 + 13 + 14) + 14)
        );

        let report = compact(&lake, &CompactOptions::default()).await.unwrap();
        assert_eq!(
            (
                report.merges,
                report.files_merged,
                report.files_written,
                report.rows
            ),
            (1, 5, 1, 15)
        );
        // The same rows and sums, in two files; the merged ones are retired, not yet moved,
        // and the merged file waits under _staging/.
        assert_eq!(
            active(&lake).await,
            (2, 17, 3 * (10 + 11 + 12 + 13 + 14) + 14)
        );
        assert_eq!(on_disk(data, "tables").len(), 6);
        assert_eq!(on_disk(data, "_staging").len(), 1);
        // A second pass has nothing to merge.
        assert_eq!(
            compact(&lake, &CompactOptions::default()).await.unwrap(),
            CompactionReport::default()
        );

        // The vacuum moves the merged files out of tables/ and the merged one in, keeps them
        // through the grace period…
        let settled = settle(&lake, Some(Duration::from_secs(3600)))
            .await
            .unwrap();
        assert_eq!((settled.moved, settled.placed, settled.deleted), (5, 1, 0));
        assert_eq!(on_disk(data, "tables"), active_keys(&lake).await);
        assert!(on_disk(data, "_staging").is_empty());
        assert_eq!(on_disk(data, "_superseded").len(), 5);
        // …and deletes them once it is over.
        let settled = settle(&lake, Some(Duration::ZERO)).await.unwrap();
        assert_eq!((settled.moved, settled.deleted), (0, 5));
        assert!(on_disk(data, "_superseded").is_empty());
        assert_eq!(on_disk(data, "tables"), active_keys(&lake).await);
        assert_eq!(lake.catalog().retired_counts().await.unwrap(), (0, 0, 5));
    })
    .await;
}

/// A compaction whose commit fails (another writer holds the SQLite catalog past its busy
/// timeout) keeps its merged upload under `_staging/`: had the commit landed with its answer
/// lost, that file would be the only copy of the merged rows. The sources stay as they were,
/// and the vacuum, which deletes an upload no commit lists only once it is a day old, keeps it.
#[tokio::test]
async fn a_compaction_whose_commit_fails_keeps_its_upload_for_the_vacuum() {
    use sqlx::Connection;
    let dir = tempfile::tempdir().unwrap();
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("catalog.db").display()
    );
    let data = dir.path().join("lake");
    let lake = Lake::open(&LakeConfig {
        data: data.display().to_string(),
        catalog: Some(url.clone()),
    })
    .await
    .unwrap();
    for i in 0..3 {
        land(&lake, &format!("p{i}"), SEP_18 + i * 10_000_000, 3, 10).await;
    }
    let mut other_writer = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut other_writer)
        .await
        .unwrap();
    let failed = compact(&lake, &CompactOptions::default()).await;
    assert!(failed.is_err(), "{failed:?}");
    assert_eq!(on_disk(&data, "_staging").len(), 1);
    sqlx::query("ROLLBACK")
        .execute(&mut other_writer)
        .await
        .unwrap();
    assert_eq!(active(&lake).await, (3, 9, 90));
    let settled = settle(&lake, Some(Duration::ZERO)).await.unwrap();
    assert_eq!((settled.abandoned, settled.placed), (0, 0));
    assert_eq!(on_disk(&data, "_staging").len(), 1);
    assert_eq!(on_disk(&data, "tables"), active_keys(&lake).await);
}

#[tokio::test]
async fn a_pass_interrupted_at_any_step_is_finished_by_the_next() {
    each_lake(async |lake: Lake, data: &std::path::Path| {
        let files = [
            land(&lake, "a", SEP_18, 2, 1).await,
            land(&lake, "b", SEP_18 + 5_000_000, 2, 2).await,
            land(&lake, "c", SEP_18 + 9_000_000, 2, 3).await,
        ];
        compact(&lake, &CompactOptions::default()).await.unwrap();
        let keys: Vec<Path> = files.iter().map(|f| f[0].path.to_path()).collect();
        // A crash after the swap, before any move: all three still under tables/. Then a
        // pass that stopped after moving `a`'s object, before recording it.
        lake.store()
            .rename(&keys[0], &Aside::Superseded.of(&keys[0]))
            .await
            .unwrap();
        let settled = settle(&lake, None).await.unwrap();
        assert_eq!(settled.moved, 3, "a's move is recorded, b and c move");
        assert_eq!(settled.placed, 1, "the merged file enters tables/");
        assert_eq!(on_disk(data, "tables"), active_keys(&lake).await);
        // A pass that claimed `c` for deletion and died before deleting it: `c` is never
        // active again, and the next pass past the grace period deletes the other two.
        assert!(lake.catalog().mark_deleted(keys[2].as_ref()).await.unwrap());
        let settled = settle(&lake, Some(Duration::ZERO)).await.unwrap();
        assert_eq!(settled.deleted, 2);
        assert_eq!(on_disk(data, "tables"), active_keys(&lake).await);
        assert_eq!(active(&lake).await, (1, 6, 2 + 4 + 6));
    })
    .await;
}

#[tokio::test]
async fn a_file_made_active_again_comes_back_under_tables() {
    each_lake(async |lake: Lake, data: &std::path::Path| {
        // A bill-like restatement on the catalog's own path: d1, then d2 for the same scope,
        // then d1's very files again (no new copies): d1's file must be back under tables/.
        let (d1, d2) = (
            [upload_scoped(&lake, "d1", 4).await],
            [upload_scoped(&lake, "d2", 3).await],
        );
        let commit = async |id: &str, hash: &str, files: &[WrittenFile]| {
            lake.catalog()
                .commit_batch(&batch(id, hash), files, &[])
                .await
                .unwrap()
        };
        commit("d1", "h1", &d1).await;
        place(&lake, &d1).await;
        // d2's commit stops before its file is placed: the settle places it.
        commit("d2", "h2", &d2).await;
        let settled = settle(&lake, None).await.unwrap();
        assert_eq!((settled.moved, settled.placed), (1, 1));
        let d1_key = d1[0].path.to_path().to_string();
        let d2_key = d2[0].path.to_path().to_string();
        assert_eq!(on_disk(data, "tables"), std::slice::from_ref(&d2_key));
        assert_eq!(
            on_disk(data, "_superseded"),
            [format!("_superseded/{d1_key}")]
        );
        let again = commit("d3", "h1", &d1).await;
        assert!(
            matches!(again, CommitOutcome::Reactivated { rows_restored: 4, ref adopted, .. } if adopted.is_empty()),
            "{again:?}"
        );
        let settled = settle(&lake, None).await.unwrap();
        assert_eq!((settled.moved, settled.restored), (1, 1));
        assert_eq!(on_disk(data, "tables"), std::slice::from_ref(&d1_key));
        assert_eq!(
            on_disk(data, "_superseded"),
            [format!("_superseded/{d2_key}")]
        );
    })
    .await;
}
