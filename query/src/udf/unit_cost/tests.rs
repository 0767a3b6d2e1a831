use crate::udf::testing::{error, floats, session};

#[tokio::test]
async fn cost_per_unit_and_per_million() {
    let ctx = session();
    // 12.00 for 3M tokens: 4.00 per 1M; 12.00 for 4 requests: 3.00 each.
    assert_eq!(
        floats(&ctx, "select unit_cost(12.0, 3000000, 1e6)").await,
        [Some(4.0)]
    );
    assert_eq!(floats(&ctx, "select unit_cost(12, 4)").await, [Some(3.0)]);
    let sql = "select unit_cost(cost, tokens, 1e6) from (values \
        (1, 12.0, 3000000), (2, 5.0, 0), (3, 5.0, -10), (4, 5.0, null), (5, null, 10)) \
        t(n, cost, tokens) order by n";
    assert_eq!(floats(&ctx, sql).await, [Some(4.0), None, None, None, None]);
}

#[tokio::test]
async fn a_null_per_is_null_and_text_is_refused() {
    let ctx = session();
    assert_eq!(floats(&ctx, "select unit_cost(12, 4, null)").await, [None]);
    assert_eq!(
        floats(&ctx, "select unit_cost(cast(9.00 as decimal(8, 2)), 3)").await,
        [Some(3.0)]
    );
    let message = error(&ctx, "select unit_cost(12, 'four')").await;
    assert!(message.contains("unit_cost"), "{message}");
    let message = error(&ctx, "select unit_cost(12)").await;
    assert!(message.contains("unit_cost"), "{message}");
}
