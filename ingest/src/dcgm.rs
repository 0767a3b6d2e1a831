//! dcgm-exporter scrapes (Prometheus text exposition 0.0.4, or OpenMetrics from another agent) →
//! the wide `gpu_samples` table (one row per timestamp and series, one column per known DCGM
//! field) and the long `gpu_samples_extra` table (every other metric, never dropped).
//!
//! This is the hottest parser of the product (a fleet scrape every 15–30 s), so it works on bytes
//! and allocates only when it meets something new. Within a scrape every metric of one GPU repeats
//! the very same `{...}` label text, so that text is the cache key: a label set is parsed and mapped
//! to its identity columns the first time it is seen. Afterwards a line costs a search for `}` from
//! the end, one comparison with the label text predicted from the previous metric's order (a hash
//! lookup when the guess is wrong) and a number parse: about 7 million samples per second on one
//! core (`benches/dcgm_ingest.rs`).
//!
//! Quirks of real dumps handled here (FORMATS.md §2): `Hostname` and `hostname`, the old-namespace
//! label names, DCGM "blank" sentinels printed as readings (dropped and counted), non-numeric values
//! such as `ERROR - FAILED TO CONVERT TO STRING` (rejected, the rest of the scrape lands), and label
//! sets abbreviated as `{gpu="0",...}` in documentation excerpts.
//!
//! Input order does not matter. Every cell of one series at one time lands in the same wide row
//! whatever order the lines come in: scrape by scrape (one exposition after another), family by
//! family (each metric once with every scrape's samples, as multi-scrape dumps list them), any
//! interleaving, and remote-write's series-by-series samples. The rows held in memory are found by
//! (series, time) in a hash map, and leave sorted by the table's sort order (cluster, node, GPU
//! UUID, MIG instance, time, then the other identity columns), so the same samples give the same
//! batches in every order. Rows are held until about `ParseContext::batch_rows` of them are open:
//! when a new time starts and the scrape that follows would not fit (a scrape is predicted to be as
//! large as the last one), or at twice that many rows whatever the time, the held rows are emitted.
//! Scrape-grouped input therefore lands each (series, time) once unless one scrape alone exceeds
//! the batch size; in other orders a (series, time) whose cells straddle two emissions lands as two
//! partial rows (the ledger merges rows per series and time when it reads them, and compaction will
//! merge them on disk). With the default batch size a typical file or HTTP body lands each
//! (series, time) once. A second value of one metric for one series and time is rejected as a
//! duplicate while the first is held (and, in `gpu_samples_extra`, also when the first was the
//! series' latest), in any order.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::collections::hash_map::Entry;
use std::hash::BuildHasher;
use std::io::BufRead;
use std::ops::ControlFlow;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Float64Array, Int32Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use arrow::error::ArrowError;
use gpuledger_lake::tables::{DCGM_FIELDS, GPU_IDENTITY_COLUMNS, Table};

use crate::error::IngestError;
use crate::record::{ParseContext, Rejection, Sink};

#[cfg(test)]
pub(crate) mod tests;

/// What one input yielded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DcgmStats {
    /// Lines read, comments and blank lines included.
    pub lines: u64,
    /// Sample values that landed (in either table).
    pub samples: u64,
    pub rows_wide: u64,
    pub rows_extra: u64,
    /// DCGM blank values (no data, not supported, …) and remote-write staleness markers: not
    /// readings, so not landed. A NaN written as a value is no blank: it is rejected.
    pub sentinels_dropped: u64,
    pub rejected: u64,
    /// Sample lines without a timestamp, read as taken at `ParseContext::at`.
    pub untimestamped: u64,
}

/// Parses one dcgm-exporter text input and streams its rows to `sink`: `gpu_samples` batches of at
/// most `ctx.batch_rows` rows as the held rows fill (see the module doc), `gpu_samples_extra`
/// batches as they fill.
pub fn parse(
    input: &mut dyn BufRead,
    ctx: &ParseContext,
    sink: &mut dyn Sink,
) -> Result<DcgmStats, IngestError> {
    let mut parser = Parser::new(ctx);
    for_each_line(input, &ctx.origin, |line| parser.line(line, sink))?;
    parser.finish(sink)
}

/// Samples that arrive already split into metric name, labels, values and times (Prometheus
/// remote-write) land through the same series mapping and wide rows as text lines, in any order.
pub struct SampleFeed<'c> {
    parser: Parser<'c>,
}

impl<'c> SampleFeed<'c> {
    pub fn new(ctx: &'c ParseContext) -> Self {
        Self {
            parser: Parser::new(ctx),
        }
    }

    /// The samples of one series as (value, µs) pairs. `record` numbers them in the quarantine
    /// (such input has no lines); a `__name__` among `labels` is ignored.
    pub fn push_series(
        &mut self,
        record: u64,
        metric: &str,
        labels: &[(String, String)],
        samples: impl IntoIterator<Item = (f64, i64)>,
        sink: &mut dyn Sink,
    ) -> Result<(), IngestError> {
        let parser = &mut self.parser;
        parser.line_number = record;
        let scanned = ScannedLabels {
            pairs: labels.to_vec(),
            abbreviated: false,
        };
        let series = parser.series.resolve(scanned, b"");
        let metric_id = parser.metrics.resolve(metric.as_bytes());
        for (value, ts) in samples {
            let landed = match &series {
                &Ok(series) => parser.land(
                    &Sample {
                        metric: metric_id,
                        series,
                        value,
                        ts,
                    },
                    sink,
                )?,
                Err(error) => Err(error.clone()),
            };
            if let Err(error) = landed {
                let labels: Vec<String> = labels
                    .iter()
                    .filter(|(name, _)| name != "__name__")
                    .map(|(name, value)| format!("{name}={value:?}"))
                    .collect();
                let text = format!("{metric}{{{}}} {value} {}", labels.join(","), ts / 1000);
                parser.reject(error, text.as_bytes(), sink)?;
            }
        }
        Ok(())
    }

