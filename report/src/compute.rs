//! Computes every section of the weekly report with SQL over the ledger's tables and table
//! functions, in the same session the CLI and the servers use; the balance line is what
//! `gpuledger ledger check` computes.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;

use chrono::{Datelike, NaiveDate};
use datafusion::arrow::array::RecordBatch;
use datafusion::error::DataFusionError;
use datafusion::prelude::SessionContext;
use gpuledger_build::{Declared, balance_in, declared, ts_literal};
use gpuledger_lake::Lake;
use gpuledger_lake::tables::GPU_HOUR_SECONDS;
use gpuledger_ledger::journal::Balance as LedgerBalance;
use gpuledger_ledger::money::Money;
use gpuledger_query::columns::{money, records};
use gpuledger_query::decoded_files::{BOUNDED_TABLES, DecodedFiles};
use gpuledger_query::table_functions::TrainingRunsMemo;
use gpuledger_query::{SessionOptions, new_session_with};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::error::{ReportError, Result};
use crate::model::*;
use crate::week::IsoWeek;

const WEEK_SECONDS: f64 = 7.0 * 86_400.0;
const WEEK_HOURS: f64 = WEEK_SECONDS / 3600.0;

/// Past this many bytes of decoded files, a report reads the rest from Parquet each time.
const DECODED_BUDGET_BYTES: usize = 256 << 20;

/// The report of `week` over `lake`, with `limits` for the tenants section, in a session of its
/// own (the CLI's, the scheduled export's). The sections ask about twenty questions of the same
/// week's ledger files, so the session decodes each file once.
pub async fn weekly_report(
    lake: &Lake,
    week: IsoWeek,
    limits: &TenantLimits,
) -> Result<WeeklyReport> {
    let options = SessionOptions {
        decoded_files: Some(Arc::new(DecodedFiles::new(
            &BOUNDED_TABLES,
            DECODED_BUDGET_BYTES,
        ))),
        ..SessionOptions::default()
    };
    weekly_report_in(&new_session_with(lake, &options)?, lake, week, limits).await
}

/// The report of `week` as `session`, a session over `lake`, reads it: a server's, with its
/// memory limit and the files it keeps decoded. The report's memo of training runs goes on a
/// copy of it.
pub async fn weekly_report_in(
    session: &SessionContext,
    lake: &Lake,
    week: IsoWeek,
    limits: &TenantLimits,
) -> Result<WeeklyReport> {
    let mut state = session.state();
    // The training and optimization sections fold the same week's runs.
    state
        .config_mut()
        .set_extension(Arc::new(TrainingRunsMemo::default()));
    let ctx = &SessionContext::new_with_state(state);
    let declared = Arc::new(declared(lake.catalog()).await?);
    let w = Arc::new(Window::of(week));
    let previous = Arc::new(Window::of(week.previous()));
    // The sections read the same ledger and do not wait on one another: each runs on a task of
    // its own (`on_task`).
    let (
        this_ue,
        previous_ue,
        utilization,
        previous_idle,
        b,
        tenants,
        previous_totals,
        recommendations,
        capacity,
        queue,
        training,
        spot_net_savings,
    ) = tokio::try_join!(
        on_task(
            ctx,
            &w,
            |ctx, w| async move { unit_economics(&ctx, &w).await }
        ),
        on_task(ctx, &previous, |ctx, w| async move {
            unit_economics(&ctx, &w).await
        }),
        on_task(ctx, &w, |ctx, w| async move { utilization(&ctx, &w).await }),
        on_task(ctx, &previous, |ctx, w| async move {
            idle_classes(&ctx, &w).await
        }),
        {
            let declared = Arc::clone(&declared);
            on_task(ctx, &w, move |ctx, _| async move {
                Ok(balance_in(&ctx, &declared, week.span()).await?)
            })
        },
        {
            let limits = limits.clone();
            on_task(ctx, &w, move |ctx, w| async move {
                tenants(&ctx, &w, week, &limits).await
            })
        },
        on_task(ctx, &previous, |ctx, w| async move {
            team_totals(&ctx, &w).await
        }),
        on_task(
            ctx,
            &w,
            |ctx, w| async move { recommendations(&ctx, &w).await }
        ),
        {
            let declared = Arc::clone(&declared);
            on_task(ctx, &w, move |ctx, w| async move {
                capacity(&ctx, &w, &declared).await
            })
        },
        on_task(ctx, &w, |ctx, w| async move { queue(&ctx, &w).await }),
        on_task(ctx, &w, |ctx, w| async move { training(&ctx, &w).await }),
        on_task(
            ctx,
            &w,
            |ctx, w| async move { spot_net_savings(&ctx, &w).await }
        ),
    )?;
    let warnings = no_data(&utilization, &b, &w).into_iter().collect();
    let summary = summary(
        &tenants.teams,
        &previous_totals,
        &utilization.idle,
        &previous_idle,
    );
    Ok(WeeklyReport {
        schema_version: SCHEMA_VERSION,
        week: week.to_string(),
        from: w.from.clone(),
        to: w.to.clone(),
        currency: "USD".into(),
        warnings,
        summary,
        recommendations,
        capacity,
        queue,
        training,
        inference: inference(&this_ue, &previous_ue),
        tenants,
        optimization: optimization(
            spot_net_savings,
            &utilization.idle,
            &previous_idle,
            &this_ue,
            &previous_ue,
        ),
        utilization,
        balance: Balance {
            billed: r6(b.billed.to_f64()),
            manual: r6(b.manual.to_f64()),
            rate_card: r6(b.rate_card.to_f64()),
            expected: r6(b.expected().to_f64()),
            accounted: r6(b.accounted.to_f64()),
            difference: r6(b.difference().to_f64()),
            balanced: b.balances(),
        },
    })
}

