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
