//! `gpuledger sql "<query>"`.

use std::io::Write;
use std::process::ExitCode;

use gpuledger_lake::Lake;

use crate::cli::SqlArgs;
use crate::output::write_batches;

pub async fn run(lake: &Lake, args: SqlArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let ctx = gpuledger_query::new_session(lake)?;
    let frame = ctx.sql(&args.query).await?;
    let schema = std::sync::Arc::new(frame.schema().as_arrow().clone());
    let batches = frame.collect().await?;
    let mut out = std::io::BufWriter::new(std::io::stdout());
    write_batches(&mut out, &schema, &batches, args.format)
        .map_err(|e| e as Box<dyn std::error::Error>)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