/// The warning of a week the ledger holds nothing for: no allocated GPU time, no cost entries and
/// nothing billed. Declared nodes still count as capacity, so without it such a week would read
/// as a quiet, balanced one.
fn no_data(utilization: &Utilization, balance: &LedgerBalance, w: &Window) -> Option<String> {
    let empty = utilization.allocated_gpu_hours == 0.0
        && balance.accounted.is_zero()
        && balance.expected().is_zero();
    empty.then(|| {
        format!(
            "No data for this week: the ledger holds no allocated GPU time, no costs and no bills \
             from {} to {}. Check that telemetry, scheduler events and bills were ingested and \
             that `gpuledger ledger build` ran for these days; the figures below are empty, not \
             a quiet week.",
            w.from, w.to
        )
    })
}

/// `section` of the week `w` on a task of its own, so that the sections' planning and folding,
/// not only their scans, use every core: polled together by one task, they would take turns on
/// one thread. (The task is the caller's runtime's, as the sections' queries were before: the
/// query runtime's few threads are the users' queries'.) Dropping the report aborts the tasks.
async fn on_task<T, F, S>(ctx: &SessionContext, w: &Arc<Window>, section: S) -> Result<T>
where
    S: FnOnce(SessionContext, Arc<Window>) -> F,
    F: Future<Output = Result<T>> + Send + 'static,
    T: Send + 'static,
{
    /// Aborts the task when the report stops waiting for it.
    struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);
    impl<T> Drop for AbortOnDrop<T> {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let mut task = AbortOnDrop(tokio::spawn(section(ctx.clone(), Arc::clone(w))));
    match (&mut task.0).await {
        Ok(result) => result,
        Err(join_error) => Err(DataFusionError::ExecutionJoin(Box::new(join_error)).into()),
    }
}

/// A week as the SQL literals its queries take.
struct Window {
    from: String,
    to: String,
    span: gpuledger_ledger::time::Span,
}

impl Window {
    fn of(week: IsoWeek) -> Self {
        Self {
            from: week.monday().to_string(),
            to: week.next_monday().to_string(),
            span: week.span(),
        }
    }

    /// `column` within the week.
    fn filter(&self, column: &str) -> String {
        format!(
            "{column} >= {} AND {column} < {}",
            ts_literal(self.span.start),
            ts_literal(self.span.end)
        )
    }

    /// The arguments of a table function.
    fn args(&self) -> String {
        format!("'{}', '{}'", self.from, self.to)
    }
}

/// The rows of `sql`, each read into a `T` by column name (NULL columns are absent).
async fn rows<T: DeserializeOwned>(ctx: &SessionContext, sql: &str) -> Result<Vec<T>> {
    let batches = ctx.sql(sql).await?.collect().await?;
    records(&batches).map_err(|e| ReportError::Rows(format!("{e} in {sql}")))
}

