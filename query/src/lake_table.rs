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
use datafusion::logical_expr::{
    BinaryExpr, Cast, Expr, Operator, TableProviderFilterPushDown, TryCast,
};
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

/// `[from, to)` in microseconds, as far as simple comparisons on the time column tell: wide
/// enough to hold every row the filters keep (the filters still run on the rows), since a file
/// left out here is never read.
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
                let (op, value, slack) = match (left.as_ref(), right.as_ref()) {
                    (times, Expr::Literal(v, _)) => match moved_by(times, column) {
                        Some(slack) => (*op, v, slack),
                        None => return,
                    },
                    (Expr::Literal(v, _), times) => match (moved_by(times, column), op.swap()) {
                        (Some(slack), Some(op)) => (op, v, slack),
                        _ => return,
                    },
                    _ => return,
                };
                let Some(at) = Micros::of(value) else {
                    return;
                };
                match op {
                    Operator::Gt | Operator::GtEq => self.raise_from(at.floor - slack),
                    Operator::Lt => self.lower_to(at.ceil + slack),
                    Operator::LtEq => self.lower_to(at.floor + 1 + slack),
                    Operator::Eq => {
                        self.raise_from(at.floor - slack);
                        self.lower_to(at.floor + 1 + slack);
                    }
                    _ => {}
                }
            }
            Expr::Between(between) if !between.negated => {
                if let (Some(slack), Expr::Literal(low, _), Expr::Literal(high, _)) = (
                    moved_by(&between.expr, column),
                    between.low.as_ref(),
                    between.high.as_ref(),
                ) && let (Some(low), Some(high)) = (Micros::of(low), Micros::of(high))
                {
                    self.raise_from(low.floor - slack);
                    self.lower_to(high.floor + 1 + slack);
                }
            }
            _ => {}
        }
    }

    fn raise_from(&mut self, from: i64) {
        self.from = Some(self.from.map_or(from, |f| f.max(from)));
    }

    fn lower_to(&mut self, to: i64) {
        self.to = Some(self.to.map_or(to, |t| t.min(to)));
    }
}

const MICROS_PER_DAY: i64 = 86_400_000_000;

/// How far from its time the value of `expr` may lie, if `expr` is the time column under casts
/// that keep the order of times: none for another time zone or a unit as fine as the column's;
/// less than a day for each cast to a date or to whole seconds or milliseconds (so that
/// `ts::date = '2026-11-02'` still finds the files of that day's afternoon). `None` for anything
/// else — a function, a cast to text or to a number — which bounds nothing.
fn moved_by(expr: &Expr, column: &str) -> Option<i64> {
    match expr {
        Expr::Column(c) if c.name == column => Some(0),
        Expr::Cast(Cast { expr, field }) | Expr::TryCast(TryCast { expr, field }) => {
            let moves = match field.data_type() {
                DataType::Timestamp(TimeUnit::Microsecond | TimeUnit::Nanosecond, _) => 0,
                DataType::Timestamp(TimeUnit::Second | TimeUnit::Millisecond, _)
                | DataType::Date32
                | DataType::Date64 => MICROS_PER_DAY,
                _ => return None,
            };
            Some((moved_by(expr, column)? + moves).min(Micros::LIMIT))
        }
        _ => None,
    }
}

/// A literal time in whole microseconds, the column's unit: the one at or before it and the one at
/// or after it (the same unless the literal is finer, say nanoseconds). Times more than ~6,900
/// years from 1970 bound nothing, so that the bounds' arithmetic never overflows.
struct Micros {
    floor: i64,
    ceil: i64,
}

impl Micros {
    const LIMIT: i64 = 220_000_000_000_000_000; // ± ~6,970 years from 1970

