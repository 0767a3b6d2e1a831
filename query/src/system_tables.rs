//! The catalog's own state as SQL tables: `system.files`, `system.ingest_batches`,
//! `system.quarantine` (also reachable as plain `quarantine`), `system.report_runs` (the weekly
//! report's exports). Read fresh at every scan.

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Int64Array, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::Result as DfResult;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;
use gpuledger_lake::Catalog;
use gpuledger_lake::tables::timestamp;

use crate::error::to_df;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SystemTable {
    Files,
    IngestBatches,
    Quarantine,
    ReportRuns,
}

impl SystemTable {
    pub const ALL: [SystemTable; 4] = [
        SystemTable::Files,
        SystemTable::IngestBatches,
        SystemTable::Quarantine,
        SystemTable::ReportRuns,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SystemTable::Files => "files",
            SystemTable::IngestBatches => "ingest_batches",
            SystemTable::Quarantine => "quarantine",
            SystemTable::ReportRuns => "report_runs",
        }
    }

    fn schema(self) -> SchemaRef {
        let text = |name: &str| Field::new(name, DataType::Utf8, true);
        let int = |name: &str| Field::new(name, DataType::Int64, true);
        let time = |name: &str| Field::new(name, timestamp(), true);
        Arc::new(Schema::new(match self {
            SystemTable::Files => vec![
                text("table_name"),
                text("partition_date"),
                text("path"),
                text("batch_id"),
                int("rows"),
                int("bytes"),
                time("min_time"),
                time("max_time"),
                Field::new("active", DataType::Boolean, false),
                text("replaced_by"),
            ],
            SystemTable::IngestBatches => vec![
                text("batch_id"),
                text("source"),
                text("origin"),
                int("records_read"),
                int("rows_landed"),
                int("records_rejected"),
                int("rows_replaced"),
                time("committed_at"),
                // Committed with other inputs in one transaction (group commit): the batch whose
                // files hold the group's rows. Null: committed alone, in its own files.
                text("committed_with"),
            ],
            SystemTable::Quarantine => vec![
                text("batch_id"),
                text("source"),
                text("file"),
                int("line"),
                text("field"),
                text("reason"),
                text("raw"),
                time("rejected_at"),
            ],
            SystemTable::ReportRuns => vec![
                text("week"),
                text("status"),
                int("attempts"),
                time("started_at"),
                time("finished_at"),
                text("error"),
                // The object-store keys written, as a JSON array.
                text("objects"),
                text("lease_owner"),
                time("next_attempt_at"),
            ],
        }))
    }

    async fn read(self, catalog: &Catalog) -> DfResult<RecordBatch> {
        fn text<'a>(values: impl Iterator<Item = &'a str>) -> ArrayRef {
            Arc::new(StringArray::from_iter_values(values))
        }
        fn opt_text<'a>(values: impl Iterator<Item = Option<&'a str>>) -> ArrayRef {
            Arc::new(StringArray::from_iter(values))
        }
        fn int(values: impl Iterator<Item = i64>) -> ArrayRef {
            Arc::new(Int64Array::from_iter_values(values))
        }
        fn time(values: impl Iterator<Item = i64>) -> ArrayRef {
            Arc::new(TimestampMicrosecondArray::from_iter_values(values).with_timezone("UTC"))
        }
        fn opt_time(values: impl Iterator<Item = Option<i64>>) -> ArrayRef {
            Arc::new(TimestampMicrosecondArray::from_iter(values).with_timezone("UTC"))
        }
        let columns: Vec<ArrayRef> = match self {
            SystemTable::Files => {
                let f = catalog.all_files().await.map_err(to_df)?;
                vec![
                    text(f.iter().map(|f| f.table.as_str())),
                    text(f.iter().map(|f| f.partition_date.as_str())),
                    text(f.iter().map(|f| f.path.as_str())),
                    text(f.iter().map(|f| f.batch_id.as_str())),
                    int(f.iter().map(|f| f.rows)),
                    int(f.iter().map(|f| f.bytes)),
                    time(f.iter().map(|f| f.min_ts)),
                    time(f.iter().map(|f| f.max_ts)),
                    Arc::new(BooleanArray::from_iter(
                        f.iter().map(|f| Some(f.replaced_by.is_none())),
                    )),
                    opt_text(f.iter().map(|f| f.replaced_by.as_deref())),
                ]
            }
            SystemTable::IngestBatches => {
                let b = catalog.batches().await.map_err(to_df)?;
                vec![
                    text(b.iter().map(|b| b.batch_id.as_str())),
                    text(b.iter().map(|b| b.source.as_str())),
                    text(b.iter().map(|b| b.origin.as_str())),
                    int(b.iter().map(|b| b.records_read)),
                    int(b.iter().map(|b| b.rows_landed)),
                    int(b.iter().map(|b| b.records_rejected)),
                    int(b.iter().map(|b| b.rows_replaced)),
                    time(b.iter().map(|b| b.committed_at)),
                    opt_text(b.iter().map(|b| b.committed_with.as_deref())),
                ]
            }
            SystemTable::Quarantine => {
                let q = catalog.quarantine().await.map_err(to_df)?;
                vec![
                    text(q.iter().map(|q| q.batch_id.as_str())),
                    text(q.iter().map(|q| q.source.as_str())),
                    text(q.iter().map(|q| q.origin.as_str())),
                    int(q.iter().map(|q| q.rejection.line as i64)),
                    text(q.iter().map(|q| q.rejection.field.as_str())),
                    text(q.iter().map(|q| q.rejection.reason.as_str())),
                    text(q.iter().map(|q| q.rejection.raw.as_str())),
                    time(q.iter().map(|q| q.created_at)),
                ]
            }
            SystemTable::ReportRuns => {
                let r = catalog.report_runs().await.map_err(to_df)?;
                let objects: Vec<String> = r
                    .iter()
                    .map(|r| serde_json::to_string(&r.objects).expect("strings serialize"))
                    .collect();
                vec![
                    text(r.iter().map(|r| r.week.as_str())),
                    text(r.iter().map(|r| r.status.as_str())),
                    int(r.iter().map(|r| r.attempts)),
                    time(r.iter().map(|r| r.started_at)),
                    opt_time(r.iter().map(|r| r.finished_at)),
                    opt_text(r.iter().map(|r| r.error.as_deref())),
                    text(objects.iter().map(String::as_str)),
                    text(r.iter().map(|r| r.lease_owner.as_str())),
                    opt_time(r.iter().map(|r| r.next_attempt_at)),
                ]
            }
        };
        Ok(RecordBatch::try_new(self.schema(), columns)?)
    }
}

#[derive(Debug)]
pub struct SystemTableProvider {
    table: SystemTable,
    catalog: Catalog,
}

impl SystemTableProvider {
    pub fn new(table: SystemTable, catalog: Catalog) -> Self {
        Self { table, catalog }
    }
}

#[async_trait]
impl TableProvider for SystemTableProvider {
    fn schema(&self) -> SchemaRef {
        self.table.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let batch = self.table.read(&self.catalog).await?;
        Ok(MemorySourceConfig::try_new_exec(
            &[vec![batch]],
            self.schema(),
            projection.cloned(),
        )?)
    }
}