    pub fn finish(self, sink: &mut dyn Sink) -> Result<DcgmStats, IngestError> {
        self.parser.finish(sink)
    }
}

/// Calls `handle` with each line (without its `\n`) until the input ends or `handle` breaks.
/// Lines are handed out of the reader's own buffer: only a line split across two reads is copied.
fn for_each_line(
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

/// The identity column each dcgm-exporter label fills. Aliases come from exporter versions and
/// flags: `Hostname` became `hostname` in 2026, `--use-old-namespace` writes `uuid`, `pod_name`, …,
/// NVLink/NVSwitch series say `gpu_uuid` and `model_name`.
const LABEL_COLUMNS: &[(&str, &str)] = &[
    ("cluster", "cluster"),
    ("Hostname", "node"),
    ("hostname", "node"),
    ("UUID", "gpu_uuid"),
    ("uuid", "gpu_uuid"),
    ("gpu_uuid", "gpu_uuid"),
    ("gpu", "gpu_index"),
    ("modelName", "gpu_model"),
    ("model_name", "gpu_model"),
    ("pci_bus_id", "pci_bus_id"),
    ("GPU_I_PROFILE", "mig_profile"),
    ("GPU_I_ID", "mig_instance"),
    ("vgpu", "vgpu"),
    ("namespace", "namespace"),
    ("pod_namespace", "namespace"),
    ("pod", "pod"),
    ("pod_name", "pod"),
    ("container", "container"),
    ("container_name", "container"),
    ("hpc_job", "hpc_job"),
    ("DCGM_FI_DRIVER_VERSION", "driver_version"),
];

/// `nvidiaN`: the same fact as the `gpu` label, not kept.
const DEVICE_LABEL: &str = "device";

/// The identity columns `gpu_samples_extra` has; the other identity labels of a series go to that
/// table's `labels` JSON under their own names.
const EXTRA_IDENTITY_COLUMNS: &[&str] =
    &["cluster", "node", "gpu_uuid", "gpu_index", "mig_instance"];

const CLUSTER_FALLBACK: &str = "default";

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

fn identity_position(column: &str) -> usize {
    GPU_IDENTITY_COLUMNS
        .iter()
        .position(|c| *c == column)
        .unwrap_or_else(|| panic!("'{column}' is not an identity column of gpu_samples"))
}

/// A line that cannot land: which field, and why, in the words a user reads in the quarantine.
#[derive(Debug, Clone)]
struct LineError {
    field: String,
    reason: String,
}

impl LineError {
    fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }

    fn labels(reason: impl Into<String>) -> Self {
        Self::new("labels", reason)
    }
}

/// A metric name and where its values land: a wide column, or the long table under its name.
#[derive(Debug, Clone, Copy)]
struct Metric {
    /// Index into the interned metric names.
    id: usize,
    /// Index into `DCGM_FIELDS` for the known fields.
    column: Option<usize>,
}

/// Metric names seen so far. Exporters print one metric family at a time, so the last name is
/// checked before the map.
#[derive(Default)]
struct MetricTable {
    names: Vec<String>,
    by_name: foldhash::HashMap<Box<[u8]>, Metric>,
    last_name: Vec<u8>,
    last: Option<Metric>,
}

impl MetricTable {
    /// The metric that starts a sample line and the length of its name, or `None` when the line
    /// does not start with a metric name followed by `{` or a blank.
    fn split_name(&mut self, line: &[u8]) -> Option<(Metric, usize)> {
        let ends_name = |len: usize| matches!(line.get(len), Some(b'{' | b' ' | b'\t'));
        if let Some(metric) = self.last
            && line.starts_with(&self.last_name)
            && ends_name(self.last_name.len())
        {
            return Some((metric, self.last_name.len()));
        }
        let len = metric_name_len(line);
        (len > 0 && ends_name(len)).then(|| (self.resolve(&line[..len]), len))
    }

    fn resolve(&mut self, name: &[u8]) -> Metric {
        let metric = match self.by_name.get(name) {
            Some(&metric) => metric,
            None => {
                // The caller checked the metric-name grammar, so the name is ASCII.
                let text = String::from_utf8_lossy(name).into_owned();
                let metric = Metric {
                    id: self.names.len(),
                    column: wide_column(&text),
                };
                self.names.push(text);
                self.by_name.insert(name.into(), metric);
                metric
            }
        };
        self.last_name.clear();
        self.last_name.extend_from_slice(name);
        self.last = Some(metric);
        metric
    }
}

/// The wide column of a DCGM field; OpenMetrics exposes counters with a `_total` suffix.
fn wide_column(name: &str) -> Option<usize> {
    let known = |name: &str| DCGM_FIELDS.iter().position(|(field, _)| *field == name);
    known(name).or_else(|| name.strip_suffix("_total").and_then(known))
}

