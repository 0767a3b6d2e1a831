//! The command line. Every flag has an environment variable and a help line.

use std::path::PathBuf;

use chrono::{DateTime, NaiveDate, Utc};
use clap::{Parser, Subcommand, ValueEnum};
use gpuledger_demo::DemoSpec;
use gpuledger_ingest::pipeline::Source;
use gpuledger_ingest::record::{DEFAULT_BATCH_ROWS, MAX_BATCH_ROWS};
use gpuledger_ledger::objects::ObjectKind;

#[derive(Debug, Parser)]
#[command(
    name = "gpuledger",
    version,
    about = "A time-series FinOps ledger for GPU and AI infrastructure"
)]
pub struct Cli {
    /// Where the lake lives: a directory, or an object-store URL (s3://bucket/prefix, gs://…, az://…, file://…).
    #[arg(
        long,
        global = true,
        env = "GPULEDGER_DATA",
        default_value = "./gpuledger-data"
    )]
    pub data: String,

    /// The catalog database: sqlite://FILE or postgres://…; defaults to catalog.db inside a local --data directory.
    #[arg(long, global = true, env = "GPULEDGER_CATALOG")]
    pub catalog: Option<String>,

    /// Workers (`gpuledger worker`) to run the stages of large queries and of the ledger's input
    /// queries on: host:port, comma-separated (https://host:port for a worker serving TLS).
    /// Without any, everything runs in this process.
    #[arg(long, global = true, env = "GPULEDGER_WORKERS", default_value = "", value_parser = gpuledger_query::distributed::Workers::parse)]
    pub workers: gpuledger_query::distributed::Workers,

    /// The secret the workers and their coordinators share (workers refuse plans without it).
    #[arg(
        long,
        global = true,
        env = "GPULEDGER_WORKER_SECRET",
        hide_env_values = true
    )]
    pub worker_secret: Option<String>,

    /// PEM file of the CA that signed the workers' TLS certificates: https:// workers are trusted
    /// only if their certificate chains to it (without it, to the public roots). Workers use it
    /// to reach each other too.
    #[arg(long, global = true, env = "GPULEDGER_WORKER_CA")]
    pub worker_ca: Option<std::path::PathBuf>,

    /// Bytes of Parquet one worker task scans before a scan is split over more workers.
    #[arg(long, global = true, env = "GPULEDGER_WORKER_SPLIT_BYTES")]
    pub worker_split_bytes: Option<usize>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Land a file (or stdin with `-`) of one source in the lake; gzip is detected. Exits 1 when
    /// any record was rejected (the rest lands; see the quarantine), 2 on errors.
    Ingest(IngestArgs),
    /// Run a SQL query over the lake.
    Sql(SqlArgs),
    /// Build the ledger (gpu_hours, cost_entries, allocations) and check that it balances.
    Ledger(LedgerArgs),
    /// Create or upgrade the catalog schema (every other command does this too).
    Migrate,
    /// Declare catalog objects (nodes, reservations, shared-cost rules, rate cards, manual costs,
    /// the label policy) from YAML or JSON documents `{kind, name?, spec}`. Everything is validated
    /// first: when any object is invalid, each error is printed, nothing is applied, and it exits 2.
    Apply(ApplyArgs),
    /// List the declared objects of one kind, as a table or as documents `apply` takes back.
    Get(GetArgs),
    /// Delete a declared object.
    Delete(DeleteArgs),
    /// Generate a realistic GPU cluster (dcgm-exporter scrapes, a FOCUS bill, gateway tokens,
    /// scheduler events, catalog objects), load it through the real ingest paths, build the
    /// ledger, check that it balances, then serve it.
    Demo(DemoArgs),
    /// Serve the REST API (with SQL over HTTP, OpenAPI at /openapi.json and a reference page at
    /// /docs), health checks and metrics. Stops on SIGINT/SIGTERM after in-flight requests finish.
    Serve(ServeArgs),
    /// Create, list and revoke the API's bearer tokens.
    Token(TokenArgs),
    /// Reports over the ledger.
    Report(ReportArgs),
    /// Export the ledger in the formats of the ecosystem.
    Export(ExportArgs),
    /// Run a query worker over the lake: `serve` and the CLI given `--workers` run the stages of
    /// their queries here. Stops on SIGINT/SIGTERM.
    Worker(WorkerArgs),
    /// Merge the small files of each table-day into few, then move retired files (restated,
    /// rebuilt or compacted) out of tables/ and delete those past --retain-superseded. Runs
    /// under the catalog's compaction lease; exits 2 while another process holds it.
    Compact(CompactArgs),
}

