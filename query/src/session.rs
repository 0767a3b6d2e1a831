//! Builds the `SessionContext` every SQL entry point uses (CLI, HTTP, Postgres wire), so that
//! all of them see the same tables and functions.

use std::sync::{Arc, LazyLock};

use datafusion::catalog::{MemorySchemaProvider, SchemaProvider};
use datafusion::datasource::TableProvider;
use datafusion::error::DataFusionError;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use gpuledger_lake::Lake;
use gpuledger_lake::tables::Table;
use url::Url;

use crate::decoded_files::DecodedFiles;
use crate::distributed::Workers;
use crate::error::QueryError;
use crate::lake_table::LakeTable;
use crate::scope::{Scope, TeamScopedFunction, team_view};
use crate::system_tables::{SystemTable, SystemTableProvider};
use crate::table_functions;

/// The URL under which the lake's object store is registered with DataFusion.
pub(crate) static LAKE_URL: LazyLock<Url> =
    LazyLock::new(|| Url::parse("gpuledger://lake/").expect("valid URL"));

pub const CATALOG_NAME: &str = "gpuledger";
pub const DEFAULT_SCHEMA: &str = "public";
pub const SYSTEM_SCHEMA: &str = "system";

/// How a session is limited. The default (the CLI's) sees everything with no memory limit, and
/// runs its stages on this process's workers ([`Workers::of_this_process`]).
#[derive(Debug, Clone)]
pub struct SessionOptions {
    pub scope: Scope,
    /// Bytes that one query's operators may hold; past it the query fails with "resources
    /// exhausted" (nothing spills to disk in a limited session).
    pub memory_limit: Option<usize>,
    /// Where the session's stages may run besides this process; none: everything in-process.
    pub workers: Workers,
    /// Lake files decoded once for every session that shares them (a server's); ignored when
    /// stages run on workers, whose plans must name the files to read.
    pub decoded_files: Option<Arc<DecodedFiles>>,
}

impl Default for SessionOptions {
    fn default() -> Self {
        Self {
            scope: Scope::All,
            memory_limit: None,
            workers: Workers::of_this_process(),
            decoded_files: None,
        }
    }
}

/// A session over `lake` that sees everything: the CLI's.
pub fn new_session(lake: &Lake) -> Result<SessionContext, QueryError> {
    new_session_with(lake, &SessionOptions::default())
}

/// A session over `lake` as `options` limit it: what the HTTP and Postgres servers give a token.
pub fn new_session_with(
    lake: &Lake,
    options: &SessionOptions,
) -> Result<SessionContext, QueryError> {
    let mut config = SessionConfig::new()
        .with_information_schema(true)
        .with_default_catalog_and_schema(CATALOG_NAME, DEFAULT_SCHEMA);
    if let Some(decoded) = options.decoded_files.as_ref()
        && options.workers.is_empty()
    {
        config = config.with_extension(Arc::clone(decoded));
    }
    // Analysts arrive from psql and Grafana: parse their SQL as PostgreSQL. (The generic dialect
    // also reads `select a, cluster` as a trailing comma before `CLUSTER BY`, and `cluster` is
    // one of our column names.)
    config.options_mut().sql_parser.dialect = datafusion::config::Dialect::PostgreSQL;
    let mut runtime = RuntimeEnvBuilder::new();
    if let Some(bytes) = options.memory_limit {
        runtime = runtime
            .with_memory_limit(bytes, 1.0)
            .with_disk_manager_builder(
                DiskManagerBuilder::default().with_mode(DiskManagerMode::Disabled),
            );
    }
    let mut builder = SessionStateBuilder::new()
        .with_default_features()
        .with_config(config)
        .with_runtime_env(runtime.build_arc()?);
    if !options.workers.is_empty() {
        builder = crate::distributed::coordinate(builder, &options.workers)?;
    }
    let ctx = SessionContext::new_with_state(builder.build());
    ctx.add_analyzer_rule(Arc::new(crate::subquery_names::NameScalarSubqueryValues));
    register_functions(&ctx, options.memory_limit)?;
    // A file committed but not placed yet, or retired while a query that listed it runs, is
    // read where it waits.
    ctx.register_object_store(&LAKE_URL, lake.table_reader());
    let store_url = ObjectStoreUrl::parse(LAKE_URL.as_str())?;

    let lake_table = |table: Table| -> Arc<LakeTable> {
        Arc::new(LakeTable::new(
            table,
            lake.catalog().clone(),
            store_url.clone(),
        ))
    };
    if let Scope::Team(team) = &options.scope {
        for table in Table::ALL {
            let provider: Arc<dyn TableProvider> = lake_table(table);
            if let Some(view) = team_view(table.name(), provider, team)? {
                ctx.register_table(table.name(), view)?;
            }
        }
        register_table_functions(&ctx, lake, &lake_table);
        let functions = ctx.state().table_functions().clone();
        for (name, function) in functions {
            ctx.register_udtf(
                &name,
                Arc::new(TeamScopedFunction {
                    name: name.clone(),
                    inner: Arc::clone(function.function()),
                    team: team.clone(),
                }),
            );
        }
        return Ok(ctx);
    }
    for table in Table::ALL {
        ctx.register_table(table.name(), lake_table(table))?;
    }
    register_table_functions(&ctx, lake, &lake_table);
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

/// The scalar and aggregate functions of every session, bounded as `memory_limit` asks; a
/// worker registers the same, so that a plan's functions decode to the same there.
pub(crate) fn register_functions(
    ctx: &SessionContext,
    memory_limit: Option<usize>,
) -> Result<(), DataFusionError> {
    crate::udf::register_all(ctx);
    // JSON columns (`tags`, FOCUS `AllocatedTags`) are read with PostgreSQL's `->` / `->>` and
    // the `json_get_*` functions.
    let mut ctx = ctx.clone();
    datafusion_functions_json::register_all(&mut ctx)?;
    if let Some(bytes) = memory_limit {
        crate::value_limits::bound_functions(&ctx, crate::value_limits::cap_for(bytes));
    }
    Ok(())
}

/// The table functions read the lake tables unfiltered, so that a team sees the same figures as
/// an administrator does for its rows (shared costs are spread over every team).
fn register_table_functions(
    ctx: &SessionContext,
    lake: &Lake,
    lake_table: &dyn Fn(Table) -> Arc<LakeTable>,
) {
    table_functions::register_all(
        ctx,
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
}
