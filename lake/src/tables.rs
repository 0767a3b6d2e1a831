//! The canonical tables of the lake: their names, Arrow schemas, time column, sort order and
//! restatement scope. Parsers build batches in these schemas; the query layer serves them.
//!
//! Conventions, kept the same in every table:
//! - times are `Timestamp(Microsecond, "UTC")`;
//! - money is `Decimal128(38, 12)` (FOCUS asks for decimals, not floats);
//! - labels are plain `Utf8` (Parquet dictionary-encodes them on disk; Arrow `Dictionary` types
//!   make DataFusion group-bys slower, so they are never read back as dictionaries).

use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, LazyLock};

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};

/// Precision and scale of every money and quantity column.
pub const MONEY_PRECISION: u8 = 38;
pub const MONEY_SCALE: i8 = 12;

pub fn money() -> DataType {
    DataType::Decimal128(MONEY_PRECISION, MONEY_SCALE)
}

pub fn timestamp() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// A landed table of the lake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    /// One row per (scrape time, GPU or MIG instance, pod), one column per known DCGM field.
    GpuSamples,
    /// DCGM fields the wide table does not know, kept long: never dropped.
    GpuSamplesExtra,
    /// FOCUS billing lines, FOCUS column meanings in snake_case.
    BillingLines,
    /// One row per LLM gateway request.
    TokenUsage,
    /// Scheduler lifecycle events (canonical, Kubernetes, Kueue, Slurm).
    SchedulerEvents,
    /// The ledger: one row per GPU, hour, owner (and reservation reason).
    GpuHours,
    /// The cost journal: every cent of a day in one (team, bucket, rule, source) line.
    CostEntries,
    /// Allocation intervals per GPU, clipped to the day they are booked in.
    Allocations,
}

impl Table {
    pub const ALL: [Table; 8] = [
        Table::GpuSamples,
        Table::GpuSamplesExtra,
        Table::BillingLines,
        Table::TokenUsage,
        Table::SchedulerEvents,
        Table::GpuHours,
        Table::CostEntries,
        Table::Allocations,
    ];

    /// Tables the ledger derives from the landed ones. Each rebuild of a day restates that day.
    pub fn is_derived(self) -> bool {
        matches!(
            self,
            Table::GpuHours | Table::CostEntries | Table::Allocations
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            Table::GpuSamples => "gpu_samples",
            Table::GpuSamplesExtra => "gpu_samples_extra",
            Table::BillingLines => "billing_lines",
            Table::TokenUsage => "token_usage",
            Table::SchedulerEvents => "scheduler_events",
            Table::GpuHours => "gpu_hours",
            Table::CostEntries => "cost_entries",
            Table::Allocations => "allocations",
        }
    }

    pub fn schema(self) -> SchemaRef {
        match self {
            Table::GpuSamples => GPU_SAMPLES.clone(),
            Table::GpuSamplesExtra => GPU_SAMPLES_EXTRA.clone(),
            Table::BillingLines => BILLING_LINES.clone(),
            Table::TokenUsage => TOKEN_USAGE.clone(),
            Table::SchedulerEvents => SCHEDULER_EVENTS.clone(),
            Table::GpuHours => GPU_HOURS.clone(),
            Table::CostEntries => COST_ENTRIES.clone(),
            Table::Allocations => ALLOCATIONS.clone(),
        }
    }

