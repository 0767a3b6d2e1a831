//! `spot_savings(from, to)`: did spot capacity pay (docs/design.md §7)? One row per spot node:
//! net savings = on-demand equivalent − spot cost − recompute cost − operations cost.
//!
//! ```sql
//! select cluster, node, on_demand_equivalent, spot_cost, recompute_cost, net_savings
//! from spot_savings('2026-11-02', '2026-11-09') order by net_savings;
//! ```
//!
//! The rules are `gpuledger_ledger::spot`'s:
//! - a declared `node` is spot when its `capacity_type` is `spot`, else when one of its billing
//!   lines in the window has `pricing_category` `Dynamic`, else when one's `charge_description`
//!   names `spot` (`spot_evidence` says which);
//! - `spot_cost` and `on_demand_equivalent` are its billing lines' `effective_cost` and
//!   `list_cost` prorated over the window (`on_demand_source` `list_cost`); without lines (or a list
//!   cost), its `gpu_hours` cost and GPU-hours × the rate card's `on_demand` price of its GPU model
//!   (`rate_card`); NULL when neither is known;
//! - `recompute_cost`: GPU-hours that preempted (or evicted) runs of training workloads on the node
//!   lost after their last checkpoint, as `training_economics` counts them, × the node's GPU-hour
//!   price in the ledger (`gpu_price`: its `gpu_hours` cost / GPU-hours in the window);
//! - `operations_cost`: the `spot_operations_cost` objects matching the node.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use arrow::array::{Array, ArrayRef, Float64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::datasource::{TableProvider, provider_as_source};
use datafusion::functions::expr_fn::coalesce;
use datafusion::functions_aggregate::expr_fn::sum;
use datafusion::logical_expr::{LogicalPlanBuilder, col, lit};
use gpuledger_lake::Catalog;
use gpuledger_ledger::build::{Node, matches_node};
use gpuledger_ledger::objects::RateCardSpec;
use gpuledger_ledger::spot::{
    NodeLine, OperationsCostSpec, Savings, SpotNode, billed_in, savings, spot_evidence,
};
use gpuledger_ledger::time::{MICROS_PER_HOUR, Span};
use gpuledger_ledger::training::Ending;

use super::support::{
    Computed, computed, declared_specs, floats, money_or_zero, run, scan_window, strings, text,
    timestamps, window,
};
use super::training_economics::training_runs;

#[derive(Debug)]
pub struct SpotSavings {
    pub gpu_hours: Arc<dyn TableProvider>,
    pub billing_lines: Arc<dyn TableProvider>,
    pub scheduler_events: Arc<dyn TableProvider>,
    pub catalog: Catalog,
}

impl TableFunctionImpl for SpotSavings {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        Ok(computed(SpotSavingsTable {
            gpu_hours: Arc::clone(&self.gpu_hours),
            billing_lines: Arc::clone(&self.billing_lines),
            scheduler_events: Arc::clone(&self.scheduler_events),
            catalog: self.catalog.clone(),
            bounds: window("spot_savings", &args)?,
        }))
    }
}

#[derive(Debug)]
struct SpotSavingsTable {
    gpu_hours: Arc<dyn TableProvider>,
    billing_lines: Arc<dyn TableProvider>,
    scheduler_events: Arc<dyn TableProvider>,
    catalog: Catalog,
    bounds: (ScalarValue, ScalarValue),
}

static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let text = |name| Field::new(name, DataType::Utf8, true);
    let number = |name| Field::new(name, DataType::Float64, true);
    Arc::new(Schema::new(vec![
        text("cluster"),
        text("node"),
        text("gpu_model"),
        text("spot_evidence"),
        number("gpu_hours"),
        number("gpu_price"),
        number("on_demand_equivalent"),
        text("on_demand_source"),
        number("spot_cost"),
        number("discount"),
        number("recompute_gpu_hours"),
        number("recompute_cost"),
        number("operations_cost"),
        number("net_savings"),
    ]))
});

/// A node's key: cluster and node name.
type NodeKey = (String, String);

/// One output row before it becomes columns.
struct Row<'a> {
    node: &'a Node,
    evidence: &'static str,
    inputs: SpotNode,
    savings: Savings,
}

