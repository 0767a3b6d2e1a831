//! Writing query results as a table, CSV, JSON, an Arrow IPC stream or Parquet: for the CLI and
//! for `POST /v1/sql`.

use std::io::Write;

use arrow::compute::cast;
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use gpuledger_query::columns::retyped;

use crate::cli::OutputFormat;

impl OutputFormat {
    /// The media type of the format over HTTP.
    pub fn media_type(self) -> &'static str {
        match self {
            OutputFormat::Table => "text/plain; charset=utf-8",
            OutputFormat::Csv => "text/csv; charset=utf-8",
            OutputFormat::Json => "application/json",
            OutputFormat::Arrow => "application/vnd.apache.arrow.stream",
            OutputFormat::Parquet => "application/vnd.apache.parquet",
        }
    }
}

pub fn write_batches<W: Write + Send>(
    out: &mut W,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    format: OutputFormat,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    match format {
        OutputFormat::Table => writeln!(
            out,
            "{}",
            arrow::util::pretty::pretty_format_batches(batches)?
        )?,
        OutputFormat::Csv => {
            let mut writer = arrow::csv::WriterBuilder::new()
                .with_header(true)
                .build(&mut *out);
            if batches.is_empty() {
                // The header still says which columns there would have been.
                writer.write(&RecordBatch::new_empty(schema.clone()))?;
            }
            for batch in batches {
                writer.write(batch)?;
            }
        }
        OutputFormat::Json => {
            // Every row carries every column: nulls are written, not left out.
            let mut writer = arrow::json::WriterBuilder::new()
                .with_explicit_nulls(true)
                .build::<_, arrow::json::writer::JsonArray>(&mut *out);
            writer.write_batches(&batches.iter().collect::<Vec<_>>())?;
            writer.finish()?;
            writeln!(out)?;
        }
        OutputFormat::Arrow => {
            let (schema, batches) = plain_strings(schema, batches)?;
            let mut writer = arrow::ipc::writer::StreamWriter::try_new(&mut *out, &schema)?;
            for batch in &batches {
                writer.write(batch)?;
            }
            writer.finish()?;
        }
        OutputFormat::Parquet => {
            let (schema, batches) = plain_strings(schema, batches)?;
            let mut writer = parquet::arrow::ArrowWriter::try_new(&mut *out, schema, None)?;
            for batch in &batches {
                writer.write(batch)?;
            }
            writer.close()?;
        }
    }
    Ok(())
}

/// Results with their text as plain strings (`Utf8`): lake tables are read as string views,
/// which Arrow readers older than the views (format 1.4) cannot decode, and which would embed
/// view types in a Parquet file's Arrow schema. What a client receives keeps the types it
/// always had, whatever the engine reads internally.
fn plain_strings(
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Result<(SchemaRef, Vec<RecordBatch>), arrow::error::ArrowError> {
    let plain = retyped(schema, |data_type| match data_type {
        DataType::Utf8View => Some(DataType::Utf8),
        DataType::BinaryView => Some(DataType::Binary),
        _ => None,
    });
    // A column already of its type is cast without a copy.
    let batches = batches
        .iter()
        .map(|batch| {
            let columns = batch
                .columns()
                .iter()
                .zip(plain.fields())
                .map(|(column, field)| cast(column, field.data_type()))
                .collect::<Result<Vec<_>, _>>()?;
            RecordBatch::try_new(plain.clone(), columns)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((plain, batches))
}

/// The FOCUS export (`gpuledger export focus`, `GET /v1/export/focus`): CSV with FOCUS's date
/// format (`YYYY-MM-DDTHH:mm:ssZ`), or Parquet.
pub fn write_focus<W: Write + Send>(
    out: &mut W,
    batches: &[RecordBatch],
    format: crate::cli::FocusFormat,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let schema = gpuledger_query::focus_export::schema();
    match format {
        crate::cli::FocusFormat::Csv => {
            let mut writer = arrow::csv::WriterBuilder::new()
                .with_header(true)
                .with_timestamp_tz_format("%Y-%m-%dT%H:%M:%SZ".to_string())
                .build(&mut *out);
            writer.write(&RecordBatch::new_empty(schema))?;
            for batch in batches {
                writer.write(batch)?;
            }
        }
        crate::cli::FocusFormat::Parquet => {
            write_batches(out, &schema, batches, OutputFormat::Parquet)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{AsArray, Int64Array, StringViewArray};
    use arrow::datatypes::{Field, Schema};

    use super::*;

    /// A result read from the lake (text as views) reaches Arrow and Parquet clients as plain
    /// strings, values and nulls intact; other columns keep their types.
    #[test]
    fn arrow_and_parquet_results_carry_plain_strings() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("node", DataType::Utf8View, true),
            Field::new("gpus", DataType::Int64, false),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringViewArray::from(vec![
                    Some("dgx-001"),
                    None,
                    Some("a node name longer than twelve bytes"),
                ])),
                Arc::new(Int64Array::from(vec![8, 0, 1])),
            ],
        )
        .unwrap();
        let expected = [
            Some("dgx-001"),
            None,
            Some("a node name longer than twelve bytes"),
        ];
        let mut arrow_body = Vec::new();
        write_batches(
            &mut arrow_body,
            &schema,
            std::slice::from_ref(&batch),
            OutputFormat::Arrow,
        )
        .unwrap();
        let reader =
            arrow::ipc::reader::StreamReader::try_new(std::io::Cursor::new(arrow_body), None)
                .unwrap();
        assert_eq!(reader.schema().field(0).data_type(), &DataType::Utf8);
        assert_eq!(reader.schema().field(1).data_type(), &DataType::Int64);
        let read: Vec<RecordBatch> = reader.map(Result::unwrap).collect();
        let nodes: Vec<Option<&str>> = read[0].column(0).as_string::<i32>().iter().collect();
        assert_eq!(nodes, expected);

        let mut parquet_body = Vec::new();
        write_batches(&mut parquet_body, &schema, &[batch], OutputFormat::Parquet).unwrap();
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReader::try_new(
            bytes::Bytes::from(parquet_body),
            1024,
        )
        .unwrap();
        let read: Vec<RecordBatch> = reader.map(Result::unwrap).collect();
        assert_eq!(read[0].schema().field(0).data_type(), &DataType::Utf8);
        let nodes: Vec<Option<&str>> = read[0].column(0).as_string::<i32>().iter().collect();
        assert_eq!(nodes, expected);
    }
}
