pub mod demo;
pub mod ingest;
pub mod ledger;
pub mod objects;
pub mod sql;
pub mod token;
