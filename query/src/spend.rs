//! Spend out of the ledger for the REST API: a budget's spend over a window, costs aggregated by
//! window and dimension (`/v1/costs`), and the table functions over a window. Everything reads
//! through the session it is given, so a team-scoped session answers with its team's rows only.
//!
//! How each budget target is measured:
//! - a **team**: its `cost_entries` (direct, amortized shared costs, its own idle): everything
//!   `team_costs` shows;
//! - a **namespace**: the GPU-hour cost of its workloads in `gpu_hours` (direct cost; shared
//!   costs are spread over teams, not namespaces);
//! - a **cost center**: the GPU-hour cost of the workloads whose allocations carry that
//!   `cost_center` label. A workload is `(cluster, namespace, workload)`; one whose allocations
//!   carry several cost centers counts for the greatest by name, so nothing is counted twice.

use arrow::array::{Array, ArrayRef, AsArray, Float64Array, RecordBatch};
use arrow::datatypes::{DataType, Float64Type, TimestampMicrosecondType};
use chrono::{DateTime, Utc};
use datafusion::catalog::TableFunctionArgs;
use datafusion::common::{JoinType, ScalarValue};
use datafusion::functions_aggregate::expr_fn::{max, sum};
use datafusion::logical_expr::{Expr, cast, col, lit};
use datafusion::prelude::{DataFrame, SessionContext, coalesce};
use gpuledger_ledger::budget::{BudgetSpec, BudgetStatus, BudgetTarget, Month, status};

use crate::QueryError;
use crate::table_functions::no_money;
use crate::udf::date_trunc_utc::date_trunc;

/// A UTC instant in microseconds as a literal of the ledger's timestamp type.
fn instant(micros: i64) -> Expr {
    lit(ScalarValue::TimestampMicrosecond(
        Some(micros),
        Some("UTC".into()),
    ))
}

fn within(column: &str, from: i64, to: i64) -> Expr {
    col(column)
        .gt_eq(instant(from))
        .and(col(column).lt(instant(to)))
}

/// `gpu_hours` with each row's workload labels ([`LABEL_DIMENSIONS`]) from `allocations`.
async fn with_workload_labels(
    ctx: &SessionContext,
    hours: DataFrame,
) -> Result<DataFrame, QueryError> {
    let keys = ["cluster", "namespace", "workload"];
    let labels = ctx
        .table("allocations")
        .await?
        .aggregate(
            keys.iter().map(|k| col(*k)).collect(),
            LABEL_DIMENSIONS
                .iter()
                .map(|label| max(col(*label)).alias(*label))
                .collect(),
        )?
        .select(
            vec![
                col("cluster").alias("label_cluster"),
                col("namespace").alias("label_namespace"),
                col("workload").alias("label_workload"),
            ]
            .into_iter()
            .chain(LABEL_DIMENSIONS.iter().map(|label| col(*label)))
            .collect::<Vec<_>>(),
        )?;
    Ok(hours.join(
        labels,
        JoinType::Left,
        &keys,
        &["label_cluster", "label_namespace", "label_workload"],
        None,
    )?)
}

/// A result column as floats: the exact money sums turn into floats once, here, for JSON.
fn as_floats(column: &ArrayRef) -> Result<Float64Array, QueryError> {
    Ok(arrow::compute::cast(column, &DataType::Float64)
        .map_err(datafusion::error::DataFusionError::from)?
        .as_primitive::<Float64Type>()
        .clone())
}

/// The single sum of a one-row result; 0 for none or NULL.
async fn single_sum(frame: DataFrame) -> Result<f64, QueryError> {
    let batches = frame.collect().await?;
    let Some(batch) = batches.iter().find(|b| b.num_rows() > 0) else {
        return Ok(0.0);
    };
    let values = as_floats(batch.column(0))?;
    Ok(if values.is_null(0) {
        0.0
    } else {
        values.value(0)
    })
}

