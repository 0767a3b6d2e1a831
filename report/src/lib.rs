//! The weekly report (docs/design.md §9).
//!
//! - `week.rs`: ISO weeks in UTC;
//! - `compute.rs`: every section, with SQL over the ledger (`gpuledger_query`'s session);
//! - `model.rs`: the report as data, the JSON schema's shape (`docs/report.schema.json`);
//! - `render.rs`: JSON, CSV, Markdown, and HTML with inline SVG charts;
//! - `export.rs`: the scheduled export to the object store, claimed and recorded in the catalog.

pub mod compute;
pub mod error;
pub mod export;
pub mod model;
pub mod render;
pub mod week;

pub use compute::{weekly_report, weekly_report_in};
pub use error::ReportError;
pub use export::{Clock, LedgerReady, Scheduler, SystemClock, export_week};
pub use model::{TeamLimit, TenantLimits, WeeklyReport};
pub use render::Format;
pub use week::IsoWeek;
