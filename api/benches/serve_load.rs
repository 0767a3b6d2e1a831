//! Load on `gpuledger serve` over loopback: 100 concurrent clients for a bounded time each, on
//!
//! - `budget_status`: `GET /v1/budgets/{name}/status`, spend and forecast from the ledger of a
//!   16-GPU demo cluster's week (five budgets, asked in turn);
//! - `ingest_dcgm`: `POST /v1/ingest/dcgm`, one scrape of that cluster per request (16 GPUs,
//!   every default family, per-sample timestamps), each request a scrape of its own time, so
//!   nothing is deduplicated away; `202` means the batch is committed;
//! - `ingest_remote_write`: `POST /v1/prom/write`, 2,000 samples per request (Prometheus's
//!   default `max_samples_per_send`): 16 GPUs × 5 DCGM fields × 25 scrapes, each request its
//!   own 25 scrapes.
//!
//! The two ingest scenarios run twice, each time on a fresh `serve` and samples the lake has
//! not seen: with `--ingest-group-rows 0` (one Parquet file and catalog transaction per request)
//! and with the default group commit; the live ledger is off during them, and caught up after
//! each pair by a timed `gpuledger ledger build`.
//!
//! ```sh
//! cargo bench -p gpuledger --bench serve_load
//! GPULEDGER_BENCH_SECONDS=30 GPULEDGER_BENCH_CLIENTS=100 cargo bench -p gpuledger --bench serve_load
//! ```
//!
//! Prints requests, errors, throughput and latency percentiles per scenario. Every request goes to
//! 127.0.0.1; each scenario stops after its time or its request cap, whichever comes first.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::NaiveDate;
use gpuledger_demo::dcgm::DcgmScrapes;
use gpuledger_demo::{Chunks, DemoSpec, Scenario};

const BUDGETS: [(&str, &str); 5] = [
    ("team-research", "team: research"),
    ("team-assistant", "team: assistant"),
    ("team-search", "team: search"),
    ("ns-ml-research", "namespace: ml-research"),
    ("team-vision", "team: vision"),
];
/// Requests per client at most, whatever the time allows.
const MAX_REQUESTS_PER_CLIENT: usize = 20_000;

