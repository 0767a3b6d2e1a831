//! `gpuledger worker`: a query worker over the lake, for coordinators given `--workers`.

use std::process::ExitCode;

use gpuledger_lake::Lake;
use gpuledger_query::distributed::{WorkerOptions, serve_worker};

use crate::cli::WorkerArgs;

pub async fn run(
    lake: &Lake,
    secret: Option<String>,
    args: WorkerArgs,
) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let options = WorkerOptions {
        memory_limit: args.query_memory_mb << 20,
        secret,
        task_timeout: args.query_timeout.into(),
    };
    if options.secret.is_none() && !args.listen.ip().is_loopback() {
        tracing::warn!(
            "worker on {} without GPULEDGER_WORKER_SECRET: anyone who reaches this port can read the lake",
            args.listen
        );
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|error| format!("worker: cannot listen on {}: {error}", args.listen))?;
    let address = listener.local_addr()?;
    // Tests and supervisors wait for this line (with the port, when asked for port 0).
    eprintln!("worker listening on {address}");
    serve_worker(lake, listener, options, crate::serve::shutdown_signal())
        .await
        .map_err(|error| format!("worker on {address}: {error}"))?;
    Ok(ExitCode::SUCCESS)
}
