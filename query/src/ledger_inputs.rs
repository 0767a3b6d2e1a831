//! Reads the ledger's inputs and the stored ledger out of the lake, into the plain values of
//! `gpuledger_ledger`: what the ledger build (the `gpuledger-build` crate) and the read-side
//! functions that recompute from the same inputs (`focus_allocated`) share, so that both read
//! the lake alike.

use std::collections::{BTreeMap, BTreeSet};

use arrow::array::{Array, Int32Array, RecordBatch, StringViewArray};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::ParquetFileReaderFactory;
use datafusion::datasource::physical_plan::parquet::DefaultParquetFileReaderFactory;
use datafusion::error::DataFusionError;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::parquet::arrow::ProjectionMask;
use datafusion::parquet::arrow::async_reader::{AsyncFileReader, ParquetRecordBatchStreamBuilder};
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use datafusion::prelude::SessionContext;
use futures::TryStreamExt;
use gpuledger_lake::Catalog;
use gpuledger_ledger::build::{BillingItem, ManualCost, Node, RateCardEntry, Reservation};
use gpuledger_ledger::gpu_hours::{ClassCosts, GpuHour, Owner};
use gpuledger_ledger::journal::SharedCostRule;
use gpuledger_ledger::money::Money;
use gpuledger_ledger::objects::{
    LabelPolicy, ManualCostSpec, RateCardSpec, ReservationSpec, SharedCostRuleSpec, Spec,
};
use gpuledger_ledger::time::{Micros, Span};

use crate::columns::{floats, int32s, money, several, strings, text, timestamps, value};
use crate::error::QueryError;
use crate::session::LAKE_URL;

/// What the catalog declares for the ledger (`gpuledger apply`).
#[derive(Debug, Clone, Default)]
pub struct Declared {
    pub nodes: Vec<Node>,
    pub reservations: Vec<Reservation>,
    pub rules: Vec<SharedCostRule>,
    pub rate_card: Vec<RateCardEntry>,
    pub manual_costs: Vec<ManualCost>,
    pub allowed_teams: Option<BTreeSet<String>>,
    /// The latest change to any of them (microseconds): a built day older than this is rebuilt.
    pub changed_at: Micros,
}

/// Reads the declared objects from the catalog, typed; rules in the order they apply.
pub async fn declared(catalog: &Catalog) -> Result<Declared, QueryError> {
    async fn typed<S: Spec>(
        catalog: &Catalog,
        changed_at: &mut Micros,
    ) -> Result<Vec<S>, QueryError> {
        let declared = catalog.objects_of::<S>().await?;
        Ok(declared
            .into_iter()
            .map(|d| {
                *changed_at = (*changed_at).max(d.updated_at);
                d.spec
            })
            .collect())
    }
    let mut changed_at = 0;
    let policies: Vec<LabelPolicy> = typed(catalog, &mut changed_at).await?;
    Ok(Declared {
        nodes: typed(catalog, &mut changed_at).await?,
        reservations: typed::<ReservationSpec>(catalog, &mut changed_at)
            .await?
            .iter()
            .map(Reservation::from)
            .collect(),
        rules: typed::<SharedCostRuleSpec>(catalog, &mut changed_at)
            .await?
            .into_iter()
            .map(|r| r.base)
            .collect(),
        rate_card: typed::<RateCardSpec>(catalog, &mut changed_at)
            .await?
            .into_iter()
            .map(|r| r.base)
            .collect(),
        manual_costs: typed::<ManualCostSpec>(catalog, &mut changed_at)
            .await?
            .iter()
            .map(ManualCost::from)
            .collect(),
        allowed_teams: policies.first().and_then(LabelPolicy::allowed_teams),
        changed_at,
    })
}

/// A SQL literal of the lake's timestamp type (microseconds, UTC) for a time in microseconds.
/// Not `TIMESTAMP '…'`: DataFusion reads that as nanoseconds, which end in 2262, while the lake
/// keeps times to 9999.
pub fn ts_literal(micros: Micros) -> String {
    format!("arrow_cast({micros}, 'Timestamp(µs, \"UTC\")')")
}

