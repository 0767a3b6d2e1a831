//! Capacity planning (docs/design.md §11), rules in `gpuledger_ledger::capacity`:
//!
//! - `inference_capacity(model, peak_rps, redundancy)`: one row: the model's safe requests per
//!   second per replica at SLO, measured over all of `token_usage` in 5-minute windows (replicas:
//!   the pods of `allocations` labelled with the model), and the replicas and GPUs a peak needs;
//! - `gpu_fit(gpus)`: per node group (cluster and GPU model of the declared nodes), the GPUs free
//!   in the latest hour of `gpu_hours` (`as_of`) — a GPU with any allocated, reserved or fault
//!   time in that hour is not free — and whether a job of `gpus` GPUs can start.
//!
//! ```sql
//! select replicas_needed, gpus_needed from inference_capacity('llama-3-8b', 120.0, 2);
//! select cluster, gpu_model, free_gpus, largest_free_block, can_start from gpu_fit(16);
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, LazyLock};

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray,
    StringViewArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl};
use datafusion::common::{Result as DfResult, ScalarValue, plan_err};
use datafusion::datasource::{TableProvider, provider_as_source};
use datafusion::functions::expr_fn::coalesce;
use datafusion::functions_aggregate::expr_fn::max;
use datafusion::logical_expr::{Expr, LogicalPlanBuilder, col, lit};
use gpuledger_lake::tables::timestamp;
use gpuledger_ledger::build::Node;
use gpuledger_ledger::capacity::{NodeFree, ReplicaAllocation, Windows, fit, replicas_needed};
use gpuledger_ledger::time::Span;
use gpuledger_ledger::unit_economics::{DEFAULT_OBJECTIVE, slo_met};

use super::support::{
    Computed, column, computed, declared_specs, floats, run, strings, text, timestamps, value,
};
use super::unit_economics::{UnitEconomicsSources, declared_slos, for_each_request};

/// The literal arguments of a call, as `data_type`.
fn literal(
    name: &str,
    args: &TableFunctionArgs,
    i: usize,
    data_type: &DataType,
) -> DfResult<ScalarValue> {
    match args.exprs().get(i) {
        Some(Expr::Literal(value, _)) => Ok(value.cast_to(data_type)?),
        _ => plan_err!("{name}: argument {} must be a literal", i + 1),
    }
}

#[derive(Debug)]
pub struct InferenceCapacity {
    pub sources: UnitEconomicsSources,
}

impl TableFunctionImpl for InferenceCapacity {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        const NAME: &str = "inference_capacity";
        if args.exprs().len() != 3 {
            return plan_err!(
                "{NAME}(model, peak_rps, redundancy) takes 3 arguments, got {}",
                args.exprs().len()
            );
        }
        let (
            ScalarValue::Utf8(Some(model)),
            ScalarValue::Float64(Some(peak_rps)),
            ScalarValue::Int64(Some(redundancy)),
        ) = (
            literal(NAME, &args, 0, &DataType::Utf8)?,
            literal(NAME, &args, 1, &DataType::Float64)?,
            literal(NAME, &args, 2, &DataType::Int64)?,
        )
        else {
            return plan_err!("{NAME}: model, peak_rps and redundancy must not be NULL");
        };
        Ok(computed(InferenceCapacityTable {
            sources: self.sources.clone(),
            model,
            peak_rps,
            redundancy,
        }))
    }
}

#[derive(Debug)]
struct InferenceCapacityTable {
    sources: UnitEconomicsSources,
    model: String,
    peak_rps: f64,
    redundancy: i64,
}

static CAPACITY_SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let number = |name| Field::new(name, DataType::Float64, true);
    let count = |name| Field::new(name, DataType::Int64, true);
    Arc::new(Schema::new(vec![
        Field::new("model", DataType::Utf8, false),
        number("peak_rps"),
        count("redundancy"),
        number("slo_objective"),
        count("windows"),
        count("windows_at_slo"),
        Field::new("best_window", timestamp(), true),
        number("safe_rps_per_replica"),
        number("gpus_per_replica"),
        count("replicas_needed"),
        number("gpus_needed"),
    ]))
});

#[async_trait]
impl Computed for InferenceCapacityTable {
    fn schema(&self) -> SchemaRef {
        CAPACITY_SCHEMA.clone()
    }

