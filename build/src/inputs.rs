//! Reads one window's ledger inputs out of the lake with SQL, into the plain values of
//! `gpuledger_ledger::build::LedgerInputs`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{Decimal128Type, Float64Type, Int32Type, TimestampMicrosecondType};
use chrono::DateTime;
use datafusion::prelude::SessionContext;
use gpuledger_ledger::allocation::{Allocation, Event, EventKind, Labels, PodGpus};
use gpuledger_ledger::build::{BillingItem, GpuTelemetry};
use gpuledger_ledger::gpu_hours::{ClassCosts, GpuHour, Owner, UsageSample, usage_measure};
use gpuledger_ledger::money::Money;
use gpuledger_ledger::time::{MICROS_PER_HOUR, Micros, Span, floor_hour};

use crate::error::BuildError;

/// How far back to look for the start of an allocation still running in the window.
pub const EVENT_LOOKBACK: Micros = 31 * 24 * 3_600_000_000;

/// A SQL timestamp literal for a time in microseconds.
pub fn ts_literal(micros: Micros) -> String {
    let t = DateTime::from_timestamp_micros(micros).expect("time in range");
    format!("TIMESTAMP '{}'", t.format("%Y-%m-%dT%H:%M:%S%.6fZ"))
}

async fn query(ctx: &SessionContext, sql: &str) -> Result<Vec<RecordBatch>, BuildError> {
    Ok(ctx.sql(sql).await?.collect().await?)
}

/// Typed access to a result column by name.
struct Columns<'a>(&'a RecordBatch);

impl<'a> Columns<'a> {
    fn col(&self, name: &str) -> &'a ArrayRef {
        self.0
            .column_by_name(name)
            .unwrap_or_else(|| panic!("query returns {name}"))
    }
    fn str(&self, name: &str, row: usize) -> Option<String> {
        let c = self.col(name).as_string::<i32>();
        c.is_valid(row).then(|| c.value(row).to_string())
    }
    fn f64(&self, name: &str, row: usize) -> Option<f64> {
        let c = self.col(name).as_primitive::<Float64Type>();
        c.is_valid(row).then(|| c.value(row))
    }
    /// A `Decimal128(_, 12)` money column, exactly.
    fn money(&self, name: &str, row: usize) -> Option<Money> {
        let c = self.col(name).as_primitive::<Decimal128Type>();
        c.is_valid(row).then(|| Money::from_units(c.value(row)))
    }
    fn i32(&self, name: &str, row: usize) -> Option<i32> {
        let c = self.col(name).as_primitive::<Int32Type>();
        c.is_valid(row).then(|| c.value(row))
    }
    fn ts(&self, name: &str, row: usize) -> Option<Micros> {
        let c = self.col(name).as_primitive::<TimestampMicrosecondType>();
        c.is_valid(row).then(|| c.value(row))
    }
}

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
        let c = Columns(&batch);
        let indices = c.col("gpu_indices").as_list::<i32>();
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
            events.push(Event {
                ts: c.ts("ts", row).expect("ts is not null"),
                kind: c.str("event", row).and_then(|e| EventKind::parse(&e)),
                cluster: c.str("cluster", row).unwrap_or_default(),
                node: c.str("node", row),
                namespace: c.str("namespace", row),
                workload: c.str("workload", row),
                pod: c.str("pod", row),
                gpus: c.f64("gpus", row),
                gpu_indices,
                mig_profile: c.str("mig_profile", row),
                gpu_fraction: c.f64("gpu_fraction", row),
                reason: c.str("reason", row),
                labels: Labels {
                    team: c.str("team", row),
                    environment: c.str("environment", row),
                    workload_type: c.str("workload_type", row),
                    model: c.str("model", row),
                    cost_center: c.str("cost_center", row),
                },
            });
        }
    }
    Ok(events)
}

