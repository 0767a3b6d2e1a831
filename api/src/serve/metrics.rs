//! The service's own Prometheus metrics, at `/metrics`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabel {
    pub source: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ScrapeLabel {
    pub target: String,
    pub outcome: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WorkerLabel {
    pub worker: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabel {
    pub route: String,
    pub status: u16,
}

/// Every metric the service exports; cheap to clone (the families share their state).
#[derive(Clone)]
pub struct Metrics {
    pub requests: Family<RouteLabel, Counter>,
    pub rows_ingested: Family<SourceLabel, Counter>,
    pub records_rejected: Family<SourceLabel, Counter>,
    pub scrapes: Family<ScrapeLabel, Counter>,
    pub query_seconds: Family<OutcomeLabel, Histogram>,
    /// Queries (SQL, and REST reads of the lake) holding a query slot.
    pub queries_running: Gauge,
    /// Queries waiting for a query slot (`--query-concurrency`).
    pub queries_waiting: Gauge,
    /// Bytes and files of ledger files kept decoded (`--decoded-cache-mb`).
    pub decoded_bytes: Gauge,
    pub decoded_files: Gauge,
    /// Per committed ingest input: how many inputs its catalog transaction committed (group
    /// commit; 1 when it was committed alone).
    pub ingest_group_inputs: Histogram,
    pub report_runs: Family<OutcomeLabel, Counter>,
    pub budget_alerts: Counter,
    /// Seconds the newest ledger build is behind the newest input (0: current).
    pub ledger_lag_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// Live-ledger rounds by outcome: `built`, `idle` (nothing changed), `skipped` (another
    /// replica held the lease), `failed`.
    pub ledger_rounds: Family<OutcomeLabel, Counter>,
    /// Files merged away by this replica's compactions.
    pub compacted_files: Counter,
    /// Files this replica's vacuum handled, by outcome: `moved` (retired, out of `tables/`),
    /// `restored` (active again, back in), `placed` (committed files a write left under
    /// `_staging/`, into `tables/`), `deleted` (after the grace period), `abandoned` (uploads no
    /// commit lists, a day old).
    pub vacuumed_files: Family<OutcomeLabel, Counter>,
    /// Per query worker of `--workers`: 1 when it accepted a connection at the last probe (it
    /// is in the plans), 0 when it did not (left out until it answers again).
    pub query_worker_up: Family<WorkerLabel, Gauge>,
    registry: std::sync::Arc<Registry>,
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("gpuledger");
        let requests = Family::<RouteLabel, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests by route and status",
            requests.clone(),
        );
        let rows_ingested = Family::<SourceLabel, Counter>::default();
        registry.register(
            "ingest_rows",
            "Rows landed in the lake, by source",
            rows_ingested.clone(),
        );
        let records_rejected = Family::<SourceLabel, Counter>::default();
        registry.register(
            "ingest_rejected_records",
            "Records quarantined, by source",
            records_rejected.clone(),
        );
        let scrapes = Family::<ScrapeLabel, Counter>::default();
        registry.register(
            "scrapes",
            "Scrapes of scrape targets, by target and outcome (ok or error)",
            scrapes.clone(),
        );
        let query_seconds = Family::<OutcomeLabel, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 16))
        });
        registry.register(
            "query_duration_seconds",
            "Query latency in a query slot (SQL over HTTP and the Postgres wire, and the REST reads of costs, budgets, reports, exports and the balance), by outcome",
            query_seconds.clone(),
        );
        let queries_running = Gauge::default();
        registry.register(
            "queries_running",
            "Queries holding one of the --query-concurrency slots",
            queries_running.clone(),
        );
        let queries_waiting = Gauge::default();
        registry.register(
            "queries_waiting",
            "Queries waiting for one of the --query-concurrency slots",
            queries_waiting.clone(),
        );
        let decoded_bytes = Gauge::default();
        registry.register(
            "decoded_cache_bytes",
            "Bytes of ledger and scheduler-event files kept decoded between queries (--decoded-cache-mb)",
            decoded_bytes.clone(),
        );
        let decoded_files = Gauge::default();
        registry.register(
            "decoded_cache_files",
            "Files kept decoded between queries (--decoded-cache-mb)",
            decoded_files.clone(),
        );
        let ingest_group_inputs = Histogram::new(exponential_buckets(1.0, 2.0, 12));
        registry.register(
            "ingest_group_inputs",
            "Per committed ingest input, the inputs committed in the same catalog transaction (group commit)",
            ingest_group_inputs.clone(),
        );
        let report_runs = Family::<OutcomeLabel, Counter>::default();
        registry.register(
            "report_runs",
            "Scheduled report runs, by outcome",
            report_runs.clone(),
        );
        let budget_alerts = Counter::default();
        registry.register(
            "budget_alerts",
            "Budget threshold crossings recorded by this replica",
            budget_alerts.clone(),
        );
        let ledger_lag_seconds = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        registry.register(
            "ledger_lag_seconds",
            "Seconds the newest ledger build is behind the newest input it reads",
            ledger_lag_seconds.clone(),
        );
        let ledger_rounds = Family::<OutcomeLabel, Counter>::default();
        registry.register(
            "ledger_rounds",
            "Live-ledger rounds by outcome (built, idle, skipped, failed)",
            ledger_rounds.clone(),
        );
        let compacted_files = Counter::default();
        registry.register(
            "compacted_files",
            "Small files merged away by this replica's compactions",
            compacted_files.clone(),
        );
        let vacuumed_files = Family::<OutcomeLabel, Counter>::default();
        registry.register(
            "vacuumed_files",
            "Files this replica's vacuum moved out of tables/, moved back, placed, deleted or found abandoned, by outcome",
            vacuumed_files.clone(),
        );
        let query_worker_up = Family::<WorkerLabel, Gauge>::default();
        registry.register(
            "query_worker_up",
            "Per query worker (--workers): 1 if it answered the coordinator's last probe and gets work, 0 if it is left out of plans",
            query_worker_up.clone(),
        );
        Self {
            requests,
            rows_ingested,
            records_rejected,
            scrapes,
            query_seconds,
            queries_running,
            queries_waiting,
            decoded_bytes,
            decoded_files,
            ingest_group_inputs,
            report_runs,
            budget_alerts,
            ledger_lag_seconds,
            ledger_rounds,
            compacted_files,
            vacuumed_files,
            query_worker_up,
            registry: std::sync::Arc::new(registry),
        }
    }

    pub fn observe_ledger_round(&self, outcome: &Result<Option<usize>, crate::error::ApiError>) {
        let outcome = match outcome {
            Ok(Some(0)) => "idle",
            Ok(Some(_)) => "built",
            Ok(None) => "skipped",
            Err(_) => "failed",
        };
        self.ledger_rounds
            .get_or_create(&OutcomeLabel {
                outcome: outcome.into(),
            })
            .inc();
    }

    /// Counts what one compaction and vacuum pass did.
    pub fn observe_compaction(
        &self,
        compacted: &gpuledger_lake::compaction::CompactionReport,
        settled: &gpuledger_lake::retirement::SettleReport,
    ) {
        self.compacted_files.inc_by(compacted.files_merged);
        for (outcome, n) in [
            ("moved", settled.moved),
            ("restored", settled.restored),
            ("placed", settled.placed),
            ("deleted", settled.deleted),
            ("abandoned", settled.abandoned),
        ] {
            self.vacuumed_files
                .get_or_create(&OutcomeLabel {
                    outcome: outcome.into(),
                })
                .inc_by(n);
        }
    }

    /// Records which query workers answer now.
    pub async fn observe_workers(&self, workers: &gpuledger_query::distributed::Workers) {
        for (worker, up) in workers.answering().await {
            self.query_worker_up
                .get_or_create(&WorkerLabel { worker })
                .set(i64::from(up));
        }
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }

    /// Counts what one ingest landed and rejected.
    pub fn observe_ingest(&self, report: &gpuledger_ingest::pipeline::IngestReport) {
        let source = SourceLabel {
            source: report.source.name().into(),
        };
        self.rows_ingested
            .get_or_create(&source)
            .inc_by(report.rows_landed());
        self.records_rejected
            .get_or_create(&source)
            .inc_by(report.records_rejected);
        if report.group_inputs > 0 {
            self.ingest_group_inputs.observe(report.group_inputs as f64);
        }
    }

    /// Counts one more in `gauge` until the guard is dropped (also when the request is).
    pub fn one_more(gauge: &Gauge) -> impl Drop {
        struct Counted(Gauge);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.dec();
            }
        }
        gauge.inc();
        Counted(gauge.clone())
    }

    pub fn observe_query(&self, seconds: f64, ok: bool) {
        let outcome = if ok { "ok" } else { "error" };
        self.query_seconds
            .get_or_create(&OutcomeLabel {
                outcome: outcome.into(),
            })
            .observe(seconds);
    }
}
