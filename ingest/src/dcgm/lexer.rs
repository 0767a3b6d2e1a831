//! The byte-level layer: lines out of the reader's buffer, label blocks, metric names, sample
//! values and timestamps. Nothing here allocates on a line it has seen before.

use std::io::BufRead;
use std::ops::ControlFlow;

use crate::error::IngestError;

use super::LineError;

/// Calls `handle` with each line (without its `\n`) until the input ends or `handle` breaks.
/// Lines are handed out of the reader's own buffer: only a line split across two reads is copied.
pub(super) fn for_each_line(
    input: &mut dyn BufRead,
    origin: &str,
    mut handle: impl FnMut(&[u8]) -> Result<ControlFlow<()>, IngestError>,
) -> Result<(), IngestError> {
    let mut split_line = Vec::new();
    loop {
        let chunk = match input.fill_buf() {
            Ok(chunk) => chunk,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(IngestError::Read {
                    origin: origin.to_owned(),
                    source,
                });
            }
        };
        if chunk.is_empty() {
            break;
        }
        let mut start = 0;
        while let Some(offset) = memchr::memchr(b'\n', &chunk[start..]) {
            let line = &chunk[start..start + offset];
            let flow = if split_line.is_empty() {
                handle(line)?
            } else {
                split_line.extend_from_slice(line);
                let flow = handle(&split_line)?;
                split_line.clear();
                flow
            };
            start += offset + 1;
            if flow.is_break() {
                input.consume(start);
                return Ok(());
            }
        }
        split_line.extend_from_slice(&chunk[start..]);
        let read = chunk.len();
        input.consume(read);
    }
    // The last line may lack its line break; whether it breaks does not matter any more.
    if !split_line.is_empty() {
        let _ = handle(&split_line)?;
    }
    Ok(())
}

/// The labels of one block as written.
#[derive(Default)]
pub(super) struct ScannedLabels {
    pub(super) pairs: Vec<(String, String)>,
    /// The block holds a `...` in place of a label.
    pub(super) abbreviated: bool,
}

/// Parses a label block that starts right after `{`: `name="value"` pairs separated by commas
/// (a trailing comma allowed), values with the escapes `\\`, `\"` and `\n`. Returns the labels and
/// the index of the closing `}`.
pub(super) fn scan_labels(block: &[u8]) -> Result<(ScannedLabels, usize), LineError> {
    let unclosed = || LineError::labels("label set is not closed with '}'");
    let mut labels = ScannedLabels::default();
    let mut at = skip_blanks(block, 0);
    loop {
        match block.get(at) {
            None => return Err(unclosed()),
            Some(b'}') => return Ok((labels, at)),
            _ => {}
        }
        let name;
        if block[at..].starts_with(b"...") {
            labels.abbreviated = true;
            name = "...".to_owned();
            at += 3;
        } else {
            let name_len = block[at..]
                .iter()
                .take_while(|b| is_name_byte(**b, false))
                .count();
            if name_len == 0 || block[at].is_ascii_digit() {
                let found = String::from_utf8_lossy(&block[at..at + 1]);
                return Err(LineError::labels(format!(
                    "expected a label name, found '{found}'"
                )));
            }
            name = String::from_utf8_lossy(&block[at..at + name_len]).into_owned();
            at = skip_blanks(block, at + name_len);
            if block.get(at) != Some(&b'=') {
                return Err(LineError::labels(format!(
                    "expected '=' after label name '{name}'"
                )));
            }
            at = skip_blanks(block, at + 1);
            if block.get(at) != Some(&b'"') {
                return Err(LineError::new(&name, "label value is not in double quotes"));
            }
            let (value, after) =
                unescape_value(block, at + 1).map_err(|reason| LineError::new(&name, reason))?;
            labels.pairs.push((name.clone(), value));
            at = after;
        }
        at = skip_blanks(block, at);
        match block.get(at) {
            Some(b',') => at = skip_blanks(block, at + 1),
            Some(b'}') => {}
            None => return Err(unclosed()),
            Some(_) => {
                return Err(LineError::labels(format!(
                    "expected ',' or '}}' after label '{name}'"
                )));
            }
        }
    }
}

/// Reads a quoted label value from `start` (just past the opening quote); returns the value and the
/// index after the closing quote. Unknown escapes are kept as written, as Prometheus does.
fn unescape_value(block: &[u8], start: usize) -> Result<(String, usize), &'static str> {
    let mut value = Vec::new();
    let mut at = start;
    loop {
        let Some(offset) = memchr::memchr2(b'"', b'\\', &block[at..]) else {
            return Err("label value has no closing quote");
        };
        value.extend_from_slice(&block[at..at + offset]);
        at += offset;
        if block[at] == b'"' {
            let value = String::from_utf8(value).map_err(|_| "label value is not valid UTF-8")?;
            return Ok((value, at + 1));
        }
        match block.get(at + 1) {
            Some(b'n') => value.push(b'\n'),
            Some(b'\\') => value.push(b'\\'),
            Some(b'"') => value.push(b'"'),
            Some(&other) => value.extend_from_slice(&[b'\\', other]),
            None => return Err("label value has no closing quote"),
        }
        at += 2;
    }
}

pub(super) fn skip_blanks(bytes: &[u8], mut at: usize) -> usize {
    while matches!(bytes.get(at), Some(b' ' | b'\t')) {
        at += 1;
    }
    at
}

