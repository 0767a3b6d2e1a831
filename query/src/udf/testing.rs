//! What the UDF tests share: a session with the ledger functions, and results read as plain
//! Rust values.

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Float64Type};
use datafusion::prelude::{SessionConfig, SessionContext};

/// A session configured like `new_session` (PostgreSQL dialect, information schema), without a
/// lake: several partitions, so aggregates go through partial states and merges.
pub(super) fn session() -> SessionContext {
    let mut config = SessionConfig::new()
        .with_information_schema(true)
        .with_target_partitions(4);
    config.options_mut().sql_parser.dialect = datafusion::config::Dialect::PostgreSQL;
    let ctx = SessionContext::new_with_config(config);
    super::register_all(&ctx);
    ctx
}

/// The first column of the result, every row, cast to `data_type` and formatted by `read`.
async fn column<T>(
    ctx: &SessionContext,
    sql: &str,
    data_type: DataType,
    read: impl Fn(&dyn Array, usize) -> T,
) -> Vec<Option<T>> {
    let batches = ctx
        .sql(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let mut values = Vec::new();
    for batch in batches {
        let array = arrow::compute::cast(batch.column(0), &data_type).expect("castable result");
        values.extend((0..array.len()).map(|row| array.is_valid(row).then(|| read(&array, row))));
    }
    values
}

pub(super) async fn floats(ctx: &SessionContext, sql: &str) -> Vec<Option<f64>> {
    column(ctx, sql, DataType::Float64, |a, row| {
        a.as_primitive::<Float64Type>().value(row)
    })
    .await
}

pub(super) async fn strings(ctx: &SessionContext, sql: &str) -> Vec<Option<String>> {
    column(ctx, sql, DataType::Utf8, |a, row| {
        a.as_string::<i32>().value(row).to_string()
    })
    .await
}

/// The error `sql` fails with, at planning or at execution.
pub(super) async fn error(ctx: &SessionContext, sql: &str) -> String {
    let result = match ctx.sql(sql).await {
        Ok(frame) => frame.collect().await.map(|_| ()),
        Err(e) => Err(e),
    };
    result.expect_err(sql).strip_backtrace()
}

/// `a` and `b` agree to rounding.
pub(super) fn assert_close(actual: &[Option<f64>], expected: &[Option<f64>]) {
    let agree = actual.len() == expected.len()
        && actual.iter().zip(expected).all(|pair| match pair {
            (Some(a), Some(b)) => (a - b).abs() < 1e-9,
            (a, b) => a == b,
        });
    assert!(agree, "{actual:?} != {expected:?}");
}