/// The one row of an aggregate query.
async fn row<T: DeserializeOwned + Default>(ctx: &SessionContext, sql: &str) -> Result<T> {
    Ok(rows(ctx, sql).await?.into_iter().next().unwrap_or_default())
}

fn opt(x: Option<f64>) -> Option<f64> {
    x.filter(|x| x.is_finite()).map(r6)
}

async fn capacity(ctx: &SessionContext, w: &Window, declared: &Declared) -> Result<Capacity> {
    #[derive(Deserialize)]
    struct Gpu {
        cluster: Option<String>,
        node: Option<String>,
        gpu_index: i32,
        fault_seconds: f64,
        maintenance_seconds: f64,
    }
    let seen: Vec<Gpu> = rows(
        ctx,
        &format!(
            "SELECT cluster, node, gpu_index,
                    coalesce(sum(fault_seconds), 0) AS fault_seconds,
                    coalesce(sum(CASE WHEN reserved_reason = 'maintenance' THEN reserved_seconds END), 0)
                        AS maintenance_seconds
             FROM gpu_hours WHERE {} GROUP BY cluster, node, gpu_index",
            w.filter("hour")
        ),
    )
    .await?;
    // The fleet: every declared GPU, and every GPU the ledger saw in the week, with its fault
    // and maintenance seconds.
    type Key = (String, String, i32);
    let mut gpus: BTreeMap<Key, (f64, f64)> = BTreeMap::new();
    for node in &declared.nodes {
        for index in 0..node.gpu_count as i32 {
            gpus.insert((node.cluster.clone(), node.node.clone(), index), (0.0, 0.0));
        }
    }
    for g in &seen {
        let key = (
            g.cluster.clone().unwrap_or_default(),
            g.node.clone().unwrap_or_default(),
            g.gpu_index,
        );
        gpus.insert(key, (g.fault_seconds, g.maintenance_seconds));
    }
    let mut groups: BTreeMap<(String, String), CapacityGroup> = BTreeMap::new();
    for ((cluster, node, _), (fault_seconds, maintenance_seconds)) in &gpus {
        let declared_node = declared
            .nodes
            .iter()
            .find(|n| &n.cluster == cluster && &n.node == node);
        let model = declared_node
            .map(|n| n.gpu_model.clone())
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| "unknown".into());
        let flavor = declared_node
            .map(|n| n.capacity_type.clone())
            .unwrap_or_else(|| "unknown".into());
        let group = groups
            .entry((model.clone(), flavor.clone()))
            .or_insert_with(|| CapacityGroup {
                gpu_model: model,
                flavor,
                gpus: 0,
                available_gpus: 0,
                faulty_gpus: 0,
                maintenance_gpus: 0,
                gpu_hours: 0.0,
                available_gpu_hours: 0.0,
                fault_gpu_hours: 0.0,
                maintenance_gpu_hours: 0.0,
            });
        let (faulty, maintenance) = (*fault_seconds > 0.0, *maintenance_seconds > 0.0);
        group.gpus += 1;
        group.faulty_gpus += u64::from(faulty);
        group.maintenance_gpus += u64::from(maintenance && !faulty);
        group.available_gpus += u64::from(!faulty && !maintenance);
        group.gpu_hours += WEEK_HOURS;
        group.fault_gpu_hours += fault_seconds / 3600.0;
        group.maintenance_gpu_hours += maintenance_seconds / 3600.0;
    }
    let by_model: Vec<CapacityGroup> = groups
        .into_values()
        .map(|g| CapacityGroup {
            available_gpu_hours: r6(g.gpu_hours - g.fault_gpu_hours - g.maintenance_gpu_hours),
            gpu_hours: r6(g.gpu_hours),
            fault_gpu_hours: r6(g.fault_gpu_hours),
            maintenance_gpu_hours: r6(g.maintenance_gpu_hours),
            ..g
        })
        .collect();
    let count = |f: fn(&CapacityGroup) -> u64| by_model.iter().map(f).sum();
    let hours = |f: fn(&CapacityGroup) -> f64| r6(by_model.iter().map(f).sum());
    Ok(Capacity {
        total_gpus: count(|g| g.gpus),
        available_gpus: count(|g| g.available_gpus),
        faulty_gpus: count(|g| g.faulty_gpus),
        maintenance_gpus: count(|g| g.maintenance_gpus),
        fault_gpu_hours: hours(|g| g.fault_gpu_hours),
        gpu_hours: hours(|g| g.gpu_hours),
        available_gpu_hours: hours(|g| g.available_gpu_hours),
        maintenance_gpu_hours: hours(|g| g.maintenance_gpu_hours),
        by_model,
    })
}

