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
    let mut statements = PostgresCompatibilityParser::new().parse(sql).unwrap();
    let mut statement = statements.remove(0);
    rewrite(&mut statement, &client())?;
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
