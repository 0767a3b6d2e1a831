//! One record read field by field: each field named by its path in the input for rejections,
//! typed with a check (counts, times, labels), and the reason a record cannot land.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde_json::{Map, Value};

/// Why a record cannot land: the field as the input names it, and a reason a user understands.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Invalid {
    pub(super) field: String,
    pub(super) reason: String,
}

impl Invalid {
    pub(super) fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

pub(super) type Checked<T> = Result<T, Invalid>;

/// A JSON object of one record, read field by field; fields are named by their path in the input
/// (`metadata.usage_object.prompt_tokens`) for rejections. An absent object reads as all-null.
pub(super) struct Fields<'a> {
    map: Option<&'a Map<String, Value>>,
    /// Read for a key `map` does not hold: an OTLP span's resource attributes, shared by all the
    /// resource's spans instead of copied into each.
    under: Option<&'a Map<String, Value>>,
    path: String,
}

impl<'a> Fields<'a> {
    pub(super) fn root(map: &'a Map<String, Value>) -> Self {
        Self::nested(Some(map), "")
    }

    pub(super) fn nested(map: Option<&'a Map<String, Value>>, path: &str) -> Self {
        Self {
            map,
            under: None,
            path: path.to_string(),
        }
    }

    /// `map`'s fields over `under`'s: a key in `map` wins, even as `null`.
    pub(super) fn layered(map: &'a Map<String, Value>, under: &'a Map<String, Value>) -> Self {
        Self {
            under: Some(under),
            ..Self::root(map)
        }
    }

    pub(super) fn name(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// The value of `key`; JSON `null` counts as absent.
    pub(super) fn get(&self, key: &str) -> Option<&'a Value> {
        let map = self.map?;
        map.get(key)
            .or_else(|| self.under?.get(key))
            .filter(|value| !value.is_null())
    }

    pub(super) fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub(super) fn required<T>(&self, value: Option<T>, key: &str, what: &str) -> Checked<T> {
        value.ok_or_else(|| Invalid::new(self.name(key), format!("missing {what}")))
    }

    /// The first of `keys` that `read` finds a value for.
    pub(super) fn first<T>(
        &self,
        keys: &[&str],
        read: impl Fn(&Self, &str) -> Checked<Option<T>>,
    ) -> Checked<Option<T>> {
        for key in keys {
            if let Some(value) = read(self, key)? {
                return Ok(Some(value));
            }
        }
        Ok(None)
    }

