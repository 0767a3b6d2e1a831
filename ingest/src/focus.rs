//! FOCUS 1.0–1.3 billing exports, CSV or Parquet, into `billing_lines`.
//!
//! Real exports bend the FOCUS value formats (FORMATS.md §1.5). The reader takes what is
//! unambiguous and refuses to guess:
//! - columns are matched case-insensitively, the 1.3 renames (`ServiceProviderName`,
//!   `HostProviderName`) as aliases; any other column lands in `extra_columns`;
//! - nulls are real nulls, the unquoted `NULL` marker and empty strings;
//! - date-times are ISO 8601 with `T` or a space, with or without `Z` and fraction (naive means UTC,
//!   as FOCUS requires); any other spelling (`5/1/25`) only through `ParseContext::date_format`;
//! - numbers follow the FOCUS Numeric Format (decimal or E-notation), read exactly with
//!   rust_decimal and rounded half to even to 12 places; `$10,000.00` is refused, not guessed at;
//! - allowed values are matched case-insensitively and written in the spec's spelling; a value
//!   outside the list is kept as written and counted.
//!
//! A line is rejected only when the ledger cannot use it: no readable `ChargePeriodStart` (its
//! partition time), `BilledCost` or `EffectiveCost` (the costs the ledger balances). Any other
//! value that breaks its format lands as null with its text kept under [`INVALID_KEY`]: a cost
//! line is never lost for a dimension.
//!
//! A whole input is refused when its header lacks `ChargePeriodStart`, `ChargePeriodEnd`,
//! `BilledCost` or `EffectiveCost`: without them no line has a cost in time, so the file is not
//! FOCUS. The other FOCUS Mandatory columns it lacks are said beside what landed.

use std::borrow::Cow;
use std::io::{self, BufRead, Read};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, Decimal128Builder, Int64Builder, MapArray, StringArray,
    StringBuilder, TimestampMicrosecondBuilder,
};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use bytes::Bytes;
use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Utc};
use gpuledger_lake::tables::{self, MONEY_PRECISION, MONEY_SCALE, Table};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use rust_decimal::{Decimal, RoundingStrategy};
use serde_json::{Map, Value as Json};

use crate::error::IngestError;
use crate::record::{ParseContext, Rejection, Sink};

#[cfg(test)]
mod tests;

/// The key in `extra_columns` under which values that broke their FOCUS format are kept, as an
/// object `{input header: text as written}`; their typed column is null. A malformed `ListCost`
/// (or `SkuPriceDetails`, `BillingPeriodEnd`, …) thus keeps its cost line in the ledger and its text in
/// sight, in the one place that already holds what the typed columns cannot, under a key that
/// no FOCUS column or `x_` extension uses.
pub const INVALID_KEY: &str = "_invalid";

/// What one FOCUS input gave.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FocusStats {
    /// Data records read: CSV records after the header, or Parquet rows.
    pub records_read: u64,
    pub rows_landed: u64,
    pub rejected: u64,
    /// Landed lines with a value that broke its FOCUS format (kept under [`INVALID_KEY`]).
    pub lines_with_invalid_values: u64,
    /// Landed lines with a value outside a FOCUS allowed-value list, kept as written.
    pub lines_with_unlisted_values: u64,
    /// FOCUS 1.2 Mandatory columns the input lacks; its lines land with nulls there.
    pub missing_mandatory_columns: Vec<&'static str>,
}

/// Reads a FOCUS export, CSV or Parquet (told apart by the Parquet magic `PAR1`), into
/// `billing_lines` batches of at most `ctx.batch_rows` rows. A whole input that is not FOCUS (no
/// `ChargePeriodStart`, `ChargePeriodEnd`, `BilledCost` or `EffectiveCost` column) is an [`IngestError::Format`]
/// that says which provider-native format it looks like, when it is a known one.
pub fn parse(
    input: &mut dyn BufRead,
    ctx: &ParseContext,
    sink: &mut dyn Sink,
) -> Result<FocusStats, IngestError> {
    const PARQUET_MAGIC: &[u8] = b"PAR1";
    let read_error = |source| IngestError::Read {
        origin: ctx.origin.clone(),
        source,
    };
    let mut head = Vec::with_capacity(PARQUET_MAGIC.len());
    (&mut *input)
        .take(PARQUET_MAGIC.len() as u64)
        .read_to_end(&mut head)
        .map_err(read_error)?;
    if head == PARQUET_MAGIC {
        // Parquet keeps its footer at the end: the file is read whole.
        input.read_to_end(&mut head).map_err(read_error)?;
        parse_parquet(Bytes::from(head), ctx, sink)
    } else {
        parse_csv(head.as_slice().chain(input), ctx, sink)
    }
}

