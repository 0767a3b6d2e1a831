//! Writing query results as a table, CSV, JSON, an Arrow IPC stream or Parquet: for the CLI and
//! for `POST /v1/sql`.

use std::io::Write;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

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
            let mut writer = arrow::ipc::writer::StreamWriter::try_new(&mut *out, schema)?;
            for batch in batches {
                writer.write(batch)?;
            }
            writer.finish()?;
        }
        OutputFormat::Parquet => {
            let mut writer = parquet::arrow::ArrowWriter::try_new(&mut *out, schema.clone(), None)?;
            for batch in batches {
                writer.write(batch)?;
            }
            writer.close()?;
        }
    }
    Ok(())
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
