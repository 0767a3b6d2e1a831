//! The catalog: the manifest of Parquet files, the ingest batches that wrote them, the
//! quarantine of rejected records, the declared objects (`gpuledger apply`), API tokens and budget alerts. SQLite by default, PostgreSQL for several replicas; one code
//! path over sqlx's `Any` driver, with a migration folder per dialect.
//!
//! A batch becomes visible in one transaction: its files, its rejections, and the retirement of
//! the files it restates. Until then its Parquet files exist in the store but no scan sees them.
//!
//! The latest delivery of a restatement scope (a billing account and period) wins, whatever its
//! bytes: an input identical to an earlier batch whose files a later delivery retired makes that
//! batch's files active again, in one transaction that retires the files active for those scopes
//! until then; an input identical to what is active changes nothing.

use chrono::Utc;
use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::{AnyPool, Row};

use crate::error::{LakeError, Result};
use crate::tables::Table;
use crate::writer::WrittenFile;

/// A record the parser could not accept, kept whole in the quarantine with the reason.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    /// 1-based line (or record number for formats without lines) in the input.
    pub line: u64,
    /// The field that is wrong, as the input names it (a column, a JSON key, a label).
    pub field: String,
    pub reason: String,
    /// The offending record as it was read, truncated to a few kilobytes.
    pub raw: String,
}

impl Rejection {
    /// A NUL in any of its texts is kept as `␀` (U+2400): PostgreSQL's text cannot hold NUL, and
    /// a record that has one is exactly what a quarantine must be able to show.
    pub fn new(line: u64, field: impl Into<String>, reason: impl Into<String>, raw: &str) -> Self {
        const MAX_RAW: usize = 4096;
        let mut end = raw.len().min(MAX_RAW);
        while !raw.is_char_boundary(end) {
            end -= 1;
        }
        let shown = |text: String| {
            if text.contains('\0') {
                text.replace('\0', "\u{2400}")
            } else {
                text
            }
        };
        Self {
            line,
            field: shown(field.into()),
            reason: shown(reason.into()),
            raw: shown(raw[..end].to_string()),
        }
    }
}

/// An ingest batch about to be committed.
#[derive(Debug, Clone)]
pub struct NewBatch {
    pub batch_id: String,
    pub source: String,
    pub origin: String,
    pub content_hash: String,
    pub idempotency_key: Option<String>,
    pub records_read: u64,
    pub started_at: i64,
}

/// What a commit needs besides the batch: other ways than its exact content hash by which an
/// input is the same as one committed before, and how many records it rejected in all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CommitOptions {
    /// Records rejected in all, when more than the rejections stored (a flood of bad lines keeps
    /// only its first rejections in the quarantine).
    pub records_rejected: Option<u64>,
    /// Hashes the same input was stored under by earlier versions (over the bytes as they came,
    /// gzip included, and the arrival time): an input landed before an upgrade is still known.
    pub legacy_hashes: Vec<String>,
    /// Set for an input recognised only as a retry (an untimestamped scrape stamped with its
    /// arrival time): its stored hash is [`retry_hash`]`(content, started_at)`, and a batch of the
    /// same source with the same content that started at or after `since` (µs) is the same
    /// delivery.
    pub retry_since: Option<i64>,
}

/// A pool of at most `max` connections. A SQLite connection is a file handle on a thread of its
/// own, with nothing on a wire to go stale: sqlx's check before each acquire would be one more
/// round trip to that thread per statement, for nothing.
fn pool_options(backend: Backend, max: u32) -> AnyPoolOptions {
    AnyPoolOptions::new()
        .max_connections(max)
        .test_before_acquire(backend == Backend::Postgres)
}

/// The catalog's [`InputHash`], decided by the first connection after migration
/// `0013_input_hash` and kept: BLAKE3 for a catalog this release created, SHA-256 for one that
/// was `migrated_before` (by an earlier release, whose processes may still be landing SHA-256
/// identities). Connections racing to decide agree: the first row written is the one all read.
/// Once decided, a connection only reads it: read-only commands take no write lock for it.
async fn decide_input_hash(pool: &AnyPool, migrated_before: bool) -> Result<InputHash> {
    let decided = || async {
        let row = sqlx::query("SELECT algorithm FROM input_hash")
            .fetch_optional(pool)
            .await?;
        row.map(|row| row.try_get::<String, _>("algorithm"))
            .transpose()
    };
    let algorithm = match decided().await? {
        Some(algorithm) => algorithm,
        None => {
            let proposed = if migrated_before { "sha256" } else { "blake3" };
            sqlx::query(
                "INSERT INTO input_hash (id, algorithm) VALUES (1, $1) ON CONFLICT (id) DO NOTHING",
            )
            .bind(proposed)
            .execute(pool)
            .await?;
            decided().await?.ok_or_else(|| {
                LakeError::Invalid("the catalog's input hash was not recorded".into())
            })?
        }
    };
    match algorithm.as_str() {
        "blake3" => Ok(InputHash::Blake3),
        "sha256" => Ok(InputHash::Sha256),
        other => Err(LakeError::Invalid(format!(
            "the catalog identifies inputs by an unknown hash '{other}'"
        ))),
    }
}

/// The stored hash of an input recognised only as a retry: its content hash and when it started,
/// digits only (fixed width), so that the retries of one content are one range of the unique
/// index in any collation.
pub fn retry_hash(content_hash: &str, started_at: i64) -> String {
    format!("r{content_hash}{:020}", started_at.max(0))
}

/// What a [`retry_hash`] says of the content, without when it started: the same for every
/// retry of one content.
pub fn retry_content(retry_hash: &str) -> &str {
    &retry_hash[..retry_hash.len().saturating_sub(20)]
}

/// The stored hashes of the retries of `retry_hash`'s content that started at or after `since`:
/// one range of the unique index, bounds included.
fn retry_range(retry_hash: &str, since: i64) -> (String, String) {
    let content = retry_content(retry_hash);
    (
        format!("{content}{:020}", since.max(0)),
        format!("{content}{}", "9".repeat(20)),
    )
}

