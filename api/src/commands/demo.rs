//! `gpuledger demo`: generates the demo cluster (`gpuledger_demo`) and loads it the way users'
//! data comes in — catalog objects through `apply`'s validation, then every input as its real
//! format through the ingest pipeline — builds the ledger, checks that it balances, and hands
//! over to the server.

use std::error::Error;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use chrono::{DateTime, Duration, NaiveDate, Utc};
use gpuledger_build::{balance, build_ledger, day_span, days_between, declared};
use gpuledger_demo::dcgm::DcgmScrapes;
use gpuledger_demo::focus::{billing_lines, focus_csv};
use gpuledger_demo::scenario::CLUSTER;
use gpuledger_demo::tokens::TokenRequests;
use gpuledger_demo::{ChunkReader, DemoSpec, Scenario, catalog, events};
use gpuledger_ingest::ParseContext;
use gpuledger_ingest::pipeline::{IngestOptions, IngestReport, Input, Source, ingest};
use gpuledger_lake::Lake;
use gpuledger_lake::tables::Table;
use gpuledger_ledger::budget::{BudgetTarget, Month, status};
use gpuledger_ledger::time::Span;
use gpuledger_query::new_session;
use gpuledger_query::spend::{budget_spend, covered_until};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::{DemoArgs, ServeArgs};
use crate::commands::ingest::{print_report, progress_bar, show_progress, with_progress};
use crate::commands::objects;
use crate::serve;
use crate::serve::auth::{Permission, create_token};

