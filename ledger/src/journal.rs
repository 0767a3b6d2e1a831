//! The cost journal (`cost_entries`): every cent of the window in exactly one
//! `(day, team, bucket, rule, source)` line, and the balance that proves it.
//!
//! Buckets: `direct` (allocated and busy) and `allocated_idle` (allocated but idle — still the
//! owner's; kept as its own bucket so it stays visible), `shared` (a pool spread by a rule),
//! `reserved:<reason>`, `unexplained` and `fault` (unallocated GPU time, team `NULL`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::amortize::{Strategy, spread, weights};
use crate::time::{MICROS_PER_DAY, Micros, Span, floor_day};

#[derive(Debug, Clone, PartialEq)]
pub struct CostEntry {
    pub day: Micros,
    pub team: Option<String>,
    pub bucket: String,
    /// The shared-cost rule that produced a `shared` line (`default` for unmatched costs).
    pub rule: Option<String>,
    /// `billing`, `rate_card` or `manual`.
    pub source: String,
    pub amount: f64,
}

/// What a rule's pool is spread in proportion to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    #[default]
    DirectCost,
    GpuHours,
    /// A named usage measure supplied by the caller (e.g. `requests`).
    Usage(String),
}

/// Which costs form a pool (all `matches` must hold; `*` is a wildcard, case is ignored) and how
/// the pool is spread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedCostRule {
    pub name: String,
    #[serde(default)]
    pub matches: BTreeMap<String, String>,
    #[serde(flatten)]
    pub strategy: Strategy,
    #[serde(default)]
    pub basis: Basis,
}

impl SharedCostRule {
    pub fn applies_to(&self, attributes: &BTreeMap<String, String>) -> bool {
        self.matches.iter().all(|(key, pattern)| {
            attributes
                .get(key)
                .is_some_and(|value| glob_match(pattern, value))
        })
    }
}

/// Case-insensitive match with `*` for any run of characters.
pub fn glob_match(pattern: &str, value: &str) -> bool {
    let (pattern, value) = (pattern.to_lowercase(), value.to_lowercase());
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == value;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !value.starts_with(first)
        || !value[first.len()..].ends_with(last)
        || value.len() < first.len() + last.len()
    {
        return false;
    }
    let mut rest = &value[first.len()..value.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

/// A cost without a workload: it goes to a shared pool.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedItem {
    pub period: Span,
    pub amount: f64,
    pub source: String,
    /// What rules match on: FOCUS columns in snake_case, `tags.<key>`, `kind`, `category`, …
    pub attributes: BTreeMap<String, String>,
}

/// Per day and team: what the rules' bases weigh.
#[derive(Debug, Clone, Default)]
pub struct DailyBasis {
    pub direct_cost: BTreeMap<(Micros, String), f64>,
    pub gpu_hours: BTreeMap<(Micros, String), f64>,
    /// measure → (day, team) → amount.
    pub usage: BTreeMap<String, BTreeMap<(Micros, String), f64>>,
}

impl DailyBasis {
    fn for_day(&self, basis: &Basis, day: Micros) -> BTreeMap<String, f64> {
        let table = match basis {
            Basis::DirectCost => &self.direct_cost,
            Basis::GpuHours => &self.gpu_hours,
            Basis::Usage(measure) => match self.usage.get(measure) {
                Some(table) => table,
                None => return BTreeMap::new(),
            },
        };
        let of_day: BTreeMap<String, f64> = table
            .range((day, String::new())..(day + 1, String::new()))
            .map(|((_, t), v)| (t.clone(), *v))
            .collect();
        if of_day.values().any(|v| *v > 0.0) {
            return of_day;
        }
        // Nobody used anything that day: fall back to the whole window's basis.
        let mut whole = BTreeMap::new();
        for ((_, team), v) in table {
            *whole.entry(team.clone()).or_insert(0.0) += v;
        }
        whole
    }
}

/// Spreads shared items over days (in proportion to time) and over teams (by the first rule
/// that matches, else the `default` rule: proportional to direct cost).
pub fn amortize(
    items: &[SharedItem],
    rules: &[SharedCostRule],
    basis: &DailyBasis,
    window: Span,
) -> Vec<CostEntry> {
    let default_rule = SharedCostRule {
        name: "default".into(),
        matches: BTreeMap::new(),
        strategy: Strategy::Proportional,
        basis: Basis::DirectCost,
    };
    let mut entries = Vec::new();
    for item in items {
        let rule = rules
            .iter()
            .find(|r| r.applies_to(&item.attributes))
            .unwrap_or(&default_rule);
        for (day, amount) in by_day(item.amount, item.period, window) {
            let team_weights = weights(&rule.strategy, &basis.for_day(&rule.basis, day));
            for (team, part) in spread(amount, &team_weights) {
                entries.push(CostEntry {
                    day,
                    team: Some(team),
                    bucket: "shared".into(),
                    rule: Some(rule.name.clone()),
                    source: item.source.clone(),
                    amount: part,
                });
            }
        }
    }
    entries
}

/// The part of an amount spread evenly over `period` that falls in each day of `window`.
/// An instant (empty period) inside the window counts whole on its day.
pub fn by_day(amount: f64, period: Span, window: Span) -> Vec<(Micros, f64)> {
    if period.is_empty() {
        return if window.contains(period.start) {
            vec![(floor_day(period.start), amount)]
        } else {
            vec![]
        };
    }
    let inside = period.intersect(&window);
    let mut parts = Vec::new();
    let mut day = floor_day(inside.start);
    while day < inside.end {
        let part = inside.intersect(&Span::new(day, day + MICROS_PER_DAY));
        if !part.is_empty() {
            parts.push((day, amount * part.len() as f64 / period.len() as f64));
        }
        day += MICROS_PER_DAY;
    }
    parts
}

/// (day, team, bucket, rule, source): what identifies a line of the journal.
type EntryKey = (Micros, Option<String>, String, Option<String>, String);

/// Sums entries with the same key, in key order.
pub fn consolidate(entries: Vec<CostEntry>) -> Vec<CostEntry> {
    let mut sums: BTreeMap<EntryKey, f64> = BTreeMap::new();
    for e in entries {
        *sums
            .entry((e.day, e.team, e.bucket, e.rule, e.source))
            .or_insert(0.0) += e.amount;
    }
    sums.into_iter()
        .map(|((day, team, bucket, rule, source), amount)| CostEntry {
            day,
            team,
            bucket,
            rule,
            source,
            amount,
        })
        .collect()
}

/// Both sides of the ledger for a window (DESIGN §4).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Balance {
    /// Billing `effective_cost` in the window (lines prorated over their charge periods).
    pub billed: f64,
    pub manual: f64,
    /// GPU time of nodes without billing, priced by the rate card.
    pub rate_card: f64,
    /// The sum of the window's cost entries.
    pub accounted: f64,
}

/// The relative tolerance of the balance.
pub const BALANCE_TOLERANCE: f64 = 1e-6;

impl Balance {
    pub fn expected(&self) -> f64 {
        self.billed + self.manual + self.rate_card
    }

    pub fn difference(&self) -> f64 {
        self.accounted - self.expected()
    }

    pub fn balances(&self) -> bool {
        self.difference().abs() <= BALANCE_TOLERANCE * self.expected().abs().max(1.0)
    }
}

#[cfg(test)]
mod tests;