    async fn batches(&self, state: &dyn Session) -> DfResult<Vec<RecordBatch>> {
        let slos = declared_slos(&self.sources.catalog).await?;
        let objective = slos.find(Some(&self.model), None).map_or(
            DEFAULT_OBJECTIVE,
            gpuledger_ledger::unit_economics::SloSpec::objective,
        );
        let mut windows = Windows::default();
        let all_time = (
            ScalarValue::TimestampMicrosecond(Some(i64::MIN), Some("UTC".into())),
            ScalarValue::TimestampMicrosecond(Some(i64::MAX), Some("UTC".into())),
        );
        for_each_request(state, &self.sources.token_usage, &all_time, |request| {
            if request.model == Some(self.model.as_str()) {
                let slo = slos.find(request.model, request.priority);
                windows.add(request.ts, slo_met(&request.outcome, slo));
            }
        })
        .await?;
        let replicas = self.replicas(state).await?;
        let measured = windows.throughput(&replicas, objective);
        let replicas = replicas_needed(
            self.peak_rps,
            measured.safe_rps_per_replica,
            self.redundancy,
        );
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![self.model.as_str()])),
            Arc::new(Float64Array::from(vec![self.peak_rps])),
            Arc::new(Int64Array::from(vec![self.redundancy])),
            Arc::new(Float64Array::from(vec![objective])),
            Arc::new(Int64Array::from(vec![measured.windows])),
            Arc::new(Int64Array::from(vec![measured.windows_at_slo])),
            Arc::new(
                TimestampMicrosecondArray::from(vec![measured.best_window]).with_timezone("UTC"),
            ),
            Arc::new(Float64Array::from(vec![measured.safe_rps_per_replica])),
            Arc::new(Float64Array::from(vec![measured.gpus_per_replica])),
            Arc::new(Int64Array::from(vec![replicas])),
            Arc::new(Float64Array::from(vec![
                replicas
                    .zip(measured.gpus_per_replica)
                    .map(|(r, g)| r as f64 * g),
            ])),
        ];
        Ok(vec![RecordBatch::try_new(
            CAPACITY_SCHEMA.clone(),
            columns,
        )?])
    }
}

impl InferenceCapacityTable {
    /// The allocations of pods labelled with the model.
    async fn replicas(&self, state: &dyn Session) -> DfResult<Vec<ReplicaAllocation>> {
        let plan = LogicalPlanBuilder::scan(
            "allocations",
            provider_as_source(Arc::clone(&self.sources.allocations)),
            None,
        )?
        .filter(col("model").eq(lit(self.model.clone())))?
        .project(
            [
                "start_time",
                "end_time",
                "namespace",
                "workload",
                "pod",
                "share",
            ]
            .map(col),
        )?
        .build()?;
        let mut replicas = Vec::new();
        for batch in run(state, plan).await? {
            let times = |name| timestamps(&batch, name);
            let (start, end) = (times("start_time")?, times("end_time")?);
            let (namespace, workload, pod) = (
                strings(&batch, "namespace")?,
                strings(&batch, "workload")?,
                strings(&batch, "pod")?,
            );
            let share = floats(&batch, "share")?;
            for row in 0..batch.num_rows() {
                let part =
                    |values: &StringViewArray| text(values, row).unwrap_or_default().to_string();
                replicas.push(ReplicaAllocation {
                    replica: format!("{}/{}/{}", part(&namespace), part(&workload), part(&pod)),
                    span: Span::new(start.value(row), end.value(row)),
                    share: if share.is_valid(row) {
                        share.value(row)
                    } else {
                        1.0
                    },
                });
            }
        }
        Ok(replicas)
    }
}

#[derive(Debug)]
pub struct GpuFit {
    pub sources: UnitEconomicsSources,
}

impl TableFunctionImpl for GpuFit {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        if args.exprs().len() != 1 {
            return plan_err!("gpu_fit(gpus) takes 1 argument, got {}", args.exprs().len());
        }
        let ScalarValue::Int64(Some(gpus)) = literal("gpu_fit", &args, 0, &DataType::Int64)? else {
            return plan_err!("gpu_fit: gpus must not be NULL");
        };
        let Ok(gpus) = u32::try_from(gpus) else {
            return plan_err!("gpu_fit: gpus must be 0 or more (got {gpus})");
        };
        Ok(computed(GpuFitTable {
            sources: self.sources.clone(),
            gpus,
        }))
    }
}

#[derive(Debug)]
struct GpuFitTable {
    sources: UnitEconomicsSources,
    gpus: u32,
}

static FIT_SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let count = |name| Field::new(name, DataType::Int64, false);
    Arc::new(Schema::new(vec![
        Field::new("cluster", DataType::Utf8, false),
        Field::new("gpu_model", DataType::Utf8, false),
        Field::new("as_of", timestamp(), true),
        count("nodes"),
        count("gpus"),
        count("free_gpus"),
        count("largest_free_block"),
        count("free_node_gpus"),
        count("gpus_requested"),
        Field::new("can_start", DataType::Boolean, false),
    ]))
});