/// One series (label set without the metric name) and what it lands as.
struct Series {
    /// Identity column values, in `GPU_IDENTITY_COLUMNS` order.
    identity: [Option<String>; GPU_IDENTITY_COLUMNS.len()],
    gpu_index: Option<i32>,
    mig_instance: Option<i32>,
    /// The labels no identity column holds, as a JSON object sorted by key.
    wide_labels: Option<String>,
    /// The labels `gpu_samples_extra` has no column for, as a JSON object sorted by key.
    extra_labels: Option<String>,
    /// Only series of a GPU (or MIG instance, vGPU) pivot into `gpu_samples`.
    is_gpu: bool,
    /// The series whose wide rows this one fills: the first one met with the same columns and
    /// labels JSON (`Hostname` and `hostname`, or a `device` label more or less, are one row).
    row_series: usize,
    /// The held wide row this series filled last: (ts, row index in `WideRows`). A series' cells
    /// usually come together, and this spares the hash lookup.
    open_row: Option<(i64, usize)>,
    /// The label text the series was first met with.
    seen_as: Box<[u8]>,
    /// The series met right after this one, last time: the guess for the next line.
    successor: Option<usize>,
}

impl Series {
    /// `labels` are sorted by name, without empty values.
    fn new(
        labels: &[(String, String)],
        default_cluster: &str,
        seen_as: &[u8],
    ) -> Result<Self, LineError> {
        let mut identity: [Option<String>; GPU_IDENTITY_COLUMNS.len()] = Default::default();
        let (mut gpu_index, mut mig_instance) = (None, None);
        let mut wide_labels = BTreeMap::new();
        let mut extra_labels = BTreeMap::new();
        for (name, value) in labels {
            if name == DEVICE_LABEL {
                continue;
            }
            let Some(&(_, column)) = LABEL_COLUMNS.iter().find(|(label, _)| label == name) else {
                wide_labels.insert(name.as_str(), value.as_str());
                extra_labels.insert(name.as_str(), value.as_str());
                continue;
            };
            let slot = &mut identity[identity_position(column)];
            match slot {
                Some(earlier) if earlier != value => {
                    return Err(LineError::new(
                        name,
                        format!("'{value}' contradicts another label for {column} ('{earlier}')"),
                    ));
                }
                _ => *slot = Some(value.clone()),
            }
            match column {
                "gpu_index" => gpu_index = Some(integer(name, value, column)?),
                "mig_instance" => mig_instance = Some(integer(name, value, column)?),
                _ => {}
            }
            if !EXTRA_IDENTITY_COLUMNS.contains(&column) {
                extra_labels.insert(name.as_str(), value.as_str());
            }
        }
        identity[identity_position("cluster")].get_or_insert_with(|| default_cluster.to_owned());
        let is_gpu = gpu_index.is_some() || identity[identity_position("gpu_uuid")].is_some();
        Ok(Self {
            identity,
            gpu_index,
            mig_instance,
            wide_labels: labels_json(&wide_labels),
            extra_labels: labels_json(&extra_labels),
            is_gpu,
            row_series: usize::MAX,
            open_row: None,
            seen_as: seen_as.into(),
            successor: None,
        })
    }
}

/// A device index (`gpu`, `GPU_I_ID`): a non-negative integer.
fn integer(label: &str, value: &str, column: &str) -> Result<i32, LineError> {
    match value.parse::<i32>() {
        Ok(index) if index >= 0 => Ok(index),
        Ok(_) => Err(LineError::new(
            label,
            format!("'{value}' is negative: {column} is a device index (0 or more)"),
        )),
        Err(_) => Err(LineError::new(
            label,
            format!("'{value}' is not an integer {column}"),
        )),
    }
}

fn labels_json(labels: &BTreeMap<&str, &str>) -> Option<String> {
    (!labels.is_empty())
        .then(|| serde_json::to_string(labels).expect("a map of strings serializes"))
}

/// The label sets of one input: by raw text (the hot path) and by content (so that the same labels
/// written differently are one series).
struct SeriesTable {
    by_text: foldhash::HashMap<Box<[u8]>, Result<usize, LineError>>,
    by_labels: foldhash::HashMap<Vec<(String, String)>, usize>,
    /// The row series by a hash of its identity columns and labels JSON (a series whose hash
    /// collides with another's, which a hash of this width makes a theoretical case, fills rows
    /// of its own).
    by_row: foldhash::HashMap<u64, usize>,
    list: Vec<Series>,
    /// Per series, its (group, position) in the order of wide rows (see `rank`); valid for the
    /// first `ranks.len()` series.
    ranks: Vec<(u32, u32)>,
    default_cluster: String,
    /// Labels every series gets unless it has them (`ParseContext::labels`).
    target_labels: Vec<(String, String)>,
    /// The series of the latest sample line.
    previous: Option<usize>,
}

impl SeriesTable {
    fn new(default_cluster: String, target_labels: Vec<(String, String)>) -> Self {
        Self {
            by_text: Default::default(),
            by_labels: Default::default(),
            by_row: Default::default(),
            list: Vec::new(),
            ranks: Vec::new(),
            default_cluster,
            target_labels,
            previous: None,
        }
    }

