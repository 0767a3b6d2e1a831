use crate::udf::testing::{error, session, strings};

fn owned(classes: &[&str]) -> Vec<Option<String>> {
    classes.iter().map(|c| Some(c.to_string())).collect()
}

#[tokio::test]
async fn every_class_with_the_ledger_precedence() {
    let ctx = session();
    let sql = "select idle_class(share, sm, reason, fault) from (values \
        (1, 1.0, 0.30, null, false), \
        (2, 0.25, null, null, false), \
        (3, 1.0, 0.05, null, false), \
        (4, 1.0, 0.01, null, false), \
        (5, 1.0, 0.01, 'warm_pool', true), \
        (6, 0.0, 0.90, 'gang_wait', false), \
        (7, 0.0, null, null, false), \
        (8, 0.0, null, 'maintenance', true), \
        (9, null, null, null, null)) \
        t(n, share, sm, reason, fault) order by n";
    // Busy at or above 0.05, or without telemetry; allocation wins over a fault; a fault wins
    // over a reservation; NULL share and fault mean none.
    assert_eq!(
        strings(&ctx, sql).await,
        owned(&[
            "busy",
            "busy",
            "busy",
            "allocated_idle",
            "allocated_idle",
            "reserved:gang_wait",
            "unexplained",
            "fault",
            "unexplained",
        ])
    );
}

#[tokio::test]
async fn the_threshold_can_be_given() {
    let ctx = session();
    assert_eq!(
        strings(&ctx, "select idle_class(1, 0.08, null, false, 0.10)").await,
        owned(&["allocated_idle"])
    );
    assert_eq!(
        strings(&ctx, "select idle_class(1, 0.08, null, false, null)").await,
        owned(&["busy"])
    );
}

#[tokio::test]
async fn a_number_is_not_a_fault_flag() {
    let ctx = session();
    let message = error(&ctx, "select idle_class(1, 0.5, null, 3)").await;
    assert!(message.contains("idle_class"), "{message}");
}

#[tokio::test]
async fn reasons_of_any_string_type() {
    let ctx = session();
    // Parquet string columns are read as Utf8View.
    let sql = "select idle_class(0, null, arrow_cast(reason, 'Utf8View'), false) \
        from (values (1, 'warm_pool'), (2, null)) t(n, reason) order by n";
    assert_eq!(
        strings(&ctx, sql).await,
        owned(&["reserved:warm_pool", "unexplained"])
    );
}
