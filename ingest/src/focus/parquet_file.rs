//! The Parquet container: every column read as the text a CSV export would hold, then through the
//! same rules.

use arrow::array::{Array, ArrayRef, AsArray, MapArray, StringArray};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::{Map, Value as Json};

use crate::error::IngestError;
use crate::record::{ParseContext, Sink};

use super::FocusStats;
use super::rows::{LineWriter, json_text};

pub(super) fn parse_parquet(
    file: Bytes,
    ctx: &ParseContext,
    sink: &mut dyn Sink,
) -> Result<FocusStats, IngestError> {
    let not_parquet = |error: parquet::errors::ParquetError| IngestError::Format {
        origin: ctx.origin.clone(),
        reason: format!("starts like Parquet but cannot be read as Parquet: {error}"),
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(not_parquet)?;
    let headers: Vec<String> = builder
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    let mut lines = LineWriter::new(headers.clone(), ctx)?;
    let mut line = 0;
    // Rows decoded at a time; landed batches are still cut at `ctx.limits.batch_rows`.
    const DECODED_ROWS: usize = 8192;
    for batch in builder
        .with_batch_size(DECODED_ROWS)
        .build()
        .map_err(not_parquet)?
    {
        let batch = batch?;
        let columns = batch
            .columns()
            .iter()
            .map(column_text)
            .collect::<Result<Vec<_>, _>>()?;
        for row in 0..batch.num_rows() {
            line += 1;
            let fields: Vec<Option<&str>> = columns
                .iter()
                .map(|c| c.is_valid(row).then(|| c.value(row)))
                .collect();
            // A rejected row is quarantined as a JSON object {column: value}.
            let raw = || {
                let object: Map<String, Json> = (headers.iter().zip(&fields))
                    .map(|(header, field)| (header.clone(), json_text(*field)))
                    .collect();
                Json::Object(object).to_string()
            };
            lines.push(line, &fields, &raw, sink)?;
        }
    }
    lines.finish(sink)
}

/// A Parquet column as the text a CSV export would hold, so both containers go through the same
/// rules: values as Arrow displays them (RFC 3339 timestamps, exact decimals, floats in their
/// shortest round-trip form), and maps (how AWS writes `Tags`) as JSON objects.
fn column_text(column: &ArrayRef) -> Result<StringArray, IngestError> {
    if let Some(map) = column.as_map_opt() {
        return map_as_json(map);
    }
    // A zoned timestamp holds UTC instants: shown without its zone it reads as the UTC it is,
    // which is how the FOCUS date rules read a naive time.
    let column = match column.data_type() {
        DataType::Timestamp(unit, Some(_)) => cast(column, &DataType::Timestamp(*unit, None))?,
        _ => column.clone(),
    };
    let formatter = ArrayFormatter::try_new(column.as_ref(), &FormatOptions::default())?;
    Ok((0..column.len())
        .map(|i| column.is_valid(i).then(|| formatter.value(i).to_string()))
        .collect())
}

fn map_as_json(map: &MapArray) -> Result<StringArray, IngestError> {
    let options = FormatOptions::default();
    let keys = ArrayFormatter::try_new(map.keys().as_ref(), &options)?;
    let values = ArrayFormatter::try_new(map.values().as_ref(), &options)?;
    let offsets = map.value_offsets();
    let object = |row: usize| {
        let entries = offsets[row] as usize..offsets[row + 1] as usize;
        let object: Map<String, Json> = entries
            .map(|i| {
                let value = map
                    .values()
                    .is_valid(i)
                    .then(|| values.value(i).to_string());
                (keys.value(i).to_string(), json_text(value.as_deref()))
            })
            .collect();
        Json::Object(object).to_string()
    };
    Ok((0..map.len())
        .map(|row| map.is_valid(row).then(|| object(row)))
        .collect())
}
