//! `gpuledger export focus --from D --to D [--format csv|parquet] [--out PATH]`.

use std::io::Write;
use std::process::ExitCode;

use gpuledger_lake::Lake;
use gpuledger_ledger::money::Money;
use gpuledger_ledger::time::Span;
use gpuledger_query::columns::{money, value};
use gpuledger_query::focus_export::focus_allocated;

use crate::cli::{ExportArgs, ExportCommand};
use crate::output::write_focus;

pub async fn run(lake: &Lake, args: ExportArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    match args.command {
        ExportCommand::Focus {
            from,
            to,
            format,
            out,
        } => {
            if to <= from {
                return Err("--to must be after --from (the window is [from, to))".into());
            }
            let window = Span::new(
                gpuledger_build::day_span(from).start,
                gpuledger_build::day_span(to).start,
            );
            let ctx = gpuledger_query::new_session(lake)?;
            let batches = focus_allocated(&ctx, lake.catalog(), window).await?;
            let mut body = Vec::new();
            write_focus(&mut body, &batches, format).map_err(|e| e.to_string())?;
            match &out {
                Some(path) => std::fs::write(path, &body)
                    .map_err(|e| format!("writing {}: {e}", path.display()))?,
                None => std::io::stdout().write_all(&body)?,
            }
            let mut total = Money::ZERO;
            let mut rows = 0;
            for batch in &batches {
                let costs = money(batch, "EffectiveCost")?;
                rows += batch.num_rows();
                for row in 0..batch.num_rows() {
                    total += value(&costs, row).map_or(Money::ZERO, Money::from_units);
                }
            }
            eprintln!("{rows} rows, EffectiveCost {total:.2} ({from} to {to}, exclusive)");
            Ok(ExitCode::SUCCESS)
        }
    }
}
