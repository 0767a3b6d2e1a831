//! Keeps the ledger in the lake up to date: `gpu_hours`, `cost_entries` and `allocations` are
//! built per UTC day from the landed tables and the declared catalog objects, and written back
//! as Parquet (restating the day's earlier build), so any engine reads the same numbers.
//!
//! Incremental: a built day remembers when it read its inputs. Input files committed after that
//! make the GPU-hours they touch dirty — telemetry its own nodes' hours plus the time its last
//! sample stands for; gateway requests every node's hours they fall in (they weigh `usage`
//! rules); scheduler events every node from the start of their day (a late stop ends an
//! allocation early, a stop without its start opens a run at the day's start); billing the
//! whole days it covers — and only those GPU-hours are recomputed. The day's journal and
//! balance are then recomputed from the stored and the new rows. A day built in an older
//! [`LEDGER_FORMAT`] is rebuilt whole.

pub mod error;
mod inputs;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use arrow::array::{Array, AsArray};
use arrow::datatypes::TimestampMicrosecondType;
use chrono::{DateTime, NaiveDate, Utc};
use datafusion::prelude::SessionContext;
use futures::TryFutureExt;
use gpuledger_lake::Lake;
use gpuledger_lake::catalog::{CommitOutcome, LedgerDay, NewBatch};
use gpuledger_lake::tables::Table;
use gpuledger_lake::writer::TableWriter;
use gpuledger_ledger::build::{
    LedgerInputs, LedgerOutput, Node, NodeKey, finish, prepare, rate_card_rates, resolve_team,
};
use gpuledger_ledger::gpu_hours::{ClassifyConfig, GpuHour};
use gpuledger_ledger::journal::{Balance, by_day};
use gpuledger_ledger::money::Money;
use gpuledger_ledger::time::{
    MICROS_PER_DAY, MICROS_PER_HOUR, Micros, Span, floor_day, floor_hour,
};

use gpuledger_query::ledger_inputs::file_telemetry;
pub use gpuledger_query::ledger_inputs::{Declared, declared, ts_literal};

pub use error::BuildError;
use gpuledger_query::{QueryError, new_session};

/// What one `ledger build` did to one day.
#[derive(Debug, Clone, PartialEq)]
pub struct DayReport {
    pub day: NaiveDate,
    /// Hours recomputed (24 for a day built for the first time).
    pub hours: usize,
    /// How many nodes' GPU-hours were recomputed in those hours; `None`: every node's.
    pub nodes: Option<usize>,
    pub gpu_hour_rows: usize,
    pub balance: Balance,
    pub warnings: Vec<String>,
    /// How many query-worker tasks computed the day's GPU-hours (0: this process did).
    pub worker_tasks: usize,
}

/// The format of the ledger tables this release builds, recorded with each day. Raised when a
/// table gains columns that stored rows cannot be given without their inputs: 2 added
/// `gpu_hours.memory_used_share` and `power_w`.
pub const LEDGER_FORMAT: i64 = 2;

/// The currency of the ledger's own tables: that of the billing lines.
const CURRENCY: &str = "USD";

/// Brings the given days up to date; returns what was rebuilt.
pub async fn build_ledger(
    lake: &Lake,
    declared: &Declared,
    days: impl IntoIterator<Item = NaiveDate>,
) -> Result<Vec<DayReport>, BuildError> {
    let ctx = new_session(lake)?;
    let built = lake.catalog().ledger_days().await?;
    let config = ClassifyConfig::default();
    let mut reports = Vec::new();
    // A day is computed while the day before is written and committed: writing is mostly one
    // thread, so the two share the cores; only one day's telemetry is held at a time, and the
    // days commit in order.
    let mut writing: Option<futures::future::BoxFuture<'_, Result<DayReport, BuildError>>> = None;
    for day in days {
        let computing = compute_day(lake, &ctx, declared, &built, day, &config);
        let computed = match writing.take() {
            Some(written) => {
                // The day before is written whatever becomes of this one: a failure here
                // leaves the days before it built, as when the days ran one after another.
                let (computed, written) = futures::join!(computing, written);
                reports.push(written?);
                computed?
            }
            None => computing.await?,
        };
        if let Some(computed) = computed {
            writing = Some(Box::pin(write_day(lake, declared, computed)));
        }
    }
    if let Some(written) = writing {
        reports.push(written.await?);
    }
    Ok(reports)
}

