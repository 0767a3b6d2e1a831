//! The FOCUS 1.3 allocation export: every billed charge of a window, split into rows by where
//! the ledger put its money (`gpuledger_ledger::charge_split`), with the charge's own FOCUS
//! columns and the split-cost-allocation columns of FOCUS 1.3.
//!
//! - Charges: the `billing_lines` whose `ChargePeriodStart` lies in `[from, to)`, each whole
//!   (a charge that runs past `to` is exported with the window of its start, so consecutive
//!   windows export each charge once). Every day a charge covers must be built.
//! - Rows of a charge: one per part. The aggregatable metrics (`BilledCost`, `EffectiveCost`,
//!   `ListCost`, `ContractedCost`, `PricingQuantity`, `ConsumedQuantity`,
//!   `CommitmentDiscountQuantity`) are split by the parts' ratios exactly: a charge's rows add
//!   back to it to 1e-12. Every other column is the charge's.
//! - `AllocatedMethodId`: [`GPU_HOURS_METHOD`] for the GPU time of a node's line (busy and
//!   allocated idle by team and workload, reserved, unexplained, fault), `gpuledger:shared/<rule>@1`
//!   for a shared cost spread by a rule (a node's non-GPU part, lines of no node).
//! - `AllocatedMethodDetails`: `{"Elements":[{"AllocatedRatio":r,"UsageUnit":"GPU-Hours","UsageQuantity":q}]}`
//!   (shared rows carry the ratio alone); a charge's ratios add to exactly 1.
//! - `AllocatedResourceId` / `AllocatedResourceName`: `<namespace>/<workload>` and the workload
//!   of a team's GPU time; NULL elsewhere.
//! - `AllocatedTags`: the ledger's attribution under the `gpuledger/` prefix, so that no key
//!   repeats one of the charge's `Tags`: `gpuledger/team` and the workload's `environment`,
//!   `workload_type`, `model`, `cost_center`, and always `gpuledger/bucket` (`direct`,
//!   `allocated_idle`, `shared`, `reserved`, `unexplained`, `fault`) with `gpuledger/reason` for
//!   reserved time and `gpuledger/rule` for shared costs.
//!
//! Only billed money is exported: GPU time priced by the rate card and manual costs are in the
//! ledger (`team_costs`) but are no charge of a bill.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, LazyLock};

use arrow::array::{Array, ArrayRef, Decimal128Array, RecordBatch, StringArray, UInt32Array};
use arrow::compute::take;
use arrow::datatypes::{Field, Schema, SchemaRef};
use chrono::DateTime;
use datafusion::error::DataFusionError;
use datafusion::prelude::SessionContext;
use gpuledger_lake::Catalog;
use gpuledger_lake::tables::{MONEY_PRECISION, MONEY_SCALE, Table};
use gpuledger_ledger::charge_split::{ChargePart, ChargeSplitter, NotBuilt};
use gpuledger_ledger::money::Money;
use gpuledger_ledger::time::{MICROS_PER_DAY, Micros, Span, floor_day};

use crate::columns::{column, integers, strings, text, timestamps, value};
use crate::error::QueryError;
use crate::ledger_inputs::{billing_items, declared, query, stored_gpu_hours, ts_literal, usage};

/// The method of a node line's GPU time: split by the seconds of each GPU-hour row's classes.
pub const GPU_HOURS_METHOD: &str = "gpuledger:gpu-hours@1";

/// The method of a shared cost spread by `rule`.
pub fn shared_method(rule: &str) -> String {
    format!("gpuledger:shared/{rule}@1")
}

/// The prefix of every key gpuledger writes in `AllocatedTags`.
pub const TAG_PREFIX: &str = "gpuledger/";