/// How a FOCUS column's text becomes its typed value.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rule {
    Text,
    /// One of these values, matched case-insensitively and written as listed here.
    Allowed(&'static [&'static str]),
    /// A JSON object (FOCUS Key-Value Format), stored re-serialised (compact, keys sorted).
    KeyValue,
    /// FOCUS Date/Time.
    Time,
    Number,
    /// FOCUS Currency Format for a national currency: an ISO 4217 code, three letters, stored
    /// upper-case. A line whose currency is not one cannot be summed with any other: rejected.
    Currency,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Presence {
    /// The ledger cannot use a line without it: the header must have it, every line a value.
    Required,
    /// FOCUS Mandatory, and the ledger spreads a charge over it: the header must have it (an
    /// export without it is not FOCUS), but a line whose value is null or malformed still lands,
    /// its text kept, and is priced as an instant at its start.
    InHeader,
    /// FOCUS 1.2 Mandatory: an input without it still lands, and the gap is reported.
    Mandatory,
    Optional,
}

/// A FOCUS column; its `billing_lines` column is its first name in snake_case.
struct FocusColumn {
    /// Its FOCUS names: the 1.0–1.2 name first, then any 1.3 replacement.
    names: &'static [&'static str],
    rule: Rule,
    presence: Presence,
}

const fn focus(names: &'static [&'static str], rule: Rule, presence: Presence) -> FocusColumn {
    FocusColumn {
        names,
        rule,
        presence,
    }
}

const CHARGE_CATEGORIES: &[&str] = &["Usage", "Purchase", "Tax", "Credit", "Adjustment"];
const CHARGE_CLASSES: &[&str] = &["Correction"];
const CHARGE_FREQUENCIES: &[&str] = &["One-Time", "Recurring", "Usage-Based"];
const PRICING_CATEGORIES: &[&str] = &["Standard", "Dynamic", "Committed", "Other"];
const COMMITMENT_DISCOUNT_CATEGORIES: &[&str] = &["Spend", "Usage"];
const USE_STATUSES: &[&str] = &["Used", "Unused"];
const SERVICE_CATEGORIES: &[&str] = &[
    "AI and Machine Learning",
    "Analytics",
    "Business Applications",
    "Compute",
    "Databases",
    "Developer Tools",
    "Multicloud",
    "Identity",
    "Integration",
    "Internet of Things",
    "Management and Governance",
    "Media",
    "Migration",
    "Mobile",
    "Networking",
    "Security",
    "Storage",
    "Web",
    "Other",
];

use Presence::{InHeader, Mandatory, Optional, Required};
use Rule::{Allowed, Currency, KeyValue, Number, Text, Time};

