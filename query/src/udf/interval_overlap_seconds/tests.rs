use crate::udf::testing::{error, floats, session};

#[tokio::test]
async fn partial_nested_touching_disjoint_and_reversed() {
    let ctx = session();
    let sql = "select interval_overlap_seconds(a_start, a_end, b_start, b_end) from (values \
        (1, timestamp '2025-01-06 09:00:00', timestamp '2025-01-06 11:00:00', \
            timestamp '2025-01-06 10:30:00', timestamp '2025-01-06 12:00:00'), \
        (2, timestamp '2025-01-06 09:00:00', timestamp '2025-01-06 17:00:00', \
            timestamp '2025-01-06 10:00:00', timestamp '2025-01-06 10:15:00'), \
        (3, timestamp '2025-01-06 09:00:00', timestamp '2025-01-06 10:00:00', \
            timestamp '2025-01-06 10:00:00', timestamp '2025-01-06 11:00:00'), \
        (4, timestamp '2025-01-06 09:00:00', timestamp '2025-01-06 10:00:00', \
            timestamp '2025-01-07 09:00:00', timestamp '2025-01-07 10:00:00'), \
        (5, timestamp '2025-01-06 11:00:00', timestamp '2025-01-06 09:00:00', \
            timestamp '2025-01-06 09:00:00', timestamp '2025-01-06 12:00:00'), \
        (6, timestamp '2025-01-06 09:00:00', null, \
            timestamp '2025-01-06 09:00:00', timestamp '2025-01-06 12:00:00')) \
        t(n, a_start, a_end, b_start, b_end) order by n";
    // Partial 10:30–11:00, nested 15 min, touching, disjoint, a reversed (empty) span, NULL.
    assert_eq!(
        floats(&ctx, sql).await,
        [
            Some(1800.0),
            Some(900.0),
            Some(0.0),
            Some(0.0),
            Some(0.0),
            None
        ]
    );
}

#[tokio::test]
async fn any_unit_and_time_zone_compare_as_instants() {
    let ctx = session();
    // 10:00+01:00 is 09:00Z, in milliseconds; the window is 09:30Z–12:00Z in seconds and a
    // zone-less text (read as UTC): 30 minutes shared before a_end = 10:00Z.
    let sql = "select interval_overlap_seconds( \
        arrow_cast(timestamptz '2025-01-06T10:00:00+01:00', 'Timestamp(ms, \"+01:00\")'), \
        timestamptz '2025-01-06T10:00:00Z', \
        arrow_cast(timestamp '2025-01-06 09:30:00', 'Timestamp(s)'), \
        '2025-01-06T12:00:00')";
    assert_eq!(floats(&ctx, sql).await, [Some(1800.0)]);
    assert_eq!(
        floats(
            &ctx,
            "select interval_overlap_seconds(null, null, null, null)"
        )
        .await,
        [None]
    );
}

#[tokio::test]
async fn a_number_is_not_a_time() {
    let ctx = session();
    let message = error(
        &ctx,
        "select interval_overlap_seconds(1, 2, timestamp '2025-01-06 09:00:00', \
            timestamp '2025-01-06 10:00:00')",
    )
    .await;
    assert!(message.contains("interval_overlap_seconds"), "{message}");
}