#[async_trait]
impl Computed for SpotSavingsTable {
    fn schema(&self) -> SchemaRef {
        SCHEMA.clone()
    }

    async fn batches(&self, state: &dyn Session) -> DfResult<Vec<RecordBatch>> {
        let window = self.span();
        let window_hours = window.len() as f64 / MICROS_PER_HOUR as f64;
        let nodes: Vec<Node> = declared_specs(&self.catalog).await?;
        let rate_card: Vec<RateCardSpec> = declared_specs(&self.catalog).await?;
        let operations: Vec<OperationsCostSpec> = declared_specs(&self.catalog).await?;
        let lines = self.billing(state).await?;
        let usage = self.usage(state).await?;
        let lost = self.lost_gpu_hours(state).await?;

        let mut rows = Vec::new();
        for node in &nodes {
            let key = (node.cluster.clone(), node.node.clone());
            let node_lines: Vec<NodeLine> = lines
                .iter()
                .filter(|(resource, _)| matches_node(resource, node))
                .map(|(_, line)| line.as_node_line())
                .collect();
            let Some(evidence) = spot_evidence(node, &node_lines) else {
                continue;
            };
            let (gpu_hours, gpu_cost) = usage.get(&key).copied().unwrap_or_default();
            let inputs = SpotNode {
                gpu_hours,
                gpu_cost,
                billed: billed_in(&node_lines, window),
                on_demand_rate: rate_card
                    .iter()
                    .find(|r| {
                        r.base.gpu_model == node.gpu_model && r.base.capacity_type == "on_demand"
                    })
                    .map(|r| r.base.price_per_gpu_hour),
                lost_gpu_hours: lost.get(&key).copied().unwrap_or(0.0),
                operations_cost: operations
                    .iter()
                    .filter(|o| o.applies_to(&node.cluster, &node.node))
                    .map(|o| o.amount(window_hours, gpu_hours))
                    .fold(0.0, |total, amount| total + amount),
            };
            rows.push(Row {
                node,
                evidence: evidence.name(),
                savings: savings(&inputs),
                inputs,
            });
        }
        let batch = rows_batch(&rows)?;
        Ok(vec![batch])
    }
}

/// A billing line that names a resource, owned.
struct Line {
    period: Span,
    effective_cost: f64,
    list_cost: Option<f64>,
    pricing_category: Option<String>,
    charge_description: Option<String>,
}

impl Line {
    fn as_node_line(&self) -> NodeLine<'_> {
        NodeLine {
            charge_period: self.period,
            effective_cost: self.effective_cost,
            list_cost: self.list_cost,
            pricing_category: self.pricing_category.as_deref(),
            charge_description: self.charge_description.as_deref(),
        }
    }
}

impl SpotSavingsTable {
    fn span(&self) -> Span {
        match &self.bounds {
            (
                ScalarValue::TimestampMicrosecond(Some(from), _),
                ScalarValue::TimestampMicrosecond(Some(to), _),
            ) => Span::new(*from, *to),
            _ => Span::new(0, 0),
        }
    }

    /// Billing lines with a resource whose charge period overlaps the window.
    async fn billing(&self, state: &dyn Session) -> DfResult<Vec<(String, Line)>> {
        let (from, to) = &self.bounds;
        let plan = LogicalPlanBuilder::scan(
            "billing_lines",
            provider_as_source(Arc::clone(&self.billing_lines)),
            None,
        )?
        .filter(
            col("resource_id").is_not_null().and(
                col("charge_period_start").lt(lit(to.clone())).and(
                    coalesce(vec![col("charge_period_end"), col("charge_period_start")])
                        .gt_eq(lit(from.clone())),
                ),
            ),
        )?
        .project(
            [
                "resource_id",
                "charge_period_start",
                "charge_period_end",
                "pricing_category",
                "charge_description",
                "effective_cost",
                "list_cost",
            ]
            .map(col),
        )?
        .build()?;
        let mut lines = Vec::new();
        for batch in run(state, plan).await? {
            let times = |name| timestamps(&batch, name);
            let (start, end) = (times("charge_period_start")?, times("charge_period_end")?);
            let (resource, category, description) = (
                strings(&batch, "resource_id")?,
                strings(&batch, "pricing_category")?,
                strings(&batch, "charge_description")?,
            );
            let (effective, list) = (
                floats(&batch, "effective_cost")?,
                floats(&batch, "list_cost")?,
            );
            for row in 0..batch.num_rows() {
                let start_time = start.value(row);
                let end_time = end.is_valid(row).then(|| end.value(row));
                lines.push((
                    resource.value(row).to_string(),
                    Line {
                        period: Span::new(start_time, end_time.unwrap_or(start_time)),
                        effective_cost: if effective.is_valid(row) {
                            effective.value(row)
                        } else {
                            0.0
                        },
                        list_cost: list.is_valid(row).then(|| list.value(row)),
                        pricing_category: text(&category, row).map(str::to_string),
                        charge_description: text(&description, row).map(str::to_string),
                    },
                ));
            }
        }
        Ok(lines)
    }

