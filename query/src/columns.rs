//! The one way to read a query's result columns in Rust (the table functions, the ledger
//! build): by name, cast to the type the reader works in — Parquet may hand strings back as
//! views, an aggregate may widen — so a column the query does not return, or one that cannot be
//! read as that type, is an error naming it, never a panic. Small result sets (the weekly
//! report's sections) may instead be read whole as typed records, with [`records`].

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, Decimal128Array, Float64Array, Int32Array, Int64Array,
    PrimitiveArray, RecordBatch, StringViewArray, TimestampMicrosecondArray,
};
use arrow::compute::cast;
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Decimal128Type, Field, Float64Type, Int32Type, Int64Type, Schema,
    SchemaRef, TimestampMicrosecondType,
};
use datafusion::common::{DataFusionError, Result as DfResult};
use gpuledger_lake::tables::{MONEY_PRECISION, MONEY_SCALE, timestamp};
use serde::de::DeserializeOwned;

/// The column `name` of `batch` as `data_type`.
pub fn column(batch: &RecordBatch, name: &str, data_type: &DataType) -> DfResult<ArrayRef> {
    let array = batch
        .column_by_name(name)
        .ok_or_else(|| DataFusionError::Execution(format!("the query returns no column {name}")))?;
    cast(array, data_type)
        .map_err(|error| DataFusionError::Execution(format!("column {name}: {error}")))
}

/// `schema` with the type of each field that `retype` maps replaced (names, nullability and
/// metadata kept): how lake tables read text as views, and how results go out as plain text.
pub fn retyped(schema: &SchemaRef, retype: impl Fn(&DataType) -> Option<DataType>) -> SchemaRef {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|field| match retype(field.data_type()) {
            Some(data_type) => field.as_ref().clone().with_data_type(data_type),
            None => field.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// A text column as string views, the type lake tables read text as (a plain string column is
/// turned into views without copying its strings).
pub fn strings(batch: &RecordBatch, name: &str) -> DfResult<StringViewArray> {
    Ok(column(batch, name, &DataType::Utf8View)?
        .as_string_view()
        .clone())
}

/// The columns `names` of `batch`, each read with `read` (`strings`, `floats`, …), in that
/// order: `let [team, model] = several(&batch, strings, ["team", "model"])?`.
pub fn several<T, const N: usize>(
    batch: &RecordBatch,
    read: fn(&RecordBatch, &str) -> DfResult<T>,
    names: [&str; N],
) -> DfResult<[T; N]> {
    let arrays = names
        .iter()
        .map(|name| read(batch, name))
        .collect::<DfResult<Vec<_>>>()?;
    Ok(arrays
        .try_into()
        .unwrap_or_else(|_| unreachable!("one array per name")))
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
    Ok(column(batch, name, &timestamp())?
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
pub fn text(values: &StringViewArray, row: usize) -> Option<&str> {
    values.is_valid(row).then(|| values.value(row))
}

/// The value at `row`; `None` when it is null.
pub fn value<T: ArrowPrimitiveType>(values: &PrimitiveArray<T>, row: usize) -> Option<T::Native> {
    values.is_valid(row).then(|| values.value(row))
}

/// Every row of `batches` read into a `T` by column name, for small result sets: a NULL cell is
/// an absent field (an `Option` reads `None`), money (`DECIMAL`) reads as a number. Rows go through
/// Arrow's JSON writer, so this is for tens of rows, not a scan: read large results column by
/// column with the functions above.
pub fn records<T: DeserializeOwned>(batches: &[RecordBatch]) -> DfResult<Vec<T>> {
    let mut writer = arrow::json::ArrayWriter::new(Vec::new());
    writer.write_batches(&batches.iter().collect::<Vec<_>>())?;
    writer.finish()?;
    let json = writer.into_inner();
    if json.is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_slice(&json).map_err(|e| DataFusionError::External(Box::new(e)))
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

    #[test]
    fn records_read_rows_by_name_with_nulls_absent_and_money_as_numbers() {
        #[derive(Debug, Clone, PartialEq, serde::Deserialize)]
        struct Row {
            team: Option<String>,
            cost: Option<f64>,
            runs: i64,
        }
        let schema = Schema::new(vec![
            Field::new("team", DataType::Utf8, true),
            Field::new(
                "cost",
                DataType::Decimal128(MONEY_PRECISION, MONEY_SCALE),
                true,
            ),
            Field::new("runs", DataType::Int64, false),
        ]);
        // 12.5 at the money scale (12 places).
        let costs = Decimal128Array::from(vec![Some(12_500_000_000_000), None])
            .with_precision_and_scale(MONEY_PRECISION, MONEY_SCALE)
            .unwrap();
        let batch = RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(arrow::array::StringArray::from(vec![Some("nlp"), None])),
                Arc::new(costs),
                Arc::new(Int64Array::from(vec![3, 0])),
            ],
        )
        .unwrap();
        let rows: Vec<Row> = records(&[batch.clone(), batch]).unwrap();
        let nlp = Row {
            team: Some("nlp".into()),
            cost: Some(12.5),
            runs: 3,
        };
        let nobody = Row {
            team: None,
            cost: None,
            runs: 0,
        };
        assert_eq!(rows, [nlp.clone(), nobody.clone(), nlp, nobody]);
        assert!(records::<Row>(&[]).unwrap().is_empty());
        // A column the record needs and the query does not return is an error, not a default.
        #[derive(Debug, serde::Deserialize)]
        struct Wants {
            #[serde(rename = "missing")]
            _missing: i64,
        }
        let only_runs = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new(
                "runs",
                DataType::Int64,
                false,
            )])),
            vec![Arc::new(Int64Array::from(vec![1]))],
        )
        .unwrap();
        let error = records::<Wants>(&[only_runs]).unwrap_err().to_string();
        assert!(error.contains("missing field `missing`"), "{error}");
    }
}