/// The FOCUS columns of `billing_lines`, in its schema order (a test holds them together); the
/// schema ends with `extra_columns`, `source_file` and `source_line`, which are not FOCUS's.
const FOCUS_COLUMNS: &[FocusColumn] = &[
    focus(&["BillingAccountId"], Text, Mandatory),
    focus(&["BillingAccountName"], Text, Mandatory),
    focus(&["BillingAccountType"], Text, Optional),
    focus(&["BillingCurrency"], Currency, Mandatory),
    focus(&["BillingPeriodStart"], Time, Mandatory),
    focus(&["BillingPeriodEnd"], Time, Mandatory),
    focus(&["ChargePeriodStart"], Time, Required),
    focus(&["ChargePeriodEnd"], Time, InHeader),
    focus(&["ChargeCategory"], Allowed(CHARGE_CATEGORIES), Mandatory),
    focus(&["ChargeClass"], Allowed(CHARGE_CLASSES), Mandatory),
    focus(&["ChargeDescription"], Text, Mandatory),
    focus(&["ChargeFrequency"], Allowed(CHARGE_FREQUENCIES), Optional),
    focus(&["BilledCost"], Number, Required),
    focus(&["EffectiveCost"], Number, Required),
    focus(&["ListCost"], Number, Mandatory),
    focus(&["ContractedCost"], Number, Mandatory),
    focus(&["ListUnitPrice"], Number, Optional),
    focus(&["ContractedUnitPrice"], Number, Optional),
    focus(&["PricingQuantity"], Number, Mandatory),
    focus(&["PricingUnit"], Text, Mandatory),
    focus(&["PricingCategory"], Allowed(PRICING_CATEGORIES), Optional),
    focus(&["PricingCurrency"], Text, Optional),
    focus(&["ConsumedQuantity"], Number, Optional),
    focus(&["ConsumedUnit"], Text, Optional),
    focus(&["ProviderName", "ServiceProviderName"], Text, Mandatory),
    focus(&["PublisherName", "HostProviderName"], Text, Mandatory),
    focus(&["InvoiceIssuerName"], Text, Mandatory),
    focus(&["InvoiceId"], Text, Optional),
    focus(&["ServiceCategory"], Allowed(SERVICE_CATEGORIES), Mandatory),
    focus(&["ServiceSubcategory"], Text, Optional),
    focus(&["ServiceName"], Text, Mandatory),
    focus(&["ResourceId"], Text, Optional),
    focus(&["ResourceName"], Text, Optional),
    focus(&["ResourceType"], Text, Optional),
    focus(&["RegionId"], Text, Optional),
    focus(&["RegionName"], Text, Optional),
    focus(&["AvailabilityZone"], Text, Optional),
    focus(&["SkuId"], Text, Optional),
    focus(&["SkuPriceId"], Text, Optional),
    focus(&["SkuMeter"], Text, Optional),
    focus(&["SkuPriceDetails"], KeyValue, Optional),
    focus(&["SubAccountId"], Text, Optional),
    focus(&["SubAccountName"], Text, Optional),
    focus(&["SubAccountType"], Text, Optional),
    focus(&["CommitmentDiscountId"], Text, Optional),
    focus(&["CommitmentDiscountName"], Text, Optional),
    focus(
        &["CommitmentDiscountCategory"],
        Allowed(COMMITMENT_DISCOUNT_CATEGORIES),
        Optional,
    ),
    focus(&["CommitmentDiscountType"], Text, Optional),
    focus(
        &["CommitmentDiscountStatus"],
        Allowed(USE_STATUSES),
        Optional,
    ),
    focus(&["CommitmentDiscountQuantity"], Number, Optional),
    focus(&["CommitmentDiscountUnit"], Text, Optional),
    focus(&["CapacityReservationId"], Text, Optional),
    focus(
        &["CapacityReservationStatus"],
        Allowed(USE_STATUSES),
        Optional,
    ),
    focus(&["AllocatedMethodId"], Text, Optional),
    focus(&["AllocatedResourceId"], Text, Optional),
    focus(&["AllocatedResourceName"], Text, Optional),
    focus(&["AllocatedTags"], KeyValue, Optional),
    focus(&["Tags"], KeyValue, Optional),
];

/// Provider-native billing exports that get fed to a FOCUS reader by mistake, each recognised
/// by a column it always has.
const NATIVE_FORMATS: &[(&str, &str)] = &[
    (
        "lineItem/UsageStartDate",
        "an AWS Cost and Usage Report (legacy CUR)",
    ),
    (
        "line_item_usage_start_date",
        "an AWS Cost and Usage Report 2.0 (Data Exports)",
    ),
    (
        "lineItem/intervalUsageStart",
        "an Oracle Cloud (OCI) cost report",
    ),
    (
        "CostInBillingCurrency",
        "an Azure Enterprise Agreement (EA) cost export",
    ),
];

/// Where each input column goes.
struct Layout {
    headers: Vec<String>,
    /// Per input column: the index in [`FOCUS_COLUMNS`] it fills, or `None` for `extra_columns`.
    targets: Vec<Option<usize>>,
}

impl Layout {
    /// The input header that fills FOCUS column `index`, if one does.
    fn header_of(&self, index: usize) -> Option<&str> {
        self.targets
            .iter()
            .position(|target| *target == Some(index))
            .map(|position| self.headers[position].as_str())
    }