impl NewBatch {
    /// The identities that make another batch the same input as this one, as the unique indexes
    /// and [`Catalog::recognise`] know them: its source and content (for a retry, the content
    /// without its start time) and its idempotency key. Two batches sharing one are one input.
    pub fn identities(&self, commit_options: &CommitOptions) -> Vec<String> {
        let content = match commit_options.retry_since {
            Some(_) => retry_content(&self.content_hash),
            None => self.content_hash.as_str(),
        };
        let mut identities = vec![format!("{}\u{1f}{content}", self.source)];
        if let Some(key) = &self.idempotency_key {
            identities.push(format!("key\u{1f}{key}"));
        }
        identities
    }
}

/// A committed batch.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchRecord {
    pub batch_id: String,
    pub source: String,
    pub origin: String,
    pub records_read: i64,
    pub rows_landed: i64,
    pub records_rejected: i64,
    pub rows_replaced: i64,
    pub committed_at: i64,
    /// Committed in one transaction with other batches (group commit): the batch whose files
    /// hold the group's rows, this one's included. `None`: committed alone, in its own files.
    pub committed_with: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum CommitOutcome {
    Committed {
        rows_landed: u64,
        rows_replaced: u64,
    },
    /// The same input (or idempotency key) was committed before, by this batch, and what it
    /// landed is active: nothing changed.
    Duplicate(BatchRecord),
    /// The same input as this earlier batch, whose files of some scopes a later delivery had
    /// replaced: they are active again, and the `rows_replaced` rows active until now for those
    /// scopes are retired.
    Reactivated {
        batch: BatchRecord,
        rows_restored: u64,
        rows_replaced: u64,
        /// Keys of this delivery's own files that now hold the restored rows (listed under the
        /// earlier batch): keep these objects, remove the others.
        adopted: Vec<String>,
    },
}

/// A new batch committed with others in one transaction ([`Catalog::commit_group`]).
#[derive(Debug, Clone, Copy)]
pub struct GroupMember<'a> {
    pub batch: &'a NewBatch,
    /// Its rows in the group's files.
    pub rows_landed: u64,
    /// The rejections kept in the quarantine, and how many it rejected in all.
    pub rejections: &'a [Rejection],
    pub records_rejected: u64,
    /// Its other identities, to recognise it when another writer committed it first.
    pub options: &'a CommitOptions,
}

/// How [`Catalog::commit_group`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupCommitOutcome {
    Committed,
    /// Another writer committed one of the members first: nothing of the group was committed.
    Raced,
}

/// A built day of the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerDay {
    /// Microseconds: the moment the build read its inputs. Inputs committed after it make the
    /// hours they touch dirty.
    pub built_at: i64,
    /// The format of the ledger tables the day was built in (the build's `LEDGER_FORMAT`).
    pub format: i64,
    /// The batch that holds the day's `gpu_hours`, `cost_entries` and `allocations`.
    pub batch_id: String,
}

/// A file the catalog lists for scans.
#[derive(Debug, Clone, PartialEq)]
pub struct FileEntry {
    pub path: String,
    pub table: String,
    pub partition_date: String,
    pub batch_id: String,
    pub rows: i64,
    pub bytes: i64,
    pub min_ts: i64,
    pub max_ts: i64,
    /// When the file's batch was committed (microseconds).
    pub created_at: i64,
    /// When the file last became active: its commit, or a re-delivery that made it active again.
    pub activated_at: i64,
    pub replaced_by: Option<String>,
}

/// A quarantined record as listed from the catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct QuarantineEntry {
    pub batch_id: String,
    pub source: String,
    pub origin: String,
    pub rejection: Rejection,
    pub created_at: i64,
}

/// What storing a declared object did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    Created,
    Updated,
    /// The same spec was stored already: nothing was written.
    Unchanged,
}

impl PutOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            PutOutcome::Created => "created",
            PutOutcome::Updated => "updated",
            PutOutcome::Unchanged => "unchanged",
        }
    }
}

impl std::fmt::Display for PutOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A declared object as stored. The catalog does not interpret specs: the ledger validates them
/// before they are put, and reads them back into its typed specs.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredObject {
    pub kind: String,
    pub name: String,
    pub spec: serde_json::Value,
    pub created_at: i64,
    /// When the spec last changed.
    pub updated_at: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The hash an input's identity is taken with, as the catalog records it: BLAKE3 in a catalog
/// this release created, SHA-256 in one an earlier release made (see [`decide_input_hash`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputHash {
    Sha256,
    Blake3,
}

#[derive(Debug, Clone)]
pub struct Catalog {
    pool: AnyPool,
    /// Connections for the reads that must never queue behind a write (authenticating a
    /// request, listing the files a query reads): SQLite has one writer connection, which a
    /// long commit holds.
    reads: AnyPool,
    backend: Backend,
    input_hash: InputHash,
}

fn now_micros() -> i64 {
    Utc::now().timestamp_micros()
}