#[derive(Debug, clap::Args)]
pub struct CompactArgs {
    /// Compact this table only (repeatable); every table by default.
    #[arg(long = "table", value_parser = parse_table)]
    pub tables: Vec<gpuledger_lake::tables::Table>,
    /// First partition day (UTC), YYYY-MM-DD.
    #[arg(long)]
    pub from: Option<NaiveDate>,
    /// Last partition day (UTC, inclusive), YYYY-MM-DD.
    #[arg(long)]
    pub to: Option<NaiveDate>,
    /// How long a retired file is kept under _superseded/ (for queries still reading it) before
    /// it is deleted, e.g. 1h or 0s.
    #[arg(long, env = "GPULEDGER_RETAIN_SUPERSEDED", default_value = "1h")]
    pub retain_superseded: humantime::Duration,
}

fn parse_table(name: &str) -> Result<gpuledger_lake::tables::Table, String> {
    name.parse()
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    #[command(subcommand)]
    pub command: ExportCommand,
}

#[derive(Debug, Subcommand)]
pub enum ExportCommand {
    /// The bill of [from, to) in FOCUS 1.3 with split cost allocation: each charge whose period
    /// starts in the window, split into rows by team, workload, reserved, unexplained and shared
    /// (docs/focus-export.md). Every day the charges cover must be built.
    Focus {
        /// First day (UTC), YYYY-MM-DD.
        #[arg(long)]
        from: NaiveDate,
        /// The day after the last (UTC, exclusive), YYYY-MM-DD.
        #[arg(long)]
        to: NaiveDate,
        #[arg(long, value_enum, default_value_t = FocusFormat::Csv)]
        format: FocusFormat,
        /// Write to this file instead of standard output.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

/// How the FOCUS export is written.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum FocusFormat {
    /// CSV with a header, times as `2026-11-02T00:00:00Z`.
    Csv,
    Parquet,
}

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    #[command(subcommand)]
    pub command: ReportCommand,
}

#[derive(Debug, Subcommand)]
pub enum ReportCommand {
    /// The weekly report of an ISO week (UTC): capacity, utilization, queue, training, inference,
    /// tenants, optimization and the ledger balance (docs/report.schema.json for the JSON).
    Weekly {
        /// The ISO week, e.g. 2026-W45.
        #[arg(long, value_parser = parse_week)]
        week: gpuledger_report::IsoWeek,
        /// json, csv, html (a self-contained page with charts) or md.
        #[arg(long, env = "GPULEDGER_REPORT_FORMAT", value_enum, default_value_t = ReportFormat::Json)]
        format: ReportFormat,
        /// Write the report to this file instead of standard output.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ReportFormat {
    Json,
    Csv,
    Html,
    Md,
}

impl ReportFormat {
    pub fn format(self) -> gpuledger_report::Format {
        match self {
            ReportFormat::Json => gpuledger_report::Format::Json,
            ReportFormat::Csv => gpuledger_report::Format::Csv,
            ReportFormat::Html => gpuledger_report::Format::Html,
            ReportFormat::Md => gpuledger_report::Format::Markdown,
        }
    }
}

fn parse_week(s: &str) -> Result<gpuledger_report::IsoWeek, String> {
    s.parse()
        .map_err(|e: gpuledger_report::ReportError| e.to_string())
}

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address and port for HTTP.
    #[arg(long, env = "GPULEDGER_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,