    /// Matches a header to the FOCUS columns (a second column for the same FOCUS column goes to
    /// `extra_columns`), or says why the input is not FOCUS. Also returns the FOCUS Mandatory
    /// columns it lacks.
    fn new(headers: Vec<String>, origin: &str) -> Result<(Self, Vec<&'static str>), IngestError> {
        let mut filled = vec![false; FOCUS_COLUMNS.len()];
        let mut targets = Vec::with_capacity(headers.len());
        for header in &headers {
            let name = header.trim();
            let target = FOCUS_COLUMNS
                .iter()
                .position(|c| c.names.iter().any(|n| n.eq_ignore_ascii_case(name)))
                .filter(|&index| !filled[index]);
            if let Some(index) = target {
                filled[index] = true;
            }
            targets.push(target);
        }
        let absent = |presences: &[Presence]| -> Vec<&'static str> {
            FOCUS_COLUMNS
                .iter()
                .zip(&filled)
                .filter(|(column, filled)| presences.contains(&column.presence) && !**filled)
                .map(|(column, _)| column.names[0])
                .collect()
        };
        let missing = absent(&[Required, InHeader]);
        if !missing.is_empty() {
            let missing = missing.join(", ");
            let native = NATIVE_FORMATS.iter().find(|(marker, _)| {
                headers
                    .iter()
                    .any(|header| header.trim().eq_ignore_ascii_case(marker))
            });
            let reason = match native {
                Some((_, kind)) => {
                    format!("looks like {kind}, not FOCUS: missing mandatory columns {missing}")
                }
                None => format!("not a FOCUS file: missing mandatory columns {missing}"),
            };
            return Err(IngestError::Format {
                origin: origin.to_string(),
                reason,
            });
        }
        Ok((Self { headers, targets }, absent(&[Mandatory])))
    }
}

/// A FOCUS value after its rule.
#[derive(Debug, Clone)]
enum Typed<'a> {
    Text(Cow<'a, str>),
    /// Microseconds since the epoch, UTC.
    Time(i64),
    /// Units of 10⁻¹² (the lake's money scale).
    Number(i128),
}

enum Outcome<'a> {
    Value(Typed<'a>),
    /// Outside the column's allowed values: kept as written.
    Unlisted(Typed<'a>),
    Invalid(String),
}

fn convert<'a>(rule: Rule, text: &'a str, date_format: Option<&str>) -> Outcome<'a> {
    match rule {
        Text => Outcome::Value(Typed::Text(Cow::Borrowed(text))),
        Allowed(values) => match values.iter().find(|v| v.eq_ignore_ascii_case(text.trim())) {
            Some(canonical) => Outcome::Value(Typed::Text(Cow::Borrowed(canonical))),
            None => Outcome::Unlisted(Typed::Text(Cow::Borrowed(text))),
        },
        KeyValue => match serde_json::from_str::<Json>(text) {
            Ok(object @ Json::Object(_)) => {
                Outcome::Value(Typed::Text(Cow::Owned(object.to_string())))
            }
            _ => Outcome::Invalid(format!(
                "'{text}' is not a JSON object (FOCUS Key-Value Format)"
            )),
        },
        Time => parse_datetime(text, date_format).map_or_else(Outcome::Invalid, |micros| {
            Outcome::Value(Typed::Time(micros))
        }),
        Number => parse_number(text).map_or_else(Outcome::Invalid, |units| {
            Outcome::Value(Typed::Number(units))
        }),
        Currency => {
            let code = text.trim();
            if code.len() == 3 && code.bytes().all(|b| b.is_ascii_alphabetic()) {
                Outcome::Value(Typed::Text(Cow::Owned(code.to_ascii_uppercase())))
            } else {
                Outcome::Invalid(format!(
                    "'{text}' is not a currency code (ISO 4217: three letters, e.g. USD)"
                ))
            }
        }
    }
}

fn micros_text(micros: i64) -> String {
    DateTime::from_timestamp_micros(micros).map_or_else(
        || micros.to_string(),
        |t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
    )
}

/// Optional columns whose malformed value rejects the line instead of landing it with the text
/// kept under [`INVALID_KEY`]: the currency (amounts in no currency cannot be summed with any
/// other) and the tags that say who pays (a cost whose tags cannot be read would be charged to
/// nobody without a word).
fn rejects_when_malformed(index: usize) -> bool {
    let column = &FOCUS_COLUMNS[index];
    column.rule == Currency || matches!(column.names[0], "Tags" | "AllocatedTags")
}