impl Catalog {
    /// Connects and brings the schema up to date.
    /// Connects to the catalog at `url`, creating and migrating it as needed.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::open(url, true).await
    }

    /// Connects to an existing catalog (migrating it to this release), never creating one:
    /// [`LakeError::NoLake`] when `url` holds none.
    pub async fn connect_existing(url: &str) -> Result<Self> {
        Self::open(url, false).await
    }

    async fn open(url: &str, create: bool) -> Result<Self> {
        install_default_drivers();
        let backend = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Backend::Postgres
        } else if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else {
            return Err(LakeError::Location {
                location: url.into(),
                reason: "the catalog must be sqlite://… or postgres://…".into(),
            });
        };
        let no_lake = || LakeError::NoLake(format!("catalog {}", redacted(url)));
        if !create && backend == Backend::Sqlite {
            let file = url
                .trim_start_matches("sqlite:")
                .trim_start_matches("//")
                .split('?')
                .next()
                .unwrap_or_default();
            if file != ":memory:" && !std::path::Path::new(file).is_file() {
                return Err(no_lake());
            }
        }
        // SQLite allows one writer at a time; one connection keeps writes in order without busy errors.
        let pool = pool_options(backend, if backend == Backend::Sqlite { 1 } else { 8 })
            .connect(url)
            .await?;
        let tables = match backend {
            Backend::Sqlite => {
                "SELECT count(*) AS n FROM sqlite_master WHERE name = '_sqlx_migrations'"
            }
            Backend::Postgres => {
                "SELECT count(*) AS n FROM information_schema.tables
                 WHERE table_schema = current_schema() AND table_name = '_sqlx_migrations'"
            }
        };
        let migrated_before: i64 = sqlx::query(tables).fetch_one(&pool).await?.try_get("n")?;
        if !create && migrated_before == 0 {
            return Err(no_lake());
        }
        match backend {
            Backend::Sqlite => sqlx::migrate!("../migrations/sqlite").run(&pool).await?,
            Backend::Postgres => sqlx::migrate!("../migrations/postgres").run(&pool).await?,
        }
        let input_hash = decide_input_hash(&pool, migrated_before > 0).await?;
        let reads = match backend {
            // One in-memory database per pool: the reads share the writer's connection.
            Backend::Sqlite if url.contains(":memory:") || url.contains("mode=memory") => {
                pool.clone()
            }
            Backend::Sqlite => {
                // In WAL mode readers see the last commit while a write is under way, instead of
                // waiting for it (the writes live in catalog.db-wal beside the file until a
                // checkpoint: back the catalog up with `VACUUM INTO`, not by copying the file).
                // The mode is kept in the file; SQLite answers the mode it is in.
                let mode: String = sqlx::query("PRAGMA journal_mode = WAL")
                    .fetch_one(&pool)
                    .await?
                    .try_get(0)?;
                if mode.eq_ignore_ascii_case("wal") {
                    pool_options(backend, 4).connect(url).await?
                } else {
                    // Outside WAL mode a reader can hold up the writer's commit: keep the one
                    // connection.
                    tracing::warn!(%mode, "the SQLite catalog is not in WAL mode: authentication waits for writes");
                    pool.clone()
                }
            }
            Backend::Postgres => pool_options(backend, 2).connect(url).await?,
        };
        Ok(Self {
            pool,
            reads,
            backend,
            input_hash,
        })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The hash this catalog's inputs are identified by.
    pub fn input_hash(&self) -> InputHash {
        self.input_hash
    }

    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// A round trip to the database: for readiness probes.
    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// The committed batch each of `batches` is the same input as, if any, by any of its
    /// identities: one lookup for all.
    pub async fn earlier_deliveries(
        &self,
        batches: &[(&NewBatch, &CommitOptions)],
    ) -> Result<Vec<Option<BatchRecord>>> {
        let mut connection = self.pool.acquire().await?;
        find_recognising(&mut connection, batches).await
    }

    /// Whether another writer committed the input of one of `batches` since it was looked for,
    /// asked inside the transaction that would commit them. The unique indexes stop a second copy
    /// of an exact content hash or key at its insert; an arrival-stamped retry is known by a
    /// range of hashes no index covers, so it is looked for again here, and on PostgreSQL after
    /// an advisory lock on its content: two replicas committing retries of one scrape take turns,
    /// and the second finds the first. (SQLite has one writer at a time.) Call
    /// [`Catalog::lock_retries`] first.
    async fn committed_meanwhile(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        batches: &[(&NewBatch, &CommitOptions)],
    ) -> Result<bool> {
        let retries: Vec<_> = batches
            .iter()
            .filter(|(_, options)| options.retry_since.is_some())
            .copied()
            .collect();
        if retries.is_empty() {
            return Ok(false);
        }
        let found = find_recognising(tx, &retries).await?;
        Ok(found.iter().any(Option::is_some))
    }

    /// A transaction that commits batches. On SQLite it takes the write lock at once (`BEGIN
    /// IMMEDIATE`, waiting its turn): what it reads before it writes
    /// ([`Catalog::committed_meanwhile`]) is then the latest, and it never has to turn a read
    /// into a write while another process writes, which SQLite refuses at once ("database is
    /// locked").
    async fn begin_commit(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>> {
        Ok(match self.backend {
            Backend::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await?,
            Backend::Postgres => self.pool.begin().await?,
        })
    }

    /// On PostgreSQL, the advisory locks of the arrival-stamped retries among `batches`, in one
    /// order (so that two transactions locking several never wait on each other), held until
    /// the transaction ends.
    async fn lock_retries(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        batches: &[(&NewBatch, &CommitOptions)],
    ) -> Result<()> {
        if self.backend != Backend::Postgres {
            return Ok(());
        }
        let mut keys: Vec<i64> = batches
            .iter()
            .filter(|(_, options)| options.retry_since.is_some())
            .map(|(batch, _)| retry_lock_key(retry_content(&batch.content_hash)))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        for key in keys {
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(key)
                .execute(&mut **tx)
                .await?;
        }
        Ok(())
    }

    /// Makes a batch visible: its files, its quarantine, and the retirement of every active file
    /// of the same restatement scope from earlier batches. All or nothing.
    pub async fn commit_batch(
        &self,
        batch: &NewBatch,
        files: &[WrittenFile],
        rejections: &[Rejection],
    ) -> Result<CommitOutcome> {
        self.commit_batch_recognising(batch, files, rejections, &CommitOptions::default())
            .await
    }

    /// The committed batch `batch` already is, by any of its identities.
    async fn earlier_delivery(
        &self,
        batch: &NewBatch,
        commit_options: &CommitOptions,
    ) -> Result<Option<BatchRecord>> {
        let mut found = self.earlier_deliveries(&[(batch, commit_options)]).await?;
        Ok(found.pop().flatten())
    }

    /// [`Catalog::commit_batch`] for an input that is also known by the other identities of
    /// `commit_options`.
    pub async fn commit_batch_recognising(
        &self,
        batch: &NewBatch,
        files: &[WrittenFile],
        rejections: &[Rejection],
        commit_options: &CommitOptions,
    ) -> Result<CommitOutcome> {
        if let Some(existing) = self.earlier_delivery(batch, commit_options).await? {
            return self.redeliver(existing, batch, files).await;
        }
        let now = now_micros();
        let rows_landed: u64 = files.iter().map(|f| f.rows).sum();
        let mut tx = self.begin_commit().await?;
        self.lock_retries(&mut tx, &[(batch, commit_options)])
            .await?;
        if self
            .committed_meanwhile(&mut tx, &[(batch, commit_options)])
            .await?
        {
            tx.rollback().await?;
            return match self.earlier_delivery(batch, commit_options).await? {
                Some(existing) => self.redeliver(existing, batch, files).await,
                None => Err(LakeError::Invalid(format!(
                    "batch {}: its input was committed meanwhile and then was not",
                    batch.batch_id
                ))),
            };
        }

        let mut rows_replaced: i64 = 0;
        let mut scopes: Vec<(Table, &str)> = files
            .iter()
            .filter_map(|f| f.scope.as_deref().map(|s| (f.path.table, s)))
            .collect();
        scopes.sort();
        scopes.dedup();
        for (table, scope) in scopes {
            rows_replaced +=
                retire_scope(&mut tx, table.name(), scope, &batch.batch_id, now).await?;
        }

        let records_rejected = commit_options
            .records_rejected
            .unwrap_or(rejections.len() as u64)
            .max(rejections.len() as u64);
        let counts = BatchCounts {
            rows_landed,
            records_rejected,
            rows_replaced: rows_replaced as u64,
        };
        let inserted = insert_batches(&mut tx, &[(batch, counts)], None, now).await;
        if let Err(error) = inserted {
            // A concurrent commit of the same input won the unique index: report it as the duplicate.
            tx.rollback().await?;
            return match self.earlier_delivery(batch, commit_options).await? {
                Some(existing) => self.redeliver(existing, batch, files).await,
                None => Err(error),
            };
        }

        for file in files {
            insert_file(&mut tx, file, &batch.batch_id, now, now).await?;
        }
        insert_rejections(&mut tx, batch, rejections, now).await?;
        tx.commit().await?;
        Ok(CommitOutcome::Committed {
            rows_landed,
            rows_replaced: rows_replaced as u64,
        })
    }

    /// What committing each of `batches` would be if it is an input committed before (by any of
    /// its identities): the outcome it gets without files of its own. `None`: a new input. Group
    /// commit asks this before it writes a group's files, so that a repeated input adds no rows
    /// to them. One lookup for all (its failure is the error); then each repeat whose rows a
    /// later delivery replaced is made active again, as [`Catalog::commit_batch`] would, with its
    /// own outcome or error.
    pub async fn recognise(
        &self,
        batches: &[(&NewBatch, &CommitOptions)],
    ) -> Result<Vec<Result<Option<CommitOutcome>>>> {
        let earlier = self.earlier_deliveries(batches).await?;
        let mut outcomes = Vec::with_capacity(batches.len());
        for ((batch, _), existing) in batches.iter().zip(earlier) {
            outcomes.push(match existing {
                Some(existing) => self.redeliver(existing, batch, &[]).await.map(Some),
                None => Ok(None),
            });
        }
        Ok(outcomes)
    }

    /// Makes several new batches visible in one transaction (group commit): each its own batch
    /// row, rows landed and quarantine; the group's `files` (which hold all their rows, and have
    /// no restatement scope) listed under the first. All or nothing. `Raced` when a member turned
    /// out to be committed meanwhile by another writer (its unique identity was taken): nothing
    /// was committed, and the caller asks [`Catalog::recognise`] again.
    pub async fn commit_group(
        &self,
        members: &[GroupMember<'_>],
        files: &[WrittenFile],
    ) -> Result<GroupCommitOutcome> {
        let Some(lead) = members.first() else {
            return match files {
                [] => Ok(GroupCommitOutcome::Committed),
                [file, ..] => Err(LakeError::Invalid(format!(
                    "{}: a group without batches cannot list files",
                    file.path.to_path()
                ))),
            };
        };
        if let Some(scoped) = files.iter().find(|f| f.scope.is_some()) {
            return Err(LakeError::Invalid(format!(
                "{}: a file with a restatement scope cannot be committed for a group",
                scoped.path.to_path()
            )));
        }
        let committed_with = (members.len() > 1).then_some(lead.batch.batch_id.as_str());
        let now = now_micros();
        let mut tx = self.begin_commit().await?;
        let identities: Vec<_> = members.iter().map(|m| (m.batch, m.options)).collect();
        self.lock_retries(&mut tx, &identities).await?;
        if self.committed_meanwhile(&mut tx, &identities).await? {
            tx.rollback().await?;
            return Ok(GroupCommitOutcome::Raced);
        }
        let rows: Vec<_> = members
            .iter()
            .map(|member| {
                let counts = BatchCounts {
                    rows_landed: member.rows_landed,
                    records_rejected: member.records_rejected.max(member.rejections.len() as u64),
                    rows_replaced: 0,
                };
                (member.batch, counts)
            })
            .collect();
        if let Err(error) = insert_batches(&mut tx, &rows, committed_with, now).await {
            // A member's unique identity was taken meanwhile (or the insert failed).
            tx.rollback().await?;
            let earlier = self.earlier_deliveries(&identities).await?;
            return match earlier.iter().any(Option::is_some) {
                true => Ok(GroupCommitOutcome::Raced),
                false => Err(error),
            };
        }
        for member in members {
            insert_rejections(&mut tx, member.batch, member.rejections, now).await?;
        }
        for file in files {
            insert_file(&mut tx, file, &lead.batch.batch_id, now, now).await?;
        }
        tx.commit().await?;
        Ok(GroupCommitOutcome::Committed)
    }

    /// `batch` is the same input as `existing`. A retry under the same idempotency key, or an
    /// input whose files are all active, changes nothing; otherwise the scopes where a later
    /// delivery replaced `existing` get its rows back, all in one transaction. They come back in
    /// this delivery's own copies (`files`, landed under `existing`'s batch) when it brought
    /// some: the retired objects may be under `_superseded/` or deleted already
    /// (lake/src/retirement.rs). Without copies, the retired files themselves are active again
    /// (their objects are moved back by the next retirement pass).
    async fn redeliver(
        &self,
        existing: BatchRecord,
        batch: &NewBatch,
        files: &[WrittenFile],
    ) -> Result<CommitOutcome> {
        let retry = sqlx::query(
            "SELECT 1 AS retry FROM ingest_batches WHERE batch_id = $1 AND idempotency_key = $2",
        )
        .bind(&existing.batch_id)
        .bind(batch.idempotency_key.as_deref())
        .fetch_optional(&self.pool)
        .await?;
        if retry.is_some() {
            return Ok(CommitOutcome::Duplicate(existing));
        }
        let now = now_micros();
        let mut tx = self.pool.begin().await?;
        // Files merged away by a compaction are not the delivery's: the file they were merged
        // into is (same batch, same scope).
        // A scope where the batch has an active file (its own copies, landed by an earlier
        // re-delivery) is not superseded, whatever older copies of it are retired.
        let superseded = sqlx::query(
            "SELECT DISTINCT table_name, scope FROM files f
             WHERE batch_id = $1 AND scope IS NOT NULL AND replaced_by IS NOT NULL
               AND compacted_at IS NULL
               AND NOT EXISTS (SELECT 1 FROM files g WHERE g.batch_id = f.batch_id
                   AND g.table_name = f.table_name AND g.scope = f.scope AND g.replaced_by IS NULL)
             ORDER BY table_name, scope",
        )
        .bind(&existing.batch_id)
        .fetch_all(&mut *tx)
        .await?;
        if superseded.is_empty() {
            tx.rollback().await?;
            return Ok(CommitOutcome::Duplicate(existing));
        }
        let (mut rows_restored, mut rows_replaced) = (0, 0);
        let mut adopted = Vec::new();
        for row in &superseded {
            let (table, scope): (String, String) =
                (row.try_get("table_name")?, row.try_get("scope")?);
            rows_replaced += retire_scope(&mut tx, &table, &scope, &existing.batch_id, now).await?;
            let mut copies = Vec::new();
            for file in files.iter().filter(|f| {
                f.path.table.name() == table && f.scope.as_deref() == Some(scope.as_str())
            }) {
                let path = file.path.to_path().to_string();
                let known = sqlx::query("SELECT 1 AS known FROM files WHERE path = $1")
                    .bind(&path)
                    .fetch_optional(&mut *tx)
                    .await?;
                if known.is_none() {
                    copies.push((path, file));
                }
            }
            if copies.is_empty() {
                // The files retired last: one generation of the delivery's rows.
                let generation = "batch_id = $1 AND table_name = $2 AND scope = $3
                     AND compacted_at IS NULL AND deleted_at IS NULL AND replaced_by IS NOT NULL
                     AND replaced_at = (SELECT MAX(replaced_at) FROM files
                         WHERE batch_id = $1 AND table_name = $2 AND scope = $3
                           AND compacted_at IS NULL AND deleted_at IS NULL AND replaced_by IS NOT NULL)";
                let restored = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT CAST(COALESCE(SUM(row_count), 0) AS BIGINT) AS n FROM files WHERE {generation}"
                )))
                .bind(&existing.batch_id)
                .bind(&table)
                .bind(&scope)
                .fetch_one(&mut *tx)
                .await?;
                rows_restored += restored.try_get::<i64, _>("n")?;
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "UPDATE files SET replaced_by = NULL, replaced_at = NULL, activated_at = $4
                     WHERE {generation}"
                )))
                .bind(&existing.batch_id)
                .bind(&table)
                .bind(&scope)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            } else {
                for (path, file) in copies {
                    insert_file(&mut tx, file, &existing.batch_id, now, now).await?;
                    rows_restored += file.rows as i64;
                    adopted.push(path);
                }
            }
        }
        tx.commit().await?;
        Ok(CommitOutcome::Reactivated {
            batch: existing,
            rows_restored: rows_restored as u64,
            rows_replaced: rows_replaced as u64,
            adopted,
        })
    }

    /// Active (not restated) files of a table whose time range overlaps `[from, to)`, in
    /// microseconds; `None` bounds are open. Scans call this instead of listing the store.
    pub async fn active_files(
        &self,
        table: Table,
        from: Option<i64>,
        to: Option<i64>,
    ) -> Result<Vec<FileEntry>> {
        let rows = sqlx::query(
            "SELECT path, table_name, partition_date, batch_id, row_count, byte_count, min_ts, max_ts, created_at, activated_at, replaced_by
             FROM files
             WHERE table_name = $1 AND replaced_by IS NULL AND max_ts >= $2 AND min_ts < $3
             ORDER BY partition_date, path",
        )
        .bind(table.name())
        .bind(from.unwrap_or(i64::MIN))
        .bind(to.unwrap_or(i64::MAX))
        .fetch_all(&self.reads)
        .await?;
        rows.iter().map(file_from_row).collect()
    }

    /// Every file, restated ones included (for `system.files`).
    pub async fn all_files(&self) -> Result<Vec<FileEntry>> {
        let rows = sqlx::query(
            "SELECT path, table_name, partition_date, batch_id, row_count, byte_count, min_ts, max_ts, created_at, activated_at, replaced_by
             FROM files ORDER BY table_name, partition_date, path",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(file_from_row).collect()
    }

    /// Files of `table` that became active or were retired after `since` (microseconds): what
    /// changed in the inputs since a ledger day was built. A file becomes active when its batch
    /// commits and again when a re-delivery of that batch brings it back.
    pub async fn files_committed_since(&self, table: Table, since: i64) -> Result<Vec<FileEntry>> {
        let rows = sqlx::query(
            "SELECT path, table_name, partition_date, batch_id, row_count, byte_count, min_ts, max_ts, created_at, activated_at, replaced_by
             FROM files WHERE table_name = $1 AND (activated_at > $2 OR replaced_at > $2)
             ORDER BY activated_at, path",
        )
        .bind(table.name())
        .bind(since)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(file_from_row).collect()
    }

    /// Built ledger days (`YYYY-MM-DD`): when and in which format each was built.
    pub async fn ledger_days(&self) -> Result<std::collections::BTreeMap<String, LedgerDay>> {
        let rows = sqlx::query("SELECT day, built_at, format, batch_id FROM ledger_days")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                let day = LedgerDay {
                    built_at: r.try_get("built_at")?,
                    format: r.try_get("format")?,
                    batch_id: r.try_get("batch_id")?,
                };
                Ok((r.try_get("day")?, day))
            })
            .collect()
    }

    pub async fn record_ledger_day(&self, day: &str, built: &LedgerDay) -> Result<()> {
        sqlx::query(
            "INSERT INTO ledger_days (day, built_at, batch_id, format) VALUES ($1, $2, $3, $4)
             ON CONFLICT (day) DO UPDATE SET built_at = excluded.built_at,
                 batch_id = excluded.batch_id, format = excluded.format",
        )
        .bind(day)
        .bind(built.built_at)
        .bind(&built.batch_id)
        .bind(built.format)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn batches(&self) -> Result<Vec<BatchRecord>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {BATCH_COLUMNS} FROM ingest_batches ORDER BY committed_at, batch_id"
        )))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(batch_from_row).collect())
    }

    pub async fn quarantine(&self) -> Result<Vec<QuarantineEntry>> {
        let rows = sqlx::query(
            "SELECT batch_id, source, origin, line, field, reason, raw, created_at FROM quarantine ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(QuarantineEntry {
                    batch_id: r.try_get("batch_id")?,
                    source: r.try_get("source")?,
                    origin: r.try_get("origin")?,
                    rejection: Rejection {
                        line: r.try_get::<i64, _>("line")? as u64,
                        field: r.try_get("field")?,
                        reason: r.try_get("reason")?,
                        raw: r.try_get("raw")?,
                    },
                    created_at: r.try_get("created_at")?,
                })
            })
            .collect()
    }

    /// Stores one declared object; see [`Catalog::put_objects`].
    pub async fn put_object(
        &self,
        kind: &str,
        name: &str,
        spec: &serde_json::Value,
    ) -> Result<PutOutcome> {
        let outcomes = self.put_objects([(kind, name, spec)]).await?;
        Ok(outcomes[0])
    }

    /// Stores declared objects `(kind, name, spec)` in one transaction: all of them or none.
    /// An object whose stored spec is equal is left alone, `updated_at` included.
    pub async fn put_objects<'a>(
        &self,
        objects: impl IntoIterator<Item = (&'a str, &'a str, &'a serde_json::Value)>,
    ) -> Result<Vec<PutOutcome>> {
        let now = now_micros();
        let mut tx = self.pool.begin().await?;
        let mut outcomes = Vec::new();
        for (kind, name, spec) in objects {
            let stored =
                sqlx::query("SELECT spec FROM catalog_objects WHERE kind = $1 AND name = $2")
                    .bind(kind)
                    .bind(name)
                    .fetch_optional(&mut *tx)
                    .await?;
            let outcome = match stored {
                None => {
                    sqlx::query(
                        "INSERT INTO catalog_objects (kind, name, spec, created_at, updated_at)
                         VALUES ($1, $2, $3, $4, $4)",
                    )
                    .bind(kind)
                    .bind(name)
                    .bind(spec.to_string())
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                    PutOutcome::Created
                }
                Some(row)
                    if parse_spec(kind, name, &row.try_get::<String, _>("spec")?)? == *spec =>
                {
                    PutOutcome::Unchanged
                }
                Some(_) => {
                    sqlx::query(
                        "UPDATE catalog_objects SET spec = $1, updated_at = $2 WHERE kind = $3 AND name = $4",
                    )
                    .bind(spec.to_string())
                    .bind(now)
                    .bind(kind)
                    .bind(name)
                    .execute(&mut *tx)
                    .await?;
                    PutOutcome::Updated
                }
            };
            outcomes.push(outcome);
        }
        tx.commit().await?;
        Ok(outcomes)
    }

    /// The declared objects of one kind as stored, by name; readers use [`Catalog::documents`]
    /// or the typed [`Catalog::objects_of`] (catalog/declared.rs).
    pub async fn objects(&self, kind: &str) -> Result<Vec<StoredObject>> {
        let rows = sqlx::query(
            "SELECT kind, name, spec, created_at, updated_at FROM catalog_objects
             WHERE kind = $1 ORDER BY name",
        )
        .bind(kind)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let (kind, name): (String, String) = (r.try_get("kind")?, r.try_get("name")?);
                let spec = parse_spec(&kind, &name, &r.try_get::<String, _>("spec")?)?;
                Ok(StoredObject {
                    kind,
                    name,
                    spec,
                    created_at: r.try_get("created_at")?,
                    updated_at: r.try_get("updated_at")?,
                })
            })
            .collect()
    }

    /// Deletes a declared object; `false` when there was none of that kind and name.
    pub async fn delete_object(&self, kind: &str, name: &str) -> Result<bool> {
        let deleted = sqlx::query("DELETE FROM catalog_objects WHERE kind = $1 AND name = $2")
            .bind(kind)
            .bind(name)
            .execute(&self.pool)
            .await?;
        Ok(deleted.rows_affected() > 0)
    }
}