    /// Memory one SQL query may use, in MiB; past it the query fails and the service goes on.
    #[arg(long, env = "GPULEDGER_QUERY_MEMORY_MB", default_value_t = 1024)]
    pub query_memory_mb: usize,

    /// How long one query may run, e.g. 60s or 2m: SQL, and the REST reads of costs, budgets,
    /// reports, exports and the balance.
    #[arg(long, env = "GPULEDGER_QUERY_TIMEOUT", default_value = "60s")]
    pub query_timeout: humantime::Duration,

    /// The largest SQL result returned, in MiB.
    #[arg(long, env = "GPULEDGER_QUERY_MAX_RESULT_MB", default_value_t = 256)]
    pub query_max_result_mb: usize,

    /// Queries that run at once (SQL, and the REST reads of costs, budgets, reports, exports
    /// and the balance); more wait for a turn.
    #[arg(long, env = "GPULEDGER_QUERY_CONCURRENCY", default_value_t = 4)]
    pub query_concurrency: usize,

    /// Memory for ledger and scheduler-event files kept decoded between queries, in MiB: the
    /// report, the dashboard and ledger SQL read them from memory after the first time; past
    /// it the least recently read files make room. 0 decodes every file at every query.
    #[arg(long, env = "GPULEDGER_DECODED_CACHE_MB", default_value_t = 512)]
    pub decoded_cache_mb: usize,

    /// How often the ledger is brought up to date with what landed (its dirty hours rebuilt, by
    /// one replica of those sharing the catalog), e.g. 1m or 10s; 0s leaves it to `ledger build`.
    #[arg(long, env = "GPULEDGER_LEDGER_INTERVAL", default_value = "1m")]
    pub ledger_interval: humantime::Duration,

    /// How often small files are compacted and retired files vacuumed (moved out of tables/,
    /// deleted after --retain-superseded), by one replica of those sharing the catalog; 0s leaves
    /// it to `gpuledger compact`.
    #[arg(long, env = "GPULEDGER_COMPACT_INTERVAL", default_value = "10m")]
    pub compact_interval: humantime::Duration,

    /// How long a retired file is kept under _superseded/ (for queries still reading it) before
    /// the vacuum deletes it, e.g. 1h or 0s.
    #[arg(long, env = "GPULEDGER_RETAIN_SUPERSEDED", default_value = "1h")]
    pub retain_superseded: humantime::Duration,

