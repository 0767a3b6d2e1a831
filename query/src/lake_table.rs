//! A lake table as DataFusion sees it. The file list comes from the catalog, pruned by the time
//! bounds found in the query's filters, so a scan never lists the object store. Filters are
//! also pushed into the Parquet scan for row-group and page pruning.

use std::sync::Arc;

use arrow::datatypes::{DataType, SchemaRef, TimeUnit};
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::datasource::file_format::FileFormat;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder, ParquetSource};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::empty::EmptyExec;
use gpuledger_lake::Catalog;
use gpuledger_lake::tables::Table;

use crate::error::to_df;

#[derive(Debug)]
pub struct LakeTable {
    table: Table,
    catalog: Catalog,
    store_url: ObjectStoreUrl,
}

impl LakeTable {
    pub fn new(table: Table, catalog: Catalog, store_url: ObjectStoreUrl) -> Self {
        Self {
            table,
            catalog,
            store_url,
        }
    }
}

#[async_trait]
impl TableProvider for LakeTable {
    fn schema(&self) -> SchemaRef {
        self.table.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let bounds = TimeBounds::from_filters(self.table.time_column(), filters);
        let files = self
            .catalog
            .active_files(self.table, bounds.from, bounds.to)
            .await
            .map_err(to_df)?;
        if files.is_empty() {
            let schema = datafusion::physical_plan::project_schema(&self.schema(), projection)?;
            return Ok(Arc::new(EmptyExec::new(schema)));
        }
        let partitions = state.config().target_partitions().max(1);
        let mut groups: Vec<Vec<PartitionedFile>> = vec![Vec::new(); partitions.min(files.len())];
        for (i, file) in files.into_iter().enumerate() {
            let n = groups.len();
            groups[i % n].push(PartitionedFile::new(file.path, file.bytes as u64));
        }
        let source = Arc::new(ParquetSource::new(self.schema()));
        let config = FileScanConfigBuilder::new(self.store_url.clone(), source)
            .with_file_groups(groups.into_iter().map(FileGroup::new).collect())
            .with_projection_indices(projection.cloned())?
            .with_limit(limit)
            .build();
        ParquetFormat::default()
            .create_physical_plan(state, config)
            .await
    }
}

/// `[from, to)` in microseconds, as far as simple comparisons on the time column tell.
#[derive(Debug, Default, PartialEq)]
struct TimeBounds {
    from: Option<i64>,
    to: Option<i64>,
}

impl TimeBounds {
    fn from_filters(column: &str, filters: &[Expr]) -> Self {
        let mut bounds = Self::default();
        for filter in filters {
            bounds.narrow(column, filter);
        }
        bounds
    }

    fn narrow(&mut self, column: &str, expr: &Expr) {
        match expr {
            Expr::BinaryExpr(BinaryExpr {
                left,
                op: Operator::And,
                right,
            }) => {
                self.narrow(column, left);
                self.narrow(column, right);
            }
            Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
                let (op, value) = match (strip_cast(left), strip_cast(right)) {
                    (Expr::Column(c), Expr::Literal(v, _)) if c.name == column => (*op, v),
                    (Expr::Literal(v, _), Expr::Column(c)) if c.name == column => match op.swap() {
                        Some(op) => (op, v),
                        None => return,
                    },
                    _ => return,
                };
                let Some(micros) = micros_of(value) else {
                    return;
                };
                match op {
                    Operator::Gt | Operator::GtEq => {
                        self.from = Some(self.from.map_or(micros, |f| f.max(micros)));
                    }
                    Operator::Lt => self.to = Some(self.to.map_or(micros, |t| t.min(micros))),
                    Operator::LtEq => {
                        self.to = Some(self.to.map_or(micros + 1, |t| t.min(micros + 1)));
                    }
                    Operator::Eq => {
                        self.from = Some(self.from.map_or(micros, |f| f.max(micros)));
                        self.to = Some(self.to.map_or(micros + 1, |t| t.min(micros + 1)));
                    }
                    _ => {}
                }
            }
            Expr::Between(between) if !between.negated => {
                if let (Expr::Column(c), Expr::Literal(low, _), Expr::Literal(high, _)) = (
                    strip_cast(&between.expr),
                    strip_cast(&between.low),
                    strip_cast(&between.high),
                ) && c.name == column
                    && let (Some(low), Some(high)) = (micros_of(low), micros_of(high))
                {
                    self.from = Some(self.from.map_or(low, |f| f.max(low)));
                    self.to = Some(self.to.map_or(high + 1, |t| t.min(high + 1)));
                }
            }
            _ => {}
        }
    }
}

fn strip_cast(expr: &Expr) -> &Expr {
    match expr {
        Expr::Cast(cast) => strip_cast(&cast.expr),
        Expr::TryCast(cast) => strip_cast(&cast.expr),
        other => other,
    }
}

fn micros_of(value: &ScalarValue) -> Option<i64> {
    let target = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
    match value.cast_to(&target).ok()? {
        ScalarValue::TimestampMicrosecond(Some(v), _) => Some(v),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use datafusion::prelude::{col, lit};

    use super::*;

    fn ts(s: &str) -> Expr {
        lit(ScalarValue::TimestampMicrosecond(
            Some(
                chrono::DateTime::parse_from_rfc3339(s)
                    .unwrap()
                    .timestamp_micros(),
            ),
            Some("UTC".into()),
        ))
    }

    #[test]
    fn bounds_come_from_comparisons_on_the_time_column() {
        // 2024-09-18T00:00:00Z = 1_726_617_600 s.
        let filters = [col("ts")
            .gt_eq(ts("2024-09-18T00:00:00Z"))
            .and(col("ts").lt(ts("2024-09-19T00:00:00Z")))];
        assert_eq!(
            TimeBounds::from_filters("ts", &filters),
            TimeBounds {
                from: Some(1_726_617_600_000_000),
                to: Some(1_726_704_000_000_000)
            }
        );
        // Reversed operands, <= (inclusive), and a filter on another column that must not count.
        let filters = [
            ts("2024-09-18T00:00:00Z").lt_eq(col("ts")),
            col("ts").lt_eq(ts("2024-09-18T01:00:00Z")),
            col("other").gt(lit(5)),
        ];
        assert_eq!(
            TimeBounds::from_filters("ts", &filters),
            TimeBounds {
                from: Some(1_726_617_600_000_000),
                to: Some(1_726_621_200_000_001)
            }
        );
        assert_eq!(
            TimeBounds::from_filters("ts", &[col("ts").not_eq(ts("2024-09-18T00:00:00Z"))]),
            TimeBounds::default()
        );
    }

    #[test]
    fn string_literals_are_understood_as_times() {
        let filters = [col("charge_period_start").gt_eq(lit("2024-09-01T00:00:00Z"))];
        assert_eq!(
            TimeBounds::from_filters("charge_period_start", &filters).from,
            Some(1_725_148_800_000_000)
        );
    }
}