    pub(super) fn object(&self, key: &str) -> Checked<Fields<'a>> {
        match self.get(key) {
            None => Ok(Fields::nested(None, &self.name(key))),
            Some(Value::Object(map)) => Ok(Fields::nested(Some(map), &self.name(key))),
            Some(other) => Err(self.wrong_type(key, "a JSON object", other)),
        }
    }

    /// A list of tags, also JSON-encoded in a string (a spend-log row's `request_tags`); entries
    /// that are not strings are no tags.
    pub(super) fn embedded_tags(&self, key: &str) -> Checked<Vec<String>> {
        let parsed;
        let values = match self.get(key) {
            None => return Ok(Vec::new()),
            Some(Value::Array(values)) => values,
            Some(Value::String(text)) => {
                parsed = serde_json::from_str::<Value>(text).map_err(|error| {
                    Invalid::new(
                        self.name(key),
                        format!("expected a JSON array, found a string that is not JSON ({error})"),
                    )
                })?;
                match &parsed {
                    Value::Array(values) => values,
                    Value::Null => return Ok(Vec::new()),
                    other => {
                        return Err(self.wrong_type(
                            key,
                            "a JSON array encoded as a string",
                            other,
                        ));
                    }
                }
            }
            Some(other) => return Err(self.wrong_type(key, "a JSON array", other)),
        };
        Ok(values
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect())
    }

    /// An object that may arrive JSON-encoded in a string, as LiteLLM publishes a spend-log
    /// row's `metadata`.
    pub(super) fn embedded_object(
        &self,
        key: &str,
    ) -> Checked<Option<Cow<'a, Map<String, Value>>>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Object(map)) => Ok(Some(Cow::Borrowed(map))),
            Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(map)) => Ok(Some(Cow::Owned(map))),
                Ok(Value::Null) => Ok(None),
                Ok(other) => Err(self.wrong_type(key, "a JSON object encoded as a string", &other)),
                Err(error) => Err(Invalid::new(
                    self.name(key),
                    format!("expected a JSON object, found a string that is not JSON ({error})"),
                )),
            },
            Some(other) => Err(self.wrong_type(key, "a JSON object", other)),
        }
    }

    /// A label; empty strings are no label (LiteLLM writes `""` for an absent team), numbers and
    /// booleans are kept as written.
    pub(super) fn label(&self, key: &str) -> Checked<Option<String>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.trim())
                .filter(|t| !t.is_empty())
                .map(String::from)),
            Some(value @ (Value::Number(_) | Value::Bool(_))) => Ok(Some(value.to_string())),
            Some(other) => Err(self.wrong_type(key, "a string", other)),
        }
    }

    /// A token count: a non-negative whole number, also as a string (OTLP/JSON writes 64-bit
    /// integers as strings) or as a float without fraction (as Python exporters may write it).
    pub(super) fn tokens(&self, key: &str) -> Checked<Option<i64>> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        let count = match value {
            Value::Number(n) => n.as_i64().or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 2f64.powi(53))
                    .map(|f| f as i64)
            }),
            Value::String(text) => text.trim().parse::<i64>().ok(),
            _ => None,
        };
        match count {
            Some(count) if count >= 0 => Ok(Some(count)),
            Some(count) => Err(Invalid::new(
                self.name(key),
                format!("negative token count {count}"),
            )),
            None => Err(Invalid::new(
                self.name(key),
                format!("token count is not a whole number: {}", shown(value)),
            )),
        }
    }

    pub(super) fn number(&self, key: &str) -> Checked<Option<f64>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(other) => Err(self.wrong_type(key, "a number", other)),
        }
    }

    /// A duration in milliseconds: a number from 0 to a day (a request no gateway times out within
    /// a day is no measurement, and no wait is negative).
    pub(super) fn milliseconds(&self, key: &str) -> Checked<Option<f64>> {
        const DAY_MS: f64 = 86_400_000.0;
        match self.number(key)? {
            Some(ms) if !(0.0..=DAY_MS).contains(&ms) => Err(Invalid::new(
                self.name(key),
                format!("{ms} ms is not a duration from 0 to a day ({DAY_MS} ms)"),
            )),
            ms => Ok(ms),
        }
    }

    /// Boolean, or the strings LiteLLM stores: Python's `str(bool | None)`, `"True"`/`"False"`/`"None"`.
    pub(super) fn cache_hit(&self, key: &str) -> Checked<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(hit)) => Ok(Some(*hit)),
            Some(Value::String(text)) => match text.trim().to_ascii_lowercase().as_str() {
                "true" => Ok(Some(true)),
                "false" => Ok(Some(false)),
                "none" | "null" | "" => Ok(None),
                _ => Err(Invalid::new(
                    self.name(key),
                    format!("expected true, false or none, found '{text}'"),
                )),
            },
            Some(other) => Err(self.wrong_type(key, "a boolean", other)),
        }
    }

    /// A request time: 1970 to 9999, like every time the lake keeps (a date it can partition by).
    pub(super) fn time(&self, key: &str, tz: Tz) -> Checked<Option<DateTime<Utc>>> {
        self.get(key)
            .map(|value| {
                parse_time(value, tz)
                    .and_then(crate::time::landable)
                    .map_err(|reason| Invalid::new(self.name(key), reason))
            })
            .transpose()
    }

    /// Epoch nanoseconds, as OTLP writes span times (a string in proto3 JSON, or a number).
    pub(super) fn unix_nanos(&self, key: &str) -> Checked<Option<DateTime<Utc>>> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        let nanos = match value {
            Value::Number(n) => n.as_i64(),
            Value::String(text) => text.trim().parse::<i64>().ok(),
            _ => None,
        };
        match nanos {
            Some(nanos) if nanos >= 0 => Ok(Some(DateTime::from_timestamp_nanos(nanos))),
            Some(nanos) => Err(Invalid::new(
                self.name(key),
                format!("{nanos} ns since the epoch is before 1970-01-01"),
            )),
            None => Err(Invalid::new(
                self.name(key),
                format!("expected epoch nanoseconds, found {}", shown(value)),
            )),
        }
    }

    fn wrong_type(&self, key: &str, expected: &str, found: &Value) -> Invalid {
        Invalid::new(
            self.name(key),
            format!("expected {expected}, found {}", kind(found)),
        )
    }
}

/// A time as gateways write it: RFC 3339; a naive date-time, read in `tz` (LiteLLM writes
/// `2025-01-24 09:20:46.847371`); or epoch seconds (StandardLoggingPayload times may be floats).
fn parse_time(value: &Value, tz: Tz) -> Result<DateTime<Utc>, String> {
    match value {
        Value::Number(n) => {
            // Epoch milliseconds or nanoseconds would land tens of millennia ahead: refuse them.
            let Some(seconds) = n.as_f64().filter(|seconds| seconds.abs() < 1e11) else {
                return Err(format!("epoch time {n} is not in seconds"));
            };
            DateTime::from_timestamp_micros((seconds * 1e6).round() as i64)
                .ok_or_else(|| format!("epoch time {n} is out of range"))
        }
        Value::String(text) => crate::time::parse(text.trim(), tz),
        other => Err(format!("expected a timestamp, found {}", kind(other))),
    }
}

pub(super) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A scalar as written; containers by their kind only (they may be large).
fn shown(value: &Value) -> String {
    match value {
        Value::Array(_) | Value::Object(_) => kind(value).to_string(),
        scalar => scalar.to_string(),
    }
}