/// Metric names are `[a-zA-Z_:][a-zA-Z0-9_:]*`, label names the same without `:`.
fn is_name_byte(byte: u8, colon_allowed: bool) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || (colon_allowed && byte == b':')
}

/// Length of the metric name that starts `line` (0 when it does not start with one).
pub(super) fn metric_name_len(line: &[u8]) -> usize {
    if line.first().is_none_or(u8::is_ascii_digit) {
        return 0;
    }
    line.iter().take_while(|b| is_name_byte(**b, true)).count()
}

/// The value and the optional timestamp (µs) after the label block; an OpenMetrics exemplar
/// (`# {...} value`) after them is ignored.
pub(super) fn value_and_timestamp(
    rest: &[u8],
    metric: &[u8],
) -> Result<(f64, Option<i64>), LineError> {
    let rest = trim_blanks(rest);
    let value_len = rest
        .iter()
        .position(|b| matches!(b, b' ' | b'\t'))
        .unwrap_or(rest.len());
    let Some(value) = parse_value(&rest[..value_len]) else {
        let field = String::from_utf8_lossy(metric);
        let written = String::from_utf8_lossy(rest);
        let reason = if rest.is_empty() {
            "sample has no value".to_owned()
        } else {
            format!("value '{written}' is not a number")
        };
        return Err(LineError::new(field, reason));
    };
    let rest = trim_blanks(&rest[value_len..]);
    if rest.is_empty() || rest[0] == b'#' {
        return Ok((value, None));
    }
    let timestamp_len = rest
        .iter()
        .position(|b| matches!(b, b' ' | b'\t'))
        .unwrap_or(rest.len());
    let Some(timestamp) = parse_timestamp(&rest[..timestamp_len]) else {
        let written = String::from_utf8_lossy(&rest[..timestamp_len]);
        return Err(LineError::new(
            "timestamp",
            format!("'{written}' is not a timestamp (integer milliseconds since the epoch)"),
        ));
    };

    let rest = trim_blanks(&rest[timestamp_len..]);
    if !rest.is_empty() && rest[0] != b'#' {
        let written = String::from_utf8_lossy(rest);
        return Err(LineError::new(
            String::from_utf8_lossy(metric),
            format!("unexpected text after the timestamp: '{written}'"),
        ));
    }
    Ok((value, Some(timestamp)))
}

pub(super) fn trim_blanks(bytes: &[u8]) -> &[u8] {
    let start = skip_blanks(bytes, 0);
    let end = bytes.len()
        - bytes
            .iter()
            .rev()
            .take_while(|b| matches!(b, b' ' | b'\t'))
            .count();
    &bytes[start.min(end)..end]
}

const POWERS_OF_TEN: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// A sample value. Plain decimals of up to 15 digits (what DCGM prints: integers and `%f`) take an
/// exact fast path: mantissa and power of ten are both exact doubles, so one division is correctly
/// rounded, like the standard parser. Everything else (exponents, `NaN`, `+Inf`, long integers such
/// as the int64 sentinels) goes to the standard parser.
pub(super) fn parse_value(token: &[u8]) -> Option<f64> {
    fast_decimal(token).or_else(|| std::str::from_utf8(token).ok()?.parse().ok())
}

fn fast_decimal(token: &[u8]) -> Option<f64> {
    let (negative, digits) = match token.split_first()? {
        (b'-', rest) => (true, rest),
        (b'+', rest) => (false, rest),
        _ => (false, token),
    };
    let mut mantissa = 0u64;
    let mut digit_count = 0usize;
    let mut fraction_digits = None;
    for &byte in digits {
        match byte {
            b'0'..=b'9' => {
                mantissa = mantissa * 10 + u64::from(byte - b'0');
                digit_count += 1;
                if digit_count >= POWERS_OF_TEN.len() {
                    return None;
                }
                if let Some(count) = &mut fraction_digits {
                    *count += 1;
                }
            }
            b'.' if fraction_digits.is_none() => fraction_digits = Some(0),
            _ => return None,
        }
    }
    if digit_count == 0 {
        return None;
    }
    let magnitude = mantissa as f64 / POWERS_OF_TEN[fraction_digits.unwrap_or(0)];
    Some(if negative { -magnitude } else { magnitude })
}

/// A sample timestamp in µs: integer milliseconds (Prometheus text), or seconds with a fraction
/// (OpenMetrics).
pub(super) fn parse_timestamp(token: &[u8]) -> Option<i64> {
    if let Some(millis) = parse_integer(token) {
        return millis.checked_mul(1000);
    }
    let seconds: f64 = std::str::from_utf8(token).ok()?.parse().ok()?;
    let micros = (seconds * 1e6).round();
    (micros.is_finite() && micros.abs() < i64::MAX as f64).then_some(micros as i64)
}

/// An integer of at most 18 digits, which cannot overflow (millisecond timestamps have 13).
fn parse_integer(token: &[u8]) -> Option<i64> {
    let (negative, digits) = match token.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, token),
    };
    if digits.is_empty() || digits.len() > 18 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let value = digits
        .iter()
        .fold(0i64, |value, &digit| value * 10 + i64::from(digit - b'0'));
    Some(if negative { -value } else { value })
}
