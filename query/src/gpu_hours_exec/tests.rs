use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::array::{Float64Array, Int32Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion_proto::bytes::{
    physical_plan_from_bytes_with_extension_codec, physical_plan_to_bytes_with_extension_codec,
};
use gpuledger_ledger::allocation::{Allocation, EndReason, GpuSource, Labels};
use gpuledger_ledger::build::{
    GpuHoursPlan, GpuTelemetry, Node, NodePrice, NodeWork, Reservation, node_gpu_hours,
};
use gpuledger_ledger::gpu_hours::{ClassifyConfig, PriceSegment};
use gpuledger_ledger::time::Span;

use super::telemetry::{SampleFold, XidFold};
use super::{GpuHoursCodec, GpuHoursExec, NodeGroup, Reads, node_groups, node_range};

fn node(cluster: &str, name: &str) -> Node {
    Node {
        cluster: cluster.into(),
        node: name.into(),
        resource_id: None,
        gpu_count: 2,
        gpu_model: "H100".into(),
        capacity_type: "on_demand".into(),
        gpu_cost_share: 0.7,
        gpu_replicas: 1,
    }
}

/// A node's work with values JSON could round badly: thirds, 0.1 + 0.2, a price of 1/7.
fn work(cluster: &str, name: &str) -> NodeWork {
    NodeWork {
        node: node(cluster, name),
        price: Some(NodePrice::Billed(vec![PriceSegment {
            span: Span::new(0, 3_600_000_000),
            price_per_hour: 1.0 / 7.0,
        }])),
        allocations: vec![Allocation {
            cluster: cluster.into(),
            node: name.into(),
            gpu_index: 1,
            namespace: Some("nlp".into()),
            workload: Some("train".into()),
            pod: Some("train-0".into()),
            labels: Labels {
                team: Some("nlp".into()),
                ..Labels::default()
            },
            span: Span::new(600_000_000, 1_800_000_000),
            share: 1.0 / 3.0,
            mig_profile: None,
            end_reason: EndReason::Finished,
            gpu_source: GpuSource::Event,
        }],
        reservations: vec![Reservation {
            cluster: cluster.into(),
            node: name.into(),
            gpu_indices: Some(vec![0]),
            span: Span::new(0, 1_000_000),
            reason: "warm pool".into(),
        }],
        faults: vec![Span::new(5, 7)],
    }
}

fn plan() -> GpuHoursPlan {
    GpuHoursPlan {
        window: Span::new(0, 86_400_000_000),
        hours: vec![Span::new(0, 3_600_000_000)],
        config: ClassifyConfig {
            idle_threshold: 0.1 + 0.2,
            ..ClassifyConfig::default()
        },
        allowed_teams: Some(BTreeSet::from(["nlp".to_string()])),
    }
}

fn empty_read() -> Arc<dyn ExecutionPlan> {
    Arc::new(EmptyExec::new(Arc::new(Schema::new(vec![Field::new(
        "node",
        DataType::Utf8,
        true,
    )]))))
}

fn group(works: Vec<NodeWork>) -> Arc<NodeGroup> {
    let gpu_uuids = works
        .iter()
        .map(|w| {
            (
                (w.node.cluster.clone(), w.node.node.clone(), 0),
                format!("GPU-{}", w.node.node),
            )
        })
        .collect();
    Arc::new(NodeGroup {
        works: Arc::new(works),
        gpu_uuids: Arc::new(gpu_uuids),
        reads: Some(Reads {
            samples: empty_read(),
            xid: empty_read(),
        }),
    })
}

fn nodes_of(exec: &GpuHoursExec) -> Vec<String> {
    exec.groups
        .iter()
        .flat_map(|g| g.works.iter().map(|w| w.node.node.clone()))
        .collect()
}

/// Five groups over two tasks: 0, 2, 4 and 1, 3 (padded to three partitions), every node once.
#[test]
fn tasks_get_disjoint_groups_that_cover_the_fleet() {
    let groups: Vec<_> = (0..5)
        .map(|i| group(vec![work("a", &format!("n{i}"))]))
        .collect();
    let exec = GpuHoursExec::new(Arc::new(plan()), groups);
    let first = exec.for_task(0, 2);
    let second = exec.for_task(1, 2);
    assert_eq!(nodes_of(&first), ["n0", "n2", "n4"]);
    assert_eq!(nodes_of(&second), ["n1", "n3"]);
    assert_eq!(first.groups.len(), 3);
    assert_eq!(second.groups.len(), 3);
    assert!(second.groups[2].works.is_empty() && second.groups[2].reads.is_none());
    // More tasks than groups: the extra tasks get one empty partition each.
    let lone = exec.for_task(6, 7);
    assert_eq!(lone.groups.len(), 1);
    assert!(nodes_of(&lone).is_empty());
    // No nodes at all: one partition that answers nothing, not a plan without partitions.
    let none = GpuHoursExec::new(Arc::new(plan()), Vec::new());
    assert_eq!(none.groups.len(), 1);
    assert_eq!(none.properties().partitioning.partition_count(), 1);
}

/// What crosses to a worker comes back exactly: floats to the last bit, UUIDs, empty groups.
#[test]
fn the_codec_carries_the_work_exactly() {
    let padded = GpuHoursExec::new(
        Arc::new(plan()),
        vec![group(vec![work("a", "n1"), work("b", "n2")])],
    )
    .for_task(0, 1);
    let exec = GpuHoursExec::new(
        Arc::clone(&padded.plan),
        vec![Arc::clone(&padded.groups[0]), NodeGroup::empty()],
    );
    let bytes = physical_plan_to_bytes_with_extension_codec(Arc::new(exec), &GpuHoursCodec)
        .expect("encodes");
    let decoded = physical_plan_from_bytes_with_extension_codec(
        &bytes,
        &TaskContext::default(),
        &GpuHoursCodec,
    )
    .expect("decodes");
    let decoded = decoded
        .downcast_ref::<GpuHoursExec>()
        .expect("a GpuHoursExec");
    assert_eq!(*decoded.plan, plan());
    assert_eq!(decoded.plan.config.idle_threshold, 0.1 + 0.2);
    assert_eq!(decoded.groups.len(), 2);
    assert_eq!(
        *decoded.groups[0].works,
        vec![work("a", "n1"), work("b", "n2")]
    );
    assert_eq!(
        decoded.groups[0].works[0].allocations[0].share.to_bits(),
        (1.0f64 / 3.0).to_bits()
    );
    assert_eq!(
        decoded.groups[0].gpu_uuids[&("b".to_string(), "n2".to_string(), 0)],
        "GPU-n2"
    );
    assert_eq!(decoded.reads().count(), 2);
    assert!(decoded.groups[1].works.is_empty() && decoded.groups[1].reads.is_none());
}

/// A group's rows are selected by a (cluster, node) range; names with quotes stay literals.
#[test]
fn a_group_reads_its_range_of_nodes() {
    assert_eq!(
        node_range(&[work("a", "n1"), work("a", "n'9")]),
        "coalesce(cluster, '') = 'a' AND node >= 'n1' AND node <= 'n''9'"
    );
    assert_eq!(
        node_range(&[work("a", "n1"), work("b", "m")]),
        "(coalesce(cluster, '') > 'a' OR (coalesce(cluster, '') = 'a' AND node >= 'n1')) \
         AND (coalesce(cluster, '') < 'b' OR (coalesce(cluster, '') = 'b' AND node <= 'm'))"
    );
    assert_eq!(node_range(&[]), "false");
}

fn xid_batch(rows: &[(&str, i32, i64, f64)]) -> RecordBatch {
    let schema = Schema::new(vec![
        Field::new("cluster", DataType::Utf8, true),
        Field::new("node", DataType::Utf8, true),
        Field::new("gpu_index", DataType::Int32, true),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new("xid_last", DataType::Float64, true),
    ]);
    RecordBatch::try_new(
        Arc::new(schema),
        vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|_| "c"))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(rows.iter().map(|r| r.2))
                    .with_timezone("UTC"),
            ),
            Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.3))),
        ],
    )
    .unwrap()
}

