//! Splits gateway input into JSON records without parsing them, whether it is JSON lines, JSON
//! documents spanning lines (LiteLLM's samples are pretty-printed) or a top-level array.

use std::collections::VecDeque;
use std::io::BufRead;

use crate::error::IngestError;

/// One top-level JSON value of the input and the 1-based line it starts on.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RawRecord {
    pub(super) line: u64,
    pub(super) text: Vec<u8>,
}

impl RawRecord {
    pub(super) fn lossy(&self) -> String {
        String::from_utf8_lossy(&self.text).into_owned()
    }
}

/// How the input holds its records, decided by its first non-blank line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// JSON lines: each line is a record, so a broken line cannot swallow the next ones.
    Lines,
    /// JSON documents that span lines, or a top-level array of records.
    Documents,
}

/// Splits the input into records without parsing them, holding one record at a time.
pub(super) struct JsonRecords<'a> {
    input: &'a mut dyn BufRead,
    origin: &'a str,
    line_no: u64,
    line: Vec<u8>,
    framing: Option<Framing>,
    splitter: DocumentSplitter,
    ready: VecDeque<RawRecord>,
    at_end: bool,
}

impl<'a> JsonRecords<'a> {
    pub(super) fn new(input: &'a mut dyn BufRead, origin: &'a str) -> Self {
        Self {
            input,
            origin,
            line_no: 0,
            line: Vec::new(),
            framing: None,
            splitter: DocumentSplitter::default(),
            ready: VecDeque::new(),
            at_end: false,
        }
    }

    pub(super) fn next_record(&mut self) -> Result<Option<RawRecord>, IngestError> {
        loop {
            if let Some(record) = self.ready.pop_front() {
                return Ok(Some(record));
            }
            if self.at_end {
                return Ok(None);
            }
            self.line.clear();
            let read = self
                .input
                .read_until(b'\n', &mut self.line)
                .map_err(|source| IngestError::Read {
                    origin: self.origin.to_string(),
                    source,
                })?;
            if read == 0 {
                self.at_end = true;
                self.splitter.finish(&mut self.ready);
                continue;
            }
            self.line_no += 1;
            let mut line = self.line.as_slice();
            if self.line_no == 1 {
                line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
            }
            let framing = match self.framing {
                Some(framing) => framing,
                None if line.trim_ascii().is_empty() => continue,
                None => *self
                    .framing
                    .insert(Framing::detect(line, self.line_no, self.origin)?),
            };
            match framing {
                Framing::Lines => {
                    let text = line.trim_ascii();
                    if !text.is_empty() {
                        self.ready.push_back(RawRecord {
                            line: self.line_no,
                            text: text.to_vec(),
                        });
                    }
                }
                Framing::Documents => {
                    for &byte in line {
                        self.splitter.feed(byte, self.line_no, &mut self.ready);
                    }
                    self.splitter.end_line(&mut self.ready);
                }
            }
        }
    }
}

impl Framing {
    fn detect(first_line: &[u8], line_no: u64, origin: &str) -> Result<Framing, IngestError> {
        let text = first_line.trim_ascii();
        match text.first() {
            Some(b'{') if serde_json::from_slice::<serde::de::IgnoredAny>(text).is_ok() => {
                Ok(Framing::Lines)
            }
            Some(b'{' | b'[') => Ok(Framing::Documents),
            _ => {
                let preview: String = String::from_utf8_lossy(text).chars().take(40).collect();
                Err(IngestError::Format {
                    origin: origin.to_string(),
                    reason: format!(
                        "not JSON gateway usage: expected JSON lines, a JSON document or a JSON \
                         array, found '{preview}' at line {line_no}"
                    ),
                })
            }
        }
    }
}

/// Finds where top-level JSON values start and end by tracking brackets and strings, without
/// parsing: a document ends when its brackets close; inside a top-level array each element is a
/// record. Anything else at the top level ends with its line and is rejected as invalid JSON.
#[derive(Debug, Default)]
struct DocumentSplitter {
    current: Option<RawRecord>,
    /// Bracket depth inside the current record.
    depth: usize,
    in_array: bool,
    in_string: bool,
    escaped: bool,
}

impl DocumentSplitter {
    fn feed(&mut self, byte: u8, line: u64, ready: &mut VecDeque<RawRecord>) {
        if self.in_string {
            self.append(byte);
            if self.escaped {
                self.escaped = false;
            } else if byte == b'\\' {
                self.escaped = true;
            } else if byte == b'"' {
                self.in_string = false;
            }
            return;
        }
        if self.current.is_none() {
            match byte {
                b' ' | b'\t' | b'\r' | b'\n' => return,
                b',' if self.in_array => return,
                b']' if self.in_array => {
                    self.in_array = false;
                    return;
                }
                b'[' if !self.in_array => {
                    self.in_array = true;
                    return;
                }
                _ => {
                    self.current = Some(RawRecord {
                        line,
                        text: Vec::new(),
                    });
                }
            }
        } else if self.in_array && self.depth == 0 && matches!(byte, b',' | b']') {
            self.complete(ready);
            self.in_array = byte == b',';
            return;
        }
        self.append(byte);
        match byte {
            b'"' => self.in_string = true,
            b'{' | b'[' => self.depth += 1,
            b'}' | b']' if self.depth > 0 => {
                self.depth -= 1;
                if self.depth == 0 {
                    self.complete(ready);
                }
            }
            _ => {}
        }
    }

    /// A value at the top level that is no object or array ends with its line.
    fn end_line(&mut self, ready: &mut VecDeque<RawRecord>) {
        if !self.in_array && self.depth == 0 && !self.in_string {
            self.complete(ready);
        }
    }

    /// An unterminated record at the end of the input is passed on, to be rejected as invalid.
    fn finish(&mut self, ready: &mut VecDeque<RawRecord>) {
        self.complete(ready);
        *self = Self::default();
    }

    fn append(&mut self, byte: u8) {
        if let Some(record) = &mut self.current {
            record.text.push(byte);
        }
    }

    fn complete(&mut self, ready: &mut VecDeque<RawRecord>) {
        if let Some(record) = self.current.take() {
            ready.push_back(record);
        }
    }
}
