//! Monthly budgets (docs/design.md §8): what a budget watches, and its status at a moment — spend to
//! date, the forecast to month end from the run rate, the share used, its state and the
//! thresholds crossed. Pure arithmetic: the spend comes in from the ledger.
//!
//! - **Forecast**: the month's spend so far, run on at the same rate to the month's end:
//!   `spend × month length / time elapsed` (the spend itself at the month's first instant).
//! - **Thresholds crossed**: every threshold (percent of the amount) the spend has reached.
//! - **State**: `over` once the spend reaches the amount; `warn` once a threshold below 100 %
//!   is crossed or the forecast passes the amount; `ok` otherwise. The state only warns:
//!   nothing here ever stops a workload.

use chrono::{DateTime, Datelike, NaiveDate, TimeZone, Utc};
use serde::{Deserialize, Serialize};

use crate::objects::default_currency;

/// A monthly budget as declared (`kind: budget`). Exactly one of `team`, `namespace`,
/// `cost_center` says whose spend it watches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetSpec {
    #[serde(default)]
    pub team: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub cost_center: Option<String>,
    /// Per calendar month (UTC), > 0.
    pub amount: f64,
    #[serde(default = "default_currency")]
    pub currency: String,
    /// Percent of the amount, ascending; an alert is recorded once per threshold and month.
    #[serde(default = "default_thresholds")]
    pub thresholds: Vec<f64>,
    /// Where alerts are POSTed (http or https); optional.
    #[serde(default)]
    pub webhook: Option<String>,
}

pub const DEFAULT_THRESHOLDS: [f64; 3] = [50.0, 80.0, 100.0];

fn default_thresholds() -> Vec<f64> {
    DEFAULT_THRESHOLDS.to_vec()
}

/// Whose spend a budget watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BudgetTarget {
    Team(String),
    Namespace(String),
    CostCenter(String),
}

impl BudgetSpec {
    /// The declared targets, with their field names: valid specs have exactly one.
    pub fn targets(&self) -> Vec<(&'static str, BudgetTarget)> {
        [
            ("team", self.team.clone().map(BudgetTarget::Team)),
            (
                "namespace",
                self.namespace.clone().map(BudgetTarget::Namespace),
            ),
            (
                "cost_center",
                self.cost_center.clone().map(BudgetTarget::CostCenter),
            ),
        ]
        .into_iter()
        .filter_map(|(field, target)| target.map(|t| (field, t)))
        .collect()
    }

    /// The one target of a valid spec.
    pub fn target(&self) -> Option<BudgetTarget> {
        match self.targets().as_slice() {
            [(_, target)] => Some(target.clone()),
            _ => None,
        }
    }
}

/// A calendar month in UTC, as microsecond bounds `[start, end)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Month {
    /// `YYYY-MM`.
    pub label: String,
    pub start: i64,
    pub end: i64,
}

impl Month {
    /// The month that holds `at`.
    pub fn of(at: DateTime<Utc>) -> Month {
        let first = |year: i32, month: u32| {
            let day = NaiveDate::from_ymd_opt(year, month, 1).expect("the first of a month");
            Utc.from_utc_datetime(&day.and_hms_opt(0, 0, 0).expect("midnight"))
                .timestamp_micros()
        };
        let (year, month) = (at.year(), at.month());
        let (next_year, next_month) = if month == 12 {
            (year + 1, 1)
        } else {
            (year, month + 1)
        };
        Month {
            label: format!("{year:04}-{month:02}"),
            start: first(year, month),
            end: first(next_year, next_month),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BudgetState {
    Ok,
    Warn,
    Over,
}

/// A budget's figures at one moment of a month.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetStatus {
    pub spend_to_date: f64,
    pub forecast: f64,
    pub percent_used: f64,
    pub state: BudgetState,
    pub thresholds_crossed: Vec<f64>,
}

/// The status of a budget of `amount` with `thresholds` that has spent `spend` in `month` up
/// to `at` (microseconds, inside the month).
pub fn status(amount: f64, thresholds: &[f64], month: &Month, at: i64, spend: f64) -> BudgetStatus {
    let elapsed = (at - month.start).clamp(0, month.end - month.start);
    let forecast = if elapsed == 0 {
        spend
    } else {
        spend * (month.end - month.start) as f64 / elapsed as f64
    };
    let percent_used = spend / amount * 100.0;
    let thresholds_crossed: Vec<f64> = thresholds
        .iter()
        .copied()
        .filter(|t| percent_used >= *t)
        .collect();
    let state = if percent_used >= 100.0 {
        BudgetState::Over
    } else if thresholds_crossed.iter().any(|t| *t < 100.0) || forecast > amount {
        BudgetState::Warn
    } else {
        BudgetState::Ok
    };
    BudgetStatus {
        spend_to_date: spend,
        forecast,
        percent_used,
        state,
        thresholds_crossed,
    }
}

#[cfg(test)]
mod tests;
