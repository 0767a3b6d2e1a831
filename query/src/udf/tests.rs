use super::testing::{floats, strings};

const FUNCTIONS: [&str; 5] = [
    "amortize_share",
    "idle_class",
    "interval_overlap_seconds",
    "time_weighted_avg",
    "unit_cost",
];

/// The session every entry point uses, over an empty lake.
async fn lake_session() -> (tempfile::TempDir, datafusion::prelude::SessionContext) {
    let (dir, lake) = crate::test_lake::empty_lake().await;
    let ctx = crate::new_session(&lake).unwrap();
    (dir, ctx)
}

#[tokio::test]
async fn information_schema_describes_every_function() {
    let (_dir, ctx) = lake_session().await;
    let names = FUNCTIONS.map(|f| format!("'{f}'")).join(", ");
    let routines = format!(
        "select {{}} from information_schema.routines where routine_name in ({names}) \
        order by routine_name"
    );
    let listed = strings(&ctx, &routines.replace("{}", "routine_name")).await;
    assert_eq!(listed, FUNCTIONS.map(|f| Some(f.to_string())));
    let kinds = strings(&ctx, &routines.replace("{}", "function_type")).await;
    assert_eq!(
        kinds,
        ["SCALAR", "SCALAR", "SCALAR", "AGGREGATE", "SCALAR"].map(|k| Some(k.to_string()))
    );
    let descriptions = strings(&ctx, &routines.replace("{}", "description")).await;
    assert!(
        descriptions[0]
            .as_ref()
            .unwrap()
            .starts_with("The part of a shared amount")
    );
    assert!(
        descriptions[3]
            .as_ref()
            .unwrap()
            .starts_with("Time-weighted average")
    );
    assert!(
        descriptions
            .iter()
            .all(|d| d.as_ref().is_some_and(|d| d.len() > 80))
    );
    let syntax = strings(&ctx, &routines.replace("{}", "syntax_example")).await;
    assert_eq!(syntax[4].as_deref(), Some("unit_cost(cost, units [, per])"));
}

#[tokio::test]
async fn information_schema_names_the_parameters() {
    let (_dir, ctx) = lake_session().await;
    let sql = "select parameter_name from information_schema.parameters \
        where specific_name = 'idle_class' and parameter_mode = 'IN' \
        order by rid desc, ordinal_position";
    let names = strings(&ctx, sql).await;
    assert_eq!(
        names,
        [
            "allocated_share",
            "sm_active",
            "reserved_reason",
            "fault",
            "threshold",
            "allocated_share",
            "sm_active",
            "reserved_reason",
            "fault",
        ]
        .map(|n| Some(n.to_string()))
    );
}

#[tokio::test]
async fn the_lake_session_runs_the_functions() {
    let (_dir, ctx) = lake_session().await;
    assert_eq!(
        floats(&ctx, "select unit_cost(12, 4) + amortize_share(10, 1, 4)").await,
        [Some(5.5)]
    );
}
