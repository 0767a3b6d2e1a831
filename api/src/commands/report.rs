//! `gpuledger report weekly --week YYYY-Www [--format …] [--out PATH]`.

use std::io::Write;
use std::process::ExitCode;

use gpuledger_lake::Lake;
use gpuledger_report::{TenantLimits, weekly_report};

use crate::cli::{ReportArgs, ReportCommand};

pub async fn run(lake: &Lake, args: ReportArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    match args.command {
        ReportCommand::Weekly { week, format, out } => {
            let limits = TenantLimits::declared(lake).await?;
            let report = weekly_report(lake, week, &limits).await?;
            let body = format.format().render(&report);
            match out {
                Some(path) => std::fs::write(&path, body)
                    .map_err(|e| format!("writing {}: {e}", path.display()))?,
                None => std::io::stdout().write_all(&body)?,
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
