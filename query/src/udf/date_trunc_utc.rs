//! `date_trunc(granularity, ts)`, as DataFusion defines it, without a time-zone conversion per
//! row when `ts` is in UTC.
//!
//! Every lake table stores its times as `Timestamp(µs, "UTC")`. DataFusion truncates a timestamp
//! that carries a zone through that zone's calendar row by row, even when the zone is UTC, where
//! the wall clock is the UTC time itself; that made `date_trunc('hour', ts)` the larger part of
//! a node × hour query over `gpu_samples`. UTC has no offset and no daylight saving, so
//! truncating the same values read as zone-less times gives the same instants. Units of fixed
//! length (microsecond to day, and weeks, which start on Monday) are then plain arithmetic on
//! the integer times, `floor(t / unit) * unit`: no calendar at all, for the hour and day buckets
//! every dashboard groups by. Months, quarters and years go through DataFusion's calendar on the
//! values relabelled as zone-less (no copy), and every other zone to DataFusion's own
//! `date_trunc` unchanged. Answers, types and documentation are DataFusion's.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, PrimitiveArray, make_array};
use arrow::datatypes::{
    ArrowTimestampType, DataType, Field, FieldRef, TimeUnit, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};
use datafusion::common::{Result, ScalarValue};
use datafusion::functions::datetime::date_trunc::DateTruncFunc;
use datafusion::logical_expr::sort_properties::{ExprProperties, SortProperties};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature,
};

/// `date_trunc(granularity, ts)` as an expression, for plans built in Rust (SQL finds the
/// registered function by name).
pub fn date_trunc(granularity: Expr, ts: Expr) -> Expr {
    ScalarUDF::new_from_impl(DateTruncUtc::default()).call(vec![granularity, ts])
}

/// DataFusion's `date_trunc`, with UTC timestamps truncated as zone-less ones.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct DateTruncUtc {
    inner: DateTruncFunc,
}

/// The zone names that mean UTC itself.
fn is_utc(zone: &str) -> bool {
    matches!(
        zone,
        "UTC" | "utc" | "Z" | "+00:00" | "+0000" | "+00" | "Etc/UTC" | "Etc/UCT" | "UCT"
    )
}

/// `value`'s timestamp type without its zone, when the zone is UTC.
fn zoneless(data_type: &DataType) -> Option<DataType> {
    match data_type {
        DataType::Timestamp(unit, Some(zone)) if is_utc(zone) => {
            Some(DataType::Timestamp(*unit, None))
        }
        _ => None,
    }
}

/// The same values under another timestamp type (the same width): no copy.
/// The length of a fixed-length granularity in `unit`s, and the offset of its buckets from the
/// epoch (weeks start on Monday, 1970-01-05; the epoch was a Thursday); `None` for calendar
/// granularities (month, quarter, year) and for the units that do not divide evenly.
fn fixed_bucket(granularity: &str, unit: TimeUnit) -> Option<(i64, i64)> {
    const DAY: i64 = 86_400_000_000;
    /// (granularity, length in µs, offset of its buckets from the epoch in µs).
    const MICROS: [(&str, i64, i64); 7] = [
        ("microsecond", 1, 0),
        ("millisecond", 1_000, 0),
        ("second", 1_000_000, 0),
        ("minute", 60_000_000, 0),
        ("hour", 3_600_000_000, 0),
        ("day", DAY, 0),
        ("week", 7 * DAY, 4 * DAY),
    ];
    let (_, micros, offset_micros) = *MICROS
        .iter()
        .find(|(name, ..)| name.eq_ignore_ascii_case(granularity))?;
    let scale = |micros: i64| -> Option<i64> {
        match unit {
            TimeUnit::Second => (micros % 1_000_000 == 0).then_some(micros / 1_000_000),
            TimeUnit::Millisecond => (micros % 1_000 == 0).then_some(micros / 1_000),
            TimeUnit::Microsecond => Some(micros),
            TimeUnit::Nanosecond => micros.checked_mul(1_000),
        }
    };
    Some((scale(micros)?, scale(offset_micros)?))
}