    /// The series of the label block that starts right after `{`, and the rest of the line after
    /// its `}`.
    ///
    /// Fast path: the text up to the last `}` of the line (searched from the end: only the value
    /// and timestamp follow the block) is looked up as is. A hit is the text of a complete block
    /// parsed before, so the block ends right there; anything else (an exemplar's braces after the
    /// value, say) misses and takes the full parse.
    fn lookup<'a>(&mut self, block: &'a [u8]) -> Result<(usize, &'a [u8]), LineError> {
        if let Some(end) = memchr::memrchr(b'}', block)
            && let Some(known) = self.known(&block[..end])
        {
            return known.map(|series| (series, &block[end + 1..]));
        }
        let (labels, end) = scan_labels(block)?;
        self.learn(&block[..end], labels)
            .map(|series| (series, &block[end + 1..]))
    }

    /// The series of a sample written without `{...}`.
    fn unlabelled(&mut self) -> Result<usize, LineError> {
        self.known(b"")
            .unwrap_or_else(|| self.learn(b"", ScannedLabels::default()))
    }

    /// What a label text met before resolved to. The predicted series is checked first: exporters
    /// print one metric for every GPU, then the next metric for the GPUs in the same order, so the
    /// series after this one is nearly always the one that followed it last time, and a comparison
    /// with its text spares hashing the label text.
    fn known(&mut self, text: &[u8]) -> Option<Result<usize, LineError>> {
        let found = match self
            .previous
            .and_then(|previous| self.list[previous].successor)
        {
            Some(predicted) if *self.list[predicted].seen_as == *text => Ok(predicted),
            _ => self.by_text.get(text)?.clone(),
        };
        if let Ok(series) = found {
            self.follow(series);
        }
        Some(found)
    }

    /// Resolves a label text met for the first time and remembers it.
    fn learn(&mut self, text: &[u8], labels: ScannedLabels) -> Result<usize, LineError> {
        let resolved = self.resolve(labels, text);
        self.by_text.insert(text.into(), resolved.clone());
        if let Ok(series) = resolved {
            self.follow(series);
        }
        resolved
    }

    fn follow(&mut self, series: usize) {
        if let Some(previous) = self.previous.replace(series) {
            self.list[previous].successor = Some(series);
        }
    }

    fn resolve(&mut self, scanned: ScannedLabels, text: &[u8]) -> Result<usize, LineError> {
        let mut labels = scanned.pairs;
        labels.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        if let Some(pair) = labels.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            return Err(LineError::new(
                &pair[0].0,
                "label appears twice in one label set",
            ));
        }
        // Prometheus semantics: a label with an empty value is no label.
        labels.retain(|(name, value)| !value.is_empty() && name != "__name__");
        let missing: Vec<_> = self
            .target_labels
            .iter()
            .filter(|(name, _)| labels.binary_search_by(|(n, _)| n.cmp(name)).is_err())
            .cloned()
            .collect();
        if !missing.is_empty() {
            labels.extend(missing);
            labels.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        }
        if scanned.abbreviated {
            return self.expand_abbreviation(&labels);
        }
        if let Some(&series) = self.by_labels.get(&labels) {
            return Ok(series);
        }
        let mut series = Series::new(&labels, &self.default_cluster, text)?;
        let id = self.list.len();
        let fills = |other: &Series| {
            other.identity == series.identity && other.wide_labels == series.wide_labels
        };
        let hash = self
            .by_row
            .hasher()
            .hash_one((&series.identity, &series.wide_labels));
        let row_series = match self.by_row.get(&hash) {
            Some(&first) if fills(&self.list[first]) => first,
            Some(_) => id,
            None => {
                self.by_row.insert(hash, id);
                id
            }
        };
        series.row_series = row_series;
        self.list.push(series);
        self.by_labels.insert(labels, id);
        Ok(id)
    }

    /// Ranks the series in the order of `gpu_samples` rows: the table's sort columns before `ts`
    /// give the group (rows of one group are ordered by time, then by position), the other
    /// identity columns and the labels the position, so that no two row series tie.
    fn rank(&mut self) {
        if self.ranks.len() == self.list.len() {
            return;
        }
        let sort_columns = Table::GpuSamples.sort_columns();
        let (ts, group_columns) = sort_columns.split_last().expect("gpu_samples sorts");
        assert_eq!(*ts, "ts", "gpu_samples sorts by time last");
        let group: Vec<IdentityColumn> = group_columns
            .iter()
            .map(|column| IdentityColumn::of(column))
            .collect();
        let rest: Vec<IdentityColumn> = GPU_IDENTITY_COLUMNS
            .iter()
            .filter(|column| !group_columns.contains(column))
            .map(|column| IdentityColumn::of(column))
            .collect();
        let by = |columns: &[IdentityColumn], a: &Series, b: &Series| {
            columns
                .iter()
                .map(|column| column.compare(a, b))
                .find(|order| order.is_ne())
                .unwrap_or(Ordering::Equal)
        };
        let mut order: Vec<usize> = (0..self.list.len()).collect();
        order.sort_unstable_by(|&a, &b| {
            let (a, b) = (&self.list[a], &self.list[b]);
            by(&group, a, b)
                .then_with(|| by(&rest, a, b))
                .then_with(|| a.wide_labels.cmp(&b.wide_labels))
        });
        self.ranks = vec![(0, 0); self.list.len()];
        let mut rank = 0;
        for (position, &series) in order.iter().enumerate() {
            if position > 0
                && by(&group, &self.list[order[position - 1]], &self.list[series]).is_ne()
            {
                rank += 1;
            }
            self.ranks[series] = (rank, position as u32);
        }
    }

    /// Documentation excerpts shorten repeated label sets as `{gpu="0",...,modelName="…",...}`:
    /// the `...` stands for the other labels of the one series seen before that has all the labels
    /// written.
    fn expand_abbreviation(&self, written: &[(String, String)]) -> Result<usize, LineError> {
        let mut matches = self
            .by_labels
            .iter()
            .filter(|(labels, _)| written.iter().all(|pair| labels.contains(pair)))
            .map(|(_, &series)| series);
        match (matches.next(), matches.next()) {
            (Some(series), None) => Ok(series),
            (None, _) => Err(LineError::labels(
                "abbreviated label set ('...') matches no series seen before it",
            )),
            (Some(_), Some(_)) => Err(LineError::labels(
                "abbreviated label set ('...') matches several series seen before it",
            )),
        }
    }
}

