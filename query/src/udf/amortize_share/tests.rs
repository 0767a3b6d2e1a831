use crate::udf::testing::{error, floats, session};

#[tokio::test]
async fn a_pool_spreads_in_proportion_to_the_weights() {
    let ctx = session();
    // 1200 over GPU-hours 30 and 10: 1200·30/40 = 900 and 1200·10/40 = 300.
    let sql = "select amortize_share(1200, gpu_hours, sum(gpu_hours) over ()) \
        from (values ('a', 30), ('b', 10)) t(team, gpu_hours) order by team";
    assert_eq!(floats(&ctx, sql).await, [Some(900.0), Some(300.0)]);
}

#[tokio::test]
async fn no_positive_total_or_a_null_is_null() {
    let ctx = session();
    let sql = "select amortize_share(amount, weight, total) from (values \
        (1, 100.0, 1.0, 4.0), (2, 100.0, 1.0, 0.0), (3, 100.0, 1.0, -4.0), \
        (4, null, 1.0, 4.0), (5, 100.0, null, 4.0), (6, 100.0, 1.0, null)) \
        t(n, amount, weight, total) order by n";
    assert_eq!(
        floats(&ctx, sql).await,
        [Some(25.0), None, None, None, None, None]
    );
    // All constants: computed once, a constant result.
    assert_eq!(
        floats(&ctx, "select amortize_share(10, 1, 4)").await,
        [Some(2.5)]
    );
    assert_eq!(
        floats(&ctx, "select amortize_share(10, 1, null)").await,
        [None]
    );
}

#[tokio::test]
async fn decimals_coerce_and_text_is_refused() {
    let ctx = session();
    assert_eq!(
        floats(
            &ctx,
            "select amortize_share(cast(10.50 as decimal(10, 2)), 1, 3)"
        )
        .await,
        [Some(3.5)]
    );
    let message = error(&ctx, "select amortize_share('ten', 1, 3)").await;
    assert!(
        message.contains("amortize_share") && message.contains("Utf8"),
        "{message}"
    );
}