/// `billing_lines` columns and their FOCUS names, in the export's order. The provider columns
/// appear under their FOCUS 1.3 names and their deprecated 1.2 names alike.
const CHARGE_COLUMNS: &[(&str, &str)] = &[
    ("billing_account_id", "BillingAccountId"),
    ("billing_account_name", "BillingAccountName"),
    ("billing_account_type", "BillingAccountType"),
    ("billing_currency", "BillingCurrency"),
    ("billing_period_start", "BillingPeriodStart"),
    ("billing_period_end", "BillingPeriodEnd"),
    ("charge_period_start", "ChargePeriodStart"),
    ("charge_period_end", "ChargePeriodEnd"),
    ("charge_category", "ChargeCategory"),
    ("charge_class", "ChargeClass"),
    ("charge_description", "ChargeDescription"),
    ("charge_frequency", "ChargeFrequency"),
    ("billed_cost", "BilledCost"),
    ("effective_cost", "EffectiveCost"),
    ("list_cost", "ListCost"),
    ("contracted_cost", "ContractedCost"),
    ("list_unit_price", "ListUnitPrice"),
    ("contracted_unit_price", "ContractedUnitPrice"),
    ("pricing_quantity", "PricingQuantity"),
    ("pricing_unit", "PricingUnit"),
    ("pricing_category", "PricingCategory"),
    ("pricing_currency", "PricingCurrency"),
    ("consumed_quantity", "ConsumedQuantity"),
    ("consumed_unit", "ConsumedUnit"),
    ("provider_name", "ServiceProviderName"),
    ("publisher_name", "HostProviderName"),
    ("provider_name", "ProviderName"),
    ("publisher_name", "PublisherName"),
    ("invoice_issuer_name", "InvoiceIssuerName"),
    ("invoice_id", "InvoiceId"),
    ("service_category", "ServiceCategory"),
    ("service_subcategory", "ServiceSubcategory"),
    ("service_name", "ServiceName"),
    ("resource_id", "ResourceId"),
    ("resource_name", "ResourceName"),
    ("resource_type", "ResourceType"),
    ("region_id", "RegionId"),
    ("region_name", "RegionName"),
    ("availability_zone", "AvailabilityZone"),
    ("sku_id", "SkuId"),
    ("sku_price_id", "SkuPriceId"),
    ("sku_meter", "SkuMeter"),
    ("sku_price_details", "SkuPriceDetails"),
    ("sub_account_id", "SubAccountId"),
    ("sub_account_name", "SubAccountName"),
    ("sub_account_type", "SubAccountType"),
    ("commitment_discount_id", "CommitmentDiscountId"),
    ("commitment_discount_name", "CommitmentDiscountName"),
    ("commitment_discount_category", "CommitmentDiscountCategory"),
    ("commitment_discount_type", "CommitmentDiscountType"),
    ("commitment_discount_status", "CommitmentDiscountStatus"),
    ("commitment_discount_quantity", "CommitmentDiscountQuantity"),
    ("commitment_discount_unit", "CommitmentDiscountUnit"),
    ("capacity_reservation_id", "CapacityReservationId"),
    ("capacity_reservation_status", "CapacityReservationStatus"),
    ("tags", "Tags"),
];

/// The metrics that add up across rows: split by the parts' ratios, each exactly.
const AGGREGATABLE: &[&str] = &[
    "billed_cost",
    "effective_cost",
    "list_cost",
    "contracted_cost",
    "pricing_quantity",
    "consumed_quantity",
    "commitment_discount_quantity",
];

/// The allocation columns, then the custom ones (FOCUS puts `x_` columns last).
const ALLOCATION_COLUMNS: [&str; 5] = [
    "AllocatedMethodId",
    "AllocatedMethodDetails",
    "AllocatedResourceId",
    "AllocatedResourceName",
    "AllocatedTags",
];
const CUSTOM_COLUMNS: [&str; 2] = ["x_SourceFile", "x_SourceLine"];