/// The position of a FOCUS column in `FOCUS_COLUMNS`, by its first name.
fn column_index(name: &str) -> usize {
    FOCUS_COLUMNS
        .iter()
        .position(|c| c.names[0] == name)
        .expect("a FOCUS column")
}

/// The (start, end) column pairs of a period: `*PeriodEnd` is exclusive, never before the start.
const PERIODS: [(&str, &str); 2] = [
    ("ChargePeriodStart", "ChargePeriodEnd"),
    ("BillingPeriodStart", "BillingPeriodEnd"),
];

/// A FOCUS Date/Time: ISO 8601 with `T` or a space, with or without fraction and offset (none
/// means UTC), or a bare date (midnight UTC); or, only when the caller names it, another format.
fn parse_datetime(text: &str, date_format: Option<&str>) -> Result<i64, String> {
    const ISO_WITHOUT_OFFSET: [&str; 3] =
        ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%d"];
    let trimmed = text.trim();
    let parsed = DateTime::parse_from_rfc3339(trimmed)
        .map(|t| t.to_utc())
        .ok()
        .or_else(|| {
            ISO_WITHOUT_OFFSET
                .iter()
                .find_map(|format| in_format(trimmed, format))
        })
        .or_else(|| date_format.and_then(|format| in_format(trimmed, format)));
    if let Some(time) = parsed
        && !crate::time::is_landable(time.timestamp_micros())
    {
        return Err(format!("'{text}' is outside 1970-01-01 to 9999-12-31"));
    }
    parsed
        .map(|t| t.timestamp_micros())
        .ok_or_else(|| match date_format {
            None => {
                format!("'{text}' is not an ISO 8601 date-time; pass a date format to accept it")
            }
            Some(format) => {
                format!(
                    "'{text}' is neither an ISO 8601 date-time nor in the date format '{format}'"
                )
            }
        })
}

/// `text` read with a chrono format: with an offset, else as UTC, else as a date at midnight UTC.
fn in_format(text: &str, format: &str) -> Option<DateTime<Utc>> {
    if let Ok(zoned) = DateTime::parse_from_str(text, format) {
        return Some(zoned.to_utc());
    }
    let naive = NaiveDateTime::parse_from_str(text, format)
        .ok()
        .or_else(|| {
            NaiveDate::parse_from_str(text, format)
                .ok()
                .map(|d| d.and_time(NaiveTime::MIN))
        })?;
    Some(naive.and_utc())
}

/// A FOCUS Numeric Format value (surrounding spaces tolerated), read exactly with rust_decimal —
/// never through f64 — and rounded half to even to the lake's 12 decimal places.
fn parse_number(text: &str) -> Result<i128, String> {
    let trimmed = text.trim();
    if !is_numeric_format(trimmed) {
        return Err(format!(
            "'{text}' is not a FOCUS number (Numeric Format: digits with an optional leading '-', \
             one decimal point and E-notation; no currency symbols, thousands separators or other \
             characters)"
        ));
    }
    let out_of_range = || {
        format!(
            "'{text}' does not fit a decimal of {MONEY_PRECISION} digits, {MONEY_SCALE} after the point"
        )
    };
    let exact = if trimmed.contains(['e', 'E']) {
        Decimal::from_scientific(trimmed)
    } else {
        Decimal::from_str_exact(trimmed)
    }
    .map_err(|_| out_of_range())?;
    let scale = MONEY_SCALE as u32;
    let rounded = exact.round_dp_with_strategy(scale, RoundingStrategy::MidpointNearestEven);
    rounded
        .mantissa()
        .checked_mul(10i128.pow(scale - rounded.scale()))
        .filter(|units| units.unsigned_abs() < 10u128.pow(u32::from(MONEY_PRECISION)))
        .ok_or_else(out_of_range)
}

