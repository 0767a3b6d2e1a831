//! Capacity planning (docs/design.md §11): how many inference replicas a peak needs, measured from real
//! traffic, and whether a job of N GPUs can start now given fragmentation.
//!
//! **Safe throughput per replica**: the model's requests are counted in 5-minute windows
//! ([`WINDOW`]); a window is measured when serving replicas (pods whose allocations carry the
//! model) held GPUs in it, and is **at SLO** when the share of its requests that met their SLO is
//! at least the SLO's objective. The safe rate is the highest requests per second per replica of
//! a window at SLO: the load the service has actually carried within its targets, over its real
//! prompt and output lengths. `replicas_needed` = ⌈peak_rps / safe rate⌉ + redundancy, and
//! `gpus_needed` = replicas × the GPUs a replica held in that window.
//!
//! **Fit**: a job of N GPUs can start in a node group now when one node has N free GPUs, or when
//! wholly free nodes together have N (a job spanning nodes is gang-scheduled onto whole nodes).

use std::collections::{BTreeMap, BTreeSet};

use crate::time::{MICROS_PER_SECOND, Micros, Span};

/// The length of a throughput window.
pub const WINDOW: Micros = 300 * MICROS_PER_SECOND;

/// A serving pod's allocation on one GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicaAllocation {
    /// The pod: `namespace/workload/pod`.
    pub replica: String,
    pub span: Span,
    /// Share of a physical GPU.
    pub share: f64,
}

/// What the model's traffic showed.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Throughput {
    /// Windows with requests and serving replicas.
    pub windows: i64,
    pub windows_at_slo: i64,
    /// The window of the safe rate, its start.
    pub best_window: Option<Micros>,
    pub safe_rps_per_replica: Option<f64>,
    pub gpus_per_replica: Option<f64>,
}

/// Requests and SLO-met requests per window of one model.
#[derive(Debug, Clone, Default)]
pub struct Windows(BTreeMap<Micros, (i64, i64)>);

impl Windows {
    pub fn add(&mut self, ts: Micros, slo_met: bool) {
        let counts = self.0.entry(ts.div_euclid(WINDOW) * WINDOW).or_default();
        counts.0 += 1;
        counts.1 += i64::from(slo_met);
    }

    /// The safe throughput at SLO `objective` (0–1) served by `replicas`.
    pub fn throughput(&self, replicas: &[ReplicaAllocation], objective: f64) -> Throughput {
        let mut measured = Throughput::default();
        for (&start, &(requests, met)) in &self.0 {
            let window = Span::new(start, start + WINDOW);
            let holding: Vec<&ReplicaAllocation> = replicas
                .iter()
                .filter(|r| !r.span.intersect(&window).is_empty())
                .collect();
            let pods: BTreeSet<&str> = holding.iter().map(|r| r.replica.as_str()).collect();
            if pods.is_empty() {
                continue;
            }
            measured.windows += 1;
            if (met as f64) < objective * requests as f64 {
                continue;
            }
            measured.windows_at_slo += 1;
            let per_replica =
                requests as f64 / (WINDOW / MICROS_PER_SECOND) as f64 / pods.len() as f64;
            if measured
                .safe_rps_per_replica
                .is_none_or(|best| per_replica > best)
            {
                let gpus = holding.iter().map(|r| r.share).sum::<f64>();
                measured.best_window = Some(start);
                measured.safe_rps_per_replica = Some(per_replica);
                measured.gpus_per_replica = Some(gpus / pods.len() as f64);
            }
        }
        measured
    }
}

/// ⌈peak_rps / safe_rps⌉ + redundancy; `None` without a positive safe rate.
pub fn replicas_needed(peak_rps: f64, safe_rps: Option<f64>, redundancy: i64) -> Option<i64> {
    let safe = safe_rps.filter(|s| *s > 0.0)?;
    Some((peak_rps / safe).ceil().max(0.0) as i64 + redundancy)
}

/// One node of a group now: its GPUs and how many of them are free.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeFree {
    pub gpus: u32,
    pub free: u32,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    pub nodes: u32,
    pub gpus: u32,
    pub free_gpus: u32,
    pub largest_free_block: u32,
    /// GPUs of the nodes that are wholly free.
    pub free_node_gpus: u32,
    pub can_start: bool,
}

pub fn fit(nodes: &[NodeFree], requested: u32) -> Fit {
    let largest_free_block = nodes.iter().map(|n| n.free).max().unwrap_or(0);
    let free_node_gpus = nodes
        .iter()
        .filter(|n| n.free == n.gpus)
        .map(|n| n.gpus)
        .sum();
    Fit {
        nodes: nodes.len() as u32,
        gpus: nodes.iter().map(|n| n.gpus).sum(),
        free_gpus: nodes.iter().map(|n| n.free).sum(),
        largest_free_block,
        free_node_gpus,
        can_start: requested <= largest_free_block || requested <= free_node_gpus,
    }
}

#[cfg(test)]
mod tests;
