//! Label sets → series: which identity column each label fills, which metric names are DCGM
//! fields (wide columns) and which land in `gpu_samples_extra`, and the table of series seen in
//! one input, keyed by raw label text on the hot path and by content underneath.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::ops::Deref;
use std::sync::{Arc, LazyLock, PoisonError, RwLock};

use gpuledger_lake::tables::{DCGM_FIELDS, GPU_IDENTITY_COLUMNS, Table};

use super::LineError;
use super::lexer::{ScannedLabels, metric_name_len, scan_labels};

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

pub(super) const CLUSTER_FALLBACK: &str = "default";

pub(super) fn identity_position(column: &str) -> usize {
    GPU_IDENTITY_COLUMNS
        .iter()
        .position(|c| *c == column)
        .unwrap_or_else(|| panic!("'{column}' is not an identity column of gpu_samples"))
}

/// A metric name and where its values land: a wide column, or the long table under its name.
#[derive(Debug, Clone, Copy)]
pub(super) struct Metric {
    /// Index into the interned metric names.
    pub(super) id: usize,
    /// Index into `DCGM_FIELDS` for the known fields.
    pub(super) column: Option<usize>,
}

/// Metric names seen so far. Exporters print one metric family at a time, so the last name is
/// checked before the map.
#[derive(Default)]
pub(super) struct MetricTable {
    pub(super) names: Vec<String>,
    by_name: foldhash::HashMap<Box<[u8]>, Metric>,
    last_name: Vec<u8>,
    last: Option<Metric>,
}

impl MetricTable {
    /// The metric that starts a sample line and the length of its name, or `None` when the line
    /// does not start with a metric name followed by `{` or a blank.
    pub(super) fn split_name(&mut self, line: &[u8]) -> Option<(Metric, usize)> {
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

    pub(super) fn resolve(&mut self, name: &[u8]) -> Metric {
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

/// What a label set (without the metric name) lands as. It depends only on the labels and the
/// parse context (`SeriesContext`), so every input read in one context shares it
/// (`LearnedSeries`).
pub(super) struct SeriesLabels {
    /// The labels, sorted by name, without empty values: the same labels written another way
    /// (in another order, with blanks) are one series.
    labels: Arc<[(String, String)]>,
    /// Identity column values, in `GPU_IDENTITY_COLUMNS` order.
    pub(super) identity: [Option<String>; GPU_IDENTITY_COLUMNS.len()],
    pub(super) gpu_index: Option<i32>,
    pub(super) mig_instance: Option<i32>,
    /// The labels no identity column holds, as a JSON object sorted by key.
    pub(super) wide_labels: Option<String>,
    /// The labels `gpu_samples_extra` has no column for, as a JSON object sorted by key.
    pub(super) extra_labels: Option<String>,
    /// Only series of a GPU (or MIG instance, vGPU) pivot into `gpu_samples`.
    pub(super) is_gpu: bool,
}

/// One series of an input: what its labels land as, and where its rows are.
pub(super) struct Series {
    labels: Arc<SeriesLabels>,
    /// The series whose wide rows this one fills: the first one met with the same columns and
    /// labels JSON (`Hostname` and `hostname`, or a `device` label more or less, are one row).
    pub(super) row_series: usize,
    /// The held wide row this series filled last: (ts, row index in `WideRows`). A series' cells
    /// usually come together, and this spares the hash lookup.
    pub(super) open_row: Option<(i64, usize)>,
    /// The label text the series was first met with.
    seen_as: Arc<[u8]>,
    /// The series met right after this one, last time: the guess for the next line.
    successor: Option<usize>,
}

impl Deref for Series {
    type Target = SeriesLabels;

    fn deref(&self) -> &SeriesLabels {
        &self.labels
    }
}

impl SeriesLabels {
    /// `labels` are sorted by name, without empty values.
    fn new(labels: Vec<(String, String)>, default_cluster: &str) -> Result<Self, LineError> {
        let mut identity: [Option<String>; GPU_IDENTITY_COLUMNS.len()] = Default::default();
        let (mut gpu_index, mut mig_instance) = (None, None);
        let mut wide_labels = BTreeMap::new();
        let mut extra_labels = BTreeMap::new();
        for (name, value) in &labels {
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
        let (wide_labels, extra_labels) = (labels_json(&wide_labels), labels_json(&extra_labels));
        Ok(Self {
            labels: labels.into(),
            identity,
            gpu_index,
            mig_instance,
            wide_labels,
            extra_labels,
            is_gpu,
        })
    }

    /// Whether `other` fills the same wide rows: the same identity columns and labels JSON.
    fn fills_rows_of(&self, other: &SeriesLabels) -> bool {
        self.identity == other.identity && self.wide_labels == other.wide_labels
    }
}

/// What a label set is read relative to: the cluster of series without a `cluster` label, and
/// the labels every series gets unless it has them (`ParseContext::cluster`, `labels`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct SeriesContext {
    pub(super) default_cluster: String,
    pub(super) target_labels: Vec<(String, String)>,
}

/// Label sets resolved by earlier inputs of this process, by context and label text. A service
/// lands the same exporters' label sets every scrape; resolving one (its labels parsed, sorted,
/// mapped to columns, its labels JSON written) costs more than the rest of its lines, so each is
/// resolved once, not once per scrape. A label text resolves to the same labels in every input
/// of one context, so sharing them cannot change what lands. Bounded by the memory it may take:
/// past `max_bytes` it starts again, empty; a label text longer than [`Self::MAX_TEXT`] (no
/// exporter's) is not kept.
pub(super) struct LearnedSeries {
    max_bytes: usize,
    maps: RwLock<LearnedMaps>,
}

#[derive(Default)]
struct LearnedMaps {
    by_context: foldhash::HashMap<SeriesContext, foldhash::HashMap<Arc<[u8]>, Arc<SeriesLabels>>>,
    /// What the texts and their labels take, about.
    bytes: usize,
}

impl LearnedSeries {
    /// What the process keeps: the label sets of ten thousand GPUs or more (~1.5 KB each).
    const MAX_BYTES: usize = 32 << 20;
    /// The longest label text kept.
    const MAX_TEXT: usize = 4 << 10;

    pub(super) fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            maps: RwLock::default(),
        }
    }

    /// The one every parser of the process shares.
    pub(super) fn shared() -> Arc<Self> {
        static SHARED: LazyLock<Arc<LearnedSeries>> =
            LazyLock::new(|| Arc::new(LearnedSeries::new(LearnedSeries::MAX_BYTES)));
        Arc::clone(&SHARED)
    }

    /// What keeping `text` takes, about: the text, its labels (pairs and two JSON objects of
    /// them, at most three times the text) and the allocations' overhead.
    fn cost(text: &[u8]) -> usize {
        4 * text.len() + 1024
    }

    /// The label text as kept, and what it resolved to in `context`.
    fn get(&self, context: &SeriesContext, text: &[u8]) -> Option<(Arc<[u8]>, Arc<SeriesLabels>)> {
        // A panic elsewhere cannot leave the maps half-changed: an insert is one call.
        let maps = self.maps.read().unwrap_or_else(PoisonError::into_inner);
        let (text, labels) = maps.by_context.get(context)?.get_key_value(text)?;
        Some((Arc::clone(text), Arc::clone(labels)))
    }

    fn insert(&self, context: &SeriesContext, text: Arc<[u8]>, labels: Arc<SeriesLabels>) {
        if text.len() > Self::MAX_TEXT {
            return;
        }
        let cost = Self::cost(&text);
        let mut guard = self.maps.write().unwrap_or_else(PoisonError::into_inner);
        let maps = &mut *guard;
        // Freed once the lock is released: parsers do not wait for it.
        let mut dropped = None;
        if maps.bytes + cost > self.max_bytes {
            dropped = Some(std::mem::take(maps));
        }
        let texts = maps.by_context.entry(context.clone()).or_default();
        if texts.insert(text, labels).is_none() {
            maps.bytes += cost;
        }
        drop(guard);
        drop(dropped);
    }

    /// Label texts kept now.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        let maps = self.maps.read().unwrap_or_else(PoisonError::into_inner);
        maps.by_context
            .values()
            .map(std::collections::HashMap::len)
            .sum()
    }
}