pub async fn run(lake: &Lake, data: &str, args: DemoArgs) -> Result<ExitCode, Box<dyn Error>> {
    let spec = DemoSpec {
        gpus: args.gpus,
        days: args.days,
        seed: args.seed,
        start: args
            .start
            // The days before today: a demo holds no hour that has not ended yet.
            .unwrap_or_else(|| Utc::now().date_naive() - Duration::days(args.days as i64)),
        scrape_interval_s: args.scrape_interval,
    };
    spec.check()?;
    for table in Table::ALL {
        if !lake
            .catalog()
            .active_files(table, None, None)
            .await?
            .is_empty()
        {
            return Err(format!(
                "{data} already holds data ({table}): the demo loads a fresh lake; give it an empty --data directory"
            )
            .into());
        }
    }
    let started = Instant::now();
    let scenario = Scenario::plan(&spec);
    let last_day = spec.start + Duration::days(spec.days as i64 - 1);
    println!(
        "demo cluster '{CLUSTER}': {} GPUs on {} nodes, {} … {} (UTC), scrapes every {} s, seed {}",
        spec.gpus,
        scenario.nodes.len(),
        spec.start,
        last_day,
        spec.scrape_interval_s,
        spec.seed
    );

    let documents = serde_json::to_string(&catalog::documents(&scenario))?;
    let objects = objects::validate(&[("demo catalog".to_string(), documents)])
        .map_err(|errors| format!("the demo catalog is invalid:\n{}", errors.join("\n")))?;
    objects::store(lake, &objects).await?;
    println!(
        "catalog: {} objects applied (nodes, reservations, shared-cost rules, rate card, license, label policy, SLOs, value mappings)",
        objects.len()
    );

    let bytes = |name: &str, bytes: Vec<u8>| Input::Bytes {
        origin: format!("demo/{name}"),
        bytes: bytes.into(),
    };
    land(
        lake,
        &spec,
        Source::Events,
        bytes("events.jsonl", events::events_jsonl(&scenario)),
        None,
    )
    .await?;
    let bill = focus_csv(&scenario, &billing_lines(&scenario));
    land(lake, &spec, Source::Focus, bytes("focus.csv", bill), None).await?;
    let tokens = Input::Reader {
        origin: "demo/tokens.jsonl".into(),
        reader: Box::new(ChunkReader::new(TokenRequests::new(&scenario))),
        size: None,
    };
    land(lake, &spec, Source::Tokens, tokens, None).await?;
    let scraped = Arc::new(AtomicU64::new(0));
    let scrapes = DcgmScrapes::new(&scenario).with_progress(Arc::clone(&scraped));
    let telemetry = Input::Reader {
        origin: "demo/dcgm-exporter.prom".into(),
        reader: Box::new(ChunkReader::new(scrapes)),
        size: None,
    };
    land(
        lake,
        &spec,
        Source::Dcgm,
        telemetry,
        Some((spec.scrapes(), scraped)),
    )
    .await?;
    let loaded = started.elapsed();

    let declared = declared(lake.catalog()).await?;
    let days: Vec<NaiveDate> = days_between(spec.start, last_day).collect();
    let bar = show_progress().then(|| counted_bar(days.len() as u64, "ledger build (days)"));
    let mut gpu_hour_rows = 0;
    for day in &days {
        for report in build_ledger(lake, &declared, [*day]).await? {
            gpu_hour_rows += report.gpu_hour_rows;
        }
        if let Some(bar) = &bar {
            bar.inc(1);
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let window = Span::new(day_span(spec.start).start, day_span(last_day).end);
    let b = balance(lake, &declared, window).await?;
    println!(
        "ledger: {} days, {gpu_hour_rows} GPU-hour rows built; {b}",
        days.len()
    );
    println!(
        "generated and loaded in {:.1} s, ledger built in {:.1} s",
        loaded.as_secs_f64(),
        (started.elapsed() - loaded).as_secs_f64()
    );
    if !b.balances() {
        return Err("the demo ledger does not balance".into());
    }
    declare_budgets(lake, day_span(last_day).end).await?;

    let to = last_day + Duration::days(1);
    let queries = example_queries(spec.start, to);
    println!("\nTry:");
    for (title, sql) in &queries {
        println!("  # {title}\n  gpuledger --data {data} sql \"{sql}\"");
    }
    if args.no_serve {
        return Ok(ExitCode::SUCCESS);
    }
    let end_of_data = (to.and_hms_opt(0, 0, 0).expect("midnight").and_utc() - Duration::seconds(1))
        .format("%Y-%m-%dT%H:%M:%SZ");
    serve(lake, args.serve, &queries, &end_of_data.to_string()).await
}

/// Applies the demo's budgets, sized from what each watches in the month the data ends in, up to
/// `until` (the end of the data, in microseconds), and says how each stands.
async fn declare_budgets(lake: &Lake, until: i64) -> Result<(), Box<dyn Error>> {
    let month = Month::of(DateTime::from_timestamp_micros(until - 1).expect("a valid time"));
    let ctx = new_session(lake)?;
    let mut measured = Vec::new();
    for (_, field, owner, _) in catalog::BUDGETS {
        let target = match field {
            "team" => BudgetTarget::Team(owner.into()),
            "namespace" => BudgetTarget::Namespace(owner.into()),
            _ => BudgetTarget::CostCenter(owner.into()),
        };
        let spent = budget_spend(&ctx, &target, month.start, until).await?;
        let covered = covered_until(lake.catalog(), &target, month.start, until).await?;
        let forecast = status(1.0, &[], &month, covered, spent).forecast;
        measured.push((spent, forecast));
    }
    let documents = serde_json::to_string(&catalog::budgets(&measured))?;
    let objects = objects::validate(&[("demo budgets".to_string(), documents)])
        .map_err(|errors| format!("the demo budgets are invalid:\n{}", errors.join("\n")))?;
    objects::store(lake, &objects).await?;
    for (object, (spent, forecast)) in objects.iter().zip(&measured) {
        let amount = object.spec["amount"].as_f64().unwrap_or_default();
        println!(
            "budget {}: {spent:.2} of {amount:.2} USD spent in {} ({:.0} %; forecast {forecast:.2})",
            object.name,
            month.label,
            spent / amount * 100.0
        );
    }
    Ok(())
}

/// Where the demo hands over to the server, with an admin token made for it: the addresses, and
/// the example queries again as psql and curl commands that use the token.
async fn serve(
    lake: &Lake,
    args: ServeArgs,
    queries: &[(&str, String)],
    end_of_data: &str,
) -> Result<ExitCode, Box<dyn Error>> {
    let token = create_token(lake.catalog(), "demo admin", Permission::Admin, None).await?;
    let secret = &token.secret;
    let http = &args.listen;
    let postgres = (!args.pg_listen.eq_ignore_ascii_case("off")).then_some(&args.pg_listen);
    println!("\nServing the demo lake:");
    println!("  dashboard    http://{http}/   (sign in with the admin token)");
    println!("  REST API     http://{http}/docs   (OpenAPI: http://{http}/openapi.json)");
    if let Some(address) = postgres {
        println!("  PostgreSQL   {address}   (any user name; the password is the token)");
    }
    println!("  admin token  {secret}   (shown once; `gpuledger token create` makes more)");
    println!("\nTry, while it serves:");
    if let Some(address) = postgres {
        let (host, port) = address.rsplit_once(':').unwrap_or((address, "5433"));
        for (title, sql) in queries {
            println!(
                "  # {title}\n  psql \"host={host} port={port} dbname=gpuledger user=demo password={secret} sslmode=disable\" -c \"{sql}\""
            );
        }
    }
    println!(
        "  # how the research team's budget stands at the end of the data\n  curl -s -H 'Authorization: Bearer {secret}' 'http://{http}/v1/budgets/research-monthly/status?at={end_of_data}'"
    );
    println!(
        "  # any SQL over HTTP\n  curl -s -H 'Authorization: Bearer {secret}' -H 'Content-Type: application/json' http://{http}/v1/sql -d '{{\"query\": \"select team, round(sum(amount), 2) as cost from cost_entries group by team order by cost desc\"}}'"
    );
    serve::run(lake.clone(), args).await?;
    Ok(ExitCode::SUCCESS)
}

/// Three questions to ask the demo data over `[from, to)`: (what it shows, SQL).
pub fn example_queries(from: NaiveDate, to: NaiveDate) -> [(&'static str, String); 3] {
    [
        (
            "what each team pays, shared costs included",
            format!(
                "select team, round(gpu_hours, 1) as gpu_hours, round(direct_cost, 2) as direct, \
                 round(allocated_idle_cost, 2) as allocated_idle, round(shared_cost, 2) as shared, \
                 round(total_cost, 2) as total from team_costs('{from}', '{to}') order by total desc"
            ),
        ),
        (
            "where the idle money went: on purpose (reserved, by reason), waste, faults",
            format!(
                "select class, reason, round(gpu_hours, 1) as gpu_hours, round(cost, 2) as cost \
                 from idle_summary('{from}', '{to}') order by cost desc"
            ),
        ),
        (
            "cost per 1M tokens of SLO-met requests, and what missed SLOs cost",
            format!(
                "select team, model, sum(requests) as requests, sum(slo_missed_requests) as slo_missed, \
                 round(sum(loaded_cost) / sum(tokens_slo_met) * 1e6, 2) as cost_per_1m_slo_met_tokens, \
                 round(sum(slo_missed_cost), 2) as slo_missed_cost \
                 from unit_economics('{from}', '{to}') group by team, model order by team, model"
            ),
        ),
    ]
}

/// Ingests one generated input through the pipeline, strictly (generated data that a parser
/// rejects is a bug), with a progress bar: `scrapes` (total, counter) for telemetry, else bytes.
async fn land(
    lake: &Lake,
    spec: &DemoSpec,
    source: Source,
    input: Input,
    scrapes: Option<(u64, Arc<AtomicU64>)>,
) -> Result<IngestReport, Box<dyn Error>> {
    let mut context = ParseContext::new(input.origin(), spec.start_time());
    context.cluster = Some(CLUSTER.to_string());
    let mut options = IngestOptions::new(source, context);
    options.strict = true;
    let (bar, counter) = match scrapes {
        Some((total, counter)) => (
            show_progress().then(|| counted_bar(total, &format!("{} (scrapes)", input.origin()))),
            counter,
        ),
        None => {
            let counter = Arc::new(AtomicU64::new(0));
            options.progress = Some(Arc::clone(&counter));
            (progress_bar(input.size(), &input.origin()), counter)
        }
    };
    let report = with_progress(bar, counter, ingest(lake, input, options)).await?;
    print_report(&report);
    Ok(report)
}

fn counted_bar(total: u64, message: &str) -> ProgressBar {
    ProgressBar::new(total)
        .with_style(
            ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {per_sec} eta {eta}")
                .expect("valid template")
                .progress_chars("=> "),
        )
        .with_message(message.to_string())
}
