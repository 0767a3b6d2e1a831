//! The Parquet lake and its catalog.
//!
//! - `paths.rs` owns every object-store key; nothing else formats a path.
//! - `tables.rs` defines the canonical tables (schemas, time column, sort order, scope).
//! - `store.rs` opens the object store named by `--data` (a directory or a URL).
//! - `writer.rs` splits batches by day and scope, sorts them and writes immutable zstd Parquet.
//! - `catalog.rs` is the sqlx catalog (SQLite or PostgreSQL): files, batches, quarantine, the
//!   days the ledger has built; and in `catalog/`: declared objects read back typed
//!   (`declared.rs`), API tokens (`tokens.rs`), idempotency keys (`idempotency.rs`), budget
//!   alerts (`budget_alerts.rs`), weekly report runs (`report_runs.rs`), the leases replicas
//!   share (`leases.rs`), and which retired objects to move or delete (`retirement.rs`).
//! - `retirement.rs` places committed files under `tables/` (the writer stages them under
//!   `_staging/`), moves retired ones out (under `_superseded/`) and deletes them after a grace
//!   period: the store follows the catalog.
//! - `compaction.rs` merges a table-day's small files into few (`gpuledger compact`).
//!
//! Write path: parser → `TableWriter::write` (objects land under `_staging/`, invisible) →
//! `Catalog::commit_batch` (one transaction makes them active) → `retirement::place` (under
//! `tables/`). Read path: `Catalog::active_files` → Parquet scan through `Lake::table_reader`.

pub mod catalog;
pub mod compaction;
pub mod error;
pub mod paths;
pub mod retirement;
pub mod store;
pub mod tables;
#[doc(hidden)]
pub mod testing;
pub mod writer;

use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

pub use catalog::{BudgetAlert, Catalog, Rejection, TokenRecord};
pub use error::{LakeError, Result};
pub use store::DataLocation;

/// Where a lake lives: `--data` and `--catalog`.
#[derive(Debug, Clone)]
pub struct LakeConfig {
    pub data: String,
    /// `sqlite://…` or `postgres://…`; a SQLite file inside a local lake when not given.
    pub catalog: Option<String>,
}

/// An open lake: the object store and its catalog.
#[derive(Debug, Clone)]
pub struct Lake {
    location: DataLocation,
    store: Arc<dyn ObjectStore>,
    catalog: Catalog,
}

impl Lake {
    /// Opens the lake at `config`, creating it (its directory and catalog) if it is not there:
    /// for the commands that write (`ingest`, `apply`, `demo`, `serve`, `migrate`).
    pub async fn open(config: &LakeConfig) -> Result<Self> {
        Self::connect(config, true).await
    }

    /// Opens an existing lake, never creating one: [`LakeError::NoLake`] when `config` points
    /// at nothing (the read commands: `sql`, `get`, `report`, `ledger check`).
    pub async fn open_existing(config: &LakeConfig) -> Result<Self> {
        Self::connect(config, false).await
    }

    async fn connect(config: &LakeConfig, create: bool) -> Result<Self> {
        let location = DataLocation::parse(&config.data)?;
        if let (false, DataLocation::Local(dir)) = (create, &location)
            && !dir.is_dir()
        {
            return Err(LakeError::NoLake(dir.display().to_string()));
        }
        let store = location.open()?;
        let catalog_url = config
            .catalog
            .clone()
            .unwrap_or_else(|| location.default_catalog_url());
        let catalog = if create {
            Catalog::connect(&catalog_url).await?
        } else {
            Catalog::connect_existing(&catalog_url).await?
        };
        Ok(Self {
            location,
            store,
            catalog,
        })
    }

    pub fn location(&self) -> &DataLocation {
        &self.location
    }

    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The store to read table files through: a file listed under `tables/` is found wherever
    /// it waits aside (`retirement::AsideFallback`).
    pub fn table_reader(&self) -> Arc<dyn ObjectStore> {
        retirement::AsideFallback::over(Arc::clone(&self.store))
    }

    /// The rows of one table file, read through [`Lake::table_reader`].
    pub async fn read_file(&self, path: &str) -> Result<Vec<RecordBatch>> {
        let bytes = self
            .table_reader()
            .get(&Path::from(path))
            .await?
            .bytes()
            .await?;
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)?
            .with_batch_size(64 * 1024)
            .build()?;
        Ok(reader.collect::<std::result::Result<_, _>>()?)
    }
}