async fn idle_classes(ctx: &SessionContext, w: &Window) -> Result<Vec<IdleClass>> {
    #[derive(Deserialize)]
    struct Row {
        class: String,
        reason: Option<String>,
        gpu_hours: Option<f64>,
        cost: Option<f64>,
    }
    let found: Vec<Row> = rows(
        ctx,
        &format!(
            "SELECT class, reason, gpu_hours, cost FROM idle_summary({}) WHERE class <> 'busy'",
            w.args()
        ),
    )
    .await?;
    // Fixed classes first, in docs/design.md §5's order, then reservations by reason.
    let rank = |class: &str| match class {
        "allocated_idle" => 0,
        "unexplained" => 2,
        "fault" => 3,
        _ => 1,
    };
    let mut classes: Vec<IdleClass> = found
        .into_iter()
        .filter(|r| r.class != "busy")
        .map(|r| IdleClass {
            class: match r.reason {
                Some(reason) => format!("{}:{reason}", r.class),
                None => r.class,
            },
            gpu_hours: r6(r.gpu_hours.unwrap_or(0.0)),
            cost: r6(r.cost.unwrap_or(0.0)),
        })
        .collect();
    classes.sort_by(|a, b| (rank(&a.class), &a.class).cmp(&(rank(&b.class), &b.class)));
    Ok(classes)
}

async fn utilization(ctx: &SessionContext, w: &Window) -> Result<Utilization> {
    #[derive(Deserialize, Default)]
    struct Hours {
        allocated: Option<f64>,
        busy: Option<f64>,
        sm_active: Option<f64>,
        memory: Option<f64>,
        power: Option<f64>,
        energy_wh: Option<f64>,
        cost: Option<f64>,
        busy_cost: Option<f64>,
        allocated_idle_cost: Option<f64>,
    }
    // A row's framebuffer share and power are the GPU's over its seconds: the week's are
    // weighted by the rows' seconds, as SM activity is by their allocated seconds.
    let h: Hours = row(
        ctx,
        &format!(
            "SELECT sum(alloc_seconds) / 3600 AS allocated, sum(busy_seconds) / 3600 AS busy,
                    sum(CASE WHEN alloc_seconds > 0 THEN sm_active * alloc_seconds END)
                        / sum(CASE WHEN alloc_seconds > 0 AND sm_active IS NOT NULL THEN alloc_seconds END)
                        AS sm_active,
                    sum(memory_used_share * {GPU_HOUR_SECONDS})
                        / sum(CASE WHEN memory_used_share IS NOT NULL THEN {GPU_HOUR_SECONDS} END) AS memory,
                    sum(power_w * {GPU_HOUR_SECONDS})
                        / sum(CASE WHEN power_w IS NOT NULL THEN {GPU_HOUR_SECONDS} END) AS power,
                    sum(energy_wh) AS energy_wh, sum(cost) AS cost, sum(cost_busy) AS busy_cost,
                    sum(cost_allocated_idle) AS allocated_idle_cost
             FROM gpu_hours WHERE {}",
            w.filter("hour")
        ),
    )
    .await?;
    Ok(Utilization {
        allocated_gpu_hours: r6(h.allocated.unwrap_or(0.0)),
        busy_gpu_hours: r6(h.busy.unwrap_or(0.0)),
        sm_active: opt(h.sm_active),
        memory_used_share: opt(h.memory),
        power_w_avg: opt(h.power),
        energy_kwh: r6(h.energy_wh.unwrap_or(0.0) / 1000.0),
        gpu_cost: r6(h.cost.unwrap_or(0.0)),
        busy_cost_share: {
            let busy = h.busy_cost.unwrap_or(0.0);
            let allocated = busy + h.allocated_idle_cost.unwrap_or(0.0);
            (allocated > 0.0).then(|| r6(busy / allocated))
        },
        idle: idle_classes(ctx, w).await?,
    })
}

