//! Reads one window's ledger inputs out of the lake with SQL, into the plain values of
//! `gpuledger_ledger::build::LedgerInputs`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use std::sync::Arc;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Field, Int32Type};
use datafusion::prelude::SessionContext;
use gpuledger_ledger::allocation::{Allocation, Event, EventKind, Labels, PodGpus};
use gpuledger_ledger::build::GpuTelemetry;
use gpuledger_ledger::gpu_hours::{UsageSample, usage_measure};
use gpuledger_ledger::time::{MICROS_PER_HOUR, Micros, Span, floor_hour};
use gpuledger_query::columns::{column, floats, int32s, several, strings, text, timestamps, value};
use gpuledger_query::ledger_inputs::{GpuKeys, owned, query};
pub use gpuledger_query::ledger_inputs::{billing, stored_gpu_hours, ts_literal, usage};

use crate::error::BuildError;

/// How far back to look for the start of an allocation still running in the window.
pub const EVENT_LOOKBACK: Micros = 31 * 24 * 3_600_000_000;

pub async fn events(ctx: &SessionContext, window: Span) -> Result<Vec<Event>, BuildError> {
    let sql = format!(
        "SELECT ts, event, cluster, node, namespace, workload, pod, gpus, gpu_indices, mig_profile, gpu_fraction, reason,
                team, environment, workload_type, model, cost_center
         FROM scheduler_events WHERE ts >= {} AND ts < {}",
        ts_literal(window.start - EVENT_LOOKBACK),
        ts_literal(window.end)
    );
    let mut events = Vec::new();
    for batch in query(ctx, &sql).await? {
        let ts = timestamps(&batch, "ts")?;
        let [
            event,
            cluster,
            node,
            namespace,
            workload,
            pod,
            mig_profile,
            reason,
        ] = several(
            &batch,
            strings,
            [
                "event",
                "cluster",
                "node",
                "namespace",
                "workload",
                "pod",
                "mig_profile",
                "reason",
            ],
        )?;
        let [team, environment, workload_type, model, cost_center] = several(
            &batch,
            strings,
            [
                "team",
                "environment",
                "workload_type",
                "model",
                "cost_center",
            ],
        )?;
        let (gpus, gpu_fraction) = (floats(&batch, "gpus")?, floats(&batch, "gpu_fraction")?);
        let indices = column(
            &batch,
            "gpu_indices",
            &DataType::List(Arc::new(Field::new_list_field(DataType::Int32, true))),
        )?;
        let indices = indices.as_list::<i32>();
        for row in 0..batch.num_rows() {
            let gpu_indices = if indices.is_valid(row) {
                indices
                    .value(row)
                    .as_primitive::<Int32Type>()
                    .iter()
                    .flatten()
                    .map(|i| i as u32)
                    .collect()
            } else {
                Vec::new()
            };
            let Some(at) = value(&ts, row) else {
                continue; // the table's time column is never null
            };
            events.push(Event {
                ts: at,
                kind: text(&event, row).and_then(EventKind::parse),
                cluster: owned(&cluster, row).unwrap_or_default(),
                node: owned(&node, row),
                namespace: owned(&namespace, row),
                workload: owned(&workload, row),
                pod: owned(&pod, row),
                gpus: value(&gpus, row),
                gpu_indices,
                mig_profile: owned(&mig_profile, row),
                gpu_fraction: value(&gpu_fraction, row),
                reason: owned(&reason, row),
                labels: Labels {
                    team: owned(&team, row),
                    environment: owned(&environment, row),
                    workload_type: owned(&workload_type, row),
                    model: owned(&model, row),
                    cost_center: owned(&cost_center, row),
                },
            });
        }
    }
    Ok(events)
}

