pub mod ingest;
pub mod sql;
