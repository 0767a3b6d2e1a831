//! Scheduler lifecycle events → `scheduler_events`.
//!
//! [`parse`] tells the four inputs apart by their first non-blank line:
//! - canonical JSON lines (`{"ts": …, "event": …}`): `events/canonical.rs`;
//! - Kubernetes objects as JSON, one per line or pretty-printed documents such as
//!   `kubectl get pods -o json` (a `List`): Pods in `events/kubernetes.rs`, Kueue Workloads
//!   in `events/kueue.rs`;
//! - the `kubectl get events` table of Kueue and Job events: `events/kueue.rs`;
//! - Slurm `sacct --parsable2`, with its header or in XDMoD's header-less layout:
//!   `events/slurm.rs`.
//!
//! The ledger builds allocation intervals from `start`/`stop` pairs, so every source keeps to
//! the same rules:
//! - a record's `stop` is emitted only with its `start` (a record that shows only an end cannot
//!   say when the allocation began);
//! - a multi-node Slurm job gives one `start`/`stop` pair per node, `node` set and `pod` null, so
//!   pairs are keyed by (cluster, workload, pod, node);
//! - a `stop` reason starts with its class — `finished`, `failed`, `preempted`, `evicted` — and
//!   keeps the source's own words after `": "` when they say more (`failed: TIMEOUT`,
//!   `failed: OOMKilled`, `evicted: PodsReadyTimeout`);
//! - `gpus` counts devices of one kind: whole GPUs (or time-sliced replicas, which the ledger
//!   turns into shares from the node's replica count), or MIG slices of `mig_profile`;
//! - every event has an identity, `event_id`: the first 16 bytes of SHA-256 (32 hex digits) over
//!   the JSON array `[source, cluster, node, namespace, workload, pod, event, ts, uid]` (`ts` in
//!   microseconds, absent values `null`). `workload` holds the Slurm JobID (with its array task,
//!   `123_4`; job steps are skipped), `node` tells a multi-node job's parts apart, and `uid` is
//!   the source's own id of the object where it has one (`metadata.uid` of a Pod or a Kueue
//!   Workload). The labels, GPUs and reason are not part of it: they describe the event, they do
//!   not name it, and the first delivery keeps them. `resourceVersion` is left out on purpose:
//!   it changes with every status update, so a watch stream or a later export shows the same
//!   start under several versions.
//! - an event seen again in the same input (watch streams, a file concatenated twice) is dropped
//!   and counted in [`Stats::duplicates`]; the pipeline drops events whose identity already
//!   landed from an earlier input the same way, so a re-export, a second collector or a retry
//!   that re-serialized the JSON (other key order, other spacing) lands nothing new.
//!
//! A record is all or nothing: it lands whole or is rejected whole with the field at fault.

mod canonical;
mod kubernetes;
mod kueue;
mod slurm;
#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::io::{self, BufRead, Read};
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Float64Array, Int64Array, ListArray, ListBuilder, StringArray, StringBuilder,
    TimestampMicrosecondArray,
};
use arrow::datatypes::Int32Type;
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use chrono::{DateTime, Utc};
use gpuledger_lake::tables::Table;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::error::IngestError;
use crate::json_records::JsonRecords;
use crate::record::{ParseContext, Rejection, Sink};

/// The most devices one event may count (a whole fleet's GPUs in one job).
const MAX_GPUS: f64 = 1_000_000.0;

/// What an input was recognised as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFormat {
    CanonicalJson,
    /// Kubernetes Pods and Kueue Workloads as JSON.
    KubernetesObjects,
    /// The text table of `kubectl get events`.
    KubectlEvents,
    /// `sacct --parsable2`.
    SlurmSacct,
}

/// Counts of one parse.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// `None` for an empty input.
    pub format: Option<InputFormat>,
    /// Records read: lines, or Kubernetes objects (each item of a `List` counts).
    pub records: u64,
    /// Rows written to `scheduler_events`.
    pub events: u64,
    pub rejected: u64,
    /// Records that hold no scheduler event: Slurm job steps, Pods not started yet, event
    /// reasons without scheduling meaning, Kubernetes objects of other kinds.
    pub skipped: u64,
    /// Events seen again in the same input (the same `event_id`).
    pub duplicates: u64,
}