/// Per GPU: one usage reading per time for the whole GPU, and one per pod-labelled series (MIG
/// instances, pods sharing a time-sliced GPU). Rows of one series and time are merged first — an
/// input that lists each metric family apart may land a (series, time) as several partial rows —
/// then each reading takes one measure (`usage_measure`): the whole GPU's is the highest of its
/// series at that time (busy when any part of it is busy), never their average.
pub async fn telemetry(
    ctx: &SessionContext,
    span: Span,
    window: Span,
    max_sample_gap: Micros,
) -> Result<HashMap<(String, String, u32), GpuTelemetry>, BuildError> {
    // The rows as they lie in the files (sorted by series and time within each): no GROUP BY or
    // ORDER BY over string columns in the engine, which cost more than the ledger itself. The
    // same-series duplicates a GROUP BY merged are merged below, per GPU, after a sort on time.
    let sql = format!(
        "SELECT cluster, node, gpu_index, mig_instance, gpu_uuid, namespace, pod, container, ts,
                sm_active, gr_engine_active, gpu_util, power_w
         FROM gpu_samples WHERE {}",
        gpu_rows(Span::new(span.start - max_sample_gap, span.end))
    );
    let mut gpus: Vec<RawGpu> = Vec::new();
    let mut index: HashMap<(String, String, u32), usize> = HashMap::new();
    for batch in query(ctx, &sql).await? {
        let gpu_keys = GpuKeys::of(&batch)?;
        let [gpu_uuid, namespace, pod, container] = several(
            &batch,
            strings,
            ["gpu_uuid", "namespace", "pod", "container"],
        )?;
        let mig = int32s(&batch, "mig_instance")?;
        let ts = timestamps(&batch, "ts")?;
        let [sm_active, gr_engine_active, gpu_util, power_w] = several(
            &batch,
            floats,
            ["sm_active", "gr_engine_active", "gpu_util", "power_w"],
        )?;
        // Rows of one GPU and series come in runs: the key is looked up once per run.
        let mut current: Option<usize> = None;
        for row in 0..batch.num_rows() {
            let (Some((cluster, node, gpu_index)), Some(at)) =
                (gpu_keys.key_ref(row), value(&ts, row))
            else {
                continue; // filtered by the query
            };
            let gpu = match current {
                Some(g) if gpus[g].key_ref() == (cluster, node, gpu_index) => g,
                _ => {
                    let key = (cluster.to_string(), node.to_string(), gpu_index);
                    let g = *index.entry(key.clone()).or_insert_with(|| {
                        gpus.push(RawGpu::new(key));
                        gpus.len() - 1
                    });
                    current = Some(g);
                    g
                }
            };
            let series = gpus[gpu].series_of(
                value(&mig, row),
                text(&gpu_uuid, row),
                text(&namespace, row),
                text(&pod, row),
                text(&container, row),
            );
            gpus[gpu].rows.push(RawReading {
                ts: at,
                series,
                sm_active: value(&sm_active, row),
                gr_engine_active: value(&gr_engine_active, row),
                gpu_util: value(&gpu_util, row),
                power_w: value(&power_w, row),
            });
        }
    }
    let mut telemetry: HashMap<(String, String, u32), GpuTelemetry> = HashMap::new();
    for gpu in gpus {
        telemetry.insert(gpu.key.clone(), gpu.into_telemetry());
    }
    for (key, readings) in xid_readings(ctx, window, max_sample_gap).await? {
        telemetry.entry(key).or_default().xid = readings;
    }
    Ok(telemetry)
}

