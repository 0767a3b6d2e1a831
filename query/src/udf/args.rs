//! Reading the arguments of a scalar UDF column by column. A constant argument is read as the same
//! value on every row instead of being expanded into an array, and when every argument is a
//! constant the function computes one row and answers a constant.

use std::sync::Arc;

use arrow::array::{
    ArrayAccessor, ArrayRef, AsArray, BooleanArray, Float64Array, StringArray,
    TimestampMicrosecondArray,
};
use arrow::datatypes::{Float64Type, TimestampMicrosecondType};
use datafusion::common::{Result, ScalarValue, internal_err};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs};

/// One argument: a column of typed values, or one value (possibly NULL) for every row.
pub(super) enum Arg<A: ArrayAccessor> {
    Column(A),
    Constant(Option<A::Item>),
}

impl<A: ArrayAccessor> Arg<A>
where
    A::Item: Copy,
{
    /// The value at `row`; `None` for NULL.
    pub(super) fn get(&self, row: usize) -> Option<A::Item> {
        match self {
            Arg::Column(array) => array.is_valid(row).then(|| array.value(row)),
            Arg::Constant(value) => *value,
        }
    }
}

/// Reads an argument the signature has already coerced, so another type is a bug.
fn read<'a, A: ArrayAccessor>(
    value: &'a ColumnarValue,
    expected: &str,
    column: impl FnOnce(&'a ArrayRef) -> Option<A>,
    constant: impl FnOnce(&'a ScalarValue) -> Option<Option<A::Item>>,
) -> Result<Arg<A>> {
    let arg = match value {
        ColumnarValue::Array(array) => column(array).map(Arg::Column),
        ColumnarValue::Scalar(scalar) if scalar.data_type().is_null() => Some(Arg::Constant(None)),
        ColumnarValue::Scalar(scalar) => constant(scalar).map(Arg::Constant),
    };
    match arg {
        Some(arg) => Ok(arg),
        None => internal_err!(
            "argument of type {} where the signature coerces to {expected}",
            value.data_type()
        ),
    }
}

pub(super) fn floats(value: &ColumnarValue) -> Result<Arg<&Float64Array>> {
    read(
        value,
        "Float64",
        |a| a.as_primitive_opt::<Float64Type>(),
        |s| match s {
            ScalarValue::Float64(v) => Some(*v),
            _ => None,
        },
    )
}

/// Microseconds since the epoch, UTC whatever the column's time zone.
pub(super) fn timestamps(value: &ColumnarValue) -> Result<Arg<&TimestampMicrosecondArray>> {
    read(
        value,
        "Timestamp(µs)",
        |a| a.as_primitive_opt::<TimestampMicrosecondType>(),
        |s| match s {
            ScalarValue::TimestampMicrosecond(v, _) => Some(*v),
            _ => None,
        },
    )
}

pub(super) fn booleans(value: &ColumnarValue) -> Result<Arg<&BooleanArray>> {
    read(
        value,
        "Boolean",
        |a| a.as_boolean_opt(),
        |s| match s {
            ScalarValue::Boolean(v) => Some(*v),
            _ => None,
        },
    )
}

pub(super) fn strings(value: &ColumnarValue) -> Result<Arg<&StringArray>> {
    read(
        value,
        "Utf8",
        |a| a.as_string_opt::<i32>(),
        |s| match s {
            ScalarValue::Utf8(v) => Some(v.as_deref()),
            _ => None,
        },
    )
}

/// Builds the result over the rows to compute: `build` gets the row count (1 when every argument
/// is a constant, and the result is then a constant too).
pub(super) fn evaluate(
    args: &ScalarFunctionArgs,
    build: impl FnOnce(usize) -> ArrayRef,
) -> Result<ColumnarValue> {
    let all_constant = args
        .args
        .iter()
        .all(|arg| matches!(arg, ColumnarValue::Scalar(_)));
    if all_constant {
        ScalarValue::try_from_array(&build(1), 0).map(ColumnarValue::Scalar)
    } else {
        Ok(ColumnarValue::Array(build(args.number_rows)))
    }
}

/// A Float64 result, one `Option` per row.
pub(super) fn float_rows(rows: usize, value_at: impl Fn(usize) -> Option<f64>) -> ArrayRef {
    Arc::new((0..rows).map(value_at).collect::<Float64Array>())
}
