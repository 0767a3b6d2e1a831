//! The plan's telemetry as dcgm-exporter prints it: Prometheus text, one metric family at a time
//! (`# HELP`, `# TYPE`, then one line per GPU), with the labels of its default configuration in
//! Kubernetes mode, and a millisecond timestamp per sample as a scrape recorder keeps them.
//!
//! The families are the default counters the ledger reads (`DCGM_FI_PROF_GR_ENGINE_ACTIVE` for SM
//! activity, since `DCGM_FI_PROF_SM_ACTIVE` is off by default; power for energy) and the device
//! state beside them (clock, temperature, energy counter, utilization, framebuffer, XID). A MIG
//! GPU prints what dcgm-exporter prints for one: device fields on the GPU's series, profiling
//! fields per GPU instance (`GPU_I_PROFILE`, `GPU_I_ID`), and no `DCGM_FI_DEV_GPU_UTIL`.
//!
//! Text is made one scrape at a time ([`Chunks`]), from label text prepared once per series.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::chunks::{Chunks, push_fixed6, push_int};
use crate::noise::{draw, unit};
use crate::scenario::{Activity, GpuModel, MIG_LAYOUT, MINUTE, Run, Scenario, daily_load};

/// The driver every node runs (the `DCGM_FI_DRIVER_VERSION` label).
const DRIVER_VERSION: &str = "550.90.07";
/// PCI bus of each slot of an 8-GPU HGX board.
const PCI_BUSES: [&str; 8] = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"];
const FB_RESERVED_MIB: u32 = 511;
const IDLE_CLOCK_MHZ: u32 = 345;
/// The XID dcgm-exporter reports before the faulty node drops off ("GPU has fallen off the bus").
const FAULT_XID: u32 = 79;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    SmClock,
    GpuTemp,
    Power,
    Energy,
    GpuUtil,
    Xid,
    FbFree,
    FbUsed,
    GrEngineActive,
    TensorActive,
    DramActive,
}

/// Which series a family is printed for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Physical GPUs, MIG or not.
    Device,
    /// Physical GPUs without MIG.
    WholeGpu,
    /// Whole GPUs and MIG instances (profiling counters).
    Profiling,
    Every,
}

/// (name, type, help, field, scope), in dcgm-exporter's `default-counters.csv` order.
const FAMILIES: [(&str, &str, &str, Field, Scope); 11] = [
    (
        "DCGM_FI_DEV_SM_CLOCK",
        "gauge",
        "SM clock frequency (in MHz).",
        Field::SmClock,
        Scope::Device,
    ),
    (
        "DCGM_FI_DEV_GPU_TEMP",
        "gauge",
        "GPU temperature (in C).",
        Field::GpuTemp,
        Scope::Device,
    ),
    (
        "DCGM_FI_DEV_POWER_USAGE",
        "gauge",
        "Power draw (in W).",
        Field::Power,
        Scope::Device,
    ),
    (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "counter",
        "Total energy consumption since boot (in mJ).",
        Field::Energy,
        Scope::Device,
    ),
    (
        "DCGM_FI_DEV_GPU_UTIL",
        "gauge",
        "GPU utilization (in %).",
        Field::GpuUtil,
        Scope::WholeGpu,
    ),
    (
        "DCGM_FI_DEV_XID_ERRORS",
        "gauge",
        "Value of the last XID error encountered.",
        Field::Xid,
        Scope::Every,
    ),
    (
        "DCGM_FI_DEV_FB_FREE",
        "gauge",
        "Framebuffer memory free (in MiB).",
        Field::FbFree,
        Scope::Device,
    ),
    (
        "DCGM_FI_DEV_FB_USED",
        "gauge",
        "Framebuffer memory used (in MiB).",
        Field::FbUsed,
        Scope::Device,
    ),
    (
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "gauge",
        "Ratio of time the graphics engine is active.",
        Field::GrEngineActive,
        Scope::Profiling,
    ),
    (
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "gauge",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
        Field::TensorActive,
        Scope::Profiling,
    ),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
        Field::DramActive,
        Scope::Profiling,
    ),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SeriesKind {
    Whole,
    MigParent,
    /// Index into `MIG_LAYOUT`.
    MigInstance(usize),
}

impl SeriesKind {
    fn prints(self, scope: Scope) -> bool {
        matches!(
            (self, scope),
            (_, Scope::Every)
                | (SeriesKind::Whole, _)
                | (SeriesKind::MigParent, Scope::Device)
                | (SeriesKind::MigInstance(_), Scope::Profiling)
        )
    }
}

