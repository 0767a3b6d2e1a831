use std::io::Write;

use futures::TryStreamExt;
use gpuledger_lake::LakeConfig;

use super::*;

const SCRAPE: &str = "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-1\",Hostname=\"n1\"} 41 1790000000000\n\
                      DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-1\",Hostname=\"n1\"} 70.5 1790000000000\n";

async fn lake(dir: &tempfile::TempDir) -> Lake {
    Lake::open(&LakeConfig {
        data: dir.path().join("lake").display().to_string(),
        catalog: None,
    })
    .await
    .unwrap()
}

fn options(source: Source) -> IngestOptions {
    IngestOptions::new(
        source,
        ParseContext::new("test", DateTime::from_timestamp(1_790_000_000, 0).unwrap()),
    )
}

fn bytes(text: &[u8]) -> Input {
    Input::Bytes {
        origin: "body".into(),
        bytes: bytes::Bytes::copy_from_slice(text),
    }
}

async fn objects(lake: &Lake) -> Vec<String> {
    let mut paths: Vec<String> = lake
        .store()
        .list(None)
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .unwrap();
    paths.retain(|p| p.starts_with("tables/"));
    paths.sort();
    paths
}

#[tokio::test]
async fn the_same_input_lands_once_and_leaves_no_stray_objects() {
    let dir = tempfile::tempdir().unwrap();
    let lake = lake(&dir).await;
    let first = ingest(&lake, bytes(SCRAPE.as_bytes()), options(Source::Dcgm))
        .await
        .unwrap();
    assert_eq!(first.outcome, Outcome::Landed { rows_replaced: 0 });
    assert_eq!(
        (first.records_read, first.rows.clone()),
        (2, vec![(Table::GpuSamples, 1)])
    );
    let after_first = objects(&lake).await;
    assert_eq!(after_first.len(), 1);

    let second = ingest(&lake, bytes(SCRAPE.as_bytes()), options(Source::Dcgm))
        .await
        .unwrap();
    assert_eq!(
        second.outcome,
        Outcome::AlreadyIngested {
            batch_id: first.batch_id.clone()
        }
    );
    assert_eq!((second.rows_landed(), second.files_written), (0, 0));
    assert_eq!(
        objects(&lake).await,
        after_first,
        "the duplicate's objects were removed"
    );

    // The same bytes with another cluster name are another input.
    let mut other = options(Source::Dcgm);
    other.context.cluster = Some("east".into());
    assert!(matches!(
        ingest(&lake, bytes(SCRAPE.as_bytes()), other)
            .await
            .unwrap()
            .outcome,
        Outcome::Landed { .. }
    ));
}

#[tokio::test]
async fn strict_mode_lands_nothing_and_gzip_is_detected_by_content() {
    let dir = tempfile::tempdir().unwrap();
    let lake = lake(&dir).await;
    let bad = format!(
        "{SCRAPE}DCGM_FI_DEV_GPU_UTIL{{gpu=\"0\",UUID=\"GPU-1\",Hostname=\"n1\"}} ERROR 1790000000000\n"
    );
    let mut strict = options(Source::Dcgm);
    strict.strict = true;
    let error = ingest(&lake, bytes(bad.as_bytes()), strict)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("test:3: field 'DCGM_FI_DEV_GPU_UTIL'"),
        "{error}"
    );
    assert!(objects(&lake).await.is_empty());
    assert!(lake.catalog().batches().await.unwrap().is_empty());

    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bad.as_bytes()).unwrap();
    let report = ingest(&lake, bytes(&gz.finish().unwrap()), options(Source::Dcgm))
        .await
        .unwrap();
    assert_eq!(report.rows, vec![(Table::GpuSamples, 1)]);
    assert_eq!(report.rejections.len(), 1);
    assert_eq!(report.rejections[0].line, 3);
    assert_eq!(
        lake.catalog().quarantine().await.unwrap()[0].rejection,
        report.rejections[0]
    );
}

#[tokio::test]
async fn a_request_delivered_again_in_a_later_input_counts_once() {
    let dir = tempfile::tempdir().unwrap();
    let lake = lake(&dir).await;
    let line = |id: &str, ts: &str| {
        format!(
            "{{\"ts\":\"{ts}\",\"request_id\":\"{id}\",\"model\":\"m\",\"input_tokens\":1,\"output_tokens\":2}}\n"
        )
    };
    let first = [
        line("a", "2026-11-01T10:00:00Z"),
        line("b", "2026-11-02T10:00:00Z"),
    ]
    .concat();
    ingest(&lake, bytes(first.as_bytes()), options(Source::Tokens))
        .await
        .unwrap();
    // b again (same day partition), c new, a again with a different day: counted by request id.
    let second = [
        line("b", "2026-11-02T10:00:00Z"),
        line("c", "2026-11-02T11:00:00Z"),
        line("a", "2026-11-01T10:00:00Z"),
    ]
    .concat();
    let report = ingest(&lake, bytes(second.as_bytes()), options(Source::Tokens))
        .await
        .unwrap();
    assert_eq!((report.duplicates_skipped, report.rows_landed()), (2, 1));
}
