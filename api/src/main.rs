//! The `gpuledger` binary.

mod cli;
mod commands;
mod error;
mod output;
mod pem;
mod serve;

use std::process::ExitCode;

use clap::Parser;
use gpuledger_lake::{Lake, LakeConfig};

use crate::cli::{Cli, Command};

/// Exit codes: 0 all good; 1 the command ran but some input was rejected; 2 it failed.
pub const EXIT_REJECTED: u8 = 1;
pub const EXIT_FAILED: u8 = 2;

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("GPULEDGER_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match run(cli).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

async fn run(cli: Cli) -> Result<ExitCode, Box<dyn std::error::Error>> {
    // An empty secret is no secret, for workers and coordinators alike.
    let worker_secret = cli.worker_secret.clone().filter(|s| !s.is_empty());
    let worker_ca = cli
        .worker_ca
        .as_deref()
        .map(|path| pem::certificates(path, "--worker-ca"))
        .transpose()?;
    let worker_channels = gpuledger_query::distributed::WorkerChannels::new(
        worker_ca.as_ref().map(|ca| ca.bytes.as_slice()),
    );
    gpuledger_query::distributed::Workers::use_in_this_process(
        cli.workers
            .clone()
            .with_secret(worker_secret.clone())
            .with_channels(worker_channels.clone())
            .with_bytes_per_task(cli.worker_split_bytes),
    );
    let config = LakeConfig {
        data: cli.data.clone(),
        catalog: cli.catalog.clone(),
    };
    // Only the commands that land or declare something create a lake; reading one that is not
    // there is an error, not an empty answer.
    let creates = matches!(
        cli.command,
        Command::Ingest(_)
            | Command::Apply(_)
            | Command::Demo(_)
            | Command::Serve(_)
            | Command::Migrate
            | Command::Token(_)
    );
    let lake = if creates {
        Lake::open(&config).await?
    } else {
        Lake::open_existing(&config).await?
    };
    match cli.command {
        Command::Ingest(args) => commands::ingest::run(&lake, args).await,
        Command::Sql(args) => commands::sql::run(&lake, args).await,
        Command::Apply(args) => commands::objects::apply(&lake, args).await,
        Command::Get(args) => commands::objects::get(&lake, args).await,
        Command::Delete(args) => commands::objects::delete(&lake, args).await,
        Command::Ledger(args) => commands::ledger::run(&lake, args).await,
        Command::Demo(args) => commands::demo::run(&lake, &cli.data, args).await,
        Command::Serve(args) => serve::run(lake, args).await.map(|()| ExitCode::SUCCESS),
        Command::Token(args) => commands::token::run(&lake, args).await,
        Command::Report(args) => commands::report::run(&lake, args).await,
        Command::Export(args) => commands::export::run(&lake, args).await,
        Command::Compact(args) => commands::compact::run(&lake, args).await,
        Command::Worker(args) => {
            commands::worker::run(&lake, worker_secret, worker_channels, args).await
        }
        Command::Migrate => {
            println!("catalog is up to date ({:?})", lake.catalog().backend());
            Ok(ExitCode::SUCCESS)
        }
    }
}
