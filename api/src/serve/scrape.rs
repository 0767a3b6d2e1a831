//! Scrape targets: `serve` fetches the URL of each `scrape_target` object on its interval and
//! lands the text like `gpuledger ingest dcgm`, with the scrape time as the time of samples that
//! carry none. The targets are read from the catalog every few seconds, so targets added, changed
//! or deleted through the objects API (or `gpuledger apply`) are picked up without a restart.
//! A failed scrape is logged and counted (`gpuledger_scrapes{outcome="error"}`), never fatal.

use std::collections::HashMap;
use std::time::Duration;

use chrono::Utc;
use gpuledger_ingest::ParseContext;
use gpuledger_ingest::pipeline::{IngestOptions, IngestReport, Input, Source, ingest};
use gpuledger_ledger::objects::ScrapeTargetSpec;
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use super::AppState;
use super::metrics::ScrapeLabel;

/// How often the targets are read again from the catalog.
const RELOAD_EVERY: Duration = Duration::from_secs(2);

/// The scheduler: runs until dropped, and dropping it stops every scrape loop.
pub async fn run(state: AppState) {
    let client = reqwest::Client::new();
    // By target name: the spec it runs with, and its task (stopped when dropped).
    let mut running: HashMap<String, (Value, Scraping)> = HashMap::new();
    let mut reload = tokio::time::interval(RELOAD_EVERY);
    loop {
        reload.tick().await;
        let targets = match state.lake.catalog().objects_of::<ScrapeTargetSpec>().await {
            Ok(targets) => targets,
            Err(error) => {
                tracing::warn!(%error, "cannot read the scrape targets; trying again");
                continue;
            }
        };
        running.retain(|name, (spec, _)| {
            let current = targets
                .iter()
                .any(|t| t.name() == name && &t.object.spec == spec);
            if !current {
                tracing::info!(target = %name, "scrape target removed or changed");
            }
            current
        });
        for target in targets {
            if running.contains_key(target.name()) {
                continue;
            }
            // Validated when it was stored; a period that no longer reads is skipped.
            let period = match target.spec.period() {
                Ok(period) => period,
                Err(error) => {
                    tracing::warn!(target = %target.name(), %error, "skipping a scrape target");
                    continue;
                }
            };
            tracing::info!(target = %target.name(), url = %target.spec.url, "scraping");
            let task = tokio::spawn(scrape_every(
                state.clone(),
                client.clone(),
                target.name().to_string(),
                target.spec,
                period,
            ));
            running.insert(target.object.name, (target.object.spec, Scraping(task)));
        }
    }
}

/// A target's scrape loop, stopped when the target is dropped from the running set (or the
/// scheduler itself stops).
struct Scraping(JoinHandle<()>);

impl Drop for Scraping {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn scrape_every(
    state: AppState,
    client: reqwest::Client,
    name: String,
    spec: ScrapeTargetSpec,
    period: Duration,
) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let outcome = match scrape(&state, &client, &name, &spec, period).await {
            Ok(report) => {
                state.metrics.observe_ingest(&report);
                tracing::debug!(target = %name, rows = report.rows_landed(), "scraped");
                "ok"
            }
            Err(error) => {
                tracing::warn!(target = %name, url = %spec.url, %error, "scrape failed");
                "error"
            }
        };
        state
            .metrics
            .scrapes
            .get_or_create(&ScrapeLabel {
                target: name.clone(),
                outcome: outcome.into(),
            })
            .inc();
    }
}

/// One scrape, landed; the error is a sentence for the log.
async fn scrape(
    state: &AppState,
    client: &reqwest::Client,
    name: &str,
    spec: &ScrapeTargetSpec,
    period: Duration,
) -> Result<IngestReport, String> {
    let at = Utc::now();
    let response = client
        .get(&spec.url)
        .timeout(period)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|error| error.to_string())?;
    let bytes = response.bytes().await.map_err(|error| error.to_string())?;
    let mut context = ParseContext::new(format!("scrape:{name}"), at);
    context.cluster = Some(spec.cluster.clone());
    context.labels = spec
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let input = Input::Bytes {
        origin: context.origin.clone(),
        bytes,
    };
    let mut options = IngestOptions::new(Source::Dcgm, context);
    options.limits = state.ingest_limits;
    options.group = state.group_commit.clone();
    ingest(&state.lake, input, options)
        .await
        .map_err(|error| error.to_string())
}
