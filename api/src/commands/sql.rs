//! `gpuledger sql "<query>"`.

use std::process::ExitCode;

use gpuledger_lake::Lake;

use crate::cli::SqlArgs;
use crate::output::write_batches;

pub async fn run(lake: &Lake, args: SqlArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let ctx = gpuledger_query::new_session(lake)?;
    let batches = ctx.sql(&args.query).await?.collect().await?;
    write_batches(&mut std::io::stdout().lock(), &batches, args.format)?;
    Ok(ExitCode::SUCCESS)
}
