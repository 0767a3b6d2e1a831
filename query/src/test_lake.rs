//! Lakes for the crate's tests: a fresh one in a temporary directory, and one with inputs landed
//! through the ingest pipeline as `gpuledger ingest` lands them.

use chrono::Utc;
use gpuledger_ingest::pipeline::{IngestOptions, Input, Source, ingest};
use gpuledger_ingest::record::ParseContext;
use gpuledger_lake::{Lake, LakeConfig};

/// An empty lake; the directory lives as long as the returned guard.
pub(crate) async fn empty_lake() -> (tempfile::TempDir, Lake) {
    let dir = tempfile::tempdir().unwrap();
    let lake = Lake::open(&LakeConfig {
        data: dir.path().display().to_string(),
        catalog: None,
    })
    .await
    .unwrap();
    (dir, lake)
}

/// A lake with each of `inputs` landed as one ingest (so in files of its own), named `origin`.
pub(crate) async fn lake_with(
    source: Source,
    origin: &str,
    inputs: impl IntoIterator<Item = String>,
) -> (tempfile::TempDir, Lake) {
    let (dir, lake) = empty_lake().await;
    for bytes in inputs {
        let input = Input::Bytes {
            origin: origin.into(),
            bytes: bytes.into(),
        };
        let options = IngestOptions::new(source, ParseContext::new(origin, Utc::now()));
        ingest(&lake, input, options).await.unwrap();
    }
    (dir, lake)
}

/// 2026-11-02T00:00:00Z in milliseconds: the first day of [`power_sample_files`].
pub(crate) const DAY_MS: i64 = 1_793_577_600_000;

/// A lake with a dcgm file per slice of `files`, each slice hours since 2026-11-02T00:00:00Z:
/// at each hour one power sample of GPU 0 of every node of `nodes`, the `i`-th reading
/// `hour + 100 × i` watts.
pub(crate) async fn power_sample_files(
    nodes: &[&str],
    files: &[&[i64]],
) -> (tempfile::TempDir, Lake) {
    let text = |hours: &[i64]| -> String {
        let mut text = String::new();
        for hour in hours {
            let ms = DAY_MS + hour * 3_600_000;
            for (i, node) in (0_i64..).zip(nodes) {
                let watts = hour + 100 * i;
                text += &format!(
                    "DCGM_FI_DEV_POWER_USAGE{{gpu=\"0\",UUID=\"GPU-{node}\",Hostname=\"{node}\"}} {watts} {ms}\n"
                );
            }
        }
        text
    };
    lake_with(
        Source::Dcgm,
        "dcgm.prom",
        files.iter().map(|hours| text(hours)),
    )
    .await
}
