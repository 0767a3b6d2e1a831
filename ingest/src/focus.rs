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
//!
//! One layer per file: `columns` (the FOCUS columns and a header's layout), `values` (a value
//! after its rule), `rows` (lines → batches), and the two containers, `csv_file` and
//! `parquet_file`, which feed lines to `rows`.

use std::io::{BufRead, Read};

use bytes::Bytes;

use crate::error::IngestError;
use crate::record::{ParseContext, Sink};

mod columns;
mod csv_file;
mod native;
mod parquet_file;
mod rows;
#[cfg(test)]
mod tests;
mod values;

use csv_file::parse_csv;
pub use native::Native;
use parquet_file::parse_parquet;

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
/// `billing_lines` batches of at most `ctx.limits.batch_rows` rows. A whole input that is not FOCUS (no
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
        parse_csv(head.as_slice().chain(input), ctx, sink, None)
    }
}

/// Reads a provider-native bill (CSV: AWS legacy CUR, Azure EA) into `billing_lines` as FOCUS
/// ([`native`] has the mapping); its lines then follow the FOCUS rules as [`parse`]'s do. A
/// header that is not `native`'s is an [`IngestError::Format`] naming the columns it lacks.
pub fn parse_native(
    input: &mut dyn BufRead,
    ctx: &ParseContext,
    sink: &mut dyn Sink,
    native: Native,
) -> Result<FocusStats, IngestError> {
    parse_csv(input, ctx, sink, Some(native))
}