/// The `gpu_samples` rows of `span` that belong to a GPU (those with a node and an index).
pub fn gpu_rows(span: Span) -> String {
    format!(
        "ts >= {} AND ts < {} AND node IS NOT NULL AND gpu_index IS NOT NULL",
        ts_literal(span.start),
        ts_literal(span.end)
    )
}

/// The `gpu_samples` rows of `nodes`, each a (cluster, node) as [`GpuKeys`] reads them (a
/// cluster of "" is a row without one); `false` for none.
pub fn nodes_filter(nodes: &BTreeSet<(String, String)>) -> String {
    let mut by_cluster: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (cluster, node) in nodes {
        by_cluster
            .entry(cluster)
            .or_default()
            .push(text_literal(node));
    }
    if by_cluster.is_empty() {
        return "false".into();
    }
    let each: Vec<String> = by_cluster
        .into_iter()
        .map(|(cluster, nodes)| {
            format!(
                "(coalesce(cluster, '') = {} AND node IN ({}))",
                text_literal(cluster),
                nodes.join(", ")
            )
        })
        .collect();
    format!("({})", each.join(" OR "))
}

/// What one `gpu_samples` file holds that decides which of the ledger's GPU-hours it can
/// change.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FileTelemetry {
    /// The nodes it has readings of, keyed as [`GpuKeys`] reads them.
    pub nodes: BTreeSet<(String, String)>,
    /// Whether it has XID readings (`xid_last`), which open or close a fault until the next.
    pub xids: bool,
}

/// [`FileTelemetry`] of one `gpu_samples` file (a path the catalog lists, of `bytes` bytes), read
/// through the session's lake store: only the file's `cluster`, `node` and `xid_last` pages are
/// fetched, however large the file. Read with the Parquet reader rather than planned as a query:
/// the live ledger asks this of every file a round finds, and group commit lands hundreds of
/// small files a minute, each of which cost a DataFusion plan (schema inference, optimizer,
/// physical plan) many times its read.
pub async fn file_telemetry(
    ctx: &SessionContext,
    path: &str,
    bytes: u64,
) -> Result<FileTelemetry, QueryError> {
    let store = ctx
        .runtime_env()
        .object_store(ObjectStoreUrl::parse(LAKE_URL.as_str())?)?;
    // The session's hint (512 KiB by default) reads a small file's footer and metadata at once.
    let hint = ctx
        .state()
        .config_options()
        .execution
        .parquet
        .metadata_size_hint;
    let reader: Box<dyn AsyncFileReader> = DefaultParquetFileReaderFactory::new(store)
        .create_reader(
            0,
            PartitionedFile::new(path, bytes),
            hint,
            &ExecutionPlanMetricsSet::new(),
        )?;
    let builder = ParquetRecordBatchStreamBuilder::new(reader)
        .await
        .map_err(DataFusionError::from)?;
    let columns =
        ProjectionMask::columns(builder.parquet_schema(), ["cluster", "node", "xid_last"]);
    let mut batches = builder
        .with_projection(columns)
        .build()
        .map_err(DataFusionError::from)?;
    let mut file = FileTelemetry::default();
    while let Some(batch) = batches.try_next().await.map_err(DataFusionError::from)? {
        let [cluster, node] = several(&batch, strings, ["cluster", "node"])?;
        let xids = floats(&batch, "xid_last")?;
        // The writer sorts rows by cluster and node, so a key is mostly inserted once per run
        // of its rows (the set keeps it once whatever the order).
        let mut last = None;
        for row in 0..batch.num_rows() {
            let Some(node) = text(&node, row) else {
                continue;
            };
            // `GpuKeys` reads a row without a cluster as cluster "".
            let key = (text(&cluster, row).unwrap_or(""), node);
            if last != Some(key) {
                file.nodes.insert((key.0.to_string(), key.1.to_string()));
                last = Some(key);
            }
            file.xids |= xids.is_valid(row);
        }
    }
    Ok(file)
}

/// `text` as a SQL string literal.
pub fn text_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

