//! DataFusion over the lake.
//!
//! - `lake_table.rs`: a landed table, its files listed by the catalog and pruned by time;
//! - `system_tables.rs`: `system.files`, `system.ingest_batches`, `system.quarantine`;
//! - `udf/`: the ledger's SQL functions, one module each, registered by `udf::register_all`;
//! - `session.rs`: the one place that builds a `SessionContext` with everything registered.

pub mod error;
pub mod lake_table;
pub mod session;
pub mod system_tables;
pub mod udf;

pub use error::QueryError;
pub use session::new_session;
