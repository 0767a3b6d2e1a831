//! `unit_economics(from, to)`: what inference costs per unit of **effective** output (docs/design.md §7):
//! per team, model, model version and quantization, priority, peak or off-peak, cache hit or miss
//! and prompt- and output-length bucket, the
//! requests and tokens of the window, which of them met their SLO, the GPU cost of the serving
//! workloads spread over them, and the cost per 1M SLO-met tokens and per SLO-met request.
//!
//! ```sql
//! select team, model, priority, cost_per_1m_tokens, slo_missed_cost
//! from unit_economics('2026-11-02', '2026-11-09') order by loaded_cost desc;
//! ```
//!
//! - **SLO-met** (`slo` catalog objects, read when the query runs): the status is a success status
//!   and every set target holds (`ttft_ms`, `latency_ms` at most the target); a missing
//!   measurement for a set target is not met. Models without an SLO: met when `success`.
//! - **Peak**: 08:00–20:00 UTC, Monday to Friday. **Prompt bucket**: input tokens `<1k`,
//!   `1k-8k`, `8k-32k`, `>=32k` (1k = 1,024); **output bucket**: output tokens `<256`, `256-1k`,
//!   `1k-4k`, `>=4k`; NULL when the gateway did not count them.
//! - **Builds**: `model_version` and `quantization` split the rows (NULL when the gateway did not
//!   say); SLOs and serving workloads are still found by `model`, so two builds of one model share
//!   its SLO and the cost of the workload that served them, by token share.
//! - **Which cost** (`gpuledger_ledger::unit_economics` has the rules): a request with a
//!   `workload` is served by the ledger's workload with that namespace and name; one without is
//!   served by its namespace's workloads whose allocations carry its `model` label. Their
//!   `gpu_hours` cost in `[from, to)` (busy + allocated idle) is `direct_cost`; `loaded_cost` adds
//!   each owning team's shared cost in proportion to its direct cost, from the `cost_entries` of
//!   the days the window touches (as `team_costs` spreads it). That cost is split over the rows
//!   it serves by input + output tokens. `team` is the team charged for those workloads, or the
//!   request's own `team` label when no workload served it — then every cost column is NULL.
//! - `cost_per_1m_tokens`, `cost_per_successful_request` and `slo_missed_cost` are over the
//!   loaded cost: cost / SLO-met tokens × 1e6, cost / SLO-met requests (NULL when none), and the
//!   missed traffic's token share of the cost.
//!
//! `unit_economics_daily(from, to)` gives the same rows per UTC day the window touches (a leading
//! `day` column), each day computed as `unit_economics` over that day's part of the window. It is
//! a function rather than a view so that a query names its window and reads only those days.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::datasource::TableProvider;
use datafusion::functions_aggregate::expr_fn::sum;
use datafusion::logical_expr::{Expr, col, lit, when};
use datafusion::physical_plan::execute_stream;
use futures::StreamExt;
use gpuledger_lake::Catalog;
use gpuledger_lake::tables::timestamp;
use gpuledger_ledger::time::MICROS_PER_DAY;
use gpuledger_ledger::unit_economics::{
    Costing, Outcome, Request, Row, Serving, SloSpec, Slos, TeamCost, UnitEconomics, WorkloadCost,
};

use super::support::{
    Computed, column, computed, declared_specs, floats, integers, money_or_zero, no_money, run,
    scan_window, several, strings, text, timestamps, value, window,
};

/// The lake tables the unit and training economics read, and the catalog that holds the SLOs.
#[derive(Debug, Clone)]
pub struct UnitEconomicsSources {
    pub token_usage: Arc<dyn TableProvider>,
    pub gpu_hours: Arc<dyn TableProvider>,
    pub cost_entries: Arc<dyn TableProvider>,
    pub allocations: Arc<dyn TableProvider>,
    /// Read by `training_economics` and `spot_savings`.
    pub scheduler_events: Arc<dyn TableProvider>,
    /// Read by `spot_savings`.
    pub billing_lines: Arc<dyn TableProvider>,
    pub catalog: Catalog,
}

/// A table function over [`UnitEconomicsSources`] for a window, whole or `_daily` (a leading
/// `day` column, each UTC day costed on its own): `unit_economics` and `value_report` are both
/// computed request by request from the same sources.
#[derive(Debug)]
pub struct SourcesFunction {
    /// The name of the whole-window form; the daily form adds `_daily`.
    pub name: &'static str,
    pub sources: UnitEconomicsSources,
    pub daily: bool,
    /// The table one call computes.
    pub table: fn(SourcesCall) -> Arc<dyn TableProvider>,
}