    /// The column whose UTC date names the `date=YYYY-MM-DD` partition and whose range the
    /// catalog keeps per file, so scans prune by time without listing the store.
    pub fn time_column(self) -> &'static str {
        match self {
            Table::BillingLines => "charge_period_start",
            Table::GpuHours => "hour",
            Table::CostEntries => "day",
            Table::Allocations => "start_time",
            _ => "ts",
        }
    }

    /// Rows are sorted by these columns inside each file: long runs of equal labels and of idle
    /// zeros compress well and scan fast.
    pub fn sort_columns(self) -> &'static [&'static str] {
        match self {
            Table::GpuSamples => &["cluster", "node", "gpu_uuid", "mig_instance", "ts"],
            Table::GpuSamplesExtra => &["cluster", "node", "gpu_uuid", "metric", "ts"],
            Table::BillingLines => &["billing_account_id", "resource_id", "charge_period_start"],
            Table::TokenUsage => &["model", "ts"],
            Table::SchedulerEvents => &["cluster", "node", "ts"],
            Table::GpuHours => &["cluster", "node", "gpu_index", "hour"],
            Table::CostEntries => &["day", "team", "bucket"],
            Table::Allocations => &["cluster", "node", "gpu_index", "start_time"],
        }
    }

    /// Columns that define a unit of restatement. A new delivery of the same scope replaces the
    /// files of the earlier one instead of adding to them (providers restate billing periods).
    /// Derived tables are restated by day instead (see [`Table::is_derived`]).
    pub fn scope_columns(self) -> &'static [&'static str] {
        match self {
            Table::BillingLines => &["billing_account_id", "billing_period_start"],
            _ => &[],
        }
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Table {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Table::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| format!("unknown table '{s}'"))
    }
}

fn utf8(name: &str) -> Field {
    Field::new(name, DataType::Utf8, true)
}
fn f64_col(name: &str) -> Field {
    Field::new(name, DataType::Float64, true)
}
fn i64_col(name: &str) -> Field {
    Field::new(name, DataType::Int64, true)
}

/// Known DCGM fields and the wide column each lands in: (DCGM field name, column).
/// Units follow dcgm-exporter's help texts; `DCGM_FI_DEV_GPU_UTIL` and the `*_UTIL` fields stay in
/// percent (0–100) as DCGM reports them, the `DCGM_FI_PROF_*` activity ratios stay in 0.0–1.0.
pub const DCGM_FIELDS: &[(&str, &str)] = &[
    ("DCGM_FI_DEV_GPU_UTIL", "gpu_util"),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "mem_copy_util"),
    ("DCGM_FI_DEV_ENC_UTIL", "enc_util"),
    ("DCGM_FI_DEV_DEC_UTIL", "dec_util"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gr_engine_active"),
    ("DCGM_FI_PROF_SM_ACTIVE", "sm_active"),
    ("DCGM_FI_PROF_SM_OCCUPANCY", "sm_occupancy"),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "tensor_active"),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "dram_active"),
    ("DCGM_FI_PROF_PIPE_FP64_ACTIVE", "fp64_active"),
    ("DCGM_FI_PROF_PIPE_FP32_ACTIVE", "fp32_active"),
    ("DCGM_FI_PROF_PIPE_FP16_ACTIVE", "fp16_active"),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "pcie_tx_bytes_per_s"),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "pcie_rx_bytes_per_s"),
    ("DCGM_FI_DEV_FB_USED", "fb_used_mib"),
    ("DCGM_FI_DEV_FB_FREE", "fb_free_mib"),
    ("DCGM_FI_DEV_FB_RESERVED", "fb_reserved_mib"),
    ("DCGM_FI_DEV_POWER_USAGE", "power_w"),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "energy_mj"),
    ("DCGM_FI_DEV_SM_CLOCK", "sm_clock_mhz"),
    ("DCGM_FI_DEV_MEM_CLOCK", "mem_clock_mhz"),
    ("DCGM_FI_DEV_GPU_TEMP", "gpu_temp_c"),
    ("DCGM_FI_DEV_MEMORY_TEMP", "memory_temp_c"),
    ("DCGM_FI_DEV_XID_ERRORS", "xid_last"),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "pcie_replay_count"),
    (
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "nvlink_bandwidth_total",
    ),
    (
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "uncorrectable_remapped_rows",
    ),
    (
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "correctable_remapped_rows",
    ),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "row_remap_failure"),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "vgpu_license_status"),
];

