use super::*;

#[test]
fn a_monthly_budget_is_prorated_over_the_weeks_days() {
    // W45 (11-02 … 11-08) lies in November (30 days): 3,000 × 7 / 30 = 700.
    assert!((prorated(3000.0, "2026-W45".parse().unwrap()) - 700.0).abs() < 1e-9);
    // W44 (10-26 … 11-01): six October days at 3,100 / 31 = 100 and one November day at 3,000 /
    // 30 = 100: 700 again, each day at its own month's rate.
    let w44 = prorated(3100.0, "2026-W44".parse().unwrap());
    assert!((w44 - (6.0 * 100.0 + 3100.0 / 30.0)).abs() < 1e-9, "{w44}");
    assert_eq!(
        days_in_month(NaiveDate::from_ymd_opt(2028, 2, 10).unwrap()),
        29
    );
}

#[test]
fn the_first_rows_cross_batches_and_skip_empty_ones() {
    use datafusion::arrow::array::{Array, Int64Array};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
    let batch = |values: Vec<i64>| {
        RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(Int64Array::from(values))],
        )
        .unwrap()
    };
    let batches = [
        batch(vec![]),
        batch(vec![1, 2]),
        batch(vec![]),
        batch(vec![3, 4, 5]),
    ];
    let read = |n| -> Vec<i64> {
        first_rows(&batches, n)
            .iter()
            .flat_map(|b| {
                let column = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                column.values().to_vec()
            })
            .collect()
    };
    assert_eq!(read(0), Vec::<i64>::new());
    assert_eq!(read(1), [1]);
    assert_eq!(read(3), [1, 2, 3]);
    assert_eq!(read(5), [1, 2, 3, 4, 5]);
    assert_eq!(read(9), [1, 2, 3, 4, 5]);
    assert!(first_rows(&batches, 4).iter().all(|b| b.num_rows() > 0));
}
