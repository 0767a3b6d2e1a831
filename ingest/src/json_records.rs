//! The toolkit's JSON framer: splits an input into JSON records without parsing them, whether it
//! is JSON lines, JSON documents spanning lines (LiteLLM's samples and `kubectl -o json` are
//! pretty-printed) or a top-level array, holding one record at a time. Gateway usage and
//! scheduler events both read their JSON through it.

use std::collections::VecDeque;
use std::io::BufRead;

use crate::error::IngestError;

/// One top-level JSON value of the input and the 1-based line it starts on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawRecord {
    pub(crate) line: u64,
    pub(crate) text: Vec<u8>,
}

impl RawRecord {
    pub(crate) fn lossy(&self) -> String {
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
pub(crate) struct JsonRecords<'a> {
    input: &'a mut dyn BufRead,
    origin: &'a str,
    /// What the input should hold, for the error when it is not JSON at all.
    expected: &'a str,
    line_no: u64,
    line: Vec<u8>,
    framing: Option<Framing>,
    splitter: DocumentSplitter,
    ready: VecDeque<RawRecord>,
    at_end: bool,
}

impl<'a> JsonRecords<'a> {
    /// `expected` names what the input should hold (`JSON gateway usage`), for the error when it
    /// is not JSON at all.
    pub(crate) fn new(input: &'a mut dyn BufRead, origin: &'a str, expected: &'a str) -> Self {
        Self {
            input,
            origin,
            expected,
            line_no: 0,
            line: Vec::new(),
            framing: None,
            splitter: DocumentSplitter::default(),
            ready: VecDeque::new(),
            at_end: false,
        }
    }

    /// For an input whose first `lines` lines were read elsewhere (a format sniffer hands back
    /// the line it looked at): record lines keep counting from there.
    pub(crate) fn after_lines(mut self, lines: u64) -> Self {
        self.line_no = lines;
        self
    }

    pub(crate) fn next_record(&mut self) -> Result<Option<RawRecord>, IngestError> {
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
                None => *self.framing.insert(Framing::detect(
                    line,
                    self.line_no,
                    self.origin,
                    self.expected,
                )?),
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
    fn detect(
        first_line: &[u8],
        line_no: u64,
        origin: &str,
        expected: &str,
    ) -> Result<Framing, IngestError> {
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
                        "not {expected}: expected JSON lines, a JSON document or a JSON array, \
                         found '{preview}' at line {line_no}"
                    ),
                })
            }
        }
    }
}

/// Finds where top-level JSON values start and end by tracking brackets and strings, without
/// parsing: a document ends when its brackets close; inside a top-level array each element is a
/// record. Anything else at the top level ends with its line and is rejected as invalid JSON.
/// JSON strings cannot hold a raw line break, so a line that ends inside a string (a truncated
/// record) ends that record there: one broken record never swallows the records after it.
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
        if self.in_string {
            self.complete(ready);
            (self.depth, self.in_string, self.escaped) = (0, false, false);
        } else if !self.in_array && self.depth == 0 {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn records(text: &str, after: u64) -> Result<Vec<(u64, String)>, IngestError> {
        let mut input = text.as_bytes();
        let mut records =
            JsonRecords::new(&mut input, "in.json", "test records").after_lines(after);
        let mut out = Vec::new();
        while let Some(record) = records.next_record()? {
            out.push((record.line, record.lossy()));
        }
        Ok(out)
    }

    fn owned(expected: &[(u64, &str)]) -> Vec<(u64, String)> {
        expected
            .iter()
            .map(|(l, t)| (*l, (*t).to_string()))
            .collect()
    }

    #[test]
    fn json_lines_are_one_record_per_line_even_when_broken() {
        let text = "\n{\"a\":1}\r\nnot json\n\n{\"b\":\"}\"}\n";
        assert_eq!(
            records(text, 0).unwrap(),
            owned(&[(2, "{\"a\":1}"), (3, "not json"), (5, "{\"b\":\"}\"}")])
        );
    }

    #[test]
    fn documents_and_arrays_split_at_their_top_level_values() {
        // Brackets and quotes inside strings do not end a record; an escaped quote stays inside.
        let documents = "{\n  \"a\": \"[{\\\"\"\n}\n{\"b\": [1,\n 2]}\n";
        assert_eq!(
            records(documents, 0).unwrap(),
            owned(&[(1, "{\n  \"a\": \"[{\\\"\"\n}"), (4, "{\"b\": [1,\n 2]}")])
        );
        let array = "[\n  {\"a\": 1},\n  {\"b\": [2, 3]}\n]\n";
        assert_eq!(
            records(array, 0).unwrap(),
            owned(&[(2, "{\"a\": 1}"), (3, "{\"b\": [2, 3]}")])
        );
    }

    #[test]
    fn a_broken_document_is_one_record_and_the_next_still_splits() {
        let text = "{\n \"a\": ,\n}\n{\"b\": 2}\n";
        assert_eq!(
            records(text, 0).unwrap(),
            owned(&[(1, "{\n \"a\": ,\n}"), (4, "{\"b\": 2}")])
        );
        // An unterminated record at the end is handed on whole, to be rejected by its reader.
        assert_eq!(
            records("{\n\"a\": [1,\n", 0).unwrap(),
            owned(&[(1, "{\n\"a\": [1,\n")])
        );
    }

    #[test]
    fn a_line_that_ends_inside_a_string_ends_its_record() {
        // A truncated first line (no valid JSON, so documents are split) and a truncated
        // document in the middle: each is one record, and what follows still splits.
        let text = "{\"ts\": \"2025-\n{\"a\": 1}\n{\n  \"b\": \"cut\n}\n{\"c\": [3]}\n";
        assert_eq!(
            records(text, 0).unwrap(),
            owned(&[
                (1, "{\"ts\": \"2025-\n"),
                (2, "{\"a\": 1}"),
                (3, "{\n  \"b\": \"cut\n"),
                (5, "}\n"),
                (6, "{\"c\": [3]}"),
            ])
        );
    }

    #[test]
    fn line_numbers_continue_after_lines_read_elsewhere() {
        assert_eq!(
            records("{\"a\":1}\n{\"b\":2}\n", 7).unwrap(),
            owned(&[(8, "{\"a\":1}"), (9, "{\"b\":2}")])
        );
    }

    #[test]
    fn input_that_is_not_json_names_what_was_expected() {
        let error = records("\u{feff}hello\n", 0).unwrap_err();
        assert_eq!(
            error.to_string(),
            "in.json: not test records: expected JSON lines, a JSON document or a JSON array, \
             found 'hello' at line 1"
        );
    }
}
