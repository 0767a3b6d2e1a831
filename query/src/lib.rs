//! DataFusion over the lake.
//!
//! - `lake_table.rs`: a landed table, its files listed by the catalog and pruned by time;
//! - `system_tables.rs`: `system.files`, `system.ingest_batches`, `system.quarantine`;
//! - `session.rs`: the one place that builds a `SessionContext` with everything registered;
//! - `ledger_build/`: keeps `gpu_hours`, `cost_entries`, `allocations` in the lake up to date.

pub mod error;
pub mod lake_table;
pub mod ledger_build;
pub mod session;
pub mod system_tables;
pub mod table_functions;

pub use error::QueryError;
pub use session::new_session;
