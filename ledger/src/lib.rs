//! The money math of gpuledger. Pure functions over plain Rust values: no DataFusion, no I/O,
//! so its tests compile and run in seconds.
//!
//! - `time.rs`: microsecond spans;
//! - `shares.rs`: how much of a physical GPU an allocation holds (whole, MIG, time-sliced, fraction);
//! - `allocation.rs`: scheduler events → exact allocation intervals per GPU.

pub mod allocation;
pub mod gpu_hours;
pub mod shares;
pub mod time;
