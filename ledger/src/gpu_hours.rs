//! The hourly ledger: every second of a GPU that was billed or observed lands in exactly one
//! idle class (docs/design.md §5) for exactly one owner, and carries the price in force at that second.
//!
//! Per GPU the time line is cut at every boundary (allocation, reservation, fault, price, hour,
//! sample); in each piece:
//! - allocated shares are charged to their owners (scaled down if they overcommit the GPU):
//!   `busy` when SM activity ≥ the threshold, `allocated_idle` below it. Allocated time with no
//!   telemetry counts as busy: a missing sample is no evidence of idleness;
//! - the unallocated rest is `fault` if the GPU was unhealthy, else `reserved` with the
//!   reservation's reason if one covers it, else `unexplained`.
//!
//! Because the pieces partition the GPU's existence and each is costed at its price, the cost
//! of a GPU's rows is exactly the cost of its billed seconds: the ledger balances by construction.

use std::borrow::Cow;
use std::collections::BTreeMap;

use itertools::Itertools;
use serde::{Deserialize, Serialize};

use crate::allocation::Allocation;
use crate::money::Money;
use crate::time::{MICROS_PER_HOUR, Micros, Span, floor_hour};

/// Defaults of docs/design.md §5.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClassifyConfig {
    /// SM activity (0–1) below which allocated time is idle.
    pub idle_threshold: f64,
    /// How long a sample stands for when the next one does not come sooner.
    pub max_sample_gap: Micros,
}

impl Default for ClassifyConfig {
    fn default() -> Self {
        Self {
            idle_threshold: 0.05,
            max_sample_gap: 120 * 1_000_000,
        }
    }
}

/// One telemetry reading of a GPU (or of a MIG instance or pod on it) at one time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UsageSample {
    pub ts: Micros,
    /// SM activity 0–1: one measure, never a blend — `sm_active` where the exporter has it, else
    /// `gr_engine_active`, else `gpu_util` / 100 (see [`usage_measure`]).
    pub sm_active: Option<f64>,
    /// The share of the framebuffer in use, 0–1 (`fb_used_mib / (fb_used_mib + fb_free_mib)`).
    pub memory_used_share: Option<f64>,
    pub power_w: Option<f64>,
}

/// The SM-activity measure of one reading: the first the exporter gave of SM activity, graphics
/// engine activity and GPU utilisation (percent). Averaging them would book a stalled GPU (SM
/// 0.02, utilisation 14 %) as busy.
pub fn usage_measure(
    sm_active: Option<f64>,
    gr_engine_active: Option<f64>,
    gpu_util_percent: Option<f64>,
) -> Option<f64> {
    sm_active
        .or(gr_engine_active)
        .or(gpu_util_percent.map(|u| u / 100.0))
}

/// The readings of a time-sorted list that stand for times asked in increasing order: each
/// answer steps forward from the last instead of searching the list again.
struct Readings<'s> {
    samples: &'s [UsageSample],
    /// How many samples are at or before the last time asked.
    passed: usize,
}

impl<'s> Readings<'s> {
    fn new(samples: &'s [UsageSample]) -> Self {
        Self { samples, passed: 0 }
    }

    /// The reading that stands for time `t` (no earlier than the time asked before): the latest
    /// at or before it, for at most `max_gap`.
    fn at(&mut self, t: Micros, max_gap: Micros) -> Option<&'s UsageSample> {
        while self.samples.get(self.passed).is_some_and(|s| s.ts <= t) {
            self.passed += 1;
        }
        self.samples[..self.passed]
            .last()
            .filter(|s| t < s.ts + max_gap)
    }
}

/// A price in force over a span, per GPU-hour.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PriceSegment {
    pub span: Span,
    pub price_per_hour: f64,
}

