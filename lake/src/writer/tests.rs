use std::sync::Arc;

use arrow::array::{AsArray, Decimal128Array, Int64Array, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{Decimal128Type, Int64Type};
use bytes::Bytes;
use object_store::ObjectStoreExt;
use object_store::memory::InMemory;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::*;
use crate::tables::{MONEY_PRECISION, MONEY_SCALE, batch_with_columns};

const DAY: i64 = 86_400_000_000;
// 2024-09-18T00:00:00Z in microseconds.
const SEP_18: i64 = 1_726_617_600_000_000;

fn ts(values: &[i64]) -> Arc<TimestampMicrosecondArray> {
    Arc::new(TimestampMicrosecondArray::from(values.to_vec()).with_timezone("UTC"))
}

async fn read_back(store: &Arc<dyn ObjectStore>, file: &WrittenFile) -> RecordBatch {
    let bytes: Bytes = store
        .get(&file.staged())
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    decoded(bytes)
}

/// A Parquet file's rows, as one batch.
fn decoded(bytes: Bytes) -> RecordBatch {
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<_> = reader.map(Result::unwrap).collect();
    arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap()
}

#[tokio::test]
async fn splits_by_day_sorts_and_records_ranges() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    // Three requests: two on Sep 18 (out of order), one on Sep 19.
    let batch = batch_with_columns(
        Table::TokenUsage,
        vec![
            (
                "ts",
                ts(&[SEP_18 + 5_000_000, SEP_18 + DAY + 1, SEP_18 + 1_000_000]),
            ),
            (
                "request_id",
                Arc::new(StringArray::from(vec!["b", "c", "a"])),
            ),
            (
                "model",
                Arc::new(StringArray::from(vec!["llama", "llama", "llama"])),
            ),
            ("input_tokens", Arc::new(Int64Array::from(vec![20, 30, 10]))),
            ("source", Arc::new(StringArray::from(vec!["canonical"; 3]))),
        ],
    )
    .unwrap();
    let mut writer = TableWriter::new(Arc::clone(&store), "batch1");
    let files = writer.write(Table::TokenUsage, &batch).await.unwrap();

    assert_eq!(files.len(), 2);
    assert_eq!(
        files[0].path.to_path().as_ref(),
        "tables/token_usage/date=2024-09-18/batch1-00001.parquet"
    );
    assert_eq!(
        files[1].path.to_path().as_ref(),
        "tables/token_usage/date=2024-09-19/batch1-00002.parquet"
    );
    assert_eq!((files[0].rows, files[1].rows), (2, 1));
    assert_eq!(
        (files[0].min_ts, files[0].max_ts),
        (SEP_18 + 1_000_000, SEP_18 + 5_000_000)
    );
    assert_eq!(files[0].scope, None);

    let first = read_back(&store, &files[0]).await;
    assert_eq!(
        first.schema(),
        Table::TokenUsage.schema(),
        "labels read back as plain Utf8"
    );
    let ids: Vec<_> = first
        .column_by_name("request_id")
        .unwrap()
        .as_string::<i32>()
        .iter()
        .flatten()
        .collect();
    assert_eq!(ids, ["a", "b"], "sorted by (model, ts)");
    let tokens = first
        .column_by_name("input_tokens")
        .unwrap()
        .as_primitive::<Int64Type>();
    assert_eq!(tokens.values().as_ref(), [10, 20]);
    assert_eq!(
        files[0].bytes,
        store.head(&files[0].staged()).await.unwrap().size
    );
    assert!(
        store.head(&files[0].path.to_path()).await.is_err(),
        "nothing written is under tables/ before its commit places it"
    );
}

