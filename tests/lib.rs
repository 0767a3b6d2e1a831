//! The one integration-test binary: drives the real `gpuledger` executable end to end.
//! Every scenario runs once per catalog backend the test command provides (SQLite always,
//! PostgreSQL under `scripts/test`).

mod support;

mod budgets;
mod cli_reads;
mod costs;
mod crash;
mod demo;
mod distributed;
mod docs;
mod focus_export;
mod golden;
mod grafana;
mod group_commit;
mod ingest_bad_corpus;
mod ingest_dcgm;
mod ingest_events;
mod ingest_focus;
mod ingest_hostile;
mod ingest_http;
mod ingest_pipeline;
mod ingest_tokens;
mod lake_files;
mod ledger;
mod ledger_usage;
mod live_ledger;
mod objects;
mod order_independence;
mod pgwire;
mod report;
mod sandbox;
mod schemathesis;
mod serve;
mod spot;
mod training;
mod unit_economics;
mod value;
mod web;