/// A series of one GPU: (mig_instance, gpu_uuid, namespace, pod, container).
type SeriesKey = (
    Option<i32>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// One row of `gpu_samples` as read, before its series' duplicates are merged.
#[derive(Clone, Copy)]
struct RawReading {
    ts: Micros,
    /// Position in [`RawGpu::series`].
    series: u32,
    sm_active: Option<f64>,
    gr_engine_active: Option<f64>,
    gpu_util: Option<f64>,
    power_w: Option<f64>,
}

impl RawReading {
    /// Another row of the same series and time (a sample landed twice, or its families in two
    /// inputs): each measure's highest value, as `max()` over a group.
    fn merge(&mut self, other: &RawReading) {
        self.sm_active = higher(self.sm_active, other.sm_active);
        self.gr_engine_active = higher(self.gr_engine_active, other.gr_engine_active);
        self.gpu_util = higher(self.gpu_util, other.gpu_util);
        self.power_w = higher(self.power_w, other.power_w);
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
    /// The series of the last row, where the next row most likely belongs too.
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
    fn into_telemetry(mut self) -> GpuTelemetry {
        self.rows.sort_unstable_by_key(|r| (r.ts, r.series));
        let mut telemetry = GpuTelemetry::default();
        let mut of_series: Vec<Vec<UsageSample>> = vec![Vec::new(); self.series.len()];
        let mut rows = self.rows.into_iter().peekable();
        while let Some(mut reading) = rows.next() {
            while let Some(next) =
                rows.next_if(|n| (n.ts, n.series) == (reading.ts, reading.series))
            {
                reading.merge(&next);
            }
            let sample = UsageSample {
                ts: reading.ts,
                sm_active: usage_measure(
                    reading.sm_active,
                    reading.gr_engine_active,
                    reading.gpu_util,
                ),
                power_w: reading.power_w,
            };
            highest_at(&mut telemetry.samples, sample);
            of_series[reading.series as usize].push(sample);
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
            last.power_w = higher(last.power_w, reading.power_w);
        }
        _ => samples.push(reading),
    }
}

/// The changes of each GPU's last XID over the whole window (whatever hours are rebuilt, so a
/// fault that began before them is still seen): its first reading and every reading that differs
/// from the one before.
async fn xid_readings(
    ctx: &SessionContext,
    window: Span,
    max_sample_gap: Micros,
) -> Result<HashMap<(String, String, u32), Vec<(Micros, u32)>>, BuildError> {
    let sql = format!(
        "SELECT cluster, node, gpu_index, ts, xid FROM (
             SELECT cluster, node, gpu_index, ts, xid,
                    lag(xid) OVER (PARTITION BY cluster, node, gpu_index ORDER BY ts) AS previous
             FROM (SELECT cluster, node, gpu_index, ts, CAST(max(xid_last) AS INT) AS xid
                   FROM gpu_samples WHERE {} AND xid_last IS NOT NULL
                   GROUP BY cluster, node, gpu_index, ts))
         WHERE previous IS NULL OR previous <> xid
         ORDER BY cluster, node, gpu_index, ts",
        gpu_rows(Span::new(window.start - max_sample_gap, window.end))
    );
    let mut readings: HashMap<(String, String, u32), Vec<(Micros, u32)>> = HashMap::new();
    for batch in query(ctx, &sql).await? {
        let gpus = GpuKeys::of(&batch)?;
        let (ts, xid) = (timestamps(&batch, "ts")?, int32s(&batch, "xid")?);
        for row in 0..batch.num_rows() {
            let (Some(key), Some(at), Some(xid)) =
                (gpus.key(row), value(&ts, row), value(&xid, row))
            else {
                continue; // filtered by the query
            };
            readings
                .entry(key)
                .or_default()
                .push((at, xid.max(0) as u32));
        }
    }
    Ok(readings)
}

/// What the window's telemetry says of each GPU, whatever hours are rebuilt: which pods
/// dcgm-exporter saw on it, and its UUID (the least, should it report several), so that every
/// row of a GPU names the same UUID however its hours were built.
pub struct GpuIdentities {
    pub pod_gpus: PodGpus,
    pub uuids: HashMap<(String, String, u32), String>,
}

pub async fn gpu_identities(
    ctx: &SessionContext,
    window: Span,
) -> Result<GpuIdentities, BuildError> {
    let sql = format!(
        "SELECT DISTINCT cluster, node, gpu_index, gpu_uuid, namespace, pod FROM gpu_samples
         WHERE {} AND (gpu_uuid IS NOT NULL OR (namespace IS NOT NULL AND pod IS NOT NULL))",
        gpu_rows(window)
    );
    let mut identities = GpuIdentities {
        pod_gpus: PodGpus::new(),
        uuids: HashMap::new(),
    };
    for batch in query(ctx, &sql).await? {
        let gpus = GpuKeys::of(&batch)?;
        let (uuids, namespace, pod) = (
            strings(&batch, "gpu_uuid")?,
            strings(&batch, "namespace")?,
            strings(&batch, "pod")?,
        );
        for row in 0..batch.num_rows() {
            let Some((cluster, node, gpu)) = gpus.key(row) else {
                continue; // filtered by the query
            };
            if let Some(uuid) = owned(&uuids, row) {
                identities
                    .uuids
                    .entry((cluster.clone(), node.clone(), gpu))
                    .and_modify(|known| {
                        if uuid < *known {
                            known.clone_from(&uuid);
                        }
                    })
                    .or_insert(uuid);
            }
            if let (Some(namespace), Some(pod)) = (owned(&namespace, row), owned(&pod, row)) {
                let gpus = identities
                    .pod_gpus
                    .entry((cluster, node, namespace, pod))
                    .or_default();
                if !gpus.contains(&gpu) {
                    gpus.push(gpu);
                    gpus.sort_unstable();
                }
            }
        }
    }
    Ok(identities)
}

/// Whether the day's stored allocations and `allocations` (both clipped to `window`) differ only
/// in hours that `dirty` recomputes.
pub async fn allocations_unchanged_outside(
    ctx: &SessionContext,
    window: Span,
    allocations: &[Allocation],
    dirty: &[Span],
) -> Result<bool, BuildError> {
    type Key = (
        String,
        String,
        u32,
        Micros,
        Micros,
        [Option<String>; 4],
        u64,
    );
    let key = |a: &Allocation, span: Span| -> Key {
        (
            a.cluster.clone(),
            a.node.clone(),
            a.gpu_index,
            span.start,
            span.end,
            [
                a.namespace.clone(),
                a.workload.clone(),
                a.pod.clone(),
                a.labels.team.clone(),
            ],
            a.share.to_bits(),
        )
    };
    let mut new: BTreeSet<Key> = allocations
        .iter()
        .map(|a| (a, a.span.intersect(&window)))
        .filter(|(_, span)| !span.is_empty())
        .map(|(a, span)| key(a, span))
        .collect();
    let sql = format!(
        "SELECT cluster, node, gpu_index, start_time, end_time, namespace, workload, pod, team_label, share
         FROM allocations WHERE start_time >= {} AND start_time < {}",
        ts_literal(window.start),
        ts_literal(window.end)
    );
    let mut changed: Vec<Span> = Vec::new();
    for batch in query(ctx, &sql).await? {
        let (start, end) = (
            timestamps(&batch, "start_time")?,
            timestamps(&batch, "end_time")?,
        );
        let [cluster, node, namespace, workload, pod, team] = several(
            &batch,
            strings,
            [
                "cluster",
                "node",
                "namespace",
                "workload",
                "pod",
                "team_label",
            ],
        )?;
        let (gpu_index, share) = (int32s(&batch, "gpu_index")?, floats(&batch, "share")?);
        for row in 0..batch.num_rows() {
            let (Some(start), Some(end), Some(gpu)) =
                (value(&start, row), value(&end, row), value(&gpu_index, row))
            else {
                continue; // the table's required columns are never null
            };
            let span = Span::new(start, end);
            let stored = (
                owned(&cluster, row).unwrap_or_default(),
                owned(&node, row).unwrap_or_default(),
                gpu as u32,
                span.start,
                span.end,
                [
                    owned(&namespace, row),
                    owned(&workload, row),
                    owned(&pod, row),
                    owned(&team, row),
                ],
                value(&share, row).unwrap_or(0.0).to_bits(),
            );
            if !new.remove(&stored) {
                changed.push(span);
            }
        }
    }
    changed.extend(new.iter().map(|k| Span::new(k.3, k.4)));
    let covered = |t: Micros| dirty.iter().any(|d| d.contains(t));
    Ok(changed.iter().all(|span| {
        let mut hour = floor_hour(span.start);
        while hour < span.end {
            if !covered(hour) {
                return false;
            }
            hour += MICROS_PER_HOUR;
        }
        true
    }))
}

/// Telemetry rows of identified GPUs in a span.
fn gpu_rows(span: Span) -> String {
    format!(
        "ts >= {} AND ts < {} AND node IS NOT NULL AND gpu_index IS NOT NULL",
        ts_literal(span.start),
        ts_literal(span.end)
    )
}

/// The GPU-seconds of the stored `gpu_hours` rows of a window, whatever their class, per
/// (day, cluster, node): what the balance prices by the rate card.
pub async fn gpu_seconds(
    ctx: &SessionContext,
    window: Span,
) -> Result<BTreeMap<(Micros, String, String), f64>, BuildError> {
    let sql = format!(
        "SELECT date_trunc('day', hour) AS day, cluster, node,
                sum(busy_seconds + allocated_idle_seconds + reserved_seconds + unexplained_seconds
                    + fault_seconds) AS seconds
         FROM gpu_hours WHERE hour >= {} AND hour < {} GROUP BY 1, 2, 3",
        ts_literal(window.start),
        ts_literal(window.end)
    );
    let mut seconds = BTreeMap::new();
    for batch in query(ctx, &sql).await? {
        let days = timestamps(&batch, "day")?;
        let (cluster, node) = (strings(&batch, "cluster")?, strings(&batch, "node")?);
        let sums = floats(&batch, "seconds")?;
        for row in 0..batch.num_rows() {
            let Some(day) = value(&days, row) else {
                continue; // the hour is never null
            };
            seconds.insert(
                (
                    day,
                    owned(&cluster, row).unwrap_or_default(),
                    owned(&node, row).unwrap_or_default(),
                ),
                value(&sums, row).unwrap_or(0.0),
            );
        }
    }
    Ok(seconds)
}