/// `floor((t - offset) / length) * length + offset` for every value of a timestamp array; an
/// error when a bucket starts before the earliest time the type holds.
fn truncate_fixed<T: ArrowTimestampType>(
    array: &ArrayRef,
    length: i64,
    offset: i64,
) -> Result<ArrayRef> {
    let values: &PrimitiveArray<T> = array.as_any().downcast_ref().expect("a timestamp array");
    let truncated: PrimitiveArray<T> = values.try_unary(|t| {
        let (t, length, offset) = (i128::from(t), i128::from(length), i128::from(offset));
        i64::try_from((t - offset).div_euclid(length) * length + offset).map_err(|_| {
            arrow::error::ArrowError::ComputeError(format!(
                "date_trunc: the bucket of {t} starts before the earliest time a timestamp holds"
            ))
        })
    })?;
    Ok(Arc::new(
        truncated.with_data_type(array.data_type().clone()),
    ))
}

/// `date_trunc` of a UTC timestamp argument to a fixed-length granularity, computed on the
/// integer times; `None` when this case is not one (a calendar granularity, a granularity that
/// is not a constant string).
fn truncate_utc_fixed(
    granularity: &ColumnarValue,
    ts: &ColumnarValue,
) -> Option<Result<ColumnarValue>> {
    let ColumnarValue::Scalar(
        ScalarValue::Utf8(Some(granularity))
        | ScalarValue::Utf8View(Some(granularity))
        | ScalarValue::LargeUtf8(Some(granularity)),
    ) = granularity
    else {
        return None;
    };
    let DataType::Timestamp(unit, _) = ts.data_type() else {
        return None;
    };
    let (length, offset) = fixed_bucket(granularity, unit)?;
    let truncate = |array: &ArrayRef| match unit {
        TimeUnit::Second => truncate_fixed::<TimestampSecondType>(array, length, offset),
        TimeUnit::Millisecond => truncate_fixed::<TimestampMillisecondType>(array, length, offset),
        TimeUnit::Microsecond => truncate_fixed::<TimestampMicrosecondType>(array, length, offset),
        TimeUnit::Nanosecond => truncate_fixed::<TimestampNanosecondType>(array, length, offset),
    };
    Some(match ts {
        ColumnarValue::Array(array) => truncate(array).map(ColumnarValue::Array),
        ColumnarValue::Scalar(scalar) => scalar
            .to_array()
            .and_then(|array| truncate(&array))
            .and_then(|array| ScalarValue::try_from_array(&array, 0))
            .map(ColumnarValue::Scalar),
    })
}

fn relabel(array: &ArrayRef, data_type: &DataType) -> Result<ArrayRef> {
    Ok(make_array(
        array
            .to_data()
            .into_builder()
            .data_type(data_type.clone())
            .build()?,
    ))
}

fn relabel_value(value: ColumnarValue, data_type: &DataType) -> Result<ColumnarValue> {
    Ok(match value {
        ColumnarValue::Array(array) => ColumnarValue::Array(relabel(&array, data_type)?),
        ColumnarValue::Scalar(scalar) => {
            let array = relabel(&scalar.to_array()?, data_type)?;
            ColumnarValue::Scalar(ScalarValue::try_from_array(&array, 0)?)
        }
    })
}