async fn queue(ctx: &SessionContext, w: &Window) -> Result<Queue> {
    #[derive(Deserialize, Default)]
    struct Counts {
        queued: Option<u64>,
        admitted: Option<u64>,
        rejected: Option<u64>,
        preempted: Option<u64>,
        evicted: Option<u64>,
        borrowed: Option<u64>,
    }
    let count =
        |event: &str| format!("sum(CASE WHEN event = '{event}' THEN 1 ELSE 0 END) AS {event}");
    let c: Counts = row(
        ctx,
        &format!(
            "SELECT {}, {}, {}, {}, {},
                    sum(CASE WHEN event = 'admitted' AND lower(reason) LIKE '%borrow%' THEN 1 ELSE 0 END)
                        AS borrowed
             FROM scheduler_events WHERE {}",
            count("queued"),
            count("admitted"),
            count("rejected"),
            count("preempted"),
            count("evicted"),
            w.filter("ts")
        ),
    )
    .await?;
    #[derive(Deserialize, Default)]
    struct Waits {
        n: Option<u64>,
        p50: Option<f64>,
        p95: Option<f64>,
    }
    // A queued workload's wait ends at its first admission after it was queued.
    let waits: Waits = row(
        ctx,
        &format!(
            "WITH waits AS (
                 SELECT date_part('epoch', min(a.ts)) - date_part('epoch', q.ts) AS wait
                 FROM scheduler_events q JOIN scheduler_events a
                   ON a.event = 'admitted' AND a.ts >= q.ts
                  AND (a.cluster IS NOT DISTINCT FROM q.cluster)
                  AND (a.namespace IS NOT DISTINCT FROM q.namespace)
                  AND (a.workload IS NOT DISTINCT FROM q.workload)
                 WHERE q.event = 'queued' AND {}
                 GROUP BY q.cluster, q.namespace, q.workload, q.ts)
             SELECT count(*) AS n,
                    percentile_cont(0.5) WITHIN GROUP (ORDER BY wait) AS p50,
                    percentile_cont(0.95) WITHIN GROUP (ORDER BY wait) AS p95
             FROM waits",
            w.filter("q.ts")
        ),
    )
    .await?;
    Ok(Queue {
        queued: c.queued.unwrap_or(0),
        admitted: c.admitted.unwrap_or(0),
        waits_measured: waits.n.unwrap_or(0),
        wait_p50_seconds: opt(waits.p50),
        wait_p95_seconds: opt(waits.p95),
        rejections: c.rejected.unwrap_or(0),
        preemptions: c.preempted.unwrap_or(0),
        evictions: c.evicted.unwrap_or(0),
        borrowed_admissions: c.borrowed.unwrap_or(0),
    })
}

async fn training(ctx: &SessionContext, w: &Window) -> Result<Training> {
    #[derive(Deserialize, Default)]
    struct T {
        workloads: Option<u64>,
        runs: Option<u64>,
        succeeded: Option<u64>,
        failed: Option<u64>,
        preempted: Option<u64>,
        gpu_hours: Option<f64>,
        effective_gpu_hours: Option<f64>,
        cost: Option<f64>,
        failure_loss: Option<f64>,
        recompute_cost: Option<f64>,
    }
    let t: T = row(
        ctx,
        &format!(
            "SELECT count(*) AS workloads, sum(runs) AS runs, sum(succeeded) AS succeeded,
                    sum(failed) AS failed, sum(preempted) AS preempted, sum(gpu_hours) AS gpu_hours,
                    sum(effective_gpu_hours) AS effective_gpu_hours, sum(cost) AS cost,
                    sum(failure_loss) AS failure_loss, sum(recompute_cost) AS recompute_cost
             FROM training_economics({})",
            w.args()
        ),
    )
    .await?;
    let (succeeded, failed, preempted) = (
        t.succeeded.unwrap_or(0),
        t.failed.unwrap_or(0),
        t.preempted.unwrap_or(0),
    );
    let ended = succeeded + failed + preempted;
    Ok(Training {
        workloads: t.workloads.unwrap_or(0),
        runs: t.runs.unwrap_or(0),
        succeeded,
        failed,
        preempted,
        success_rate: (ended > 0).then(|| r6(succeeded as f64 / ended as f64)),
        gpu_hours: r6(t.gpu_hours.unwrap_or(0.0)),
        effective_gpu_hours: r6(t.effective_gpu_hours.unwrap_or(0.0)),
        cost: r6(t.cost.unwrap_or(0.0)),
        failure_loss: r6(t.failure_loss.unwrap_or(0.0)),
        recompute_cost: r6(t.recompute_cost.unwrap_or(0.0)),
    })
}

