//! The ledger's SQL functions, one module each. Every function documents itself with
//! `#[user_doc]`, so `information_schema.routines` and `information_schema.parameters` describe
//! it to analysts in SQL. The math lives in `gpuledger-ledger`; these modules only adapt it to
//! Arrow columns.
//!
//! - `date_trunc_utc.rs`: DataFusion's `date_trunc`, without a per-row zone conversion in UTC;
//! - `to_char.rs`: DataFusion's `to_char`, which also takes PostgreSQL's template patterns;
//! - `time_weighted_avg.rs`: aggregate, time-weighted average of a sampled gauge;
//! - `interval_overlap_seconds.rs`: seconds two time intervals share;
//! - `idle_class.rs`: the docs/design.md §5 idle class of a stretch of GPU time;
//! - `amortize_share.rs`: one weight's part of a shared amount;
//! - `unit_cost.rs`: cost per unit of output;
//! - `args.rs`: reading scalar arguments column by column.

mod args;

pub mod amortize_share;
pub mod date_trunc_utc;
pub mod idle_class;
pub mod interval_overlap_seconds;
pub mod time_weighted_avg;
pub mod to_char;
pub mod unit_cost;

#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;

use datafusion::logical_expr::{AggregateUDF, ScalarUDF};
use datafusion::prelude::SessionContext;

use amortize_share::AmortizeShare;
use date_trunc_utc::DateTruncUtc;
use idle_class::IdleClassFunc;
use interval_overlap_seconds::IntervalOverlapSeconds;
use time_weighted_avg::TimeWeightedAvg;
use to_char::ToChar;
use unit_cost::UnitCost;

/// Registers every ledger function with `ctx`, and `date_trunc` and `to_char` over DataFusion's
/// own.
pub fn register_all(ctx: &SessionContext) {
    ctx.register_udf(ScalarUDF::new_from_impl(DateTruncUtc::default()));
    ctx.register_udf(ScalarUDF::new_from_impl(ToChar::default()));
    ctx.register_udaf(AggregateUDF::new_from_impl(TimeWeightedAvg::default()));
    ctx.register_udf(ScalarUDF::new_from_impl(IntervalOverlapSeconds::default()));
    ctx.register_udf(ScalarUDF::new_from_impl(IdleClassFunc::default()));
    ctx.register_udf(ScalarUDF::new_from_impl(AmortizeShare::default()));
    ctx.register_udf(ScalarUDF::new_from_impl(UnitCost::default()));
}