fn parse_spec(kind: &str, name: &str, text: &str) -> Result<serde_json::Value> {
    serde_json::from_str(text).map_err(|error| {
        LakeError::Invalid(format!(
            "catalog object {kind}/{name}: the stored spec is not JSON: {error}"
        ))
    })
}

fn batch_from_row(r: &sqlx::any::AnyRow) -> BatchRecord {
    BatchRecord {
        batch_id: r.get("batch_id"),
        source: r.get("source"),
        origin: r.get("origin"),
        records_read: r.get("records_read"),
        rows_landed: r.get("rows_landed"),
        records_rejected: r.get("records_rejected"),
        rows_replaced: r.get("rows_replaced"),
        committed_at: r.get("committed_at"),
        committed_with: r.get("committed_with"),
    }
}

/// The columns of a [`BatchRecord`], as [`batch_from_row`] reads them.
const BATCH_COLUMNS: &str = "batch_id, source, origin, records_read, rows_landed, records_rejected, \
     rows_replaced, committed_at, committed_with";

/// Arms of one compound SELECT, and batch rows of one INSERT. Few enough that binding stays
/// cheap (SQLite finds a `$n` parameter by a linear search, so binding n of them costs n²), and
/// that the statements of groups of like inputs take a few shapes, each prepared once per
/// connection.
const ARMS_PER_STATEMENT: usize = 16;
const BATCH_ROWS_PER_STATEMENT: usize = 16;