    /// How often every budget is evaluated and new threshold crossings alerted, e.g. 5m or 30s;
    /// 0s turns budget alerts off.
    #[arg(long, env = "GPULEDGER_BUDGET_INTERVAL", default_value = "5m")]
    pub budget_interval: humantime::Duration,
    /// The largest ingest request body (as sent, before gunzip), in MiB; past it the answer is 413.
    #[arg(long, env = "GPULEDGER_INGEST_MAX_MB", default_value_t = 1024)]
    pub ingest_max_mb: u64,
    /// The largest ingest input once decompressed (gunzip), in MiB; past it the answer is 413.
    #[arg(
        long,
        env = "GPULEDGER_INGEST_MAX_DECOMPRESSED_MB",
        default_value_t = 4096
    )]
    pub ingest_max_decompressed_mb: u64,
    /// The longest line of a text ingest input, in KiB; past it the answer is 413 naming the line.
    #[arg(long, env = "GPULEDGER_INGEST_MAX_LINE_KB", default_value_t = 1024)]
    pub ingest_max_line_kb: u64,
    /// Rejected records kept in the quarantine per ingest request; the rest are counted only.
    #[arg(long, env = "GPULEDGER_INGEST_MAX_REJECTIONS", default_value_t = 1000)]
    pub ingest_max_rejections: usize,
    /// Rows an ingest request is parsed and written in at a time (each batch its own Parquet
    /// file), 1 to 16,777,216: the rows a request holds grow with this, not with the size of its
    /// body (a remote-write body is decompressed whole; a FOCUS Parquet file is read whole).
    #[arg(long, env = "GPULEDGER_INGEST_BATCH_ROWS", default_value_t = DEFAULT_BATCH_ROWS, value_parser = parse_batch_rows)]
    pub ingest_batch_rows: usize,
    /// How long a body stamped with its arrival time (an untimestamped scrape without `at`) sent
    /// again byte for byte by the same token is taken as a retry of the first, e.g. 10m.
    #[arg(long, env = "GPULEDGER_INGEST_RETRY_WINDOW", default_value = "10m")]
    pub ingest_retry_window: humantime::Duration,
    /// Group commit: telemetry requests (dcgm text, remote-write) of at most this many samples
    /// that arrive at the same time share Parquet files and one catalog transaction, each still
    /// its own batch, answered once the group is committed; a group holds at most this many
    /// rows. 0: every request is committed alone.
    #[arg(long, env = "GPULEDGER_INGEST_GROUP_ROWS", default_value_t = 262_144)]
    pub ingest_group_rows: usize,
    /// How long a group commit waits for more requests after its first, e.g. 5ms: larger
    /// groups, later answers. 0s: a group is what arrived while the one before was committed.
    #[arg(long, env = "GPULEDGER_INGEST_GROUP_WAIT", default_value = "0s")]
    pub ingest_group_wait: humantime::Duration,
    /// How long a client may take to send a request's headers before the connection is closed.
    #[arg(long, env = "GPULEDGER_HEADER_TIMEOUT", default_value = "10s")]
    pub header_timeout: humantime::Duration,
    /// How long a request body may pause between two chunks before the request fails (408).
    #[arg(long, env = "GPULEDGER_BODY_TIMEOUT", default_value = "60s")]
    pub body_timeout: humantime::Duration,
    /// HTTP connections served at once; more wait to be accepted.
    #[arg(long, env = "GPULEDGER_MAX_CONNECTIONS", default_value_t = 1024)]
    pub max_connections: usize,
    /// Address and port for the PostgreSQL wire protocol (psql, Grafana, DBeaver), or `off`.
    #[arg(long, env = "GPULEDGER_PG_LISTEN", default_value = "127.0.0.1:5433")]
    pub pg_listen: String,

    /// PEM certificate (chain) for TLS on the PostgreSQL port; needs --pg-tls-key.
    #[arg(long, env = "GPULEDGER_PG_TLS_CERT", requires = "pg_tls_key")]
    pub pg_tls_cert: Option<PathBuf>,

    /// PEM private key of --pg-tls-cert.
    #[arg(long, env = "GPULEDGER_PG_TLS_KEY", requires = "pg_tls_cert")]
    pub pg_tls_key: Option<PathBuf>,
    /// When to export the weekly report to reports/weekly/<YYYY-Www>/ in the object store: a cron
    /// expression in UTC with seconds (sec min hour day-of-month month day-of-week); `off` never.
    #[arg(long, env = "GPULEDGER_REPORT_SCHEDULE", default_value = gpuledger_report::export::DEFAULT_SCHEDULE)]
    pub report_schedule: String,
}

#[derive(Debug, clap::Args)]
pub struct TokenArgs {
    #[command(subcommand)]
    pub command: TokenCommand,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token and print it (the only time it is shown).
    Create {
        /// read: GET endpoints and SQL; ingest: the ingest endpoints only; admin: everything.
        #[arg(long, value_enum)]
        scope: crate::serve::auth::Permission,
        /// Limit the token to one team's rows, in every endpoint and query.
        #[arg(long)]
        team: Option<String>,
        /// A name to recognise the token by in `token list`.
        #[arg(long, default_value = "")]
        name: String,
    },
    /// List tokens (never their secrets).
    List,
    /// Revoke a token by its id.
    Revoke { id: String },
}

#[derive(Debug, clap::Args)]
pub struct LedgerArgs {
    #[command(subcommand)]
    pub command: LedgerCommand,
}

