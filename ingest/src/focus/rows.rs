//! Input lines, whatever their container, → `billing_lines` batches: the one place where the
//! FOCUS rules are applied to a line.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, Decimal128Builder, Int64Builder, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow::record_batch::RecordBatch;
use gpuledger_lake::tables::{self, Table};
use serde_json::{Map, Value as Json};

use crate::error::IngestError;
use crate::record::{ParseContext, Rejection, Sink};

use super::columns::Presence::Required;
use super::columns::Rule::{self, Allowed, Currency, KeyValue, Number, Text, Time};
use super::columns::{FOCUS_COLUMNS, Layout, PERIODS, column_index, rejects_when_malformed};
use super::values::{Outcome, Typed, convert, micros_text};
use super::{FocusStats, INVALID_KEY};

enum ColumnBuilder {
    Text(StringBuilder),
    Time(TimestampMicrosecondBuilder),
    Number(Decimal128Builder),
}

impl ColumnBuilder {
    fn for_rule(rule: Rule) -> Self {
        match rule {
            Text | Allowed(_) | KeyValue | Currency => Self::Text(StringBuilder::new()),
            Time => {
                Self::Time(TimestampMicrosecondBuilder::new().with_data_type(tables::timestamp()))
            }
            Number => Self::Number(Decimal128Builder::new().with_data_type(tables::money())),
        }
    }

    pub(super) fn append(&mut self, value: Option<&Typed>) {
        match (self, value) {
            (Self::Text(b), Some(Typed::Text(text))) => b.append_value(text),
            (Self::Time(b), Some(Typed::Time(micros))) => b.append_value(*micros),
            (Self::Number(b), Some(Typed::Number(units))) => b.append_value(*units),
            (Self::Text(b), None) => b.append_null(),
            (Self::Time(b), None) => b.append_null(),
            (Self::Number(b), None) => b.append_null(),
            _ => unreachable!("a rule's values go to the builder made for that rule"),
        }
    }

    pub(super) fn finish(&mut self) -> ArrayRef {
        match self {
            Self::Text(b) => Arc::new(b.finish()),
            Self::Time(b) => Arc::new(b.finish()),
            Self::Number(b) => Arc::new(b.finish()),
        }
    }
}

/// Turns input lines, whatever their container, into `billing_lines` batches: the one place
/// where the FOCUS rules are applied.
pub(super) struct LineWriter<'c> {
    ctx: &'c ParseContext,
    pub(super) layout: Layout,
    columns: Vec<ColumnBuilder>,
    extra_columns: StringBuilder,
    source_file: StringBuilder,
    source_line: Int64Builder,
    rows: usize,
    stats: FocusStats,
    /// Whether an input column with no value lands in `extra_columns` as `null` (a FOCUS
    /// export's own columns) or not at all (the mostly empty columns of a provider-native bill).
    null_extras: bool,
}

impl<'c> LineWriter<'c> {
    pub(super) fn new(headers: Vec<String>, ctx: &'c ParseContext) -> Result<Self, IngestError> {
        let (layout, missing_mandatory_columns) = Layout::new(headers, &ctx.origin)?;
        Ok(Self {
            ctx,
            layout,
            columns: FOCUS_COLUMNS
                .iter()
                .map(|c| ColumnBuilder::for_rule(c.rule))
                .collect(),
            extra_columns: StringBuilder::new(),
            source_file: StringBuilder::new(),
            source_line: Int64Builder::new(),
            rows: 0,
            stats: FocusStats {
                missing_mandatory_columns,
                ..FocusStats::default()
            },
            null_extras: true,
        })
    }

    /// A writer for lines translated from a provider-native bill (`native`): `headers` are the
    /// translation's FOCUS columns, and empty native columns are left out of `extra_columns`.
    pub(super) fn translated(
        headers: Vec<String>,
        ctx: &'c ParseContext,
    ) -> Result<Self, IngestError> {
        Ok(Self {
            null_extras: false,
            ..Self::new(headers, ctx)?
        })
    }

    /// Applies the FOCUS rules to one line (`fields` in header order, `None` for null) and lands
    /// or rejects it; `raw` renders the line for the quarantine.
    pub(super) fn push(
        &mut self,
        line: u64,
        fields: &[Option<&str>],
        raw: &dyn Fn() -> String,
        sink: &mut dyn Sink,
    ) -> Result<(), IngestError> {
        let labels = std::mem::take(&mut self.layout.headers);
        let pushed = self.push_labelled(line, fields, &labels, raw, sink);
        self.layout.headers = labels;
        pushed
    }