    fn of(value: &ScalarValue) -> Option<Self> {
        // Type coercion leaves a time, a date or (at most) text facing the time column; a number
        // means no time unit we could know.
        if !matches!(
            value.data_type(),
            DataType::Timestamp(..)
                | DataType::Date32
                | DataType::Date64
                | DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Utf8View
        ) {
            return None;
        }
        let at = |unit| DataType::Timestamp(unit, Some("UTC".into()));
        let (floor, ceil) = match value.cast_to(&at(TimeUnit::Nanosecond)) {
            Ok(ScalarValue::TimestampNanosecond(Some(ns), _)) => {
                let floor = ns.div_euclid(1000);
                (floor, floor + i64::from(ns.rem_euclid(1000) != 0))
            }
            // Beyond what nanoseconds hold (1677–2262): whole microseconds or coarser.
            _ => match value.cast_to(&at(TimeUnit::Microsecond)).ok()? {
                ScalarValue::TimestampMicrosecond(Some(us), _) => (us, us),
                _ => return None,
            },
        };
        (floor.abs() < Self::LIMIT && ceil.abs() < Self::LIMIT).then_some(Self { floor, ceil })
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::AsArray;
    use arrow::datatypes::Int64Type;
    use chrono::Utc;
    use datafusion::logical_expr::{cast, try_cast};
    use datafusion::prelude::{col, lit};
    use gpuledger_ingest::pipeline::{IngestOptions, Input, Source, ingest};
    use gpuledger_ingest::record::ParseContext;
    use gpuledger_lake::{Lake, LakeConfig};

    use super::*;
    use crate::session::new_session;

    /// 2024-09-18T00:00:00Z.
    const MIDNIGHT: i64 = 1_726_617_600_000_000;

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

    #[test]
    fn a_cast_to_a_date_or_whole_seconds_widens_the_bounds_by_a_day() {
        let day = Expr::Literal(ScalarValue::Date32(Some(19_984)), None); // 2024-09-18
        let on_the_day = [cast(col("ts"), DataType::Date32).eq(day.clone())];
        assert_eq!(
            TimeBounds::from_filters("ts", &on_the_day),
            TimeBounds {
                from: Some(MIDNIGHT - MICROS_PER_DAY),
                to: Some(MIDNIGHT + 1 + MICROS_PER_DAY)
            }
        );
        let seconds = DataType::Timestamp(TimeUnit::Second, None);
        let until = [try_cast(col("ts"), seconds).lt_eq(ts("2024-09-18T00:00:00Z"))];
        assert_eq!(
            TimeBounds::from_filters("ts", &until).to,
            Some(MIDNIGHT + 1 + MICROS_PER_DAY)
        );
        // Another time zone or nanoseconds move no time.
        let zoned = DataType::Timestamp(TimeUnit::Nanosecond, Some("+02:00".into()));
        let from = [cast(col("ts"), zoned).gt_eq(ts("2024-09-18T00:00:00Z"))];
        assert_eq!(TimeBounds::from_filters("ts", &from).from, Some(MIDNIGHT));
    }

    #[test]
    fn casts_to_text_or_numbers_and_numbers_bound_nothing() {
        for filter in [
            cast(col("ts"), DataType::Utf8).gt_eq(lit("2024-09-18")),
            cast(col("ts"), DataType::Int64).lt(lit(MIDNIGHT)),
            col("ts").lt(lit(MIDNIGHT)),
            cast(lit("2024-09-18T13:00:00Z"), DataType::Date32).lt_eq(col("ts")),
        ] {
            assert_eq!(
                TimeBounds::from_filters("ts", std::slice::from_ref(&filter)),
                TimeBounds::default(),
                "{filter}"
            );
        }
    }

    #[test]
    fn a_literal_finer_than_a_microsecond_rounds_outwards() {
        let nanos = |ns: i64| Expr::Literal(ScalarValue::TimestampNanosecond(Some(ns), None), None);
        let ns = DataType::Timestamp(TimeUnit::Nanosecond, None);
        // ts < 00:00:00.000000500 holds at 00:00:00: the bound must reach past it.
        let before = [cast(col("ts"), ns.clone()).lt(nanos(MIDNIGHT * 1000 + 500))];
        assert_eq!(
            TimeBounds::from_filters("ts", &before).to,
            Some(MIDNIGHT + 1)
        );
        let after = [cast(col("ts"), ns).gt(nanos(MIDNIGHT * 1000 + 500))];
        assert_eq!(TimeBounds::from_filters("ts", &after).from, Some(MIDNIGHT));
    }

    #[test]
    fn the_ends_of_time_bound_nothing_and_never_overflow() {
        let at = |us| Expr::Literal(ScalarValue::TimestampMicrosecond(Some(us), None), None);
        for filter in [
            col("ts").lt_eq(at(i64::MAX)),
            col("ts").gt(at(i64::MIN)),
            cast(col("ts"), DataType::Date32).eq(at(i64::MAX)),
            col("ts").between(at(i64::MIN), at(i64::MAX)),
        ] {
            assert_eq!(
                TimeBounds::from_filters("ts", std::slice::from_ref(&filter)),
                TimeBounds::default(),
                "{filter}"
            );
        }
    }

    /// Samples at 00:00 and 12:00 of 2026-11-02, each in a file of its own, and one at 00:00 the
    /// next day: however a query names the day, it reads both of that day's files.
    #[tokio::test]
    async fn every_spelling_of_a_day_reads_all_its_files() {
        let dir = tempfile::tempdir().unwrap();
        let lake = Lake::open(&LakeConfig {
            data: dir.path().display().to_string(),
            catalog: None,
        })
        .await
        .unwrap();
        const DAY_MS: i64 = 1_793_577_600_000; // 2026-11-02T00:00:00Z
        for ms in [DAY_MS, DAY_MS + 12 * 3_600_000, DAY_MS + 24 * 3_600_000] {
            let text = format!(
                "DCGM_FI_DEV_POWER_USAGE{{gpu=\"0\",UUID=\"GPU-0\",Hostname=\"n1\"}} 400 {ms}\n"
            );
            let input = Input::Bytes {
                origin: "dcgm.prom".into(),
                bytes: text.into(),
            };
            let options =
                IngestOptions::new(Source::Dcgm, ParseContext::new("dcgm.prom", Utc::now()));
            ingest(&lake, input, options).await.unwrap();
        }
        let ctx = new_session(&lake).unwrap();
        for (filter, expected) in [
            ("true", 3),
            ("cast(ts as date) = date '2026-11-02'", 2),
            ("ts::date between '2026-11-01' and '2026-11-02'", 2),
            ("cast(ts as date) <= date '2026-11-02'", 2),
            ("cast(ts as date) > date '2026-11-02'", 1),
            (
                "cast(ts as timestamp(0)) >= timestamp '2026-11-02 12:00:00'",
                2,
            ),
            (
                "cast(ts as timestamp(3)) < timestamp '2026-11-02 12:00:00.001'",
                2,
            ),
            (
                "ts >= timestamp '2026-11-02' and ts < timestamp '2026-11-03'",
                2,
            ),
            (
                "ts between timestamp '1677-09-22' and timestamp '2262-04-11'",
                3,
            ),
        ] {
            let sql = format!("select count(*) from gpu_samples where {filter}");
            let batches = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
            let count = batches[0].column(0).as_primitive::<Int64Type>().value(0);
            assert_eq!(count, expected, "{sql}");
        }
    }
}