#[tokio::test]
async fn billing_files_are_split_by_restatement_scope() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let period = ts(&[SEP_18, SEP_18, SEP_18]);
    let cost = Decimal128Array::from(vec![1_500_000_000_000i128, 250_000_000_000, 1])
        .with_precision_and_scale(MONEY_PRECISION, MONEY_SCALE)
        .unwrap();
    let batch = batch_with_columns(
        Table::BillingLines,
        vec![
            (
                "billing_account_id",
                Arc::new(StringArray::from(vec!["acct-1", "acct-2", "acct-1"])),
            ),
            ("billing_period_start", period.clone()),
            (
                "charge_period_start",
                ts(&[SEP_18, SEP_18 + 3_600_000_000, SEP_18 + 7_200_000_000]),
            ),
            ("billed_cost", Arc::new(cost)),
        ],
    )
    .unwrap();
    let files = TableWriter::new(Arc::clone(&store), "b")
        .write(Table::BillingLines, &batch)
        .await
        .unwrap();
    let scopes: Vec<_> = files.iter().map(|f| f.scope.clone().unwrap()).collect();
    assert_eq!(
        scopes,
        ["acct-1|2024-09-18T00:00:00Z", "acct-2|2024-09-18T00:00:00Z"]
    );
    assert_eq!(files.iter().map(|f| f.rows).collect::<Vec<_>>(), [2, 1]);
    let acct1 = read_back(&store, &files[0]).await;
    let billed = acct1
        .column_by_name("billed_cost")
        .unwrap()
        .as_primitive::<Decimal128Type>();
    // 1.5 + 0.000000000001, exact to the 12th place.
    assert_eq!(billed.values().iter().sum::<i128>(), 1_500_000_000_001);
}

#[tokio::test]
async fn a_null_time_is_refused() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let batch = batch_with_columns(
        Table::BillingLines,
        vec![("billing_account_id", Arc::new(StringArray::from(vec!["a"])))],
    );
    // charge_period_start is not nullable, so the batch itself is refused before the writer sees it.
    assert!(batch.is_err());
    let ok = batch_with_columns(
        Table::TokenUsage,
        vec![
            ("ts", ts(&[SEP_18])),
            ("request_id", Arc::new(StringArray::from(vec!["a"]))),
            ("source", Arc::new(StringArray::from(vec!["canonical"]))),
        ],
    )
    .unwrap();
    let files = TableWriter::new(store, "x")
        .write(Table::TokenUsage, &ok)
        .await
        .unwrap();
    assert_eq!(files[0].path.date.to_string(), "2024-09-18");
}

/// Sorting and encoding are done off the runtime's threads: on a one-thread runtime, a task
/// beside a write of 200,000 rows keeps running while they are encoded. (Done in the write's
/// own task, as before, nothing else ran until the file was written: the in-memory store's
/// upload never waits.)
#[test]
fn a_write_leaves_the_runtime_free_while_it_encodes() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let rows = 200_000;
        let batch = batch_with_columns(
            Table::TokenUsage,
            vec![
                (
                    "ts",
                    ts(&(0..rows)
                        .map(|i| SEP_18 + (rows - i) * 1_000)
                        .collect::<Vec<_>>()),
                ),
                (
                    "request_id",
                    Arc::new(StringArray::from_iter_values(
                        (0..rows).map(|i| format!("r{i}")),
                    )),
                ),
                (
                    "model",
                    Arc::new(StringArray::from(vec!["llama"; rows as usize])),
                ),
                (
                    "input_tokens",
                    Arc::new(Int64Array::from_iter_values(0..rows)),
                ),
                (
                    "source",
                    Arc::new(StringArray::from(vec!["canonical"; rows as usize])),
                ),
            ],
        )
        .unwrap();
        let turns = Arc::new(AtomicU64::new(0));
        let beside = tokio::spawn({
            let turns = Arc::clone(&turns);
            async move {
                loop {
                    turns.fetch_add(1, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                }
            }
        });
        tokio::task::yield_now().await;
        let before = turns.load(Ordering::Relaxed);
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let written = TableWriter::new(store, "big")
            .write(Table::TokenUsage, &batch)
            .await
            .unwrap();
        let during = turns.load(Ordering::Relaxed) - before;
        beside.abort();
        assert_eq!(written.len(), 1);
        assert_eq!(written[0].rows, rows as u64);
        assert!(
            during > 0,
            "the task beside the write never ran while it encoded"
        );
    });
}

