//! Reads one window's ledger inputs out of the lake with SQL, into the plain values of
//! `gpuledger_ledger::build::LedgerInputs`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use std::sync::Arc;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Field, Int32Type};
use datafusion::prelude::SessionContext;
use gpuledger_lake::tables::GPU_HOUR_SECONDS;
use gpuledger_ledger::allocation::{Allocation, Event, EventKind, Labels, PodGpus};
use gpuledger_ledger::build::NodeKey;
use gpuledger_ledger::time::{MICROS_PER_HOUR, Micros, Span, floor_hour};
use gpuledger_query::columns::{column, floats, int32s, several, strings, text, timestamps, value};
use gpuledger_query::ledger_inputs::{GpuKeys, gpu_rows, nodes_filter, owned, query};
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

/// What the window's telemetry says of each GPU (of the `nodes` given, else of all), whatever
/// hours are rebuilt: which pods dcgm-exporter saw on it, and its UUID (the least, should it
/// report several), so that every row of a GPU names the same UUID however its hours were
/// built; and which GPUs have readings less than `max_sample_gap` before the window or in it
/// (those whose readings count in it), so that a node no one declared is known before its
/// telemetry is read.
pub struct GpuIdentities {
    pub pod_gpus: PodGpus,
    pub uuids: HashMap<(String, String, u32), String>,
    pub gpus: BTreeSet<(String, String, u32)>,
}

pub async fn gpu_identities(
    ctx: &SessionContext,
    window: Span,
    max_sample_gap: Micros,
    nodes: Option<&BTreeSet<NodeKey>>,
) -> Result<GpuIdentities, BuildError> {
    let in_window = |column: &str| {
        format!(
            "CASE WHEN ts >= {} THEN {column} END AS {column}",
            ts_literal(window.start)
        )
    };
    let sql = format!(
        "SELECT DISTINCT cluster, node, gpu_index, {}, {}, {} FROM gpu_samples WHERE {} AND {}",
        in_window("gpu_uuid"),
        in_window("namespace"),
        in_window("pod"),
        // A reading counts in the window when the time it stands for reaches into it.
        gpu_rows(Span::new(window.start - max_sample_gap + 1, window.end)),
        nodes.map_or("true".into(), nodes_filter),
    );
    let mut identities = GpuIdentities {
        pod_gpus: PodGpus::new(),
        uuids: HashMap::new(),
        gpus: BTreeSet::new(),
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
            identities.gpus.insert((cluster.clone(), node.clone(), gpu));
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
/// in GPU-hours that are recomputed (`dirty(cluster, node, hour)`).
pub async fn allocations_unchanged_outside(
    ctx: &SessionContext,
    window: Span,
    allocations: &[Allocation],
    dirty: impl Fn(&str, &str, Micros) -> bool,
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
    let mut changed: Vec<(String, String, Span)> = Vec::new();
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
            let (cluster, node) = (
                owned(&cluster, row).unwrap_or_default(),
                owned(&node, row).unwrap_or_default(),
            );
            let stored = (
                cluster.clone(),
                node.clone(),
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
                changed.push((cluster, node, span));
            }
        }
    }
    changed.extend(new.into_iter().map(|k| (k.0, k.1, Span::new(k.3, k.4))));
    Ok(changed.iter().all(|(cluster, node, span)| {
        let mut hour = floor_hour(span.start);
        while hour < span.end {
            if !dirty(cluster, node, hour) {
                return false;
            }
            hour += MICROS_PER_HOUR;
        }
        true
    }))
}

/// The GPU-seconds of the stored `gpu_hours` rows of a window, whatever their class, per
/// (day, cluster, node): what the balance prices by the rate card.
pub async fn gpu_seconds(
    ctx: &SessionContext,
    window: Span,
) -> Result<BTreeMap<(Micros, String, String), f64>, BuildError> {
    let sql = format!(
        "SELECT date_trunc('day', hour) AS day, cluster, node, sum({GPU_HOUR_SECONDS}) AS seconds
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
