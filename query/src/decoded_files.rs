//! Lake files decoded into Arrow, kept for sessions that ask many questions of the same few
//! files: a weekly report's session (about twenty questions of one week's ledger), and every
//! session of a server (`gpuledger serve --decoded-cache-mb`, shared by all its queries, so the
//! dashboard's report and Grafana's panels read memory). Without it each question opens,
//! decompresses and decodes the same files again (zstd creates a compression and a
//! decompression context for every column chunk it opens, and a report opens thousands). With
//! it each column of a file is decoded once, the first time a query reads it, and every later
//! scan of it reads memory.
//!
//! Lake files are immutable (a restatement writes new files and retires the old ones), so a
//! decoded file stays true as long as the catalog lists it; which files a scan reads is still the
//! catalog's answer at each scan ([`crate::lake_table::LakeTable`]), so a retired file is never
//! read again and leaves as the least recently used. Only the tables the memo was made for are
//! kept (those whose files the fleet bounds: [`BOUNDED_TABLES`]), up to a budget of bytes: past
//! it the least recently read files make room, and a file that alone outgrows the budget is read
//! from Parquet as without the memo. A session whose stages run on workers is never given one
//! (its plans must name files for the workers to read).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use arrow::array::{ArrayRef, RecordBatch, new_empty_array};
use arrow::compute::concat;
use arrow::datatypes::SchemaRef;
use datafusion::common::Result as DfResult;
use gpuledger_lake::tables::Table;

/// The tables whose files are bounded by the fleet's GPUs and jobs, not by its traffic: the
/// ledger's and the scheduler events (telemetry and token usage grow with time and requests, and
/// are read from Parquet).
pub const BOUNDED_TABLES: [Table; 4] = [
    Table::GpuHours,
    Table::CostEntries,
    Table::Allocations,
    Table::SchedulerEvents,
];

/// The columns of one file decoded so far, by index in the table's schema.
type Columns = HashMap<usize, ArrayRef>;

/// See the module doc. Given to sessions through `SessionOptions::decoded_files`, which never
/// gives it to a session with query workers.
#[derive(Debug)]
pub struct DecodedFiles {
    tables: Vec<Table>,
    budget: usize,
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    files: HashMap<String, File>,
    bytes: usize,
    /// Counts reads, to tell the least recently read file.
    clock: u64,
}

#[derive(Debug)]
struct File {
    /// Locked while a scan decodes more of them, so that scans asking at once decode a column
    /// once.
    columns: Arc<tokio::sync::Mutex<Columns>>,
    bytes: usize,
    read_at: u64,
}

impl DecodedFiles {
    /// A memo of the files of `tables`, holding about `budget` bytes of Arrow at most (past it
    /// by the columns being decoded at the moment).
    pub fn new(tables: &[Table], budget: usize) -> Self {
        Self {
            tables: tables.to_vec(),
            budget,
            held: Mutex::default(),
        }
    }

    pub fn keeps(&self, table: Table) -> bool {
        self.tables.contains(&table)
    }

    /// Bytes of Arrow the memo holds at most; also what one scan takes from it at most (past
    /// it, a scan reads the rest of its files from Parquet, so a scan of a whole table holds no
    /// more than the budget in memory).
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Bytes of Arrow the memo holds.
    pub fn held(&self) -> usize {
        self.lock().bytes
    }

    /// Files the memo holds columns of.
    pub fn files(&self) -> usize {
        self.lock().files.len()
    }