pub async fn query(ctx: &SessionContext, sql: &str) -> Result<Vec<RecordBatch>, QueryError> {
    Ok(ctx.sql(sql).await?.collect().await?)
}

/// A string column's value at `row`, owned; `None` when null.
pub fn owned(values: &StringViewArray, row: usize) -> Option<String> {
    text(values, row).map(str::to_string)
}

/// The GPU key columns of a result: `cluster` (NULL read as ""), `node`, `gpu_index`.
pub struct GpuKeys {
    pub cluster: StringViewArray,
    pub node: StringViewArray,
    pub gpu_index: Int32Array,
}

impl GpuKeys {
    pub fn of(batch: &RecordBatch) -> Result<Self, QueryError> {
        Ok(Self {
            cluster: strings(batch, "cluster")?,
            node: strings(batch, "node")?,
            gpu_index: int32s(batch, "gpu_index")?,
        })
    }

    /// `None` when the node or the GPU index is NULL (the queries filter those out).
    pub fn key(&self, row: usize) -> Option<(String, String, u32)> {
        let (cluster, node, index) = self.key_ref(row)?;
        Some((cluster.to_string(), node.to_string(), index))
    }

    /// [`key`](Self::key) borrowed from the batch, for comparing before allocating.
    pub fn key_ref(&self, row: usize) -> Option<(&str, &str, u32)> {
        Some((
            text(&self.cluster, row).unwrap_or_default(),
            text(&self.node, row)?,
            value(&self.gpu_index, row)? as u32,
        ))
    }
}

/// The `billing_lines` columns that shared-cost rules match on (with `resource_id` and the tags).
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

/// Billing lines whose charge period overlaps the window, with the FOCUS columns and tags that
/// shared-cost rules match on.
pub async fn billing(ctx: &SessionContext, window: Span) -> Result<Vec<BillingItem>, QueryError> {
    let sql = format!(
        "SELECT charge_period_start, charge_period_end, effective_cost, resource_id, tags, {}
         FROM billing_lines
         WHERE charge_period_start < {} AND coalesce(charge_period_end, charge_period_start) >= {}",
        RULE_COLUMNS.join(", "),
        ts_literal(window.end),
        ts_literal(window.start)
    );
    let mut lines = Vec::new();
    for batch in query(ctx, &sql).await? {
        lines.extend(billing_items(&batch)?.into_iter().flatten());
    }
    Ok(lines)
}

/// Each row of a `billing_lines` result (with at least the columns [`billing`] selects) as the
/// ledger sees it, row for row: `None` where the charge period's start is NULL (never, in the
/// lake: the column is required). A NULL end is the start (an instant).
pub fn billing_items(batch: &RecordBatch) -> Result<Vec<Option<BillingItem>>, QueryError> {
    let rule_columns = RULE_COLUMNS
        .iter()
        .map(|name| Ok((*name, strings(batch, name)?)))
        .collect::<Result<Vec<_>, QueryError>>()?;
    let (resource_id, tags) = (strings(batch, "resource_id")?, strings(batch, "tags")?);
    let (start, end) = (
        timestamps(batch, "charge_period_start")?,
        timestamps(batch, "charge_period_end")?,
    );
    let effective_cost = money(batch, "effective_cost")?;
    Ok((0..batch.num_rows())
        .map(|row| {
            let start = value(&start, row)?;
            let end = value(&end, row).unwrap_or(start);
            let mut attributes: BTreeMap<String, String> = rule_columns
                .iter()
                .filter_map(|(name, values)| owned(values, row).map(|v| (name.to_string(), v)))
                .collect();
            if let Some(resource) = owned(&resource_id, row) {
                attributes.insert("resource_id".into(), resource);
            }
            if let Some(serde_json::Value::Object(tags)) =
                text(&tags, row).and_then(|t| serde_json::from_str(t).ok())
            {
                for (key, value) in tags {
                    let value = match value {
                        serde_json::Value::String(s) => s,
                        other => other.to_string(),
                    };
                    attributes.insert(format!("tags.{}", key.trim()), value);
                }
            }
            Some(BillingItem {
                charge_period: Span::new(start, end),
                effective_cost: value(&effective_cost, row)
                    .map(Money::from_units)
                    .unwrap_or_default(),
                resource_id: owned(&resource_id, row),
                attributes,
            })
        })
        .collect())
}