/// `day`'s ledger computed, when anything of it is new (`None` when nothing is); built again
/// without a query worker lost under it.
async fn compute_day(
    lake: &Lake,
    ctx: &SessionContext,
    declared: &Declared,
    built: &BTreeMap<String, LedgerDay>,
    day: NaiveDate,
    config: &ClassifyConfig,
) -> Result<Option<ComputedDay>, BuildError> {
    let window = day_span(day);
    // Before the catalog is asked what is new: a file committed from here on is new to the
    // next build, whether or not this one reads it.
    let started_at = Utc::now().timestamp_micros();
    let dirty = match built.get(&day.to_string()) {
        // A day of a newer format (a newer replica built it) is not built again whole, or two
        // releases side by side would rebuild each other's days round after round.
        Some(built) if built.built_at >= declared.changed_at && built.format >= LEDGER_FORMAT => {
            dirty(lake, ctx, window, built.built_at, config.max_sample_gap).await?
        }
        _ => Dirty::whole(window),
    };
    if dirty.hours.is_empty() {
        return Ok(None);
    }
    let mut lost = Vec::new();
    let mut computed = loop {
        match build_day(ctx, declared, window, &dirty, started_at, config).await {
            Err(error) if lost.len() < WORKER_LOSS_RETRIES => {
                let Some(down) = lost_workers(ctx, &error).await else {
                    return Err(error);
                };
                tracing::warn!("{day}: query worker {down} lost; building the day again");
                lost.push(down);
            }
            outcome => break outcome?,
        }
    };
    computed.lost_workers = lost;
    Ok(Some(computed))
}

/// How many times one day is built again after losing a query worker under its inputs (each
/// time the lost worker is left out of the next plans).
const WORKER_LOSS_RETRIES: usize = 3;

/// When `error` is a query that lost a worker: the workers that no longer answer.
async fn lost_workers(ctx: &SessionContext, error: &BuildError) -> Option<String> {
    let (BuildError::DataFusion(error) | BuildError::Query(QueryError::DataFusion(error))) = error
    else {
        return None;
    };
    gpuledger_query::distributed::lost_workers(ctx, error).await
}

/// The days that have telemetry or scheduler events, and the days billing lines cover: what
/// `ledger build` builds when no range is given. Sample data can span years with nothing in
/// between, so these are the days with rows, not every day between the first and the last.
/// Telemetry and event files are partitioned by the UTC day of their rows, so the catalog
/// names those days without a scan (a build with nothing new reads no telemetry at all).
pub async fn input_days(lake: &Lake) -> Result<BTreeSet<NaiveDate>, BuildError> {
    let mut days = BTreeSet::new();
    for table in [Table::GpuSamples, Table::SchedulerEvents] {
        for file in lake.catalog().active_files(table, None, None).await? {
            let day = file.partition_date.parse::<NaiveDate>().map_err(|_| {
                BuildError::Ledger(format!(
                    "{}: partition date {:?} is not YYYY-MM-DD",
                    file.path, file.partition_date
                ))
            })?;
            days.insert(day);
        }
    }
    days.extend(billing_days(lake).await?);
    Ok(days)
}