/// Each GPU's XID changes, in time order whatever order the rows came in: the highest reading
/// of a time, repeats dropped, a value no INT holds skipped (as the SQL cast made it NULL).
#[test]
fn xid_readings_fold_to_their_changes() {
    let mut fold = XidFold::default();
    fold.add(&xid_batch(&[
        ("n1", 0, 30, 0.0),
        ("n1", 0, 10, 0.0),
        ("n1", 0, 20, 79.0),
        ("n1", 0, 20, 48.0),
        ("n1", 1, 5, 13.0),
    ]))
    .unwrap();
    fold.add(&xid_batch(&[
        ("n1", 0, 25, 79.0),
        ("n1", 0, 40, 1e12),
        ("n1", 0, 50, 0.0),
        ("n1", 1, 6, 13.0),
    ]))
    .unwrap();
    let changes = fold.finish();
    assert_eq!(
        changes[&("c".to_string(), "n1".to_string(), 0)],
        vec![(10, 0), (20, 79), (30, 0)]
    );
    assert_eq!(
        changes[&("c".to_string(), "n1".to_string(), 1)],
        vec![(5, 13)]
    );
    assert_eq!(changes.len(), 2);
}

/// (node, GPU index, pod, time, SM activity) rows of `gpu_samples` as the per-GPU step reads
/// them (text as views); a `None` time is a row the query filtered.
fn sample_batch(rows: &[(&str, i32, Option<&str>, Option<i64>, f64)]) -> RecordBatch {
    sample_batch_with_framebuffer(rows, &vec![(None, None); rows.len()])
}