/// `unit_economics` of a week, per model.
#[derive(Debug, Deserialize)]
struct ModelRow {
    model: String,
    requests: u64,
    met: u64,
    tokens_met: u64,
    cost: Option<f64>,
    missed_cost: Option<f64>,
}

async fn unit_economics(ctx: &SessionContext, w: &Window) -> Result<Vec<ModelRow>> {
    rows(
        ctx,
        &format!(
            "SELECT model, sum(requests) AS requests, sum(successful_slo_met_requests) AS met,
                    sum(tokens_slo_met) AS tokens_met, sum(loaded_cost) AS cost,
                    sum(slo_missed_cost) AS missed_cost
             FROM unit_economics({}) WHERE model IS NOT NULL GROUP BY model ORDER BY model",
            w.args()
        ),
    )
    .await
}

fn model_figures(r: &ModelRow) -> ModelFigures {
    ModelFigures {
        requests: r.requests,
        slo_met_requests: r.met,
        slo_met_tokens: r.tokens_met,
        slo_met_tokens_per_second: r6(r.tokens_met as f64 / WEEK_SECONDS),
        cost: opt(r.cost),
        cost_per_1m_slo_met_tokens: r
            .cost
            .filter(|_| r.tokens_met > 0)
            .map(|c| r6(c / r.tokens_met as f64 * 1e6)),
        slo_missed_cost: opt(r.missed_cost),
    }
}

fn inference(this: &[ModelRow], previous: &[ModelRow]) -> Inference {
    let models: BTreeSet<&str> = this
        .iter()
        .chain(previous)
        .map(|r| r.model.as_str())
        .collect();
    let find =
        |rows: &[ModelRow], model: &str| rows.iter().find(|r| r.model == model).map(model_figures);
    Inference {
        models: models
            .into_iter()
            .map(|model| ModelWeeks {
                model: model.to_string(),
                week: find(this, model),
                previous_week: find(previous, model),
            })
            .collect(),
    }
}

/// The monthly budget spread over the days of the week, each day at its month's daily rate.
fn prorated(monthly: f64, week: IsoWeek) -> f64 {
    week.days()
        .map(|day| monthly / days_in_month(day) as f64)
        .sum()
}

fn days_in_month(day: NaiveDate) -> u32 {
    let first = day.with_day(1).expect("day 1");
    let next = first + chrono::Months::new(1);
    (next - first).num_days() as u32
}