#[derive(Debug, Subcommand)]
pub enum LedgerCommand {
    /// Recompute the hours that new data touched: on every day with data, or every day --from … --to.
    Build {
        /// First day (UTC), YYYY-MM-DD.
        #[arg(long)]
        from: Option<NaiveDate>,
        /// Last day (UTC, inclusive), YYYY-MM-DD.
        #[arg(long)]
        to: Option<NaiveDate>,
    },
    /// Print both sides of the ledger for the days; exit 1 when they differ by more than 1e-6.
    Check {
        #[arg(long)]
        from: NaiveDate,
        #[arg(long)]
        to: NaiveDate,
    },
}

#[derive(Debug, clap::Args)]
pub struct IngestArgs {
    /// dcgm (dcgm-exporter text), focus (FOCUS CSV/Parquet), aws-cur (AWS Cost and Usage Report, legacy CSV), azure-ea (Azure EA cost export CSV), tokens (gateway JSON), events (scheduler events).
    #[arg(value_parser = parse_source)]
    pub source: Source,

    /// Files to ingest, each as its own batch; `-` reads stdin.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,

    /// Cluster name for inputs that do not carry one (dcgm text, Slurm without a Cluster field).
    #[arg(long, env = "GPULEDGER_CLUSTER")]
    pub cluster: Option<String>,

    /// Time of an untimestamped dcgm scrape (RFC 3339); defaults to the file's modification time.
    #[arg(long, env = "GPULEDGER_AT")]
    pub at: Option<DateTime<Utc>>,

    /// Time zone of naive timestamps (Slurm local times, LiteLLM), e.g. Europe/Berlin.
    #[arg(long, env = "GPULEDGER_TZ", default_value = "UTC")]
    pub tz: chrono_tz::Tz,

    /// A date format for FOCUS files that do not use ISO 8601, e.g. %m/%d/%y.
    #[arg(long, env = "GPULEDGER_DATE_FORMAT")]
    pub date_format: Option<String>,

    /// Reject the whole input on the first bad record.
    #[arg(long, env = "GPULEDGER_STRICT")]
    pub strict: bool,

    /// The longest line of a text input, in KiB.
    #[arg(long, env = "GPULEDGER_INGEST_MAX_LINE_KB", default_value_t = 1024)]
    pub max_line_kb: u64,

    /// The largest input once decompressed, in MiB; no limit if not given.
    #[arg(long, env = "GPULEDGER_INGEST_MAX_DECOMPRESSED_MB")]
    pub max_decompressed_mb: Option<u64>,

    /// Rows parsed and written at a time (each batch its own Parquet file), 1 to 16,777,216: the
    /// rows held grow with this, not with the size of the file (FOCUS Parquet is read whole).
    #[arg(long, env = "GPULEDGER_INGEST_BATCH_ROWS", default_value_t = DEFAULT_BATCH_ROWS, value_parser = parse_batch_rows)]
    pub batch_rows: usize,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum OutputFormat {
    Table,
    Csv,
    Json,
    /// Arrow IPC stream.
    Arrow,
    Parquet,
}

#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// Address and port for the worker's gRPC (Arrow Flight) service.
    #[arg(
        long,
        env = "GPULEDGER_WORKER_LISTEN",
        default_value = "127.0.0.1:8090"
    )]
    pub listen: std::net::SocketAddr,

    /// Memory one task of a query may use on this worker, in MiB; past it the query fails.
    #[arg(long, env = "GPULEDGER_QUERY_MEMORY_MB", default_value_t = 1024)]
    pub query_memory_mb: usize,

    /// How long one task of a query may run on this worker (as the coordinators'
    /// --query-timeout): a task whose coordinator stopped waiting stops here too by then.
    #[arg(long, env = "GPULEDGER_QUERY_TIMEOUT", default_value = "60s")]
    pub query_timeout: humantime::Duration,

    /// PEM certificate (chain) of this worker: with --tls-key it serves only TLS, and
    /// coordinators reach it as https://host:port.
    #[arg(long, env = "GPULEDGER_WORKER_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,

    /// PEM private key of --tls-cert.
    #[arg(long, env = "GPULEDGER_WORKER_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct SqlArgs {
    /// The query, e.g. "select sum(effective_cost) from billing_lines".
    pub query: String,

    /// How to print the result.
    #[arg(long, env = "GPULEDGER_FORMAT", value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,

    /// Also run statements that write (`COPY … TO`, `CREATE EXTERNAL TABLE`, `SET`); without
    /// it, only queries run, as over HTTP and the Postgres port.
    #[arg(long)]
    pub allow_writes: bool,
}

