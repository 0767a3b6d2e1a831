//! `gpuledger worker`: a query worker over the lake, for coordinators given `--workers`.

use std::process::ExitCode;

use gpuledger_lake::Lake;
use gpuledger_query::distributed::{Identity, WorkerChannels, WorkerOptions, WorkerServer};

use crate::cli::WorkerArgs;

pub async fn run(
    lake: &Lake,
    secret: Option<String>,
    peers: WorkerChannels,
    args: WorkerArgs,
) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(Identity::from_pem(
            crate::pem::certificates(cert, "--tls-cert")?.bytes,
            crate::pem::private_key(key, "--tls-key")?.bytes,
        )),
        _ => None,
    };
    let options = WorkerOptions {
        memory_limit: args.query_memory_mb << 20,
        secret,
        task_timeout: args.query_timeout.into(),
        tls,
        peers,
    };
    if !args.listen.ip().is_loopback() {
        if options.secret.is_none() {
            tracing::warn!(
                "worker on {} without GPULEDGER_WORKER_SECRET: anyone who reaches this port can read the lake",
                args.listen
            );
        }
        if options.tls.is_none() {
            tracing::warn!(
                "worker on {} without --tls-cert: the secret and the lake's rows cross the network in the clear",
                args.listen
            );
        }
    }
    let server = WorkerServer::new(lake, options)?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|error| format!("worker: cannot listen on {}: {error}", args.listen))?;
    let address = listener.local_addr()?;
    // Tests and supervisors wait for this line (with the port, when asked for port 0).
    eprintln!("worker listening on {address}");
    server
        .serve(listener, crate::serve::shutdown_signal())
        .await
        .map_err(|error| format!("worker on {address}: {error}"))?;
    Ok(ExitCode::SUCCESS)
}
