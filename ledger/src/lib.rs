//! The money math of gpuledger. Pure functions over plain Rust values: no DataFusion, no I/O,
//! so its tests compile and run in seconds.
//!
//! - `time.rs`: microsecond spans;
//! - `shares.rs`: how much of a physical GPU an allocation holds (whole, MIG, time-sliced, fraction);
//! - `allocation.rs`: scheduler events → exact allocation intervals per GPU;
//! - `price.rs`: node billing lines → GPU-hour prices and the node's shared remainder;
//! - `gpu_hours.rs`: every GPU-second in one idle class for one owner, costed;
//! - `money.rs`: exact decimal amounts, and splits that add back to the whole;
//! - `amortize.rs`: spreading a pool over teams by strategy;
//! - `usage.rs`: time-weighted averages, idle classes and unit costs, for SQL over any interval;
//! - `journal.rs`: the cost journal (`cost_entries`) and the balance;
//! - `build.rs`: one ledger build, inputs to outputs;
//! - `unit_economics.rs`: SLO-met requests and the cost per effective token and request;
//! - `training.rs`, `spot.rs`: what training runs and spot capacity cost and saved;
//! - `value.rs`: value mappings: a metric and condition over a day → business events → value;
//! - `capacity.rs`: safe throughput per replica at SLO, replicas needed, whether a job fits;
//! - `budget.rs`: monthly budgets: spend to date, forecast from the run rate, state, thresholds crossed;
//! - `objects.rs`: declared catalog objects (`gpuledger apply`): kinds, typed specs, validation.

pub mod allocation;
pub mod amortize;
pub mod budget;
pub mod build;
pub mod capacity;
pub mod charge_split;
pub mod gpu_hours;
pub mod journal;
pub mod money;
pub mod objects;
pub mod price;
pub mod shares;
pub mod spot;
pub mod time;
pub mod training;
pub mod unit_economics;
pub mod usage;
pub mod value;
