//! The CSV container: records as the csv crate reads them, with each record's raw bytes kept so
//! that a rejection shows it as written and a quoted `"NULL"` is told from the `NULL` marker.

use std::io::{self, Read};

use crate::error::IngestError;
use crate::record::{ParseContext, Rejection, Sink};

use super::FocusStats;
use super::native::{Native, Translation};
use super::rows::LineWriter;

/// Reads a FOCUS CSV, or with `native` a provider-native bill translated line by line.
pub(super) fn parse_csv(
    input: impl Read,
    ctx: &ParseContext,
    sink: &mut dyn Sink,
    native: Option<Native>,
) -> Result<FocusStats, IngestError> {
    // Byte records in flexible mode: the csv crate's only errors left are I/O errors.
    let csv_error = |error: csv::Error| IngestError::Read {
        origin: ctx.origin.clone(),
        source: error.into(),
    };
    // Flexible: a record with the wrong number of fields is one rejection, not the end of input.
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .from_reader(RecordTape::new(input));
    let headers: Vec<String> = reader
        .byte_headers()
        .map_err(csv_error)?
        .iter()
        .map(|h| String::from_utf8_lossy(h).into_owned())
        .collect();
    if headers.is_empty() {
        let reason = "empty input: expected a FOCUS CSV header or a Parquet file".to_string();
        return Err(IngestError::Format {
            origin: ctx.origin.clone(),
            reason,
        });
    }
    let translation = native
        .map(|native| Translation::new(native, &headers, &ctx.origin))
        .transpose()?;
    let header_count = headers.len();
    let mut lines = match &translation {
        Some(translation) => LineWriter::translated(translation.headers(), ctx)?,
        None => LineWriter::new(headers.clone(), ctx)?,
    };
    let mut record = csv::ByteRecord::new();
    while reader.read_byte_record(&mut record).map_err(csv_error)? {
        let start = record
            .position()
            .expect("csv sets the position of every record read");
        let end = reader.position().byte();
        let (raw, line) = reader.get_ref().record(start, end);
        let raw_text = || String::from_utf8_lossy(raw).into_owned();
        if record.len() != header_count {
            let reason = format!(
                "has {} fields where the header has {header_count}",
                record.len()
            );
            lines.reject(Rejection::new(line, "(record)", reason, &raw_text()), sink)?;
        } else if let Some(bad) = record.iter().position(|f| std::str::from_utf8(f).is_err()) {
            let field = headers[bad].clone();
            lines.reject(
                Rejection::new(line, field, "is not valid UTF-8", &raw_text()),
                sink,
            )?;
        } else {
            let is_null_marker = |field: &[u8]| field.eq_ignore_ascii_case(b"NULL");
            let quoted = if record.iter().any(is_null_marker) {
                quoted_fields(raw)
            } else {
                Vec::new()
            };
            let fields: Vec<Option<&str>> = record
                .iter()
                .enumerate()
                .map(|(i, bytes)| {
                    let text = std::str::from_utf8(bytes).expect("checked above");
                    let null = is_null_marker(bytes) && !quoted.get(i).copied().unwrap_or(false);
                    (!null).then_some(text)
                })
                .collect();
            match &translation {
                None => lines.push(line, &fields, &raw_text, sink)?,
                Some(translation) => match translation.record(&fields) {
                    Ok(translated) => {
                        let fields: Vec<Option<&str>> =
                            translated.fields.iter().map(|f| f.as_deref()).collect();
                        lines.push_labelled(line, &fields, &translated.labels, &raw_text, sink)?;
                    }
                    Err((field, reason)) => {
                        lines.reject(Rejection::new(line, field, reason, &raw_text()), sink)?;
                    }
                },
            }
        }
        reader.get_mut().forget_before(end);
    }
    lines.finish(sink)
}

/// Keeps the bytes the CSV reader has taken since the current record began, so that a rejection
/// shows the record exactly as written and a quoted `"NULL"` (a value) can be told from the
/// unquoted `NULL` marker, which the csv crate reads the same.
struct RecordTape<R> {
    inner: R,
    kept: Vec<u8>,
    /// Input offset of `kept[0]`.
    kept_from: u64,
}

impl<R> RecordTape<R> {
    /// Bytes already handled are dropped in chunks of this size, so the copy is amortised.
    const FORGET_CHUNK: usize = 64 * 1024;

    pub(super) fn new(inner: R) -> Self {
        Self {
            inner,
            kept: Vec::new(),
            kept_from: 0,
        }
    }

    /// The record between `start` and the input offset `end`, without the blank lines and line
    /// ending around it, and its 1-based physical line (csv counts the blank lines it skips
    /// before a record as part of it).
    pub(super) fn record(&self, start: &csv::Position, end: u64) -> (&[u8], u64) {
        let offset = |at: u64| (at - self.kept_from) as usize;
        let bytes = &self.kept[offset(start.byte())..offset(end)];
        let blank = bytes
            .iter()
            .take_while(|b| matches!(b, b'\r' | b'\n'))
            .count();
        let skipped_lines = bytes[..blank].iter().filter(|&&b| b == b'\n').count() as u64;
        let mut record = &bytes[blank..];
        while let [rest @ .., b'\r' | b'\n'] = record {
            record = rest;
        }
        (record, start.line() + skipped_lines)
    }

    fn forget_before(&mut self, offset: u64) {
        let handled = (offset - self.kept_from) as usize;
        if handled >= Self::FORGET_CHUNK {
            self.kept.drain(..handled);
            self.kept_from = offset;
        }
    }
}

impl<R: Read> Read for RecordTape<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let read = self.inner.read(buf)?;
        self.kept.extend_from_slice(&buf[..read]);
        Ok(read)
    }
}

/// For each field of one raw CSV record (RFC 4180, the csv crate's defaults), whether it was
/// quoted.
pub(super) fn quoted_fields(raw: &[u8]) -> Vec<bool> {
    let mut quoted = Vec::new();
    let mut field_start = true;
    let mut in_quotes = false;
    for &byte in raw {
        if field_start {
            field_start = false;
            quoted.push(byte == b'"');
            if byte == b'"' {
                in_quotes = true;
                continue;
            }
        }
        match byte {
            // `""` inside a quoted field toggles twice and stays quoted.
            b'"' if quoted.last() == Some(&true) => in_quotes = !in_quotes,
            b',' if !in_quotes => field_start = true,
            _ => {}
        }
    }
    if field_start {
        quoted.push(false);
    }
    quoted
}