/// One way an earlier batch is the same input as a new one. Ways of a lower `rank` are tried
/// first: an arrival-stamped retry, then the hashes of earlier releases in order, then the exact
/// content and the idempotency key (one rank: the earlier committed of the two wins).
struct IdentityArm<'a> {
    /// The position of the new batch among those looked for.
    member: usize,
    rank: usize,
    matches: IdentityMatch<'a>,
}

enum IdentityMatch<'a> {
    /// The batches of a source whose content hash lies in a range (a retry's content, from
    /// `since` on).
    HashRange {
        source: &'a str,
        from: String,
        to: String,
    },
    Hash {
        source: &'a str,
        hash: &'a str,
    },
    Key(&'a str),
}

impl<'a> IdentityArm<'a> {
    fn of(member: usize, batch: &'a NewBatch, options: &'a CommitOptions) -> Vec<Self> {
        let source = batch.source.as_str();
        let mut arms = Vec::with_capacity(3 + options.legacy_hashes.len());
        let mut arm = |rank, matches| {
            arms.push(Self {
                member,
                rank,
                matches,
            });
        };
        if let Some(since) = options.retry_since {
            let (from, to) = retry_range(&batch.content_hash, since);
            arm(0, IdentityMatch::HashRange { source, from, to });
        }
        for (position, legacy) in options.legacy_hashes.iter().enumerate() {
            arm(
                1 + position,
                IdentityMatch::Hash {
                    source,
                    hash: legacy,
                },
            );
        }
        let content_rank = 1 + options.legacy_hashes.len();
        let hash = &batch.content_hash;
        arm(content_rank, IdentityMatch::Hash { source, hash });
        if let Some(key) = &batch.idempotency_key {
            arm(content_rank, IdentityMatch::Key(key));
        }
        arms
    }
}

