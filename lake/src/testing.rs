//! Test support shared by the crates' tests and the integration tests: fresh catalogs on every
//! backend the test command provides. Not part of the product.

/// A fresh, empty catalog URL per backend: SQLite always; PostgreSQL when the test command has
/// started a server and set `GPULEDGER_TEST_POSTGRES` (an admin URL such as
/// `postgres://postgres@127.0.0.1:54329/postgres`). Under CI a missing server is an error, not a skip.
pub async fn catalog_urls(dir: &std::path::Path) -> Vec<(&'static str, String)> {
    let mut urls = vec![(
        "sqlite",
        format!("sqlite://{}?mode=rwc", dir.join("catalog.db").display()),
    )];
    match std::env::var("GPULEDGER_TEST_POSTGRES") {
        Ok(admin) => urls.push(("postgres", fresh_postgres_database(&admin).await)),
        Err(_) if std::env::var_os("CI").is_some() => {
            panic!("CI must test the PostgreSQL catalog: GPULEDGER_TEST_POSTGRES is not set")
        }
        Err(_) => eprintln!("skipped: PostgreSQL catalog (GPULEDGER_TEST_POSTGRES not set)"),
    }
    urls
}

async fn fresh_postgres_database(admin_url: &str) -> String {
    use sqlx::Connection;
    sqlx::any::install_default_drivers();
    let name = format!("gpuledger_test_{}", uuid::Uuid::new_v4().simple());
    let mut admin = sqlx::AnyConnection::connect(admin_url)
        .await
        .expect("connect to the test PostgreSQL");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await
        .expect("create test database");
    let (base, _) = admin_url
        .rsplit_once('/')
        .expect("admin URL names a database");
    format!("{base}/{name}")
}

/// Takes `catalog` back to before migration `0013_input_hash`, as an earlier release left the
/// catalog: its next connection migrates it again as an upgrade.
pub async fn undo_input_hash_migration(catalog: &crate::catalog::Catalog) {
    for statement in [
        "DROP TABLE input_hash",
        "DELETE FROM _sqlx_migrations WHERE version = 13",
    ] {
        sqlx::query(statement)
            .execute(catalog.pool())
            .await
            .expect(statement);
    }
}