/// What `target` spent in `[from, to)` (microseconds), in the ledger's currency. Ledger days
/// (`cost_entries`) and hours (`gpu_hours`) that start in the window count whole.
pub async fn budget_spend(
    ctx: &SessionContext,
    target: &BudgetTarget,
    from: i64,
    to: i64,
) -> Result<f64, QueryError> {
    let frame = match target {
        BudgetTarget::Team(team) => ctx
            .table("cost_entries")
            .await?
            .filter(within("day", from, to).and(col("team").eq(lit(team.as_str()))))?
            .aggregate(vec![], vec![sum(col("amount"))])?,
        BudgetTarget::Namespace(namespace) => ctx
            .table("gpu_hours")
            .await?
            .filter(within("hour", from, to).and(col("namespace").eq(lit(namespace.as_str()))))?
            .aggregate(vec![], vec![sum(col("cost"))])?,
        BudgetTarget::CostCenter(cost_center) => {
            let hours = ctx
                .table("gpu_hours")
                .await?
                .filter(within("hour", from, to))?;
            with_workload_labels(ctx, hours)
                .await?
                .filter(col("cost_center").eq(lit(cost_center.as_str())))?
                .aggregate(vec![], vec![sum(col("cost"))])?
        }
    };
    single_sum(frame).await
}

/// A budget's status at `at`: its spend to date in the month of `at`, read through `ctx`, and
/// the forecast at that rate over the hours the ledger holds ([`covered_until`]), so the same
/// ledger gives the same forecast whenever it is asked. `None` for a spec without a single
/// target. What `/v1/budgets/{name}/status` answers and `budget_status(at)` lists.
pub async fn budget_status(
    ctx: &SessionContext,
    catalog: &gpuledger_lake::Catalog,
    spec: &BudgetSpec,
    at: DateTime<Utc>,
) -> Result<Option<(Month, BudgetStatus)>, QueryError> {
    let Some(target) = spec.target() else {
        return Ok(None);
    };
    let month = Month::of(at);
    let at = at.timestamp_micros();
    let spend = budget_spend(ctx, &target, month.start, at).await?;
    let covered = covered_until(catalog, &target, month.start, at).await?;
    let figures = status(spec.amount, &spec.thresholds, &month, covered, spend);
    Ok(Some((month, figures)))
}

/// The end of what the ledger holds of `target`'s measure in `[from, at)` (microseconds): `at`
/// when it is current, earlier when its newest hour (or, for a team, its newest day: a team's
/// cost entries are per day and count whole) ended before — the data stops, or the ledger lags;
/// `from` when it holds none. A run rate is spend over this span, so time with no data yet does
/// not dilute it, and the same ledger gives the same forecast whenever it is asked. From the
/// catalog's file statistics of the whole fleet: no Parquet is read, nothing team-specific
/// shows.
pub async fn covered_until(
    catalog: &gpuledger_lake::Catalog,
    target: &BudgetTarget,
    from: i64,
    at: i64,
) -> Result<i64, QueryError> {
    use gpuledger_lake::tables::Table;
    use gpuledger_ledger::time::{MICROS_PER_DAY, MICROS_PER_HOUR};
    let (table, step) = match target {
        BudgetTarget::Team(_) => (Table::CostEntries, MICROS_PER_DAY),
        BudgetTarget::Namespace(_) | BudgetTarget::CostCenter(_) => {
            (Table::GpuHours, MICROS_PER_HOUR)
        }
    };
    let newest = catalog
        .active_files(table, Some(from), Some(at))
        .await?
        .iter()
        .map(|f| f.max_ts)
        .max();
    Ok(newest.map_or(from, |start| (start + step).min(at)))
}

/// The dimensions `/v1/costs` aggregates and filters by.
pub const COST_DIMENSIONS: [&str; 9] = [
    "cluster",
    "node",
    "team",
    "namespace",
    "workload",
    "model",
    "cost_center",
    "environment",
    "workload_type",
];

/// Dimensions that come from the workload's attribution labels (kept on its allocations)
/// rather than from `gpu_hours` itself; `/v1/costs` takes them as `label:<key>` too.
pub const LABEL_DIMENSIONS: [&str; 4] = ["model", "cost_center", "environment", "workload_type"];

/// How long a `/v1/costs` window is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Day,
    /// ISO weeks, from Monday.
    Week,
    Month,
}

impl Step {
    pub fn name(self) -> &'static str {
        match self {
            Step::Day => "day",
            Step::Week => "week",
            Step::Month => "month",
        }
    }
}

/// A `/v1/costs` question; dimensions are names from [`COST_DIMENSIONS`].
#[derive(Debug, Clone)]
pub struct CostsQuery {
    pub from: i64,
    pub to: i64,
    pub step: Step,
    pub aggregate: Vec<String>,
    /// Each dimension with the values it may take (any of them); all dimensions must match.
    pub filters: Vec<(String, Vec<String>)>,
}

