use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Float64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
    TimestampMillisecondArray,
};
use arrow::datatypes::{Field, Schema};
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;

use super::*;
use crate::udf::testing::{assert_close, error, floats, session};

const S: Micros = MICROS_PER_SECOND;

#[tokio::test]
async fn a_gap_counts_for_nothing_and_order_does_not_matter() {
    let ctx = session();
    // 0.5 at 0 s and 30 s, 0.0 at 60 s, nothing until 1.0 at 600 s, given out of order.
    // max gap 120 s: holdings 30, 30, 120 (not 540) and 120 for the last sample:
    // (0.5·30 + 0.5·30 + 0·120 + 1.0·120) / 300 = 0.5.
    // max gap 1000 s: holdings 30, 30, 540, 1000: (15 + 15 + 0 + 1000) / 1600 = 0.64375.
    let sql = |max_gap: u32| {
        format!(
            "select time_weighted_avg(v, to_timestamp_seconds(s), {max_gap}) \
            from (values (600, 1.0), (30, 0.5), (0, 0.5), (60, 0.0)) t(s, v)"
        )
    };
    assert_eq!(floats(&ctx, &sql(120)).await, [Some(0.5)]);
    assert_eq!(floats(&ctx, &sql(1000)).await, [Some(0.64375)]);
}

/// Samples of three GPUs spread over three partitions, each partition out of order.
fn register_samples(ctx: &SessionContext) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("gpu", DataType::Utf8, false),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            false,
        ),
        Field::new("v", DataType::Float64, true),
    ]));
    let partition = |rows: &[(&str, i64, Option<f64>)]| {
        let gpu: StringArray = rows.iter().map(|r| Some(r.0)).collect();
        let ts = TimestampMillisecondArray::from_iter_values(rows.iter().map(|r| r.1 * 1000))
            .with_timezone("UTC");
        let v: Float64Array = rows.iter().map(|r| r.2).collect();
        let columns: Vec<ArrayRef> = vec![Arc::new(gpu), Arc::new(ts), Arc::new(v)];
        vec![RecordBatch::try_new(Arc::clone(&schema), columns).unwrap()]
    };
    let partitions = vec![
        partition(&[("a", 100, Some(0.5)), ("b", 30, Some(0.0)), ("a", 40, None)]),
        partition(&[("a", 0, Some(0.2)), ("c", 0, None), ("b", 0, Some(1.0))]),
        partition(&[("a", 10, Some(0.8))]),
    ];
    let table = MemTable::try_new(Arc::clone(&schema), partitions).unwrap();
    ctx.register_table("samples", Arc::new(table)).unwrap();
}

// With max gap 60 s:
// a: 0.2 at 0 s holds 10 s, 0.8 at 10 s holds min(90, 60) = 60 s (the NULL at 40 s is skipped,
//    it does not cut the holding short), 0.5 at 100 s holds 60 s: (2 + 48 + 30) / 130;
// b: 1.0 at 0 s holds 30 s, 0.0 at 30 s holds 60 s: 30 / 90;
// c: only a NULL: NULL.
const A: f64 = 80.0 / 130.0;
const B: f64 = 30.0 / 90.0;

#[tokio::test]
async fn each_group_across_partitions() {
    let ctx = session();
    register_samples(&ctx);
    let sql = "select time_weighted_avg(v, ts, 60) from samples group by gpu order by gpu";
    assert_close(&floats(&ctx, sql).await, &[Some(A), Some(B), None]);
    // Without GROUP BY (one accumulator per partition, merged).
    let sql = "select time_weighted_avg(v, ts, 60) from samples where gpu = 'a'";
    assert_close(&floats(&ctx, sql).await, &[Some(A)]);
    // Over a window.
    let sql = "select time_weighted_avg(v, ts, 60) over (partition by gpu) \
        from samples where gpu = 'b'";
    assert_close(&floats(&ctx, sql).await, &[Some(B), Some(B)]);
}

#[tokio::test]
async fn filtered_rows_are_left_out() {
    let ctx = session();
    register_samples(&ctx);
    // a keeps 0.8 at 10 s and 0.5 at 100 s, 60 s each: 0.65; b keeps 1.0 alone.
    let sql = "select time_weighted_avg(v, ts, 60) filter (where v > 0.3) \
        from samples group by gpu order by gpu";
    assert_close(&floats(&ctx, sql).await, &[Some(0.65), Some(1.0), None]);
}

#[tokio::test]
async fn max_gap_must_be_a_positive_constant() {
    let ctx = session();
    register_samples(&ctx);
    for (sql, expected) in [
        (
            "select time_weighted_avg(v, ts, v) from samples",
            "must be a constant",
        ),
        (
            "select time_weighted_avg(v, ts, 0) from samples",
            "positive number of seconds",
        ),
        (
            "select time_weighted_avg(v, ts, null) from samples",
            "must not be NULL",
        ),
        (
            "select time_weighted_avg(distinct v, ts, 60) from samples",
            "DISTINCT",
        ),
        (
            "select time_weighted_avg(gpu, ts, 60) from samples",
            "time_weighted_avg",
        ),
    ] {
        let message = error(&ctx, sql).await;
        assert!(message.contains(expected), "{sql}: {message}");
    }
}

fn input(values: &[Option<f64>], seconds: &[i64]) -> Vec<ArrayRef> {
    let ts = TimestampMicrosecondArray::from_iter_values(seconds.iter().map(|s| s * S));
    let max_gap = Float64Array::from(vec![60.0; values.len()]);
    vec![
        Arc::new(Float64Array::from(values.to_vec())),
        Arc::new(ts),
        Arc::new(max_gap),
    ]
}

fn evaluated(groups: &mut SampleGroups, emit_to: EmitTo) -> Vec<Option<f64>> {
    let array = groups.evaluate(emit_to).unwrap();
    array.as_primitive::<Float64Type>().iter().collect()
}

#[test]
fn partial_states_merge_back_to_the_same_averages() {
    // The samples of a and b above, as groups 0 and 1 of one batch.
    let rows = input(
        &[Some(0.2), Some(1.0), Some(0.8), None, Some(0.5), Some(0.0)],
        &[0, 0, 10, 40, 100, 30],
    );
    let groups_of_rows = [0, 1, 0, 0, 0, 1];
    let mut partial = SampleGroups::new(60 * S, 0);
    partial
        .update_batch(&rows, &groups_of_rows, None, 2)
        .unwrap();

    // Emit group 0's state first, then group 1's, and merge each into a fresh accumulator.
    let mut merged = SampleGroups::new(60 * S, 0);
    let first = partial.state(EmitTo::First(1)).unwrap();
    merged.merge_batch(&first, &[0], 1).unwrap();
    let rest = partial.state(EmitTo::All).unwrap();
    merged.merge_batch(&rest, &[1], 2).unwrap();
    assert_close(&evaluated(&mut merged, EmitTo::All), &[Some(A), Some(B)]);

    // Rows turned straight into states (when grouping does not reduce the rows), filter applied:
    // the filtered-out 0.8 leaves a with 0.2 for 60 s and 0.5 for 60 s: 0.35.
    let filter = BooleanArray::from(vec![true, true, false, true, true, true]);
    let states = partial.convert_to_state(&rows, Some(&filter)).unwrap();
    let mut merged = SampleGroups::new(60 * S, 0);
    merged.merge_batch(&states, &groups_of_rows, 2).unwrap();
    assert_close(&evaluated(&mut merged, EmitTo::All), &[Some(0.35), Some(B)]);
}