/// The committed batch each of `batches` is the same input as, by any of its identities (see
/// [`IdentityArm`]), read through `connection` (a transaction's, to see its own view): one
/// statement for up to [`ARMS_PER_STATEMENT`] identities, each arm on a unique index. Among the
/// batches one identity names, the earliest committed (then the least id) is the one.
async fn find_recognising(
    connection: &mut sqlx::AnyConnection,
    batches: &[(&NewBatch, &CommitOptions)],
) -> Result<Vec<Option<BatchRecord>>> {
    let arms: Vec<IdentityArm> = batches
        .iter()
        .enumerate()
        .flat_map(|(member, (batch, options))| IdentityArm::of(member, batch, options))
        .collect();
    let mut found: Vec<Option<(i64, BatchRecord)>> = vec![None; batches.len()];
    for chunk in arms.chunks(ARMS_PER_STATEMENT) {
        // Members are numbered from the chunk's first: like chunks are one statement.
        let first = chunk[0].member;
        let mut sql = String::new();
        let mut binds: Vec<&str> = Vec::new();
        for arm in chunk {
            if !sql.is_empty() {
                sql.push_str(" UNION ALL ");
            }
            let condition = match &arm.matches {
                IdentityMatch::HashRange { source, from, to } => {
                    binds.extend([*source, from.as_str(), to.as_str()]);
                    let n = binds.len();
                    format!(
                        "source = ${} AND content_hash >= ${} AND content_hash <= ${n}",
                        n - 2,
                        n - 1
                    )
                }
                IdentityMatch::Hash { source, hash } => {
                    binds.extend([*source, *hash]);
                    let n = binds.len();
                    format!("source = ${} AND content_hash = ${n}", n - 1)
                }
                IdentityMatch::Key(key) => {
                    binds.push(key);
                    format!(
                        "idempotency_key IS NOT NULL AND idempotency_key = ${}",
                        binds.len()
                    )
                }
            };
            sql.push_str(&format!(
                "SELECT CAST({} AS BIGINT) AS member, CAST({} AS BIGINT) AS arm_rank, {BATCH_COLUMNS} \
                 FROM ingest_batches WHERE {condition}",
                arm.member - first,
                arm.rank
            ));
        }
        // Only numbers and placeholders are formatted into the statement; every value is bound.
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for value in binds {
            query = query.bind(value);
        }
        for row in query.fetch_all(&mut *connection).await? {
            let member: i64 = row.try_get("member")?;
            let rank: i64 = row.try_get("arm_rank")?;
            let record = batch_from_row(&row);
            let slot = &mut found[first + member as usize];
            let better = match slot {
                None => true,
                Some((best_rank, best)) => {
                    (rank, record.committed_at, &record.batch_id)
                        < (*best_rank, best.committed_at, &best.batch_id)
                }
            };
            if better {
                *slot = Some((rank, record));
            }
        }
    }
    Ok(found
        .into_iter()
        .map(|slot| slot.map(|(_, record)| record))
        .collect())
}