/// The days billing lines cover, from each line's start to the day its end falls in (charge
/// periods can span days, which the catalog's per-file start times do not say).
async fn billing_days(lake: &Lake) -> Result<BTreeSet<NaiveDate>, BuildError> {
    let ctx = new_session(lake)?;
    let sql = "SELECT DISTINCT date_trunc('day', charge_period_start),
                      date_trunc('day', coalesce(charge_period_end, charge_period_start) - INTERVAL '1 microsecond')
               FROM billing_lines";
    let mut days = BTreeSet::new();
    for batch in ctx.sql(sql).await?.collect().await? {
        let (first, last) = (
            batch.column(0).as_primitive::<TimestampMicrosecondType>(),
            batch.column(1).as_primitive::<TimestampMicrosecondType>(),
        );
        for row in 0..batch.num_rows() {
            let last = if last.is_valid(row) {
                last.value(row)
            } else {
                first.value(row)
            };
            days.extend(days_between(
                date_of(first.value(row)),
                date_of(last.max(first.value(row))),
            ));
        }
    }
    Ok(days)
}

/// The days a live ledger must bring up to date after inputs committed since `since`
/// (microseconds): the days new telemetry, events and gateway requests touch (telemetry through
/// the time its last sample stands for), every day billing covers when a bill landed, and every built day when a
/// declared object changed. Days after `today` are left for when they come. The catalog answers
/// all but the billing part, so a quiet round reads no Parquet.
pub async fn days_changed_since(
    lake: &Lake,
    declared: &Declared,
    since: Micros,
    today: NaiveDate,
) -> Result<BTreeSet<NaiveDate>, BuildError> {
    let catalog = lake.catalog();
    let gap = ClassifyConfig::default().max_sample_gap;
    let mut days = BTreeSet::new();
    for (table, reach) in [
        (Table::GpuSamples, gap),
        (Table::SchedulerEvents, 0),
        (Table::TokenUsage, 0),
    ] {
        for file in catalog.files_committed_since(table, since).await? {
            let last = date_of(file.max_ts.saturating_add(reach)).min(today);
            days.extend(days_between(date_of(file.min_ts), last));
        }
    }
    if !catalog
        .files_committed_since(Table::BillingLines, since)
        .await?
        .is_empty()
    {
        days.extend(billing_days(lake).await?);
    }
    if declared.changed_at > since {
        for day in lake.catalog().ledger_days().await?.keys() {
            if let Ok(day) = day.parse::<NaiveDate>() {
                days.insert(day);
            }
        }
    }
    days.retain(|day| *day <= today);
    Ok(days)
}

/// Every day from `from` to `to`, both included.
pub fn days_between(from: NaiveDate, to: NaiveDate) -> impl Iterator<Item = NaiveDate> {
    from.iter_days().take_while(move |d| *d <= to)
}

fn date_of(t: Micros) -> NaiveDate {
    DateTime::<Utc>::from_timestamp_micros(t)
        .expect("time in range")
        .date_naive()
}

pub fn day_span(day: NaiveDate) -> Span {
    let start = day
        .and_hms_opt(0, 0, 0)
        .expect("midnight")
        .and_utc()
        .timestamp_micros();
    Span::new(start, start + MICROS_PER_DAY)
}

/// What a build of a day recomputes: the GPU-hours of `nodes` (every node when `None`) in
/// `hours` (whole hours, in order).
#[derive(Debug, Clone, PartialEq)]
struct Dirty {
    hours: Vec<Span>,
    nodes: Option<BTreeSet<NodeKey>>,
}

impl Dirty {
    fn whole(window: Span) -> Self {
        Self {
            hours: vec![window],
            nodes: None,
        }
    }

    fn is_whole(&self, window: Span) -> bool {
        self.hours == [window] && self.nodes.is_none()
    }

    fn has_node(&self, cluster: &str, node: &str) -> bool {
        self.nodes
            .as_ref()
            .is_none_or(|nodes| nodes.contains(&(cluster.to_string(), node.to_string())))
    }

    /// From the start of the first dirty hour to the end of the last.
    fn reach(&self) -> Option<Span> {
        Some(Span::new(self.hours.first()?.start, self.hours.last()?.end))
    }

