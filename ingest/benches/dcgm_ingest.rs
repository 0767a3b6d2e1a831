//! Throughput of the dcgm-exporter text parser on a synthetic fleet shaped like a real one:
//! 1,000 GPUs (125 nodes × 8 H100), the 25 metrics of dcgm-exporter's `default-counters.csv`, its
//! label layout (Kubernetes mode: busy GPUs carry `container`/`namespace`/`pod`), scraped every
//! 15 s and kept with per-sample timestamps as a scrape recorder writes them.
//!
//! `cargo bench -p gpuledger-ingest --bench dcgm_ingest` reports:
//! - `parse`: the text parser alone, samples per second (criterion), on scrape-grouped text (each
//!   scrape a full exposition, as a scrape recorder appends them) and on family-grouped text (each
//!   metric family once with every scrape's samples, as a multi-scrape dump lists them) and the
//!   remote-write parser on the same samples;
//! - `day`: the end-to-end ingest of one day of that fleet (5,760 scrapes) through the real
//!   pipeline into durable zstd Parquet with a SQLite catalog: samples per second, text parse
//!   included, samples per CPU-second of the process (the goal is per core), and Parquet bytes
//!   per sample. Each hour is generated in memory first, outside the timing, and lands as one
//!   input (as hourly scrape files would). `GPULEDGER_BENCH_HOURS=N`
//!   runs N hours instead of 24; `GPULEDGER_BENCH_INPUT=family` lands family-grouped text and
//!   `GPULEDGER_BENCH_INPUT=remote-write` one remote-write body per hour instead. For text,
//!   DuckDB turns the same text into wide zstd Parquet in the same run (`peer_sql`; when
//!   `python3 -m pip install duckdb` has been run), and the ratio is printed.

#[path = "../../query/benches/support/duckdb.rs"]
mod duckdb;

use std::fmt::Write;
use std::hint::black_box;

use arrow::record_batch::RecordBatch;
use chrono::{TimeZone, Utc};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use gpuledger_demo::noise::{mix, unit};
use gpuledger_ingest::dcgm;
use gpuledger_ingest::pipeline::{IngestOptions, Input, Source, ingest};
use gpuledger_ingest::{IngestError, ParseContext, Rejection, Sink};
use gpuledger_lake::tables::Table;
use gpuledger_lake::{Lake, LakeConfig};

const NODES: usize = 125;
const GPUS_PER_NODE: usize = 8;
const SCRAPES: usize = 4;
const SCRAPE_INTERVAL_MS: i64 = 15_000;
const SCRAPES_PER_HOUR: usize = 240;
/// 2026-01-01T10:00:00Z.
const FIRST_SCRAPE_MS: i64 = 1_767_261_600_000;

/// How dcgm-exporter prints a field: integers with `%d`, doubles with `%f`.
#[derive(Clone, Copy)]
enum Format {
    Integer,
    Double,
}

/// dcgm-exporter's default counters: (field, Prometheus type, help, format).
const METRICS: &[(&str, &str, &str, Format)] = &[
    (
        "DCGM_FI_DEV_SM_CLOCK",
        "gauge",
        "SM clock frequency (in MHz).",
        Format::Integer,
    ),
    (
        "DCGM_FI_DEV_MEM_CLOCK",
        "gauge",
        "Memory clock frequency (in MHz).",
        Format::Integer,
    ),
    (
        "DCGM_FI_DEV_MEMORY_TEMP",
        "gauge",
        "Memory temperature (in C).",
        Format::Integer,
    ),
    (
        "DCGM_FI_DEV_GPU_TEMP",
        "gauge",
        "GPU temperature (in C).",
        Format::Integer,
    ),
    (
        "DCGM_FI_DEV_POWER_USAGE",
        "gauge",
        "Power draw (in W).",
        Format::Double,
    ),
    (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "counter",
        "Total energy consumption since boot (in mJ).",
        Format::Integer,
    ),
    (
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "counter",
        "Total number of PCIe retries.",
        Format::Integer,
    ),
    (
        "DCGM_FI_DEV_GPU_UTIL",
        "gauge",
        "GPU utilization (in %).",
        Format::Integer,
    ),
    (
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "gauge",
        "Memory utilization (in %).",
        Format::Integer,
    ),
    (
        "DCGM_FI_DEV_ENC_UTIL",
        "gauge",
        "Encoder utilization (in %).",
        Format::Integer,
    ),
    (
        "DCGM_FI_DEV_DEC_UTIL",
        "gauge",
        "Decoder utilization (in %).",
        Format::Integer,
    ),
    (
        "DCGM_FI_DEV_XID_ERRORS",
        "gauge",
        "Value of the last XID error encountered.",
        Format::Integer,
    ),
    (
        "DCGM_FI_DEV_FB_FREE",
        "gauge",
        "Framebuffer memory free (in MiB).",
        Format::Integer,
    ),
    (
        "DCGM_FI_DEV_FB_USED",
        "gauge",
        "Framebuffer memory used (in MiB).",
        Format::Integer,
    ),
    (
        "DCGM_FI_DEV_FB_RESERVED",
        "gauge",
        "Framebuffer memory reserved (in MiB).",
        Format::Integer,
    ),
    (
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "counter",
        "Total number of NVLink bandwidth counters for all lanes.",
        Format::Integer,
    ),
    (
        "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
        "gauge",
        "vGPU License status",
        Format::Integer,
    ),
    (
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for uncorrectable errors",
        Format::Integer,
    ),
    (
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for correctable errors",
        Format::Integer,
    ),
    (
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "gauge",
        "Whether remapping of rows has failed",
        Format::Integer,
    ),
    (
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "gauge",
        "Ratio of time the graphics engine is active.",
        Format::Double,
    ),
    (
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "gauge",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
        Format::Double,
    ),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
        Format::Double,
    ),
    (
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "gauge",
        "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
        Format::Integer,
    ),
    (
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "gauge",
        "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
        Format::Integer,
    ),
];