impl SourcesFunction {
    pub fn name(&self) -> String {
        if self.daily {
            format!("{}_daily", self.name)
        } else {
            self.name.to_string()
        }
    }
}

impl TableFunctionImpl for SourcesFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        Ok((self.table)(SourcesCall {
            sources: self.sources.clone(),
            bounds: window(&self.name(), &args)?,
            daily: self.daily,
        }))
    }
}

/// What one call of a [`SourcesFunction`] computes over.
#[derive(Debug)]
pub struct SourcesCall {
    pub(super) sources: UnitEconomicsSources,
    pub(super) bounds: (ScalarValue, ScalarValue),
    pub(super) daily: bool,
}

/// `unit_economics(from, to)` and `unit_economics_daily(from, to)`.
pub fn table(call: SourcesCall) -> Arc<dyn TableProvider> {
    computed(UnitEconomicsTable(call))
}

/// One window's unit economics, computed when scanned.
#[derive(Debug)]
struct UnitEconomicsTable(SourcesCall);

static DAILY_SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let mut fields = vec![Arc::new(Field::new("day", timestamp(), false))];
    fields.extend(SCHEMA.fields().iter().cloned());
    Arc::new(Schema::new(fields))
});

static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let text = |name| Field::new(name, DataType::Utf8, true);
    let flag = |name| Field::new(name, DataType::Boolean, true);
    let count = |name| Field::new(name, DataType::Int64, false);
    let money = |name| Field::new(name, DataType::Float64, true);
    Arc::new(Schema::new(vec![
        text("team"),
        text("model"),
        text("model_version"),
        text("quantization"),
        text("priority"),
        Field::new("peak", DataType::Boolean, false),
        flag("cache_hit"),
        text("prompt_bucket"),
        text("output_bucket"),
        text("served_by"),
        count("requests"),
        count("successful_slo_met_requests"),
        count("slo_missed_requests"),
        count("input_tokens"),
        count("output_tokens"),
        count("cached_tokens"),
        count("tokens_slo_met"),
        money("direct_cost"),
        money("loaded_cost"),
        money("cost_per_1m_tokens"),
        money("cost_per_successful_request"),
        money("slo_missed_cost"),
    ]))
});

#[async_trait]
impl Computed for UnitEconomicsTable {
    fn schema(&self) -> SchemaRef {
        if self.0.daily {
            DAILY_SCHEMA.clone()
        } else {
            SCHEMA.clone()
        }
    }

    async fn batches(&self, state: &dyn Session) -> DfResult<Vec<RecordBatch>> {
        let slos = self.slos().await?;
        let mut batches = Vec::new();
        if self.0.daily {
            for (day, bounds) in days(&self.0.bounds) {
                let rows = self.rows(state, &slos, &bounds).await?;
                let batch = rows_batch(&rows)?;
                let day = ScalarValue::TimestampMicrosecond(Some(day), Some("UTC".into()))
                    .to_array_of_size(rows.len())?;
                let mut columns = vec![day];
                columns.extend(batch.columns().iter().cloned());
                batches.push(RecordBatch::try_new(DAILY_SCHEMA.clone(), columns)?);
            }
        } else {
            batches.push(rows_batch(&self.rows(state, &slos, &self.0.bounds).await?)?);
        }
        Ok(batches)
    }
}

/// The UTC days a window touches, each with its part of the window.
pub(super) fn days(
    (from, to): &(ScalarValue, ScalarValue),
) -> Vec<(i64, (ScalarValue, ScalarValue))> {
    let (
        ScalarValue::TimestampMicrosecond(Some(from), tz),
        ScalarValue::TimestampMicrosecond(Some(to), _),
    ) = (from, to)
    else {
        return Vec::new();
    };
    let at = |t: i64| ScalarValue::TimestampMicrosecond(Some(t), tz.clone());
    let mut days = Vec::new();
    let mut day = from.div_euclid(MICROS_PER_DAY) * MICROS_PER_DAY;
    while day < *to {
        let next = day + MICROS_PER_DAY;
        days.push((day, (at(day.max(*from)), at(next.min(*to)))));
        day = next;
    }
    days
}

impl UnitEconomicsTable {
    async fn rows(
        &self,
        state: &dyn Session,
        slos: &Slos,
        bounds: &(ScalarValue, ScalarValue),
    ) -> DfResult<Vec<Row>> {
        Ok(costed(state, &self.0.sources, slos, bounds).await?.0)
    }

    async fn slos(&self) -> DfResult<Slos> {
        declared_slos(&self.0.sources.catalog).await
    }
}