    /// The hour is asked first: most rows a build keeps are outside the dirty hours, and the
    /// node's lookup copies its name.
    fn covers(&self, cluster: &str, node: &str, hour: Micros) -> bool {
        self.hours.iter().any(|d| d.contains(hour)) && self.has_node(cluster, node)
    }
}

/// The GPU-hours of `window` that inputs committed after `built_at` touch. Late telemetry
/// touches its own nodes' hours (a GPU-hour reads only its own GPU's samples, and a node's
/// allocations only its own pods), to the day's end when it has XID readings; events, billing
/// and gateway requests touch every node.
async fn dirty(
    lake: &Lake,
    ctx: &SessionContext,
    window: Span,
    built_at: Micros,
    max_sample_gap: Micros,
) -> Result<Dirty, BuildError> {
    let catalog = lake.catalog();
    let mut touched: Vec<Span> = Vec::new();
    let mut nodes = Some(BTreeSet::new());
    for file in catalog
        .files_committed_since(Table::GpuSamples, built_at)
        .await?
    {
        let span = Span::new(file.min_ts, file.max_ts + max_sample_gap);
        if span.intersect(&window).is_empty() {
            continue;
        }
        // A file replaced since (its rows restated away, or merged by compaction) may be
        // deleted already: what it held is no longer known.
        let held = match file.replaced_by {
            Some(_) => None,
            None => file_telemetry(ctx, &file.path, file.bytes as u64)
                .await
                .inspect_err(|error| {
                    tracing::warn!(path = %file.path, %error, "late telemetry unread: every node's hours from it on are rebuilt");
                })
                .ok(),
        };
        // An XID reading opens or closes a GPU's fault until the next one (or the day's end).
        let to_the_end = held.as_ref().is_none_or(|f| f.xids);
        touched.push(if to_the_end {
            Span::new(span.start, span.end.max(window.end))
        } else {
            span
        });
        match (nodes.as_mut(), held) {
            (Some(nodes), Some(held)) => nodes.extend(held.nodes),
            _ => nodes = None,
        }
    }
    let mut everywhere = |span: Span| {
        if !span.intersect(&window).is_empty() {
            nodes = None;
            touched.push(span);
        }
    };
    for file in catalog
        .files_committed_since(Table::SchedulerEvents, built_at)
        .await?
    {
        // A late stop ends an allocation early; a stop whose start is not in the data opens a
        // run at the start of its day: everything from that day's start on may change.
        everywhere(Span::new(floor_day(file.min_ts), window.end));
    }
    for file in catalog
        .files_committed_since(Table::TokenUsage, built_at)
        .await?
    {
        // Requests and tokens weigh `usage` rules: their hours are rebuilt, so the day's journal
        // (recomputed whenever any hour is) splits the pools by the new usage.
        everywhere(Span::new(file.min_ts, file.max_ts + 1));
    }
    for file in catalog
        .files_committed_since(Table::BillingLines, built_at)
        .await?
    {
        // The manifest knows when lines start, not when they end: restate from their first day on.
        everywhere(Span::new(floor_day(file.min_ts), window.end));
    }
    let mut hours: BTreeSet<Micros> = BTreeSet::new();
    for span in touched
        .iter()
        .map(|s| s.intersect(&window))
        .filter(|s| !s.is_empty())
    {
        let mut hour = floor_hour(span.start);
        while hour < span.end {
            hours.insert(hour);
            hour += MICROS_PER_HOUR;
        }
    }
    Ok(Dirty {
        hours: hours
            .into_iter()
            .map(|h| Span::new(h, h + MICROS_PER_HOUR))
            .collect(),
        nodes,
    })
}

/// A day's ledger, computed and not yet written.
struct ComputedDay {
    window: Span,
    /// The GPU-hours recomputed (the whole day when an allocation changed outside the dirty
    /// ones).
    dirty: Dirty,
    started_at: Micros,
    out: LedgerOutput,
    worker_tasks: usize,
    /// Query workers lost under the day's inputs, each followed by a build of the day again.
    lost_workers: Vec<String>,
}