/// Usage measures for `usage` rules, per day and team: `requests` and `tokens` from the gateway.
pub async fn usage(
    ctx: &SessionContext,
    window: Span,
) -> Result<BTreeMap<String, BTreeMap<(Micros, String), f64>>, QueryError> {
    let sql = format!(
        "SELECT date_trunc('day', ts) AS day, team, CAST(count(*) AS DOUBLE) AS requests,
                CAST(sum(coalesce(input_tokens, 0) + coalesce(output_tokens, 0)) AS DOUBLE) AS tokens
         FROM token_usage WHERE ts >= {} AND ts < {} AND team IS NOT NULL GROUP BY 1, 2",
        ts_literal(window.start),
        ts_literal(window.end)
    );
    let mut usage: BTreeMap<String, BTreeMap<(Micros, String), f64>> = BTreeMap::new();
    for batch in query(ctx, &sql).await? {
        let (days, teams) = (timestamps(&batch, "day")?, strings(&batch, "team")?);
        let measures = [
            ("requests", floats(&batch, "requests")?),
            ("tokens", floats(&batch, "tokens")?),
        ];
        for row in 0..batch.num_rows() {
            let (Some(day), Some(team)) = (value(&days, row), owned(&teams, row)) else {
                continue; // filtered by the query
            };
            for (measure, values) in &measures {
                usage
                    .entry((*measure).into())
                    .or_default()
                    .insert((day, team.clone()), value(values, row).unwrap_or(0.0));
            }
        }
    }
    Ok(usage)
}

/// The stored `gpu_hours` rows of a window (kept when only some hours are recomputed).
pub async fn stored_gpu_hours(
    ctx: &SessionContext,
    window: Span,
) -> Result<Vec<GpuHour>, QueryError> {
    let sql = format!(
        "SELECT * FROM gpu_hours WHERE hour >= {} AND hour < {}",
        ts_literal(window.start),
        ts_literal(window.end)
    );
    let mut rows = Vec::new();
    for batch in query(ctx, &sql).await? {
        rows.extend(gpu_hour_rows(&batch)?);
    }
    Ok(rows)
}

