//! The demo cluster: a deterministic, realistic GPU cluster written out in the real input formats
//! (`gpuledger demo`, and the benchmarks' data).
//!
//! [`Scenario::plan`] lays out, from a [`DemoSpec`] and its seed, everything that happens: nodes
//! (H100 and A100 groups, spot, on-demand and on-premises, one MIG-partitioned node), training
//! runs that checkpoint, fail and get preempted, inference services, notebooks, reservations,
//! a node fault and idle time nobody explains. The writers then print that one plan as what the
//! real sources emit, for the real parsers to read back:
//! - `dcgm.rs`: dcgm-exporter Prometheus text, streamed one scrape at a time (a month is tens of
//!   gigabytes of text; it is never held in memory);
//! - `focus.rs`: a FOCUS 1.2 billing export (compute per node per hour, network, storage, control
//!   plane, gateway);
//! - `tokens.rs`: gateway requests as canonical JSON lines, streamed one hour at a time;
//! - `events.rs`: scheduler events as canonical JSON lines;
//! - `catalog.rs`: the catalog objects `gpuledger apply` takes.
//!
//! Nothing reads the calendar: every value depends on the time since the (midnight) start, so the
//! same seed gives the same data, moved in time, whatever the start day.

pub mod catalog;
pub mod chunks;
pub mod dcgm;
pub mod error;
pub mod events;
pub mod focus;
pub mod noise;
pub mod scenario;
pub mod tokens;

pub use chunks::{ChunkReader, Chunks};
pub use error::DemoError;
pub use scenario::{DemoSpec, Scenario};
