//! The ledger build's per-GPU step as a plan node, [`GpuHoursExec`], so that it runs where the
//! telemetry is read: on the workers, one task per slice of the fleet's nodes.
//!
//! A build prepares the fleet-wide part on the coordinator (`gpuledger_ledger::build::prepare`:
//! prices, allocations, faults), hands every node its [`NodeWork`], and runs this node over
//! the nodes sorted by (cluster, node) and cut into contiguous groups, one per partition. A
//! partition reads only its group's telemetry (a range of nodes the Parquet statistics prune
//! by), folds it into per-GPU readings, and answers the group's `gpu_hours` rows. The journal,
//! amortization and balance, which need every node's rows, run afterwards on the coordinator.
//!
//! Without workers the partitions run in-process, side by side; with workers the distributed
//! planner spreads the groups over tasks ([`task_count`], [`scale_up`]) and the node travels
//! with [`GpuHoursCodec`]. Either way each node is computed once, by the same functions, and the
//! rows are put in one order afterwards, so the result does not depend on the number of workers.

mod telemetry;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{DataFusionError, Result as DfResult, internal_err, plan_err};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    ReplaceChildrenOptions, SendableRecordBatchStream, execute_stream,
};
use datafusion::physical_planner::{DefaultPhysicalPlanner, PhysicalPlanner};
use datafusion::prelude::SessionContext;
use datafusion_distributed::{
    DesiredTaskCountEvent, DesiredTaskCountEventResponse, DistributedLeafExec,
    ScaleUpLeafNodeEvent, ScaleUpLeafNodeEventResponse,
};
use datafusion_proto::physical_plan::{
    PhysicalExtensionCodec, PhysicalPlanDecodeContext, PhysicalProtoConverterExtension,
};
use datafusion_proto::protobuf::PhysicalPlanNode;
use futures::StreamExt;
use gpuledger_lake::tables::Table;
use gpuledger_ledger::build::{GpuHoursPlan, NodeWork, node_gpu_hours};
use gpuledger_ledger::gpu_hours::GpuHour;
use gpuledger_ledger::time::Span;
use prost::Message;

use crate::distributed::Workers;
use crate::error::QueryError;
use crate::ledger_inputs::{gpu_hour_rows, gpu_rows, text_literal};
use crate::ledger_outputs::gpu_hours_batch;
use telemetry::{SampleFold, XidFold};

/// (cluster, node, GPU index).
type GpuKey = (String, String, u32);

/// What the per-GPU step answered, and where it ran.
#[derive(Debug)]
pub struct GpuHoursRun {
    pub rows: Vec<GpuHour>,
    /// How many worker tasks computed the rows; 0 when they were computed in this process.
    pub worker_tasks: usize,
}

