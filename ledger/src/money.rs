//! Money as exact decimals: a fixed-point count of 1e-12 units in an `i128`, the scale of the
//! lake's `Decimal128(38, 12)` money columns. Sums are exact, so they do not depend on the order
//! they add in; floats only come in where a price meets a duration (rounded once, half-even)
//! and go out as ratios.
//!
//! Where money is split (a pool over teams, an amount over the days of its period), the parts
//! come from the largest-remainder method: each part is its quota rounded down to 1e-12, and the
//! units left over go one each to the parts with the largest remainders (the earlier part on a
//! tie), so the parts add back to the whole exactly.

use std::fmt;
use std::iter::Sum;
use std::ops::{Add, AddAssign, Neg, Sub, SubAssign};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Decimal places of [`Money`]: the lake's `MONEY_SCALE`.
pub const SCALE: u32 = 12;

const UNITS_PER_ONE: i128 = 10i128.pow(SCALE);

/// Bits of the integer weights that float weights are scaled to before a split: the precision
/// of an `f64`, so the proportions are what the floats say.
const WEIGHT_BITS: u32 = 52;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Money(i128);

impl Money {
    pub const ZERO: Money = Money(0);

    /// From a count of 1e-12 units: a `Decimal128(_, 12)` value as stored.
    pub const fn from_units(units: i128) -> Money {
        Money(units)
    }

    /// The count of 1e-12 units.
    pub const fn units(self) -> i128 {
        self.0
    }

    /// The amount a float stands for, rounded half-even to 1e-12: the shortest decimal that
    /// reads back as the same `f64` (what `{}` prints), rounded. So `4.8` is 4.8 exactly, and
    /// `6.4000000000000004` (1.60 × 4 h in floats) is 6.4. NaN is zero; infinities and amounts
    /// beyond ±1.7e26 saturate.
    pub fn from_f64(value: f64) -> Money {
        if value.is_nan() {
            return Money::ZERO;
        }
        if value.is_infinite() {
            return if value > 0.0 {
                Money(i128::MAX)
            } else {
                Money(i128::MIN)
            };
        }
        parse_decimal(&value.to_string()).expect("a finite float prints as a decimal")
    }

    /// For ratios and display only: money itself is never added as floats.
    pub fn to_f64(self) -> f64 {
        let whole = self.0 / UNITS_PER_ONE;
        let fraction = self.0 % UNITS_PER_ONE;
        whole as f64 + fraction as f64 / UNITS_PER_ONE as f64
    }

    pub fn is_zero(self) -> bool {
        self.0 == 0
    }

    pub fn abs(self) -> Money {
        Money(self.0.saturating_abs())
    }

    /// Splits the amount in proportion to integer weights by the largest-remainder method: the
    /// parts (one per weight, zero for a zero weight) add back to the amount exactly. A negative
    /// amount splits as its opposite, negated, so a credit mirrors its charge. All weights zero:
    /// all parts zero except the first, which takes everything.
    pub fn split(self, weights: &[u64]) -> Vec<Money> {
        if weights.is_empty() {
            return Vec::new();
        }
        // Weights that add to more than 64 bits lose their low bits, so that r·w below fits.
        let sum: u128 = weights.iter().map(|w| *w as u128).sum();
        let shift = (128 - sum.leading_zeros()).saturating_sub(64);
        let weights: Vec<u128> = weights.iter().map(|w| (*w as u128) >> shift).collect();
        let total: u128 = weights.iter().sum();
        let negative = self.0 < 0;
        let amount = self.0.unsigned_abs();
        let mut parts: Vec<u128> = Vec::with_capacity(weights.len());
        let mut remainders: Vec<(u128, usize)> = Vec::with_capacity(weights.len());
        // Three divisions by `total` share the one zero check: clearer than three `checked_div`.
        #[allow(clippy::manual_checked_ops)]
        if total == 0 {
            parts.resize(weights.len(), 0);
            parts[0] = amount;
        } else {
            // amount × w / total without overflow: (q·total + r) × w / total = q·w + r·w / total,
            // where q·w ≤ amount and r·w < 2^64 · 2^64.
            let (q, r) = (amount / total, amount % total);
            for (i, &w) in weights.iter().enumerate() {
                parts.push(q * w + r * w / total);
                remainders.push((r * w % total, i));
            }
            let given: u128 = parts.iter().sum();
            // Largest remainder first; the earlier part on a tie.
            remainders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            for &(_, i) in remainders.iter().take((amount - given) as usize) {
                parts[i] += 1;
            }
        }
        parts
            .into_iter()
            .map(|p| {
                let p = p as i128;
                Money(if negative { -p } else { p })
            })
            .collect()
    }