/// A device index (`gpu`, `GPU_I_ID`): a non-negative integer.
pub(super) fn integer(label: &str, value: &str, column: &str) -> Result<i32, LineError> {
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
pub(super) struct SeriesTable {
    by_text: foldhash::HashMap<Arc<[u8]>, Result<usize, LineError>>,
    by_labels: foldhash::HashMap<Arc<[(String, String)]>, usize>,
    /// The row series by a hash of its identity columns and labels JSON (a series whose hash
    /// collides with another's, which a hash of this width makes a theoretical case, fills rows
    /// of its own).
    by_row: foldhash::HashMap<u64, usize>,
    pub(super) list: Vec<Series>,
    /// Per series, its (group, position) in the order of wide rows (see `rank`); valid for the
    /// first `ranks.len()` series.
    pub(super) ranks: Vec<(u32, u32)>,
    context: SeriesContext,
    /// Label texts resolved by earlier inputs.
    learned: Arc<LearnedSeries>,
    /// The series of the latest sample line.
    previous: Option<usize>,
}

impl SeriesTable {
    pub(super) fn new(context: SeriesContext, learned: Arc<LearnedSeries>) -> Self {
        Self {
            by_text: Default::default(),
            by_labels: Default::default(),
            by_row: Default::default(),
            list: Vec::new(),
            ranks: Vec::new(),
            context,
            learned,
            previous: None,
        }
    }

    /// The series of the label block that starts right after `{`, and the rest of the line after
    /// its `}`.
    ///
    /// Fast path: the text up to the last `}` of the line (searched from the end: only the value
    /// and timestamp follow the block) is looked up as is. A hit is the text of a complete block
    /// parsed before (in this input, or in an earlier one: `LearnedSeries`), so the block ends
    /// right there; anything else (an exemplar's braces after the value, say) misses and takes
    /// the full parse.
    pub(super) fn lookup<'a>(&mut self, block: &'a [u8]) -> Result<(usize, &'a [u8]), LineError> {
        if let Some(end) = memchr::memrchr(b'}', block)
            && let Some(known) = self.known_or_learned(&block[..end])
        {
            return known.map(|series| (series, &block[end + 1..]));
        }
        let (labels, end) = scan_labels(block)?;
        self.learn(&block[..end], labels)
            .map(|series| (series, &block[end + 1..]))
    }

    /// The series of a sample written without `{...}`.
    pub(super) fn unlabelled(&mut self) -> Result<usize, LineError> {
        self.known_or_learned(b"")
            .unwrap_or_else(|| self.learn(b"", ScannedLabels::default()))
    }

    /// What a label text resolved to before: in this input, or in an earlier one.
    fn known_or_learned(&mut self, text: &[u8]) -> Option<Result<usize, LineError>> {
        if let Some(known) = self.known(text) {
            return Some(known);
        }
        let (text, labels) = self.learned.get(&self.context, text)?;
        let series = self.register(labels, Arc::clone(&text));
        Some(self.remember(text, Ok(series)))
    }

    /// What a label text met before resolved to. The predicted series is checked first: exporters
    /// print one metric for every GPU, then the next metric for the GPUs in the same order, so the
    /// series after this one is nearly always the one that followed it last time, and a comparison
    /// with its text spares hashing the label text.
    pub(super) fn known(&mut self, text: &[u8]) -> Option<Result<usize, LineError>> {
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

    /// Resolves a label text met for the first time and remembers it, for later inputs too
    /// (unless it is abbreviated: what `...` stands for depends on the input).
    fn learn(&mut self, text: &[u8], labels: ScannedLabels) -> Result<usize, LineError> {
        let text: Arc<[u8]> = text.into();
        let abbreviated = labels.abbreviated;
        let resolved = self.resolve(labels, Arc::clone(&text));
        if let Ok(series) = resolved
            && !abbreviated
        {
            let labels = Arc::clone(&self.list[series].labels);
            self.learned
                .insert(&self.context, Arc::clone(&text), labels);
        }
        self.remember(text, resolved)
    }

    fn remember(
        &mut self,
        text: Arc<[u8]>,
        resolved: Result<usize, LineError>,
    ) -> Result<usize, LineError> {
        self.by_text.insert(text, resolved.clone());
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

    /// The series of a label set first met as `text`.
    pub(super) fn resolve(
        &mut self,
        scanned: ScannedLabels,
        text: Arc<[u8]>,
    ) -> Result<usize, LineError> {
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
            .context
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
        if let Some(&series) = self.by_labels.get(labels.as_slice()) {
            return Ok(series);
        }
        let labels = SeriesLabels::new(labels, &self.context.default_cluster)?;
        Ok(self.register(Arc::new(labels), text))
    }

    /// The series of `labels` in this input: the one met before with the same labels, or a new
    /// one, which fills the wide rows of the first series with the same columns.
    fn register(&mut self, labels: Arc<SeriesLabels>, seen_as: Arc<[u8]>) -> usize {
        if let Some(&series) = self.by_labels.get(&*labels.labels) {
            return series;
        }
        let id = self.list.len();
        let hash = self
            .by_row
            .hasher()
            .hash_one((&labels.identity, &labels.wide_labels));
        let row_series = match self.by_row.get(&hash) {
            Some(&first) if self.list[first].fills_rows_of(&labels) => first,
            Some(_) => id,
            None => {
                self.by_row.insert(hash, id);
                id
            }
        };
        self.by_labels.insert(Arc::clone(&labels.labels), id);
        self.list.push(Series {
            labels,
            row_series,
            open_row: None,
            seen_as,
            successor: None,
        });
        id
    }

    /// Ranks the series in the order of `gpu_samples` rows: the table's sort columns before `ts`
    /// give the group (rows of one group are ordered by time, then by position), the other
    /// identity columns and the labels the position, so that no two row series tie.
    pub(super) fn rank(&mut self) {
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
    pub(super) fn of(column: &str) -> Self {
        match column {
            "gpu_index" => Self::GpuIndex,
            "mig_instance" => Self::MigInstance,
            _ => Self::Text(identity_position(column)),
        }
    }

    pub(super) fn compare(self, a: &Series, b: &Series) -> Ordering {
        match self {
            Self::Text(position) => a.identity[position].cmp(&b.identity[position]),
            Self::GpuIndex => a.gpu_index.cmp(&b.gpu_index),
            Self::MigInstance => a.mig_instance.cmp(&b.mig_instance),
        }
    }
}