/// The `gpu_hours` rows of `nodes` over `plan`'s hours, computed through `ctx`: on its workers
/// when it has some, else in-process over its partitions. `samples` is the span whose usage
/// readings count (the recomputed hours and the reach of a sample before them), `xid` the
/// span whose XID readings do (the whole window, so that a fault begun earlier is seen), and
/// `gpu_uuids` each GPU's UUID as the window's telemetry names it.
pub async fn gpu_hours(
    ctx: &SessionContext,
    plan: &GpuHoursPlan,
    nodes: &[NodeWork],
    gpu_uuids: &HashMap<GpuKey, String>,
    samples: Span,
    xid: Span,
) -> Result<GpuHoursRun, QueryError> {
    if nodes.is_empty() {
        return Ok(GpuHoursRun {
            rows: Vec::new(),
            worker_tasks: 0,
        });
    }
    let state = ctx.state();
    let workers = state
        .config()
        .get_extension::<Workers>()
        .map_or(0, |w| w.urls().len());
    let wanted = state.config().target_partitions().max(1) * workers.max(1);
    // Each read is planned on its own (listing the catalog for its files): side by side.
    let groups =
        futures::future::try_join_all(node_groups(nodes, wanted).map(|works| async move {
            let range = node_range(works);
            let samples = format!(
                "SELECT {} FROM gpu_samples WHERE {} AND {range}",
                *telemetry::SAMPLE_COLUMNS,
                gpu_rows(samples)
            );
            let xid = format!(
                "SELECT {} FROM gpu_samples WHERE {} AND xid_last IS NOT NULL AND {range}",
                telemetry::XID_COLUMNS,
                gpu_rows(xid)
            );
            let (samples, xid) =
                futures::try_join!(in_process_plan(ctx, &samples), in_process_plan(ctx, &xid))?;
            let uuids = works
                .iter()
                .flat_map(|w| {
                    (0..w.node.gpu_count).filter_map(|i| {
                        let key = (w.node.cluster.clone(), w.node.node.clone(), i);
                        let uuid = gpu_uuids.get(&key)?.clone();
                        Some((key, uuid))
                    })
                })
                .collect();
            Ok::<_, QueryError>(Arc::new(NodeGroup {
                works: Arc::new(works.to_vec()),
                gpu_uuids: Arc::new(uuids),
                reads: Some(Reads { samples, xid }),
            }))
        }))
        .await?;
    let exec = GpuHoursExec::new(Arc::new(plan.clone()), groups);
    let physical = ctx
        .read_table(Arc::new(GpuHoursTable(Arc::new(exec))))?
        .create_physical_plan()
        .await?;
    let mut worker_tasks = 0;
    physical.apply(|node| {
        if let Some(leaf) = node.downcast_ref::<DistributedLeafExec>()
            && leaf.original().is::<GpuHoursExec>()
        {
            worker_tasks = leaf.variants().len();
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    let batches = datafusion::physical_plan::collect(physical, ctx.task_ctx()).await?;
    let mut rows = Vec::new();
    for batch in &batches {
        rows.extend(gpu_hour_rows(batch)?);
    }
    Ok(GpuHoursRun { rows, worker_tasks })
}

/// `nodes` (in (cluster, node) order) cut into at most `wanted` runs of about the same number
/// of GPUs, the work's measure: a fleet of 8-GPU and 1-GPU nodes cut by node count would give
/// one task eight times another's work.
fn node_groups(nodes: &[NodeWork], wanted: usize) -> impl Iterator<Item = &[NodeWork]> {
    let gpus = |works: &[NodeWork]| -> usize {
        works.iter().map(|w| w.node.gpu_count.max(1) as usize).sum()
    };
    let per_group = gpus(nodes).div_ceil(wanted.max(1)).max(1);
    let mut rest = nodes;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut taken = 0;
        let mut end = 0;
        while end < rest.len() && taken < per_group {
            taken += rest[end].node.gpu_count.max(1) as usize;
            end += 1;
        }
        let (group, after) = rest.split_at(end);
        rest = after;
        Some(group)
    })
}

/// A SQL condition that holds for the rows of `works`' nodes (contiguous in (cluster, node)
/// order), written so that the Parquet statistics of a group within one cluster prune by node.
fn node_range(works: &[NodeWork]) -> String {
    let (Some(first), Some(last)) = (works.first(), works.last()) else {
        return "false".into();
    };
    let cluster = "coalesce(cluster, '')";
    let (c0, n0) = (
        text_literal(&first.node.cluster),
        text_literal(&first.node.node),
    );
    let (c1, n1) = (
        text_literal(&last.node.cluster),
        text_literal(&last.node.node),
    );
    if first.node.cluster == last.node.cluster {
        format!("{cluster} = {c0} AND node >= {n0} AND node <= {n1}")
    } else {
        format!(
            "({cluster} > {c0} OR ({cluster} = {c0} AND node >= {n0})) AND ({cluster} < {c1} OR ({cluster} = {c1} AND node <= {n1}))"
        )
    }
}

/// `sql`'s plan as it runs in this process: a group's reads run inside the task that holds
/// the group, wherever that is, so they are never split over workers themselves.
async fn in_process_plan(
    ctx: &SessionContext,
    sql: &str,
) -> Result<Arc<dyn ExecutionPlan>, QueryError> {
    let logical = ctx.sql(sql).await?.into_optimized_plan()?;
    Ok(DefaultPhysicalPlanner::default()
        .create_physical_plan(&logical, &ctx.state())
        .await?)
}

/// One partition's nodes: their work, their GPUs' UUIDs, and the plans that read their
/// telemetry (`None` for a partition that pads a task and has no nodes).
#[derive(Debug)]
struct NodeGroup {
    /// Shared with the copies whose reads are guarded (see [`GpuHoursExec::map_reads`]).
    works: Arc<Vec<NodeWork>>,
    gpu_uuids: Arc<HashMap<GpuKey, String>>,
    reads: Option<Reads>,
}

impl NodeGroup {
    fn empty() -> Arc<Self> {
        Arc::new(Self {
            works: Arc::default(),
            gpu_uuids: Arc::default(),
            reads: None,
        })
    }
}

#[derive(Debug, Clone)]
struct Reads {
    /// The usage readings (`telemetry::SAMPLE_COLUMNS`).
    samples: Arc<dyn ExecutionPlan>,
    /// The XID readings (`telemetry::XID_COLUMNS`).
    xid: Arc<dyn ExecutionPlan>,
}

/// Computes the `gpu_hours` rows of one group of nodes per partition. Its reads are not
/// children of the plan: they belong to their partition, and travel with it to whichever task
/// runs it (as [`crate::scope::TeamRowsExec`]'s scan does).
#[derive(Debug)]
pub struct GpuHoursExec {
    plan: Arc<GpuHoursPlan>,
    groups: Vec<Arc<NodeGroup>>,
    properties: Arc<PlanProperties>,
}

impl GpuHoursExec {
    /// Over `groups`, one partition each (one empty partition when there are none).
    fn new(plan: Arc<GpuHoursPlan>, mut groups: Vec<Arc<NodeGroup>>) -> Self {
        if groups.is_empty() {
            groups.push(NodeGroup::empty());
        }
        let properties = PlanProperties::new(
            EquivalenceProperties::new(Table::GpuHours.schema()),
            Partitioning::UnknownPartitioning(groups.len()),
            EmissionType::Final,
            Boundedness::Bounded,
        );
        Self {
            plan,
            groups,
            properties: Arc::new(properties),
        }
    }

    /// The plans under this node that read the lake (for the worker's checks).
    pub(crate) fn reads(&self) -> impl Iterator<Item = &Arc<dyn ExecutionPlan>> {
        self.groups
            .iter()
            .filter_map(|g| g.reads.as_ref())
            .flat_map(|r| [&r.samples, &r.xid])
    }

    /// The same node with `f` applied to every read (a worker guards them with its time limit).
    pub(crate) fn map_reads(
        &self,
        mut f: impl FnMut(Arc<dyn ExecutionPlan>) -> DfResult<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Self> {
        let groups = self
            .groups
            .iter()
            .map(|g| {
                let reads = match &g.reads {
                    Some(r) => Some(Reads {
                        samples: f(Arc::clone(&r.samples))?,
                        xid: f(Arc::clone(&r.xid))?,
                    }),
                    None => None,
                };
                Ok(Arc::new(NodeGroup {
                    works: Arc::clone(&g.works),
                    gpu_uuids: Arc::clone(&g.gpu_uuids),
                    reads,
                }))
            })
            .collect::<DfResult<Vec<_>>>()?;
        Ok(Self::new(Arc::clone(&self.plan), groups))
    }

    /// Task `task` of `tasks`: every `tasks`-th group from `task` on, padded with empty groups
    /// so that every task shows the same partitions.
    fn for_task(&self, task: usize, tasks: usize) -> Self {
        let width = self.groups.len().div_ceil(tasks).max(1);
        let mut groups: Vec<Arc<NodeGroup>> = self
            .groups
            .iter()
            .skip(task)
            .step_by(tasks)
            .cloned()
            .collect();
        groups.resize_with(width, NodeGroup::empty);
        Self::new(Arc::clone(&self.plan), groups)
    }
}

impl DisplayAs for GpuHoursExec {
    fn fmt_as(&self, _format: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let nodes: usize = self.groups.iter().map(|g| g.works.len()).sum();
        write!(
            f,
            "GpuHoursExec: nodes={nodes}, groups={}",
            self.groups.len()
        )
    }
}

impl ExecutionPlan for GpuHoursExec {
    fn name(&self) -> &str {
        "GpuHoursExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
        _options: ReplaceChildrenOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let Some(group) = self.groups.get(partition).cloned() else {
            return internal_err!("GpuHoursExec has no partition {partition}");
        };
        let plan = Arc::clone(&self.plan);
        let rows = futures::stream::once(async move {
            let telemetry = read_telemetry(&group, partition, context).await?;
            let rows: Vec<GpuHour> = group
                .works
                .iter()
                .flat_map(|work| {
                    node_gpu_hours(&plan, work, |gpu_index| {
                        telemetry.get(&(
                            work.node.cluster.clone(),
                            work.node.node.clone(),
                            gpu_index,
                        ))
                    })
                })
                .collect();
            Ok(gpu_hours_batch(&rows))
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Table::GpuHours.schema(),
            rows,
        )))
    }
}

/// The group's telemetry per GPU, held against the task's memory limit.
async fn read_telemetry(
    group: &NodeGroup,
    partition: usize,
    context: Arc<TaskContext>,
) -> DfResult<HashMap<GpuKey, gpuledger_ledger::build::GpuTelemetry>> {
    let Some(reads) = &group.reads else {
        return Ok(HashMap::new());
    };
    let held =
        MemoryConsumer::new(format!("GpuHoursExec[{partition}]")).register(context.memory_pool());
    let mut samples = SampleFold::default();
    let mut stream = execute_stream(Arc::clone(&reads.samples), Arc::clone(&context))?;
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        held.try_grow(SampleFold::bytes_per_row() * batch.num_rows())?;
        samples.add(&batch)?;
    }
    let mut xid = XidFold::default();
    let mut stream = execute_stream(Arc::clone(&reads.xid), context)?;
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        held.try_grow(XidFold::bytes_per_row() * batch.num_rows())?;
        xid.add(&batch)?;
    }
    let mut telemetry = samples.finish();
    for (key, readings) in xid.finish() {
        telemetry.entry(key).or_default().xid = readings;
    }
    for (key, gpu) in &mut telemetry {
        gpu.gpu_uuid = group.gpu_uuids.get(key).cloned();
    }
    Ok(telemetry)
}