/// Per GPU: one usage reading per time for the whole GPU, and one per pod-labelled series (MIG
/// instances, pods sharing a time-sliced GPU). Rows of one series and time are merged first — an
/// input that lists each metric family apart may land a (series, time) as several partial rows —
/// then each reading takes one measure (`usage_measure`): the whole GPU's is the highest of its
/// series at that time (busy when any part of it is busy), never their average.
pub async fn telemetry(
    ctx: &SessionContext,
    span: Span,
    window: Span,
    max_sample_gap: Micros,
) -> Result<HashMap<(String, String, u32), GpuTelemetry>, BuildError> {
    let sql = format!(
        "SELECT cluster, node, gpu_index, namespace, pod, ts, max(sm_active) AS sm_active, max(gr_engine_active) AS gr_engine_active,
                max(gpu_util) AS gpu_util, max(power_w) AS power_w
         FROM gpu_samples WHERE {}
         GROUP BY cluster, node, gpu_index, mig_instance, gpu_uuid, namespace, pod, container, ts
         ORDER BY cluster, node, gpu_index, ts, namespace, pod",
        gpu_rows(Span::new(span.start - max_sample_gap, span.end))
    );
    let mut telemetry: HashMap<(String, String, u32), GpuTelemetry> = HashMap::new();
    for batch in query(ctx, &sql).await? {
        let c = Columns(&batch);
        for row in 0..batch.num_rows() {
            let key = (
                c.str("cluster", row).unwrap_or_default(),
                c.str("node", row).expect("filtered"),
                c.i32("gpu_index", row).expect("filtered") as u32,
            );
            let entry = telemetry.entry(key).or_default();
            let reading = UsageSample {
                ts: c.ts("ts", row).expect("ts is not null"),
                sm_active: usage_measure(
                    c.f64("sm_active", row),
                    c.f64("gr_engine_active", row),
                    c.f64("gpu_util", row),
                ),
                power_w: c.f64("power_w", row),
            };
            highest_at(&mut entry.samples, reading);
            if let (Some(namespace), Some(pod)) = (c.str("namespace", row), c.str("pod", row)) {
                highest_at(
                    entry.pod_samples.entry((namespace, pod)).or_default(),
                    reading,
                );
            }
        }
    }
    for (key, readings) in xid_readings(ctx, window, max_sample_gap).await? {
        telemetry.entry(key).or_default().xid = readings;
    }
    Ok(telemetry)
}

/// Appends a reading to a time-sorted list, or merges it into the reading of the same time by
/// taking the higher value of each measure.
fn highest_at(samples: &mut Vec<UsageSample>, reading: UsageSample) {
    let higher = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    match samples.last_mut() {
        Some(last) if last.ts == reading.ts => {
            last.sm_active = higher(last.sm_active, reading.sm_active);
            last.power_w = higher(last.power_w, reading.power_w);
        }
        _ => samples.push(reading),
    }
}

/// The changes of each GPU's last XID over the whole window (whatever hours are rebuilt, so a
/// fault that began before them is still seen): its first reading and every reading that differs
/// from the one before.
async fn xid_readings(
    ctx: &SessionContext,
    window: Span,
    max_sample_gap: Micros,
) -> Result<HashMap<(String, String, u32), Vec<(Micros, u32)>>, BuildError> {
    let sql = format!(
        "SELECT cluster, node, gpu_index, ts, xid FROM (
             SELECT cluster, node, gpu_index, ts, xid,
                    lag(xid) OVER (PARTITION BY cluster, node, gpu_index ORDER BY ts) AS previous
             FROM (SELECT cluster, node, gpu_index, ts, CAST(max(xid_last) AS INT) AS xid
                   FROM gpu_samples WHERE {} AND xid_last IS NOT NULL
                   GROUP BY cluster, node, gpu_index, ts))
         WHERE previous IS NULL OR previous <> xid
         ORDER BY cluster, node, gpu_index, ts",
        gpu_rows(Span::new(window.start - max_sample_gap, window.end))
    );
    let mut readings: HashMap<(String, String, u32), Vec<(Micros, u32)>> = HashMap::new();
    for batch in query(ctx, &sql).await? {
        let c = Columns(&batch);
        for row in 0..batch.num_rows() {
            let key = (
                c.str("cluster", row).unwrap_or_default(),
                c.str("node", row).expect("filtered"),
                c.i32("gpu_index", row).expect("filtered") as u32,
            );
            let xid = c.i32("xid", row).expect("filtered");
            readings
                .entry(key)
                .or_default()
                .push((c.ts("ts", row).expect("not null"), xid.max(0) as u32));
        }
    }
    Ok(readings)
}

/// What the window's telemetry says of each GPU, whatever hours are rebuilt: which pods
/// dcgm-exporter saw on it, and its UUID (the least, should it report several), so that every
/// row of a GPU names the same UUID however its hours were built.
pub struct GpuIdentities {
    pub pod_gpus: PodGpus,
    pub uuids: HashMap<(String, String, u32), String>,
}