/// The ledger of `dirty` (its other GPU-hours kept as stored).
async fn build_day(
    ctx: &SessionContext,
    declared: &Declared,
    window: Span,
    dirty: &Dirty,
    started_at: Micros,
    config: &ClassifyConfig,
) -> Result<ComputedDay, BuildError> {
    // The day's inputs are read side by side: each is a small query, mostly planning and
    // catalog reads.
    let (events, billing, usage, mut stored) = futures::try_join!(
        inputs::events(ctx, window),
        inputs::billing(ctx, window).err_into(),
        inputs::usage(ctx, window).err_into(),
        async {
            Ok(if dirty.is_whole(window) {
                Vec::new()
            } else {
                inputs::stored_gpu_hours(ctx, window).await?
            })
        },
    )?;
    let mut inputs = LedgerInputs {
        window,
        nodes: declared.nodes.clone(),
        events,
        telemetry: Default::default(),
        pod_gpus: Default::default(),
        reservations: declared.reservations.clone(),
        billing,
        manual_costs: declared.manual_costs.clone(),
        rules: declared.rules.clone(),
        rate_card: declared.rate_card.clone(),
        allowed_teams: declared.allowed_teams.clone(),
        usage,
        config: *config,
    };
    let declared_nodes = inputs.nodes.len();
    let mut dirty = dirty.clone();
    let mut worker_tasks;
    let out = loop {
        let scope = identity_scope(&dirty, &inputs, &stored);
        let identities =
            inputs::gpu_identities(ctx, window, config.max_sample_gap, scope.as_ref()).await?;
        inputs.pod_gpus = identities.pod_gpus;
        // Telemetry only matters where GPU-hours are recomputed: load just the dirty span.
        let recomputed = dirty.reach().unwrap_or(window);
        inputs.nodes.truncate(declared_nodes);
        let whole_day = dirty.is_whole(window);
        let read_nodes: Option<BTreeSet<(&str, &str)>> = scope.as_ref().map(|nodes| {
            nodes
                .iter()
                .map(|(c, n)| (c.as_str(), n.as_str()))
                .collect()
        });
        let uuids: HashMap<(&str, &str, u32), &String> = identities
            .uuids
            .iter()
            .map(|((c, n, gpu), uuid)| ((c.as_str(), n.as_str(), *gpu), uuid))
            .collect();
        // The stored rows are moved, not copied: only this first round keeps any (a second
        // round builds the whole day).
        let kept: Vec<GpuHour> = std::mem::take(&mut stored)
            .into_iter()
            .filter(|r| !whole_day && !dirty.covers(&r.cluster, &r.node, r.hour))
            .map(|mut r| {
                let node = (r.cluster.as_str(), r.node.as_str());
                // A node whose telemetry was read again takes the UUID it names now.
                if read_nodes
                    .as_ref()
                    .is_none_or(|nodes| nodes.contains(&node))
                {
                    r.gpu_uuid = uuids
                        .get(&(node.0, node.1, r.gpu_index))
                        .map(|u| (*u).clone());
                }
                r
            })
            .collect();
        add_undeclared_nodes(
            &mut inputs,
            identities
                .gpus
                .iter()
                .map(|(cluster, node, gpu)| (cluster.as_str(), node.as_str(), *gpu))
                .chain(
                    kept.iter()
                        .map(|r| (r.cluster.as_str(), r.node.as_str(), r.gpu_index)),
                ),
        );
        let mut prepared = prepare(&inputs, &dirty.hours);
        let mut works = std::mem::take(&mut prepared.nodes);
        works.retain(|w| dirty.has_node(&w.node.cluster, &w.node.node));
        let gap = config.max_sample_gap;
        let run = gpuledger_query::gpu_hours_exec::gpu_hours(
            ctx,
            &prepared.plan,
            &works,
            &identities.uuids,
            Span::new(recomputed.start - gap, recomputed.end),
            Span::new(window.start - gap, window.end),
        )
        .await?;
        worker_tasks = run.worker_tasks;
        let out = finish(&inputs, prepared, run.rows, kept);
        // An allocation can change outside the dirty GPU-hours (late telemetry shows which GPU
        // a pod was on; a late start moves a run): then the kept hours are stale, and the whole
        // day is built again, so that an incremental build equals a build from scratch.
        if whole_day
            || inputs::allocations_unchanged_outside(ctx, window, &out.allocations, |c, n, h| {
                dirty.covers(c, n, h)
            })
            .await?
        {
            break out;
        }
        dirty = Dirty::whole(window);
    };

    Ok(ComputedDay {
        window,
        dirty,
        started_at,
        out,
        worker_tasks,
        lost_workers: Vec::new(),
    })
}