/// As [`sample_batch`], each row with its (`fb_used_mib`, `fb_free_mib`).
fn sample_batch_with_framebuffer(
    rows: &[(&str, i32, Option<&str>, Option<i64>, f64)],
    framebuffer: &[(Option<f64>, Option<f64>)],
) -> RecordBatch {
    let text = |values: Vec<Option<&str>>| -> Arc<dyn arrow::array::Array> {
        Arc::new(arrow::array::StringViewArray::from(values))
    };
    let nothing = || text(rows.iter().map(|_| None).collect());
    let columns: Vec<(&str, Arc<dyn arrow::array::Array>)> = vec![
        ("cluster", text(rows.iter().map(|_| Some("c")).collect())),
        ("node", text(rows.iter().map(|r| Some(r.0)).collect())),
        (
            "gpu_index",
            Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.1))),
        ),
        (
            "mig_instance",
            Arc::new(Int32Array::from(vec![None; rows.len()])),
        ),
        (
            "gpu_uuid",
            text(rows.iter().map(|_| Some("GPU-1")).collect()),
        ),
        (
            "namespace",
            text(rows.iter().map(|r| r.2.map(|_| "ml")).collect()),
        ),
        ("pod", text(rows.iter().map(|r| r.2).collect())),
        ("container", nothing()),
        (
            "ts",
            Arc::new(
                TimestampMicrosecondArray::from(rows.iter().map(|r| r.3).collect::<Vec<_>>())
                    .with_timezone("UTC"),
            ),
        ),
        (
            "sm_active",
            Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.4))),
        ),
        (
            "gr_engine_active",
            Arc::new(Float64Array::from(vec![None; rows.len()])),
        ),
        (
            "gpu_util",
            Arc::new(Float64Array::from(vec![None; rows.len()])),
        ),
        (
            "power_w",
            Arc::new(Float64Array::from(vec![None; rows.len()])),
        ),
        (
            "fb_used_mib",
            Arc::new(Float64Array::from_iter(framebuffer.iter().map(|f| f.0))),
        ),
        (
            "fb_free_mib",
            Arc::new(Float64Array::from_iter(framebuffer.iter().map(|f| f.1))),
        ),
    ];
    RecordBatch::try_from_iter(columns).unwrap()
}

/// The framebuffer share is taken after a (series, time)'s partial rows merge (an input that
/// lists each metric family apart lands used and free memory in separate rows); the whole GPU
/// reads the highest of its series', as for every measure.
#[test]
fn framebuffer_share_is_read_from_a_series_merged_rows() {
    let mut fold = SampleFold::default();
    let rows = [
        ("n1", 0, None, Some(30), 0.5),
        ("n1", 0, None, Some(30), 0.5),
        ("n1", 0, None, Some(60), 0.5),
        ("n1", 0, Some("p"), Some(60), 0.5),
        // Only one of the two fields, and a GPU with no framebuffer at all: unknown.
        ("n2", 0, None, Some(30), 0.5),
        ("n2", 0, None, Some(60), 0.5),
    ];
    fold.add(&sample_batch_with_framebuffer(
        &rows,
        &[
            (Some(20.0), None),
            (None, Some(60.0)),
            (Some(10.0), Some(90.0)),
            (Some(40.0), Some(60.0)),
            (Some(10.0), None),
            (Some(0.0), Some(0.0)),
        ],
    ))
    .unwrap();
    let telemetry = fold.finish();
    let shares = |node: &str| -> Vec<(i64, Option<f64>)> {
        telemetry[&("c".to_string(), node.to_string(), 0)]
            .samples
            .iter()
            .map(|s| (s.ts, s.memory_used_share))
            .collect()
    };
    // 20 / (20 + 60) at 30; at 60 the pod's series (0.4) over the GPU's (0.1).
    assert_eq!(shares("n1"), [(30, Some(0.25)), (60, Some(0.4))]);
    assert_eq!(shares("n2"), [(30, None), (60, None)]);
    // A measure whose column is null throughout (power here) is never read, as zero or else.
    assert!(
        telemetry
            .values()
            .flat_map(|t| t.samples.iter().chain(t.pod_samples.values().flatten()))
            .all(|s| s.power_w.is_none())
    );
}