pub(super) async fn declared_slos(catalog: &Catalog) -> DfResult<Slos> {
    Ok(Slos::new(declared_specs::<SloSpec>(catalog).await?))
}

/// One window's unit economics: its rows, and the costing that priced them.
pub(super) async fn costed(
    state: &dyn Session,
    sources: &UnitEconomicsSources,
    slos: &Slos,
    bounds: &(ScalarValue, ScalarValue),
) -> DfResult<(Vec<Row>, Costing)> {
    let mut economics = UnitEconomics::new(slos.clone(), serving(state, sources, bounds).await?);
    for_each_request(state, &sources.token_usage, bounds, |request| {
        economics.add(request);
    })
    .await?;
    Ok(economics.into_costing())
}

/// The workloads' GPU cost in the window, the models they serve, and each team's direct and
/// shared cost over the days the window touches.
async fn serving(
    state: &dyn Session,
    sources: &UnitEconomicsSources,
    bounds: &(ScalarValue, ScalarValue),
) -> DfResult<Serving> {
    let workloads = scan_window("gpu_hours", &sources.gpu_hours, "hour", bounds)?
        .filter(col("team").is_not_null().and(col("workload").is_not_null()))?
        .aggregate(
            vec![col("team"), col("namespace"), col("workload")],
            vec![
                sum(money_or_zero("cost_busy") + money_or_zero("cost_allocated_idle"))
                    .alias("direct"),
            ],
        )?
        .build()?;
    // Allocations are clipped to the day they are booked in: those overlapping the window
    // start on or after the day `from` falls in.
    let days = (start_of_day(&bounds.0), bounds.1.clone());
    let models = scan_window("allocations", &sources.allocations, "start_time", &days)?
        .filter(
            col("end_time")
                .gt(lit(bounds.0.clone()))
                .and(col("workload").is_not_null())
                .and(col("model").is_not_null()),
        )?
        .aggregate(
            vec![col("namespace"), col("workload"), col("model")],
            Vec::<Expr>::new(),
        )?
        .build()?;
    let bucket_sum = |buckets: &[&str], name: &str| -> DfResult<Expr> {
        let listed = buckets.iter().map(|b| lit(*b)).collect();
        Ok(
            sum(when(col("bucket").in_list(listed, false), col("amount")).otherwise(no_money())?)
                .alias(name),
        )
    };
    let team_costs = scan_window("cost_entries", &sources.cost_entries, "day", &days)?
        .filter(col("team").is_not_null())?
        .aggregate(
            vec![col("team")],
            vec![
                bucket_sum(&["direct", "allocated_idle"], "direct")?,
                bucket_sum(&["shared"], "shared")?,
            ],
        )?
        .build()?;

    let mut serving = Serving::default();
    for batch in run(state, workloads).await? {
        let (team, namespace, workload) = (
            strings(&batch, "team")?,
            strings(&batch, "namespace")?,
            strings(&batch, "workload")?,
        );
        let direct = floats(&batch, "direct")?;
        for row in 0..batch.num_rows() {
            serving.workloads.push(WorkloadCost {
                team: team.value(row).to_string(),
                namespace: text(&namespace, row).map(str::to_string),
                workload: workload.value(row).to_string(),
                direct: direct.value(row),
            });
        }
    }
    for batch in run(state, models).await? {
        let (namespace, workload, model) = (
            strings(&batch, "namespace")?,
            strings(&batch, "workload")?,
            strings(&batch, "model")?,
        );
        for row in 0..batch.num_rows() {
            serving.models.push((
                text(&namespace, row).map(str::to_string),
                workload.value(row).to_string(),
                model.value(row).to_string(),
            ));
        }
    }
    let mut teams = BTreeMap::new();
    for batch in run(state, team_costs).await? {
        let team = strings(&batch, "team")?;
        let (direct, shared) = (floats(&batch, "direct")?, floats(&batch, "shared")?);
        for row in 0..batch.num_rows() {
            teams.insert(
                team.value(row).to_string(),
                TeamCost {
                    direct: direct.value(row),
                    shared: shared.value(row),
                },
            );
        }
    }
    serving.teams = teams;
    Ok(serving)
}