pub async fn gpu_identities(
    ctx: &SessionContext,
    window: Span,
) -> Result<GpuIdentities, BuildError> {
    let sql = format!(
        "SELECT DISTINCT cluster, node, gpu_index, gpu_uuid, namespace, pod FROM gpu_samples
         WHERE {} AND (gpu_uuid IS NOT NULL OR (namespace IS NOT NULL AND pod IS NOT NULL))",
        gpu_rows(window)
    );
    let mut identities = GpuIdentities {
        pod_gpus: PodGpus::new(),
        uuids: HashMap::new(),
    };
    for batch in query(ctx, &sql).await? {
        let c = Columns(&batch);
        for row in 0..batch.num_rows() {
            let cluster = c.str("cluster", row).unwrap_or_default();
            let node = c.str("node", row).expect("filtered");
            let gpu = c.i32("gpu_index", row).expect("filtered") as u32;
            if let Some(uuid) = c.str("gpu_uuid", row) {
                identities
                    .uuids
                    .entry((cluster.clone(), node.clone(), gpu))
                    .and_modify(|known| {
                        if uuid < *known {
                            known.clone_from(&uuid)
                        }
                    })
                    .or_insert(uuid);
            }
            if let (Some(namespace), Some(pod)) = (c.str("namespace", row), c.str("pod", row)) {
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
/// in hours that `dirty` recomputes.
pub async fn allocations_unchanged_outside(
    ctx: &SessionContext,
    window: Span,
    allocations: &[Allocation],
    dirty: &[Span],
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
    let mut changed: Vec<Span> = Vec::new();
    for batch in query(ctx, &sql).await? {
        let c = Columns(&batch);
        for row in 0..batch.num_rows() {
            let span = Span::new(
                c.ts("start_time", row).expect("not null"),
                c.ts("end_time", row).expect("not null"),
            );
            let stored = (
                c.str("cluster", row).unwrap_or_default(),
                c.str("node", row).unwrap_or_default(),
                c.i32("gpu_index", row).expect("not null") as u32,
                span.start,
                span.end,
                [
                    c.str("namespace", row),
                    c.str("workload", row),
                    c.str("pod", row),
                    c.str("team_label", row),
                ],
                c.f64("share", row).unwrap_or(0.0).to_bits(),
            );
            if !new.remove(&stored) {
                changed.push(span);
            }
        }
    }
    changed.extend(new.iter().map(|k| Span::new(k.3, k.4)));
    let covered = |t: Micros| dirty.iter().any(|d| d.contains(t));
    Ok(changed.iter().all(|span| {
        let mut hour = floor_hour(span.start);
        while hour < span.end {
            if !covered(hour) {
                return false;
            }
            hour += MICROS_PER_HOUR;
        }
        true
    }))
}

/// Telemetry rows of identified GPUs in a span.
fn gpu_rows(span: Span) -> String {
    format!(
        "ts >= {} AND ts < {} AND node IS NOT NULL AND gpu_index IS NOT NULL",
        ts_literal(span.start),
        ts_literal(span.end)
    )
}

/// Billing lines whose charge period overlaps the window, with the FOCUS columns and tags that
/// shared-cost rules match on.
pub async fn billing(ctx: &SessionContext, window: Span) -> Result<Vec<BillingItem>, BuildError> {
    const RULE_COLUMNS: [&str; 10] = [
        "service_category",
        "service_subcategory",
        "service_name",
        "charge_category",
        "provider_name",
        "sub_account_id",
        "sub_account_name",
        "region_id",
        "sku_id",
        "resource_type",
    ];
    let sql = format!(
        "SELECT charge_period_start, coalesce(charge_period_end, charge_period_start) AS charge_period_end,
                effective_cost, resource_id, tags, {}
         FROM billing_lines
         WHERE charge_period_start < {} AND coalesce(charge_period_end, charge_period_start) >= {}",
        RULE_COLUMNS.join(", "),
        ts_literal(window.end),
        ts_literal(window.start)
    );
    let mut lines = Vec::new();
    for batch in query(ctx, &sql).await? {
        let c = Columns(&batch);
        for row in 0..batch.num_rows() {
            let mut attributes: BTreeMap<String, String> = RULE_COLUMNS
                .iter()
                .filter_map(|name| c.str(name, row).map(|v| (name.to_string(), v)))
                .collect();
            if let Some(resource) = c.str("resource_id", row) {
                attributes.insert("resource_id".into(), resource);
            }
            if let Some(serde_json::Value::Object(tags)) = c
                .str("tags", row)
                .and_then(|t| serde_json::from_str(&t).ok())
            {
                for (key, value) in tags {
                    let value = match value {
                        serde_json::Value::String(s) => s,
                        other => other.to_string(),
                    };
                    attributes.insert(format!("tags.{}", key.trim()), value);
                }
            }
            lines.push(BillingItem {
                charge_period: Span::new(
                    c.ts("charge_period_start", row).expect("not null"),
                    c.ts("charge_period_end", row).expect("coalesced"),
                ),
                effective_cost: c.money("effective_cost", row).unwrap_or_default(),
                resource_id: c.str("resource_id", row),
                attributes,
            });
        }
    }
    Ok(lines)
}

/// Usage measures for `usage` rules, per day and team: `requests` and `tokens` from the gateway.
pub async fn usage(
    ctx: &SessionContext,
    window: Span,
) -> Result<BTreeMap<String, BTreeMap<(Micros, String), f64>>, BuildError> {
    let sql = format!(
        "SELECT date_trunc('day', ts) AS day, team, CAST(count(*) AS DOUBLE) AS requests,
                CAST(sum(coalesce(input_tokens, 0) + coalesce(output_tokens, 0)) AS DOUBLE) AS tokens
         FROM token_usage WHERE ts >= {} AND ts < {} AND team IS NOT NULL GROUP BY 1, 2",
        ts_literal(window.start),
        ts_literal(window.end)
    );
    let mut usage: BTreeMap<String, BTreeMap<(Micros, String), f64>> = BTreeMap::new();
    for batch in query(ctx, &sql).await? {
        let c = Columns(&batch);
        for row in 0..batch.num_rows() {
            let day = c.ts("day", row).expect("not null");
            let team = c.str("team", row).expect("filtered");
            for measure in ["requests", "tokens"] {
                usage
                    .entry(measure.into())
                    .or_default()
                    .insert((day, team.clone()), c.f64(measure, row).unwrap_or(0.0));
            }
        }
    }
    Ok(usage)
}

/// The GPU-seconds of the stored `gpu_hours` rows of a window, whatever their class, per
/// (day, cluster, node): what the balance prices by the rate card.
pub async fn gpu_seconds(
    ctx: &SessionContext,
    window: Span,
) -> Result<BTreeMap<(Micros, String, String), f64>, BuildError> {
    let sql = format!(
        "SELECT date_trunc('day', hour) AS day, cluster, node,
                sum(busy_seconds + allocated_idle_seconds + reserved_seconds + unexplained_seconds
                    + fault_seconds) AS seconds
         FROM gpu_hours WHERE hour >= {} AND hour < {} GROUP BY 1, 2, 3",
        ts_literal(window.start),
        ts_literal(window.end)
    );
    let mut seconds = BTreeMap::new();
    for batch in query(ctx, &sql).await? {
        let c = Columns(&batch);
        for row in 0..batch.num_rows() {
            seconds.insert(
                (
                    c.ts("day", row).expect("not null"),
                    c.str("cluster", row).unwrap_or_default(),
                    c.str("node", row).unwrap_or_default(),
                ),
                c.f64("seconds", row).unwrap_or(0.0),
            );
        }
    }
    Ok(seconds)
}

/// The stored `gpu_hours` rows of a window (kept when only some hours are recomputed).
pub async fn stored_gpu_hours(
    ctx: &SessionContext,
    window: Span,
) -> Result<Vec<GpuHour>, BuildError> {
    let sql = format!(
        "SELECT * FROM gpu_hours WHERE hour >= {} AND hour < {}",
        ts_literal(window.start),
        ts_literal(window.end)
    );
    let mut rows = Vec::new();
    for batch in query(ctx, &sql).await? {
        let c = Columns(&batch);
        let f = |name: &str, row: usize| c.f64(name, row).unwrap_or(0.0);
        let m = |name: &str, row: usize| c.money(name, row).unwrap_or(Money::ZERO);
        for row in 0..batch.num_rows() {
            rows.push(GpuHour {
                hour: c.ts("hour", row).expect("not null"),
                cluster: c.str("cluster", row).unwrap_or_default(),
                node: c.str("node", row).unwrap_or_default(),
                gpu_index: c.i32("gpu_index", row).expect("not null") as u32,
                gpu_uuid: c.str("gpu_uuid", row),
                owner: c.str("team", row).map(|team| Owner {
                    team,
                    namespace: c.str("namespace", row),
                    workload: c.str("workload", row),
                }),
                alloc_seconds: f("alloc_seconds", row),
                busy_seconds: f("busy_seconds", row),
                allocated_idle_seconds: f("allocated_idle_seconds", row),
                reserved_seconds: f("reserved_seconds", row),
                reserved_reason: c.str("reserved_reason", row),
                unexplained_seconds: f("unexplained_seconds", row),
                fault_seconds: f("fault_seconds", row),
                sm_active: c.f64("sm_active", row),
                energy_wh: f("energy_wh", row),
                cost: m("cost", row),
                class_costs: ClassCosts {
                    busy: m("cost_busy", row),
                    allocated_idle: m("cost_allocated_idle", row),
                    reserved: m("cost_reserved", row),
                    unexplained: m("cost_unexplained", row),
                    fault: m("cost_fault", row),
                },
            });
        }
    }
    Ok(rows)
}