/// Rows take their GPU and series by runs of repeating labels; a filtered row (NULL time) is
/// skipped, and a run of filtered rows alone adds no GPU and no pod; runs out of time order merge
/// into one time line per GPU and per pod. A batch sliced out of a larger one reads the same.
#[test]
fn samples_fold_to_each_gpus_and_pods_readings_in_time_order() {
    let mut fold = SampleFold::default();
    fold.add(&sample_batch(&[
        ("n1", 0, None, Some(30), 0.1),
        ("n1", 0, None, Some(60), 0.2),
        // Filtered rows: at the start of a run, inside one, and a run (GPU 1, pod q) of
        // nothing else.
        ("n2", 0, None, None, 0.9),
        ("n2", 0, None, Some(30), 0.3),
        ("n2", 0, Some("p"), Some(30), 0.5),
        ("n2", 0, Some("p"), None, 0.9),
        ("n2", 0, Some("p"), Some(60), 0.4),
        ("n2", 1, Some("q"), None, 0.9),
        ("n2", 0, Some("q"), None, 0.9),
    ]))
    .unwrap();
    // The day before's last minute, read after the day's rows, sliced out of a larger batch
    // (its arrays start at an offset).
    fold.add(
        &sample_batch(&[
            ("n3", 0, None, Some(0), 0.7),
            ("n1", 0, None, Some(0), 0.0),
            ("n2", 0, Some("p"), Some(0), 0.6),
            ("n3", 0, None, Some(0), 0.7),
        ])
        .slice(1, 2),
    )
    .unwrap();
    let telemetry = fold.finish();
    let readings = |t: &GpuTelemetry| -> Vec<(i64, Option<f64>)> {
        t.samples.iter().map(|s| (s.ts, s.sm_active)).collect()
    };
    let of = |node: &str| &telemetry[&("c".to_string(), node.to_string(), 0)];
    assert_eq!(
        readings(of("n1")),
        [(0, Some(0.0)), (30, Some(0.1)), (60, Some(0.2))]
    );
    // The whole GPU reads the highest of its series at each time.
    assert_eq!(
        readings(of("n2")),
        [(0, Some(0.6)), (30, Some(0.5)), (60, Some(0.4))]
    );
    let pod: Vec<(i64, Option<f64>)> = of("n2").pod_samples[&("ml".to_string(), "p".to_string())]
        .iter()
        .map(|s| (s.ts, s.sm_active))
        .collect();
    assert_eq!(pod, [(0, Some(0.6)), (30, Some(0.5)), (60, Some(0.4))]);
    assert!(of("n1").pod_samples.is_empty());
    assert_eq!(
        of("n2").pod_samples.len(),
        1,
        "no pod q: its rows were all filtered"
    );
    assert_eq!(telemetry.len(), 2, "no GPU 1 of n2, nothing of n3");
}

fn sized(name: &str, gpus: u32) -> NodeWork {
    let mut w = work("a", name);
    w.node.gpu_count = gpus;
    w
}

/// Groups are cut by GPUs, the work's measure, never more than wanted, every node once in
/// order.
#[test]
fn groups_carry_about_the_same_gpus() {
    let names = |groups: Vec<&[NodeWork]>| -> Vec<Vec<String>> {
        groups
            .into_iter()
            .map(|g| g.iter().map(|w| w.node.node.clone()).collect())
            .collect()
    };
    // One 8-GPU node and eight 1-GPU nodes over two: 8 and 8 (by node count it was 5 and 4
    // nodes: 12 GPUs and 4).
    let mut fleet = vec![sized("big", 8)];
    fleet.extend((0..8).map(|i| sized(&format!("s{i}"), 1)));
    let groups = names(node_groups(&fleet, 2).collect());
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0], ["big"]);
    assert_eq!(groups[1].len(), 8);
    // Even nodes split evenly; more wanted than nodes gives one node each.
    let even: Vec<_> = (0..4).map(|i| sized(&format!("e{i}"), 4)).collect();
    assert_eq!(
        names(node_groups(&even, 2).collect()),
        [["e0", "e1"], ["e2", "e3"]]
    );
    assert_eq!(node_groups(&even, 16).count(), 4);
    // A node that reports no GPUs still lands in a group (its declared GPUs come later).
    let odd = vec![sized("z", 0), sized("y", 0), sized("x", 3)];
    let groups = names(node_groups(&odd, 3).collect());
    assert_eq!(groups.concat(), ["z", "y", "x"]);
    assert!(groups.len() <= 3);
    assert_eq!(node_groups(&[], 4).count(), 0);
}

