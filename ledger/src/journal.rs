//! The cost journal (`cost_entries`): every cent of the window in exactly one
//! `(day, team, bucket, rule, source)` line, and the balance that proves it.
//!
//! Buckets: `direct` (allocated and busy) and `allocated_idle` (allocated but idle — still the
//! owner's; kept as its own bucket so it stays visible), `shared` (a pool spread by a rule),
//! `reserved:<reason>`, `unexplained` and `fault` (unallocated GPU time, team `NULL`).
//!
//! Amounts are [`Money`]: a line is an exact sum of the rows' class costs (each rounded once
//! when its row was costed) and of the parts of split pools, so the journal of the same rows
//! and items is the same in whatever order they come.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::amortize::{Strategy, spread, weights};
use crate::gpu_hours::GpuHour;
use crate::money::Money;
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
    pub amount: Money,
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
    pub amount: Money,
    pub source: String,
    /// What rules match on: FOCUS columns in snake_case, `tags.<key>`, `kind`, `category`, …
    pub attributes: BTreeMap<String, String>,
}

/// Per day and team: what the rules' bases weigh.
#[derive(Debug, Clone, Default)]
pub struct DailyBasis {
    pub direct_cost: BTreeMap<(Micros, String), f64>,
    pub gpu_hours: BTreeMap<(Micros, String), f64>,
    pub usage: UsageMeasures,
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

/// Usage measures for `usage` rules: measure → (day, team) → amount.
pub type UsageMeasures = BTreeMap<String, BTreeMap<(Micros, String), f64>>;

/// The journal of a window: each GPU-hour row's class costs on its owner's `direct` and
/// `allocated_idle` lines or on the unallocated buckets (with the row's `source`), the shared
/// items spread by the rules over the teams' direct cost, GPU-hours or usage, one line per key.
/// The same rows and items in any order give the same lines.
pub fn journal(
    rows: &[GpuHour],
    source_of: impl Fn(&GpuHour) -> &'static str,
    items: &[SharedItem],
    rules: &[SharedCostRule],
    usage: &UsageMeasures,
    window: Span,
) -> Vec<CostEntry> {
    let rows = canonical_order(rows);
    let mut entries = Vec::new();
    for &row in &rows {
        let day = floor_day(row.hour);
        let source = source_of(row);
        let mut entry = |team: Option<&String>, bucket: String, amount: Money| {
            if !amount.is_zero() {
                entries.push(CostEntry {
                    day,
                    team: team.cloned(),
                    bucket,
                    rule: None,
                    source: source.to_string(),
                    amount,
                });
            }
        };
        let costs = &row.class_costs;
        match &row.owner {
            Some(owner) => {
                entry(Some(&owner.team), "direct".into(), costs.busy);
                entry(
                    Some(&owner.team),
                    "allocated_idle".into(),
                    costs.allocated_idle,
                );
            }
            None => {
                if let Some(reason) = &row.reserved_reason {
                    entry(None, format!("reserved:{reason}"), costs.reserved);
                }
                entry(None, "unexplained".into(), costs.unexplained);
                entry(None, "fault".into(), costs.fault);
            }
        }
    }
    let basis = daily_basis(rows.iter().copied(), usage);
    entries.extend(amortize(items, rules, &basis, window));
    consolidate(entries)
}

/// The rows in one canonical order, so that the float GPU-hours of a basis add alike every time.
fn canonical_order<'r>(rows: impl IntoIterator<Item = &'r GpuHour>) -> Vec<&'r GpuHour> {
    let mut rows: Vec<&'r GpuHour> = rows.into_iter().collect();
    rows.sort_by(|a, b| {
        let key = |r: &'r GpuHour| {
            (
                &r.cluster,
                &r.node,
                r.gpu_index,
                r.hour,
                &r.owner,
                &r.reserved_reason,
            )
        };
        key(a).cmp(&key(b))
    });
    rows
}

/// What the rules weigh, from the GPU-hour rows and the usage measures: each owner's direct
/// cost (its rows' whole cost) and GPU-hours held, per day.
pub fn daily_basis<'r>(
    rows: impl IntoIterator<Item = &'r GpuHour>,
    usage: &UsageMeasures,
) -> DailyBasis {
    let mut direct: BTreeMap<(Micros, String), Money> = BTreeMap::new();
    let mut basis = DailyBasis::default();
    for row in canonical_order(rows) {
        if let Some(owner) = &row.owner {
            let day = floor_day(row.hour);
            *direct.entry((day, owner.team.clone())).or_default() += row.cost;
            *basis
                .gpu_hours
                .entry((day, owner.team.clone()))
                .or_default() += row.alloc_seconds / 3600.0;
        }
    }
    basis.direct_cost = direct.into_iter().map(|(k, v)| (k, v.to_f64())).collect();
    basis.usage = usage.clone();
    basis
}