/// Everything known about one physical GPU in the window.
#[derive(Debug, Clone, Default)]
pub struct GpuTimeline<'a> {
    pub cluster: String,
    pub node: String,
    pub gpu_index: u32,
    pub gpu_uuid: Option<String>,
    /// When the GPU counts at all: billed or observed spans (may overlap).
    pub existence: Vec<Span>,
    pub allocations: Vec<&'a Allocation>,
    /// Declared reservations and their reason (`warm_pool`, `ha_redundancy`, …).
    pub reservations: Vec<(Span, String)>,
    pub faults: Vec<Span>,
    /// The whole GPU's readings, sorted by time: one measure per time (see [`UsageSample`]).
    /// Borrowed from the GPU's telemetry where a build has it.
    pub samples: Cow<'a, [UsageSample]>,
    /// Readings of the series dcgm-exporter labelled with a pod — a MIG instance, or a pod's share
    /// of a time-sliced GPU — by (namespace, pod), each sorted by time. An allocation's usage is
    /// its pod's reading where there is one, else the GPU's.
    pub pod_samples: Cow<'a, BTreeMap<(String, String), Vec<UsageSample>>>,
    /// Prices add where they overlap (usage, tax and credit lines of one resource).
    pub prices: Vec<PriceSegment>,
}

/// Cost by idle class of one row: [`Money`], or the exact-as-floats sums of a row being filled.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ClassCosts<T = Money> {
    pub busy: T,
    pub allocated_idle: T,
    pub reserved: T,
    pub unexplained: T,
    pub fault: T,
}

impl ClassCosts<f64> {
    /// Each class rounded once to money, when the row is complete.
    fn rounded(&self) -> ClassCosts {
        ClassCosts {
            busy: Money::from_f64(self.busy),
            allocated_idle: Money::from_f64(self.allocated_idle),
            reserved: Money::from_f64(self.reserved),
            unexplained: Money::from_f64(self.unexplained),
            fault: Money::from_f64(self.fault),
        }
    }
}

impl ClassCosts {
    pub fn total(&self) -> Money {
        self.busy + self.allocated_idle + self.reserved + self.unexplained + self.fault
    }
}

/// Who a row belongs to. `None` for the unallocated part of the GPU.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Owner {
    pub team: String,
    pub namespace: Option<String>,
    pub workload: Option<String>,
}

/// A row of `gpu_hours`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GpuHour {
    pub hour: Micros,
    pub cluster: String,
    pub node: String,
    pub gpu_index: u32,
    pub gpu_uuid: Option<String>,
    pub owner: Option<Owner>,
    pub alloc_seconds: f64,
    pub busy_seconds: f64,
    pub allocated_idle_seconds: f64,
    pub reserved_seconds: f64,
    pub reserved_reason: Option<String>,
    pub unexplained_seconds: f64,
    pub fault_seconds: f64,
    /// Time-weighted over the allocated seconds that had telemetry; `None` when none had.
    pub sm_active: Option<f64>,
    /// The GPU's framebuffer in use, time-weighted over the row's seconds whose reading had it.
    pub memory_used_share: Option<f64>,
    /// The GPU's power draw, time-weighted over the row's seconds whose reading had it.
    pub power_w: Option<f64>,
    pub energy_wh: f64,
    /// The sum of `class_costs`, exactly.
    pub cost: Money,
    /// `cost` by idle class, exact even when the price changes inside the hour: each class is
    /// price × seconds over the row's pieces, rounded once to money.
    pub class_costs: ClassCosts,
}

/// A row being filled, with the running integrals that become its averages.
#[derive(Default)]
struct RowBuilder {
    row: GpuHour,
    sm_active: TimeWeighted,
    memory_used_share: TimeWeighted,
    power_w: TimeWeighted,
    costs: ClassCosts<f64>,
}

/// The integral of a reading over the seconds it was known, and those seconds.
#[derive(Default)]
struct TimeWeighted {
    integral: f64,
    seconds: f64,
}

impl TimeWeighted {
    fn add(&mut self, value: Option<f64>, seconds: f64) {
        if let Some(value) = value {
            self.integral += value * seconds;
            self.seconds += seconds;
        }
    }

    /// `None` when no second had a reading.
    fn mean(&self) -> Option<f64> {
        (self.seconds > 0.0).then(|| self.integral / self.seconds)
    }
}