    /// Each node's GPU-hours (every class) and their cost in the ledger.
    async fn usage(&self, state: &dyn Session) -> DfResult<HashMap<NodeKey, (f64, f64)>> {
        let zero = |name: &str| coalesce(vec![col(name), lit(0.0)]);
        let seconds = zero("alloc_seconds")
            + zero("reserved_seconds")
            + zero("unexplained_seconds")
            + zero("fault_seconds");
        let plan = scan_window("gpu_hours", &self.gpu_hours, "hour", &self.bounds)?
            .aggregate(
                vec![col("cluster"), col("node")],
                vec![
                    sum(seconds / lit(3600.0)).alias("gpu_hours"),
                    sum(money_or_zero("cost")).alias("cost"),
                ],
            )?
            .build()?;
        let mut usage = HashMap::new();
        for batch in run(state, plan).await? {
            let (cluster, node) = (strings(&batch, "cluster")?, strings(&batch, "node")?);
            let (hours, cost) = (floats(&batch, "gpu_hours")?, floats(&batch, "cost")?);
            for row in 0..batch.num_rows() {
                let key = (
                    text(&cluster, row).unwrap_or_default().to_string(),
                    text(&node, row).unwrap_or_default().to_string(),
                );
                usage.insert(key, (hours.value(row), cost.value(row)));
            }
        }
        Ok(usage)
    }

    /// GPU-hours preempted training runs lost after their last checkpoint, per node.
    async fn lost_gpu_hours(&self, state: &dyn Session) -> DfResult<HashMap<NodeKey, f64>> {
        let runs = training_runs(state, &self.scheduler_events, &self.bounds).await?;
        let mut lost = HashMap::new();
        for (_, run) in runs.training_runs() {
            if let (Ending::Preempted, Some(cluster), Some(node)) =
                (run.ending, &run.cluster, &run.node)
            {
                *lost.entry((cluster.clone(), node.clone())).or_insert(0.0) += run.lost_gpu_hours();
            }
        }
        Ok(lost)
    }
}

fn rows_batch(rows: &[Row]) -> DfResult<RecordBatch> {
    fn text<'a>(rows: &'a [Row], f: impl Fn(&'a Row) -> Option<&'a str>) -> ArrayRef {
        Arc::new(rows.iter().map(f).collect::<StringArray>())
    }
    let number = |f: fn(&Row) -> Option<f64>| -> ArrayRef {
        Arc::new(rows.iter().map(f).collect::<Float64Array>())
    };
    let columns = vec![
        text(rows, |r| Some(&r.node.cluster)),
        text(rows, |r| Some(&r.node.node)),
        text(rows, |r| Some(&r.node.gpu_model)),
        text(rows, |r| Some(r.evidence)),
        number(|r| Some(r.inputs.gpu_hours)),
        number(|r| r.savings.gpu_price),
        number(|r| r.savings.on_demand.map(|(amount, _)| amount)),
        text(rows, |r| {
            r.savings.on_demand.map(|(_, source)| source.name())
        }),
        number(|r| Some(r.savings.spot_cost)),
        number(|r| r.savings.discount()),
        number(|r| Some(r.inputs.lost_gpu_hours)),
        number(|r| Some(r.savings.recompute_cost)),
        number(|r| Some(r.savings.operations_cost)),
        number(|r| r.savings.net()),
    ];
    Ok(RecordBatch::try_new(SCHEMA.clone(), columns)?)
}
