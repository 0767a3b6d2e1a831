//! Figures as people read them, one format for the whole report: thousands separators, money in
//! the report's currency with cents, GPU-hours with one decimal, shares as percentages, changes
//! with an arrow. CSV and JSON keep the exact figures; HTML and Markdown print these.

use serde_json::Value;

/// `x` with thousands separators and `places` decimals (at most 6): `7,966.47`. Rounded half away
/// from zero on the decimal the figure stands for (the report rounds figures to 6 decimals, so
/// 44.15 is 44.15 and prints 44.2, never the binary 44.1499… that prints 44.1). No "-0.00": a
/// negative that rounds to zero is zero. Any `f64` prints: the rounding is done on the decimal
/// text, whatever its length (1e300 has 301 digits), and NaN and the infinities print as such.
pub(super) fn grouped(x: f64, places: usize) -> String {
    assert!(places <= 6, "the report's figures have 6 decimals");
    if !x.is_finite() {
        return match x {
            _ if x.is_nan() => "NaN",
            _ if x > 0.0 => "∞",
            _ => "-∞",
        }
        .into();
    }
    // The 6-decimal text, exactly, then rounded at `places` digit by digit.
    let text = format!("{:.6}", x.abs());
    let (whole, fraction) = text.split_once('.').expect("6 decimals");
    let mut digits: Vec<u8> = whole.bytes().chain(fraction.bytes().take(places)).collect();
    if fraction.as_bytes().get(places).is_some_and(|d| *d >= b'5') {
        match digits.iter().rposition(|d| *d != b'9') {
            Some(at) => {
                digits[at] += 1;
                digits[at + 1..].fill(b'0');
            }
            None => {
                digits.fill(b'0');
                digits.insert(0, b'1');
            }
        }
    }
    let (whole, fraction) = digits.split_at(digits.len() - places);
    let mut out = String::new();
    if x < 0.0 && digits.iter().any(|d| *d != b'0') {
        out.push('-');
    }
    for (i, digit) in whole.iter().enumerate() {
        if i > 0 && (whole.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(char::from(*digit));
    }
    if places > 0 {
        out.push('.');
        out.extend(fraction.iter().map(|d| char::from(*d)));
    }
    out
}

/// An amount: `$7,966.47` (other currencies by their code: `7,966.47 EUR`).
pub(super) fn amount(x: f64, currency: &str) -> String {
    let figure = grouped(x, 2);
    match (currency, figure.strip_prefix('-')) {
        ("USD", Some(positive)) => format!("-${positive}"),
        ("USD", None) => format!("${figure}"),
        _ => format!("{figure} {currency}"),
    }
}

/// The amount in whole cents, as it is printed (what printed amounts add up in). Past `i128`
/// (10^36 dollars), the nearest end of its range, and NaN as the largest: no real amount is
/// that large.
pub(super) fn cents(x: f64) -> i128 {
    let saturated = if x < 0.0 { i128::MIN } else { i128::MAX };
    grouped(x, 2)
        .replace([',', '.'], "")
        .parse()
        .unwrap_or(saturated)
}

pub(super) fn gpu_hours(x: f64) -> String {
    grouped(x, 1)
}

/// A share as a percentage with one decimal: `47.4%`.
pub(super) fn percent(share: f64) -> String {
    format!("{}%", grouped(share * 100.0, 1))
}

/// A wait or duration in seconds, in the unit it reads best in: `45 s`, `14.5 min`, `3.2 h`.
pub(super) fn duration(seconds: f64) -> String {
    if seconds < 120.0 {
        format!("{} s", grouped(seconds, 0))
    } else if seconds < 2.0 * 3600.0 {
        format!("{} min", grouped(seconds / 60.0, 1))
    } else {
        format!("{} h", grouped(seconds / 3600.0, 1))
    }
}

/// A change against the week before: `▲ $8.73 (+27.3%)`, `▼ $1.20 (-5.0%)`, `▲ $5.21 (new)`
/// when there was nothing before, `no change`.
pub(super) fn change(change: f64, share: Option<f64>, currency: &str) -> String {
    if cents(change) == 0 {
        return "no change".into();
    }
    let arrow = if change > 0.0 { "▲" } else { "▼" };
    let relative = match share {
        Some(share) => format!("{}{}", if share > 0.0 { "+" } else { "" }, percent(share)),
        None => "new".into(),
    };
    format!("{arrow} {} ({relative})", amount(change.abs(), currency))
}

/// What a figure of the report measures, told by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unit {
    Money,
    GpuHours,
    Share,
    Seconds,
    Plain,
}

impl Unit {
    /// The unit of the figure named `metric` (its last part: `teams.total_cost` is money).
    pub(super) fn of(metric: &str) -> Unit {
        let name = metric.rsplit('.').next().unwrap_or(metric);
        const MONEY: [&str; 11] = [
            "change",
            "budget",
            "budget_deviation",
            "billed",
            "manual",
            "rate_card",
            "expected",
            "accounted",
            "difference",
            "failure_loss",
            "spot_net_savings",
        ];
        if name.contains("cost") || MONEY.contains(&name) {
            Unit::Money
        } else if name.ends_with("gpu_hours") {
            Unit::GpuHours
        } else if name.ends_with("_share") || name == "sm_active" || name == "success_rate" {
            Unit::Share
        } else if name.ends_with("_seconds") {
            Unit::Seconds
        } else {
            Unit::Plain
        }
    }

    pub(super) fn format(self, x: f64, currency: &str) -> String {
        match self {
            Unit::Money => amount(x, currency),
            Unit::GpuHours => gpu_hours(x),
            Unit::Share => percent(x),
            Unit::Seconds => duration(x),
            // Counts print whole; other measures (kWh, W, tokens per second) as they are.
            Unit::Plain if x.fract() == 0.0 => grouped(x, 0),
            Unit::Plain => {
                let text = grouped(x, 6);
                text.trim_end_matches('0').trim_end_matches('.').to_string()
            }
        }
    }

    /// A JSON value of this unit as people read it; text stays text, null is empty.
    pub(super) fn value(self, value: &Value, currency: &str) -> String {
        match value {
            Value::Null => String::new(),
            Value::Number(n) => n
                .as_f64()
                .map_or_else(|| n.to_string(), |x| self.format(x, currency)),
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }
}
