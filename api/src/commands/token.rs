//! `gpuledger token create | list | revoke`.

use std::process::ExitCode;

use chrono::DateTime;
use gpuledger_lake::Lake;

use crate::cli::{TokenArgs, TokenCommand};
use crate::serve::auth::create_token;

pub async fn run(lake: &Lake, args: TokenArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    match args.command {
        TokenCommand::Create { scope, team, name } => {
            let token = create_token(lake.catalog(), &name, scope, team).await?;
            // The secret alone on stdout, so that `TOKEN=$(gpuledger token create …)` works.
            println!("{}", token.secret);
            eprintln!(
                "created token {} ({}{}); it is not shown again",
                token.record.id,
                token.record.scope,
                token
                    .record
                    .team
                    .as_deref()
                    .map(|t| format!(", team {t}"))
                    .unwrap_or_default()
            );
        }
        TokenCommand::List => {
            println!(
                "{:<10} {:<7} {:<16} {:<20} {:<25} revoked",
                "id", "scope", "team", "name", "created"
            );
            for token in lake.catalog().tokens().await? {
                let time = |micros: i64| {
                    DateTime::from_timestamp_micros(micros)
                        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
                        .unwrap_or_default()
                };
                println!(
                    "{:<10} {:<7} {:<16} {:<20} {:<25} {}",
                    token.id,
                    token.scope,
                    token.team.as_deref().unwrap_or("-"),
                    token.name,
                    time(token.created_at),
                    token.revoked_at.map(time).unwrap_or_else(|| "-".into())
                );
            }
        }
        TokenCommand::Revoke { id } => {
            if !lake.catalog().revoke_token(&id).await? {
                return Err(format!("no live token with id '{id}'").into());
            }
            println!("token {id} revoked");
        }
    }
    Ok(ExitCode::SUCCESS)
}