fn main() {
    let seconds: u64 = env_or("GPULEDGER_BENCH_SECONDS", 20);
    let clients: usize = env_or("GPULEDGER_BENCH_CLIENTS", 100);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("lake");
    let start = NaiveDate::from_ymd_opt(2026, 11, 2).unwrap();

    println!("setting up: a 16-GPU demo cluster, 7 days, loaded and its ledger built");
    let gpuledger = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_gpuledger"))
            .arg("--data")
            .arg(&data)
            .args(args)
            .stderr(Stdio::inherit())
            .output()
            .expect("run gpuledger");
        assert!(out.status.success(), "gpuledger {args:?} failed");
        String::from_utf8(out.stdout).unwrap()
    };
    gpuledger(&[
        "demo",
        "--gpus",
        "16",
        "--days",
        "7",
        "--start",
        "2026-11-02",
        "--no-serve",
    ]);
    let manifest = dir.path().join("budgets.yaml");
    let documents: Vec<String> = BUDGETS
        .iter()
        .map(|(name, owner)| {
            format!(
                "kind: budget\nname: {name}\nspec:\n  {owner}\n  amount: 5000\n  currency: USD\n"
            )
        })
        .collect();
    std::fs::write(&manifest, documents.join("---\n")).unwrap();
    gpuledger(&["apply", manifest.to_str().unwrap()]);
    let token = gpuledger(&["token", "create", "--scope", "admin"])
        .trim()
        .to_string();
    let server = Server::start(&data, &[]);

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .build()
        .unwrap();
    let limit = Duration::from_secs(seconds);

    let base = server.base.clone();
    let report = runtime.block_on(load(clients, limit, MAX_REQUESTS_PER_CLIENT, {
        let (http, token) = (http.clone(), token.clone());
        move |i| {
            let url = format!(
                "{base}/v1/budgets/{}/status?at=2026-11-08T23:00:00Z",
                BUDGETS[i % BUDGETS.len()].0
            );
            let request = http.get(url).bearer_auth(&token);
            async move { request.send().await.map(|r| r.status().as_u16() == 200) }
        }
    }));
    report.print("budget_status", "GET /v1/budgets/{name}/status");
    drop(server);

    for (week, (commit, args)) in [
        ("one commit per request", &["--ingest-group-rows", "0"][..]),
        ("group commit (default)", &[][..]),
    ]
    .into_iter()
    .enumerate()
    {
        // The live ledger's rounds are left off here and timed as one build after the
        // scenarios: a round that started with a scenario would land in its CPU per request or
        // not, by chance of timing.
        let server = Server::start(&data, &[args, &["--ledger-interval", "0s"]].concat());
        let base = server.base.clone();
        // Scrapes of a week after the demo's that the lake has not seen: week 2, then week 3.
        let first_day = start + chrono::Duration::days(7 * (week as i64 + 1));
        let later = DemoSpec {
            gpus: 16,
            days: 7,
            seed: DemoSpec::DEFAULT_SEED,
            start: first_day,
            scrape_interval_s: DemoSpec::DEFAULT_SCRAPE_INTERVAL_S,
        };
        let mut scrapes = DcgmScrapes::new(&Scenario::plan(&later));
        let mut bodies = Vec::new();
        let mut buf = Vec::new();
        while scrapes.next_chunk(&mut buf) && bodies.len() < clients * 200 {
            bodies.push(bytes::Bytes::from(std::mem::take(&mut buf)));
        }
        let bodies = Arc::new(bodies);
        let per_client = bodies.len() / clients;
        let cpu_before = Cpu::now(&server);
        let report = runtime.block_on(load(clients, limit, per_client, {
            let (http, token, bodies) = (http.clone(), token.clone(), Arc::clone(&bodies));
            let base = base.clone();
            move |i| {
                let request = http
                    .post(format!("{base}/v1/ingest/dcgm?cluster=demo"))
                    .bearer_auth(&token)
                    .body(bodies[i].clone());
                async move { request.send().await.map(|r| r.status().as_u16() == 202) }
            }
        }));
        report.print(
            "ingest_dcgm",
            &format!(
                "{commit}: POST /v1/ingest/dcgm, one 16-GPU scrape ({} bytes, 199 samples) per request",
                bodies[0].len()
            ),
        );
        report.print_samples(199);
        report.print_cpu(Cpu::now(&server).since(cpu_before));

        // Remote-write of the same week's second half, in 2,000-sample bodies.
        let from_ms = (first_day + chrono::Duration::days(4))
            .and_hms_opt(0, 0, 0)
            .unwrap()
            .and_utc()
            .timestamp_millis();
        let writes: Vec<bytes::Bytes> = (0..clients * 50)
            .map(|n| remote_write_body(from_ms, n))
            .collect();
        let writes = Arc::new(writes);
        let cpu_before = Cpu::now(&server);
        let report = runtime.block_on(load(clients, limit, writes.len() / clients, {
            let (http, token, writes) = (http.clone(), token.clone(), Arc::clone(&writes));
            move |i| {
                let request = http
                    .post(format!("{base}/v1/prom/write?cluster=demo"))
                    .bearer_auth(&token)
                    .header("content-encoding", "snappy")
                    .header("content-type", "application/x-protobuf")
                    .body(writes[i].clone());
                async move { request.send().await.map(|r| r.status().as_u16() == 202) }
            }
        }));
        report.print(
            "ingest_remote_write",
            &format!(
                "{commit}: POST /v1/prom/write, {REMOTE_WRITE_SAMPLES} samples ({} bytes) per request",
                writes[0].len()
            ),
        );
        report.print_samples(REMOTE_WRITE_SAMPLES);
        report.print_cpu(Cpu::now(&server).since(cpu_before));
        drop(server);

        let started = Instant::now();
        gpuledger(&["ledger", "build"]);
        println!(
            "ledger_catch_up: {commit}: `gpuledger ledger build` over what both scenarios landed (what the live ledger's rounds do): {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
}

/// Samples per remote-write request: Prometheus's default `max_samples_per_send`.
const REMOTE_WRITE_SAMPLES: usize = 2_000;
/// The DCGM fields a remote-write body carries, as dcgm-exporter names them.
const REMOTE_WRITE_FIELDS: [&str; 5] = [
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_PROF_SM_ACTIVE",
];

/// Remote-write body `n`: 16 GPUs × 5 fields × 25 scrapes 15 s apart, starting 25 scrapes
/// after body `n - 1`'s (snappy-compressed `WriteRequest`, labels sorted by name).
fn remote_write_body(from_ms: i64, n: usize) -> bytes::Bytes {
    use gpuledger_ingest::remote_write::{Label, Sample, TimeSeries, WriteRequest};
    use prost::Message;
    const GPUS: usize = 16;
    const SCRAPES: usize = REMOTE_WRITE_SAMPLES / GPUS / REMOTE_WRITE_FIELDS.len();
    let mut request = WriteRequest::default();
    for (field_index, field) in REMOTE_WRITE_FIELDS.iter().enumerate() {
        for gpu in 0..GPUS {
            let label = |name: &str, value: String| Label {
                name: name.into(),
                value,
            };
            let labels = vec![
                label("Hostname", format!("demo-node-{}", gpu / 8)),
                label("UUID", format!("GPU-rw-{gpu:04}")),
                label("__name__", (*field).into()),
                label("gpu", (gpu % 8).to_string()),
                label("modelName", "NVIDIA H100 80GB HBM3".into()),
            ];
            let samples = (0..SCRAPES)
                .map(|scrape| {
                    let at = n * SCRAPES + scrape;
                    Sample {
                        value: ((at * 7 + gpu * 13 + field_index * 29) % 100) as f64,
                        timestamp: from_ms + at as i64 * 15_000,
                    }
                })
                .collect();
            request.timeseries.push(TimeSeries { labels, samples });
        }
    }
    snap::raw::Encoder::new()
        .compress_vec(&request.encode_to_vec())
        .unwrap()
        .into()
}

/// Runs `clients` loops, each sending `request(n)` (n counts every request sent by all clients)
/// until `limit` passes or it has sent `max_per_client`.
async fn load<F, Fut>(clients: usize, limit: Duration, max_per_client: usize, request: F) -> Report
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<bool, reqwest::Error>> + Send,
{
    let started = Instant::now();
    let counter = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let (request, counter) = (request.clone(), Arc::clone(&counter));
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut errors = 0usize;
                while started.elapsed() < limit && latencies.len() + errors < max_per_client {
                    let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let sent = Instant::now();
                    match request(n).await {
                        Ok(true) => latencies.push(sent.elapsed()),
                        _ => errors += 1,
                    }
                }
                (latencies, errors)
            })
        })
        .collect();
    let mut report = Report::default();
    for task in tasks {
        let (latencies, errors) = task.await.unwrap();
        report.latencies.extend(latencies);
        report.errors += errors;
    }
    report.elapsed = started.elapsed();
    report.latencies.sort_unstable();
    report
}

