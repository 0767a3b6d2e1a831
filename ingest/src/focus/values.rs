//! One value after its column's rule: date-times, exact numbers, allowed values, currencies and
//! key-value objects, or the reason it broke its format.

use std::borrow::Cow;

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Utc};
use gpuledger_lake::tables::{MONEY_PRECISION, MONEY_SCALE};
use rust_decimal::{Decimal, RoundingStrategy};
use serde_json::Value as Json;

use super::columns::Rule::{self, Allowed, Currency, KeyValue, Number, Text, Time};

/// A FOCUS value after its rule.
#[derive(Debug, Clone)]
pub(super) enum Typed<'a> {
    Text(Cow<'a, str>),
    /// Microseconds since the epoch, UTC.
    Time(i64),
    /// Units of 10⁻¹² (the lake's money scale).
    Number(i128),
}

pub(super) enum Outcome<'a> {
    Value(Typed<'a>),
    /// Outside the column's allowed values: kept as written.
    Unlisted(Typed<'a>),
    Invalid(String),
}

pub(super) fn convert<'a>(rule: Rule, text: &'a str, date_format: Option<&str>) -> Outcome<'a> {
    match rule {
        Text => Outcome::Value(Typed::Text(Cow::Borrowed(text))),
        Allowed(values) => match values.iter().find(|v| v.eq_ignore_ascii_case(text.trim())) {
            Some(canonical) => Outcome::Value(Typed::Text(Cow::Borrowed(canonical))),
            None => Outcome::Unlisted(Typed::Text(Cow::Borrowed(text))),
        },
        KeyValue => match serde_json::from_str::<Json>(text) {
            Ok(object @ Json::Object(_)) => {
                Outcome::Value(Typed::Text(Cow::Owned(object.to_string())))
            }
            _ => Outcome::Invalid(format!(
                "'{text}' is not a JSON object (FOCUS Key-Value Format)"
            )),
        },
        Time => parse_datetime(text, date_format).map_or_else(Outcome::Invalid, |micros| {
            Outcome::Value(Typed::Time(micros))
        }),
        Number => parse_number(text).map_or_else(Outcome::Invalid, |units| {
            Outcome::Value(Typed::Number(units))
        }),
        Currency => {
            let code = text.trim();
            if code.len() == 3 && code.bytes().all(|b| b.is_ascii_alphabetic()) {
                Outcome::Value(Typed::Text(Cow::Owned(code.to_ascii_uppercase())))
            } else {
                Outcome::Invalid(format!(
                    "'{text}' is not a currency code (ISO 4217: three letters, e.g. USD)"
                ))
            }
        }
    }
}

pub(super) fn micros_text(micros: i64) -> String {
    DateTime::from_timestamp_micros(micros).map_or_else(
        || micros.to_string(),
        |t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
    )
}

/// A FOCUS Date/Time: ISO 8601 with `T` or a space, with or without fraction and offset (none
/// means UTC), or a bare date (midnight UTC); or, only when the caller names it, another format.
pub(super) fn parse_datetime(text: &str, date_format: Option<&str>) -> Result<i64, String> {
    const ISO_WITHOUT_OFFSET: [&str; 3] =
        ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%d"];
    let trimmed = text.trim();
    let parsed = DateTime::parse_from_rfc3339(trimmed)
        .map(|t| t.to_utc())
        .ok()
        .or_else(|| {
            ISO_WITHOUT_OFFSET
                .iter()
                .find_map(|format| in_format(trimmed, format))
        })
        .or_else(|| date_format.and_then(|format| in_format(trimmed, format)));
    if let Some(time) = parsed
        && !crate::time::is_landable(time.timestamp_micros())
    {
        return Err(format!("'{text}' is outside 1970-01-01 to 9999-12-31"));
    }
    parsed
        .map(|t| t.timestamp_micros())
        .ok_or_else(|| match date_format {
            None => {
                format!("'{text}' is not an ISO 8601 date-time; pass a date format to accept it")
            }
            Some(format) => {
                format!(
                    "'{text}' is neither an ISO 8601 date-time nor in the date format '{format}'"
                )
            }
        })
}

/// `text` read with a chrono format: with an offset, else as UTC, else as a date at midnight UTC.
fn in_format(text: &str, format: &str) -> Option<DateTime<Utc>> {
    if let Ok(zoned) = DateTime::parse_from_str(text, format) {
        return Some(zoned.to_utc());
    }
    let naive = NaiveDateTime::parse_from_str(text, format)
        .ok()
        .or_else(|| {
            NaiveDate::parse_from_str(text, format)
                .ok()
                .map(|d| d.and_time(NaiveTime::MIN))
        })?;
    Some(naive.and_utc())
}

/// A FOCUS Numeric Format value (surrounding spaces tolerated), read exactly with rust_decimal —
/// never through f64 — and rounded half to even to the lake's 12 decimal places.
pub(super) fn parse_number(text: &str) -> Result<i128, String> {
    let trimmed = text.trim();
    if !is_numeric_format(trimmed) {
        return Err(format!(
            "'{text}' is not a FOCUS number (Numeric Format: digits with an optional leading '-', \
             one decimal point and E-notation; no currency symbols, thousands separators or other \
             characters)"
        ));
    }
    let out_of_range = || {
        format!(
            "'{text}' does not fit a decimal of {MONEY_PRECISION} digits, {MONEY_SCALE} after the point"
        )
    };
    let exact = if trimmed.contains(['e', 'E']) {
        Decimal::from_scientific(trimmed)
    } else {
        Decimal::from_str_exact(trimmed)
    }
    .map_err(|_| out_of_range())?;
    let scale = MONEY_SCALE as u32;
    let rounded = exact.round_dp_with_strategy(scale, RoundingStrategy::MidpointNearestEven);
    rounded
        .mantissa()
        .checked_mul(10i128.pow(scale - rounded.scale()))
        .filter(|units| units.unsigned_abs() < 10u128.pow(u32::from(MONEY_PRECISION)))
        .ok_or_else(out_of_range)
}

/// `-?digits(.digits)?([eE][+-]?digits)?`: the FOCUS grammar, with the `+` exponent sign that
/// common float printers write.
fn is_numeric_format(text: &str) -> bool {
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    let (mantissa, exponent) = match text.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, Some(exponent)),
        None => (text, None),
    };
    let unsigned = mantissa.strip_prefix('-').unwrap_or(mantissa);
    let (integer, fraction) = match unsigned.split_once('.') {
        Some((integer, fraction)) => (integer, Some(fraction)),
        None => (unsigned, None),
    };
    digits(integer)
        && fraction.is_none_or(digits)
        && exponent.is_none_or(|e| digits(e.strip_prefix(['-', '+']).unwrap_or(e)))
}