/// A worker refuses a per-GPU step whose hidden reads reach outside the lake, as it refuses
/// any other plan that does.
#[tokio::test]
async fn a_worker_refuses_a_gpu_hours_step_reading_another_store() {
    let dir = tempfile::tempdir().unwrap();
    let foreign = crate::distributed::tests::plan_reading_a_local_file(dir.path()).await;
    let hostile = Arc::new(NodeGroup {
        works: Arc::new(vec![work("a", "n1")]),
        gpu_uuids: Arc::default(),
        reads: Some(Reads {
            samples: empty_read(),
            xid: foreign,
        }),
    });
    let exec: Arc<dyn ExecutionPlan> = Arc::new(GpuHoursExec::new(
        Arc::new(plan()),
        vec![group(vec![work("a", "n0")]), hostile],
    ));
    let error = crate::distributed::check_reads_the_lake(&exec).unwrap_err();
    assert!(error.to_string().contains("reads file:///"), "{error}");
    let honest: Arc<dyn ExecutionPlan> = Arc::new(GpuHoursExec::new(
        Arc::new(plan()),
        vec![group(vec![work("a", "n0")])],
    ));
    crate::distributed::check_reads_the_lake(&honest).unwrap();
}

/// A group's readings are held against the task's memory limit: over it, the step fails
/// naming itself, rather than the worker running out of memory.
#[tokio::test]
async fn a_groups_readings_count_against_the_memory_limit() {
    use datafusion::datasource::memory::MemorySourceConfig;
    use datafusion::execution::runtime_env::RuntimeEnvBuilder;

    let rows: Vec<(&str, i32, i64, f64)> = (0..1_000).map(|i| ("n1", 0, i, 79.0)).collect();
    let batch = xid_batch(&rows);
    let xid =
        MemorySourceConfig::try_new_exec(&[vec![batch.clone()]], batch.schema(), None).unwrap();
    let readings = Arc::new(NodeGroup {
        works: Arc::new(vec![work("c", "n1")]),
        gpu_uuids: Arc::default(),
        reads: Some(Reads {
            samples: empty_read(),
            xid,
        }),
    });
    let exec = Arc::new(GpuHoursExec::new(Arc::new(plan()), vec![readings]));

    let small = RuntimeEnvBuilder::new()
        .with_memory_limit(4_096, 1.0)
        .build_arc()
        .unwrap();
    let context = Arc::new(TaskContext::default().with_runtime(small));
    let error = datafusion::physical_plan::collect(Arc::clone(&exec) as _, context)
        .await
        .unwrap_err();
    let message = error.strip_backtrace();
    assert!(
        message.contains("Resources exhausted") && message.contains("GpuHoursExec[0]"),
        "{message}"
    );

    // With room, the same step answers the rows the ledger computes for the node with the
    // same readings: GPU 0's XID 79 from its first reading on.
    let rows = datafusion::physical_plan::collect(exec, Arc::new(TaskContext::default()))
        .await
        .unwrap();
    let mut fold = XidFold::default();
    fold.add(&batch).unwrap();
    let telemetry: std::collections::HashMap<u32, GpuTelemetry> = fold
        .finish()
        .into_iter()
        .map(|((_, _, gpu), xid)| {
            let readings = GpuTelemetry {
                xid,
                ..GpuTelemetry::default()
            };
            (gpu, readings)
        })
        .collect();
    assert_eq!(telemetry[&0].xid, vec![(0, 79)]);
    let expected = node_gpu_hours(&plan(), &work("c", "n1"), |gpu| telemetry.get(&gpu));
    let fault_seconds = |rows: &[gpuledger_ledger::gpu_hours::GpuHour]| -> f64 {
        rows.iter().map(|r| r.fault_seconds).sum()
    };
    let answered: Vec<_> = rows
        .iter()
        .flat_map(|b| crate::ledger_inputs::gpu_hour_rows(b).unwrap())
        .collect();
    assert_eq!(answered.len(), expected.len());
    assert_eq!(fault_seconds(&answered), fault_seconds(&expected));
    assert!(fault_seconds(&expected) > 0.0, "the XID makes fault time");
}