/// One group of one window: the window's start, the group's values of the aggregate (NULL for
/// the unallocated part of a GPU), and the sums over `gpu_hours`, in order: `gpu_hours` (every
/// GPU-hour: busy, allocated idle, reserved, unexplained and fault seconds / 3600),
/// `allocated_gpu_hours`, `cost` and `cost_busy`, `cost_allocated_idle`, `cost_reserved`,
/// `cost_unexplained`, `cost_fault`.
#[derive(Debug, Clone, PartialEq)]
pub struct CostRow {
    pub window_start: i64,
    pub keys: Vec<Option<String>>,
    pub measures: [f64; 8],
}

fn summed(expr: Expr, name: &str) -> Expr {
    coalesce(vec![sum(expr), lit(0.0)]).alias(name)
}

/// A money column's exact sum, zero for none.
fn summed_money(name: &str) -> Expr {
    coalesce(vec![sum(col(name)), no_money()]).alias(name)
}

fn seconds(name: &str) -> Expr {
    coalesce(vec![col(name), lit(0.0)])
}

/// `gpu_hours` in `[from, to)`, grouped by window and the aggregate, filtered.
pub async fn costs(ctx: &SessionContext, query: &CostsQuery) -> Result<Vec<CostRow>, QueryError> {
    let mut hours = ctx
        .table("gpu_hours")
        .await?
        .filter(within("hour", query.from, query.to))?;
    let needs_labels = query
        .aggregate
        .iter()
        .chain(query.filters.iter().map(|(d, _)| d))
        .any(|d| LABEL_DIMENSIONS.contains(&d.as_str()));
    if needs_labels {
        hours = with_workload_labels(ctx, hours).await?;
    }
    for (dimension, values) in &query.filters {
        let list = values.iter().map(|v| lit(v.as_str())).collect();
        hours = hours.filter(col(dimension.as_str()).in_list(list, false))?;
    }
    // `hour` is Timestamp(µs, UTC), and so is its truncation.
    let window = date_trunc(lit(query.step.name()), col("hour")).alias("window_start");
    let mut groups = vec![window];
    groups.extend(
        query
            .aggregate
            .iter()
            .map(|d| cast(col(d.as_str()), DataType::Utf8).alias(d.as_str())),
    );
    let all_seconds = [
        "busy_seconds",
        "allocated_idle_seconds",
        "reserved_seconds",
        "unexplained_seconds",
        "fault_seconds",
    ]
    .into_iter()
    .map(seconds)
    .reduce(|a, b| a + b)
    .expect("five terms");
    let aggregates = vec![
        summed(all_seconds / lit(3600.0), "gpu_hours"),
        summed(
            seconds("alloc_seconds") / lit(3600.0),
            "allocated_gpu_hours",
        ),
        summed_money("cost"),
        summed_money("cost_busy"),
        summed_money("cost_allocated_idle"),
        summed_money("cost_reserved"),
        summed_money("cost_unexplained"),
        summed_money("cost_fault"),
    ];
    let mut order = vec![col("window_start").sort(true, true)];
    order.extend(
        query
            .aggregate
            .iter()
            .map(|d| col(d.as_str()).sort(true, true)),
    );
    let batches = hours
        .aggregate(groups, aggregates)?
        .sort(order)?
        .collect()
        .await?;
    let mut rows = Vec::new();
    for batch in &batches {
        rows.extend(cost_rows(batch, query.aggregate.len())?);
    }
    Ok(rows)
}

fn cost_rows(batch: &RecordBatch, keys: usize) -> Result<Vec<CostRow>, QueryError> {
    let windows = batch.column(0).as_primitive::<TimestampMicrosecondType>();
    let key_columns: Vec<_> = (1..=keys)
        .map(|i| batch.column(i).as_string::<i32>())
        .collect();
    let measures = (0..8)
        .map(|i| as_floats(batch.column(1 + keys + i)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((0..batch.num_rows())
        .map(|row| CostRow {
            window_start: windows.value(row),
            keys: key_columns
                .iter()
                .map(|c| (!c.is_null(row)).then(|| c.value(row).to_string()))
                .collect(),
            measures: std::array::from_fn(|i| measures[i].value(row)),
        })
        .collect())
}

/// The rows of table function `name(from, to)` (microseconds), as the session sees them.
pub async fn table_function_rows(
    ctx: &SessionContext,
    name: &str,
    from: i64,
    to: i64,
) -> Result<Vec<RecordBatch>, QueryError> {
    let session = ctx.state();
    let args = [instant(from), instant(to)];
    let provider = ctx
        .table_function(name)?
        .create_table_provider_with_args(TableFunctionArgs::new(&args, &session))?;
    Ok(ctx.read_table(provider)?.collect().await?)
}