/// What a run does to its series, copied out of the plan.
#[derive(Debug, Clone)]
struct Work {
    activity: Activity,
    /// SM activity at peak traffic, for services.
    peak_sm: f64,
    start: i64,
    checkpoints: Vec<i64>,
    /// `,container="…",namespace="…",pod="…"`.
    pod_labels: Vec<u8>,
}

/// One labelled series: a whole GPU, a MIG GPU's device series, or one of its instances.
struct Series {
    gpu: usize,
    kind: SeriesKind,
    /// The label text without the pod labels and without the braces.
    labels: Vec<u8>,
    /// (start, end, index into `works`), by start, not overlapping.
    segments: Vec<(i64, i64, usize)>,
    cursor: usize,
}

/// A physical GPU: its node's state and its energy counter.
struct Gpu {
    model: &'static GpuModel,
    /// (down, up) spans of its node.
    down: Vec<(i64, i64)>,
    energy_mj: f64,
}

/// One series' values at one scrape.
#[derive(Debug, Clone, Copy, Default)]
struct Reading {
    sm: f64,
    fb_used_mib: f64,
    work: Option<usize>,
}

/// A month of scrapes, generated as they are read.
pub struct DcgmScrapes {
    start_ms: i64,
    interval_s: i64,
    scrapes: u64,
    next: u64,
    gpus: Vec<Gpu>,
    series: Vec<Series>,
    works: Vec<Work>,
    readings: Vec<Reading>,
    /// Scrapes generated so far, for a progress bar.
    progress: Option<Arc<AtomicU64>>,
}

impl DcgmScrapes {
    pub fn new(scenario: &Scenario) -> Self {
        let spec = &scenario.spec;
        let mut gpus = Vec::new();
        let mut series = Vec::new();
        let mut first_series = Vec::new();
        for (n, node) in scenario.nodes.iter().enumerate() {
            let down: Vec<(i64, i64)> = scenario
                .faults
                .iter()
                .filter(|f| f.node == n)
                .map(|f| (f.down, f.up))
                .collect();
            for index in 0..node.gpus {
                let gpu = gpus.len();
                gpus.push(Gpu {
                    model: node.model(),
                    down: down.clone(),
                    energy_mj: draw(spec.seed, gpu as u64, 0xe, 1e9, 9e10).floor(),
                });
                first_series.push(series.len());
                let base = |mig: Option<usize>| {
                    let mut text = format!(
                        "gpu=\"{index}\",UUID=\"{}\",pci_bus_id=\"00000000:{}:00.0\",device=\"nvidia{index}\",modelName=\"{}\"",
                        node.gpu_uuids[index as usize],
                        PCI_BUSES[index as usize % PCI_BUSES.len()],
                        node.model().model_name,
                    );
                    if let Some(i) = mig {
                        let (profile, instance, _) = MIG_LAYOUT[i];
                        text.push_str(&format!(
                            ",GPU_I_PROFILE=\"{profile}\",GPU_I_ID=\"{instance}\""
                        ));
                    }
                    text.push_str(&format!(
                        ",Hostname=\"{}\",DCGM_FI_DRIVER_VERSION=\"{DRIVER_VERSION}\"",
                        node.name
                    ));
                    text.into_bytes()
                };
                let series_of = |kind, labels| Series {
                    gpu,
                    kind,
                    labels,
                    segments: Vec::new(),
                    cursor: 0,
                };
                if node.is_mig() {
                    series.push(series_of(SeriesKind::MigParent, base(None)));
                    for i in 0..MIG_LAYOUT.len() {
                        series.push(series_of(SeriesKind::MigInstance(i), base(Some(i))));
                    }
                } else {
                    series.push(series_of(SeriesKind::Whole, base(None)));
                }
            }
        }
        let first_gpu: Vec<usize> = scenario
            .nodes
            .iter()
            .scan(0, |next, node| {
                let first = *next;
                *next += node.gpus as usize;
                Some(first)
            })
            .collect();
        let window = scenario.window_seconds();
        let mut works = Vec::new();
        for run in &scenario.runs {
            let work = works.len();
            works.push(work_of(scenario, run));
            for &index in &run.gpus {
                let gpu = first_gpu[run.node] + index as usize;
                // A MIG instance's series follow the GPU's device series, in layout order.
                let s = first_series[gpu] + run.mig.map_or(0, |i| i + 1);
                series[s]
                    .segments
                    .push((run.start, run.end.min(window), work));
            }
        }
        for s in &mut series {
            s.segments.sort_unstable();
        }
        DcgmScrapes {
            start_ms: spec.start_time().timestamp_millis(),
            interval_s: spec.scrape_interval_s as i64,
            scrapes: spec.scrapes(),
            next: 0,
            readings: vec![Reading::default(); series.len()],
            gpus,
            series,
            works,
            progress: None,
        }
    }

