//! The ledger's results as batches of the derived tables (`gpu_hours`, `cost_entries`,
//! `allocations`), so that any engine reading the lake sees the same numbers.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, Decimal128Array, Float64Array, Int32Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use gpuledger_lake::tables::{MONEY_PRECISION, MONEY_SCALE, Table};
use gpuledger_ledger::allocation::Allocation;
use gpuledger_ledger::gpu_hours::GpuHour;
use gpuledger_ledger::journal::CostEntry;
use gpuledger_ledger::money::Money;
use gpuledger_ledger::time::Span;

fn times(values: impl Iterator<Item = i64>) -> ArrayRef {
    Arc::new(TimestampMicrosecondArray::from_iter_values(values).with_timezone("UTC"))
}
fn texts<'a>(values: impl Iterator<Item = Option<&'a str>>) -> ArrayRef {
    Arc::new(StringArray::from_iter(values))
}
fn floats(values: impl Iterator<Item = f64>) -> ArrayRef {
    Arc::new(Float64Array::from_iter_values(values))
}
/// Money as stored: its 1e-12 units are the `Decimal128(38, 12)` values themselves.
fn moneys(values: impl Iterator<Item = Money>) -> ArrayRef {
    Arc::new(
        Decimal128Array::from_iter_values(values.map(Money::units))
            .with_precision_and_scale(MONEY_PRECISION, MONEY_SCALE)
            .expect("the lake's money type"),
    )
}

pub fn gpu_hours_batch(rows: &[GpuHour]) -> RecordBatch {
    let owner = |f: fn(&gpuledger_ledger::gpu_hours::Owner) -> Option<&str>| -> ArrayRef {
        texts(rows.iter().map(|r| r.owner.as_ref().and_then(f)))
    };
    let columns: Vec<ArrayRef> = vec![
        times(rows.iter().map(|r| r.hour)),
        texts(rows.iter().map(|r| Some(r.cluster.as_str()))),
        texts(rows.iter().map(|r| Some(r.node.as_str()))),
        Arc::new(Int32Array::from_iter_values(
            rows.iter().map(|r| r.gpu_index as i32),
        )),
        texts(rows.iter().map(|r| r.gpu_uuid.as_deref())),
        owner(|o| Some(o.team.as_str())),
        owner(|o| o.namespace.as_deref()),
        owner(|o| o.workload.as_deref()),
        floats(rows.iter().map(|r| r.alloc_seconds)),
        floats(rows.iter().map(|r| r.busy_seconds)),
        floats(rows.iter().map(|r| r.allocated_idle_seconds)),
        floats(rows.iter().map(|r| r.reserved_seconds)),
        texts(rows.iter().map(|r| r.reserved_reason.as_deref())),
        floats(rows.iter().map(|r| r.unexplained_seconds)),
        floats(rows.iter().map(|r| r.fault_seconds)),
        Arc::new(Float64Array::from_iter(rows.iter().map(|r| r.sm_active))),
        Arc::new(Float64Array::from_iter(
            rows.iter().map(|r| r.memory_used_share),
        )),
        Arc::new(Float64Array::from_iter(rows.iter().map(|r| r.power_w))),
        floats(rows.iter().map(|r| r.energy_wh)),
        floats(rows.iter().map(GpuHour::price_per_hour)),
        moneys(rows.iter().map(|r| r.cost)),
        moneys(rows.iter().map(|r| r.class_costs.busy)),
        moneys(rows.iter().map(|r| r.class_costs.allocated_idle)),
        moneys(rows.iter().map(|r| r.class_costs.reserved)),
        moneys(rows.iter().map(|r| r.class_costs.unexplained)),
        moneys(rows.iter().map(|r| r.class_costs.fault)),
    ];
    RecordBatch::try_new(Table::GpuHours.schema(), columns)
        .expect("columns match the gpu_hours schema")
}

pub fn cost_entries_batch(entries: &[CostEntry], currency: &str) -> RecordBatch {
    let columns: Vec<ArrayRef> = vec![
        times(entries.iter().map(|e| e.day)),
        texts(entries.iter().map(|e| e.team.as_deref())),
        texts(entries.iter().map(|e| Some(e.bucket.as_str()))),
        texts(entries.iter().map(|e| e.rule.as_deref())),
        texts(entries.iter().map(|e| Some(e.source.as_str()))),
        moneys(entries.iter().map(|e| e.amount)),
        texts(entries.iter().map(|_| Some(currency))),
    ];
    RecordBatch::try_new(Table::CostEntries.schema(), columns)
        .expect("columns match the cost_entries schema")
}

/// Allocations clipped to `window` (the day they are booked in).
pub fn allocations_batch(
    allocations: &[Allocation],
    window: Span,
    team_of: impl Fn(&Allocation) -> String,
) -> RecordBatch {
    let clipped: Vec<(&Allocation, Span)> = allocations
        .iter()
        .map(|a| (a, a.span.intersect(&window)))
        .filter(|(_, s)| !s.is_empty())
        .collect();
    let teams: Vec<String> = clipped.iter().map(|(a, _)| team_of(a)).collect();
    let label = |f: fn(&Allocation) -> Option<&str>| -> ArrayRef {
        texts(clipped.iter().map(|(a, _)| f(a)))
    };
    let columns: Vec<ArrayRef> = vec![
        times(clipped.iter().map(|(_, s)| s.start)),
        times(clipped.iter().map(|(_, s)| s.end)),
        label(|a| Some(a.cluster.as_str())),
        label(|a| Some(a.node.as_str())),
        Arc::new(Int32Array::from_iter_values(
            clipped.iter().map(|(a, _)| a.gpu_index as i32),
        )),
        label(|a| a.namespace.as_deref()),
        label(|a| a.workload.as_deref()),
        label(|a| a.pod.as_deref()),
        texts(teams.iter().map(|t| Some(t.as_str()))),
        label(|a| a.labels.team.as_deref()),
        label(|a| a.labels.environment.as_deref()),
        label(|a| a.labels.workload_type.as_deref()),
        label(|a| a.labels.model.as_deref()),
        label(|a| a.labels.cost_center.as_deref()),
        floats(clipped.iter().map(|(a, _)| a.share)),
        floats(clipped.iter().map(|(_, s)| s.seconds())),
        floats(clipped.iter().map(|(a, s)| a.share * s.seconds() / 3600.0)),
        label(|a| a.mig_profile.as_deref()),
        label(|a| Some(a.end_reason.as_str())),
        label(|a| Some(a.gpu_source.as_str())),
    ];
    RecordBatch::try_new(Table::Allocations.schema(), columns)
        .expect("columns match the allocations schema")
}