async fn tenants(
    ctx: &SessionContext,
    w: &Window,
    week: IsoWeek,
    limits: &TenantLimits,
) -> Result<Tenants> {
    #[derive(Deserialize)]
    struct Team {
        team: String,
        gpu_hours: Option<f64>,
        direct: Option<f64>,
        shared: Option<f64>,
        total: Option<f64>,
    }
    let teams: Vec<Team> = rows(
        ctx,
        &format!(
            "SELECT team, gpu_hours, direct_cost + allocated_idle_cost AS direct,
                    shared_cost AS shared, total_cost AS total
             FROM team_costs({}) ORDER BY team",
            w.args()
        ),
    )
    .await?;
    #[derive(Deserialize)]
    struct Workload {
        namespace: Option<String>,
        workload: Option<String>,
        gpu_hours: Option<f64>,
        cost: Option<f64>,
    }
    let workloads: Vec<Workload> = rows(
        ctx,
        &format!(
            "SELECT namespace, workload, sum(alloc_seconds) / 3600 AS gpu_hours,
                    sum(coalesce(cost_busy, 0) + coalesce(cost_allocated_idle, 0)) AS cost
             FROM gpu_hours WHERE team = 'unattributed' AND {}
             GROUP BY namespace, workload ORDER BY namespace, workload",
            w.filter("hour")
        ),
    )
    .await?;
    let unattributed_total = teams
        .iter()
        .find(|t| t.team == "unattributed")
        .and_then(|t| t.total)
        .unwrap_or(0.0);
    Ok(Tenants {
        limits: if limits.teams.is_empty() {
            "not configured".into()
        } else {
            "configured".into()
        },
        teams: teams
            .into_iter()
            .map(|t| {
                let limit = limits.teams.get(&t.team);
                let total = t.total.unwrap_or(0.0);
                let gpu_hours = t.gpu_hours.unwrap_or(0.0);
                let budget = limit
                    .and_then(|l| l.monthly_budget)
                    .map(|m| prorated(m, week));
                let quota = limit.and_then(|l| l.quota_gpus);
                TeamRow {
                    gpu_hours: r6(gpu_hours),
                    direct_cost: r6(t.direct.unwrap_or(0.0)),
                    shared_cost: r6(t.shared.unwrap_or(0.0)),
                    total_cost: r6(total),
                    budget: budget.map(r6),
                    budget_deviation: budget.map(|b| r6(total - b)),
                    quota_gpus: quota,
                    quota_used_share: quota
                        .filter(|q| *q > 0.0)
                        .map(|q| r6(gpu_hours / (q * WEEK_HOURS))),
                    team: t.team,
                }
            })
            .collect(),
        unattributed: Unattributed {
            total_cost: r6(unattributed_total),
            workloads: workloads
                .into_iter()
                .map(|w| UnattributedWorkload {
                    namespace: w.namespace,
                    workload: w.workload,
                    gpu_hours: r6(w.gpu_hours.unwrap_or(0.0)),
                    cost: r6(w.cost.unwrap_or(0.0)),
                })
                .collect(),
        },
    })
}

/// Each team's total cost in a window.
async fn team_totals(ctx: &SessionContext, w: &Window) -> Result<BTreeMap<String, f64>> {
    #[derive(Deserialize)]
    struct Team {
        team: String,
        total: Option<f64>,
    }
    let teams: Vec<Team> = rows(
        ctx,
        &format!(
            "SELECT team, total_cost AS total FROM team_costs({})",
            w.args()
        ),
    )
    .await?;
    Ok(teams
        .into_iter()
        .map(|t| (t.team, t.total.unwrap_or(0.0)))
        .collect())
}

/// The cost of GPU time no team held: every idle class but allocated idle.
fn unallocated(classes: &[IdleClass]) -> f64 {
    classes
        .iter()
        .filter(|c| c.class != "allocated_idle")
        .map(|c| c.cost)
        .sum()
}

/// `change` over `previous`, or null when there was nothing before.
fn share_of(change: f64, previous: f64) -> Option<f64> {
    (previous != 0.0).then(|| r6(change / previous))
}

/// The week against the week before: the whole and per team, the largest change first.
fn summary(
    teams: &[TeamRow],
    previous_teams: &BTreeMap<String, f64>,
    idle: &[IdleClass],
    previous_idle: &[IdleClass],
) -> Summary {
    let mut changes: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for t in teams {
        changes.entry(&t.team).or_default().0 = t.total_cost;
    }
    for (team, total) in previous_teams {
        changes.entry(team).or_default().1 = *total;
    }
    let mut teams: Vec<TeamChange> = changes
        .into_iter()
        .map(|(team, (total, previous))| TeamChange {
            team: team.to_string(),
            total_cost: r6(total),
            previous_total_cost: r6(previous),
            change: r6(total - previous),
            change_share: share_of(total - previous, previous),
        })
        .collect();
    teams.sort_by(|a, b| b.change.abs().total_cmp(&a.change.abs()));
    let total = teams.iter().map(|t| t.total_cost).sum::<f64>() + unallocated(idle);
    let previous =
        teams.iter().map(|t| t.previous_total_cost).sum::<f64>() + unallocated(previous_idle);
    Summary {
        total_cost: r6(total),
        previous_total_cost: r6(previous),
        change: r6(total - previous),
        change_share: share_of(total - previous, previous),
        teams,
    }
}

