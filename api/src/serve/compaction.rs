//! Compaction and vacuum in the background: every `--compact-interval`, one replica of those
//! sharing the catalog (the holder of the `compaction` lease) merges small files and settles
//! retired ones (lake/src/compaction.rs `pass`), as `gpuledger compact` does.
//!
//! The first pass comes one interval after start, not at start: a replica starting beside a
//! busy one does not race it for the lease on its first breath, and a short-lived `serve` (a
//! test, a demo) leaves its files as they landed.

use std::time::Duration;

use gpuledger_lake::compaction::{CompactOptions, pass};

use super::AppState;

/// One pass as the holder of the `compaction` lease (`owner`): a round of the loop `serve` runs
/// every `--compact-interval` (never with `0s`, which leaves it to `gpuledger compact`).
pub async fn run_pass(state: &AppState, retain: Duration, owner: &str) {
    match pass(&state.lake, &CompactOptions::default(), retain, owner).await {
        Ok(Some((compacted, settled))) => {
            state.metrics.observe_compaction(&compacted, &settled);
            if compacted.merges > 0 || settled != Default::default() {
                tracing::info!(
                    merged = compacted.files_merged,
                    written = compacted.files_written,
                    moved = settled.moved,
                    placed = settled.placed,
                    deleted = settled.deleted,
                    abandoned = settled.abandoned,
                    "compaction pass"
                );
            }
        }
        Ok(None) => {}
        Err(error) => tracing::error!(%error, "compaction pass failed"),
    }
}
