//! Folds a group's `gpu_samples` rows into each GPU's readings, as the per-GPU step needs them.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use arrow::array::{Array, ArrayRef, Float64Array, RecordBatch};
use arrow::buffer::NullBuffer;
use arrow::compute::partition;
use datafusion::common::{DataFusionError, Result as DfResult};
use gpuledger_ledger::build::GpuTelemetry;
use gpuledger_ledger::gpu_hours::{UsageSample, usage_measure};
use gpuledger_ledger::time::Micros;
use itertools::{Either, Itertools};

use super::GpuKey;
use crate::columns::{floats, int32s, several, strings, text, timestamps, value};
use crate::ledger_inputs::GpuKeys;

/// The columns [`SampleFold`] reads: a reading's labels and time, and its measures. The rows
/// come as they lie in the files (sorted by series and time within each): no GROUP BY or ORDER
/// BY over string columns in the engine, which cost more than the ledger itself. Same-series
/// duplicates are merged per GPU as its sorted runs are merged.
pub(super) static SAMPLE_COLUMNS: LazyLock<String> = LazyLock::new(|| {
    ["cluster", "node", "gpu_index", "mig_instance", "gpu_uuid"]
        .into_iter()
        .chain(["namespace", "pod", "container", "ts"])
        .chain(RawReading::MEASURES)
        .join(", ")
});

/// The columns [`XidFold`] reads.
pub(super) const XID_COLUMNS: &str = "cluster, node, gpu_index, ts, xid_last";

fn keys(batch: &RecordBatch) -> DfResult<GpuKeys> {
    GpuKeys::of(batch).map_err(|e| DataFusionError::External(Box::new(e)))
}

/// Per GPU: one usage reading per time for the whole GPU, and one per pod-labelled series (MIG
/// instances, pods sharing a time-sliced GPU). Rows of one series and time are merged first — an
/// input that lists each metric family apart may land a (series, time) as several partial rows —
/// then each reading takes one measure (`usage_measure`): the whole GPU's is the highest of its
/// series at that time (busy when any part of it is busy), never their average.
#[derive(Default)]
pub(super) struct SampleFold {
    gpus: Vec<RawGpu>,
    index: HashMap<GpuKey, usize>,
}

impl SampleFold {
    /// What one row held costs, about (for the task's memory limit).
    pub(super) fn bytes_per_row() -> usize {
        std::mem::size_of::<RawReading>() + std::mem::size_of::<UsageSample>() * 2
    }

    pub(super) fn add(&mut self, batch: &RecordBatch) -> DfResult<()> {
        let gpu_keys = keys(batch)?;
        let [gpu_uuid, namespace, pod, container] = several(
            batch,
            strings,
            ["gpu_uuid", "namespace", "pod", "container"],
        )?;
        let mig = int32s(batch, "mig_instance")?;
        let ts = timestamps(batch, "ts")?;
        let measure_columns = several(batch, floats, RawReading::MEASURES)?;
        let measures = Measures::of(&measure_columns);
        // Rows of one GPU and series come in runs: the GPU and the series are looked up once
        // per run of rows whose labels are equal (Arrow's `partition`, a pass per column), and
        // the run's readings are appended together.
        let labels: [ArrayRef; 8] = [
            Arc::new(gpu_keys.gpu_index.clone()),
            Arc::new(mig.clone()),
            Arc::new(gpu_keys.node.clone()),
            Arc::new(gpu_keys.cluster.clone()),
            Arc::new(gpu_uuid.clone()),
            Arc::new(pod.clone()),
            Arc::new(namespace.clone()),
            Arc::new(container.clone()),
        ];
        // The GPU of the run before, where the next run most likely belongs too.
        let mut last: Option<usize> = None;
        for run in partition(&labels)?.ranges() {
            // A row with a NULL time, or without a node or GPU index, is one the query
            // filtered: a run of none else adds no GPU or series.
            let Some(first) = run.clone().find(|&row| ts.is_valid(row)) else {
                continue;
            };
            let Some((cluster, node, gpu_index)) = gpu_keys.key_ref(first) else {
                continue;
            };
            let gpu = match last {
                Some(g) if self.gpus[g].key_ref() == (cluster, node, gpu_index) => g,
                _ => {
                    let key = (cluster.to_string(), node.to_string(), gpu_index);
                    let gpus = &mut self.gpus;
                    *self.index.entry(key.clone()).or_insert_with(|| {
                        gpus.push(RawGpu::new(key));
                        gpus.len() - 1
                    })
                }
            };
            last = Some(gpu);
            let raw = &mut self.gpus[gpu];
            let series = raw.series_of(
                value(&mig, first),
                text(&gpu_uuid, first),
                text(&namespace, first),
                text(&pod, first),
                text(&container, first),
            );
            let rows = first..run.end;
            if ts.null_count() == 0 {
                // Every row is a reading: an extend of known length, written in place.
                let times = ts.values();
                raw.rows
                    .extend(rows.map(|row| RawReading::read(times[row], series, &measures, row)));
            } else {
                raw.rows.extend(rows.filter_map(|row| {
                    Some(RawReading::read(value(&ts, row)?, series, &measures, row))
                }));
            }
        }
        Ok(())
    }