#[async_trait]
impl Computed for GpuFitTable {
    fn schema(&self) -> SchemaRef {
        FIT_SCHEMA.clone()
    }

    async fn batches(&self, state: &dyn Session) -> DfResult<Vec<RecordBatch>> {
        let nodes: Vec<Node> = declared_specs(&self.sources.catalog).await?;
        let (as_of, taken) = self.taken(state).await?;
        let mut groups: BTreeMap<(&str, &str), Vec<NodeFree>> = BTreeMap::new();
        for node in &nodes {
            let busy = taken
                .iter()
                .filter(|(c, n, _)| *c == node.cluster && *n == node.node)
                .count() as u32;
            groups
                .entry((&node.cluster, &node.gpu_model))
                .or_default()
                .push(NodeFree {
                    gpus: node.gpu_count,
                    free: node.gpu_count.saturating_sub(busy),
                });
        }
        let fits: Vec<_> = groups
            .iter()
            .map(|(&(cluster, model), nodes)| (cluster, model, fit(nodes, self.gpus)))
            .collect();
        let count = |f: fn(&(&str, &str, gpuledger_ledger::capacity::Fit)) -> u32| -> ArrayRef {
            Arc::new(fits.iter().map(|r| i64::from(f(r))).collect::<Int64Array>())
        };
        let columns: Vec<ArrayRef> = vec![
            Arc::new(fits.iter().map(|r| Some(r.0)).collect::<StringArray>()),
            Arc::new(fits.iter().map(|r| Some(r.1)).collect::<StringArray>()),
            Arc::new(TimestampMicrosecondArray::from(vec![as_of; fits.len()]).with_timezone("UTC")),
            count(|r| r.2.nodes),
            count(|r| r.2.gpus),
            count(|r| r.2.free_gpus),
            count(|r| r.2.largest_free_block),
            count(|r| r.2.free_node_gpus),
            Arc::new(Int64Array::from(vec![i64::from(self.gpus); fits.len()])),
            Arc::new(
                fits.iter()
                    .map(|r| Some(r.2.can_start))
                    .collect::<BooleanArray>(),
            ),
        ];
        Ok(vec![RecordBatch::try_new(FIT_SCHEMA.clone(), columns)?])
    }
}

impl GpuFitTable {
    /// The latest hour of `gpu_hours`, and the GPUs with allocated, reserved or fault time in it.
    async fn taken(
        &self,
        state: &dyn Session,
    ) -> DfResult<(Option<i64>, BTreeSet<(String, String, i32)>)> {
        let source = || provider_as_source(Arc::clone(&self.sources.gpu_hours));
        let latest = LogicalPlanBuilder::scan("gpu_hours", source(), None)?
            .aggregate(Vec::<Expr>::new(), vec![max(col("hour")).alias("hour")])?
            .build()?;
        let mut as_of = None;
        for batch in run(state, latest).await? {
            let hour = timestamps(&batch, "hour")?;
            as_of = as_of.or((!hour.is_empty()).then(|| value(&hour, 0)).flatten());
        }
        let Some(hour) = as_of else {
            return Ok((None, BTreeSet::new()));
        };
        let zero = |name: &str| coalesce(vec![col(name), lit(0.0)]);
        let at = ScalarValue::TimestampMicrosecond(Some(hour), Some("UTC".into()));
        let plan = LogicalPlanBuilder::scan("gpu_hours", source(), None)?
            .filter(
                col("hour").eq(lit(at)).and(
                    (zero("alloc_seconds") + zero("reserved_seconds") + zero("fault_seconds"))
                        .gt(lit(0.0)),
                ),
            )?
            .project(["cluster", "node", "gpu_index"].map(col))?
            .build()?;
        let mut taken = BTreeSet::new();
        for batch in run(state, plan).await? {
            let (cluster, node) = (strings(&batch, "cluster")?, strings(&batch, "node")?);
            let index = column(&batch, "gpu_index", &DataType::Int32)?;
            let index = index.as_primitive::<arrow::datatypes::Int32Type>();
            for row in 0..batch.num_rows() {
                taken.insert((
                    text(&cluster, row).unwrap_or_default().to_string(),
                    text(&node, row).unwrap_or_default().to_string(),
                    index.value(row),
                ));
            }
        }
        Ok((as_of, taken))
    }
}