/// PCI bus of each GPU slot in an 8-GPU HGX H100 board.
const PCI_BUSES: [&str; GPUS_PER_NODE] = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"];
const FB_TOTAL_MIB: u64 = 81_559;
const FB_RESERVED_MIB: u64 = 511;

/// A value in `[low, high)` for one (GPU, scrape, metric): the same text on every run.
fn draw(gpu: usize, scrape: usize, metric: usize, low: f64, high: f64) -> f64 {
    let seed = ((gpu as u64) << 32) ^ ((scrape as u64) << 8) ^ metric as u64;
    low + unit(seed) * (high - low)
}

/// One GPU's labels, in dcgm-exporter's field order.
fn label_pairs(node: usize, slot: usize) -> Vec<(&'static str, String)> {
    let gpu = node * GPUS_PER_NODE + slot;
    let id = mix(gpu as u64);
    let mut pairs = vec![
        ("gpu", slot.to_string()),
        (
            "UUID",
            format!(
                "GPU-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                id >> 32,
                (id >> 16) & 0xffff,
                id & 0xffff,
                mix(id) >> 48,
                mix(id) & 0xffff_ffff_ffff,
            ),
        ),
        ("pci_bus_id", format!("00000000:{}:00.0", PCI_BUSES[slot])),
        ("device", format!("nvidia{slot}")),
        ("modelName", "NVIDIA H100 80GB HBM3".into()),
        ("Hostname", format!("dgx-h100-{node:03}")),
        ("DCGM_FI_DRIVER_VERSION", "550.90.07".into()),
    ];
    if is_busy(gpu) {
        let job = node / 4;
        pairs.push(("container", "pytorch".into()));
        pairs.push(("namespace", format!("team-{}", job % 6)));
        pairs.push((
            "pod",
            format!(
                "train-llama-{job}-worker-{}",
                (node % 4) * GPUS_PER_NODE + slot
            ),
        ));
    }
    pairs
}

/// One GPU's label text, as dcgm-exporter prints it.
fn labels(node: usize, slot: usize) -> String {
    let pairs: Vec<String> = label_pairs(node, slot)
        .iter()
        .map(|(name, value)| format!("{name}=\"{value}\""))
        .collect();
    pairs.join(",")
}

/// Three GPUs in four are allocated to a training job.
fn is_busy(gpu: usize) -> bool {
    !mix(gpu as u64 ^ 0xb05).is_multiple_of(4)
}

