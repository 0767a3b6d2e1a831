//! `interval_overlap_seconds(a_start, a_end, b_start, b_end)`: the seconds two half-open time
//! intervals share, e.g. an allocation and a reporting window.

use arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::{Result, internal_err};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, TIMEZONE_WILDCARD,
    Volatility,
};
use datafusion_macros::user_doc;
use gpuledger_ledger::time::Span;

use super::args::{evaluate, float_rows, timestamps};

#[user_doc(
    doc_section(label = "Ledger Functions"),
    description = "Seconds two half-open time intervals [a_start, a_end) and [b_start, b_end) \
        share: 0 when they are disjoint or only touch, and an interval that ends before it \
        starts is empty. Timestamps of any precision and time zone (or none, read as UTC) are \
        compared as instants. NULL when any argument is NULL.",
    syntax_example = "interval_overlap_seconds(a_start, a_end, b_start, b_end)",
    sql_example = r#"```sql
> select interval_overlap_seconds(
    timestamp '2025-01-06 09:00:00', timestamp '2025-01-06 11:00:00',
    timestamp '2025-01-06 10:30:00', timestamp '2025-01-06 12:00:00') as seconds;
+---------+
| seconds |
+---------+
| 1800.0  |
+---------+
```"#,
    argument(
        name = "a_start",
        description = "Start of the first interval (included)."
    ),
    argument(name = "a_end", description = "End of the first interval (excluded)."),
    argument(
        name = "b_start",
        description = "Start of the second interval (included)."
    ),
    argument(name = "b_end", description = "End of the second interval (excluded).")
)]
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct IntervalOverlapSeconds {
    signature: Signature,
}

impl Default for IntervalOverlapSeconds {
    fn default() -> Self {
        // Any precision and zone coerce to microseconds, keeping the zone: the stored value is
        // then the instant in UTC microseconds (zone-less times are read as UTC).
        let timestamp = DataType::Timestamp(TimeUnit::Microsecond, Some(TIMEZONE_WILDCARD.into()));
        Self {
            signature: Signature::exact(vec![timestamp; 4], Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for IntervalOverlapSeconds {
    fn name(&self) -> &str {
        "interval_overlap_seconds"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn is_strict(&self) -> bool {
        true
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [a_start, a_end, b_start, b_end] = args.args.as_slice() else {
            return internal_err!("interval_overlap_seconds takes 4 arguments");
        };
        let (a_start, a_end) = (timestamps(a_start)?, timestamps(a_end)?);
        let (b_start, b_end) = (timestamps(b_start)?, timestamps(b_end)?);
        evaluate(&args, |rows| {
            float_rows(rows, |row| {
                let a = Span::new(a_start.get(row)?, a_end.get(row)?);
                let b = Span::new(b_start.get(row)?, b_end.get(row)?);
                Some(a.overlap_seconds(&b))
            })
        })
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.doc()
    }
}

#[cfg(test)]
mod tests;