    fn lock(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Columns `wanted` (indices in `schema`, the table's) of the file at `path`, whole: those
    /// not decoded yet are decoded by `decode` (given their indices, it returns batches of just
    /// those columns in that order); `None` when some are missing and no room can be made.
    pub(crate) async fn columns<F, Fut>(
        &self,
        path: &str,
        schema: &SchemaRef,
        wanted: &[usize],
        decode: F,
    ) -> DfResult<Option<Vec<ArrayRef>>>
    where
        F: FnOnce(Vec<usize>) -> Fut,
        Fut: Future<Output = DfResult<Vec<RecordBatch>>>,
    {
        let file = {
            let mut held = self.lock();
            held.clock += 1;
            let clock = held.clock;
            let file = held.files.entry(path.to_string()).or_insert_with(|| File {
                columns: Arc::default(),
                bytes: 0,
                read_at: clock,
            });
            file.read_at = clock;
            Arc::clone(&file.columns)
        };
        let mut columns = file.lock().await;
        let missing: Vec<usize> = wanted
            .iter()
            .copied()
            .filter(|c| !columns.contains_key(c))
            .collect();
        if !missing.is_empty() {
            if !self.make_room(path) {
                self.forget_if_empty(path, &file, &columns);
                return Ok(None);
            }
            let batches = match decode(missing.clone()).await {
                Ok(batches) => batches,
                Err(error) => {
                    self.forget_if_empty(path, &file, &columns);
                    return Err(error);
                }
            };
            let mut added = 0;
            for (i, &c) in missing.iter().enumerate() {
                let parts: Vec<_> = batches.iter().map(|b| b.column(i).as_ref()).collect();
                let column = match parts.as_slice() {
                    [] => new_empty_array(schema.field(c).data_type()),
                    [one] => one.slice(0, one.len()),
                    _ => concat(&parts)?,
                };
                added += column.get_array_memory_size();
                columns.insert(c, column);
            }
            self.count(path, &file, added);
        }
        Ok(Some(
            wanted.iter().map(|c| Arc::clone(&columns[c])).collect(),
        ))
    }

    /// Lets go of the least recently read files other than `path` until the memo holds less
    /// than its budget; `false` when it still does not (`path` alone fills it).
    fn make_room(&self, path: &str) -> bool {
        let mut held = self.lock();
        while held.bytes >= self.budget {
            let oldest = held
                .files
                .iter()
                .filter(|(other, _)| other.as_str() != path)
                .min_by_key(|(_, file)| file.read_at)
                .map(|(other, _)| other.clone());
            let Some(oldest) = oldest else {
                return false;
            };
            let file = held.files.remove(&oldest).expect("just found");
            held.bytes -= file.bytes;
        }
        true
    }

    /// Lets go of the entry of `path` when it is `file` and holds no columns (its decoding
    /// failed, or no room could be made for it), so that such reads leave nothing behind.
    fn forget_if_empty(
        &self,
        path: &str,
        file: &Arc<tokio::sync::Mutex<Columns>>,
        columns: &Columns,
    ) {
        let mut held = self.lock();
        if columns.is_empty() && entry_of(&mut held.files, path, file).is_some() {
            held.files.remove(path);
        }
    }

    /// Counts `added` bytes of columns decoded into `file`, the entry of `path`, unless room was
    /// made of it meanwhile (its columns then go with the scans that read them).
    fn count(&self, path: &str, file: &Arc<tokio::sync::Mutex<Columns>>, added: usize) {
        let mut guard = self.lock();
        let held = &mut *guard;
        if let Some(entry) = entry_of(&mut held.files, path, file) {
            entry.bytes += added;
            held.bytes += added;
        }
    }
}

/// The entry of `path` if it is still `file`: room may have been made of it meanwhile, and the
/// path read into a new entry since.
fn entry_of<'h>(
    files: &'h mut HashMap<String, File>,
    path: &str,
    file: &Arc<tokio::sync::Mutex<Columns>>,
) -> Option<&'h mut File> {
    files
        .get_mut(path)
        .filter(|entry| Arc::ptr_eq(&entry.columns, file))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use arrow::array::{Array, Int64Array};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    /// Files of one column of `ROWS` integers, and how many times a file was decoded.
    const ROWS: usize = 1000;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]))
    }

    async fn read(memo: &DecodedFiles, path: &str, decodes: &AtomicUsize) -> bool {
        let decode = |_missing| async {
            decodes.fetch_add(1, Ordering::Relaxed);
            let values = Int64Array::from_iter_values(0..ROWS as i64);
            Ok(vec![RecordBatch::try_new(
                schema(),
                vec![Arc::new(values)],
            )?])
        };
        let columns = memo.columns(path, &schema(), &[0], decode).await.unwrap();
        if let Some(columns) = &columns {
            assert_eq!(columns[0].len(), ROWS);
        }
        columns.is_some()
    }

    fn one_file() -> usize {
        Int64Array::from_iter_values(0..ROWS as i64).get_array_memory_size()
    }

    /// With room for two files, a third makes room by letting go of the least recently read,
    /// which is decoded again when asked; the bytes held are those of the files held.
    #[tokio::test]
    async fn the_least_recently_read_file_makes_room() {
        let memo = DecodedFiles::new(&BOUNDED_TABLES, 2 * one_file());
        let decodes = AtomicUsize::new(0);
        assert!(read(&memo, "a", &decodes).await);
        assert!(read(&memo, "b", &decodes).await);
        assert_eq!((memo.files(), memo.held()), (2, 2 * one_file()));
        // a was read after b: b makes room for c.
        assert!(read(&memo, "a", &decodes).await);
        assert_eq!(decodes.load(Ordering::Relaxed), 2);
        assert!(read(&memo, "c", &decodes).await);
        assert_eq!((memo.files(), memo.held()), (2, 2 * one_file()));
        assert!(read(&memo, "a", &decodes).await);
        assert!(read(&memo, "c", &decodes).await);
        assert_eq!(decodes.load(Ordering::Relaxed), 3, "a and c are held");
        assert!(read(&memo, "b", &decodes).await);
        assert_eq!(decodes.load(Ordering::Relaxed), 4, "b was let go");
        assert_eq!((memo.files(), memo.held()), (2, 2 * one_file()));
    }

    /// A budget smaller than one file holds that file while nothing else is held (the scan
    /// reads it from memory), and lets it go for the next; a budget of nothing holds nothing.
    #[tokio::test]
    async fn a_file_larger_than_the_budget_is_held_alone_and_none_with_no_budget() {
        let decodes = AtomicUsize::new(0);
        let small = DecodedFiles::new(&BOUNDED_TABLES, one_file() / 2);
        assert!(read(&small, "a", &decodes).await);
        assert!(read(&small, "b", &decodes).await);
        assert_eq!((small.files(), small.held()), (1, one_file()));
        let none = DecodedFiles::new(&BOUNDED_TABLES, 0);
        assert!(!read(&none, "a", &decodes).await);
        // Nothing left behind either: not even an empty entry.
        assert_eq!((none.files(), none.held()), (0, 0));
        assert_eq!(decodes.load(Ordering::Relaxed), 2);
    }

    /// Scans asking for one file at once decode it once, and the bytes are counted once.
    #[tokio::test]
    async fn scans_asking_at_once_decode_a_file_once() {
        let memo = DecodedFiles::new(&BOUNDED_TABLES, 10 * one_file());
        let decodes = AtomicUsize::new(0);
        let (first, second) = tokio::join!(read(&memo, "a", &decodes), read(&memo, "a", &decodes));
        assert!(first && second);
        assert_eq!(decodes.load(Ordering::Relaxed), 1);
        assert_eq!(memo.held(), one_file());
    }

    /// A decoding that fails leaves no entry behind, and the next read decodes again.
    #[tokio::test]
    async fn a_failed_decoding_leaves_nothing_behind() {
        let memo = DecodedFiles::new(&BOUNDED_TABLES, 10 * one_file());
        let failing = |_missing| async {
            Err(datafusion::error::DataFusionError::Execution(
                "corrupt".into(),
            ))
        };
        let error = memo
            .columns("a", &schema(), &[0], failing)
            .await
            .unwrap_err();
        assert!(error.to_string().contains("corrupt"), "{error}");
        assert_eq!((memo.files(), memo.held()), (0, 0));
        let decodes = AtomicUsize::new(0);
        assert!(read(&memo, "a", &decodes).await);
        assert_eq!((memo.files(), decodes.load(Ordering::Relaxed)), (1, 1));
    }
}