    /// [`push`](Self::push) with the name each field goes by in rejections and in
    /// `extra_columns` (`labels`, in header order): the native column a translated value came
    /// from.
    pub(super) fn push_labelled<L: AsRef<str>>(
        &mut self,
        line: u64,
        fields: &[Option<&str>],
        labels: &[L],
        raw: &dyn Fn() -> String,
        sink: &mut dyn Sink,
    ) -> Result<(), IngestError> {
        let mut staged: Vec<Option<Typed>> = vec![None; FOCUS_COLUMNS.len()];
        let mut extra = Map::new();
        let mut invalid = Map::new();
        let mut unlisted = false;
        // (FOCUS column, input header, reason) for the values the ledger cannot do without.
        let mut problems: Vec<(usize, &str, String)> = Vec::new();
        let inputs = labels.iter().zip(&self.layout.targets).zip(fields);
        for ((header, target), text) in inputs {
            let header = header.as_ref();
            let text = text.filter(|t| !t.is_empty());
            let Some(index) = *target else {
                if text.is_some() || self.null_extras {
                    extra.insert(header.to_string(), json_text(text));
                }
                continue;
            };
            let required = FOCUS_COLUMNS[index].presence == Required;
            let outcome = match text {
                Some(text) => convert(
                    FOCUS_COLUMNS[index].rule,
                    text,
                    self.ctx.date_format.as_deref(),
                ),
                None if required => Outcome::Invalid("is null, but every line needs it".into()),
                None => continue,
            };
            match outcome {
                Outcome::Value(value) => staged[index] = Some(value),
                Outcome::Unlisted(value) => {
                    staged[index] = Some(value);
                    unlisted = true;
                }
                Outcome::Invalid(reason) if required || rejects_when_malformed(index) => {
                    problems.push((index, header, reason));
                }
                Outcome::Invalid(_) => {
                    invalid.insert(
                        header.to_string(),
                        Json::String(text.unwrap_or_default().into()),
                    );
                }
            }
        }

        for (start, end) in PERIODS {
            let (start, end) = (column_index(start), column_index(end));
            if let (Some(Typed::Time(from)), Some(Typed::Time(to))) = (&staged[start], &staged[end])
                && to < from
            {
                let header = self
                    .layout
                    .targets
                    .iter()
                    .position(|target| *target == Some(end))
                    .map_or(FOCUS_COLUMNS[end].names[0], |i| labels[i].as_ref());
                problems.push((
                    end,
                    header,
                    format!(
                        "ends before it starts ({} before {} {})",
                        micros_text(*to),
                        FOCUS_COLUMNS[start].names[0],
                        micros_text(*from)
                    ),
                ));
            }
        }

        if !problems.is_empty() {
            // Named in schema order (ChargePeriodStart, BilledCost, EffectiveCost), all at once.
            problems.sort_by_key(|(index, _, _)| *index);
            let (_, field, first) = &problems[0];
            let mut reason = first.clone();
            for (_, other, why) in &problems[1..] {
                reason.push_str(&format!("; also {other}: {why}"));
            }
            return self.reject(Rejection::new(line, *field, reason, &raw()), sink);
        }

        for (builder, value) in self.columns.iter_mut().zip(&staged) {
            builder.append(value.as_ref());
        }
        if !invalid.is_empty() {
            extra.insert(INVALID_KEY.to_string(), Json::Object(invalid));
            self.stats.lines_with_invalid_values += 1;
        }
        if extra.is_empty() {
            self.extra_columns.append_null();
        } else {
            self.extra_columns
                .append_value(Json::Object(extra).to_string());
        }
        self.source_file.append_value(&self.ctx.origin);
        self.source_line.append_value(line as i64);
        self.stats.lines_with_unlisted_values += u64::from(unlisted);
        self.stats.records_read += 1;
        self.stats.rows_landed += 1;
        self.rows += 1;
        if self.rows >= self.ctx.limits.batch_rows.max(1) {
            self.flush(sink)?;
        }
        Ok(())
    }

    /// Sends a line that cannot land to the quarantine.
    pub(super) fn reject(
        &mut self,
        rejection: Rejection,
        sink: &mut dyn Sink,
    ) -> Result<(), IngestError> {
        self.stats.records_read += 1;
        self.stats.rejected += 1;
        sink.reject(rejection)
    }

    fn flush(&mut self, sink: &mut dyn Sink) -> Result<(), IngestError> {
        if self.rows == 0 {
            return Ok(());
        }
        let mut arrays: Vec<ArrayRef> =
            self.columns.iter_mut().map(ColumnBuilder::finish).collect();
        arrays.push(Arc::new(self.extra_columns.finish()));
        arrays.push(Arc::new(self.source_file.finish()));
        arrays.push(Arc::new(self.source_line.finish()));
        self.rows = 0;
        sink.accept(
            Table::BillingLines,
            RecordBatch::try_new(Table::BillingLines.schema(), arrays)?,
        )
    }

    pub(super) fn finish(mut self, sink: &mut dyn Sink) -> Result<FocusStats, IngestError> {
        self.flush(sink)?;
        Ok(self.stats)
    }
}

pub(super) fn json_text(text: Option<&str>) -> Json {
    text.map_or(Json::Null, |text| Json::String(text.to_string()))
}