/// Puts a [`GpuHoursExec`] in front of the session's planner (which distributes it when the
/// session has workers).
#[derive(Debug)]
struct GpuHoursTable(Arc<GpuHoursExec>);

#[async_trait]
impl TableProvider for GpuHoursTable {
    fn schema(&self) -> SchemaRef {
        Table::GpuHours.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let width = Table::GpuHours.schema().fields().len();
        if projection.is_some_and(|p| !p.iter().copied().eq(0..width)) {
            return plan_err!("the ledger's per-GPU step answers whole gpu_hours rows");
        }
        Ok(Arc::clone(&self.0) as Arc<dyn ExecutionPlan>)
    }
}

/// As many tasks as there are groups with nodes (the planner caps it at the workers).
pub(crate) fn task_count(
    event: DesiredTaskCountEvent,
) -> Option<DfResult<DesiredTaskCountEventResponse>> {
    let exec = event.plan.downcast_ref::<GpuHoursExec>()?;
    let groups = exec.groups.iter().filter(|g| !g.works.is_empty()).count();
    Some(Ok(DesiredTaskCountEventResponse::desired(groups.max(1))))
}

/// The groups dealt to `task_count` tasks.
pub(crate) fn scale_up(
    event: ScaleUpLeafNodeEvent,
) -> Option<DfResult<ScaleUpLeafNodeEventResponse>> {
    let exec = event.plan.downcast_ref::<GpuHoursExec>()?;
    let tasks = event.task_count.max(1);
    let variants = (0..tasks).map(|t| Arc::new(exec.for_task(t, tasks)) as Arc<dyn ExecutionPlan>);
    Some(
        DistributedLeafExec::try_new(Arc::clone(event.plan), variants)
            .map(|leaf| ScaleUpLeafNodeEventResponse::new(Arc::new(leaf))),
    )
}