/// A plausible reading of `metric` for one GPU at one scrape.
fn reading(gpu: usize, scrape: usize, metric: usize) -> f64 {
    let busy = is_busy(gpu);
    let draw = |low, high| draw(gpu, scrape, metric, low, high);
    let power = if busy {
        draw(450.0, 700.0)
    } else {
        draw(68.0, 90.0)
    };
    match METRICS[metric].0 {
        "DCGM_FI_DEV_SM_CLOCK" => {
            if busy {
                1980.0
            } else {
                345.0
            }
        }
        "DCGM_FI_DEV_MEM_CLOCK" => 2619.0,
        "DCGM_FI_DEV_MEMORY_TEMP" => draw(38.0, 72.0).floor(),
        "DCGM_FI_DEV_GPU_TEMP" => draw(33.0, 79.0).floor(),
        "DCGM_FI_DEV_POWER_USAGE" => (power * 1000.0).round() / 1000.0,
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" => {
            let since_boot_s = 3_600.0 * 24.0 * 40.0 + (scrape as f64) * 15.0;
            (since_boot_s * power * 1000.0).floor()
        }
        "DCGM_FI_DEV_GPU_UTIL" if busy => draw(55.0, 101.0).floor(),
        "DCGM_FI_DEV_MEM_COPY_UTIL" if busy => draw(10.0, 60.0).floor(),
        "DCGM_FI_DEV_FB_USED" => fb_used(gpu),
        "DCGM_FI_DEV_FB_FREE" => FB_TOTAL_MIB as f64 - FB_RESERVED_MIB as f64 - fb_used(gpu),
        "DCGM_FI_DEV_FB_RESERVED" => FB_RESERVED_MIB as f64,
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL" => draw(1e12, 9e12).floor(),
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE" if busy => draw(0.6, 1.0),
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE" if busy => draw(0.2, 0.8),
        "DCGM_FI_PROF_DRAM_ACTIVE" if busy => draw(0.3, 0.9),
        "DCGM_FI_PROF_PCIE_TX_BYTES" => draw(1e5, if busy { 2e9 } else { 2e5 }).floor(),
        "DCGM_FI_PROF_PCIE_RX_BYTES" => draw(1e5, if busy { 8e9 } else { 2e5 }).floor(),
        _ => 0.0,
    }
}

fn fb_used(gpu: usize) -> f64 {
    if is_busy(gpu) {
        30_000.0 + (mix(gpu as u64) % 48_000) as f64
    } else {
        0.0
    }
}

/// How the samples of several scrapes are laid out in one text.
#[derive(Clone, Copy)]
enum Grouping {
    /// One full exposition per scrape (HELP/TYPE, then one line per GPU per metric).
    Scrape,
    /// Each metric family once (HELP/TYPE, then every scrape's line per GPU).
    Family,
}

/// `count` consecutive scrapes from scrape number `first` with per-sample millisecond
/// timestamps, and the number of samples in them.
fn synthetic_scrapes(first: usize, count: usize, grouping: Grouping) -> (Vec<u8>, u64) {
    let labels: Vec<String> = (0..NODES)
        .flat_map(|node| (0..GPUS_PER_NODE).map(move |slot| labels(node, slot)))
        .collect();
    let mut text = String::new();
    let mut samples = 0;
    let mut family = |text: &mut String, scrapes: std::ops::Range<usize>, metric: usize| {
        let (name, kind, help, format) = METRICS[metric];
        writeln!(text, "# HELP {name} {help}\n# TYPE {name} {kind}").unwrap();
        for scrape in scrapes {
            let ms = FIRST_SCRAPE_MS + scrape as i64 * SCRAPE_INTERVAL_MS;
            for (gpu, labels) in labels.iter().enumerate() {
                let value = reading(gpu, scrape, metric);
                match format {
                    Format::Integer => writeln!(text, "{name}{{{labels}}} {} {ms}", value as i64),
                    Format::Double => writeln!(text, "{name}{{{labels}}} {value:.6} {ms}"),
                }
                .unwrap();
                samples += 1;
            }
        }
    };
    match grouping {
        Grouping::Scrape => {
            for scrape in first..first + count {
                for metric in 0..METRICS.len() {
                    family(&mut text, scrape..scrape + 1, metric);
                }
            }
        }
        Grouping::Family => {
            for metric in 0..METRICS.len() {
                family(&mut text, first..first + count, metric);
            }
        }
    }
    (text.into_bytes(), samples)
}

