//! Printing query results as a table, CSV or JSON.

use std::io::Write;

use arrow::record_batch::RecordBatch;

use crate::cli::OutputFormat;

pub fn write_batches(
    out: &mut dyn Write,
    batches: &[RecordBatch],
    format: OutputFormat,
) -> Result<(), Box<dyn std::error::Error>> {
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
    }
    Ok(())
}