/// One identity column of a series, compared as the column sorts: integers for the numeric
/// ones, text for the others, absent values first.
#[derive(Clone, Copy)]
enum IdentityColumn {
    Text(usize),
    GpuIndex,
    MigInstance,
}

impl IdentityColumn {
    fn of(column: &str) -> Self {
        match column {
            "gpu_index" => Self::GpuIndex,
            "mig_instance" => Self::MigInstance,
            _ => Self::Text(identity_position(column)),
        }
    }

    fn compare(self, a: &Series, b: &Series) -> Ordering {
        match self {
            Self::Text(position) => a.identity[position].cmp(&b.identity[position]),
            Self::GpuIndex => a.gpu_index.cmp(&b.gpu_index),
            Self::MigInstance => a.mig_instance.cmp(&b.mig_instance),
        }
    }
}

/// The labels of one block as written.
#[derive(Default)]
struct ScannedLabels {
    pairs: Vec<(String, String)>,
    /// The block holds a `...` in place of a label.
    abbreviated: bool,
}

/// Parses a label block that starts right after `{`: `name="value"` pairs separated by commas
/// (a trailing comma allowed), values with the escapes `\\`, `\"` and `\n`. Returns the labels and
/// the index of the closing `}`.
fn scan_labels(block: &[u8]) -> Result<(ScannedLabels, usize), LineError> {
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

fn skip_blanks(bytes: &[u8], mut at: usize) -> usize {
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
fn metric_name_len(line: &[u8]) -> usize {
    if line.first().is_none_or(u8::is_ascii_digit) {
        return 0;
    }
    line.iter().take_while(|b| is_name_byte(**b, true)).count()
}

/// The value and the optional timestamp (µs) after the label block; an OpenMetrics exemplar
/// (`# {...} value`) after them is ignored.
fn value_and_timestamp(rest: &[u8], metric: &[u8]) -> Result<(f64, Option<i64>), LineError> {
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

fn trim_blanks(bytes: &[u8]) -> &[u8] {
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
fn parse_value(token: &[u8]) -> Option<f64> {
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
fn parse_timestamp(token: &[u8]) -> Option<i64> {
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

/// Whether `value` can be a reading of `metric` (`column`: its wide column, if a known DCGM field):
/// finite, within what a DCGM field holds (int64 readings, doubles printed from them), never
/// negative for a known field (utilisations, memory, power, energy, clocks, temperatures and
/// counters are all unsigned).
fn check_reading(metric: &str, column: Option<usize>, value: f64) -> Result<(), LineError> {
    const MAX_READING: f64 = 9.223_372_036_854_776e18;
    if !value.is_finite() {
        return Err(LineError::new(
            metric,
            format!("{} is not a reading (only finite values are)", shown(value)),
        ));
    }
    if value.abs() >= MAX_READING {
        return Err(LineError::new(
            metric,
            format!(
                "{} is out of range for a DCGM field (at most 2^63 in magnitude)",
                shown(value)
            ),
        ));
    }
    let Some(column) = column else {
        return Ok(());
    };
    let name = DCGM_FIELDS[column].1;
    if value < 0.0 {
        return Err(LineError::new(
            metric,
            format!("{} is negative: {name} cannot be", shown(value)),
        ));
    }
    Ok(())
}

/// A value as Prometheus text writes it: `+Inf`, `-Inf`, and an exponent for very large or small
/// magnitudes.
fn shown(value: f64) -> String {
    if value.is_infinite() {
        return if value > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    let magnitude = value.abs();
    if magnitude >= 1e16 || (magnitude != 0.0 && magnitude < 1e-4) {
        format!("{value:e}")
    } else {
        value.to_string()
    }
}

/// DCGM's "blank" values (no data, not found, not supported, no permission: `DCGM_*_BLANK` + 0..3 in
/// dcgm_structs.h), which dcgm-exporter prints as if they were readings, and Prometheus's
/// staleness marker (the NaN whose bits are `0x7ff0000000000002`: "this series ended", which
/// remote-write sends and text cannot spell). Any other NaN is no reading and no blank: DCGM has
/// no NaN field value (dcgm-exporter leaves a blank field out), so `check_reading` rejects it.
fn is_blank(value: f64) -> bool {
    const INT32_BLANK: f64 = 0x7fff_fff0_u32 as f64;
    // 0x7ffffffffffffff0 rounds to 2^63 as a double, and so does every int64 blank printed in full.
    const INT64_BLANK: f64 = 0x7fff_ffff_ffff_fff0_u64 as f64;
    const FP64_BLANK: f64 = 140_737_488_355_328.0; // 2^47
    const STALE_NAN: u64 = 0x7ff0_0000_0000_0002;
    let in_family = |base: f64| value >= base && value <= base + 3.0 && value.fract() == 0.0;
    value.to_bits() == STALE_NAN
        || value == INT64_BLANK
        || in_family(INT32_BLANK)
        || in_family(FP64_BLANK)
}

/// Wide rows not yet emitted, column by column. NaN marks "no value": NaN samples are dropped before
/// they get here, so it never stands for a reading.
struct WideRows {
    ts: Vec<i64>,
    /// The row series of each row.
    series: Vec<usize>,
    /// One column per `DCGM_FIELDS` entry.
    values: Vec<Vec<f64>>,
    /// (row series, ts) → row: every cell of a series at one time finds the same row, whatever
    /// order the cells come in.
    rows: foldhash::HashMap<(u32, i64), u32>,
    /// Rows opened at the time of the latest opened row since that time began: the size of the
    /// scrape being read, in scrape-grouped input.
    run: usize,
}

impl WideRows {
    fn new() -> Self {
        Self {
            ts: Vec::new(),
            series: Vec::new(),
            values: vec![Vec::new(); DCGM_FIELDS.len()],
            rows: Default::default(),
            run: 0,
        }
    }

    fn len(&self) -> usize {
        self.ts.len()
    }

    fn is_empty(&self) -> bool {
        self.ts.is_empty()
    }

    /// The held row of `series` at `ts`, opened if there is none; `None` when the held rows
    /// must go before a new one opens: once a new time begins and a scrape as large as the last
    /// one would not fit in `batch_rows`, or at twice `batch_rows` whatever the time (one scrape
    /// larger than a batch, or input in no time order).
    fn row(&mut self, series: usize, ts: i64, batch_rows: usize) -> Option<usize> {
        let held = self.ts.len();
        let new_time = self.ts.last() != Some(&ts);
        match self.rows.entry((series as u32, ts)) {
            Entry::Occupied(row) => Some(*row.get() as usize),
            Entry::Vacant(_)
                if held >= 2 * batch_rows || (new_time && held + self.run > batch_rows) =>
            {
                None
            }
            Entry::Vacant(slot) => {
                slot.insert(held as u32);
                self.run = if new_time { 1 } else { self.run + 1 };
                self.ts.push(ts);
                self.series.push(series);
                for column in &mut self.values {
                    column.push(f64::NAN);
                }
                Some(held)
            }
        }
    }

    /// The held rows in the order of the table: by the group rank of their series, time, and the
    /// position of their series (`SeriesTable::rank`).
    fn sorted(&self, ranks: &[(u32, u32)]) -> Vec<u32> {
        // One packed key per row, sorted in place: time in the middle, its sign bit flipped so
        // that unsigned order is time order.
        let mut keyed: Vec<(u128, u32)> = (0..self.len())
            .map(|row| {
                let (group, position) = ranks[self.series[row]];
                let time = (self.ts[row] as u64 ^ (1 << 63)) as u128;
                let key = (group as u128) << 96 | time << 32 | position as u128;
                (key, row as u32)
            })
            .collect();
        keyed.sort_unstable_by_key(|&(key, _)| key);
        keyed.into_iter().map(|(_, row)| row).collect()
    }

    /// The rows `order` lists, in that order, as a `gpu_samples` batch.
    fn batch(&self, order: &[u32], series: &[Series]) -> Result<RecordBatch, ArrowError> {
        let schema = Table::GpuSamples.schema();
        let rows = || order.iter().map(|&row| &series[self.series[row as usize]]);
        let columns = schema
            .fields()
            .iter()
            .map(|field| -> ArrayRef {
                let name = field.name().as_str();
                if name == "ts" {
                    let ts: Vec<i64> = order.iter().map(|&row| self.ts[row as usize]).collect();
                    return timestamps(ts);
                }
                if name == "labels" {
                    return Arc::new(
                        rows()
                            .map(|s| s.wide_labels.as_deref())
                            .collect::<StringArray>(),
                    );
                }
                match DCGM_FIELDS.iter().position(|(_, column)| *column == name) {
                    Some(column) => {
                        let values = &self.values[column];
                        Arc::new(
                            order
                                .iter()
                                .map(|&row| {
                                    let value = values[row as usize];
                                    (!value.is_nan()).then_some(value)
                                })
                                .collect::<Float64Array>(),
                        )
                    }
                    None => identity_array(name, rows()),
                }
            })
            .collect();
        RecordBatch::try_new(schema, columns)
    }

    fn clear(&mut self) {
        self.ts.clear();
        self.series.clear();
        for column in &mut self.values {
            column.clear();
        }
        self.rows.clear();
        self.run = 0;
    }
}

/// Long rows for `gpu_samples_extra`, complete as soon as they are read.
#[derive(Default)]
struct ExtraRows {
    ts: Vec<i64>,
    series: Vec<usize>,
    metric: Vec<usize>,
    value: Vec<f64>,
    /// (series, metric, ts) of the held rows, to reject a second sample at the same time in any
    /// order.
    held: foldhash::HashSet<(u32, u32, i64)>,
    /// Latest timestamp per (series, metric): also catches a second sample that follows its first
    /// across an emitted batch.
    latest: foldhash::HashMap<(usize, usize), i64>,
}

impl ExtraRows {
    fn push(&mut self, sample: &Sample) -> Result<(), Duplicate> {
        let latest = self
            .latest
            .entry((sample.series, sample.metric.id))
            .or_insert(i64::MIN);
        if *latest == sample.ts
            || !self
                .held
                .insert((sample.series as u32, sample.metric.id as u32, sample.ts))
        {
            return Err(Duplicate);
        }
        *latest = sample.ts;
        self.ts.push(sample.ts);
        self.series.push(sample.series);
        self.metric.push(sample.metric.id);
        self.value.push(sample.value);
        Ok(())
    }

    fn batch(&self, series: &[Series], metric_names: &[String]) -> Result<RecordBatch, ArrowError> {
        let schema = Table::GpuSamplesExtra.schema();
        let rows = || self.series.iter().map(|&id| &series[id]);
        let columns = schema
            .fields()
            .iter()
            .map(|field| -> ArrayRef {
                match field.name().as_str() {
                    "ts" => timestamps(self.ts.clone()),
                    "metric" => Arc::new(
                        self.metric
                            .iter()
                            .map(|&id| Some(&metric_names[id]))
                            .collect::<StringArray>(),
                    ),
                    "value" => Arc::new(Float64Array::from(self.value.clone())),
                    "labels" => Arc::new(
                        rows()
                            .map(|s| s.extra_labels.as_deref())
                            .collect::<StringArray>(),
                    ),
                    identity => identity_array(identity, rows()),
                }
            })
            .collect();
        RecordBatch::try_new(schema, columns)
    }

    fn clear(&mut self) {
        self.ts.clear();
        self.series.clear();
        self.metric.clear();
        self.value.clear();
        self.held.clear();
    }
}

struct Duplicate;

fn timestamps(micros: Vec<i64>) -> ArrayRef {
    Arc::new(TimestampMicrosecondArray::from(micros).with_timezone("UTC"))
}

fn identity_array<'a>(column: &str, rows: impl Iterator<Item = &'a Series>) -> ArrayRef {
    match column {
        "gpu_index" => Arc::new(rows.map(|s| s.gpu_index).collect::<Int32Array>()),
        "mig_instance" => Arc::new(rows.map(|s| s.mig_instance).collect::<Int32Array>()),
        _ => {
            let position = identity_position(column);
            Arc::new(
                rows.map(|s| s.identity[position].as_deref())
                    .collect::<StringArray>(),
            )
        }
    }
}

/// One parsed sample line.
struct Sample {
    metric: Metric,
    series: usize,
    value: f64,
    /// µs since the epoch, UTC.
    ts: i64,
}

struct Parser<'c> {
    ctx: &'c ParseContext,
    /// `ctx.at` in µs: the time of samples written without a timestamp.
    at: i64,
    batch_rows: usize,
    line_number: u64,
    stats: DcgmStats,
    /// A sample line was seen: from then on a broken line is rejected, not taken as a wrong format.
    seen_sample_line: bool,
    metrics: MetricTable,
    series: SeriesTable,
    wide: WideRows,
    extra: ExtraRows,
}

impl<'c> Parser<'c> {
    fn new(ctx: &'c ParseContext) -> Self {
        let cluster = ctx
            .cluster
            .clone()
            .unwrap_or_else(|| CLUSTER_FALLBACK.to_owned());
        Self {
            ctx,
            at: ctx.at.timestamp_micros(),
            batch_rows: ctx.batch_rows.max(1),
            line_number: 0,
            stats: DcgmStats::default(),
            seen_sample_line: false,
            metrics: MetricTable::default(),
            series: SeriesTable::new(cluster, ctx.labels.clone()),
            wide: WideRows::new(),
            extra: ExtraRows::default(),
        }
    }

    /// Handles one line; `Break` at OpenMetrics' `# EOF`.
    fn line(&mut self, raw: &[u8], sink: &mut dyn Sink) -> Result<ControlFlow<()>, IngestError> {
        self.line_number += 1;
        self.stats.lines += 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        // A file saved by a Windows editor may start with a byte-order mark.
        let raw = if self.line_number == 1 {
            raw.strip_prefix(UTF8_BOM).unwrap_or(raw)
        } else {
            raw
        };
        let text = trim_blanks(raw);
        match text.first() {
            None => return Ok(ControlFlow::Continue(())),
            Some(b'#') if text == b"# EOF" => return Ok(ControlFlow::Break(())),
            Some(b'#') => return Ok(ControlFlow::Continue(())),
            Some(_) => {}
        }
        let Some((metric, name_len)) = self.metrics.split_name(text) else {
            if !self.seen_sample_line {
                return Err(self.not_prometheus_text(text));
            }
            let error = LineError::new(
                "metric",
                "line is not 'metric_name{labels} value [timestamp]'",
            );
            return self
                .reject(error, text, sink)
                .map(|()| ControlFlow::Continue(()));
        };
        self.seen_sample_line = true;
        let landed = match self.parse_sample(text, metric, name_len) {
            Ok(sample) => self.land(&sample, sink)?,
            Err(error) => Err(error),
        };
        match landed {
            Ok(()) => Ok(ControlFlow::Continue(())),
            Err(error) => self
                .reject(error, text, sink)
                .map(|()| ControlFlow::Continue(())),
        }
    }

    /// Lands one sample, however it was read: drops blanks, and refuses a second value for the
    /// same cell (the caller rejects it).
    fn land(
        &mut self,
        sample: &Sample,
        sink: &mut dyn Sink,
    ) -> Result<Result<(), LineError>, IngestError> {
        if is_blank(sample.value) {
            self.stats.sentinels_dropped += 1;
            return Ok(Ok(()));
        }
        if !crate::time::is_landable(sample.ts) {
            return Ok(Err(LineError::new(
                "timestamp",
                format!(
                    "{} ms since the epoch is outside 1970-01-01 to 9999-12-31",
                    sample.ts.div_euclid(1000)
                ),
            )));
        }
        if let Err(error) = check_reading(
            &self.metrics.names[sample.metric.id],
            sample.metric.column,
            sample.value,
        ) {
            return Ok(Err(error));
        }
        if self.record(sample, sink)?.is_err() {
            let metric = &self.metrics.names[sample.metric.id];
            return Ok(Err(LineError::new(
                metric,
                "duplicate sample: the series already has a value of this metric at this timestamp",
            )));
        }
        self.stats.samples += 1;
        if self.extra.ts.len() >= self.batch_rows {
            self.emit_extra(sink)?;
        }
        Ok(Ok(()))
    }

    fn parse_sample(
        &mut self,
        text: &[u8],
        metric: Metric,
        name_len: usize,
    ) -> Result<Sample, LineError> {
        let name = &text[..name_len];
        let after_name = skip_blanks(text, name_len);
        let (series, rest) = if text.get(after_name) == Some(&b'{') {
            self.series.lookup(&text[after_name + 1..])?
        } else {
            (self.series.unlabelled()?, &text[after_name..])
        };
        let (value, ts) = value_and_timestamp(rest, name)?;
        if ts.is_none() {
            self.stats.untimestamped += 1;
        }
        Ok(Sample {
            metric,
            series,
            value,
            ts: ts.unwrap_or(self.at),
        })
    }

    /// Puts a sample in its wide row (GPU series of a known field) or in the long table; emits
    /// the held rows first when a new row would overfill them.
    fn record(
        &mut self,
        sample: &Sample,
        sink: &mut dyn Sink,
    ) -> Result<Result<(), Duplicate>, IngestError> {
        let series = &self.series.list[sample.series];
        let (Some(column), true) = (sample.metric.column, series.is_gpu) else {
            return Ok(self.extra.push(sample));
        };
        let row = match series.open_row {
            Some((ts, row)) if ts == sample.ts => row,
            _ => {
                let row_series = series.row_series;
                let row = match self.wide.row(row_series, sample.ts, self.batch_rows) {
                    Some(row) => row,
                    None => {
                        self.emit_wide(sink)?;
                        self.wide
                            .row(row_series, sample.ts, self.batch_rows)
                            .expect("no rows held: room for one")
                    }
                };
                self.series.list[sample.series].open_row = Some((sample.ts, row));
                row
            }
        };
        let cell = &mut self.wide.values[column][row];
        if !cell.is_nan() {
            return Ok(Err(Duplicate));
        }
        *cell = sample.value;
        Ok(Ok(()))
    }

    /// Emits every held row, sorted, in batches of at most `batch_rows`.
    fn emit_wide(&mut self, sink: &mut dyn Sink) -> Result<(), IngestError> {
        self.series.rank();
        let order = self.wide.sorted(&self.series.ranks);
        for rows in order.chunks(self.batch_rows) {
            let batch = self.wide.batch(rows, &self.series.list)?;
            self.stats.rows_wide += rows.len() as u64;
            sink.accept(Table::GpuSamples, batch)?;
        }
        self.wide.clear();
        for series in &mut self.series.list {
            series.open_row = None;
        }
        Ok(())
    }

    fn emit_extra(&mut self, sink: &mut dyn Sink) -> Result<(), IngestError> {
        let batch = self.extra.batch(&self.series.list, &self.metrics.names)?;
        self.stats.rows_extra += batch.num_rows() as u64;
        self.extra.clear();
        sink.accept(Table::GpuSamplesExtra, batch)
    }

    fn finish(mut self, sink: &mut dyn Sink) -> Result<DcgmStats, IngestError> {
        if !self.wide.is_empty() {
            self.emit_wide(sink)?;
        }
        if !self.extra.ts.is_empty() {
            self.emit_extra(sink)?;
        }
        Ok(self.stats)
    }

    fn reject(
        &mut self,
        error: LineError,
        text: &[u8],
        sink: &mut dyn Sink,
    ) -> Result<(), IngestError> {
        self.stats.rejected += 1;
        let raw = String::from_utf8_lossy(text);
        sink.reject(Rejection::new(
            self.line_number,
            error.field,
            error.reason,
            &raw,
        ))
    }

    fn not_prometheus_text(&self, text: &[u8]) -> IngestError {
        let shown: String = String::from_utf8_lossy(text).chars().take(80).collect();
        IngestError::Format {
            origin: self.ctx.origin.clone(),
            reason: format!(
                "not Prometheus text exposition (dcgm-exporter /metrics): line {} does not start \
                 with a metric name: '{shown}'",
                self.line_number
            ),
        }
    }
}