    pub(super) fn finish(self) -> HashMap<GpuKey, GpuTelemetry> {
        self.gpus
            .into_iter()
            .map(|gpu| (gpu.key.clone(), gpu.into_telemetry()))
            .collect()
    }
}

/// The changes of each GPU's last XID: its first reading and every reading that differs from
/// the one before (readings of one time merged to their highest first).
#[derive(Default)]
pub(super) struct XidFold {
    readings: HashMap<GpuKey, Vec<(Micros, f64)>>,
}

impl XidFold {
    pub(super) fn bytes_per_row() -> usize {
        std::mem::size_of::<(Micros, f64)>()
    }

    pub(super) fn add(&mut self, batch: &RecordBatch) -> DfResult<()> {
        let gpus = keys(batch)?;
        let (ts, xid) = (timestamps(batch, "ts")?, floats(batch, "xid_last")?);
        for row in 0..batch.num_rows() {
            let (Some(key), Some(at), Some(xid)) =
                (gpus.key(row), value(&ts, row), value(&xid, row))
            else {
                continue; // filtered by the query
            };
            self.readings.entry(key).or_default().push((at, xid));
        }
        Ok(())
    }

    pub(super) fn finish(self) -> HashMap<GpuKey, Vec<(Micros, u32)>> {
        self.readings
            .into_iter()
            .map(|(key, mut readings)| {
                readings.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
                let mut changes: Vec<(Micros, u32)> = Vec::new();
                let mut last: Option<i32> = None;
                let mut readings = readings.into_iter().peekable();
                while let Some((at, mut highest)) = readings.next() {
                    while let Some((_, next)) = readings.next_if(|(t, _)| *t == at) {
                        highest = next; // sorted ascending: the last of a time is its highest
                    }
                    // As `CAST(max(xid_last) AS INT)`: a value no INT holds reads as NULL.
                    let Some(xid) = as_int(highest) else {
                        continue;
                    };
                    if last != Some(xid) {
                        changes.push((at, xid.max(0) as u32));
                        last = Some(xid);
                    }
                }
                (key, changes)
            })
            .filter(|(_, changes)| !changes.is_empty())
            .collect()
    }
}

fn as_int(value: f64) -> Option<i32> {
    let whole = value.trunc();
    (whole.is_finite() && whole >= f64::from(i32::MIN) && whole <= f64::from(i32::MAX))
        .then_some(whole as i32)
}

