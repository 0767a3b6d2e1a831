//! The rows held until they are emitted: wide `gpu_samples` rows found by (series, time) and
//! emitted in the table's sort order, and long `gpu_samples_extra` rows.

use std::collections::hash_map::Entry;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Float64Array, Int32Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use arrow::error::ArrowError;
use gpuledger_lake::tables::{DCGM_FIELDS, Table};

use super::Sample;
use super::series::{Series, identity_position};

/// Wide rows not yet emitted, column by column. NaN marks "no value": NaN samples are dropped before
/// they get here, so it never stands for a reading.
pub(super) struct WideRows {
    ts: Vec<i64>,
    /// The row series of each row.
    series: Vec<usize>,
    /// One column per `DCGM_FIELDS` entry.
    pub(super) values: Vec<Vec<f64>>,
    /// (row series, ts) → row: every cell of a series at one time finds the same row, whatever
    /// order the cells come in.
    rows: foldhash::HashMap<(u32, i64), u32>,
    /// Rows opened at the time of the latest opened row since that time began: the size of the
    /// scrape being read, in scrape-grouped input.
    run: usize,
    /// The row after the one found last: where the next cell's row most often is, since each
    /// metric family lists its series and times in the order of the family before it (within a
    /// scrape, or across a family-grouped dump). Checking it first spares the hash lookup
    /// (with its cache misses over a large dump's rows) for all but a family's first cell.
    next: usize,
}

impl WideRows {
    pub(super) fn new() -> Self {
        Self {
            ts: Vec::new(),
            series: Vec::new(),
            values: vec![Vec::new(); DCGM_FIELDS.len()],
            rows: Default::default(),
            run: 0,
            next: 0,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.ts.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.ts.is_empty()
    }

    /// The held row of `series` at `ts`, opened if there is none; `None` when the held rows
    /// must go before a new one opens: once a new time begins and a scrape as large as the last
    /// one would not fit in `batch_rows`, or at twice `batch_rows` whatever the time (one scrape
    /// larger than a batch, or input in no time order).
    pub(super) fn row(&mut self, series: usize, ts: i64, batch_rows: usize) -> Option<usize> {
        let held = self.ts.len();
        // A held row is the only one of its (series, time).
        if self.ts.get(self.next) == Some(&ts) && self.series[self.next] == series {
            self.next += 1;
            return Some(self.next - 1);
        }
        let new_time = self.ts.last() != Some(&ts);
        match self.rows.entry((series as u32, ts)) {
            Entry::Occupied(row) => {
                self.next = *row.get() as usize + 1;
                Some(self.next - 1)
            }
            Entry::Vacant(_)
                if held >= batch_rows.saturating_mul(2)
                    || (new_time && held + self.run > batch_rows) =>
            {
                None
            }
            Entry::Vacant(slot) => {
                slot.insert(held as u32);
                self.run = if new_time { 1 } else { self.run + 1 };
                self.next = held + 1;
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
    pub(super) fn sorted(&self, ranks: &[(u32, u32)]) -> Vec<u32> {
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
    pub(super) fn batch(
        &self,
        order: &[u32],
        series: &[Series],
    ) -> Result<RecordBatch, ArrowError> {
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

    pub(super) fn clear(&mut self) {
        self.ts.clear();
        self.series.clear();
        for column in &mut self.values {
            column.clear();
        }
        self.rows.clear();
        self.run = 0;
        self.next = 0;
    }
}

/// Long rows for `gpu_samples_extra`, complete as soon as they are read.
#[derive(Default)]
pub(super) struct ExtraRows {
    pub(super) ts: Vec<i64>,
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
    pub(super) fn push(&mut self, sample: &Sample) -> Result<(), Duplicate> {
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

    pub(super) fn batch(
        &self,
        series: &[Series],
        metric_names: &[String],
    ) -> Result<RecordBatch, ArrowError> {
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

    pub(super) fn clear(&mut self) {
        self.ts.clear();
        self.series.clear();
        self.metric.clear();
        self.value.clear();
        self.held.clear();
    }
}

pub(super) struct Duplicate;

pub(super) fn timestamps(micros: Vec<i64>) -> ArrayRef {
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