/// The `event` column's vocabulary: the ledger's, so both read the same names.
pub use gpuledger_ledger::allocation::EventKind;

/// The `source` column: which parser read the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Canonical,
    Kubernetes,
    Kueue,
    Slurm,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Canonical => "canonical",
            Source::Kubernetes => "kubernetes",
            Source::Kueue => "kueue",
            Source::Slurm => "slurm",
        }
    }
}

/// How an allocation ended: the first word of a `stop` reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopClass {
    Finished,
    Failed,
    Preempted,
    Evicted,
}

impl StopClass {
    const ALL: [StopClass; 4] = [
        StopClass::Finished,
        StopClass::Failed,
        StopClass::Preempted,
        StopClass::Evicted,
    ];

    fn as_str(self) -> &'static str {
        match self {
            StopClass::Finished => "finished",
            StopClass::Failed => "failed",
            StopClass::Preempted => "preempted",
            StopClass::Evicted => "evicted",
        }
    }

    /// The reason text: the class, then the source's own words when it has some.
    fn reason(self, detail: Option<&str>) -> String {
        match detail.map(str::trim).filter(|d| !d.is_empty()) {
            Some(detail) => format!("{}: {detail}", self.as_str()),
            None => self.as_str().to_string(),
        }
    }
}

/// A user-written stop reason with its class in lower case (`PREEMPTED` → `preempted`,
/// `Failed: OOM` → `failed: OOM`); other text is kept as written.
fn normalize_stop_reason(text: &str) -> String {
    let (head, rest) = match text.split_once(':') {
        Some((head, rest)) => (head, Some(rest)),
        None => (text, None),
    };
    match StopClass::ALL
        .into_iter()
        .find(|c| c.as_str().eq_ignore_ascii_case(head.trim()))
    {
        Some(class) => class.reason(rest),
        None => text.to_string(),
    }
}

/// The attribution labels every table carries.
#[derive(Debug, Clone, Default, PartialEq)]
struct Attribution {
    team: Option<String>,
    environment: Option<String>,
    workload_type: Option<String>,
    model: Option<String>,
    cost_center: Option<String>,
}

impl Attribution {
    /// Reads a label map (canonical `labels`, Kubernetes `metadata.labels`). Kubernetes label
    /// keys cannot hold `_` by convention, so the dashed spellings are accepted too.
    fn from_labels(labels: Option<&Map<String, Value>>, path: &str) -> Result<Self, Bad> {
        let Some(labels) = labels else {
            return Ok(Self::default());
        };
        let label = |keys: &[&str]| -> Result<Option<String>, Bad> {
            for key in keys {
                if let Some(value) = map_str(labels, key, path)? {
                    return Ok(Some(value.to_string()));
                }
            }
            Ok(None)
        };
        Ok(Self {
            team: label(&["team"])?,
            environment: label(&["environment"])?,
            workload_type: label(&["workload_type", "workload-type"])?,
            model: label(&["model"])?,
            cost_center: label(&["cost_center", "cost-center"])?,
        })
    }
}

/// What a record's events are about: everything but the time, the kind and the reason.
#[derive(Debug, Clone, Default, PartialEq)]
struct Subject {
    cluster: Option<String>,
    node: Option<String>,
    namespace: Option<String>,
    workload: Option<String>,
    pod: Option<String>,
    gpus: Option<f64>,
    gpu_indices: Option<Vec<i32>>,
    gpu_uuids: Option<Vec<String>>,
    gpu_model: Option<String>,
    mig_profile: Option<String>,
    gpu_fraction: Option<f64>,
    queue: Option<String>,
    flavor: Option<String>,
    priority: Option<String>,
    samples: Option<i64>,
    tokens: Option<i64>,
    labels: Attribution,
}

/// One row of `scheduler_events`.
#[derive(Debug, Clone, PartialEq)]
struct Event {
    ts: DateTime<Utc>,
    kind: EventKind,
    reason: Option<String>,
    source: Source,
    subject: Subject,
    /// The source's own id of the object the event is about (Kubernetes `metadata.uid`).
    uid: Option<String>,
}

impl Event {
    fn new(source: Source, subject: &Subject, ts: DateTime<Utc>, kind: EventKind) -> Self {
        Self {
            ts,
            kind,
            reason: None,
            source,
            subject: subject.clone(),
            uid: None,
        }
    }

