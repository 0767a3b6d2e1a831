//! A session's memo of lake files decoded into Arrow: for a session that asks many questions of
//! the same few files. The weekly report asks about twenty of one week's ledger; without the memo
//! each question opens, decompresses and decodes the same files again (zstd creates a
//! compression and a decompression context for every column chunk it opens, and a report opens
//! thousands). With it each column of a file is decoded once, the first time a query reads it,
//! and every later scan of it reads memory.
//!
//! Lake files are immutable (a restatement writes new files and retires the old ones), so a
//! decoded file stays true as long as the catalog lists it; which files a scan reads is still the
//! catalog's answer at each scan ([`crate::lake_table::LakeTable`]). Only the tables the memo was
//! made for are kept, up to a budget of bytes: past it files are read from Parquet as without
//! the memo. A session whose stages run on workers is never given one (its plans must name
//! files for the workers to read).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arrow::array::{ArrayRef, RecordBatch, new_empty_array};
use arrow::compute::concat;
use arrow::datatypes::SchemaRef;
use datafusion::common::Result as DfResult;
use gpuledger_lake::tables::Table;

/// The columns of one file decoded so far, by index in the table's schema.
type Columns = HashMap<usize, ArrayRef>;

/// See the module doc. Set on a session with
/// `ctx.state_ref().write().config_mut().set_extension(Arc::new(DecodedFiles::new(..)))`.
#[derive(Debug)]
pub struct DecodedFiles {
    tables: Vec<Table>,
    budget: usize,
    held: AtomicUsize,
    /// Each file's columns, locked while a scan decodes more of them, so that scans asking at
    /// once decode a column once.
    files: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Columns>>>>,
}

impl DecodedFiles {
    /// A memo of the files of `tables`, holding about `budget` bytes of Arrow at most: past it,
    /// columns not yet decoded are read from Parquet at every scan.
    pub fn new(tables: &[Table], budget: usize) -> Self {
        Self {
            tables: tables.to_vec(),
            budget,
            held: AtomicUsize::new(0),
            files: Mutex::default(),
        }
    }

    pub fn keeps(&self, table: Table) -> bool {
        self.tables.contains(&table)
    }

    /// Bytes of Arrow the memo holds.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// Columns `wanted` (indices in `schema`, the table's) of the file at `path`, whole: those
    /// not decoded yet are decoded by `decode` (given their indices, it returns batches of just
    /// those columns in that order); `None` when some are missing and the budget is spent.
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
            let mut files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(files.entry(path.to_string()).or_default())
        };
        let mut columns = file.lock().await;
        let missing: Vec<usize> = wanted
            .iter()
            .copied()
            .filter(|c| !columns.contains_key(c))
            .collect();
        if !missing.is_empty() {
            if self.held() >= self.budget {
                return Ok(None);
            }
            let batches = decode(missing.clone()).await?;
            for (i, &c) in missing.iter().enumerate() {
                let parts: Vec<_> = batches.iter().map(|b| b.column(i).as_ref()).collect();
                let column = match parts.as_slice() {
                    [] => new_empty_array(schema.field(c).data_type()),
                    [one] => one.slice(0, one.len()),
                    _ => concat(&parts)?,
                };
                self.held
                    .fetch_add(column.get_array_memory_size(), Ordering::Relaxed);
                columns.insert(c, column);
            }
        }
        Ok(Some(
            wanted.iter().map(|c| Arc::clone(&columns[c])).collect(),
        ))
    }
}