impl RowBuilder {
    /// The whole GPU's reading standing for `seconds` of the row (its framebuffer and power
    /// are the device's, whoever holds a share of it).
    fn add_gpu_reading(&mut self, reading: Option<&UsageSample>, seconds: f64) {
        let power = reading.and_then(|r| r.power_w);
        self.memory_used_share
            .add(reading.and_then(|r| r.memory_used_share), seconds);
        self.power_w.add(power, seconds);
        self.row.energy_wh += power.unwrap_or(0.0) * seconds / 3600.0;
    }
}

impl GpuHour {
    /// All the seconds of the row, whatever their class.
    pub fn seconds(&self) -> f64 {
        self.busy_seconds
            + self.allocated_idle_seconds
            + self.reserved_seconds
            + self.unexplained_seconds
            + self.fault_seconds
    }

    /// The average price over the row's seconds.
    pub fn price_per_hour(&self) -> f64 {
        let seconds = self.seconds();
        if seconds > 0.0 {
            self.cost.to_f64() / seconds * 3600.0
        } else {
            0.0
        }
    }
}

/// `owner` is resolved by the caller (team policy applied) from an allocation.
pub fn gpu_hours(
    timeline: &GpuTimeline<'_>,
    config: &ClassifyConfig,
    owner_of: impl Fn(&Allocation) -> Owner,
) -> Vec<GpuHour> {
    let existence = union(&timeline.existence);
    let Some(window) = existence
        .first()
        .map(|f| Span::new(f.start, existence.last().expect("non-empty").end))
    else {
        return vec![];
    };
    debug_assert!(
        timeline.samples.is_sorted_by_key(|s| s.ts),
        "samples sorted by time"
    );
    debug_assert!(
        timeline
            .pod_samples
            .values()
            .all(|series| series.is_sorted_by_key(|s| s.ts)),
        "each pod's samples sorted by time"
    );
    let gap = config.max_sample_gap;
    // The time line is cut in two steps. First into segments, at every boundary of what the
    // GPU's time is (existence, allocations, reservations, faults, prices, hours): a few dozen a
    // day, each with one owner set, price and class of the unallocated rest, found once. Then
    // each segment into pieces wherever the reading that stands for the time changes: thousands
    // a day, each only classified by its reading.
    let mut bounds: Vec<Micros> = Vec::new();
    let mut add_span = |s: &Span| {
        bounds.push(s.start);
        bounds.push(s.end);
    };
    existence.iter().for_each(&mut add_span);
    timeline.allocations.iter().for_each(|a| add_span(&a.span));
    timeline.reservations.iter().for_each(|(s, _)| add_span(s));
    timeline.faults.iter().for_each(&mut add_span);
    timeline.prices.iter().for_each(|p| add_span(&p.span));
    bounds.extend(window.hours().skip(1));
    bounds.retain(|t| window.contains(*t) || *t == window.end);
    bounds.sort_unstable();
    bounds.dedup();
    // Each series' cuts are a sorted sequence: merged rather than sorted.
    let mut reading_cuts = reading_cuts(&timeline.samples, gap)
        .merge(
            timeline
                .pod_samples
                .values()
                .map(|series| reading_cuts(series, gap))
                .kmerge(),
        )
        .peekable();

    // Owners and reservation reasons by number, numbered in the order of their values: a
    // segment finds its rows without building a key of strings, and the rows keep the order of
    // (hour, owner, reason).
    let (owners, owner_of_allocation) = numbered(timeline.allocations.iter().map(|a| owner_of(a)));
    let (reasons, reason_of_reservation) =
        numbered(timeline.reservations.iter().map(|(_, r)| r.clone()));
    let mut own_readings: Vec<Readings> = timeline
        .allocations
        .iter()
        .map(|a| match (&a.namespace, &a.pod) {
            (Some(namespace), Some(pod)) => timeline
                .pod_samples
                .get(&(namespace.clone(), pod.clone()))
                .map_or(&[][..], Vec::as_slice),
            _ => &[],
        })
        .map(Readings::new)
        .collect();
    let mut readings = Readings::new(&timeline.samples);
    let mut rows = Rows::new(timeline);
    let mut existence_cursor = 0;
    // The allocations holding the GPU in a segment, each with its row.
    let mut active: Vec<(usize, usize)> = Vec::new();
    for segment in bounds
        .iter()
        .tuple_windows()
        .map(|(&start, &end)| Span::new(start, end))
    {
        while existence_cursor < existence.len() && existence[existence_cursor].end <= segment.start
        {
            existence_cursor += 1;
        }
        if existence_cursor == existence.len()
            || !existence[existence_cursor].contains(segment.start)
        {
            continue;
        }
        let price: f64 = timeline
            .prices
            .iter()
            .filter(|p| p.span.contains(segment.start))
            .map(|p| p.price_per_hour)
            .sum();
        let hour = floor_hour(segment.start);
        active.clear();
        active.extend(
            (0..timeline.allocations.len())
                .filter(|&i| timeline.allocations[i].span.contains(segment.start))
                .map(|i| (i, rows.index((hour, Some(owner_of_allocation[i]), None)))),
        );
        let total_share: f64 = active
            .iter()
            .map(|&(i, _)| timeline.allocations[i].share)
            .sum();
        let scale = if total_share > 1.0 {
            1.0 / total_share
        } else {
            1.0
        };
        let free_share = 1.0 - total_share.min(1.0);
        let fault = timeline.faults.iter().any(|f| f.contains(segment.start));
        let reason = if fault {
            None
        } else {
            timeline
                .reservations
                .iter()
                .zip(&reason_of_reservation)
                .filter(|((s, _), _)| s.contains(segment.start))
                .map(|(_, &r)| r)
                .min()
        };
        let free_row = (free_share > 0.0).then(|| rows.index((hour, None, reason)));

        let mut start = segment.start;
        while start < segment.end {
            let end = loop {
                match reading_cuts.peek() {
                    Some(&t) if t <= start => {
                        reading_cuts.next();
                    }
                    Some(&t) if t < segment.end => break t,
                    _ => break segment.end,
                }
            };
            let piece = Span::new(start, end);
            start = end;
            let sample = readings.at(piece.start, gap);
            let seconds = piece.seconds();
            for &(i, row) in &active {
                let held = seconds * timeline.allocations[i].share * scale;
                let sm_active = own_readings[i]
                    .at(piece.start, gap)
                    .and_then(|s| s.sm_active)
                    .or_else(|| sample.and_then(|s| s.sm_active));
                let builder = &mut rows.builders[row];
                builder.sm_active.add(sm_active, held);
                builder.add_gpu_reading(sample, held);
                let entry = &mut builder.row;
                entry.alloc_seconds += held;
                let cost = held * price / 3600.0;
                match sm_active {
                    Some(v) if v < config.idle_threshold => {
                        entry.allocated_idle_seconds += held;
                        builder.costs.allocated_idle += cost;
                    }
                    _ => {
                        entry.busy_seconds += held;
                        builder.costs.busy += cost;
                    }
                }
            }
            let free = seconds * free_share;
            if let Some(row) = free_row.filter(|_| free > 0.0) {
                let builder = &mut rows.builders[row];
                builder.add_gpu_reading(sample, free);
                let (entry, costs) = (&mut builder.row, &mut builder.costs);
                let cost = free * price / 3600.0;
                let (seconds, class_cost) = match (fault, reason) {
                    (true, _) => (&mut entry.fault_seconds, &mut costs.fault),
                    (false, Some(_)) => (&mut entry.reserved_seconds, &mut costs.reserved),
                    (false, None) => (&mut entry.unexplained_seconds, &mut costs.unexplained),
                };
                *seconds += free;
                *class_cost += cost;
            }
        }
    }
    rows.into_sorted()
        .map(|((_, owner, reason), b)| {
            let class_costs = b.costs.rounded();
            GpuHour {
                sm_active: b.sm_active.mean(),
                memory_used_share: b.memory_used_share.mean(),
                power_w: b.power_w.mean(),
                cost: class_costs.total(),
                class_costs,
                owner: owner.map(|o| owners[o].clone()),
                reserved_reason: reason.map(|r| reasons[r].clone()),
                ..b.row
            }
        })
        .collect()
}