/// `-?digits(.digits)?([eE][+-]?digits)?`: the FOCUS grammar, with the `+` exponent sign that
/// common float printers write.
fn is_numeric_format(text: &str) -> bool {
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    let (mantissa, exponent) = match text.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, Some(exponent)),
        None => (text, None),
    };
    let unsigned = mantissa.strip_prefix('-').unwrap_or(mantissa);
    let (integer, fraction) = match unsigned.split_once('.') {
        Some((integer, fraction)) => (integer, Some(fraction)),
        None => (unsigned, None),
    };
    digits(integer)
        && fraction.is_none_or(digits)
        && exponent.is_none_or(|e| digits(e.strip_prefix(['-', '+']).unwrap_or(e)))
}

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

    fn append(&mut self, value: Option<&Typed>) {
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

    fn finish(&mut self) -> ArrayRef {
        match self {
            Self::Text(b) => Arc::new(b.finish()),
            Self::Time(b) => Arc::new(b.finish()),
            Self::Number(b) => Arc::new(b.finish()),
        }
    }
}

/// Turns input lines, whatever their container, into `billing_lines` batches: the one place
/// where the FOCUS rules are applied.
struct LineWriter<'c> {
    ctx: &'c ParseContext,
    layout: Layout,
    columns: Vec<ColumnBuilder>,
    extra_columns: StringBuilder,
    source_file: StringBuilder,
    source_line: Int64Builder,
    rows: usize,
    stats: FocusStats,
}

