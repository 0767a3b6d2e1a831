//! The one way to read a query's result columns in Rust (the table functions, the ledger
//! build): by name, cast to the type the reader works in — Parquet may hand strings back as
//! views, an aggregate may widen — so a column the query does not return, or one that cannot be
//! read as that type, is an error naming it, never a panic.

use arrow::array::{
    Array, ArrayRef, AsArray, Decimal128Array, Float64Array, Int32Array, Int64Array,
    PrimitiveArray, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use arrow::compute::cast;
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Decimal128Type, Float64Type, Int32Type, Int64Type, TimeUnit,
    TimestampMicrosecondType,
};
use datafusion::common::{DataFusionError, Result as DfResult};
use gpuledger_lake::tables::{MONEY_PRECISION, MONEY_SCALE};

/// The column `name` of `batch` as `data_type`.
pub fn column(batch: &RecordBatch, name: &str, data_type: &DataType) -> DfResult<ArrayRef> {
    let array = batch
        .column_by_name(name)
        .ok_or_else(|| DataFusionError::Execution(format!("the query returns no column {name}")))?;
    cast(array, data_type)
        .map_err(|error| DataFusionError::Execution(format!("column {name}: {error}")))
}

pub fn strings(batch: &RecordBatch, name: &str) -> DfResult<StringArray> {
    Ok(column(batch, name, &DataType::Utf8)?
        .as_string::<i32>()
        .clone())
}

pub fn integers(batch: &RecordBatch, name: &str) -> DfResult<Int64Array> {
    Ok(column(batch, name, &DataType::Int64)?
        .as_primitive::<Int64Type>()
        .clone())
}

pub fn int32s(batch: &RecordBatch, name: &str) -> DfResult<Int32Array> {
    Ok(column(batch, name, &DataType::Int32)?
        .as_primitive::<Int32Type>()
        .clone())
}

pub fn floats(batch: &RecordBatch, name: &str) -> DfResult<Float64Array> {
    Ok(column(batch, name, &DataType::Float64)?
        .as_primitive::<Float64Type>()
        .clone())
}

/// A time column as microseconds since the epoch, UTC.
pub fn timestamps(batch: &RecordBatch, name: &str) -> DfResult<TimestampMicrosecondArray> {
    let utc = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
    Ok(column(batch, name, &utc)?
        .as_primitive::<TimestampMicrosecondType>()
        .clone())
}

/// A money column in the lake's exact decimal (`DECIMAL(38,12)`).
pub fn money(batch: &RecordBatch, name: &str) -> DfResult<Decimal128Array> {
    let decimal = DataType::Decimal128(MONEY_PRECISION, MONEY_SCALE);
    Ok(column(batch, name, &decimal)?
        .as_primitive::<Decimal128Type>()
        .clone())
}

/// The string at `row`; `None` when it is null.
pub fn text(values: &StringArray, row: usize) -> Option<&str> {
    values.is_valid(row).then(|| values.value(row))
}

/// The value at `row`; `None` when it is null.
pub fn value<T: ArrowPrimitiveType>(values: &PrimitiveArray<T>, row: usize) -> Option<T::Native> {
    values.is_valid(row).then(|| values.value(row))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::StringViewArray;
    use arrow::datatypes::{Field, Schema};

    use super::*;

    #[test]
    fn columns_are_read_by_name_as_the_type_asked_and_a_missing_one_is_an_error() {
        let schema = Schema::new(vec![
            Field::new("team", DataType::Utf8View, true),
            Field::new("n", DataType::Int32, true),
        ]);
        let batch = RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(StringViewArray::from(vec![Some("nlp"), None])),
                Arc::new(Int32Array::from(vec![Some(7), None])),
            ],
        )
        .unwrap();
        let teams = strings(&batch, "team").unwrap();
        assert_eq!((text(&teams, 0), text(&teams, 1)), (Some("nlp"), None));
        let n = floats(&batch, "n").unwrap();
        assert_eq!((value(&n, 0), value(&n, 1)), (Some(7.0), None));
        assert_eq!(
            strings(&batch, "nope").unwrap_err().to_string(),
            "Execution error: the query returns no column nope"
        );
    }
}
