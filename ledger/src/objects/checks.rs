//! Field checks shared by the specs, each naming the field path and the rule broken, and the
//! RFC 3339 times every spec writes.

use chrono::{DateTime, Utc};

use crate::time::Span;

use super::ValidationError;

pub(super) fn not_empty(path: &str, value: &str) -> Result<(), ValidationError> {
    if value.trim().is_empty() {
        return Err(ValidationError::new(path, "must not be empty"));
    }
    Ok(())
}

/// A part of a `a/b` name: `/` inside it would make two objects' names collide.
pub(super) fn name_part(path: &str, value: &str) -> Result<(), ValidationError> {
    check_name(path, value)?;
    if value.contains('/') {
        return Err(ValidationError::new(
            path,
            format!("must not contain '/' (got '{value}'): it names the object with another field"),
        ));
    }
    Ok(())
}

/// A name a user types on the command line: no blanks around it, no control characters.
pub(super) fn check_name(path: &str, name: &str) -> Result<(), ValidationError> {
    not_empty(path, name)?;
    if name.trim() != name || name.chars().any(char::is_control) {
        return Err(ValidationError::new(
            path,
            format!(
                "must not start or end with blanks or contain control characters (got {name:?})"
            ),
        ));
    }
    Ok(())
}

pub(super) fn at_least_one(path: &str, value: u32) -> Result<(), ValidationError> {
    if value < 1 {
        return Err(ValidationError::new(path, "must be at least 1"));
    }
    Ok(())
}

pub(super) fn non_negative(path: &str, value: f64) -> Result<(), ValidationError> {
    if !(value.is_finite() && value >= 0.0) {
        return Err(ValidationError::new(
            path,
            format!("must be a finite number ≥ 0 (got {value})"),
        ));
    }
    Ok(())
}

pub(super) fn one_of(path: &str, value: &str, allowed: &[&str]) -> Result<(), ValidationError> {
    if !allowed.contains(&value) {
        return Err(ValidationError::new(
            path,
            format!("must be one of {} (got '{value}')", allowed.join(", ")),
        ));
    }
    Ok(())
}

pub(super) fn currency(path: &str, code: &str) -> Result<(), ValidationError> {
    if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(ValidationError::new(
            path,
            format!("must be an ISO 4217 code such as USD (got '{code}')"),
        ));
    }
    Ok(())
}

pub(super) fn period(from: DateTime<Utc>, to: DateTime<Utc>) -> Result<(), ValidationError> {
    if to <= from {
        return Err(ValidationError::new(
            "to",
            format!("must be after from ({})", rfc3339::format(&from)),
        ));
    }
    Ok(())
}

pub(super) fn span(from: DateTime<Utc>, to: DateTime<Utc>) -> Span {
    Span::new(from.timestamp_micros(), to.timestamp_micros())
}

/// Times as RFC 3339 text with an offset; written back in UTC.
pub(super) mod rfc3339 {
    use chrono::{DateTime, SecondsFormat, Utc};
    use serde::{Deserialize, Deserializer, Serializer, de};

    pub fn format(time: &DateTime<Utc>) -> String {
        time.to_rfc3339_opts(SecondsFormat::AutoSi, true)
    }

    pub fn serialize<S: Serializer>(
        time: &DateTime<Utc>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&format(time))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<DateTime<Utc>, D::Error> {
        let text = String::deserialize(deserializer)?;
        DateTime::parse_from_rfc3339(&text)
            .map(|time| time.with_timezone(&Utc))
            .map_err(|error| {
                de::Error::custom(format!(
                    "'{text}' is not an RFC 3339 time such as 2024-09-18T00:00:00Z ({error})"
                ))
            })
    }
}