    /// Counts generated scrapes into `progress`.
    pub fn with_progress(mut self, progress: Arc<AtomicU64>) -> Self {
        self.progress = Some(progress);
        self
    }

    /// Series (lines per metric family that prints for every series) in the cluster.
    pub fn series_count(&self) -> usize {
        self.series.len()
    }

    /// Fills `self.readings` for time `t`: SM activity and memory of every series.
    fn read(&mut self, t: i64, scrape: u64) {
        for (i, s) in self.series.iter_mut().enumerate() {
            while s.cursor < s.segments.len() && s.segments[s.cursor].1 <= t {
                s.cursor += 1;
            }
            let work = s
                .segments
                .get(s.cursor)
                .filter(|(start, _, _)| *start <= t)
                .map(|(_, _, w)| *w);
            let model = self.gpus[s.gpu].model;
            let (sm, fb_share) = match work {
                Some(w) => self.works[w].sm_and_memory(t, i as u64, scrape, w as u64),
                None => (0.0, 0.0),
            };
            let slices = match s.kind {
                SeriesKind::MigInstance(k) => MIG_LAYOUT[k].2 as f64 / 7.0,
                _ => 1.0,
            };
            self.readings[i] = Reading {
                sm,
                fb_used_mib: (fb_share * slices * model.fb_total_mib as f64).floor(),
                work,
            };
        }
        // A MIG GPU's device series: its instances' activity and memory, weighted by their slices.
        for i in 0..self.series.len() {
            if self.series[i].kind == SeriesKind::MigParent {
                let (mut sm, mut fb) = (0.0, 0.0);
                for (k, (_, _, slices)) in MIG_LAYOUT.iter().enumerate() {
                    let r = self.readings[i + 1 + k];
                    sm += r.sm * *slices as f64 / 7.0;
                    fb += r.fb_used_mib;
                }
                self.readings[i] = Reading {
                    sm,
                    fb_used_mib: fb,
                    work: None,
                };
            }
        }
    }

    fn write_scrape(&mut self, t: i64, scrape: u64, buf: &mut Vec<u8>) {
        self.read(t, scrape);
        let up: Vec<bool> = self
            .gpus
            .iter()
            .map(|g| !g.down.iter().any(|(down, up)| *down <= t && t < *up))
            .collect();
        let xid: Vec<u32> = self
            .gpus
            .iter()
            .map(|g| {
                let failing = g
                    .down
                    .iter()
                    .any(|(down, _)| *down - 10 * MINUTE <= t && t < *down);
                if failing { FAULT_XID } else { 0 }
            })
            .collect();
        let mut power = vec![0.0; self.gpus.len()];
        for (s, r) in self.series.iter().zip(&self.readings) {
            if up[s.gpu] && !matches!(s.kind, SeriesKind::MigInstance(_)) {
                let model = self.gpus[s.gpu].model;
                let held = if r.fb_used_mib > 0.0 { 18.0 } else { 0.0 };
                power[s.gpu] = model.idle_w
                    + held
                    + (model.max_w - model.idle_w)
                        * r.sm.powf(0.9)
                        * draw(s.gpu as u64, scrape, 0x9, 0.93, 1.04);
            }
        }
        let mut timestamp = Vec::with_capacity(16);
        timestamp.push(b' ');
        push_int(&mut timestamp, self.start_ms + t * 1000);
        timestamp.push(b'\n');
        for (name, kind, help, field, scope) in FAMILIES {
            buf.extend_from_slice(b"# HELP ");
            buf.extend_from_slice(name.as_bytes());
            buf.push(b' ');
            buf.extend_from_slice(help.as_bytes());
            buf.extend_from_slice(b"\n# TYPE ");
            buf.extend_from_slice(name.as_bytes());
            buf.push(b' ');
            buf.extend_from_slice(kind.as_bytes());
            buf.push(b'\n');
            for (i, s) in self.series.iter().enumerate() {
                if !up[s.gpu] || !s.kind.prints(scope) {
                    continue;
                }
                let r = self.readings[i];
                let gpu = &self.gpus[s.gpu];
                buf.extend_from_slice(name.as_bytes());
                buf.push(b'{');
                buf.extend_from_slice(&s.labels);
                if let Some(w) = r.work {
                    buf.extend_from_slice(&self.works[w].pod_labels);
                }
                buf.extend_from_slice(b"} ");
                let noise = |c: u64, low, high| draw(i as u64, scrape, c, low, high);
                match field {
                    Field::SmClock => push_int(
                        buf,
                        if r.sm > 0.05 {
                            gpu.model.busy_clock_mhz
                        } else {
                            IDLE_CLOCK_MHZ
                        },
                    ),
                    Field::GpuTemp => push_int(
                        buf,
                        (31.0 + 46.0 * power[s.gpu] / gpu.model.max_w + noise(1, 0.0, 3.0)) as u32,
                    ),
                    Field::Power => push_fixed6(buf, (power[s.gpu] * 1000.0).round() / 1000.0),
                    Field::Energy => push_int(buf, gpu.energy_mj as u64),
                    Field::GpuUtil => push_int(
                        buf,
                        ((r.sm * 112.0 + noise(2, 0.0, 4.0)).min(100.0) as u32)
                            * u32::from(r.sm > 0.0),
                    ),
                    Field::Xid => push_int(buf, xid[s.gpu]),
                    Field::FbFree => push_int(
                        buf,
                        (gpu.model.fb_total_mib - FB_RESERVED_MIB) as u64 - r.fb_used_mib as u64,
                    ),
                    Field::FbUsed => push_int(buf, r.fb_used_mib as u64),
                    Field::GrEngineActive => push_fixed6(buf, r.sm),
                    Field::TensorActive => push_fixed6(buf, r.sm * noise(3, 0.35, 0.7)),
                    Field::DramActive => push_fixed6(buf, r.sm * noise(4, 0.45, 0.8)),
                }
                buf.extend_from_slice(&timestamp);
            }
        }
        for (gpu, p) in self.gpus.iter_mut().zip(power) {
            gpu.energy_mj += p * self.interval_s as f64 * 1000.0;
        }
    }
}

