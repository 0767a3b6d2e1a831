pub mod ingest;
pub mod objects;
pub mod sql;