/// Writes a computed day's three tables, restating its earlier build, and records the day as
/// built from the inputs committed before it started.
async fn write_day(
    lake: &Lake,
    declared: &Declared,
    day: ComputedDay,
) -> Result<DayReport, BuildError> {
    let ComputedDay {
        window,
        dirty,
        started_at,
        out,
        worker_tasks,
        lost_workers,
    } = day;
    let batch_id = format!("ledger-{}-{}", date_of(window.start), &uuid_suffix());
    let mut writer = TableWriter::new(Arc::clone(lake.store()), batch_id.clone());
    let mut files = Vec::new();
    let allowed = declared.allowed_teams.as_ref();
    files.extend(
        writer
            .write(
                Table::GpuHours,
                &gpuledger_query::ledger_outputs::gpu_hours_batch(&out.gpu_hours),
            )
            .await?,
    );
    files.extend(
        writer
            .write(
                Table::CostEntries,
                &gpuledger_query::ledger_outputs::cost_entries_batch(&out.cost_entries, CURRENCY),
            )
            .await?,
    );
    let allocations =
        gpuledger_query::ledger_outputs::allocations_batch(&out.allocations, window, |a| {
            resolve_team(a.labels.team.as_deref(), allowed)
        });
    files.extend(writer.write(Table::Allocations, &allocations).await?);
    let batch = NewBatch {
        batch_id: batch_id.clone(),
        source: "ledger".into(),
        origin: format!("ledger build {}", date_of(window.start)),
        content_hash: batch_id.clone(),
        idempotency_key: None,
        records_read: out.gpu_hours.len() as u64,
        started_at,
    };
    match lake.catalog().commit_batch(&batch, &files, &[]).await {
        Ok(CommitOutcome::Duplicate(existing)) => {
            gpuledger_lake::retirement::discard(lake, &files).await;
            return Err(BuildError::Ledger(format!(
                "ledger batch {} collides with {}",
                batch_id, existing.batch_id
            )));
        }
        Err(error) => {
            gpuledger_lake::retirement::keep_after_failed_commit(&files);
            return Err(error.into());
        }
        Ok(_) => {}
    }
    lake.catalog()
        .record_ledger_day(
            &date_of(window.start).to_string(),
            &LedgerDay {
                built_at: started_at,
                format: LEDGER_FORMAT,
                batch_id: batch_id.clone(),
            },
        )
        .await?;
    // The day's earlier build leaves `tables/`, then this build enters it (lake/src/retirement.rs).
    gpuledger_lake::retirement::settle_after_commit(lake).await;
    Ok(DayReport {
        day: date_of(window.start),
        hours: (dirty.hours.iter().map(Span::len).sum::<Micros>() / MICROS_PER_HOUR) as usize,
        nodes: dirty.nodes.as_ref().map(BTreeSet::len),
        gpu_hour_rows: out.gpu_hours.len(),
        balance: out.balance,
        warnings: out
            .warnings
            .iter()
            .map(|w| format!("{}: {}", w.subject, w.message))
            .chain(lost_workers.into_iter().map(|down| {
                format!("query worker {down} was lost under the day's inputs: nothing of that attempt was kept, and the day was built again without it")
            }))
            .collect(),
        worker_tasks,
    })
}

