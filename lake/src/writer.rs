//! Writes batches as immutable Parquet files: one file per (day, restatement scope) per call,
//! rows sorted by the table's sort columns, zstd, dictionary-encoded labels and repeating
//! values, page statistics.
//! Files are written under `_staging/` ([`Aside::Staged`]): only their commit places them
//! under `tables/` (lake/src/retirement.rs), so a write that is never committed is never seen.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Float64Array, UInt32Array};
use arrow::compute::{SortColumn, lexsort_to_indices, take_record_batch};
use arrow::datatypes::{Float64Type, TimestampMicrosecondType};
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use chrono::{DateTime, NaiveDate};
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use gpuledger_ledger::time::MICROS_PER_DAY;

use crate::error::{LakeError, Result};
use crate::paths::{Aside, TableFilePath};
use crate::tables::Table;

/// A Parquet file written to the store, as the catalog records it.
#[derive(Debug, Clone, PartialEq)]
pub struct WrittenFile {
    pub path: TableFilePath,
    /// The restatement scope (`account|period`) for scoped tables, else `None`.
    pub scope: Option<String>,
    pub rows: u64,
    pub bytes: u64,
    /// Smallest and largest value of the table's time column, microseconds since the epoch.
    pub min_ts: i64,
    pub max_ts: i64,
}

impl WrittenFile {
    /// Where the writer put the object: under `_staging/` until its commit places it.
    pub fn staged(&self) -> object_store::path::Path {
        Aside::Staged.of(&self.path.to_path())
    }
}

/// A column of fewer bytes than this, or of nulls only, is written without compression. zstd
/// could save at most a few KB of it, while the Parquet writer and every reader create a zstd
/// compressor and decompressor for each column chunk they open (zeroing a few hundred KB):
/// for a group commit's file of a few hundred rows that cost three times the compressing
/// (3.8 % of `serve`'s CPU against 1.2 %). Such files are small by nature, and compaction
/// writes them again as large ones, compressed.
const COMPRESSED_FROM_BYTES: usize = 4096;

/// zstd (but for small or all-null columns: [`COMPRESSED_FROM_BYTES`]), page statistics, and
/// dictionaries for every column except the float columns of `batch` whose values hardly
/// repeat ([`repeats_enough_for_a_dictionary`]).
fn writer_properties(batch: &RecordBatch) -> WriterProperties {
    let mut properties = WriterProperties::builder()
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(3).expect("valid level"),
        ))
        .set_dictionary_enabled(true)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_max_row_group_row_count(Some(1024 * 1024));
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        // A nested column's leaves have paths of their own: left as they are.
        let path = || ColumnPath::from(field.name().as_str());
        if let Some(values) = column.as_primitive_opt::<Float64Type>()
            && !repeats_enough_for_a_dictionary(values)
        {
            properties = properties.set_column_dictionary_enabled(path(), false);
        }
        let small = column.null_count() == column.len()
            || column
                .to_data()
                .get_slice_memory_size()
                .is_ok_and(|bytes| bytes < COMPRESSED_FROM_BYTES);
        if small && !field.data_type().is_nested() {
            properties = properties.set_column_compression(path(), Compression::UNCOMPRESSED);
        }
    }
    properties.build()
}

/// Whether a float column's values repeat enough for a dictionary to pay: at most half of its
/// first 4,096 values distinct. Readings such as power or PCIe bytes per second hardly repeat;
/// dictionary-encoding them fills the dictionary within a page, after which the writer falls
/// back to plain values anyway, having spent bytes and time on the attempt. Plain values under
/// zstd take 17–20 % fewer bytes for dcgm's high-cardinality fields (an hour of the ingest
/// bench's fleet: 2.05 → 1.73 bytes per sample, as DuckDB writes them), while temperatures,
/// clocks and utilisations keep their dictionaries.
fn repeats_enough_for_a_dictionary(values: &Float64Array) -> bool {
    let mut distinct = std::collections::HashSet::new();
    let mut sampled = 0;
    for value in values.iter().flatten().take(4096) {
        distinct.insert(value.to_bits());
        sampled += 1;
    }
    distinct.len() * 2 <= sampled
}

/// Writes the batches of one ingest batch; numbers its files so that names never collide.
pub struct TableWriter {
    store: Arc<dyn ObjectStore>,
    batch_id: String,
    next_seq: u32,
}

impl TableWriter {
    pub fn new(store: Arc<dyn ObjectStore>, batch_id: impl Into<String>) -> Self {
        Self {
            store,
            batch_id: batch_id.into(),
            next_seq: 1,
        }
    }

    /// Splits `batch` by UTC day of the time column and by scope, sorts each part and writes it.
    pub async fn write(&mut self, table: Table, batch: &RecordBatch) -> Result<Vec<WrittenFile>> {
        if batch.num_rows() == 0 {
            return Ok(vec![]);
        }
        // Splitting, sorting and encoding are CPU work: on a blocking thread, so that the
        // runtime's threads go on serving requests (and a service's health checks) meanwhile;
        // as many at once as there are cores, so that memory does not grow with the number of
        // requests writing.
        let permit = ENCODERS
            .acquire()
            .await
            .map_err(|error| LakeError::Invalid(format!("the encoders stopped: {error}")))?;
        let batch = batch.clone();
        let encoded = tokio::task::spawn_blocking(move || -> Result<Vec<_>> {
            let _permit = permit;
            split_by_day_and_scope(table, &batch)?
                .into_iter()
                .map(|(date, scope, part)| {
                    let sorted = sort_rows(table, &part)?;
                    let (min_ts, max_ts) = time_range(table, &sorted);
                    let bytes = encode_parquet(&sorted)?;
                    Ok((date, scope, sorted.num_rows(), min_ts, max_ts, bytes))
                })
                .collect()
        })
        .await
        .map_err(|error| {
            LakeError::Invalid(format!("encoding a {table} file stopped: {error}"))
        })??;
        let mut written = Vec::new();
        for (date, scope, rows, min_ts, max_ts, bytes) in encoded {
            let path = TableFilePath::new(table, date, &self.batch_id, self.next_seq);
            self.next_seq += 1;
            let file = WrittenFile {
                path,
                scope,
                rows: rows as u64,
                bytes: bytes.len() as u64,
                min_ts,
                max_ts,
            };
            self.store
                .put(&file.staged(), PutPayload::from(bytes))
                .await?;
            written.push(file);
        }
        Ok(written)
    }
}