impl<'c> LineWriter<'c> {
    fn new(headers: Vec<String>, ctx: &'c ParseContext) -> Result<Self, IngestError> {
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
        })
    }

    /// Applies the FOCUS rules to one line (`fields` in header order, `None` for null) and lands
    /// or rejects it; `raw` renders the line for the quarantine.
    fn push(
        &mut self,
        line: u64,
        fields: &[Option<&str>],
        raw: &dyn Fn() -> String,
        sink: &mut dyn Sink,
    ) -> Result<(), IngestError> {
        let mut staged: Vec<Option<Typed>> = vec![None; FOCUS_COLUMNS.len()];
        let mut extra = Map::new();
        let mut invalid = Map::new();
        let mut unlisted = false;
        // (FOCUS column, input header, reason) for the values the ledger cannot do without.
        let mut problems: Vec<(usize, &str, String)> = Vec::new();
        let inputs = self
            .layout
            .headers
            .iter()
            .zip(&self.layout.targets)
            .zip(fields);
        for ((header, target), text) in inputs {
            let text = text.filter(|t| !t.is_empty());
            let Some(index) = *target else {
                extra.insert(header.clone(), json_text(text));
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
                        header.clone(),
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
                    .header_of(end)
                    .unwrap_or(FOCUS_COLUMNS[end].names[0]);
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
        if self.rows >= self.ctx.batch_rows.max(1) {
            self.flush(sink)?;
        }
        Ok(())
    }

    /// Sends a line that cannot land to the quarantine.
    fn reject(&mut self, rejection: Rejection, sink: &mut dyn Sink) -> Result<(), IngestError> {
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

    fn finish(mut self, sink: &mut dyn Sink) -> Result<FocusStats, IngestError> {
        self.flush(sink)?;
        Ok(self.stats)
    }
}

fn parse_csv(
    input: impl Read,
    ctx: &ParseContext,
    sink: &mut dyn Sink,
) -> Result<FocusStats, IngestError> {
    // Byte records in flexible mode: the csv crate's only errors left are I/O errors.
    let csv_error = |error: csv::Error| IngestError::Read {
        origin: ctx.origin.clone(),
        source: error.into(),
    };
    // Flexible: a record with the wrong number of fields is one rejection, not the end of input.
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .from_reader(RecordTape::new(input));
    let headers: Vec<String> = reader
        .byte_headers()
        .map_err(csv_error)?
        .iter()
        .map(|h| String::from_utf8_lossy(h).into_owned())
        .collect();
    if headers.is_empty() {
        let reason = "empty input: expected a FOCUS CSV header or a Parquet file".to_string();
        return Err(IngestError::Format {
            origin: ctx.origin.clone(),
            reason,
        });
    }
    let mut lines = LineWriter::new(headers, ctx)?;
    let mut record = csv::ByteRecord::new();
    while reader.read_byte_record(&mut record).map_err(csv_error)? {
        let start = record
            .position()
            .expect("csv sets the position of every record read");
        let end = reader.position().byte();
        let (raw, line) = reader.get_ref().record(start, end);
        let raw_text = || String::from_utf8_lossy(raw).into_owned();
        let header_count = lines.layout.headers.len();
        if record.len() != header_count {
            let reason = format!(
                "has {} fields where the header has {header_count}",
                record.len()
            );
            lines.reject(Rejection::new(line, "(record)", reason, &raw_text()), sink)?;
        } else if let Some(bad) = record.iter().position(|f| std::str::from_utf8(f).is_err()) {
            let field = lines.layout.headers[bad].clone();
            lines.reject(
                Rejection::new(line, field, "is not valid UTF-8", &raw_text()),
                sink,
            )?;
        } else {
            let is_null_marker = |field: &[u8]| field.eq_ignore_ascii_case(b"NULL");
            let quoted = if record.iter().any(is_null_marker) {
                quoted_fields(raw)
            } else {
                Vec::new()
            };
            let fields: Vec<Option<&str>> = record
                .iter()
                .enumerate()
                .map(|(i, bytes)| {
                    let text = std::str::from_utf8(bytes).expect("checked above");
                    let null = is_null_marker(bytes) && !quoted.get(i).copied().unwrap_or(false);
                    (!null).then_some(text)
                })
                .collect();
            lines.push(line, &fields, &raw_text, sink)?;
        }
        reader.get_mut().forget_before(end);
    }
    lines.finish(sink)
}

fn json_text(text: Option<&str>) -> Json {
    text.map_or(Json::Null, |text| Json::String(text.to_string()))
}

/// Keeps the bytes the CSV reader has taken since the current record began, so that a rejection
/// shows the record exactly as written and a quoted `"NULL"` (a value) can be told from the
/// unquoted `NULL` marker, which the csv crate reads the same.
struct RecordTape<R> {
    inner: R,
    kept: Vec<u8>,
    /// Input offset of `kept[0]`.
    kept_from: u64,
}

impl<R> RecordTape<R> {
    /// Bytes already handled are dropped in chunks of this size, so the copy is amortised.
    const FORGET_CHUNK: usize = 64 * 1024;

    fn new(inner: R) -> Self {
        Self {
            inner,
            kept: Vec::new(),
            kept_from: 0,
        }
    }

    /// The record between `start` and the input offset `end`, without the blank lines and line
    /// ending around it, and its 1-based physical line (csv counts the blank lines it skips
    /// before a record as part of it).
    fn record(&self, start: &csv::Position, end: u64) -> (&[u8], u64) {
        let offset = |at: u64| (at - self.kept_from) as usize;
        let bytes = &self.kept[offset(start.byte())..offset(end)];
        let blank = bytes
            .iter()
            .take_while(|b| matches!(b, b'\r' | b'\n'))
            .count();
        let skipped_lines = bytes[..blank].iter().filter(|&&b| b == b'\n').count() as u64;
        let mut record = &bytes[blank..];
        while let [rest @ .., b'\r' | b'\n'] = record {
            record = rest;
        }
        (record, start.line() + skipped_lines)
    }

    fn forget_before(&mut self, offset: u64) {
        let handled = (offset - self.kept_from) as usize;
        if handled >= Self::FORGET_CHUNK {
            self.kept.drain(..handled);
            self.kept_from = offset;
        }
    }
}

impl<R: Read> Read for RecordTape<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let read = self.inner.read(buf)?;
        self.kept.extend_from_slice(&buf[..read]);
        Ok(read)
    }
}

/// For each field of one raw CSV record (RFC 4180, the csv crate's defaults), whether it was
/// quoted.
fn quoted_fields(raw: &[u8]) -> Vec<bool> {
    let mut quoted = Vec::new();
    let mut field_start = true;
    let mut in_quotes = false;
    for &byte in raw {
        if field_start {
            field_start = false;
            quoted.push(byte == b'"');
            if byte == b'"' {
                in_quotes = true;
                continue;
            }
        }
        match byte {
            // `""` inside a quoted field toggles twice and stays quoted.
            b'"' if quoted.last() == Some(&true) => in_quotes = !in_quotes,
            b',' if !in_quotes => field_start = true,
            _ => {}
        }
    }
    if field_start {
        quoted.push(false);
    }
    quoted
}

fn parse_parquet(
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
    // Rows decoded at a time; landed batches are still cut at `ctx.batch_rows`.
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
