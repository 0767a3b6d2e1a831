//! `gpuledger sql "<query>"`.

use std::io::Write;
use std::process::ExitCode;

use gpuledger_lake::Lake;

use crate::cli::SqlArgs;
use crate::output::write_batches;

pub async fn run(lake: &Lake, args: SqlArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let ctx = gpuledger_query::new_session(lake)?;
    // Read-only like the server's SQL, unless asked: `COPY … TO` would write files and DDL
    // would change the session's tables.
    let frame = if args.allow_writes {
        ctx.sql(&args.query).await?
    } else {
        let plan = gpuledger_query::user_query::plan_read_only(&ctx, &args.query)
            .await
            .map_err(|error| match error {
                gpuledger_query::QueryError::Refused(reason) => {
                    format!("{reason}; `gpuledger sql --allow-writes` runs it").into()
                }
                other => Box::new(other) as Box<dyn std::error::Error>,
            })?;
        ctx.execute_logical_plan(plan).await?
    };
    let schema = std::sync::Arc::new(frame.schema().as_arrow().clone());
    let batches = match frame.collect().await {
        Ok(batches) => batches,
        Err(error) => {
            return Err(gpuledger_query::distributed::explain_failure(&ctx, error)
                .await
                .into());
        }
    };
    let mut out = std::io::BufWriter::new(std::io::stdout());
    write_batches(&mut out, &schema, &batches, args.format)
        .map_err(|e| e as Box<dyn std::error::Error>)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