/// The week's actions, largest first (`recommendations(from, to)`).
async fn recommendations(ctx: &SessionContext, w: &Window) -> Result<Recommendations> {
    #[derive(Deserialize)]
    struct Row {
        kind: String,
        team: Option<String>,
        action: String,
        cluster: Option<String>,
        node: Option<String>,
        namespace: Option<String>,
        workload: Option<String>,
        gpu_hours: Option<f64>,
        cost: Option<f64>,
        cost_per_day: Option<f64>,
    }
    let query = format!(
        "SELECT * FROM recommendations({}) ORDER BY cost DESC, kind, cluster, node, namespace, workload",
        w.args()
    );
    // A fleet's week has tens of thousands of actions (one per idle workload): they are counted
    // and summed from the columns, and only the top few are read as records.
    let batches = ctx.sql(&query).await?.collect().await?;
    let mut count = 0;
    let mut total = Money::ZERO;
    for batch in &batches {
        count += batch.num_rows() as u64;
        total += money(batch, "cost")?
            .iter()
            .flatten()
            .map(Money::from_units)
            .sum();
    }
    let first = first_rows(&batches, TOP_RECOMMENDATIONS);
    let top: Vec<Row> =
        records(&first).map_err(|e| ReportError::Rows(format!("{e} in {query}")))?;
    Ok(Recommendations {
        total_cost: r6(total.to_f64()),
        count,
        top: top
            .into_iter()
            .map(|r| Recommendation {
                kind: r.kind,
                owner: r.team.unwrap_or_else(|| "platform".into()),
                action: r.action,
                cluster: r.cluster,
                node: r.node,
                namespace: r.namespace,
                workload: r.workload,
                gpu_hours: r6(r.gpu_hours.unwrap_or(0.0)),
                cost: r6(r.cost.unwrap_or(0.0)),
                cost_per_day: r6(r.cost_per_day.unwrap_or(0.0)),
            })
            .collect(),
        query,
    })
}

/// The first `n` rows of `batches`, in order.
fn first_rows(batches: &[RecordBatch], n: usize) -> Vec<RecordBatch> {
    let mut first = Vec::new();
    let mut left = n;
    for batch in batches.iter().filter(|batch| batch.num_rows() > 0) {
        if left == 0 {
            break;
        }
        let take = batch.num_rows().min(left);
        first.push(batch.slice(0, take));
        left -= take;
    }
    first
}

/// Allocated idle + unexplained GPU-hours and cost.
fn waste(classes: &[IdleClass]) -> (f64, f64) {
    classes
        .iter()
        .filter(|c| c.class == "allocated_idle" || c.class == "unexplained")
        .fold((0.0, 0.0), |(h, c), class| {
            (h + class.gpu_hours, c + class.cost)
        })
}

/// SLO-met requests / requests over every model.
fn slo_met_share(rows: &[ModelRow]) -> Option<f64> {
    let requests: u64 = rows.iter().map(|r| r.requests).sum();
    let met: u64 = rows.iter().map(|r| r.met).sum();
    (requests > 0).then(|| r6(met as f64 / requests as f64))
}

/// The week's spot savings net of recompute and operations cost; `None` without spot nodes.
async fn spot_net_savings(ctx: &SessionContext, w: &Window) -> Result<Option<f64>> {
    #[derive(Deserialize, Default)]
    struct Spot {
        net: Option<f64>,
    }
    let spot: Spot = row(
        ctx,
        &format!(
            "SELECT sum(net_savings) AS net FROM spot_savings({})",
            w.args()
        ),
    )
    .await?;
    Ok(spot.net)
}

fn optimization(
    spot_net_savings: Option<f64>,
    idle: &[IdleClass],
    previous_idle: &[IdleClass],
    this_ue: &[ModelRow],
    previous_ue: &[ModelRow],
) -> Optimization {
    let (hours, cost) = waste(idle);
    let (previous_hours, previous_cost) = waste(previous_idle);
    let missed: Vec<f64> = this_ue.iter().filter_map(|r| r.missed_cost).collect();
    Optimization {
        waste_gpu_hours: r6(hours),
        waste_cost: r6(cost),
        previous_waste_gpu_hours: r6(previous_hours),
        previous_waste_cost: r6(previous_cost),
        reclaimed_gpu_hours: r6(previous_hours - hours),
        reclaimed_cost: r6(previous_cost - cost),
        spot_net_savings: opt(spot_net_savings),
        slo_met_share: slo_met_share(this_ue),
        previous_slo_met_share: slo_met_share(previous_ue),
        slo_missed_cost: (!missed.is_empty()).then(|| r6(missed.iter().sum())),
    }
}

#[cfg(test)]
mod tests;