impl ScalarUDFImpl for DateTruncUtc {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn invoke_with_args(&self, mut args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let utc = args.args.get(1).map(ColumnarValue::data_type);
        let Some((utc, naive)) = utc.and_then(|utc| Some((utc.clone(), zoneless(&utc)?))) else {
            return self.inner.invoke_with_args(args);
        };
        if let Some(truncated) = truncate_utc_fixed(&args.args[0], &args.args[1]) {
            return truncated;
        }
        let ts = args.args.remove(1);
        args.args.insert(1, relabel_value(ts, &naive)?);
        args.arg_fields[1] = Arc::new(
            args.arg_fields[1]
                .as_ref()
                .clone()
                .with_data_type(naive.clone()),
        );
        args.return_field = Arc::new(Field::new(
            args.return_field.name(),
            naive,
            args.return_field.is_nullable(),
        ));
        relabel_value(self.inner.invoke_with_args(args)?, &utc)
    }

    fn output_ordering(&self, input: &[ExprProperties]) -> Result<SortProperties> {
        self.inner.output_ordering(input)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{AsArray, TimestampMicrosecondArray};
    use arrow::datatypes::{TimeUnit, TimestampMicrosecondType};
    use datafusion::config::ConfigOptions;

    use super::*;

    const GRANULARITIES: [&str; 10] = [
        "microsecond",
        "millisecond",
        "second",
        "minute",
        "hour",
        "day",
        "week",
        "month",
        "quarter",
        "year",
    ];

    fn truncate(udf: &dyn ScalarUDFImpl, granularity: &str, ts: &ArrayRef) -> ArrayRef {
        let arg_fields = vec![
            Arc::new(Field::new("g", DataType::Utf8, false)),
            Arc::new(Field::new("ts", ts.data_type().clone(), true)),
        ];
        let out = udf
            .invoke_with_args(ScalarFunctionArgs {
                args: vec![
                    ColumnarValue::Scalar(ScalarValue::Utf8(Some(granularity.into()))),
                    ColumnarValue::Array(Arc::clone(ts)),
                ],
                arg_fields,
                number_rows: ts.len(),
                return_field: Arc::new(Field::new("date_trunc", ts.data_type().clone(), true)),
                config_options: Arc::new(ConfigOptions::default()),
            })
            .unwrap();
        out.to_array(ts.len()).unwrap()
    }

    /// Every granularity, on times before and after the epoch, leap days and the ends of years,
    /// gives DataFusion's own answer, typed `Timestamp(µs, "UTC")`.
    #[test]
    fn answers_exactly_as_datafusion_does_in_utc() {
        // A deterministic spread from 1901 to 2100, plus edges.
        let mut values: Vec<Option<i64>> = (0..5_000i64)
            .map(|i| {
                Some(-2_177_452_800_000_000 + i * 1_262_304_007_919_i64 % 6_311_520_000_000_000)
            })
            .collect();
        values.extend([
            Some(0),
            Some(-1),
            Some(1),
            None,
            Some(1_709_164_799_999_999),
        ]);
        let ts: ArrayRef =
            Arc::new(TimestampMicrosecondArray::from(values.clone()).with_timezone("UTC"));
        for granularity in GRANULARITIES {
            let fast = truncate(&DateTruncUtc::default(), granularity, &ts);
            let reference = truncate(&DateTruncFunc::new(), granularity, &ts);
            assert_eq!(
                fast.data_type(),
                &DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
            );
            assert_eq!(
                fast.as_primitive::<TimestampMicrosecondType>(),
                reference.as_primitive::<TimestampMicrosecondType>(),
                "{granularity}"
            );
        }
    }

    fn micros(rfc3339: &str) -> i64 {
        chrono::DateTime::parse_from_rfc3339(rfc3339)
            .unwrap()
            .timestamp_micros()
    }

    /// The earliest and latest times a timestamp holds: the latest truncates, a bucket that would
    /// start before the earliest is a clear error, never an overflow (DataFusion's own
    /// `date_trunc` overflows there).
    #[test]
    fn the_ends_of_the_time_range_truncate_or_fail_clearly() {
        let run = |granularity: &str, value: i64| {
            let ts: ArrayRef =
                Arc::new(TimestampMicrosecondArray::from(vec![value]).with_timezone("UTC"));
            DateTruncUtc::default()
                .invoke_with_args(ScalarFunctionArgs {
                    args: vec![
                        ColumnarValue::Scalar(ScalarValue::Utf8(Some(granularity.into()))),
                        ColumnarValue::Array(Arc::clone(&ts)),
                    ],
                    arg_fields: vec![
                        Arc::new(Field::new("g", DataType::Utf8, false)),
                        Arc::new(Field::new("ts", ts.data_type().clone(), true)),
                    ],
                    number_rows: 1,
                    return_field: Arc::new(Field::new("d", ts.data_type().clone(), true)),
                    config_options: Arc::new(ConfigOptions::default()),
                })
                .and_then(|out| out.to_array(1))
                .map(|array| array.as_primitive::<TimestampMicrosecondType>().value(0))
                .map_err(|e| e.to_string())
        };
        // i64::MAX = 9223372036854775807 µs: its second starts 807 µs earlier, its hour at
        // 9223372036854775807 - 9223372036854775807 mod 3600000000.
        assert_eq!(run("second", i64::MAX), Ok(i64::MAX - 775_807));
        assert_eq!(
            run("hour", i64::MAX),
            Ok(i64::MAX - i64::MAX % 3_600_000_000)
        );
        assert_eq!(run("microsecond", i64::MIN), Ok(i64::MIN));
        for granularity in ["second", "day", "week"] {
            let error = run(granularity, i64::MIN).unwrap_err();
            assert!(
                error.contains("starts before the earliest time"),
                "{granularity}: {error}"
            );
        }
    }

    /// Hand-worked: 2024-02-29T13:45:30.123456Z is a Thursday of a leap February.
    #[test]
    fn truncates_a_leap_day_by_hand() {
        let ts: ArrayRef = Arc::new(
            TimestampMicrosecondArray::from(vec![micros("2024-02-29T13:45:30.123456Z")])
                .with_timezone("UTC"),
        );
        for (granularity, at) in [
            ("second", "2024-02-29T13:45:30Z"),
            ("hour", "2024-02-29T13:00:00Z"),
            ("day", "2024-02-29T00:00:00Z"),
            ("week", "2024-02-26T00:00:00Z"),
            ("month", "2024-02-01T00:00:00Z"),
            ("quarter", "2024-01-01T00:00:00Z"),
            ("year", "2024-01-01T00:00:00Z"),
        ] {
            let out = truncate(&DateTruncUtc::default(), granularity, &ts);
            assert_eq!(
                out.as_primitive::<TimestampMicrosecondType>().value(0),
                micros(at),
                "{granularity}"
            );
        }
    }

    /// Other zones keep DataFusion's wall-clock truncation: 01:30 UTC is 02:30 in Berlin
    /// (winter), whose day starts at 23:00 UTC the day before.
    #[test]
    fn other_zones_truncate_by_their_own_calendar() {
        let ts: ArrayRef = Arc::new(
            TimestampMicrosecondArray::from(vec![micros("2024-01-01T01:30:00Z")])
                .with_timezone("Europe/Berlin"),
        );
        let out = truncate(&DateTruncUtc::default(), "day", &ts);
        assert_eq!(
            out.as_primitive::<TimestampMicrosecondType>().value(0),
            micros("2023-12-31T23:00:00Z")
        );
    }

    /// Every session (a bounded one too) answers `date_trunc` and its alias with this function,
    /// not DataFusion's; registering DataFusion's again under any alias would undo that, since
    /// a function registers under its name as well.
    #[test]
    fn a_sessions_date_trunc_is_this_one() {
        let ctx = datafusion::prelude::SessionContext::new();
        crate::session::register_functions(&ctx, Some(1 << 30)).unwrap();
        for name in ["date_trunc", "datetrunc"] {
            let udf = ctx.state().scalar_functions()[name].clone();
            let inner: &dyn std::any::Any = udf.inner().as_ref();
            assert!(inner.is::<DateTruncUtc>(), "{name}");
        }
    }
}
