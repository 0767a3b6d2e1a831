//! Query workers on this machine: the benchmarks' fleet (1,000 GPUs × 7 days, 40.3 M samples)
//! with 0, 1, 2 and 4 `gpuledger worker` processes on loopback, for
//!
//! - `ledger build` of the week (the CLI, `--workers`), each on a fresh copy of the landed lake;
//! - the four ad-hoc query shapes of `query/benches/sql_peers.rs`, 5 runs each (median), from a
//!   coordinating session in this process (the planner's default split: 16 MiB per task).
//!
//! ```sh
//! cargo bench -p gpuledger --bench workers
//! GPULEDGER_BENCH_WORKERS=0,2 GPULEDGER_BENCH_NODES=10 cargo bench -p gpuledger --bench workers
//! GPULEDGER_BENCH_SPLIT_MB=1 cargo bench -p gpuledger --bench workers   # split scans finer
//! ```
//!
//! Every configuration must give the same answers: the same ledger totals (balanced) and the
//! same rows per query. On a 2-core machine the workers share the coordinator's cores, so the
//! figures are the cost of distribution (plans shipped, batches over Arrow Flight), not a speedup;
//! BENCHMARKS.md states the overhead per worker and docs/scale.md uses it.

#[path = "../../query/benches/support/fleet.rs"]
mod fleet;

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use gpuledger_query::SessionOptions;
use gpuledger_query::distributed::Workers;

const RUNS: usize = 5;

/// Worker processes over one lake, stopped when dropped.
struct Cluster {
    children: Vec<Child>,
    list: String,
}

impl Cluster {
    fn start(data: &Path, count: usize) -> Self {
        let mut children = Vec::new();
        let mut addresses = Vec::new();
        for _ in 0..count {
            let mut child = gpuledger(data)
                .args(["worker", "--listen", "127.0.0.1:0"])
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
            let address = loop {
                let line = lines.next().expect("the worker exited").unwrap();
                if let Some(address) = line.strip_prefix("worker listening on ") {
                    break address.to_string();
                }
            };
            std::thread::spawn(move || for _ in lines {});
            children.push(child);
            addresses.push(address);
        }
        Self {
            children,
            list: addresses.join(","),
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn gpuledger(data: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gpuledger"));
    command
        .arg("--data")
        .arg(data)
        .env_remove("GPULEDGER_CATALOG")
        .env_remove("GPULEDGER_WORKERS");
    command
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let counts: Vec<usize> = std::env::var("GPULEDGER_BENCH_WORKERS")
        .unwrap_or_else(|_| "0,1,2,4".into())
        .split(',')
        .map(|n| n.trim().parse().unwrap())
        .collect();
    // Bytes of Parquet per task before a scan is split (the planner's default: 16 MiB).
    let split: Option<usize> = std::env::var("GPULEDGER_BENCH_SPLIT_MB")
        .ok()
        .and_then(|mb| mb.parse::<usize>().ok())
        .map(|mb| mb << 20);
    let split_args: Vec<String> = match split {
        Some(bytes) => vec!["--worker-split-bytes".into(), bytes.to_string()],
        None => vec![],
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let fleet = fleet::land_sized(
        &runtime,
        fleet::Size {
            nodes: std::env::var("GPULEDGER_BENCH_NODES")
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(fleet::NODES),
            ..fleet::WEEK
        },
    );
    println!(
        "{} samples, {} events, {} billing lines; workers: {counts:?}; split: {}\n",
        fleet.samples,
        fleet.events,
        fleet.billing_lines,
        split.map_or("16 MiB (default)".into(), |b| format!("{} MiB", b >> 20))
    );

    println!("| `ledger build`, the week | workers | seconds | vs in-process |\n|---|---|---|---|");
    let (from, to) = (fleet.first.to_string(), fleet.last.to_string());
    let mut in_process = None;
    let mut ledger_total = None;
    for &count in &counts {
        let copy = tempfile::tempdir().unwrap();
        copy_dir(fleet.data_dir(), copy.path());
        let cluster = Cluster::start(copy.path(), count);
        let started = Instant::now();
        let out = gpuledger(copy.path())
            .args(["ledger", "build", "--from", &from, "--to", &to])
            .args(["--workers", &cluster.list])
            .args(&split_args)
            .output()
            .unwrap();
        let seconds = started.elapsed().as_secs_f64();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && !stdout.contains("NOT balanced"),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let total = gpuledger(copy.path())
            .args([
                "sql",
                "SELECT round(sum(amount), 6) FROM cost_entries",
                "--format",
                "csv",
            ])
            .output()
            .unwrap()
            .stdout;
        assert_eq!(*ledger_total.get_or_insert_with(|| total.clone()), total);
        let base = *in_process.get_or_insert(seconds);
        println!(
            "| build | {count} | {seconds:.2} | {:.2}× |",
            seconds / base
        );
    }

    println!(
        "\n| query | workers | distributed | median s | vs in-process |\n|---|---|---|---|---|"
    );
    let clusters: Vec<(usize, Cluster)> = counts
        .iter()
        .map(|&count| (count, Cluster::start(fleet.data_dir(), count)))
        .collect();
    for (name, sql) in fleet::ADHOC_QUERIES {
        let mut base = None;
        let mut answer_rows = None;
        for (count, cluster) in &clusters {
            let ctx = gpuledger_query::new_session_with(
                &fleet.lake,
                &SessionOptions {
                    workers: Workers::parse(&cluster.list)
                        .unwrap()
                        .with_bytes_per_task(split),
                    ..SessionOptions::default()
                },
            )
            .unwrap();
            let distributed = runtime.block_on(async {
                let plan = ctx.sql(sql).await?.create_physical_plan().await?;
                Ok::<_, datafusion::error::DataFusionError>(
                    datafusion::physical_plan::displayable(plan.as_ref())
                        .indent(false)
                        .to_string()
                        .starts_with("DistributedExec"),
                )
            });
            let distributed = if distributed.unwrap() { "yes" } else { "no" };
            let times: Vec<f64> = (0..RUNS)
                .map(|_| {
                    let started = Instant::now();
                    let batches = runtime
                        .block_on(async { ctx.sql(sql).await?.collect().await })
                        .unwrap();
                    let rows: usize = batches
                        .iter()
                        .map(arrow::array::RecordBatch::num_rows)
                        .sum();
                    assert_eq!(*answer_rows.get_or_insert(rows), rows, "{name}");
                    started.elapsed().as_secs_f64()
                })
                .collect();
            let seconds = median(times);
            let base = *base.get_or_insert(seconds);
            println!(
                "| {name} | {count} | {distributed} | {seconds:.3} | {:.2}× |",
                seconds / base
            );
        }
    }
}