    fn because(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// The event is about the source's object with this id.
    fn of(mut self, uid: &Option<String>) -> Self {
        self.uid = uid.clone();
        self
    }

    /// The checks every source's events pass: a time that is a date (1970 to 9999) and a device
    /// count that is a whole number of devices a workload can hold.
    fn check(&self) -> Result<(), Bad> {
        crate::time::landable(self.ts).map_err(|reason| Bad::new("ts", reason))?;
        if let Some(gpus) = self.subject.gpus
            && !(gpus.fract() == 0.0 && (0.0..=MAX_GPUS).contains(&gpus))
        {
            return Err(Bad::new(
                "gpus",
                format!("{gpus:?} is not a whole number of GPUs from 0 to {MAX_GPUS}"),
            ));
        }
        Ok(())
    }

    /// What makes two sightings the same event: see the module documentation.
    fn identity(&self) -> u128 {
        let s = &self.subject;
        let key = serde_json::json!([
            self.source.as_str(),
            s.cluster,
            s.node,
            s.namespace,
            s.workload,
            s.pod,
            self.kind.as_str(),
            self.ts.timestamp_micros(),
            self.uid,
        ]);
        let digest = Sha256::digest(key.to_string().as_bytes());
        u128::from_be_bytes(digest[..16].try_into().expect("16 bytes"))
    }
}

/// Why one record cannot land: the field as the input names it, and a reason for the user.
#[derive(Debug, Clone, PartialEq)]
struct Bad {
    field: String,
    reason: String,
}

impl Bad {
    fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// The same problem seen from an enclosing document (`items[3].` + field).
    fn within(self, prefix: &str) -> Self {
        Self {
            field: format!("{prefix}.{}", self.field),
            ..self
        }
    }
}

/// Pushes events to the sink in batches of at most `batch_rows` and keeps the counts.
struct Output<'a> {
    sink: &'a mut dyn Sink,
    batch_rows: usize,
    /// The events of the next batch, with their identities.
    rows: Vec<(u128, Event)>,
    /// Identities of the events emitted so far.
    seen: HashSet<u128>,
    stats: Stats,
}

impl<'a> Output<'a> {
    fn new(sink: &'a mut dyn Sink, ctx: &ParseContext) -> Self {
        Self {
            sink,
            batch_rows: ctx.limits.batch_rows.max(1),
            rows: Vec::new(),
            seen: HashSet::new(),
            stats: Stats::default(),
        }
    }

    /// Lands one record's events, or rejects the record; `raw` is only built for a rejection.
    fn record(
        &mut self,
        line: u64,
        result: Result<Vec<Event>, Bad>,
        raw: impl FnOnce() -> String,
    ) -> Result<(), IngestError> {
        self.stats.records += 1;
        let result = result.and_then(|events| {
            events.iter().try_for_each(Event::check)?;
            Ok(events)
        });
        match result {
            Ok(events) if events.is_empty() => self.stats.skipped += 1,
            Ok(events) => {
                for event in events {
                    self.push(event)?;
                }
            }
            Err(bad) => {
                self.stats.rejected += 1;
                self.sink
                    .reject(Rejection::new(line, bad.field, bad.reason, &raw()))?;
            }
        }
        Ok(())
    }