impl Chunks for DcgmScrapes {
    fn next_chunk(&mut self, buf: &mut Vec<u8>) -> bool {
        if self.next == self.scrapes {
            return false;
        }
        let scrape = self.next;
        self.write_scrape(scrape as i64 * self.interval_s, scrape, buf);
        self.next += 1;
        if let Some(progress) = &self.progress {
            progress.fetch_add(1, Ordering::Relaxed);
        }
        true
    }
}

fn work_of(scenario: &Scenario, run: &Run) -> Work {
    Work {
        activity: run.activity,
        peak_sm: match run.activity {
            Activity::Serving { service } => scenario.services[service].peak_sm,
            _ => 0.0,
        },
        start: run.start,
        checkpoints: run.checkpoints.clone(),
        pod_labels: format!(
            ",container=\"{}\",namespace=\"{}\",pod=\"{}\"",
            run.container, run.namespace, run.pod
        )
        .into_bytes(),
    }
}

impl Work {
    /// SM activity and the share of the framebuffer in use at `t` (noise keyed by series, scrape
    /// and work).
    fn sm_and_memory(&self, t: i64, series: u64, scrape: u64, work: u64) -> (f64, f64) {
        let noise = |low, high| draw(series, scrape, 0x5, low, high);
        match self.activity {
            Activity::Training { sm } => {
                let since_checkpoint = self
                    .checkpoints
                    .iter()
                    .rev()
                    .find(|c| **c <= t)
                    .map(|c| t - c);
                let stalled =
                    t - self.start < 4 * MINUTE || since_checkpoint.is_some_and(|s| s < 6 * MINUTE);
                let sm = if stalled {
                    0.09
                } else {
                    sm + noise(-0.06, 0.06)
                };
                (sm.clamp(0.0, 1.0), 0.86)
            }
            Activity::Serving { .. } => {
                let load = daily_load(t);
                ((self.peak_sm * load * noise(0.85, 1.12)).min(1.0), 0.9)
            }
            Activity::Notebook => {
                // Ten-minute bursts now and then; otherwise a kernel left open.
                let burst = unit(work ^ ((t / (10 * MINUTE)) as u64).wrapping_mul(0x9e37)) < 0.1;
                (
                    if burst {
                        noise(0.3, 0.6)
                    } else {
                        noise(0.0, 0.02)
                    },
                    0.22,
                )
            }
            Activity::Batch { sm } => ((sm + noise(-0.08, 0.08)).clamp(0.0, 1.0), 0.6),
            Activity::Stuck => (0.0, 0.7),
        }
    }
}

#[cfg(test)]
mod tests;