/// A batch's measure columns as [`RawReading::read`] takes them (in the order of
/// [`RawReading::MEASURES`]): a column's values, and whether a row has one decided per column
/// where it can be (a column of no nulls, or of nulls only, as a family the input lacks), per
/// row only for a column of both.
struct Measures<'a> {
    values: [&'a [f64]; 6],
    /// Bit `i` is set when column `i` has no nulls.
    always: u8,
    /// The columns with both values and nulls, and their validity.
    mixed: Vec<(usize, &'a NullBuffer)>,
}

impl<'a> Measures<'a> {
    fn of(columns: &'a [Float64Array; 6]) -> Self {
        let mut measures = Self {
            values: columns.each_ref().map(|column| &column.values()[..]),
            always: 0,
            mixed: Vec::new(),
        };
        for (i, column) in columns.iter().enumerate() {
            match column.nulls() {
                Some(nulls) if nulls.null_count() == column.len() => {}
                Some(nulls) if nulls.null_count() > 0 => measures.mixed.push((i, nulls)),
                _ => measures.always |= 1 << i,
            }
        }
        measures
    }
}

/// A series of one GPU: (mig_instance, gpu_uuid, namespace, pod, container).
type SeriesKey = (
    Option<i32>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// One row of `gpu_samples` as read, before its series' duplicates are merged. A day holds
/// millions, so the measures' presence is one byte rather than a tag per `Option` (48 bytes a
/// row, not 80).
#[derive(Clone, Copy)]
struct RawReading {
    ts: Micros,
    /// Position in [`RawGpu::series`].
    series: u32,
    /// Bit `i` is set when `measures[i]` was read.
    present: u8,
    /// As [`RawReading::MEASURES`] names them.
    measures: [f64; 6],
}

impl RawReading {
    /// The columns of `gpu_samples` a reading holds, in order.
    const MEASURES: [&str; 6] = [
        "sm_active",
        "gr_engine_active",
        "gpu_util",
        "power_w",
        "fb_used_mib",
        "fb_free_mib",
    ];
    const SM_ACTIVE: usize = 0;
    const GR_ENGINE_ACTIVE: usize = 1;
    const GPU_UTIL: usize = 2;
    const POWER_W: usize = 3;
    const FB_USED_MIB: usize = 4;
    const FB_FREE_MIB: usize = 5;

    /// Row `row` of the measure columns.
    fn read(ts: Micros, series: u32, columns: &Measures, row: usize) -> Self {
        let present = columns
            .mixed
            .iter()
            .fold(columns.always, |present, (i, nulls)| {
                present | u8::from(nulls.is_valid(row)) << i
            });
        Self {
            ts,
            series,
            present,
            // A null slot's value is arbitrary: copied, and hidden by its bit.
            measures: columns.values.map(|values| values[row]),
        }
    }

    fn get(&self, i: usize) -> Option<f64> {
        (self.present & (1 << i) != 0).then_some(self.measures[i])
    }

    fn set(&mut self, i: usize, measure: Option<f64>) {
        match measure {
            Some(value) => {
                self.present |= 1 << i;
                self.measures[i] = value;
            }
            None => self.present &= !(1 << i),
        }
    }

    /// `fb_used_mib / (fb_used_mib + fb_free_mib)`; unknown without both, or with no
    /// framebuffer at all.
    fn memory_used_share(&self) -> Option<f64> {
        let used = self.get(Self::FB_USED_MIB)?;
        let total = used + self.get(Self::FB_FREE_MIB)?;
        (total > 0.0).then(|| used / total)
    }

    /// Another row of the same series and time (a sample landed twice, or its families in two
    /// inputs): each measure's highest value, as `max()` over a group.
    fn merge(&mut self, other: &RawReading) {
        for i in 0..self.measures.len() {
            self.set(i, higher(self.get(i), other.get(i)));
        }
    }
}

fn higher(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// The rows of one GPU (cluster, node, index) as read, and the series they belong to.
struct RawGpu {
    key: (String, String, u32),
    series: Vec<SeriesKey>,
    /// The series of the last run, where the next run most likely belongs too.
    last_series: u32,
    rows: Vec<RawReading>,
}

impl RawGpu {
    fn new(key: (String, String, u32)) -> Self {
        Self {
            key,
            series: Vec::new(),
            last_series: 0,
            rows: Vec::new(),
        }
    }

    fn key_ref(&self) -> (&str, &str, u32) {
        (&self.key.0, &self.key.1, self.key.2)
    }

    /// The position of a series in [`Self::series`], added when new.
    fn series_of(
        &mut self,
        mig: Option<i32>,
        uuid: Option<&str>,
        namespace: Option<&str>,
        pod: Option<&str>,
        container: Option<&str>,
    ) -> u32 {
        let same = |s: &SeriesKey| {
            s.0 == mig
                && s.1.as_deref() == uuid
                && s.2.as_deref() == namespace
                && s.3.as_deref() == pod
                && s.4.as_deref() == container
        };
        if self.series.get(self.last_series as usize).is_some_and(same) {
            return self.last_series;
        }
        let position = match self.series.iter().position(same) {
            Some(position) => position,
            None => {
                let owned = |s: Option<&str>| s.map(str::to_string);
                self.series.push((
                    mig,
                    owned(uuid),
                    owned(namespace),
                    owned(pod),
                    owned(container),
                ));
                self.series.len() - 1
            }
        };
        self.last_series = position as u32;
        self.last_series
    }

    /// The GPU's readings, one per time (the highest of its series'), and each pod's; a series'
    /// rows of the same time merged first, as a `GROUP BY` of series and time would.
    fn into_telemetry(self) -> GpuTelemetry {
        let mut telemetry = GpuTelemetry {
            samples: Vec::with_capacity(self.rows.len()),
            ..GpuTelemetry::default()
        };
        // Only a pod's series need their own readings kept (most GPUs have none).
        let of_pod: Vec<bool> = self
            .series
            .iter()
            .map(|(_, _, namespace, pod, _)| namespace.is_some() && pod.is_some())
            .collect();
        let mut of_series: Vec<Vec<UsageSample>> = vec![Vec::new(); self.series.len()];
        // Rows come in runs sorted by (time, series): a file's rows are sorted by series and
        // time, and the day's files arrive interleaved with the last minutes of the day before.
        // The runs are merged as they are read, with no sort and no copy of the rows; rows
        // already in order (one run, as a GPU of one series whose files came in time order)
        // are read straight through.
        let key = |r: &RawReading| (r.ts, r.series);
        let runs: Vec<&[RawReading]> = self.rows.chunk_by(|a, b| key(a) <= key(b)).collect();
        let mut rows = match runs[..] {
            [] | [_] => Either::Left(self.rows.iter()),
            _ => Either::Right(runs.into_iter().kmerge_by(|a, b| key(a) < key(b))),
        }
        .copied()
        .peekable();
        while let Some(mut reading) = rows.next() {
            while let Some(next) =
                rows.next_if(|n| (n.ts, n.series) == (reading.ts, reading.series))
            {
                reading.merge(&next);
            }
            let sample = UsageSample {
                ts: reading.ts,
                sm_active: usage_measure(
                    reading.get(RawReading::SM_ACTIVE),
                    reading.get(RawReading::GR_ENGINE_ACTIVE),
                    reading.get(RawReading::GPU_UTIL),
                ),
                memory_used_share: reading.memory_used_share(),
                power_w: reading.get(RawReading::POWER_W),
            };
            highest_at(&mut telemetry.samples, sample);
            if of_pod[reading.series as usize] {
                of_series[reading.series as usize].push(sample);
            }
        }
        // A pod's readings: those of its series (several when it spans MIG instances or
        // containers), the highest per time.
        for (series, samples) in self.series.iter().zip(of_series) {
            let (_, _, Some(namespace), Some(pod), _) = series else {
                continue;
            };
            let readings = telemetry
                .pod_samples
                .entry((namespace.clone(), pod.clone()))
                .or_default();
            if readings.is_empty() {
                *readings = samples;
                continue;
            }
            let mut all = std::mem::take(readings);
            all.extend(samples);
            all.sort_by_key(|s| s.ts);
            for sample in all {
                highest_at(readings, sample);
            }
        }
        telemetry
    }
}

/// Appends a reading to a time-sorted list, or merges it into the reading of the same time by
/// taking the higher value of each measure.
fn highest_at(samples: &mut Vec<UsageSample>, reading: UsageSample) {
    match samples.last_mut() {
        Some(last) if last.ts == reading.ts => {
            last.sm_active = higher(last.sm_active, reading.sm_active);
            last.memory_used_share = higher(last.memory_used_share, reading.memory_used_share);
            last.power_w = higher(last.power_w, reading.power_w);
        }
        _ => samples.push(reading),
    }
}