    fn push(&mut self, event: Event) -> Result<(), IngestError> {
        let id = event.identity();
        if !self.seen.insert(id) {
            self.stats.duplicates += 1;
            return Ok(());
        }
        self.rows.push((id, event));
        self.stats.events += 1;
        if self.rows.len() >= self.batch_rows {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), IngestError> {
        if !self.rows.is_empty() {
            let batch = to_batch(&self.rows)?;
            self.rows.clear();
            self.sink.accept(Table::SchedulerEvents, batch)?;
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Stats, IngestError> {
        self.flush()?;
        Ok(self.stats)
    }
}

fn to_batch(rows_with_ids: &[(u128, Event)]) -> Result<RecordBatch, ArrowError> {
    let rows: Vec<&Event> = rows_with_ids.iter().map(|(_, e)| e).collect();
    let text = |get: fn(&Event) -> Option<&str>| -> ArrayRef {
        Arc::new(rows.iter().map(|e| get(e)).collect::<StringArray>())
    };
    let float = |get: fn(&Subject) -> Option<f64>| -> ArrayRef {
        Arc::new(
            rows.iter()
                .map(|e| get(&e.subject))
                .collect::<Float64Array>(),
        )
    };
    let int = |get: fn(&Subject) -> Option<i64>| -> ArrayRef {
        Arc::new(rows.iter().map(|e| get(&e.subject)).collect::<Int64Array>())
    };
    let ts =
        TimestampMicrosecondArray::from_iter_values(rows.iter().map(|e| e.ts.timestamp_micros()))
            .with_timezone("UTC");
    let gpu_indices = ListArray::from_iter_primitive::<Int32Type, _, _>(rows.iter().map(|e| {
        e.subject
            .gpu_indices
            .as_ref()
            .map(|indices| indices.iter().copied().map(Some))
    }));
    let mut gpu_uuids = ListBuilder::new(StringBuilder::new());
    for event in &rows {
        match &event.subject.gpu_uuids {
            Some(uuids) => {
                for uuid in uuids {
                    gpu_uuids.values().append_value(uuid);
                }
                gpu_uuids.append(true);
            }
            None => gpu_uuids.append_null(),
        }
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(ts),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|e| e.kind.as_str()),
        )),
        text(|e| e.subject.cluster.as_deref()),
        text(|e| e.subject.node.as_deref()),
        text(|e| e.subject.namespace.as_deref()),
        text(|e| e.subject.workload.as_deref()),
        text(|e| e.subject.pod.as_deref()),
        float(|s| s.gpus),
        Arc::new(gpu_indices),
        Arc::new(gpu_uuids.finish()),
        text(|e| e.subject.gpu_model.as_deref()),
        text(|e| e.subject.mig_profile.as_deref()),
        float(|s| s.gpu_fraction),
        text(|e| e.subject.queue.as_deref()),
        text(|e| e.subject.flavor.as_deref()),
        text(|e| e.subject.priority.as_deref()),
        text(|e| e.reason.as_deref()),
        int(|s| s.samples),
        int(|s| s.tokens),
        text(|e| e.subject.labels.team.as_deref()),
        text(|e| e.subject.labels.environment.as_deref()),
        text(|e| e.subject.labels.workload_type.as_deref()),
        text(|e| e.subject.labels.model.as_deref()),
        text(|e| e.subject.labels.cost_center.as_deref()),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|e| e.source.as_str()),
        )),
        Arc::new(StringArray::from_iter_values(
            rows_with_ids.iter().map(|(id, _)| format!("{id:032x}")),
        )),
    ];
    RecordBatch::try_new(Table::SchedulerEvents.schema(), columns)
}

/// Reads scheduler events of any supported format into `scheduler_events`.
pub fn parse(
    input: &mut dyn BufRead,
    ctx: &ParseContext,
    sink: &mut dyn Sink,
) -> Result<Stats, IngestError> {
    let mut lines = Lines {
        input,
        origin: &ctx.origin,
        buf: Vec::new(),
        number: 0,
    };
    let mut out = Output::new(sink, ctx);
    let Some(first) = lines.next_non_blank()? else {
        return out.finish();
    };
    let format_error = |reason: String| IngestError::Format {
        origin: ctx.origin.clone(),
        reason,
    };
    let trimmed = first.text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        parse_json(first, &mut lines, ctx, &mut out)?;
    } else if let Some(table) = kueue::EventsTable::from_first_line(&first.text) {
        out.stats.format = Some(InputFormat::KubectlEvents);
        let table = table.map_err(format_error)?;
        let first_row = if table.has_header {
            lines.next_non_blank()?
        } else {
            Some(first)
        };
        parse_rows(first_row, &mut lines, &mut out, |text| table.row(text, ctx))?;
    } else if first.text.contains('|') {
        out.stats.format = Some(InputFormat::SlurmSacct);
        let (sacct, first_is_header) = slurm::Sacct::from_first_line(&first.text)
            .map_err(|reason| format_error(format!("line {}: {reason}", first.number)))?;
        let first_row = if first_is_header {
            lines.next_non_blank()?
        } else {
            Some(first)
        };
        parse_rows(first_row, &mut lines, &mut out, |text| {
            sacct.record(text, ctx)
        })?;
    } else {
        return Err(format_error(format!(
            "not scheduler events: line {} is neither JSON (canonical events, Kubernetes \
             objects), a `kubectl get events` table, nor `sacct --parsable2` output",
            first.number
        )));
    }
    out.finish()
}