    /// [`Money::split`] in proportion to float weights (direct cost, GPU-hours, usage, declared
    /// weights), scaled to integers first; weights that are not positive get nothing.
    pub fn split_f64(self, weights: &[f64]) -> Vec<Money> {
        let positive = |w: &f64| if *w > 0.0 { *w } else { 0.0 };
        let total: f64 = weights.iter().map(positive).sum();
        let scaled: Vec<u64> = weights
            .iter()
            .map(|w| {
                if total > 0.0 {
                    (positive(w) / total * (1u64 << WEIGHT_BITS) as f64).round() as u64
                } else {
                    0
                }
            })
            .collect();
        self.split(&scaled)
    }
}

/// Parses a plain decimal (`-12.5`, `0.000000000001`, `608`), rounding half-even beyond 12
/// places and saturating beyond the range.
fn parse_decimal(text: &str) -> Result<Money, String> {
    let invalid = || format!("'{text}' is not a decimal amount");
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if (whole.is_empty() && fraction.is_empty())
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !fraction.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(invalid());
    }
    let mut units: i128 = 0;
    let mut saturated = false;
    let kept = fraction.len().min(SCALE as usize);
    let scaled = whole
        .bytes()
        .chain(fraction[..kept].bytes())
        .chain(std::iter::repeat_n(b'0', SCALE as usize - kept));
    for b in scaled {
        match units
            .checked_mul(10)
            .and_then(|u| u.checked_add((b - b'0') as i128))
        {
            Some(u) => units = u,
            None => {
                saturated = true;
                break;
            }
        }
    }
    if saturated {
        units = i128::MAX;
    } else {
        let dropped = &fraction[kept..];
        let round_up = match dropped.bytes().next() {
            Some(b'6'..=b'9') => true,
            Some(b'5') => dropped[1..].bytes().any(|b| b != b'0') || units % 2 == 1,
            _ => false,
        };
        if round_up {
            units = units.saturating_add(1);
        }
    }
    Ok(Money(if negative { -units } else { units }))
}

impl FromStr for Money {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_decimal(s.trim())
    }
}

/// The decimal text with all 12 places, as a `Decimal128(38, 12)` prints: `608.000000000000`.
/// A precision rounds half-even to that many places (`{:.2}`: `118.20`); width and fill apply.
impl fmt::Display for Money {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let places = f.precision().unwrap_or(SCALE as usize).min(SCALE as usize);
        let step = 10u128.pow(SCALE - places as u32);
        let units = self.0.unsigned_abs();
        let (mut kept, dropped) = (units / step, units % step);
        if dropped * 2 > step || (dropped * 2 == step && kept % 2 == 1) {
            kept += 1;
        }
        let one = 10u128.pow(places as u32);
        let digits = if places == 0 {
            format!("{kept}")
        } else {
            format!("{}.{:0places$}", kept / one, kept % one)
        };
        f.pad_integral(self.0 >= 0 || kept == 0, "", &digits)
    }
}

impl Add for Money {
    type Output = Money;
    fn add(self, other: Money) -> Money {
        Money(self.0 + other.0)
    }
}

impl Sub for Money {
    type Output = Money;
    fn sub(self, other: Money) -> Money {
        Money(self.0 - other.0)
    }
}

impl Neg for Money {
    type Output = Money;
    fn neg(self) -> Money {
        Money(-self.0)
    }
}

impl AddAssign for Money {
    fn add_assign(&mut self, other: Money) {
        self.0 += other.0;
    }
}

impl SubAssign for Money {
    fn sub_assign(&mut self, other: Money) {
        self.0 -= other.0;
    }
}

impl Sum for Money {
    fn sum<I: Iterator<Item = Money>>(iter: I) -> Money {
        Money(iter.map(|m| m.0).sum())
    }
}

impl<'a> Sum<&'a Money> for Money {
    fn sum<I: Iterator<Item = &'a Money>>(iter: I) -> Money {
        iter.copied().sum()
    }
}

/// In JSON a decimal string (`"608.000000000000"`): a JSON number would be read back as a float
/// by most clients. Reads a string or a number.
impl Serialize for Money {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Money {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Text {
            Text(String),
            Number(f64),
        }
        match Text::deserialize(deserializer)? {
            Text::Text(s) => s.parse().map_err(serde::de::Error::custom),
            Text::Number(n) => Ok(Money::from_f64(n)),
        }
    }
}

#[cfg(test)]
mod tests;