/// Where a series' readings change what stands for the time, in order: at each reading, and
/// `gap` after one that no later reading takes over from by then (on either side of any other
/// such time the same later reading stands).
fn reading_cuts(samples: &[UsageSample], gap: Micros) -> impl Iterator<Item = Micros> + '_ {
    let stale = samples.iter().enumerate().filter_map(move |(i, s)| {
        let end = s.ts + gap;
        samples
            .get(i + 1)
            .is_none_or(|next| next.ts > end)
            .then_some(end)
    });
    samples.iter().map(|s| s.ts).merge(stale)
}

/// (hour, owner, reservation reason), the owner and the reason by their numbers.
type RowKey = (Micros, Option<usize>, Option<usize>);

/// A GPU's rows being filled, each created on first use.
struct Rows<'t, 'a> {
    timeline: &'t GpuTimeline<'a>,
    builders: Vec<RowBuilder>,
    index: BTreeMap<RowKey, usize>,
}

impl<'t, 'a> Rows<'t, 'a> {
    fn new(timeline: &'t GpuTimeline<'a>) -> Self {
        Self {
            timeline,
            builders: Vec::new(),
            index: BTreeMap::new(),
        }
    }

    /// Where in `builders` the row of `key` is.
    fn index(&mut self, key: RowKey) -> usize {
        let (builders, timeline) = (&mut self.builders, self.timeline);
        *self.index.entry(key).or_insert_with(|| {
            builders.push(RowBuilder {
                row: GpuHour {
                    hour: key.0,
                    cluster: timeline.cluster.clone(),
                    node: timeline.node.clone(),
                    gpu_index: timeline.gpu_index,
                    gpu_uuid: timeline.gpu_uuid.clone(),
                    ..GpuHour::default()
                },
                ..RowBuilder::default()
            });
            builders.len() - 1
        })
    }

