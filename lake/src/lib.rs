//! The Parquet lake and its catalog.
//!
//! - `paths.rs` owns every object-store key; nothing else formats a path.
//! - `tables.rs` defines the canonical tables (schemas, time column, sort order, scope).
//! - `store.rs` opens the object store named by `--data` (a directory or a URL).
//! - `writer.rs` splits batches by day and scope, sorts them and writes immutable zstd Parquet.
//! - `catalog.rs` is the sqlx manifest (SQLite or PostgreSQL): files, batches, quarantine.

pub mod error;
pub mod tables;

pub use error::{LakeError, Result};
