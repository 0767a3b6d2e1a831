//! `gpuledger compact`: one compaction and vacuum pass (lake/src/compaction.rs), the same as
//! `serve` runs every `--compact-interval`.

use std::process::ExitCode;

use gpuledger_lake::Lake;
use gpuledger_lake::compaction::{CompactOptions, pass};
use gpuledger_lake::tables::Table;

use crate::cli::CompactArgs;

pub async fn run(lake: &Lake, args: CompactArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let options = CompactOptions {
        tables: if args.tables.is_empty() {
            Table::ALL.to_vec()
        } else {
            args.tables
        },
        from: args.from,
        to: args.to,
        ..CompactOptions::default()
    };
    let owner = format!("compact-{}", uuid::Uuid::new_v4());
    let Some((compacted, settled)) =
        pass(lake, &options, args.retain_superseded.into(), &owner).await?
    else {
        return Err("another process holds the compaction lease (a `serve` replica compacting): try again later".into());
    };
    println!(
        "compacted {} files into {} ({} rows, {} merges{}); retired files: {} moved out of tables/, {} moved back, {} deleted; committed files placed under tables/: {}; abandoned uploads deleted: {}",
        compacted.files_merged,
        compacted.files_written,
        compacted.rows,
        compacted.merges,
        if compacted.conflicts > 0 {
            format!(", {} given up to a concurrent change", compacted.conflicts)
        } else {
            String::new()
        },
        settled.moved,
        settled.restored,
        settled.deleted,
        settled.placed,
        settled.abandoned,
    );
    Ok(ExitCode::SUCCESS)
}