/// Float columns whose values hardly repeat are written as plain values, those that repeat
/// with a dictionary; both read back as written, nulls included.
#[test]
fn only_float_columns_that_repeat_get_a_dictionary() {
    use arrow::array::Float64Array;
    use arrow::datatypes::{DataType, Field, Schema};
    use parquet::basic::Encoding;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    let rows = 10_000;
    let readings: Float64Array = (0..rows)
        .map(|i| (i % 97 != 0).then_some(300.0 + i as f64 * 0.013_7))
        .collect();
    let temperatures: Float64Array = (0..rows).map(|i| Some(40.0 + (i % 25) as f64)).collect();
    // Half distinct: at the boundary a dictionary still pays.
    let halves: Float64Array = (0..rows).map(|i| Some((i % 2048) as f64)).collect();
    let schema = Arc::new(Schema::new(vec![
        Field::new("power_w", DataType::Float64, true),
        Field::new("gpu_temp_c", DataType::Float64, true),
        Field::new("halves", DataType::Float64, true),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![Arc::new(readings), Arc::new(temperatures), Arc::new(halves)],
    )
    .unwrap();
    let bytes = Bytes::from(encode_parquet(&batch).unwrap());
    let reader = SerializedFileReader::new(bytes.clone()).unwrap();
    let dictionary: Vec<bool> = reader.metadata().row_groups()[0]
        .columns()
        .iter()
        .map(|column| column.encodings().any(|e| e == Encoding::RLE_DICTIONARY))
        .collect();
    assert_eq!(dictionary, [false, true, true]);
    assert_eq!(decoded(bytes), batch);
}

/// Small and all-null columns are written uncompressed, the rest with zstd, and every value
/// reads back as written. At 256 rows a float column without nulls is 2,048 bytes: under 4,096,
/// so uncompressed; at 10,000 rows it is 80,000 bytes: zstd. Strings of 256 × 40 bytes
/// (10,240 + 1,028 of offsets) are compressed at either size.
#[test]
fn small_and_all_null_columns_are_written_uncompressed() {
    use arrow::array::Float64Array;
    use arrow::datatypes::{DataType, Field, Schema};
    use parquet::basic::Compression;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    let list = DataType::List(Arc::new(Field::new("item", DataType::Int64, true)));
    let schema = Arc::new(Schema::new(vec![
        Field::new("power_w", DataType::Float64, true),
        Field::new("fb_used_mib", DataType::Float64, true),
        Field::new("node", DataType::Utf8, false),
        Field::new("tags", list.clone(), true),
    ]));
    let compression = |rows: usize| -> (Vec<&str>, RecordBatch) {
        let power: Float64Array = (0..rows).map(|i| Some(300.0 + i as f64 * 0.0137)).collect();
        let unset: Float64Array = (0..rows).map(|_| None).collect();
        let nodes: StringArray = (0..rows).map(|i| Some(format!("node-{i:035}"))).collect();
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(power),
                Arc::new(unset),
                Arc::new(nodes),
                arrow::array::new_null_array(&list, rows),
            ],
        )
        .unwrap();
        let bytes = Bytes::from(encode_parquet(&batch).unwrap());
        let reader = SerializedFileReader::new(bytes.clone()).unwrap();
        let codecs = reader.metadata().row_groups()[0]
            .columns()
            .iter()
            .map(|column| match column.compression() {
                Compression::UNCOMPRESSED => "none",
                Compression::ZSTD(_) => "zstd",
                other => panic!("{other}"),
            })
            .collect();
        assert_eq!(decoded(bytes), batch);
        (codecs, batch)
    };
    // A nested column keeps the table's codec: its leaf is not the field's own path.
    let (small, batch) = compression(256);
    assert_eq!(
        batch.column(0).to_data().get_slice_memory_size().unwrap(),
        2048
    );
    assert_eq!(small, ["none", "none", "zstd", "zstd"]);
    let (large, _) = compression(10_000);
    assert_eq!(large, ["zstd", "none", "zstd", "zstd"]);
}