static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let lines = Table::BillingLines.schema();
    let mut fields: Vec<Field> = CHARGE_COLUMNS
        .iter()
        .map(|(column, name)| {
            let field = lines
                .field_with_name(column)
                .expect("a billing_lines column");
            Field::new(*name, field.data_type().clone(), field.is_nullable())
        })
        .collect();
    fields.extend(
        ALLOCATION_COLUMNS
            .iter()
            // The method is named on every row the export writes; the rest may be NULL.
            .map(|name| {
                Field::new(
                    *name,
                    arrow::datatypes::DataType::Utf8,
                    *name != "AllocatedMethodId",
                )
            }),
    );
    fields.push(Field::new(
        CUSTOM_COLUMNS[0],
        arrow::datatypes::DataType::Utf8,
        true,
    ));
    fields.push(Field::new(
        CUSTOM_COLUMNS[1],
        arrow::datatypes::DataType::Int64,
        true,
    ));
    Arc::new(Schema::new(fields))
});

/// The export's columns and types.
pub fn schema() -> SchemaRef {
    SCHEMA.clone()
}

/// The labels of a team's workload, for its `AllocatedTags`.
type WorkloadLabels =
    BTreeMap<(String, Option<String>, Option<String>), Vec<(&'static str, String)>>;

/// The export of `window`, in charge order (charge period start, source file, source line) and
/// each charge's parts in the split's order.
pub async fn focus_allocated(
    ctx: &SessionContext,
    catalog: &Catalog,
    window: Span,
) -> Result<Vec<RecordBatch>, QueryError> {
    let charges = query(
        ctx,
        &format!(
            "SELECT * FROM billing_lines
             WHERE charge_period_start >= {} AND charge_period_start < {}
             ORDER BY charge_period_start, source_file, source_line",
            ts_literal(window.start),
            ts_literal(window.end)
        ),
    )
    .await?;
    // The ledger of every day the charges cover.
    let mut end = window.end;
    for batch in &charges {
        let ends = timestamps(batch, "charge_period_end")?;
        end = end.max(
            (0..batch.num_rows())
                .filter_map(|r| value(&ends, r))
                .max()
                .unwrap_or(end),
        );
    }
    let span = Span::new(floor_day(window.start), ceil_day(end));
    let declared = declared(catalog).await?;
    let rows = stored_gpu_hours(ctx, span).await?;
    let usage = usage(ctx, span).await?;
    let built: BTreeSet<String> = catalog.ledger_days().await?.into_keys().collect();
    let labels = workload_labels(ctx, span).await?;
    let splitter = ChargeSplitter::new(&declared.nodes, &rows, &usage, &declared.rules);
    let is_built = |day: Micros| built.contains(&date_of(day));
    let mut out = Vec::with_capacity(charges.len());
    for batch in &charges {
        out.push(split_batch(batch, &splitter, &is_built, &labels)?);
    }
    Ok(out)
}

/// One batch of charges as export rows.
fn split_batch(
    batch: &RecordBatch,
    splitter: &ChargeSplitter,
    is_built: &dyn Fn(Micros) -> bool,
    labels: &WorkloadLabels,
) -> Result<RecordBatch, QueryError> {
    let items = billing_items(batch)?;
    let (files, lines) = (
        strings(batch, "source_file")?,
        integers(batch, "source_line")?,
    );
    let mut origin: Vec<u32> = Vec::new();
    let mut parts: Vec<ChargePart> = Vec::new();
    // Per row: the charge's parts' weights, shared by every metric's split.
    let mut charge_weights: Vec<(usize, Vec<f64>)> = Vec::new();
    for (row, item) in items.iter().enumerate() {
        let Some(item) = item else { continue };
        let mut charge_parts: Vec<ChargePart> =
            splitter.split(item, is_built).map_err(|NotBuilt { day }| {
                QueryError::LedgerNotBuilt {
                    day: date_of(day),
                    charge: format!(
                        "{}:{}",
                        text(&files, row).unwrap_or("?"),
                        value(&lines, row).unwrap_or(0)
                    ),
                }
            })?;
        // A part whose ratio rounds to 0 at 1e-12 holds no money worth a row: its sliver goes to
        // the others (largest remainder), and the ratios still add to exactly 1.
        loop {
            let before = charge_parts.len();
            let ratios = ratios_of(&charge_parts);
            let mut kept = ratios.iter().map(|r| !r.is_zero());
            charge_parts.retain(|_| kept.next().unwrap_or(false));
            if charge_parts.len() == before || charge_parts.is_empty() {
                break;
            }
        }
        charge_weights.push((row, charge_parts.iter().map(|p| p.weight).collect()));
        origin.extend(std::iter::repeat_n(row as u32, charge_parts.len()));
        parts.extend(charge_parts);
    }
    let indices = UInt32Array::from(origin);
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(SCHEMA.fields().len());
    let lake_schema = Table::BillingLines.schema();
    let original = |name: &str| -> Result<ArrayRef, QueryError> {
        let field = lake_schema
            .field_with_name(name)
            .map_err(DataFusionError::from)?;
        Ok(column(batch, name, field.data_type())?)
    };
    let repeated = |name: &str| -> Result<ArrayRef, QueryError> {
        Ok(take(&original(name)?, &indices, None).map_err(DataFusionError::from)?)
    };
    for (column, _) in CHARGE_COLUMNS {
        if AGGREGATABLE.contains(column) {
            columns.push(split_metric(&original(column)?, &charge_weights)?);
        } else {
            columns.push(repeated(column)?);
        }
    }
    let ratios: Vec<Money> = charge_weights
        .iter()
        .flat_map(|(_, weights)| ONE.split_f64(weights))
        .collect();
    let utf8 = |values: Vec<Option<String>>| -> ArrayRef { Arc::new(StringArray::from(values)) };
    columns.push(utf8(parts.iter().map(|p| Some(method_id(p))).collect()));
    columns.push(utf8(
        parts
            .iter()
            .zip(&ratios)
            .map(|(p, ratio)| Some(method_details(p, *ratio)))
            .collect(),
    ));
    columns.push(utf8(
        parts
            .iter()
            .map(|p| {
                p.workload
                    .as_ref()
                    .map(|w| format!("{}/{w}", p.namespace.as_deref().unwrap_or("")))
            })
            .collect(),
    ));
    columns.push(utf8(parts.iter().map(|p| p.workload.clone()).collect()));
    columns.push(utf8(
        parts
            .iter()
            .map(|p| Some(allocated_tags(p, labels)))
            .collect(),
    ));
    columns.push(repeated("source_file")?);
    columns.push(repeated("source_line")?);
    Ok(RecordBatch::try_new(SCHEMA.clone(), columns).map_err(DataFusionError::from)?)
}

/// A metric of each charge split over its parts by their weights, exactly; NULL stays NULL.
fn split_metric(
    original: &ArrayRef,
    charge_weights: &[(usize, Vec<f64>)],
) -> Result<ArrayRef, QueryError> {
    let values = original
        .as_any()
        .downcast_ref::<Decimal128Array>()
        .ok_or_else(|| QueryError::NotSupported("a billing metric is not a decimal".into()))?;
    let mut out: Vec<Option<i128>> = Vec::new();
    for (row, weights) in charge_weights {
        if values.is_null(*row) {
            out.extend(std::iter::repeat_n(None, weights.len()));
        } else {
            out.extend(
                Money::from_units(values.value(*row))
                    .split_f64(weights)
                    .into_iter()
                    .map(|m| Some(m.units())),
            );
        }
    }
    Ok(Arc::new(
        Decimal128Array::from(out)
            .with_precision_and_scale(MONEY_PRECISION, MONEY_SCALE)
            .map_err(DataFusionError::from)?,
    ))
}

/// 1 in money's fixed point: a charge's ratios are a split of it, so they add to exactly 1.
const ONE: Money = Money::from_units(10i128.pow(MONEY_SCALE as u32));

fn ratios_of(parts: &[ChargePart]) -> Vec<Money> {
    ONE.split_f64(&parts.iter().map(|p| p.weight).collect::<Vec<_>>())
}

fn method_id(part: &ChargePart) -> String {
    match &part.rule {
        Some(rule) => shared_method(rule),
        None => GPU_HOURS_METHOD.to_string(),
    }
}

/// FOCUS 1.3's `AllocatedMethodDetails` of one row.
fn method_details(part: &ChargePart, ratio: Money) -> String {
    if part.rule.is_some() {
        return format!(r#"{{"Elements":[{{"AllocatedRatio":{ratio}}}]}}"#);
    }
    format!(
        r#"{{"Elements":[{{"AllocatedRatio":{ratio},"UsageUnit":"GPU-Hours","UsageQuantity":{}}}]}}"#,
        part.gpu_hours
    )
}

fn allocated_tags(part: &ChargePart, labels: &WorkloadLabels) -> String {
    let mut tags = serde_json::Map::new();
    let mut put = |key: &str, value: &str| {
        tags.insert(format!("{TAG_PREFIX}{key}"), value.into());
    };
    let (bucket, reason) = match part.bucket.split_once(':') {
        Some((bucket, reason)) => (bucket, Some(reason)),
        None => (part.bucket.as_str(), None),
    };
    put("bucket", bucket);
    if let Some(reason) = reason {
        put("reason", reason);
    }
    if let Some(rule) = &part.rule {
        put("rule", rule);
    }
    if let Some(team) = &part.team {
        put("team", team);
        if let Some(labels) =
            labels.get(&(team.clone(), part.namespace.clone(), part.workload.clone()))
        {
            for (key, value) in labels {
                put(key, value);
            }
        }
    }
    serde_json::Value::Object(tags).to_string()
}

/// Each team's workload's labels (from `allocations`): the least of them in sort order when its
/// allocations disagree, so that the export is the same every time.
async fn workload_labels(ctx: &SessionContext, span: Span) -> Result<WorkloadLabels, QueryError> {
    const LABELS: [&str; 4] = ["environment", "workload_type", "model", "cost_center"];
    let batches = query(
        ctx,
        &format!(
            "SELECT DISTINCT team, namespace, workload, {labels} FROM allocations
             WHERE start_time < {} AND end_time > {} AND team IS NOT NULL
             ORDER BY team, namespace, workload, {labels}",
            ts_literal(span.end),
            ts_literal(span.start),
            labels = LABELS.join(", ")
        ),
    )
    .await?;
    let mut out = WorkloadLabels::new();
    for batch in &batches {
        let (team, namespace, workload) = (
            strings(batch, "team")?,
            strings(batch, "namespace")?,
            strings(batch, "workload")?,
        );
        let values = LABELS
            .iter()
            .map(|name| Ok((*name, strings(batch, name)?)))
            .collect::<Result<Vec<_>, QueryError>>()?;
        for row in 0..batch.num_rows() {
            let Some(team) = text(&team, row) else {
                continue;
            };
            let key = (
                team.to_string(),
                text(&namespace, row).map(str::to_string),
                text(&workload, row).map(str::to_string),
            );
            out.entry(key).or_insert_with(|| {
                values
                    .iter()
                    .filter_map(|(name, column)| text(column, row).map(|v| (*name, v.to_string())))
                    .collect()
            });
        }
    }
    Ok(out)
}

fn ceil_day(t: Micros) -> Micros {
    let floor = floor_day(t);
    if floor == t {
        t
    } else {
        floor + MICROS_PER_DAY
    }
}

fn date_of(day: Micros) -> String {
    DateTime::from_timestamp_micros(day)
        .map(|t| t.date_naive().to_string())
        .unwrap_or_default()
}