    /// The rows in the order of their keys.
    fn into_sorted(mut self) -> impl Iterator<Item = (RowKey, RowBuilder)> {
        self.index
            .into_iter()
            .map(move |(key, at)| (key, std::mem::take(&mut self.builders[at])))
    }
}

/// The distinct values, sorted, and the number (position among them) of each value given.
fn numbered<T: Ord + Clone>(values: impl Iterator<Item = T>) -> (Vec<T>, Vec<usize>) {
    let values: Vec<T> = values.collect();
    let mut distinct = values.clone();
    distinct.sort();
    distinct.dedup();
    let numbers = values
        .iter()
        .map(|v| {
            distinct
                .binary_search(v)
                .expect("one of the distinct values")
        })
        .collect();
    (distinct, numbers)
}

/// Sorted, non-overlapping union of spans.
pub(crate) fn union(spans: &[Span]) -> Vec<Span> {
    let mut sorted: Vec<Span> = spans.iter().copied().filter(|s| !s.is_empty()).collect();
    sorted.sort();
    let mut merged: Vec<Span> = Vec::with_capacity(sorted.len());
    for span in sorted {
        match merged.last_mut() {
            Some(last) if span.start <= last.end => last.end = last.end.max(span.end),
            _ => merged.push(span),
        }
    }
    merged
}

/// Hours spanned by observation: a GPU seen in an hour counts that whole hour. `samples` are
/// sorted by time, so each hour is found with one search past the one before, rather than an
/// hour taken of every sample (thousands a day).
pub fn observed_hours(samples: &[UsageSample]) -> Vec<Span> {
    debug_assert!(samples.is_sorted_by_key(|s| s.ts), "samples sorted by time");
    let mut hours = Vec::new();
    let mut rest = samples;
    while let Some(first) = rest.first() {
        let hour = floor_hour(first.ts);
        let end = hour + MICROS_PER_HOUR;
        hours.push(Span::new(hour, end));
        rest = &rest[rest.partition_point(|s| s.ts < end)..];
    }
    hours
}

#[cfg(test)]
mod tests;