#[derive(Debug, clap::Args)]
pub struct ApplyArgs {
    /// YAML files (one or more `---` documents) or JSON files (an object, an array, or a stream of
    /// objects); `-` reads stdin.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ObjectFormat {
    Table,
    Json,
    Yaml,
}

#[derive(Debug, clap::Args)]
pub struct GetArgs {
    /// node, reservation, shared_cost_rule, rate_card, manual_cost, label_policy or slo.
    pub kind: ObjectKind,

    /// Only the object of this name (a node is named cluster/node).
    pub name: Option<String>,

    /// How to print the objects; json and yaml print documents that `apply` takes back.
    #[arg(long, env = "GPULEDGER_OBJECT_FORMAT", value_enum, default_value_t = ObjectFormat::Table)]
    pub format: ObjectFormat,
}

#[derive(Debug, clap::Args)]
pub struct DeleteArgs {
    /// node, reservation, shared_cost_rule, rate_card, manual_cost, label_policy or slo.
    pub kind: ObjectKind,

    /// The object's name, as `get` lists it.
    pub name: String,
}

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// GPUs in the cluster: a multiple of 8, at least 16 (H100 and A100 node groups).
    #[arg(long, env = "GPULEDGER_DEMO_GPUS", default_value_t = DemoSpec::DEFAULT_GPUS)]
    pub gpus: u32,

    /// Days of data: 1 to 3,660 (ten years).
    #[arg(long, env = "GPULEDGER_DEMO_DAYS", default_value_t = DemoSpec::DEFAULT_DAYS,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(DemoSpec::MAX_DAYS)))]
    pub days: u32,

    /// The same seed gives the same data.
    #[arg(long, env = "GPULEDGER_DEMO_SEED", default_value_t = DemoSpec::DEFAULT_SEED)]
    pub seed: u64,

    /// First day (UTC), YYYY-MM-DD; by default the data ends at the start of today (every hour of
    /// it has ended).
    #[arg(long, env = "GPULEDGER_DEMO_START")]
    pub start: Option<NaiveDate>,

    /// Time between dcgm-exporter scrapes: seconds, `30s` or `1m`.
    #[arg(long, env = "GPULEDGER_DEMO_SCRAPE_INTERVAL", default_value = "30s", value_parser = parse_seconds)]
    pub scrape_interval: u32,

    /// Stop once the data is loaded and the ledger built, instead of serving it.
    #[arg(long, env = "GPULEDGER_DEMO_NO_SERVE")]
    pub no_serve: bool,

    /// How to serve the demo afterwards (as `gpuledger serve`).
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// `30`, `30s` or `2m` as seconds.
fn parse_seconds(s: &str) -> Result<u32, String> {
    let (number, unit) = match s.strip_suffix('m') {
        Some(minutes) => (minutes, 60),
        None => (s.strip_suffix('s').unwrap_or(s), 1),
    };
    number
        .parse::<u32>()
        .map(|n| n * unit)
        .map_err(|_| format!("'{s}' is not a duration such as 30s or 1m"))
}

/// A number of rows from 1 to [`MAX_BATCH_ROWS`].
fn parse_batch_rows(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(rows) if (1..=MAX_BATCH_ROWS).contains(&rows) => Ok(rows),
        _ => Err(format!(
            "'{s}' is not a number of rows from 1 to {MAX_BATCH_ROWS}"
        )),
    }
}

fn parse_source(s: &str) -> Result<Source, String> {
    s.parse()
}