/// Identity columns of `gpu_samples`, in schema order, before the metric columns.
pub const GPU_IDENTITY_COLUMNS: &[&str] = &[
    "cluster",
    "node",
    "gpu_uuid",
    "gpu_index",
    "gpu_model",
    "pci_bus_id",
    "mig_profile",
    "mig_instance",
    "vgpu",
    "namespace",
    "pod",
    "container",
    "hpc_job",
    "driver_version",
];

static GPU_SAMPLES: LazyLock<SchemaRef> = LazyLock::new(|| {
    let mut fields = vec![Field::new("ts", timestamp(), false)];
    for name in GPU_IDENTITY_COLUMNS {
        fields.push(match *name {
            "gpu_index" | "mig_instance" => Field::new(*name, DataType::Int32, true),
            _ => utf8(name),
        });
    }
    fields.extend(DCGM_FIELDS.iter().map(|(_, column)| f64_col(column)));
    // Labels the pivot does not know (pod labels, DRA claims, …) as a JSON object, sorted by key.
    fields.push(utf8("labels"));
    Arc::new(Schema::new(fields))
});

static GPU_SAMPLES_EXTRA: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("ts", timestamp(), false),
        utf8("cluster"),
        utf8("node"),
        utf8("gpu_uuid"),
        Field::new("gpu_index", DataType::Int32, true),
        Field::new("mig_instance", DataType::Int32, true),
        Field::new("metric", DataType::Utf8, false),
        Field::new("value", DataType::Float64, false),
        utf8("labels"),
    ]))
});

/// FOCUS 1.0–1.3 columns in snake_case. 1.3 renames land in their 1.2 column
/// (`ServiceProviderName` → `provider_name`, `HostProviderName` → `publisher_name`).
static BILLING_LINES: LazyLock<SchemaRef> = LazyLock::new(|| {
    let money_col = |name: &str| Field::new(name, money(), true);
    let ts_col = |name: &str| Field::new(name, timestamp(), true);
    Arc::new(Schema::new(vec![
        utf8("billing_account_id"),
        utf8("billing_account_name"),
        utf8("billing_account_type"),
        utf8("billing_currency"),
        ts_col("billing_period_start"),
        ts_col("billing_period_end"),
        Field::new("charge_period_start", timestamp(), false),
        ts_col("charge_period_end"),
        utf8("charge_category"),
        utf8("charge_class"),
        utf8("charge_description"),
        utf8("charge_frequency"),
        money_col("billed_cost"),
        money_col("effective_cost"),
        money_col("list_cost"),
        money_col("contracted_cost"),
        money_col("list_unit_price"),
        money_col("contracted_unit_price"),
        money_col("pricing_quantity"),
        utf8("pricing_unit"),
        utf8("pricing_category"),
        utf8("pricing_currency"),
        money_col("consumed_quantity"),
        utf8("consumed_unit"),
        utf8("provider_name"),
        utf8("publisher_name"),
        utf8("invoice_issuer_name"),
        utf8("invoice_id"),
        utf8("service_category"),
        utf8("service_subcategory"),
        utf8("service_name"),
        utf8("resource_id"),
        utf8("resource_name"),
        utf8("resource_type"),
        utf8("region_id"),
        utf8("region_name"),
        utf8("availability_zone"),
        utf8("sku_id"),
        utf8("sku_price_id"),
        utf8("sku_meter"),
        utf8("sku_price_details"),
        utf8("sub_account_id"),
        utf8("sub_account_name"),
        utf8("sub_account_type"),
        utf8("commitment_discount_id"),
        utf8("commitment_discount_name"),
        utf8("commitment_discount_category"),
        utf8("commitment_discount_type"),
        utf8("commitment_discount_status"),
        money_col("commitment_discount_quantity"),
        utf8("commitment_discount_unit"),
        utf8("capacity_reservation_id"),
        utf8("capacity_reservation_status"),
        utf8("allocated_method_id"),
        utf8("allocated_resource_id"),
        utf8("allocated_resource_name"),
        utf8("allocated_tags"),
        // JSON object; keys kept as the provider wrote them.
        utf8("tags"),
        // Columns outside FOCUS (`x_…` and unprefixed ones such as the sample's `Id`), as a JSON object.
        utf8("extra_columns"),
        // Where the line came from: the FOCUS file and its 1-based line, for tracing a figure back.
        utf8("source_file"),
        i64_col("source_line"),
    ]))
});