/// The nodes whose telemetry a build of `dirty` must read the day's identities of (`None`:
/// every node): those it recomputes, those with a pod whose events name no GPU (its
/// allocation takes the GPUs telemetry saw it on), and the stored nodes no one declared (their
/// size is what telemetry shows). Every other node's telemetry is what its stored rows were
/// built from.
fn identity_scope(
    dirty: &Dirty,
    inputs: &LedgerInputs,
    stored: &[GpuHour],
) -> Option<BTreeSet<NodeKey>> {
    let mut scope = dirty.nodes.clone()?;
    scope.extend(inputs.events.iter().filter_map(|e| {
        let node = e.node.as_ref()?;
        (e.gpu_indices.is_empty() && e.namespace.is_some() && e.pod.is_some())
            .then(|| (e.cluster.clone(), node.clone()))
    }));
    let declared: BTreeSet<(&str, &str)> = inputs
        .nodes
        .iter()
        .map(|n| (n.cluster.as_str(), n.node.as_str()))
        .collect();
    scope.extend(
        stored
            .iter()
            .filter(|r| !declared.contains(&(r.cluster.as_str(), r.node.as_str())))
            .map(|r| (r.cluster.clone(), r.node.clone())),
    );
    Some(scope)
}

fn uuid_suffix() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_string()
}

/// Nodes the catalog does not declare come from `node_up` events, else from the GPUs seen in
/// telemetry or in the day's stored rows (`seen_gpus`; on demand, priced by the rate card): a
/// node is never silently ignored.
fn add_undeclared_nodes<'a>(
    inputs: &mut LedgerInputs,
    seen_gpus: impl Iterator<Item = (&'a str, &'a str, u32)>,
) {
    let declared: BTreeSet<(&str, &str)> = inputs
        .nodes
        .iter()
        .map(|n| (n.cluster.as_str(), n.node.as_str()))
        .collect();
    let mut discovered: BTreeMap<(String, String), Node> = BTreeMap::new();
    for event in &inputs.events {
        if let (Some(gpuledger_ledger::allocation::EventKind::NodeUp), Some(node)) =
            (event.kind, &event.node)
            && !declared.contains(&(event.cluster.as_str(), node.as_str()))
        {
            discovered.insert(
                (event.cluster.clone(), node.clone()),
                undeclared_node(&event.cluster, node, event.gpus.unwrap_or(0.0) as u32),
            );
        }
    }
    // A node an event brought up keeps the GPUs the event counts.
    let brought_up: BTreeSet<(String, String)> = discovered.keys().cloned().collect();
    for (cluster, node, gpu) in seen_gpus {
        if declared.contains(&(cluster, node)) {
            continue;
        }
        let key = (cluster.to_string(), node.to_string());
        if !brought_up.contains(&key) {
            let entry = discovered
                .entry(key)
                .or_insert_with(|| undeclared_node(cluster, node, 0));
            entry.gpu_count = entry.gpu_count.max(gpu + 1);
        }
    }
    inputs.nodes.extend(discovered.into_values());
}

fn undeclared_node(cluster: &str, node: &str, gpu_count: u32) -> Node {
    Node {
        cluster: cluster.into(),
        node: node.into(),
        resource_id: None,
        gpu_count,
        gpu_model: String::new(),
        capacity_type: "on_demand".into(),
        gpu_cost_share: 1.0,
        gpu_replicas: 1,
    }
}

/// Both sides of the ledger over `[from, to)`. The expected side comes from the inputs alone —
/// the billing lines, the declared manual costs, and for each day the nodes no billing line
/// prices at their declared rate × the GPU-seconds of their `gpu_hours` rows — and the
/// accounted side is the stored journal, so a journal built from stale or wrong prices shows.
pub async fn balance(
    lake: &Lake,
    declared: &Declared,
    window: Span,
) -> Result<Balance, BuildError> {
    balance_in(&new_session(lake)?, declared, window).await
}