/// A fixed pseudo-random stream in [0, 1) (xorshift).
fn noise() -> impl FnMut() -> f64 {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Every file the writer writes reads in any engine that reads Parquet: its pages use only the
/// encodings every reader has (plain values, dictionaries, RLE levels), never those some lack
/// (BYTE_STREAM_SPLIT is not read by Spark's vectorized reader or cuDF; the DELTA_* encodings
/// of version-2 pages neither). Columns of every table, values repeating and not, strings long
/// enough to overflow a dictionary page.
#[test]
fn every_table_is_written_in_encodings_every_engine_reads() {
    use arrow::array::{ArrayRef, BooleanArray, Float64Array, Int32Array, new_null_array};
    use arrow::datatypes::DataType;
    use parquet::basic::Encoding;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    let rows = 30_000;
    let mut unit = noise();
    for table in Table::ALL {
        let schema = table.schema();
        let columns: Vec<ArrayRef> = schema
            .fields()
            .iter()
            .enumerate()
            .map(|(index, field)| {
                // Alternate columns repeat a few values or hardly repeat at all.
                let spread = if index % 2 == 0 { rows } else { 7 };
                let mut draw = || (unit() * spread as f64) as i64;
                let array: ArrayRef = match field.data_type() {
                    DataType::Utf8 => Arc::new(StringArray::from_iter_values(
                        (0..rows).map(|_| format!("value-{:048}", draw())),
                    )),
                    DataType::Int64 => Arc::new(Int64Array::from_iter_values(
                        (0..rows).map(|_| draw() * 7_919),
                    )),
                    DataType::Int32 => Arc::new(Int32Array::from_iter_values(
                        (0..rows).map(|_| draw() as i32),
                    )),
                    DataType::Float64 => Arc::new(Float64Array::from_iter_values(
                        (0..rows).map(|_| draw() as f64 * 1.37 + (draw() % 1_000) as f64 / 7.0),
                    )),
                    DataType::Boolean => Arc::new(BooleanArray::from_iter(
                        (0..rows).map(|_| Some(draw() % 2 == 0)),
                    )),
                    DataType::Decimal128(precision, scale) => Arc::new(
                        Decimal128Array::from_iter_values((0..rows).map(|_| draw() as i128 * 131))
                            .with_precision_and_scale(*precision, *scale)
                            .unwrap(),
                    ),
                    DataType::Timestamp(_, _) => Arc::new(
                        TimestampMicrosecondArray::from_iter_values(
                            (0..rows as i64).map(|i| SEP_18 + i * 1_000_000),
                        )
                        .with_timezone("UTC"),
                    ),
                    // Lists stay null: their levels are RLE like every other column's.
                    DataType::List(_) => new_null_array(field.data_type(), rows),
                    other => panic!("{table}.{}: no test values for {other}", field.name()),
                };
                array
            })
            .collect();
        let batch = RecordBatch::try_new(schema, columns).unwrap();
        let reader =
            SerializedFileReader::new(Bytes::from(encode_parquet(&batch).unwrap())).unwrap();
        for row_group in reader.metadata().row_groups() {
            for column in row_group.columns() {
                for encoding in column.encodings() {
                    assert!(
                        matches!(
                            encoding,
                            Encoding::PLAIN | Encoding::RLE | Encoding::RLE_DICTIONARY
                        ),
                        "{table}.{}: {encoding}",
                        column.column_path()
                    );
                }
            }
        }
    }
}
