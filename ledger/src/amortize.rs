//! Shared-cost amortization (docs/design.md §6): a pool's amount spread over teams by a strategy — the
//! three of the OpenCost specification (`proportional`, `even`, `usage`) plus `fixed` weights.
//! The parts always add up to the amount exactly: largest remainder at 1e-12 (`money.rs`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::money::Money;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "strategy", rename_all = "snake_case")]
pub enum Strategy {
    /// In proportion to each team's direct cost (or GPU-hours, per the rule's basis).
    Proportional,
    /// The same amount for every team present.
    Even,
    /// Declared weights per team.
    Fixed { weights: BTreeMap<String, f64> },
    /// In proportion to a named usage measure (requests, bytes, …) supplied per team.
    Usage,
}

/// The team that pays what cannot be attributed to anyone.
pub const UNATTRIBUTED: &str = "unattributed";

/// Spreads `amount` in proportion to `weights` (teams with zero or negative weight get nothing).
/// With no positive weight at all, the amount goes to [`UNATTRIBUTED`]: never dropped.
pub fn spread(amount: Money, weights: &BTreeMap<String, f64>) -> Vec<(String, Money)> {
    let (teams, positive): (Vec<String>, Vec<f64>) = payers(weights).into_iter().unzip();
    teams.into_iter().zip(amount.split_f64(&positive)).collect()
}

/// Who [`spread`] gives a part to, with their weights: the teams of positive weight, else
/// [`UNATTRIBUTED`] alone.
pub fn payers(weights: &BTreeMap<String, f64>) -> Vec<(String, f64)> {
    let positive: Vec<(String, f64)> = weights
        .iter()
        .filter(|(_, w)| **w > 0.0)
        .map(|(t, w)| (t.clone(), *w))
        .collect();
    if positive.is_empty() {
        return vec![(UNATTRIBUTED.to_string(), 1.0)];
    }
    positive
}

/// The weights a strategy uses, given each team's basis (direct cost, GPU-hours or usage).
pub fn weights(strategy: &Strategy, basis: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    match strategy {
        Strategy::Proportional | Strategy::Usage => basis.clone(),
        Strategy::Even => basis.keys().map(|t| (t.clone(), 1.0)).collect(),
        Strategy::Fixed { weights } => weights.clone(),
    }
}

/// Share of `amount` for one weight out of a total: the `amortize_share` SQL function.
pub fn share_of(amount: f64, weight: f64, total_weight: f64) -> Option<f64> {
    (total_weight > 0.0).then(|| amount * weight / total_weight)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basis(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(t, w)| (t.to_string(), *w)).collect()
    }

    fn m(text: &str) -> Money {
        text.parse().unwrap()
    }

    #[test]
    fn strategies() {
        let direct = basis(&[("a", 300.0), ("b", 100.0)]);
        // 100 in proportion 3:1 → 75 / 25; evenly → 50 / 50.
        assert_eq!(
            spread(m("100"), &weights(&Strategy::Proportional, &direct)),
            [("a".into(), m("75")), ("b".into(), m("25"))]
        );
        assert_eq!(
            spread(m("100"), &weights(&Strategy::Even, &direct)),
            [("a".into(), m("50")), ("b".into(), m("50"))]
        );
        let fixed = Strategy::Fixed {
            weights: basis(&[("a", 1.0), ("c", 4.0)]),
        };
        assert_eq!(
            spread(m("100"), &weights(&fixed, &direct)),
            [("a".into(), m("20")), ("c".into(), m("80"))]
        );
    }

    #[test]
    fn parts_add_up_exactly_and_nothing_is_dropped() {
        // 100.00 over three teams: 33.333333333334 + 33.333333333333 × 2, the leftover 1e-12
        // on the first (all remainders tie).
        let thirds = basis(&[("a", 1.0), ("b", 1.0), ("c", 1.0)]);
        let parts = spread(m("100"), &thirds);
        assert_eq!(
            parts,
            [
                ("a".into(), m("33.333333333334")),
                ("b".into(), m("33.333333333333")),
                ("c".into(), m("33.333333333333"))
            ]
        );
        assert_eq!(parts.iter().map(|(_, a)| *a).sum::<Money>(), m("100"));
        assert_eq!(
            spread(m("7"), &BTreeMap::new()),
            [(UNATTRIBUTED.into(), m("7"))]
        );
        assert_eq!(
            spread(m("7"), &basis(&[("a", 0.0), ("b", 2.0)])),
            [("b".into(), m("7"))]
        );
        assert_eq!(
            spread(m("7"), &basis(&[("a", 0.0)])),
            [(UNATTRIBUTED.into(), m("7"))]
        );
        assert_eq!(share_of(10.0, 1.0, 4.0), Some(2.5));
        assert_eq!(share_of(10.0, 1.0, 0.0), None);
    }
}