/// One record per line of a text table, from `row` on.
fn parse_rows(
    mut row: Option<Line>,
    lines: &mut Lines,
    out: &mut Output,
    read: impl Fn(&str) -> Result<Vec<Event>, Bad>,
) -> Result<(), IngestError> {
    while let Some(Line { number, text }) = row {
        out.record(number, read(&text), move || text)?;
        row = lines.next_non_blank()?;
    }
    Ok(())
}

/// The two kinds of JSON input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JsonFamily {
    Canonical,
    KubernetesObjects,
}

impl JsonFamily {
    fn of(value: &Value) -> Option<Self> {
        if value.get("kind").is_some() && value.get("apiVersion").is_some() {
            Some(JsonFamily::KubernetesObjects)
        } else if value.get("event").is_some() {
            Some(JsonFamily::Canonical)
        } else {
            None
        }
    }
}

/// JSON lines, pretty-printed documents one after another (`kubectl get pods -o json`, several
/// `-o json` outputs) or an array of records, framed by the toolkit's [`JsonRecords`] from the
/// line the sniffer looked at. The first value decides between canonical events and Kubernetes
/// objects; a record's rejections point at the line where it starts.
fn parse_json(
    first: Line,
    lines: &mut Lines,
    ctx: &ParseContext,
    out: &mut Output,
) -> Result<(), IngestError> {
    let mut first_line = first.text.into_bytes();
    first_line.push(b'\n');
    let mut input = io::Cursor::new(first_line).chain(&mut *lines.input);
    let mut records =
        JsonRecords::new(&mut input, &ctx.origin, "scheduler events").after_lines(first.number - 1);
    let mut family = None;
    while let Some(record) = records.next_record()? {
        // Stray non-UTF-8 bytes are replaced, as in text tables: one bad byte in a job name does
        // not lose the job.
        let text = String::from_utf8_lossy(&record.text);
        match serde_json::from_str::<Value>(&text) {
            Ok(value) => {
                json_value(
                    record.line,
                    value,
                    &|| text.to_string(),
                    &mut family,
                    ctx,
                    out,
                )?;
            }
            Err(e) => {
                let result = Err(Bad::new("json", format!("not valid JSON: {e}")));
                out.record(record.line, result, || text.to_string())?;
            }
        }
    }
    Ok(())
}

fn json_value(
    line: u64,
    value: Value,
    raw: &dyn Fn() -> String,
    family: &mut Option<JsonFamily>,
    ctx: &ParseContext,
    out: &mut Output,
) -> Result<(), IngestError> {
    if family.is_none() {
        *family = JsonFamily::of(&value);
        match *family {
            Some(JsonFamily::Canonical) => out.stats.format = Some(InputFormat::CanonicalJson),
            Some(JsonFamily::KubernetesObjects) => {
                out.stats.format = Some(InputFormat::KubernetesObjects);
            }
            None => {
                return Err(IngestError::Format {
                    origin: ctx.origin.clone(),
                    reason: format!(
                        "not scheduler events: the JSON at line {line} has neither `event` \
                         (canonical events) nor `kind` and `apiVersion` (Kubernetes objects)"
                    ),
                });
            }
        }
    }
    match family {
        Some(JsonFamily::Canonical) => out.record(line, canonical::events(&value, ctx), raw),
        _ => kubernetes_object(line, &value, "", raw, ctx, out),
    }
}