/// Streams the window's requests into `each`: memory holds one batch at a time.
pub(super) async fn for_each_request(
    state: &dyn Session,
    token_usage: &Arc<dyn TableProvider>,
    bounds: &(ScalarValue, ScalarValue),
    mut each: impl FnMut(&Request),
) -> DfResult<()> {
    let columns = [
        "ts",
        "team",
        "namespace",
        "workload",
        "model",
        "model_version",
        "quantization",
        "priority",
        "input_tokens",
        "output_tokens",
        "cached_tokens",
        "ttft_ms",
        "latency_ms",
        "status",
        "cache_hit",
    ];
    let plan = scan_window("token_usage", token_usage, "ts", bounds)?
        .project(columns.map(col))?
        .build()?;
    let physical = state.create_physical_plan(&plan).await?;
    let mut batches = execute_stream(physical, state.task_ctx())?;
    while let Some(batch) = batches.next().await {
        let batch = batch?;
        let ts = timestamps(&batch, "ts")?;
        let [
            team,
            namespace,
            workload,
            model,
            model_version,
            quantization,
            priority,
            status,
        ] = several(
            &batch,
            strings,
            [
                "team",
                "namespace",
                "workload",
                "model",
                "model_version",
                "quantization",
                "priority",
                "status",
            ],
        )?;
        let [input, output, cached] = several(
            &batch,
            integers,
            ["input_tokens", "output_tokens", "cached_tokens"],
        )?;
        let (ttft, latency) = (floats(&batch, "ttft_ms")?, floats(&batch, "latency_ms")?);
        let cache_hit = column(&batch, "cache_hit", &DataType::Boolean)?;
        let cache_hit = cache_hit.as_boolean();
        for row in 0..batch.num_rows() {
            each(&Request {
                ts: ts.value(row),
                team: text(&team, row),
                namespace: text(&namespace, row),
                workload: text(&workload, row),
                model: text(&model, row),
                model_version: text(&model_version, row),
                quantization: text(&quantization, row),
                priority: text(&priority, row),
                input_tokens: value(&input, row),
                output_tokens: value(&output, row),
                cached_tokens: value(&cached, row),
                cache_hit: cache_hit.is_valid(row).then(|| cache_hit.value(row)),
                outcome: Outcome {
                    status: text(&status, row),
                    ttft_ms: value(&ttft, row),
                    latency_ms: value(&latency, row),
                },
            });
        }
    }
    Ok(())
}

/// The UTC midnight at or before a timestamp bound: the journal is by day.
fn start_of_day(bound: &ScalarValue) -> ScalarValue {
    match bound {
        ScalarValue::TimestampMicrosecond(Some(t), tz) => ScalarValue::TimestampMicrosecond(
            Some(t.div_euclid(MICROS_PER_DAY) * MICROS_PER_DAY),
            tz.clone(),
        ),
        other => other.clone(),
    }
}

fn rows_batch(rows: &[Row]) -> DfResult<RecordBatch> {
    let text = |f: fn(&Row) -> Option<&str>| -> ArrayRef {
        Arc::new(rows.iter().map(f).collect::<StringArray>())
    };
    let count =
        |f: fn(&Row) -> i64| -> ArrayRef { Arc::new(rows.iter().map(f).collect::<Int64Array>()) };
    let money = |f: fn(&Row) -> Option<f64>| -> ArrayRef {
        Arc::new(rows.iter().map(f).collect::<Float64Array>())
    };
    let columns = vec![
        text(|r| r.key.team.as_deref()),
        text(|r| r.key.model.as_deref()),
        text(|r| r.key.model_version.as_deref()),
        text(|r| r.key.quantization.as_deref()),
        text(|r| r.key.priority.as_deref()),
        Arc::new(
            rows.iter()
                .map(|r| Some(r.key.peak))
                .collect::<BooleanArray>(),
        ) as ArrayRef,
        Arc::new(
            rows.iter()
                .map(|r| r.key.cache_hit)
                .collect::<BooleanArray>(),
        ),
        text(|r| r.key.prompt_bucket),
        text(|r| r.key.output_bucket),
        text(|r| r.served_by.as_deref()),
        count(|r| r.traffic.requests),
        count(|r| r.traffic.slo_met_requests),
        count(|r| r.traffic.slo_missed_requests()),
        count(|r| r.traffic.input_tokens),
        count(|r| r.traffic.output_tokens),
        count(|r| r.traffic.cached_tokens),
        count(|r| r.traffic.tokens_slo_met),
        money(|r| r.direct_cost),
        money(|r| r.loaded_cost),
        money(|r| r.unit_costs.and_then(|c| c.per_1m_tokens)),
        money(|r| r.unit_costs.and_then(|c| c.per_successful_request)),
        money(|r| r.unit_costs.map(|c| c.slo_missed)),
    ];
    Ok(RecordBatch::try_new(SCHEMA.clone(), columns)?)
}
