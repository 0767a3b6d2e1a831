//! GPU-hour prices (issue: "Prices"). A node's billing line spreads evenly over its charge
//! period and over the node's GPUs, for the part of the node's cost that belongs to its GPUs:
//! `effective_cost × gpu_cost_share / gpu_count` over `[charge_period_start, charge_period_end)`.
//! Lines of one node add where they overlap, so a price change inside a period is honoured.
//! Nodes with no billing line are priced by the rate card.
//!
//! A price per GPU-hour is a rate, kept as `f64` (`gpu_hours.price_per_hour` too): money only
//! comes out of it once a row's seconds are known, rounded once (`money.rs`).

use crate::gpu_hours::PriceSegment;
use crate::money::Money;
use crate::time::{MICROS_PER_HOUR, Span};

/// The GPU-facing part of one node billing line, and what is left for the shared pools.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LineSplit {
    /// Price per GPU-hour on each of the node's GPUs over the line's period; `None` when the
    /// line has no duration to spread over (then its whole cost is shared).
    pub gpu_price: Option<PriceSegment>,
    /// The node's non-GPU part (`1 − gpu_cost_share`), or all of it when it cannot be spread.
    /// The GPU part rounded to money plus this is the line's cost exactly.
    pub shared: Money,
}

pub fn split_node_line(
    effective_cost: Money,
    period: Span,
    gpu_count: u32,
    gpu_cost_share: f64,
) -> LineSplit {
    if period.is_empty() || gpu_count == 0 {
        return LineSplit {
            gpu_price: None,
            shared: effective_cost,
        };
    }
    let gpu_part = Money::from_f64(effective_cost.to_f64() * gpu_cost_share);
    let hours = period.len() as f64 / MICROS_PER_HOUR as f64;
    LineSplit {
        gpu_price: Some(PriceSegment {
            span: period,
            price_per_hour: gpu_part.to_f64() / gpu_count as f64 / hours,
        }),
        shared: effective_cost - gpu_part,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = MICROS_PER_HOUR;

    #[test]
    fn a_day_of_an_eight_gpu_node() {
        // 240.00 for 24 h of an 8-GPU node whose GPUs are 90 % of its cost:
        // 240 × 0.9 / 8 / 24 = 1.125 per GPU-hour; 240 × 0.1 = 24.00 shared.
        let split = split_node_line(Money::from_f64(240.0), Span::new(0, 24 * H), 8, 0.9);
        assert_eq!(split.gpu_price.unwrap().price_per_hour, 1.125);
        assert_eq!(split.shared, Money::from_f64(24.0));
    }

    #[test]
    fn the_gpu_part_and_the_overhead_add_back_to_the_line() {
        // 96.00 × 0.8 is 76.80000000000001 in floats and 96 − that is 19.19999999999999: as
        // money the GPU part is 76.80 and the overhead exactly 19.20 (1.60 per GPU-hour on 2 GPUs).
        let split = split_node_line(Money::from_f64(96.0), Span::new(0, 24 * H), 2, 0.8);
        assert_eq!(split.shared, "19.2".parse().unwrap());
        assert!((split.gpu_price.unwrap().price_per_hour - 1.6).abs() < 1e-15);
    }

    #[test]
    fn a_line_without_duration_is_shared_whole() {
        let split = split_node_line(Money::from_f64(-5.0), Span::new(H, H), 8, 1.0);
        assert_eq!(
            (split.gpu_price, split.shared),
            (None, Money::from_f64(-5.0))
        );
    }
}