/// A Pod, a Kueue Workload, or a `List` of them; other kinds hold no scheduler event. `path`
/// locates an item inside an enclosing `List` for rejections (`items[3]`), empty at the top.
fn kubernetes_object(
    line: u64,
    object: &Value,
    path: &str,
    raw: &dyn Fn() -> String,
    ctx: &ParseContext,
    out: &mut Output,
) -> Result<(), IngestError> {
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let result = match kind {
        "" => Err(Bad::new("kind", "missing: not a Kubernetes object")),
        _ if kind.ends_with("List") => {
            let items = object.get("items").and_then(Value::as_array);
            for (i, item) in items.into_iter().flatten().enumerate() {
                let item_path = match path {
                    "" => format!("items[{i}]"),
                    _ => format!("{path}.items[{i}]"),
                };
                kubernetes_object(line, item, &item_path, &|| item.to_string(), ctx, out)?;
            }
            return Ok(());
        }
        "Pod" => kubernetes::pod_events(object, ctx),
        "Workload" if api_version.starts_with("kueue.x-k8s.io/") => {
            kueue::workload_events(object, ctx)
        }
        _ => Ok(Vec::new()),
    };
    let result = match path {
        "" => result,
        _ => result.map_err(|bad| bad.within(path)),
    };
    out.record(line, result, raw)
}

/// One line of input, 1-based number and text without its line ending.
struct Line {
    number: u64,
    text: String,
}

/// Line reader that keeps the line number and accepts stray non-UTF-8 bytes (replaced, so that
/// one bad byte in a job name does not lose the job).
struct Lines<'a> {
    input: &'a mut dyn BufRead,
    origin: &'a str,
    buf: Vec<u8>,
    number: u64,
}

impl Lines<'_> {
    fn read_error(&self, source: std::io::Error) -> IngestError {
        IngestError::Read {
            origin: self.origin.to_string(),
            source,
        }
    }

    fn next_non_blank(&mut self) -> Result<Option<Line>, IngestError> {
        loop {
            self.buf.clear();
            let read = self.input.read_until(b'\n', &mut self.buf);
            if read.map_err(|e| self.read_error(e))? == 0 {
                return Ok(None);
            }
            self.number += 1;
            let text = String::from_utf8_lossy(&self.buf);
            let mut text = text.trim_end_matches(['\n', '\r']);
            // A byte-order mark (Windows editors, PowerShell's `Out-File`) is no part of the data.
            if self.number == 1 {
                text = text.strip_prefix('\u{feff}').unwrap_or(text);
            }
            if !text.trim().is_empty() {
                return Ok(Some(Line {
                    number: self.number,
                    text: text.to_string(),
                }));
            }
        }
    }
}

/// A JSON pointer as the user reads a field: `/status/startTime` → `status.startTime`.
fn field_name(pointer: &str) -> String {
    pointer.trim_start_matches('/').replace('/', ".")
}

/// The string at a JSON pointer; absent, `null` and `""` are `None`, another type is an error.
fn json_str<'v>(value: &'v Value, pointer: &str) -> Result<Option<&'v str>, Bad> {
    match value.pointer(pointer) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str()).filter(|s| !s.is_empty())),
        Some(other) => Err(Bad::new(
            field_name(pointer),
            format!("expected a string, found {other}"),
        )),
    }
}

fn json_string(value: &Value, pointer: &str) -> Result<Option<String>, Bad> {
    Ok(json_str(value, pointer)?.map(String::from))
}

/// The object at a JSON pointer (a label map, a resource list).
fn json_map<'v>(value: &'v Value, pointer: &str) -> Result<Option<&'v Map<String, Value>>, Bad> {
    match value.pointer(pointer) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(map)) => Ok(Some(map)),
        Some(other) => Err(Bad::new(
            field_name(pointer),
            format!("expected an object, found {other}"),
        )),
    }
}

fn json_array<'v>(value: &'v Value, pointer: &str) -> Result<&'v [Value], Bad> {
    match value.pointer(pointer) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(other) => Err(Bad::new(
            field_name(pointer),
            format!("expected an array, found {other}"),
        )),
    }
}

fn json_time(
    value: &Value,
    pointer: &str,
    ctx: &ParseContext,
) -> Result<Option<DateTime<Utc>>, Bad> {
    json_str(value, pointer)?
        .map(|text| {
            crate::time::parse(text, ctx.tz).map_err(|reason| Bad::new(field_name(pointer), reason))
        })
        .transpose()
}

/// A string entry of a map whose keys may hold `/` (label keys), named `path.key` in errors.
fn map_str<'m>(map: &'m Map<String, Value>, key: &str, path: &str) -> Result<Option<&'m str>, Bad> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str()).filter(|s| !s.is_empty())),
        Some(other) => Err(Bad::new(
            format!("{path}.{key}"),
            format!("expected a string, found {other}"),
        )),
    }
}
