pub mod compact;
pub mod demo;
pub mod ingest;
pub mod ledger;
pub mod objects;
pub mod report;
pub mod sql;
pub mod token;