/// The same samples as `synthetic_scrapes` as a Prometheus remote-write body (snappy-compressed
/// `WriteRequest`, one series per GPU and metric with all its samples, labels sorted by name as
/// Prometheus sends them), and the number of samples in it.
fn remote_write_body(first: usize, count: usize) -> (Vec<u8>, u64) {
    use gpuledger_ingest::remote_write::{Label, Sample, TimeSeries, WriteRequest};
    use prost::Message;
    let mut request = WriteRequest::default();
    for (metric, (name, ..)) in METRICS.iter().enumerate() {
        for node in 0..NODES {
            for slot in 0..GPUS_PER_NODE {
                let gpu = node * GPUS_PER_NODE + slot;
                let mut labels: Vec<Label> = label_pairs(node, slot)
                    .into_iter()
                    .map(|(name, value)| Label {
                        name: name.into(),
                        value,
                    })
                    .collect();
                labels.push(Label {
                    name: "__name__".into(),
                    value: (*name).into(),
                });
                labels.sort_by(|a, b| a.name.cmp(&b.name));
                let samples = (first..first + count)
                    .map(|scrape| Sample {
                        value: reading(gpu, scrape, metric),
                        timestamp: FIRST_SCRAPE_MS + scrape as i64 * SCRAPE_INTERVAL_MS,
                    })
                    .collect();
                request.timeseries.push(TimeSeries { labels, samples });
            }
        }
    }
    let samples = (METRICS.len() * NODES * GPUS_PER_NODE * count) as u64;
    let body = snap::raw::Encoder::new()
        .compress_vec(&request.encode_to_vec())
        .unwrap();
    (body, samples)
}

/// Counts rows and drops the batches: the benchmark measures the parser alone.
#[derive(Default)]
struct CountingSink {
    rows: usize,
    rejections: usize,
}

impl Sink for CountingSink {
    fn accept(&mut self, _table: Table, batch: RecordBatch) -> Result<(), IngestError> {
        self.rows += batch.num_rows();
        Ok(())
    }

    fn reject(&mut self, _rejection: Rejection) -> Result<(), IngestError> {
        self.rejections += 1;
        Ok(())
    }
}

fn parse_throughput(c: &mut Criterion) {
    let ctx = ParseContext::new(
        "bench.prom",
        Utc.timestamp_millis_opt(FIRST_SCRAPE_MS).unwrap(),
    );
    let mut group = c.benchmark_group("dcgm_ingest");
    group.sample_size(10);
    for (grouping, name) in [
        (Grouping::Scrape, "parse_1000_gpus_4_scrapes"),
        (Grouping::Family, "parse_1000_gpus_4_scrapes_family_grouped"),
    ] {
        let (text, samples) = synthetic_scrapes(0, SCRAPES, grouping);
        group.throughput(Throughput::Elements(samples));
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut sink = CountingSink::default();
                let stats = dcgm::parse(&mut black_box(text.as_slice()), &ctx, &mut sink).unwrap();
                assert_eq!((stats.samples, sink.rejections), (samples, 0));
                // One row per GPU and scrape, whichever the grouping.
                assert_eq!(sink.rows, NODES * GPUS_PER_NODE * SCRAPES);
                black_box(sink.rows)
            });
        });
    }
    let (body, samples) = remote_write_body(0, SCRAPES);
    group.throughput(Throughput::Elements(samples));
    group.bench_function("parse_1000_gpus_4_scrapes_remote_write", |b| {
        b.iter(|| {
            let mut sink = CountingSink::default();
            let stats = gpuledger_ingest::remote_write::parse(
                &mut black_box(body.as_slice()),
                &ctx,
                &mut sink,
            )
            .unwrap();
            assert_eq!((stats.samples, sink.rejections), (samples, 0));
            assert_eq!(sink.rows, NODES * GPUS_PER_NODE * SCRAPES);
            black_box(sink.rows)
        });
    });
    group.finish();
}