/// The advisory lock of a retried content: the first 60 bits of its hash (`r` and hex digits).
/// Two contents sharing a lock only take turns.
fn retry_lock_key(content: &str) -> i64 {
    content
        .get(1..16)
        .and_then(|hex| i64::from_str_radix(hex, 16).ok())
        .unwrap_or(0)
}

fn file_from_row(r: &sqlx::any::AnyRow) -> Result<FileEntry> {
    Ok(FileEntry {
        path: r.try_get("path")?,
        table: r.try_get("table_name")?,
        partition_date: r.try_get("partition_date")?,
        batch_id: r.try_get("batch_id")?,
        rows: r.try_get("row_count")?,
        bytes: r.try_get("byte_count")?,
        min_ts: r.try_get("min_ts")?,
        max_ts: r.try_get("max_ts")?,
        created_at: r.try_get("created_at")?,
        activated_at: r.try_get("activated_at")?,
        replaced_by: r.try_get("replaced_by")?,
    })
}

/// Lists a written file in the manifest, active from `activated_at`. Its object is under
/// `_staging/` (`moved_at` set: not under `tables/`) until `retirement::place` moves it.
/// The counts a batch row records.
struct BatchCounts {
    rows_landed: u64,
    records_rejected: u64,
    rows_replaced: u64,
}