#[derive(Default)]
struct Report {
    latencies: Vec<Duration>,
    errors: usize,
    elapsed: Duration,
}

impl Report {
    fn percentile(&self, p: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((p / 100.0) * self.latencies.len() as f64).ceil() as usize;
        self.latencies[rank.clamp(1, self.latencies.len()) - 1]
    }

    /// The server's and the clients' CPU time over the scenario, per accepted request, and the
    /// most requests per second the box's cores could serve at that cost: on a shared, noisy
    /// box, CPU per request is steadier than requests per second, and the clients run on the
    /// same cores as the server.
    fn print_cpu(&self, used: Cpu) {
        let requests = self.latencies.len().max(1) as f64;
        let per_request = |seconds: f64| seconds * 1e3 / requests;
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let both = per_request(used.server + used.clients);
        println!(
            "  server CPU {:.1} s = {:.2} ms per request; clients {:.1} s = {:.2} ms; \
             {cores} cores at {:.2} ms a request: at most {:.0} requests/s",
            used.server,
            per_request(used.server),
            used.clients,
            per_request(used.clients),
            both,
            cores as f64 * 1e3 / both.max(1e-9),
        );
    }

    /// Samples landed per second, at `per_request` samples per accepted request.
    fn print_samples(&self, per_request: usize) {
        println!(
            "  = {:.0} samples/s",
            (self.latencies.len() * per_request) as f64 / self.elapsed.as_secs_f64()
        );
    }

    fn print(&self, name: &str, what: &str) {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "{name}: {what}\n  {} ok, {} errors in {:.1} s = {:.0} requests/s; latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            self.latencies.len(),
            self.errors,
            self.elapsed.as_secs_f64(),
            self.latencies.len() as f64 / self.elapsed.as_secs_f64(),
            ms(self.percentile(50.0)),
            ms(self.percentile(99.0)),
            ms(self.latencies.last().copied().unwrap_or_default()),
        );
    }
}

/// `gpuledger serve` on a free loopback port, stopped when dropped.
struct Server {
    child: Child,
    base: String,
}

impl Server {
    fn start(data: &std::path::Path, extra: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_gpuledger"))
            .arg("--data")
            .arg(data)
            .args(["serve", "--listen", "127.0.0.1:0", "--pg-listen", "off"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn gpuledger serve");
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let base = loop {
            let line = lines.next().expect("serve exited").unwrap();
            if let Some(url) = line.strip_prefix("gpuledger serving ") {
                break url.to_string();
            }
        };
        std::thread::spawn(move || for _ in lines {});
        Server { child, base }
    }
}

/// CPU seconds used so far by the server and by this process (the clients).
#[derive(Clone, Copy)]
struct Cpu {
    server: f64,
    clients: f64,
}

impl Cpu {
    fn now(server: &Server) -> Self {
        Self {
            server: process_cpu_seconds(server.child.id()),
            clients: process_cpu_seconds(std::process::id()),
        }
    }

    fn since(self, before: Cpu) -> Cpu {
        Cpu {
            server: self.server - before.server,
            clients: self.clients - before.clients,
        }
    }
}

/// CPU seconds process `pid` has used (user + system, from `/proc/<pid>/stat`, in clock ticks of
/// 1/100 s).
fn process_cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name (which may hold spaces) start at its closing ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are the 14th and 15th fields: 12th and 13th after the name.
    (ticks(11) + ticks(12)) / 100.0
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