/// One day of the fleet through `pipeline::ingest` into a fresh lake, hour by hour, as text
/// of `grouping` or as remote-write bodies (`None`).
fn day_end_to_end(hours: usize, grouping: Option<Grouping>) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let lake = runtime
        .block_on(Lake::open(&LakeConfig {
            data: dir.path().display().to_string(),
            catalog: None,
        }))
        .unwrap();
    // DuckDB does the same work on the same text, hour by hour, in the same run (text only:
    // it cannot read remote-write bodies).
    let peer_dir = dir.path().join("peer");
    std::fs::create_dir_all(&peer_dir).unwrap();
    let has_duckdb = duckdb::DuckDb::installed();
    if grouping.is_some() && !has_duckdb {
        println!("dcgm_ingest/day: no DuckDB peer (python3 -m pip install duckdb to measure one)");
    }
    let mut peer = grouping
        .filter(|_| has_duckdb)
        .map(|_| duckdb::DuckDb::over(&peer_dir, &[]));
    let (mut peer_seconds, mut peer_cpu_seconds, mut peer_bytes) = (0.0, 0.0, 0u64);
    let (mut samples, mut text_bytes, mut elapsed) = (0u64, 0u64, Duration::ZERO);
    // The CPU time of the ingests alone (the input is made between them, outside the timing).
    let mut cpu_seconds = 0.0;
    for hour in 0..hours {
        let (first, count) = (hour * SCRAPES_PER_HOUR, SCRAPES_PER_HOUR);
        let (text, hour_samples) = match grouping {
            Some(grouping) => synthetic_scrapes(first, count, grouping),
            None => remote_write_body(first, count),
        };
        text_bytes += text.len() as u64;
        samples += hour_samples;
        if let Some(peer) = &mut peer {
            let text_file = peer_dir.join(format!("hour-{hour:02}.prom"));
            let parquet = peer_dir.join(format!("hour-{hour:02}.parquet"));
            std::fs::write(&text_file, &text).unwrap();
            let answer = peer.time(&peer_sql(&text_file, &parquet));
            assert_eq!(
                answer.first,
                (NODES * GPUS_PER_NODE * SCRAPES_PER_HOUR).to_string(),
                "DuckDB's wide rows"
            );
            peer_seconds += answer.seconds;
            peer_cpu_seconds += answer.cpu_seconds;
            peer_bytes += std::fs::metadata(&parquet).unwrap().len();
            std::fs::remove_file(&text_file).unwrap();
            std::fs::remove_file(&parquet).unwrap();
        }
        let input = Input::Bytes {
            origin: format!("hour-{hour:02}.prom"),
            bytes: text.into(),
        };
        let source = if grouping.is_some() {
            Source::Dcgm
        } else {
            Source::RemoteWrite
        };
        let options = IngestOptions::new(source, ParseContext::new("bench", Utc::now()));
        let (started, cpu) = (Instant::now(), duckdb::process_cpu_seconds());
        let report = runtime.block_on(ingest(&lake, input, options)).unwrap();
        elapsed += started.elapsed();
        if let (Some(before), Some(after)) = (cpu, duckdb::process_cpu_seconds()) {
            cpu_seconds += after - before;
        }
        assert!(report.rejections.is_empty());
        assert_eq!(
            report.rows_landed(),
            (NODES * GPUS_PER_NODE * SCRAPES_PER_HOUR) as u64
        );
    }
    let files = runtime
        .block_on(lake.catalog().active_files(Table::GpuSamples, None, None))
        .unwrap();
    let parquet_bytes: i64 = files.iter().map(|f| f.bytes).sum();
    let shape = match grouping {
        Some(Grouping::Scrape) => "scrape-grouped text",
        Some(Grouping::Family) => "family-grouped text",
        None => "remote-write",
    };
    let rows: i64 = files.iter().map(|f| f.rows).sum();
    let seconds = elapsed.as_secs_f64();
    println!(
        "dcgm_ingest/day ({shape}): {hours} h of {} GPUs at 15 s: {samples} samples ({rows} wide rows, {:.2} GB of input) \
         in {seconds:.1} s = {:.2} M samples/s end to end, {cpu_seconds:.1} s of CPU = {:.2} M samples per CPU-second; {parquet_bytes} bytes of Parquet in {} files = \
         {:.3} bytes per sample ({:.1} bytes of input per sample)",
        NODES * GPUS_PER_NODE,
        text_bytes as f64 / 1e9,
        samples as f64 / seconds / 1e6,
        samples as f64 / cpu_seconds / 1e6,
        files.len(),
        parquet_bytes as f64 / samples as f64,
        text_bytes as f64 / samples as f64,
    );
    if let Some(peer) = &peer {
        println!(
            "dcgm_ingest/day ({shape}): DuckDB {} (threads: cores), the same text → wide zstd Parquet \
             (lines split, pivoted by labels and time, identity labels extracted, sorted): \
             {peer_seconds:.1} s = {:.2} M samples/s, {peer_cpu_seconds:.1} s of CPU = {:.2} M samples \
             per CPU-second; {:.3} bytes per sample; gpuledger / DuckDB: {:.2} of time, {:.2} of CPU",
            peer.version,
            samples as f64 / peer_seconds / 1e6,
            samples as f64 / peer_cpu_seconds / 1e6,
            peer_bytes as f64 / samples as f64,
            seconds / peer_seconds,
            cpu_seconds / peer_cpu_seconds,
        );
    }
    print_bytes_by_column(&runtime, &lake, &files, samples);
}