/// Writes being encoded at once, in the process: one per core.
static ENCODERS: std::sync::LazyLock<tokio::sync::Semaphore> = std::sync::LazyLock::new(|| {
    tokio::sync::Semaphore::new(
        std::thread::available_parallelism()
            .map(std::num::NonZero::get)
            .unwrap_or(2),
    )
});

pub fn encode_parquet(batch: &RecordBatch) -> Result<Vec<u8>> {
    let mut buffer = Vec::with_capacity(batch.get_array_memory_size() / 4);
    let mut writer =
        ArrowWriter::try_new(&mut buffer, batch.schema(), Some(writer_properties(batch)))?;
    writer.write(batch)?;
    writer.close()?;
    Ok(buffer)
}

fn time_column(
    table: Table,
    batch: &RecordBatch,
) -> Result<arrow::array::TimestampMicrosecondArray> {
    let column = batch.column_by_name(table.time_column()).ok_or_else(|| {
        LakeError::Invalid(format!(
            "{table}: batch has no column {}",
            table.time_column()
        ))
    })?;
    if column.null_count() > 0 {
        return Err(LakeError::Invalid(format!(
            "{table}: null {} in a landed row",
            table.time_column()
        )));
    }
    Ok(column.as_primitive::<TimestampMicrosecondType>().clone())
}

/// The UTC day of a time; a time no date can be written for (the parsers reject them before
/// they get here) is an error, never a panic.
fn day_of(micros: i64) -> Result<NaiveDate> {
    DateTime::from_timestamp_micros(micros.div_euclid(MICROS_PER_DAY) * MICROS_PER_DAY)
        .map(|t| t.date_naive())
        .ok_or_else(|| {
            LakeError::Invalid(format!(
                "{micros} µs since the epoch is outside the dates the lake can partition by"
            ))
        })
}

/// The scope of each row as text (`value|value`; the day for derived tables), or `None` for
/// unscoped tables.
fn scope_keys(table: Table, batch: &RecordBatch) -> Result<Option<Vec<String>>> {
    if table.is_derived() {
        let times = time_column(table, batch)?;
        return Ok(Some(
            times
                .values()
                .iter()
                .map(|t| day_of(*t).map(|day| day.to_string()))
                .collect::<Result<_>>()?,
        ));
    }
    if table.scope_columns().is_empty() {
        return Ok(None);
    }
    let options = FormatOptions::default().with_null("");
    let formatters = table
        .scope_columns()
        .iter()
        .map(|name| {
            let column = batch
                .column_by_name(name)
                .expect("schema has scope columns");
            ArrayFormatter::try_new(column.as_ref(), &options)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let keys = (0..batch.num_rows())
        .map(|row| {
            formatters
                .iter()
                .map(|f| f.value(row).to_string())
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect();
    Ok(Some(keys))
}

fn split_by_day_and_scope(
    table: Table,
    batch: &RecordBatch,
) -> Result<Vec<(NaiveDate, Option<String>, RecordBatch)>> {
    let times = time_column(table, batch)?;
    let scopes = scope_keys(table, batch)?;
    let mut groups: BTreeMap<(i64, Option<&str>), Vec<u32>> = BTreeMap::new();
    for row in 0..batch.num_rows() {
        let day = times.value(row).div_euclid(MICROS_PER_DAY);
        let scope = scopes.as_ref().map(|s| s[row].as_str());
        groups.entry((day, scope)).or_default().push(row as u32);
    }
    if groups.len() == 1 {
        let ((day, scope), _) = groups.into_iter().next().expect("one group");
        return Ok(vec![(
            day_of(day.saturating_mul(MICROS_PER_DAY))?,
            scope.map(str::to_string),
            batch.clone(),
        )]);
    }
    groups
        .into_iter()
        .map(|((day, scope), rows)| {
            let part = take_record_batch(batch, &UInt32Array::from(rows))?;
            Ok((
                day_of(day.saturating_mul(MICROS_PER_DAY))?,
                scope.map(str::to_string),
                part,
            ))
        })
        .collect()
}

fn sort_rows(table: Table, batch: &RecordBatch) -> Result<RecordBatch> {
    let columns: Vec<SortColumn> = table
        .sort_columns()
        .iter()
        .map(|name| SortColumn {
            values: Arc::clone(batch.column_by_name(name).expect("sort column")) as ArrayRef,
            options: None,
        })
        .collect();
    let indices = lexsort_to_indices(&columns, None)?;
    Ok(take_record_batch(batch, &indices)?)
}

fn time_range(table: Table, batch: &RecordBatch) -> (i64, i64) {
    let times = time_column(table, batch).expect("checked before");
    let min = arrow::compute::min(&times).expect("non-empty");
    let max = arrow::compute::max(&times).expect("non-empty");
    (min, max)
}

#[cfg(test)]
mod tests;
