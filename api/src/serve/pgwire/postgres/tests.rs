use datafusion_postgres::datafusion_pg_catalog::sql::PostgresCompatibilityParser;

use super::*;

fn client() -> HashMap<String, String> {
    HashMap::from([
        ("user".to_string(), "grafana".to_string()),
        ("application_name".to_string(), "psql".to_string()),
        ("DateStyle".to_string(), "ISO, DMY".to_string()),
    ])
}

fn rewritten(sql: &str) -> Result<String, QueryError> {
    let mut statements = PostgresCompatibilityParser::new()
        .parse(&protect_scalar_subqueries(sql))
        .unwrap();
    let mut statement = statements.remove(0);
    let aggregates = ["count", "max", "array_agg", "row_number"]
        .map(String::from)
        .into();
    rewrite(&mut statement, &client(), &aggregates)?;
    Ok(statement.to_string())
}

#[test]
fn user_registers_are_the_login_name_with_postgres_column_names() {
    assert_eq!(
        rewritten("select current_user, session_user, user").unwrap(),
        "SELECT 'grafana' AS \"session_user\", 'grafana' AS \"session_user_2\", 'grafana' AS \"user\""
    );
    assert_eq!(
        rewritten("select 1 where current_user = 'grafana'").unwrap(),
        "SELECT 1 WHERE 'grafana' = 'grafana'"
    );
}

#[test]
fn current_setting_reads_the_connection_and_the_server() {
    assert_eq!(
        rewritten("select current_setting('server_version'), current_setting('DateStyle') as ds")
            .unwrap(),
        "SELECT '16.6' AS \"current_setting\", 'ISO, DMY' AS ds"
    );
    assert_eq!(
        rewritten("select pg_catalog.current_setting('application_name') || '!' as a").unwrap(),
        "SELECT 'psql' || '!' AS a"
    );
    assert_eq!(
        rewritten("select current_setting('no.such', true) as s").unwrap(),
        "SELECT NULL AS s"
    );
    let unknown = rewritten("select current_setting('no.such')").unwrap_err();
    assert_eq!(
        unknown.to_string(),
        "unrecognized configuration parameter \"no.such\""
    );
    let not_literal = rewritten("select current_setting(name) from t").unwrap_err();
    assert!(matches!(not_literal, QueryError::UnknownSetting(_)));
}

#[test]
fn settings_come_from_the_client_then_the_server() {
    let client = client();
    assert_eq!(setting("datestyle", &client).as_deref(), Some("ISO, DMY"));
    assert_eq!(setting("TimeZone", &client).as_deref(), Some("UTC"));
    assert_eq!(
        setting("server_version_num", &client).as_deref(),
        Some("160006")
    );
    assert_eq!(
        setting("transaction_read_only", &client).as_deref(),
        Some("on")
    );
    assert_eq!(
        setting("session_authorization", &client).as_deref(),
        Some("grafana")
    );
    assert_eq!(setting("shared_buffers", &client), None);
}

#[test]
fn array_constructors_become_what_datafusion_plans() {
    // psql's `\du`: the members of a role, as an aggregate of the subquery.
    assert_eq!(
        rewritten("SELECT ARRAY(SELECT b.rolname FROM pg_roles b WHERE b.oid = r.oid) AS m FROM pg_roles r")
            .unwrap(),
        "SELECT (SELECT array_agg(b.rolname) FROM pg_catalog.pg_roles b WHERE b.oid = r.oid) AS m FROM pg_catalog.pg_roles r"
    );
    // psql's `\d+`: an array's elements mapped (pg_class has no `reloptions` here: no table has
    // options).
    assert_eq!(
        rewritten(
            "SELECT array(select 'toast.' || x from pg_catalog.unnest(tc.tags) x) FROM pg_class tc"
        )
        .unwrap(),
        "SELECT array_transform(tc.tags, x -> 'toast.' || x) FROM pg_catalog.pg_class tc"
    );
    assert_eq!(
        rewritten("SELECT tc.reloptions FROM pg_class tc").unwrap(),
        "SELECT CAST(NULL AS TEXT[]) FROM pg_catalog.pg_class tc"
    );
}

#[test]
fn a_scalar_subquery_of_plain_expressions_takes_its_one_row_through_an_aggregate() {
    // psql's `\dT`: correlated, and not aggregated, in a filter.
    assert_eq!(
        rewritten("SELECT t.oid FROM pg_type t WHERE t.typrelid = 0 OR (SELECT c.relkind = 'c' FROM pg_class c WHERE c.oid = t.typrelid)").unwrap(),
        "SELECT t.oid FROM pg_catalog.pg_type t WHERE t.typrelid = 0 OR (SELECT pg_subquery_value(c.relkind = 'c') FROM pg_catalog.pg_class c WHERE c.oid = t.typrelid)"
    );
    // Over the system catalogs datafusion-postgres's NULL stays (defaults, collations: none here).
    assert_eq!(
        rewritten("SELECT (SELECT d.adbin FROM pg_attrdef d WHERE d.adrelid = a.attrelid) FROM pg_attribute a").unwrap(),
        "SELECT NULL FROM pg_catalog.pg_attribute a"
    );
    // A scalar function is not an aggregate.
    assert_eq!(
        rewritten(
            "SELECT (SELECT upper(h.team) FROM gpu_hours h WHERE h.node = n.node) FROM nodes n"
        )
        .unwrap(),
        "SELECT ((SELECT pg_subquery_value(upper(h.team)) FROM gpu_hours h WHERE h.node = n.node)) FROM nodes n"
    );
    assert_eq!(
        rewritten("SELECT (SELECT 1 FROM gpu_hours) AS x").unwrap(),
        "SELECT ((SELECT pg_subquery_value(1) FROM gpu_hours)) AS x"
    );
    // Aggregates, calls, limits and orders are left to DataFusion.
    // Aggregates, calls, limits and orders are left to DataFusion; none gets datafusion-postgres's
    // `LIMIT 1` (a second row is an error, as in PostgreSQL), nor its NULL for a correlated one.
    for kept in [
        "SELECT ((SELECT count(*) FROM gpu_hours)) AS x",
        "SELECT ((SELECT team FROM gpu_hours ORDER BY team LIMIT 1)) AS x",
        "SELECT ((SELECT team FROM gpu_hours GROUP BY team)) AS x",
        "SELECT ((SELECT max(h.team) FROM gpu_hours h WHERE h.node = n.node)) FROM nodes n",
    ] {
        assert_eq!(rewritten(kept).unwrap(), kept);
    }
}