/// [`balance`] read through `ctx`, a session over the lake (the weekly report's, which has the
/// week's ledger files decoded already).
pub async fn balance_in(
    ctx: &SessionContext,
    declared: &Declared,
    window: Span,
) -> Result<Balance, BuildError> {
    let billing = inputs::billing(ctx, window).await?;
    let billed: Money = billing
        .iter()
        .flat_map(|l| by_day(l.effective_cost, l.charge_period, window))
        .map(|(_, a)| a)
        .sum();
    let manual: Money = declared
        .manual_costs
        .iter()
        .flat_map(|m| by_day(m.amount, m.period, window))
        .map(|(_, a)| a)
        .sum();
    let seconds = inputs::gpu_seconds(ctx, window).await?;
    // Nodes a build found only in telemetry or events are priced as it prices them.
    let mut nodes = declared.nodes.clone();
    let mut known: BTreeSet<(String, String)> = nodes
        .iter()
        .map(|n| (n.cluster.clone(), n.node.clone()))
        .collect();
    for (_, cluster, node) in seconds.keys() {
        if known.insert((cluster.clone(), node.clone())) {
            nodes.push(undeclared_node(cluster, node, 0));
        }
    }
    let mut rate_card = Money::ZERO;
    let mut rates = BTreeMap::new();
    for ((day, cluster, node), seconds) in &seconds {
        let rates = rates.entry(*day).or_insert_with(|| {
            rate_card_rates(
                &nodes,
                &billing,
                &declared.rate_card,
                Span::new(*day, day + MICROS_PER_DAY),
            )
        });
        if let Some(rate) = rates.get(&(cluster.clone(), node.clone())) {
            rate_card += Money::from_f64(rate * seconds / 3600.0);
        }
    }
    let sums = ctx
        .sql(&format!(
            "SELECT CAST(coalesce(sum(amount), 0) AS DECIMAL(38, 12)) AS accounted
             FROM cost_entries WHERE day >= {} AND day < {}",
            ts_literal(window.start),
            ts_literal(window.end)
        ))
        .await?
        .collect()
        .await?;
    let accounted = Money::from_units(
        sums[0]
            .column(0)
            .as_primitive::<arrow::datatypes::Decimal128Type>()
            .value(0),
    );
    Ok(Balance {
        billed,
        manual,
        rate_card,
        accounted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuledger_ledger::allocation::{Event, EventKind};

    /// A node the catalog does not declare joins the day's nodes once: with the GPUs a
    /// `node_up` event counts (the last one's, whatever the telemetry shows), else one past
    /// the highest GPU index seen in telemetry or stored rows. A declared node is left as it is.
    #[test]
    fn undeclared_nodes_join_once_with_the_gpus_they_show() {
        let node_up = |node: &str, gpus: f64, ts: Micros| Event {
            ts,
            kind: Some(EventKind::NodeUp),
            cluster: "c".into(),
            node: Some(node.into()),
            gpus: Some(gpus),
            ..Event::default()
        };
        let mut inputs = LedgerInputs {
            nodes: vec![undeclared_node("c", "declared", 8)],
            events: vec![
                node_up("up", 2.0, 0),
                node_up("up", 4.0, 10),
                node_up("declared", 1.0, 0),
            ],
            ..LedgerInputs::default()
        };
        add_undeclared_nodes(
            &mut inputs,
            [
                ("c", "declared", 11),
                ("c", "up", 6),
                ("c", "seen", 1),
                ("c", "seen", 5),
                ("c", "seen", 2),
                ("other", "seen", 0),
            ]
            .into_iter(),
        );
        let nodes: Vec<(&str, &str, u32)> = inputs
            .nodes
            .iter()
            .map(|n| (n.cluster.as_str(), n.node.as_str(), n.gpu_count))
            .collect();
        assert_eq!(
            nodes,
            [
                ("c", "declared", 8),
                ("c", "seen", 6),
                ("c", "up", 4),
                ("other", "seen", 1)
            ]
        );
    }
}
