//! DataFusion over the lake.
//!
//! - `columns.rs`: the one way Rust code reads result columns (by name, cast, never a panic);
//! - `lake_table.rs`: a landed table, its files listed by the catalog and pruned by time;
//!   `decoded_files.rs`: a session's memo of files decoded once for many questions;
//! - `system_tables.rs`: `system.files`, `system.ingest_batches`, `system.quarantine`, `system.report_runs`;
//! - `udf/`: the ledger's SQL functions, one module each, registered by `udf::register_all`;
//! - `table_functions/`: `team_costs`, `idle_summary`, `recommendations`, `unit_economics`,
//!   `unit_economics_daily`,
//!   `training_economics`, `spot_savings`, `value_report`, `value_report_daily` (each
//!   `(from, to)`), `inference_capacity`, `gpu_fit` and `budget_status(at)`; what they share in `support.rs`;
//! - `distributed.rs`: sessions whose stages run on `datafusion-distributed` workers, and the
//!   worker `gpuledger worker` serves;
//! - `subquery_names.rs`: names scalar subqueries' values so that their joins plan;
//! - `session.rs`: the one place that builds a `SessionContext` with everything registered;
//! - `scope.rs`: what a team-scoped session sees; `user_query.rs`: users' SQL, read-only and bounded;
//! - `sandbox.rs`: the bounds a user's statement is checked against before planning, and the
//!   settings a session may change; `runtime.rs`: the large-stack runtime users' queries run on;
//!   `cancel.rs`: how a query's operators stop once its caller stops waiting;
//! - `value_limits.rs`: caps on the values string and array functions build, in limited sessions;
//! - `spend.rs`: budget spend, `/v1/costs` aggregation and table functions over a window, for the API.
//!
//! The read side only: the ledger's tables are written by the `gpuledger-build` crate (build/).

pub mod cancel;
pub mod columns;
pub mod decoded_files;
pub mod distributed;
pub mod error;
pub mod focus_export;
pub mod gpu_hours_exec;
mod hidden_inputs;
pub mod lake_table;
pub mod ledger_inputs;
pub mod ledger_outputs;
pub mod runtime;
pub mod sandbox;
pub mod scope;
pub mod session;
pub mod spend;
pub mod subquery_names;
pub mod system_tables;
pub mod table_functions;
#[cfg(test)]
mod test_lake;
pub mod udf;
pub mod user_query;
pub mod value_limits;

pub use error::QueryError;
pub use scope::Scope;
pub use session::{SessionOptions, new_session, new_session_with};