/// The attribution labels that every table carries and a policy validates.
pub const ATTRIBUTION_LABELS: &[&str] = &[
    "team",
    "environment",
    "workload_type",
    "model",
    "cost_center",
];

static TOKEN_USAGE: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("ts", timestamp(), false),
        Field::new("request_id", DataType::Utf8, false),
        utf8("team"),
        utf8("environment"),
        utf8("cost_center"),
        utf8("namespace"),
        utf8("workload"),
        // The model the client asked for: SLOs and serving workloads are matched by it.
        utf8("model"),
        // The build that answered (OTel `gen_ai.response.model`) and its weight format (`bf16`,
        // `fp8`, …). Files written before these two columns existed read them back as NULL.
        utf8("model_version"),
        utf8("quantization"),
        utf8("provider"),
        utf8("priority"),
        i64_col("input_tokens"),
        i64_col("output_tokens"),
        i64_col("cached_tokens"),
        i64_col("reasoning_tokens"),
        f64_col("ttft_ms"),
        f64_col("latency_ms"),
        utf8("status"),
        Field::new("cache_hit", DataType::Boolean, true),
        // Cost as computed by the gateway itself (LiteLLM `spend`), kept for comparison only.
        f64_col("gateway_cost"),
        // `canonical`, `litellm`, `otel`.
        Field::new("source", DataType::Utf8, false),
    ]))
});

static SCHEDULER_EVENTS: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("ts", timestamp(), false),
        // start, stop, checkpoint, progress, queued, admitted, rejected, preempted, evicted, node_up, node_down
        Field::new("event", DataType::Utf8, false),
        utf8("cluster"),
        utf8("node"),
        utf8("namespace"),
        utf8("workload"),
        utf8("pod"),
        f64_col("gpus"),
        Field::new(
            "gpu_indices",
            DataType::List(Arc::new(Field::new("item", DataType::Int32, true))),
            true,
        ),
        Field::new(
            "gpu_uuids",
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
            true,
        ),
        utf8("gpu_model"),
        utf8("mig_profile"),
        f64_col("gpu_fraction"),
        utf8("queue"),
        utf8("flavor"),
        utf8("priority"),
        utf8("reason"),
        i64_col("samples"),
        i64_col("tokens"),
        utf8("team"),
        utf8("environment"),
        utf8("workload_type"),
        utf8("model"),
        utf8("cost_center"),
        // `canonical`, `kubernetes`, `kueue`, `slurm`.
        Field::new("source", DataType::Utf8, false),
        // The event's identity (ingest/src/events.rs says what it covers): the same event
        // delivered again lands once. Added after the first release: files written before read
        // it as NULL, and NULL identifies nothing.
        utf8("event_id"),
    ]))
});

/// A batch of `table` from the named columns; every other column is null. For tests and for
/// producers that fill only a few columns.
pub fn batch_with_columns(
    table: Table,
    columns: Vec<(&str, arrow::array::ArrayRef)>,
) -> Result<arrow::record_batch::RecordBatch, arrow::error::ArrowError> {
    let schema = table.schema();
    let rows = columns.first().map(|(_, c)| c.len()).unwrap_or(0);
    let mut given: std::collections::HashMap<&str, arrow::array::ArrayRef> =
        columns.into_iter().collect();
    let arrays = schema
        .fields()
        .iter()
        .map(|f| {
            given
                .remove(f.name().as_str())
                .unwrap_or_else(|| arrow::array::new_null_array(f.data_type(), rows))
        })
        .collect();
    if let Some(name) = given.keys().next() {
        return Err(arrow::error::ArrowError::SchemaError(format!(
            "{table} has no column {name}"
        )));
    }
    arrow::record_batch::RecordBatch::try_new(schema, arrays)
}