/// Inserts the rows of `batches`, committed at one time (and with one lead when grouped), up to
/// [`BATCH_ROWS_PER_STATEMENT`] per statement.
async fn insert_batches(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    batches: &[(&NewBatch, BatchCounts)],
    committed_with: Option<&str>,
    committed_at: i64,
) -> Result<()> {
    const COLUMNS: usize = 12;
    for chunk in batches.chunks(BATCH_ROWS_PER_STATEMENT) {
        let rows: Vec<String> = (0..chunk.len())
            .map(|row| {
                let placeholders: Vec<String> = (1..=COLUMNS)
                    .map(|column| format!("${}", row * COLUMNS + column))
                    .collect();
                format!("({})", placeholders.join(", "))
            })
            .collect();
        let sql = format!(
            "INSERT INTO ingest_batches (batch_id, source, origin, content_hash, idempotency_key, records_read,
                 rows_landed, records_rejected, rows_replaced, started_at, committed_at, committed_with)
             VALUES {}",
            rows.join(", ")
        );
        // Only placeholders are formatted into the statement; every value is bound.
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (batch, counts) in chunk {
            query = query
                .bind(&batch.batch_id)
                .bind(&batch.source)
                .bind(&batch.origin)
                .bind(&batch.content_hash)
                .bind(batch.idempotency_key.as_deref())
                .bind(batch.records_read as i64)
                .bind(counts.rows_landed as i64)
                .bind(counts.records_rejected as i64)
                .bind(counts.rows_replaced as i64)
                .bind(batch.started_at)
                .bind(committed_at)
                .bind(committed_with);
        }
        query.execute(&mut **tx).await?;
    }
    Ok(())
}

async fn insert_rejections(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    batch: &NewBatch,
    rejections: &[Rejection],
    created_at: i64,
) -> Result<()> {
    for rejection in rejections {
        sqlx::query(
            "INSERT INTO quarantine (batch_id, source, origin, line, field, reason, raw, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&batch.batch_id)
        .bind(&batch.source)
        .bind(&batch.origin)
        .bind(rejection.line as i64)
        .bind(&rejection.field)
        .bind(&rejection.reason)
        .bind(&rejection.raw)
        .bind(created_at)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

async fn insert_file(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    file: &WrittenFile,
    batch_id: &str,
    created_at: i64,
    activated_at: i64,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO files (path, table_name, partition_date, batch_id, scope, row_count, byte_count,
             min_ts, max_ts, created_at, activated_at, moved_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $10)",
    )
    .bind(file.path.to_path().to_string())
    .bind(file.path.table.name())
    .bind(file.path.date.format("%Y-%m-%d").to_string())
    .bind(batch_id)
    .bind(file.scope.as_deref())
    .bind(file.rows as i64)
    .bind(file.bytes as i64)
    .bind(file.min_ts)
    .bind(file.max_ts)
    .bind(created_at)
    .bind(activated_at)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Retires the active files of a scope in favour of `by` (a batch id); returns their rows.
/// Every way a file stops being active goes through here or [`Catalog::commit_compaction`]; the
/// objects follow in lake/src/retirement.rs.
async fn retire_scope(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    table: &str,
    scope: &str,
    by: &str,
    now: i64,
) -> Result<i64> {
    let active = sqlx::query(
        "SELECT COALESCE(CAST(SUM(row_count) AS BIGINT), 0) AS n FROM files
         WHERE table_name = $1 AND scope = $2 AND replaced_by IS NULL",
    )
    .bind(table)
    .bind(scope)
    .fetch_one(&mut **tx)
    .await?;
    sqlx::query(
        "UPDATE files SET replaced_by = $1, replaced_at = $2
         WHERE table_name = $3 AND scope = $4 AND replaced_by IS NULL",
    )
    .bind(by)
    .bind(now)
    .bind(table)
    .bind(scope)
    .execute(&mut **tx)
    .await?;
    Ok(active.try_get("n")?)
}

mod budget_alerts;
mod declared;
/// A catalog URL for messages: without its password or its options.
fn redacted(url: &str) -> String {
    let base = url.split('?').next().unwrap_or(url);
    match base.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('@') {
            Some((user, host)) => {
                let user = user.split(':').next().unwrap_or_default();
                format!("{scheme}://{user}@{host}")
            }
            None => base.to_string(),
        },
        None => base.to_string(),
    }
}

mod idempotency;
mod leases;
mod report_runs;
mod retirement;
mod tokens;

pub use budget_alerts::BudgetAlert;
pub use declared::TypedObject;
pub use idempotency::StoredResponse;
pub use report_runs::{ReportRun, RunStatus};
pub use retirement::{CompactionCandidate, RetiredFile};
pub use tokens::TokenRecord;

#[cfg(test)]
mod tests;