/// Spreads shared items over days (in proportion to time) and over teams (by the first rule
/// that matches, else the `default` rule: proportional to direct cost).
pub fn amortize(
    items: &[SharedItem],
    rules: &[SharedCostRule],
    basis: &DailyBasis,
    window: Span,
) -> Vec<CostEntry> {
    let mut entries = Vec::new();
    for item in items {
        let rule = rule_for(item, rules);
        for (day, amount) in by_day(item.amount, item.period, window) {
            let team_weights = day_weights(&rule, basis, day);
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

/// The rule that spreads `item`: the first that matches, else `default` (proportional to
/// direct cost).
pub fn rule_for(item: &SharedItem, rules: &[SharedCostRule]) -> SharedCostRule {
    rules
        .iter()
        .find(|r| r.applies_to(&item.attributes))
        .cloned()
        .unwrap_or_else(|| SharedCostRule {
            name: "default".into(),
            matches: BTreeMap::new(),
            strategy: Strategy::Proportional,
            basis: Basis::DirectCost,
        })
}

/// The teams' weights under `rule` on `day`, as [`amortize`] spreads by them (before
/// [`spread`] gives what no positive weight claims to `unattributed`).
pub fn day_weights(
    rule: &SharedCostRule,
    basis: &DailyBasis,
    day: Micros,
) -> BTreeMap<String, f64> {
    weights(&rule.strategy, &basis.for_day(&rule.basis, day))
}

/// The part of an amount spread evenly over `period` that falls in each day of `window`.
/// An instant (empty period) inside the window counts whole on its day.
///
/// The whole period is split at once (largest remainder, by microseconds), cut at days and at
/// the window's ends: the parts of all days add back to the amount exactly, and a day's part
/// is the same whichever whole-day window asks for it.
pub fn by_day(amount: Money, period: Span, window: Span) -> Vec<(Micros, Money)> {
    if period.is_empty() {
        return if window.contains(period.start) {
            vec![(floor_day(period.start), amount)]
        } else {
            vec![]
        };
    }
    let mut pieces: Vec<Span> = Vec::new();
    let mut day = floor_day(period.start);
    while day < period.end {
        let whole_day = Span::new(day, day + MICROS_PER_DAY);
        let mut cuts = vec![whole_day.start, whole_day.end];
        cuts.extend(
            [window.start, window.end]
                .into_iter()
                .filter(|t| whole_day.contains(*t)),
        );
        cuts.sort_unstable();
        pieces.extend(
            cuts.windows(2)
                .map(|w| Span::new(w[0], w[1]).intersect(&period))
                .filter(|s| !s.is_empty()),
        );
        day += MICROS_PER_DAY;
    }
    let weights: Vec<u64> = pieces.iter().map(|s| s.len() as u64).collect();
    let mut parts: Vec<(Micros, Money)> = Vec::new();
    for (piece, part) in pieces.iter().zip(amount.split(&weights)) {
        if piece.intersect(&window).is_empty() {
            continue;
        }
        let day = floor_day(piece.start);
        match parts.last_mut() {
            Some((last, sum)) if *last == day => *sum += part,
            _ => parts.push((day, part)),
        }
    }
    parts
}

/// (day, team, bucket, rule, source): what identifies a line of the journal.
type EntryKey = (Micros, Option<String>, String, Option<String>, String);

/// Sums entries with the same key, in key order.
pub fn consolidate(entries: Vec<CostEntry>) -> Vec<CostEntry> {
    let mut sums: BTreeMap<EntryKey, Money> = BTreeMap::new();
    for e in entries {
        *sums
            .entry((e.day, e.team, e.bucket, e.rule, e.source))
            .or_default() += e.amount;
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

/// Both sides of the ledger for a window (docs/design.md §4).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Balance {
    /// Billing `effective_cost` in the window (lines prorated over their charge periods).
    pub billed: Money,
    pub manual: Money,
    /// GPU time of nodes without billing, priced by the rate card.
    pub rate_card: Money,
    /// The sum of the window's cost entries.
    pub accounted: Money,
}

/// The relative tolerance of the balance.
pub const BALANCE_TOLERANCE: f64 = 1e-6;

impl Balance {
    pub fn expected(&self) -> Money {
        self.billed + self.manual + self.rate_card
    }

    pub fn difference(&self) -> Money {
        self.accounted - self.expected()
    }

    /// Within the tolerance: a node line's GPU price is a float rate, so its rows' rounded costs
    /// may differ from the line by a few 1e-12 per row.
    pub fn balances(&self) -> bool {
        self.difference().abs().to_f64()
            <= BALANCE_TOLERANCE * self.expected().abs().to_f64().max(1.0)
    }
}

/// The one line `ledger build` and `demo` print for a window: `billed 135.00 + manual 4.80 + rate
/// card 2.40 = accounted 142.20 (balanced)`, or `(DOES NOT BALANCE)`.
impl std::fmt::Display for Balance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "billed {:.2} + manual {:.2} + rate card {:.2} = accounted {:.2} ({})",
            self.billed,
            self.manual,
            self.rate_card,
            self.accounted,
            if self.balances() {
                "balanced"
            } else {
                "DOES NOT BALANCE"
            }
        )
    }
}

#[cfg(test)]
mod tests;