/// A `gpu_hours` row's seconds, whatever their class, as SQL over the table (the ledger's
/// `GpuHour::seconds`).
pub const GPU_HOUR_SECONDS: &str = "(busy_seconds + allocated_idle_seconds + reserved_seconds \
     + unexplained_seconds + fault_seconds)";

static GPU_HOURS: LazyLock<SchemaRef> = LazyLock::new(|| {
    let mut fields = vec![
        Field::new("hour", timestamp(), false),
        utf8("cluster"),
        utf8("node"),
        Field::new("gpu_index", DataType::Int32, false),
        utf8("gpu_uuid"),
        // The owner; NULL on the unallocated part of the GPU.
        utf8("team"),
        utf8("namespace"),
        utf8("workload"),
    ];
    fields.extend(
        [
            "alloc_seconds",
            "busy_seconds",
            "allocated_idle_seconds",
            "reserved_seconds",
        ]
        .map(f64_col),
    );
    fields.push(utf8("reserved_reason"));
    fields.extend(
        [
            "unexplained_seconds",
            "fault_seconds",
            "sm_active",
            "memory_used_share",
            "power_w",
            "energy_wh",
            "price_per_hour",
        ]
        .map(f64_col),
    );
    // Money is exact (`money()`), so sums of it do not depend on the order they add in. Files
    // written before read their Float64 amounts cast to it.
    fields.extend(
        [
            "cost",
            "cost_busy",
            "cost_allocated_idle",
            "cost_reserved",
            "cost_unexplained",
            "cost_fault",
        ]
        .map(|name| Field::new(name, money(), true)),
    );
    Arc::new(Schema::new(fields))
});

static COST_ENTRIES: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("day", timestamp(), false),
        utf8("team"),
        Field::new("bucket", DataType::Utf8, false),
        utf8("rule"),
        Field::new("source", DataType::Utf8, false),
        Field::new("amount", money(), false),
        utf8("currency"),
    ]))
});

static ALLOCATIONS: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("start_time", timestamp(), false),
        Field::new("end_time", timestamp(), false),
        utf8("cluster"),
        utf8("node"),
        Field::new("gpu_index", DataType::Int32, false),
        utf8("namespace"),
        utf8("workload"),
        utf8("pod"),
        // The team that pays (`unattributed` when the label is missing or outside the policy) …
        utf8("team"),
        // … and the label as the scheduler wrote it.
        utf8("team_label"),
        utf8("environment"),
        utf8("workload_type"),
        utf8("model"),
        utf8("cost_center"),
        f64_col("share"),
        f64_col("seconds"),
        f64_col("gpu_hours"),
        utf8("mig_profile"),
        utf8("end_reason"),
        utf8("gpu_source"),
    ]))
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_has_its_time_sort_and_scope_columns() {
        for table in Table::ALL {
            let schema = table.schema();
            schema.index_of(table.time_column()).unwrap();
            for c in table.sort_columns().iter().chain(table.scope_columns()) {
                schema
                    .index_of(c)
                    .unwrap_or_else(|_| panic!("{table}: no column {c}"));
            }
            assert_eq!(table.name().parse::<Table>().unwrap(), table);
        }
    }

    #[test]
    fn dcgm_columns_are_unique() {
        let schema = Table::GpuSamples.schema();
        let mut names: Vec<_> = schema.fields().iter().map(|f| f.name().clone()).collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n);
    }
}
