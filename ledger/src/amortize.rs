//! Shared-cost amortization (DESIGN §6): a pool's amount spread over teams by a strategy — the
//! three of the OpenCost specification (`proportional`, `even`, `usage`) plus `fixed` weights.
//! The parts always add up to the amount exactly: the last team takes the rounding remainder.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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
pub fn spread(amount: f64, weights: &BTreeMap<String, f64>) -> Vec<(String, f64)> {
    let positive: Vec<(&String, f64)> = weights
        .iter()
        .filter(|(_, w)| **w > 0.0)
        .map(|(t, w)| (t, *w))
        .collect();
    let total: f64 = positive.iter().map(|(_, w)| w).sum();
    if positive.is_empty() || total <= 0.0 {
        return vec![(UNATTRIBUTED.to_string(), amount)];
    }
    let mut parts: Vec<(String, f64)> = positive
        .iter()
        .map(|(t, w)| ((*t).clone(), amount * w / total))
        .collect();
    let given: f64 = parts[..parts.len() - 1].iter().map(|(_, a)| a).sum();
    parts.last_mut().expect("non-empty").1 = amount - given;
    parts
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

    #[test]
    fn strategies() {
        let direct = basis(&[("a", 300.0), ("b", 100.0)]);
        // 100 in proportion 3:1 → 75 / 25; evenly → 50 / 50.
        assert_eq!(
            spread(100.0, &weights(&Strategy::Proportional, &direct)),
            [("a".into(), 75.0), ("b".into(), 25.0)]
        );
        assert_eq!(
            spread(100.0, &weights(&Strategy::Even, &direct)),
            [("a".into(), 50.0), ("b".into(), 50.0)]
        );
        let fixed = Strategy::Fixed {
            weights: basis(&[("a", 1.0), ("c", 4.0)]),
        };
        assert_eq!(
            spread(100.0, &weights(&fixed, &direct)),
            [("a".into(), 20.0), ("c".into(), 80.0)]
        );
    }

    #[test]
    fn parts_add_up_exactly_and_nothing_is_dropped() {
        let thirds = basis(&[("a", 1.0), ("b", 1.0), ("c", 1.0)]);
        let parts = spread(0.1, &thirds);
        assert_eq!(parts.iter().map(|(_, a)| a).sum::<f64>(), 0.1);
        assert_eq!(spread(7.0, &BTreeMap::new()), [(UNATTRIBUTED.into(), 7.0)]);
        assert_eq!(
            spread(7.0, &basis(&[("a", 0.0)])),
            [(UNATTRIBUTED.into(), 7.0)]
        );
        assert_eq!(share_of(10.0, 1.0, 4.0), Some(2.5));
        assert_eq!(share_of(10.0, 1.0, 0.0), None);
    }
}
