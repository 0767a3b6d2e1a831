//! The usage lens in small pieces, for SQL over any interval an analyst picks: the time-weighted
//! average of a sampled gauge, the idle class of a GPU-interval (docs/design.md §5) and unit costs
//! (docs/design.md §7). Each agrees with what `gpu_hours.rs` does over a whole timeline.

use std::fmt;

use crate::time::Micros;

/// Time-weighted average of a sampled gauge, `samples` sorted by time. Each sample holds from its
/// time until the next sample, but for at most `max_gap`: beyond that is a gap that counts for
/// nothing (a missing hour is not an idle hour). The last sample holds for `max_gap`, as a sample
/// does in `gpu_hours` (`ClassifyConfig::max_sample_gap`). Samples sharing a time share its
/// holding evenly, so the result does not depend on their order.
///
/// `None` without samples or when `max_gap` is not positive.
pub fn time_weighted_average(samples: &[(Micros, f64)], max_gap: Micros) -> Option<f64> {
    debug_assert!(samples.is_sorted_by_key(|(ts, _)| *ts));
    if max_gap <= 0 {
        return None;
    }
    let mut runs = samples.chunk_by(|a, b| a.0 == b.0).peekable();
    let (mut weighted, mut held) = (0.0, 0.0);
    while let Some(run) = runs.next() {
        let ts = run[0].0;
        let until_next = runs.peek().map_or(max_gap, |next| next[0].0 - ts);
        let duration = until_next.min(max_gap) as f64;
        let mean = run.iter().map(|(_, v)| v).sum::<f64>() / run.len() as f64;
        weighted += mean * duration;
        held += duration;
    }
    (held > 0.0).then(|| weighted / held)
}

/// The idle class of a stretch of one GPU (docs/design.md §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleClass<'a> {
    Busy,
    AllocatedIdle,
    /// Not allocated, but covered by a declared reservation with this reason.
    Reserved(&'a str),
    Unexplained,
    Fault,
}

impl IdleClass<'_> {
    /// The class without its reservation reason, as in the `<class>_seconds` columns of
    /// `gpu_hours`.
    pub fn as_str(&self) -> &'static str {
        match self {
            IdleClass::Busy => "busy",
            IdleClass::AllocatedIdle => "allocated_idle",
            IdleClass::Reserved(_) => "reserved",
            IdleClass::Unexplained => "unexplained",
            IdleClass::Fault => "fault",
        }
    }
}

/// The docs/design.md §5 name: `busy`, `allocated_idle`, `reserved:<reason>`, `unexplained`, `fault`.
impl fmt::Display for IdleClass<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdleClass::Reserved(reason) => write!(f, "reserved:{reason}"),
            other => f.write_str(other.as_str()),
        }
    }
}

/// Classifies a stretch of GPU time with the precedence of `gpu_hours`: allocated time is the
/// owner's even on a faulty GPU (`busy`, or `allocated_idle` when SM activity is known and below
/// `idle_threshold`; no telemetry is no evidence of idleness); unallocated time is `fault` when
/// the GPU was unhealthy, else `reserved:<reason>` when a reservation covers it, else
/// `unexplained`.
pub fn idle_class<'a>(
    allocated_share: f64,
    sm_active: Option<f64>,
    reserved_reason: Option<&'a str>,
    fault: bool,
    idle_threshold: f64,
) -> IdleClass<'a> {
    if allocated_share > 0.0 {
        match sm_active {
            Some(active) if active < idle_threshold => IdleClass::AllocatedIdle,
            _ => IdleClass::Busy,
        }
    } else if fault {
        IdleClass::Fault
    } else if let Some(reason) = reserved_reason {
        IdleClass::Reserved(reason)
    } else {
        IdleClass::Unexplained
    }
}

/// `cost` per `per` units (per 1e6 for cost per 1M tokens). `None` without a positive unit count:
/// no output is not free output.
pub fn unit_cost(cost: f64, units: f64, per: f64) -> Option<f64> {
    (units > 0.0).then(|| cost / units * per)
}

#[cfg(test)]
mod tests;