/// DuckDB's nearest equivalent of landing dcgm text: every sample line split into metric,
/// labels, value and time (by string functions: 4× faster than one `regexp_extract` in
/// DuckDB); one wide row per (labels, time) with a column per metric; the identity labels as
/// columns; sorted by node, GPU and time; written as zstd Parquet. It
/// answers the number of wide rows written.
fn peer_sql(text: &std::path::Path, parquet: &std::path::Path) -> String {
    let metrics: Vec<String> = METRICS
        .iter()
        .map(|(name, ..)| format!("max(value) FILTER (WHERE metric = '{name}') AS \"{name}\""))
        .collect();
    let identity: Vec<String> = [
        ("Hostname", "node"),
        ("UUID", "gpu_uuid"),
        ("gpu", "gpu_index"),
        ("modelName", "model_name"),
        ("namespace", "namespace"),
        ("pod", "pod"),
        ("container", "container"),
    ]
    .iter()
    .map(|(label, column)| {
        format!("regexp_extract(labels, '(?:^|,){label}=\"([^\"]*)\"', 1) AS {column}")
    })
    .collect();
    format!(
        "COPY (WITH cells AS (SELECT line[1:strpos(line, '{{') - 1] AS metric, \
         line[strpos(line, '{{') + 1:c - 1] AS labels, \
         CAST(split_part(line[c + 2:], ' ', 1) AS DOUBLE) AS value, \
         CAST(split_part(line[c + 2:], ' ', 2) AS BIGINT) AS ts \
         FROM (SELECT line, length(line) - strpos(reverse(line), '}}') + 1 AS c \
         FROM read_csv('{}', columns = {{'line': 'VARCHAR'}}, delim = '\\x01', quote = '', \
         escape = '', header = false, auto_detect = false) WHERE NOT starts_with(line, '#'))), \
         wide AS (SELECT labels, ts, {} FROM cells GROUP BY labels, ts) \
         SELECT {}, make_timestamp(ts * 1000) AS ts, * EXCLUDE (labels, ts) FROM wide \
         ORDER BY node, gpu_uuid, ts) TO '{}' (FORMAT parquet, COMPRESSION zstd)",
        text.display(),
        metrics.join(", "),
        identity.join(", "),
        parquet.display(),
    )
}

/// Where the Parquet bytes are: compressed bytes per column over every landed file (from the
/// footers), largest first, per sample and per wide row.
fn print_bytes_by_column(
    runtime: &tokio::runtime::Runtime,
    lake: &Lake,
    files: &[gpuledger_lake::catalog::FileEntry],
    samples: u64,
) {
    use object_store::ObjectStoreExt;
    use parquet::file::reader::FileReader;
    let mut by_column: std::collections::BTreeMap<String, (i64, String)> = Default::default();
    let mut rows = 0i64;
    for file in files {
        let bytes = runtime
            .block_on(async {
                lake.table_reader()
                    .get(&object_store::path::Path::from(file.path.as_str()))
                    .await?
                    .bytes()
                    .await
            })
            .unwrap();
        let reader = parquet::file::serialized_reader::SerializedFileReader::new(bytes).unwrap();
        for row_group in reader.metadata().row_groups() {
            rows += row_group.num_rows();
            for column in row_group.columns() {
                let entry = by_column.entry(column.column_path().string()).or_default();
                entry.0 += column.compressed_size();
                entry.1 = format!("{:?}", column.encodings().collect::<Vec<_>>());
            }
        }
    }
    let mut columns: Vec<_> = by_column.into_iter().collect();
    columns.sort_by_key(|(_, (bytes, _))| -bytes);
    println!("dcgm_ingest/day: compressed bytes by column (per sample, per wide row; encodings):");
    for (name, (bytes, encodings)) in columns {
        println!(
            "  {name:<24} {:>7.3} B/sample {:>7.2} B/row  {encodings}",
            bytes as f64 / samples as f64,
            bytes as f64 / rows as f64,
        );
    }
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    parse_throughput(&mut criterion);
    criterion.final_summary();
    let hours = std::env::var("GPULEDGER_BENCH_HOURS")
        .ok()
        .and_then(|h| h.parse().ok())
        .unwrap_or(24);
    let grouping = match std::env::var("GPULEDGER_BENCH_INPUT").as_deref() {
        Ok("family") => Some(Grouping::Family),
        Ok("remote-write") => None,
        _ => Some(Grouping::Scrape),
    };
    day_end_to_end(hours, grouping);
}