/// Carries a [`GpuHoursExec`] to a worker: the plan and each group's work as JSON (floats
/// round-trip exactly), its reads as DataFusion's own plan protobufs.
#[derive(Debug)]
pub(crate) struct GpuHoursCodec;

#[derive(Clone, PartialEq, Message)]
struct GpuHoursNode {
    #[prost(bytes = "vec", tag = "1")]
    plan: Vec<u8>,
    #[prost(message, repeated, tag = "2")]
    groups: Vec<NodeGroupNode>,
}

#[derive(Clone, PartialEq, Message)]
struct NodeGroupNode {
    #[prost(bytes = "vec", tag = "1")]
    work: Vec<u8>,
    #[prost(message, optional, tag = "2")]
    samples: Option<PhysicalPlanNode>,
    #[prost(message, optional, tag = "3")]
    xid: Option<PhysicalPlanNode>,
}

/// A group's work as it travels: its nodes, and its GPUs' UUIDs in key order.
type GroupWork = (Vec<NodeWork>, Vec<(GpuKey, String)>);

fn codec_error(what: &str, error: impl fmt::Display) -> DataFusionError {
    DataFusionError::Internal(format!("the ledger's per-GPU step: {what}: {error}"))
}

impl PhysicalExtensionCodec for GpuHoursCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        _inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let node = GpuHoursNode::decode(buf).map_err(|e| codec_error("its bytes", e))?;
        let plan: GpuHoursPlan =
            serde_json::from_slice(&node.plan).map_err(|e| codec_error("its plan", e))?;
        let decode = |read: &PhysicalPlanNode| {
            proto_converter
                .proto_to_execution_plan(read, &PhysicalPlanDecodeContext::new(ctx, self))
        };
        let groups = node
            .groups
            .iter()
            .map(|g| {
                let (works, gpu_uuids): GroupWork =
                    serde_json::from_slice(&g.work).map_err(|e| codec_error("a group", e))?;
                let reads = match (&g.samples, &g.xid) {
                    (Some(samples), Some(xid)) => Some(Reads {
                        samples: decode(samples)?,
                        xid: decode(xid)?,
                    }),
                    (None, None) => None,
                    _ => return internal_err!("a group of the per-GPU step lost one of its reads"),
                };
                Ok(Arc::new(NodeGroup {
                    works: Arc::new(works),
                    gpu_uuids: Arc::new(gpu_uuids.into_iter().collect()),
                    reads,
                }))
            })
            .collect::<DfResult<Vec<_>>>()?;
        Ok(Arc::new(GpuHoursExec::new(Arc::new(plan), groups)))
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> DfResult<()> {
        let Some(exec) = node.downcast_ref::<GpuHoursExec>() else {
            return internal_err!("{} is not a node this codec carries", node.name());
        };
        let encode =
            |read: &Arc<dyn ExecutionPlan>| proto_converter.execution_plan_to_proto(read, self);
        let groups = exec
            .groups
            .iter()
            .map(|g| {
                let mut gpu_uuids: Vec<(&GpuKey, &String)> = g.gpu_uuids.iter().collect();
                gpu_uuids.sort();
                let work = serde_json::to_vec(&(&*g.works, gpu_uuids))
                    .map_err(|e| codec_error("encoding a group", e))?;
                Ok(NodeGroupNode {
                    work,
                    samples: g.reads.as_ref().map(|r| encode(&r.samples)).transpose()?,
                    xid: g.reads.as_ref().map(|r| encode(&r.xid)).transpose()?,
                })
            })
            .collect::<DfResult<Vec<_>>>()?;
        GpuHoursNode {
            plan: serde_json::to_vec(exec.plan.as_ref())
                .map_err(|e| codec_error("encoding its plan", e))?,
            groups,
        }
        .encode(buf)
        .map_err(|e| codec_error("encoding", e))
    }
}

#[cfg(test)]
mod tests;
