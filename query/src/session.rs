//! Builds the `SessionContext` every SQL entry point uses (CLI, HTTP, Postgres wire), so that
//! all of them see the same tables and functions.

use std::sync::{Arc, LazyLock};

use datafusion::catalog::{MemorySchemaProvider, SchemaProvider};
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::prelude::{SessionConfig, SessionContext};
use gpuledger_lake::Lake;
use gpuledger_lake::tables::Table;
use url::Url;

use crate::error::QueryError;
use crate::lake_table::LakeTable;
use crate::system_tables::{SystemTable, SystemTableProvider};
use crate::table_functions;

/// The URL under which the lake's object store is registered with DataFusion.
static LAKE_URL: LazyLock<Url> =
    LazyLock::new(|| Url::parse("gpuledger://lake/").expect("valid URL"));

pub const CATALOG_NAME: &str = "gpuledger";
pub const DEFAULT_SCHEMA: &str = "public";
pub const SYSTEM_SCHEMA: &str = "system";

pub fn new_session(lake: &Lake) -> Result<SessionContext, QueryError> {
    let mut config = SessionConfig::new()
        .with_information_schema(true)
        .with_default_catalog_and_schema(CATALOG_NAME, DEFAULT_SCHEMA);
    // Analysts arrive from psql and Grafana: parse their SQL as PostgreSQL. (The generic dialect
    // also reads `select a, cluster` as a trailing comma before `CLUSTER BY`, and `cluster` is
    // one of our column names.)
    config.options_mut().sql_parser.dialect = datafusion::config::Dialect::PostgreSQL;
    let ctx = SessionContext::new_with_config(config);
    crate::udf::register_all(&ctx);
    ctx.register_object_store(&LAKE_URL, Arc::clone(lake.store()));
    let store_url = ObjectStoreUrl::parse(LAKE_URL.as_str())?;

    let lake_table = |table: Table| -> Arc<LakeTable> {
        Arc::new(LakeTable::new(
            table,
            lake.catalog().clone(),
            store_url.clone(),
        ))
    };
    for table in Table::ALL {
        ctx.register_table(table.name(), lake_table(table))?;
    }
    table_functions::register_all(
        &ctx,
        table_functions::UnitEconomicsSources {
            token_usage: lake_table(Table::TokenUsage),
            gpu_hours: lake_table(Table::GpuHours),
            cost_entries: lake_table(Table::CostEntries),
            allocations: lake_table(Table::Allocations),
            scheduler_events: lake_table(Table::SchedulerEvents),
            billing_lines: lake_table(Table::BillingLines),
            catalog: lake.catalog().clone(),
        },
    );
    let system = Arc::new(MemorySchemaProvider::new());
    for table in SystemTable::ALL {
        system.register_table(
            table.name().into(),
            Arc::new(SystemTableProvider::new(table, lake.catalog().clone())),
        )?;
    }
    ctx.catalog(CATALOG_NAME)
        .expect("default catalog")
        .register_schema(SYSTEM_SCHEMA, system)?;
    ctx.register_table(
        SystemTable::Quarantine.name(),
        Arc::new(SystemTableProvider::new(
            SystemTable::Quarantine,
            lake.catalog().clone(),
        )),
    )?;
    Ok(ctx)
}