/// The rows of a batch of the `gpu_hours` table (the table's own columns, in any order).
pub fn gpu_hour_rows(batch: &RecordBatch) -> Result<Vec<GpuHour>, QueryError> {
    let mut rows = Vec::with_capacity(batch.num_rows());
    let gpus = GpuKeys::of(batch)?;
    let hours = timestamps(batch, "hour")?;
    let [uuid, team, namespace, workload, reserved_reason] = several(
        batch,
        strings,
        [
            "gpu_uuid",
            "team",
            "namespace",
            "workload",
            "reserved_reason",
        ],
    )?;
    let seconds = |name: &str| -> Result<_, QueryError> {
        let values = floats(batch, name)?;
        Ok(move |row: usize| value(&values, row).unwrap_or(0.0))
    };
    let cost = |name: &str| -> Result<_, QueryError> {
        let values = money(batch, name)?;
        Ok(move |row: usize| value(&values, row).map_or(Money::ZERO, Money::from_units))
    };
    let (alloc, busy, allocated_idle, reserved, unexplained, fault, energy) = (
        seconds("alloc_seconds")?,
        seconds("busy_seconds")?,
        seconds("allocated_idle_seconds")?,
        seconds("reserved_seconds")?,
        seconds("unexplained_seconds")?,
        seconds("fault_seconds")?,
        seconds("energy_wh")?,
    );
    let [sm_active, memory_used_share, power_w] =
        several(batch, floats, ["sm_active", "memory_used_share", "power_w"])?;
    let (total, cost_busy, cost_allocated_idle, cost_reserved, cost_unexplained, cost_fault) = (
        cost("cost")?,
        cost("cost_busy")?,
        cost("cost_allocated_idle")?,
        cost("cost_reserved")?,
        cost("cost_unexplained")?,
        cost("cost_fault")?,
    );
    for row in 0..batch.num_rows() {
        let (Some((cluster, node, gpu_index)), Some(hour)) = (gpus.key(row), value(&hours, row))
        else {
            continue; // the table's required columns are never null
        };
        rows.push(GpuHour {
            hour,
            cluster,
            node,
            gpu_index,
            gpu_uuid: owned(&uuid, row),
            owner: owned(&team, row).map(|team| Owner {
                team,
                namespace: owned(&namespace, row),
                workload: owned(&workload, row),
            }),
            alloc_seconds: alloc(row),
            busy_seconds: busy(row),
            allocated_idle_seconds: allocated_idle(row),
            reserved_seconds: reserved(row),
            reserved_reason: owned(&reserved_reason, row),
            unexplained_seconds: unexplained(row),
            fault_seconds: fault(row),
            sm_active: value(&sm_active, row),
            memory_used_share: value(&memory_used_share, row),
            power_w: value(&power_w, row),
            energy_wh: energy(row),
            cost: total(row),
            class_costs: ClassCosts {
                busy: cost_busy(row),
                allocated_idle: cost_allocated_idle(row),
                reserved: cost_reserved(row),
                unexplained: cost_unexplained(row),
                fault: cost_fault(row),
            },
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::ArrayRef;
    use object_store::ObjectStoreExt;

    use super::*;

    /// Each file names its own nodes, whichever others the lake has; readings without a node
    /// (not a GPU's) name none; only the file with an XID reading says it has some.
    #[tokio::test]
    async fn a_files_nodes_are_those_it_has_readings_of() {
        let reading = |labels: &str, hour: i64| {
            let ms = crate::test_lake::DAY_MS + hour * 3_600_000;
            format!("DCGM_FI_DEV_POWER_USAGE{{gpu=\"0\",{labels}}} 300 {ms}\n")
        };
        let (_dir, lake) = crate::test_lake::lake_with(
            gpuledger_ingest::pipeline::Source::Dcgm,
            "dcgm.prom",
            [
                reading(r#"UUID="GPU-a",Hostname="a""#, 1)
                    + &reading(r#"UUID="GPU-b",Hostname="o'b""#, 1),
                reading(r#"UUID="GPU-c",Hostname="c""#, 2)
                    + &reading(r#"UUID="GPU-x""#, 2)
                    + &format!(
                        "DCGM_FI_DEV_XID_ERRORS{{gpu=\"0\",UUID=\"GPU-c\",Hostname=\"c\"}} 79 {}\n",
                        crate::test_lake::DAY_MS + 2 * 3_600_000
                    ),
            ],
        )
        .await;
        let ctx = crate::new_session(&lake).unwrap();
        let mut files = lake
            .catalog()
            .active_files(gpuledger_lake::tables::Table::GpuSamples, None, None)
            .await
            .unwrap();
        files.sort_by_key(|f| f.min_ts);
        // Ingest names the cluster `default` when none is given.
        let key = |node: &str| ("default".to_string(), node.to_string());
        assert_eq!(files.len(), 2);
        assert_eq!(
            file_telemetry(&ctx, &files[0].path, files[0].bytes as u64)
                .await
                .unwrap(),
            FileTelemetry {
                nodes: BTreeSet::from([key("a"), key("o'b")]),
                xids: false
            }
        );
        assert_eq!(
            file_telemetry(&ctx, &files[1].path, files[1].bytes as u64)
                .await
                .unwrap(),
            FileTelemetry {
                nodes: BTreeSet::from([key("c")]),
                xids: true
            }
        );
    }

    /// A file as another writer may leave it: rows out of order and more than one reader batch,
    /// rows without a cluster (keyed "" as `GpuKeys` reads them), an XID reading on a row
    /// without a node (no node's hours, so not counted); and a wrong size in the catalog: the
    /// right answer or an error (the build then rebuilds every node), never a wrong answer.
    #[tokio::test]
    async fn a_files_nodes_are_read_whatever_its_order_and_clusters() {
        let (_dir, lake) = crate::test_lake::empty_lake().await;
        let rows = 3_000;
        let cluster: ArrayRef = Arc::new(arrow::array::StringArray::from_iter(
            (0..rows).map(|i| (i % 3 != 0).then(|| format!("c{}", i % 2))),
        ));
        let node: ArrayRef = Arc::new(arrow::array::StringArray::from_iter(
            (0..rows).map(|i| (i != 7).then(|| format!("n{}", (rows - i) % 5))),
        ));
        let xid_last: ArrayRef = Arc::new(arrow::array::Float64Array::from_iter(
            (0..rows).map(|i| (i == 7).then_some(79.0)),
        ));
        let batch = RecordBatch::try_from_iter([
            ("cluster", cluster),
            ("node", node),
            ("xid_last", xid_last),
        ])
        .unwrap();
        let bytes = gpuledger_lake::writer::encode_parquet(&batch).unwrap();
        let path = "tables/gpu_samples/date=2026-11-02/other-writer.parquet";
        lake.store()
            .put(&path.into(), bytes.clone().into())
            .await
            .unwrap();
        let ctx = crate::new_session(&lake).unwrap();

        // Row i has cluster c(i % 2) unless i % 3 == 0 (none), node n((3000 - i) % 5), descending
        // in runs: 2, 3 and 5 are coprime, so every node with each of "", "c0" and "c1".
        let expected: BTreeSet<(String, String)> = ["", "c0", "c1"]
            .iter()
            .flat_map(|c| (0..5).map(move |n| (c.to_string(), format!("n{n}"))))
            .collect();
        let telemetry = FileTelemetry {
            nodes: expected,
            xids: false,
        };
        let size = bytes.len() as u64;
        assert_eq!(file_telemetry(&ctx, path, size).await.unwrap(), telemetry);
        for wrong in [0, size - 1, size + 1, 2 * size] {
            if let Ok(read) = file_telemetry(&ctx, path, wrong).await {
                assert_eq!(read, telemetry, "read with a size of {wrong}");
            }
        }
    }

    /// A node named with a quote, and rows without a cluster (keyed "" as `GpuKeys` reads them).
    #[tokio::test]
    async fn the_nodes_filter_keeps_exactly_the_nodes_named() {
        let cluster: ArrayRef = Arc::new(arrow::array::StringArray::from(vec![
            None,
            None,
            Some("a"),
            Some("a"),
            Some("b"),
            Some(""),
        ]));
        let node: ArrayRef = Arc::new(arrow::array::StringArray::from(vec![
            "o'brien", "n2", "o'brien", "n2", "n2", "n3",
        ]));
        let batch = RecordBatch::try_from_iter([("cluster", cluster), ("node", node)]).unwrap();
        let ctx = SessionContext::new();
        ctx.register_batch("gpu_samples", batch).unwrap();
        let kept = |nodes: &[(&str, &str)]| {
            let nodes: BTreeSet<(String, String)> = nodes
                .iter()
                .map(|(c, n)| (c.to_string(), n.to_string()))
                .collect();
            let sql = format!(
                "SELECT coalesce(cluster, '') || '/' || node AS key FROM gpu_samples WHERE {}
                 ORDER BY key",
                nodes_filter(&nodes)
            );
            let ctx = ctx.clone();
            async move {
                let batches = query(&ctx, &sql).await.unwrap();
                batches
                    .iter()
                    .flat_map(|b| {
                        let keys = strings(b, "key").unwrap();
                        (0..b.num_rows())
                            .map(|row| keys.value(row).to_string())
                            .collect::<Vec<_>>()
                    })
                    .collect::<Vec<_>>()
            }
        };
        assert_eq!(kept(&[("", "o'brien")]).await, ["/o'brien"]);
        assert_eq!(
            kept(&[("", "n2"), ("", "n3"), ("b", "n2")]).await,
            ["/n2", "/n3", "b/n2"]
        );
        assert_eq!(
            kept(&[("a", "o'brien"), ("a", "n2")]).await,
            ["a/n2", "a/o'brien"]
        );
        assert!(kept(&[]).await.is_empty());
        assert!(kept(&[("c", "n2")]).await.is_empty());
    }
}
