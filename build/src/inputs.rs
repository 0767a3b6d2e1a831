//! Reads one window's ledger inputs out of the lake with SQL, into the plain values of
//! `gpuledger_ledger::build::LedgerInputs`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::compute::partition;
use arrow::datatypes::{DataType, Field, Int32Type};
use datafusion::error::DataFusionError;
use datafusion::prelude::SessionContext;
use futures::TryStreamExt;
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
    // Every row of the span is read rather than grouped by the engine: the files hold each
    // series' rows together, so a pass per label column over a batch finds its runs of equal
    // labels (Arrow's `partition`), and each run is looked at once. A `SELECT DISTINCT` of the
    // six columns hashed and compared every row's strings (8 % of a week's build).
    let sql = format!(
        "SELECT cluster, node, gpu_index, gpu_uuid, namespace, pod, ts FROM gpu_samples WHERE {} AND {}",
        // A reading counts in the window when the time it stands for reaches into it.
        gpu_rows(Span::new(window.start - max_sample_gap + 1, window.end)),
        nodes.map_or("true".into(), nodes_filter),
    );
    let mut identities = GpuIdentities {
        pod_gpus: PodGpus::new(),
        uuids: HashMap::new(),
        gpus: BTreeSet::new(),
    };
    let mut batches = ctx.sql(&sql).await?.execute_stream().await?;
    while let Some(batch) = batches.try_next().await? {
        let gpus = GpuKeys::of(&batch)?;
        let [uuids, namespace, pod] = several(&batch, strings, ["gpu_uuid", "namespace", "pod"])?;
        let ts = timestamps(&batch, "ts")?;
        let labels: [ArrayRef; 6] = [
            Arc::new(gpus.gpu_index.clone()),
            Arc::new(gpus.node.clone()),
            Arc::new(gpus.cluster.clone()),
            Arc::new(uuids.clone()),
            Arc::new(pod.clone()),
            Arc::new(namespace.clone()),
        ];
        let runs = partition(&labels).map_err(DataFusionError::from)?;
        for run in runs.ranges() {
            let row = run.start;
            let Some((cluster, node, gpu)) = gpus.key(row) else {
                continue; // filtered by the query
            };
            identities.gpus.insert((cluster.clone(), node.clone(), gpu));
            // A reading before the window (standing for its first moments) says which GPUs
            // count, not what they are.
            if !run
                .clone()
                .any(|r| value(&ts, r).is_some_and(|t| t >= window.start))
            {
                continue;
            }
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

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use gpuledger_ingest::pipeline::{IngestOptions, Input, Source, ingest};
    use gpuledger_ingest::record::ParseContext;
    use gpuledger_lake::{Lake, LakeConfig};
    use gpuledger_ledger::time::{MICROS_PER_DAY, MICROS_PER_SECOND};
    use gpuledger_query::session::new_session;

    use super::*;

    /// 2026-11-02T00:00:00Z in milliseconds.
    const DAY_MS: i64 = 1_793_577_600_000;

    /// A dcgm-exporter line of SM activity `seconds` after the day's start, labelled `labels`.
    fn reading(labels: &str, seconds: i64) -> String {
        format!(
            "DCGM_FI_PROF_SM_ACTIVE{{{labels}}} 0.5 {}\n",
            DAY_MS + seconds * 1000
        )
    }

    /// An input that names no cluster lands in cluster `default`.
    const CLUSTER: &str = "default";

    fn key(node: &str, gpu: u32) -> (String, String, u32) {
        (CLUSTER.into(), node.into(), gpu)
    }

    /// The day's identities from two inputs: a GPU's rows in both, a pod's readings before the
    /// day and in it.
    #[tokio::test]
    async fn identities_are_the_windows_whatever_files_hold_them() {
        let dir = tempfile::tempdir().unwrap();
        let lake = Lake::open(&LakeConfig {
            data: dir.path().display().to_string(),
            catalog: None,
        })
        .await
        .unwrap();
        let gpu0_p1 = r#"gpu="0",UUID="GPU-b",Hostname="n1",namespace="ml",pod="p1""#;
        let gpu0_p2 = r#"gpu="0",UUID="GPU-b",Hostname="n1",namespace="ml",pod="p2""#;
        let files = [
            // n1 GPU 0: pod p1 only a minute before the day (it counts the GPU, not the pod);
            // p2 in the day, three readings. n1 GPU 1 only five minutes before: not at all.
            reading(gpu0_p1, -60)
                + &reading(gpu0_p2, 60)
                + &reading(gpu0_p2, 90)
                + &reading(gpu0_p2, 120)
                + &reading(r#"gpu="1",UUID="GPU-c",Hostname="n1""#, -300),
            // n1 GPU 0 names a lesser UUID later; n1 GPU 2 and n2 GPU 3 hold p2 too (n2's is
            // another node's pod, read before the day and in it); n1 GPU 2 at the day's end is
            // the next day's; n3 is outside the nodes asked in the second question.
            reading(r#"gpu="0",UUID="GPU-a",Hostname="n1""#, 3600)
                + &reading(
                    r#"gpu="2",UUID="GPU-d",Hostname="n1",namespace="ml",pod="p2""#,
                    30,
                )
                + &reading(r#"gpu="2",UUID="GPU-z",Hostname="n1""#, 86_400)
                + &reading(r#"gpu="0",UUID="GPU-f",Hostname="n3""#, 10)
                + &reading(
                    r#"gpu="3",UUID="GPU-e",Hostname="n2",namespace="ml",pod="p2""#,
                    -30,
                )
                + &reading(
                    r#"gpu="3",UUID="GPU-e",Hostname="n2",namespace="ml",pod="p2""#,
                    120,
                ),
        ];
        for text in files {
            let input = Input::Bytes {
                origin: "dcgm.prom".into(),
                bytes: text.into_bytes().into(),
            };
            let options =
                IngestOptions::new(Source::Dcgm, ParseContext::new("dcgm.prom", Utc::now()));
            ingest(&lake, input, options).await.unwrap();
        }
        let ctx = new_session(&lake).unwrap();
        let day = Span::new(DAY_MS * 1000, DAY_MS * 1000 + MICROS_PER_DAY);
        let gap = 120 * MICROS_PER_SECOND;

        let all = gpu_identities(&ctx, day, gap, None).await.unwrap();
        assert_eq!(
            all.gpus,
            BTreeSet::from([key("n1", 0), key("n1", 2), key("n2", 3), key("n3", 0)])
        );
        assert_eq!(
            all.uuids,
            HashMap::from([
                (key("n1", 0), "GPU-a".to_string()),
                (key("n1", 2), "GPU-d".to_string()),
                (key("n2", 3), "GPU-e".to_string()),
                (key("n3", 0), "GPU-f".to_string()),
            ])
        );
        let pod = |node: &str| (CLUSTER.into(), node.to_string(), "ml".into(), "p2".into());
        assert_eq!(
            all.pod_gpus,
            PodGpus::from([(pod("n1"), vec![0, 2]), (pod("n2"), vec![3])])
        );

        let nodes = BTreeSet::from([(CLUSTER.to_string(), "n2".to_string())]);
        let n2 = gpu_identities(&ctx, day, gap, Some(&nodes)).await.unwrap();
        assert_eq!(n2.gpus, BTreeSet::from([key("n2", 3)]));
        assert_eq!(n2.pod_gpus, PodGpus::from([(pod("n2"), vec![3])]));
    }
}
