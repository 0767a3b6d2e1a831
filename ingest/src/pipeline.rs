//! The ingest pipeline: one input in, one catalog batch out, exactly once.
//!
//! ```text
//! file | stdin | bytes ─► count+hash ─► gunzip? ─► hash (its own thread past one chunk)
//!        ─► parser (blocking thread)
//!        ─► channel ─► dedupe (known identities) ─► TableWriter (Parquet objects, invisible)
//!        ─► Catalog::commit_batch (one transaction: files + quarantine + restatement)
//! ```
//! A small body already in memory ([`PARSED_INLINE`]) is parsed on the calling task instead, its
//! batches held until it is done: a scrape parses in less time than the hand-offs to a blocking
//! thread and back take.
//! The content hash covers the source, the options that change the output and every input
//! byte, so a re-sent input is recognised and lands nothing; its objects are removed again (a
//! re-sent billing delivery that a later one had replaced becomes active again instead).
//! Rows of tables with an identity column (`token_usage.request_id`, `scheduler_events.event_id`)
//! whose identity already landed are dropped, so byte-different re-deliveries of the same
//! requests or events land nothing new either.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow::array::{Array, AsArray, BooleanArray};
use arrow::record_batch::RecordBatch;
use chrono::{DateTime, Utc};
use gpuledger_lake::catalog::{CommitOptions, CommitOutcome, InputHash, NewBatch};
use gpuledger_lake::tables::Table;
use gpuledger_lake::writer::{TableWriter, WrittenFile};
use gpuledger_lake::{Lake, Rejection};
use object_store::ObjectStoreExt;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use crate::error::IngestError;
use crate::record::{DEFAULT_BATCH_ROWS, ParseContext, Sink, strict_stop};
use crate::{dcgm, events, focus, remote_write, tokens};
use group_commit::{Held, Member};
use hashed_input::{HashedInput, InputHasher};

/// The kinds of input: the file formats, and Prometheus remote-write (HTTP only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Dcgm,
    Focus,
    /// An AWS Cost and Usage Report (legacy CSV), landed as FOCUS.
    AwsCur,
    /// An Azure Enterprise Agreement cost export, landed as FOCUS.
    AzureEa,
    Tokens,
    Events,
    /// A snappy-compressed protobuf `WriteRequest`; lands like dcgm.
    RemoteWrite,
}

/// What a parser read.
#[derive(Default)]
struct Parsed {
    records: u64,
    /// Series the source leaves out by design (remote-write: those that are not DCGM's).
    ignored_series: u64,
    /// Records the parser dropped as repeated within the input (scheduler events).
    duplicates: u64,
    /// Records were read relative to `ParseContext::at` (untimestamped dcgm samples, the ages
    /// of a `kubectl get events` table): the time is part of what landed.
    read_at: bool,
    /// Columns its format makes mandatory that the input lacks (FOCUS); its rows land with
    /// nulls there.
    missing_columns: Vec<&'static str>,
}

impl Source {
    /// The file formats `gpuledger ingest` and `POST /v1/ingest/{source}` take.
    pub const ALL: [Source; 6] = [
        Source::Dcgm,
        Source::Focus,
        Source::AwsCur,
        Source::AzureEa,
        Source::Tokens,
        Source::Events,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Source::Dcgm => "dcgm",
            Source::Focus => "focus",
            Source::AwsCur => "aws-cur",
            Source::AzureEa => "azure-ea",
            Source::Tokens => "tokens",
            Source::Events => "events",
            Source::RemoteWrite => "remote_write",
        }
    }

    /// Billing exports, FOCUS or provider-native: they land in `billing_lines`, where a later
    /// delivery of a billing period replaces the earlier one.
    pub fn is_billing(self) -> bool {
        matches!(self, Source::Focus | Source::AwsCur | Source::AzureEa)
    }

    /// Whether a small input of this source may be parsed on the calling task: text read line by
    /// line, whose rows are at most its lines. Not FOCUS (a Parquet file of a few KiB can decode
    /// to millions of rows) nor remote-write (snappy, many times its size decompressed).
    fn parses_inline(self) -> bool {
        matches!(self, Source::Dcgm | Source::Tokens | Source::Events)
    }

    /// Runs this source's parser; records are what it read (for dcgm: sample lines).
    fn parse(
        self,
        input: &mut dyn BufRead,
        ctx: &ParseContext,
        sink: &mut dyn Sink,
    ) -> Result<Parsed, IngestError> {
        let records = |records| Parsed {
            records,
            ..Parsed::default()
        };
        Ok(match self {
            Source::Dcgm => {
                let stats = dcgm::parse(input, ctx, sink)?;
                Parsed {
                    read_at: stats.untimestamped > 0,
                    ..records(stats.samples + stats.sentinels_dropped + stats.rejected)
                }
            }
            Source::Focus => {
                let stats = focus::parse(input, ctx, sink)?;
                Parsed {
                    missing_columns: stats.missing_mandatory_columns,
                    ..records(stats.records_read)
                }
            }
            Source::AwsCur | Source::AzureEa => {
                let native = if self == Source::AwsCur {
                    focus::Native::AwsCur
                } else {
                    focus::Native::AzureEa
                };
                records(focus::parse_native(input, ctx, sink, native)?.records_read)
            }
            Source::Tokens => records(tokens::parse(input, ctx, sink)?.records),
            Source::Events => {
                let stats = events::parse(input, ctx, sink)?;
                Parsed {
                    records: stats.records,
                    duplicates: stats.duplicates,
                    read_at: stats.format == Some(events::InputFormat::KubectlEvents),
                    ..Parsed::default()
                }
            }
            Source::RemoteWrite => {
                let stats = remote_write::parse(input, ctx, sink)?;
                Parsed {
                    records: stats.samples,
                    ignored_series: stats.ignored_series,
                    ..Parsed::default()
                }
            }
        })
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Source {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Source::ALL
            .into_iter()
            .find(|source| source.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown source '{s}' (expected dcgm, focus, aws-cur, azure-ea, tokens or events)"
                )
            })
    }
}

/// Inputs in memory up to this size, of a source read as lines of text ([`Source::parses_inline`])
/// and not gzip, are parsed on the calling task: a few hundred lines, a fraction of a
/// millisecond, and at most as many rows. Others go to a blocking thread and stream.
pub const PARSED_INLINE: usize = 64 << 10;

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Where the bytes come from.
pub enum Input {
    Path(PathBuf),
    Stdin,
    /// A body already in memory (HTTP), with a name for messages.
    Bytes {
        origin: String,
        bytes: bytes::Bytes,
    },
    /// A stream made as it is read (the demo's generated month of scrapes, a request body),
    /// with a name for messages and its size when declared (a Content-Length).
    Reader {
        origin: String,
        reader: Box<dyn Read + Send>,
        size: Option<u64>,
    },
}

impl Input {
    pub fn origin(&self) -> String {
        match self {
            Input::Path(path) => path.display().to_string(),
            Input::Stdin => "-".to_string(),
            Input::Bytes { origin, .. } | Input::Reader { origin, .. } => origin.clone(),
        }
    }

    /// The size in bytes when known up front (for progress bars, and to size read buffers).
    pub fn size(&self) -> Option<u64> {
        match self {
            Input::Path(path) => std::fs::metadata(path).ok().map(|m| m.len()),
            Input::Stdin => None,
            Input::Reader { size, .. } => *size,
            Input::Bytes { bytes, .. } => Some(bytes.len() as u64),
        }
    }

    /// When an untimestamped dcgm scrape was taken if `--at` is not given: a file's modification
    /// time (so re-ingesting the same file is recognised), else now.
    pub fn default_time(&self) -> DateTime<Utc> {
        match self {
            Input::Path(path) => std::fs::metadata(path)
                .and_then(|m| m.modified())
                .map(DateTime::<Utc>::from)
                .unwrap_or_else(|_| Utc::now()),
            _ => Utc::now(),
        }
    }

    fn open(self) -> Result<Box<dyn Read + Send>, IngestError> {
        let origin = self.origin();
        Ok(match self {
            Input::Path(path) => Box::new(
                std::fs::File::open(&path)
                    .map_err(|source| IngestError::Read { origin, source })?,
            ),
            Input::Stdin => Box::new(std::io::stdin()),
            Input::Bytes { bytes, .. } => Box::new(std::io::Cursor::new(bytes)),
            Input::Reader { reader, .. } => reader,
        })
    }
}

/// Fails unless every row of `batch` belongs to `team`: a team-scoped sender lands only its
/// team's events and requests, and nothing of the fleet's (telemetry, bills) or of no team.
fn only_team(
    table: Table,
    batch: &RecordBatch,
    team: &str,
    origin: &str,
) -> Result<(), IngestError> {
    let refuse = |row: usize, reason: String| IngestError::OtherTeam {
        origin: origin.to_string(),
        table: table.name().to_string(),
        row: row + 1,
        reason,
    };
    let Some(column) = batch
        .column_by_name("team")
        .filter(|_| matches!(table, Table::SchedulerEvents | Table::TokenUsage))
    else {
        return Err(refuse(
            0,
            format!(
                "a token of team '{team}' lands only its team's scheduler events and gateway requests, not {table}"
            ),
        ));
    };
    let teams = column.as_string::<i32>();
    for row in 0..batch.num_rows() {
        if teams.is_null(row) {
            return Err(refuse(
                row,
                format!(
                    "no team label; a token of team '{team}' lands only rows labelled team '{team}'"
                ),
            ));
        }
        if teams.value(row) != team {
            return Err(refuse(
                row,
                format!(
                    "labelled team '{}'; a token of team '{team}' lands only its own",
                    teams.value(row)
                ),
            ));
        }
    }
    Ok(())
}

#[derive(Debug, Clone)]
pub struct IngestOptions {
    pub source: Source,
    pub context: ParseContext,
    /// Reject the whole input on the first bad record.
    pub strict: bool,
    /// A client-chosen key: a second request with the same key lands nothing.
    pub idempotency_key: Option<String>,
    /// Bytes read so far, for progress bars.
    pub progress: Option<Arc<AtomicU64>>,
    /// Whether `context.at` was declared (`--at`, `?at=`, a file's modification time, the time a
    /// scrape was taken) rather than the clock at arrival. A declared time is part of an input's
    /// identity. An arrival time is not: an input read relative to it (an untimestamped scrape)
    /// is recognised only as a retry, the same content from the same `sender` within
    /// `retry_window`.
    pub at_declared: bool,
    /// Who sent the input (an API token's id), for recognising retries.
    pub sender: Option<String>,
    /// How long an input stamped with its arrival time is recognised as retried.
    pub retry_window: std::time::Duration,
    pub limits: InputLimits,
    /// The team of a team-scoped sender: every row it lands must carry that `team` (scheduler
    /// events, gateway requests), or nothing lands.
    pub only_team: Option<String>,
    /// Commit a small telemetry input with others arriving at the same time (`serve`); `None`:
    /// the input is its own batch, files and transaction, as `gpuledger ingest` lands a file.
    pub group: Option<GroupCommit>,
}

/// A bound on an input, with the flag that sets it (for the error message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub bytes: u64,
    pub name: &'static str,
}

/// What one input may hold; checked as the bytes stream through, never by buffering them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputLimits {
    /// The input after gunzip (a gzip bomb stops here).
    pub max_decompressed: Option<Limit>,
    /// One line of a text input (binary inputs, FOCUS Parquet and remote-write, have no lines).
    pub max_line: Option<Limit>,
    /// Rejected records kept in the quarantine per input; the rest are counted only.
    pub max_rejections_kept: usize,
    /// Rows a parser emits at a time, each batch written (sorted, encoded) as it comes: the rows
    /// an input holds grow with this, not with the input's size (a remote-write body is
    /// decompressed whole, a FOCUS Parquet file read whole). At most
    /// [`crate::record::MAX_BATCH_ROWS`].
    pub batch_rows: usize,
}

/// The default of [`InputLimits::max_line`]: 1 MiB.
pub const DEFAULT_MAX_LINE_BYTES: u64 = 1 << 20;
/// The default of [`InputLimits::max_rejections_kept`].
pub const DEFAULT_MAX_REJECTIONS_KEPT: usize = 1000;

impl Default for InputLimits {
    fn default() -> Self {
        Self {
            max_decompressed: None,
            max_line: Some(Limit {
                bytes: DEFAULT_MAX_LINE_BYTES,
                name: "max line length",
            }),
            max_rejections_kept: DEFAULT_MAX_REJECTIONS_KEPT,
            batch_rows: DEFAULT_BATCH_ROWS,
        }
    }
}

/// The default of [`IngestOptions::retry_window`] (`--ingest-retry-window`).
pub const DEFAULT_RETRY_WINDOW: std::time::Duration = std::time::Duration::from_secs(600);

impl IngestOptions {
    pub fn new(source: Source, context: ParseContext) -> Self {
        Self {
            source,
            context,
            strict: false,
            idempotency_key: None,
            progress: None,
            at_declared: true,
            sender: None,
            retry_window: DEFAULT_RETRY_WINDOW,
            limits: InputLimits::default(),
            only_team: None,
            group: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The batch is committed and visible.
    Landed { rows_replaced: u64 },
    /// This input (or idempotency key) was ingested before by `batch_id`, and what it landed
    /// is active: nothing changed.
    AlreadyIngested { batch_id: String },
    /// This input was ingested before by `batch_id`, and a later delivery of the same billing
    /// account and period had replaced it: it is the latest delivery again, its
    /// `rows_restored` rows active and the `rows_replaced` rows of that later delivery retired.
    Reactivated {
        batch_id: String,
        rows_restored: u64,
        rows_replaced: u64,
    },
}

/// What one ingest did, for the CLI summary and the HTTP response.
#[derive(Debug, Clone, PartialEq)]
pub struct IngestReport {
    pub batch_id: String,
    pub source: Source,
    pub origin: String,
    pub outcome: Outcome,
    pub records_read: u64,
    /// Rows landed per table.
    pub rows: Vec<(Table, u64)>,
    /// Rows whose identity already landed, or came earlier in this input, skipped: gateway
    /// requests by request id, scheduler events by event id.
    pub duplicates_skipped: u64,
    /// Series the source leaves out by design (remote-write: those that are not DCGM's).
    pub ignored_series: u64,
    /// Columns its format makes mandatory that the input lacks (FOCUS); its rows landed with
    /// nulls there.
    pub missing_columns: Vec<&'static str>,
    /// The files that hold its rows: its own, or (group commit) its group's, which also hold
    /// the other inputs' rows.
    pub files_written: usize,
    /// Inputs committed in the same catalog transaction as this one, itself included (group
    /// commit); 1 for an input committed alone, 0 when nothing was committed (a repeat).
    pub group_inputs: usize,
    /// The first rejected records (at most `InputLimits::max_rejections_kept`), as kept in the
    /// quarantine.
    pub rejections: Vec<Rejection>,
    /// Records rejected in all, those not kept included.
    pub records_rejected: u64,
}

impl IngestReport {
    pub fn rows_landed(&self) -> u64 {
        self.rows.iter().map(|(_, n)| n).sum()
    }
}

/// Ingests one input into the lake. See the module documentation for the steps.
pub async fn ingest(
    lake: &Lake,
    input: Input,
    options: IngestOptions,
) -> Result<IngestReport, IngestError> {
    let started_at = Utc::now();
    // Time-ordered and unique: a name that sorts the way batches arrived.
    let batch_id = format!(
        "{}-{}",
        started_at.format("%Y%m%dT%H%M%S"),
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let origin = input.origin();
    let inline = options.source.parses_inline()
        && matches!(&input, Input::Bytes { bytes, .. }
            if bytes.len() <= PARSED_INLINE && !bytes.starts_with(&GZIP_MAGIC));
    // Read buffers fit the input: a small request body does not take (and free) megabytes.
    let buffer = input.size().map_or(MAX_READ_BUFFER, |size| {
        usize::try_from(size)
            .unwrap_or(MAX_READ_BUFFER)
            .clamp(8 << 10, MAX_READ_BUFFER)
    });
    let algorithm = lake.catalog().input_hash();
    // The bytes as they came matter only to identities from before content identities, which
    // only a SHA-256 catalog can hold.
    let reader = HashingReader::new(
        input.open()?,
        options.progress.clone(),
        algorithm == InputHash::Sha256,
    );
    let raw_hasher = reader.hasher.clone();

    let source = options.source;
    let mut context = options.context.clone();
    let strict = options.strict;
    let limits = options.limits;
    context.limits = limits;
    let parse = move |deliver: Deliver| -> Result<ParserOutput, IngestError> {
        let breach = Arc::new(std::sync::Mutex::new(None));
        let bounded = Bounded::new(
            decode(reader, &context.origin, buffer)?,
            limits,
            source == Source::RemoteWrite,
            Arc::clone(&breach),
        );
        let mut input = HashedInput::new(bounded, buffer, InputHasher::new(algorithm));
        let mut sink = ParserSink {
            deliver,
            kept: Kept::default(),
            max_kept: limits.max_rejections_kept,
            strict,
            origin: context.origin.clone(),
        };
        let parsed = source
            .parse(&mut input, &context, &mut sink)
            .and_then(|parsed| {
                // What a parser left unread (after `# EOF`, …) is part of the content too.
                std::io::copy(&mut input, &mut std::io::sink()).map_err(|source| {
                    IngestError::Read {
                        origin: context.origin.clone(),
                        source,
                    }
                })?;
                Ok(parsed)
            });
        // A limit passed is the error, whatever the parser made of the read failing.
        if let Some(breach) = breach.lock().expect("breach").take() {
            return Err(breach.into_error(&context.origin));
        }
        let parsed = parsed?;
        let content = input.finish().map_err(|source| IngestError::Read {
            origin: context.origin.clone(),
            source,
        })?;
        // A sender goes with the sink when this returns: the writer sees the batches end.
        let held = match sink.deliver {
            Deliver::Held(batches) => batches,
            Deliver::Channel(_) => Vec::new(),
        };
        Ok((parsed, sink.kept, content, held))
    };
    let (mut batches, parser) = if inline {
        let mut parsed = parse(Deliver::Held(Vec::new()));
        let held = match &mut parsed {
            Ok((.., held)) => std::mem::take(held),
            Err(_) => Vec::new(),
        };
        (Batches::Held(held.into_iter()), Parser::Done(parsed))
    } else {
        let (sender, receiver) = mpsc::channel(4);
        let parser = tokio::task::spawn_blocking(move || parse(Deliver::Channel(sender)));
        (Batches::Channel(receiver), Parser::Thread(parser))
    };

    let mut writer = TableWriter::new(Arc::clone(lake.store()), batch_id.clone());
    let mut files: Vec<WrittenFile> = Vec::new();
    let mut known: HashMap<Table, KnownIds> = HashMap::new();
    let mut duplicates_skipped = 0;
    let mut write_error = None;
    // The rows of an input committed with others, until it proves too large for a group.
    let mut held: Option<Held> = options
        .group
        .as_ref()
        .map(|group| group.hold(limits.batch_rows));
    while let Some((table, batch)) = batches.next().await {
        let result = async {
            if let Some(team) = &options.only_team {
                only_team(table, &batch, team, &origin)?;
            }
            let batch = match identity_column(table) {
                Some(column) => {
                    let ids = known
                        .entry(table)
                        .or_insert_with(|| KnownIds::new(table, column));
                    let (fresh, skipped) = ids.drop_known(lake, batch).await?;
                    duplicates_skipped += skipped;
                    fresh
                }
                None => batch,
            };
            let batch = match &mut held {
                Some(holding) => match holding.try_add(table, batch) {
                    Ok(()) => return Ok(()),
                    Err(batch) => batch,
                },
                None => batch,
            };
            // Not held (too large, of a table that cannot share files, or over the rows all
            // inputs may hold): from here on its own files, written as they stream, as a file
            // lands; what it held first.
            for (table, batch) in held.take().map(Held::into_batches).into_iter().flatten() {
                files.extend(writer.write(table, &batch).await?);
            }
            files.extend(writer.write(table, &batch).await?);
            Ok::<_, IngestError>(())
        }
        .await;
        if let Err(error) = result {
            write_error = Some(error);
            break;
        }
    }
    drop(batches);
    let parsed = match parser {
        Parser::Thread(parser) => parser
            .await
            .map_err(|e| IngestError::Pipeline(e.to_string()))?,
        Parser::Done(parsed) => parsed,
    };
    let (
        Parsed {
            records: records_read,
            ignored_series,
            duplicates: repeated_in_input,
            read_at,
            missing_columns,
        },
        Kept {
            rejections,
            rejected: records_rejected,
        },
        content,
        _,
    ) = match (write_error, parsed) {
        (Some(error), _) | (None, Err(error)) => {
            gpuledger_lake::retirement::discard(lake, &files).await;
            return Err(error);
        }
        (None, Ok(parsed)) => parsed,
    };

    let identity = Identity::of(
        &options,
        read_at,
        algorithm,
        content,
        raw_hasher
            .lock()
            .expect("hasher")
            .take()
            .map(|raw| raw.finalize().into()),
        started_at,
    );
    let content_hash = identity.content_hash;
    let commit_options = CommitOptions {
        records_rejected: Some(records_rejected),
        ..identity.commit_options
    };
    let new_batch = NewBatch {
        batch_id: batch_id.clone(),
        source: source.name().to_string(),
        origin: origin.clone(),
        content_hash,
        idempotency_key: options.idempotency_key.clone(),
        records_read,
        started_at: started_at.timestamp_micros(),
    };
    let (outcome, rows, files_written, group_inputs) = match (&options.group, held) {
        (Some(group), Some(held)) => {
            let committed = group
                .commit(Member {
                    batch: new_batch,
                    options: commit_options,
                    held,
                    rejections: rejections.clone(),
                    records_rejected,
                })
                .await?;
            let rows: HashMap<Table, u64> = committed.rows.into_iter().collect();
            (
                committed.outcome,
                rows,
                committed.files_written,
                committed.group_inputs,
            )
        }
        _ => {
            let outcome = lake
                .catalog()
                .commit_batch_recognising(&new_batch, &files, &rejections, &commit_options)
                .await;
            let (outcome, rows, files_written) =
                commit_own_files(lake, outcome, &mut files).await?;
            let alone = usize::from(!matches!(outcome, CommitOutcome::Duplicate(_)));
            (outcome, rows, files_written, alone)
        }
    };
    let outcome = match outcome {
        CommitOutcome::Committed { rows_replaced, .. } => {
            duplicates_skipped += repeated_in_input;
            Outcome::Landed { rows_replaced }
        }
        CommitOutcome::Duplicate(existing) => Outcome::AlreadyIngested {
            batch_id: existing.batch_id,
        },
        CommitOutcome::Reactivated {
            batch,
            rows_restored,
            rows_replaced,
            ..
        } => Outcome::Reactivated {
            batch_id: batch.batch_id,
            rows_restored,
            rows_replaced,
        },
    };
    if !matches!(outcome, Outcome::Landed { .. }) {
        duplicates_skipped = 0;
    }
    let mut rows: Vec<_> = rows.into_iter().collect();
    rows.sort();
    let (rejections, records_rejected) = if matches!(outcome, Outcome::Landed { .. }) {
        (rejections, records_rejected)
    } else {
        (vec![], 0)
    };
    Ok(IngestReport {
        batch_id,
        source,
        origin,
        outcome,
        records_read,
        rows,
        duplicates_skipped,
        ignored_series,
        missing_columns,
        files_written,
        group_inputs,
        rejections,
        records_rejected,
    })
}

/// After the commit of an input's own files: the rows it landed per table and its files in
/// place, or, when it landed nothing new, its uploads removed (a re-delivery keeps the copies
/// that now hold its restored rows).
async fn commit_own_files(
    lake: &Lake,
    outcome: Result<CommitOutcome, gpuledger_lake::LakeError>,
    files: &mut Vec<WrittenFile>,
) -> Result<(CommitOutcome, HashMap<Table, u64>, usize), IngestError> {
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(error) => {
            gpuledger_lake::retirement::keep_after_failed_commit(files);
            return Err(error.into());
        }
    };
    let mut rows: HashMap<Table, u64> = HashMap::new();
    match &outcome {
        CommitOutcome::Committed { .. } => {
            for file in files.iter() {
                *rows.entry(file.path.table).or_default() += file.rows;
            }
        }
        CommitOutcome::Duplicate(_) => {}
        CommitOutcome::Reactivated { adopted, .. } => {
            // The restored rows are in this input's own copies, listed under the earlier batch.
            files.retain(|f| !adopted.contains(&f.path.to_path().to_string()));
        }
    }
    let restated = matches!(outcome, CommitOutcome::Committed { rows_replaced, .. } if rows_replaced > 0)
        || matches!(outcome, CommitOutcome::Reactivated { .. });
    if !matches!(outcome, CommitOutcome::Committed { .. }) {
        // The earlier batch's files hold these rows: this input's copies are not needed.
        gpuledger_lake::retirement::discard(lake, files).await;
        files.clear();
    }
    if restated {
        // Restated files leave `tables/` before this input's files (or the copies a
        // re-delivery adopted) enter it; their grace period is the vacuum's to judge.
        gpuledger_lake::retirement::settle_after_commit(lake).await;
    } else {
        gpuledger_lake::retirement::place(lake, files).await;
    }
    Ok((outcome, rows, files.len()))
}

/// How a delivery is known again: the hash it is stored under and the other identities it
/// matches (see [`CommitOptions`]).
struct Identity {
    content_hash: String,
    commit_options: CommitOptions,
}

impl Identity {
    /// A delivery is its content as sent: the source, the options that change what it lands as
    /// and its bytes after gunzip (so a re-compressed retry is the same), never the arrival
    /// time. An input read relative to its arrival time (an untimestamped scrape without `at`) is
    /// a new reading each time it arrives, except as a retry: the same content from the same
    /// sender within the retry window. Hashed by the catalog's `algorithm`, as the content is.
    fn of(
        options: &IngestOptions,
        read_at: bool,
        algorithm: InputHash,
        content: [u8; 32],
        raw: Option<[u8; 32]>,
        started_at: DateTime<Utc>,
    ) -> Self {
        let at = if read_at && options.at_declared {
            Some(options.context.at)
        } else {
            None
        };
        let mut fingerprint = options_fingerprint(options, at);
        let arrival_stamped = read_at && !options.at_declared;
        if arrival_stamped {
            fingerprint.push_str(&format!(";at=arrival;sender={:?}", options.sender));
        }
        let mut key = InputHasher::new(algorithm);
        key.update(fingerprint.as_bytes());
        key.update(&content);
        let hash = hex::encode(key.finalize());
        if arrival_stamped {
            // A window longer than the calendar reaches back to its start.
            let since = chrono::TimeDelta::from_std(options.retry_window)
                .ok()
                .and_then(|window| started_at.checked_sub_signed(window))
                .unwrap_or(DateTime::<Utc>::MIN_UTC);
            return Self {
                content_hash: gpuledger_lake::catalog::retry_hash(
                    &hash,
                    started_at.timestamp_micros(),
                ),
                commit_options: CommitOptions {
                    retry_since: Some(since.timestamp_micros()),
                    ..CommitOptions::default()
                },
            };
        }
        if algorithm != InputHash::Sha256 {
            // A catalog that identifies inputs by BLAKE3 held none from before.
            return Self {
                content_hash: hash,
                commit_options: CommitOptions::default(),
            };
        }
        // Before content identities, the hash covered the bytes as they came and the parse time
        // of every dcgm and events input.
        let legacy_at = match options.source {
            Source::Dcgm | Source::Events => Some(options.context.at),
            Source::Focus
            | Source::AwsCur
            | Source::AzureEa
            | Source::Tokens
            | Source::RemoteWrite => None,
        };
        let mut legacy = Sha256::new();
        legacy.update(options_fingerprint(options, legacy_at));
        // Without gzip the bytes as they came are the content.
        legacy.update(raw.unwrap_or(content));
        let legacy = hex::encode(legacy.finalize());
        Self {
            commit_options: CommitOptions {
                legacy_hashes: if legacy == hash { vec![] } else { vec![legacy] },
                ..CommitOptions::default()
            },
            content_hash: hash,
        }
    }
}

/// The options that change what an input lands as, with the declared time an input was read
/// relative to (if it was): part of the content hash.
fn options_fingerprint(options: &IngestOptions, at: Option<DateTime<Utc>>) -> String {
    let ctx = &options.context;
    let at = at.map_or(0, |at| at.timestamp_micros());
    let mut fingerprint = format!(
        "source={};cluster={:?};at={at};tz={};date_format={:?}",
        options.source, ctx.cluster, ctx.tz, ctx.date_format
    );
    // Only when set, so that inputs landed before labels existed are still recognised.
    if !ctx.labels.is_empty() {
        fingerprint.push_str(&format!(";labels={:?}", ctx.labels));
    }
    fingerprint
}

/// Decompresses gzip input transparently (by its magic bytes, not its file name).
fn decode(
    reader: HashingReader,
    origin: &str,
    buffer: usize,
) -> Result<Box<dyn BufRead + Send>, IngestError> {
    let mut buffered = BufReader::with_capacity(buffer, reader);
    let head = buffered.fill_buf().map_err(|source| IngestError::Read {
        origin: origin.into(),
        source,
    })?;
    if head.starts_with(&GZIP_MAGIC) {
        Ok(Box::new(BufReader::with_capacity(
            MAX_READ_BUFFER,
            flate2::bufread::MultiGzDecoder::new(buffered),
        )))
    } else {
        // The bytes as they came are the content, which is hashed anyway: once is enough.
        buffered.get_ref().hasher.lock().expect("hasher").take();
        Ok(Box::new(buffered))
    }
}

/// The read buffers of an input of unknown or large size.
const MAX_READ_BUFFER: usize = 1 << 20;

/// Counts the raw bytes as the parser pulls them and, in a SHA-256 catalog, hashes them (until
/// [`decode`] finds they are the content, not gzip: then the hasher is `None`).
struct HashingReader {
    inner: Box<dyn Read + Send>,
    hasher: Arc<std::sync::Mutex<Option<Sha256>>>,
    progress: Option<Arc<AtomicU64>>,
}

impl HashingReader {
    fn new(inner: Box<dyn Read + Send>, progress: Option<Arc<AtomicU64>>, hash: bool) -> Self {
        Self {
            inner,
            hasher: Arc::new(std::sync::Mutex::new(hash.then(Sha256::new))),
            progress,
        }
    }
}

impl Read for HashingReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(hasher) = self.hasher.lock().expect("hasher").as_mut() {
            hasher.update(&buf[..n]);
        }
        if let Some(progress) = &self.progress {
            progress.fetch_add(n as u64, Ordering::Relaxed);
        }
        Ok(n)
    }
}

/// The rejections of one input: the first ones whole, the rest counted.
#[derive(Default)]
struct Kept {
    rejections: Vec<Rejection>,
    rejected: u64,
}

/// Where a parser's batches go: to the writer as they come (a parser on a blocking thread), or
/// held until the parser is done (a small input parsed on the calling task).
enum Deliver {
    Channel(mpsc::Sender<(Table, RecordBatch)>),
    Held(Vec<(Table, RecordBatch)>),
}

/// The batches the writer takes, as the parser delivers them.
enum Batches {
    Channel(mpsc::Receiver<(Table, RecordBatch)>),
    Held(std::vec::IntoIter<(Table, RecordBatch)>),
}

impl Batches {
    async fn next(&mut self) -> Option<(Table, RecordBatch)> {
        match self {
            Batches::Channel(receiver) => receiver.recv().await,
            Batches::Held(batches) => batches.next(),
        }
    }
}

/// What a parser read, rejected and hashed, and the batches it held (see [`Deliver`]).
type ParserOutput = (Parsed, Kept, [u8; 32], Vec<(Table, RecordBatch)>);

/// The parser: on a blocking thread, or done already.
enum Parser {
    Thread(tokio::task::JoinHandle<Result<ParserOutput, IngestError>>),
    Done(Result<ParserOutput, IngestError>),
}

/// Delivers batches to the writer; keeps the first rejections and counts the rest (or stops at
/// the first one when strict).
struct ParserSink {
    deliver: Deliver,
    kept: Kept,
    max_kept: usize,
    strict: bool,
    origin: String,
}

impl Sink for ParserSink {
    fn accept(&mut self, table: Table, batch: RecordBatch) -> Result<(), IngestError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        match &mut self.deliver {
            Deliver::Channel(sender) => sender
                .blocking_send((table, batch))
                .map_err(|_| IngestError::Pipeline("the Parquet writer stopped".into())),
            Deliver::Held(batches) => {
                batches.push((table, batch));
                Ok(())
            }
        }
    }

    fn reject(&mut self, rejection: Rejection) -> Result<(), IngestError> {
        if self.strict {
            return Err(strict_stop(&self.origin, rejection));
        }
        self.kept.rejected += 1;
        if self.kept.rejections.len() < self.max_kept {
            self.kept.rejections.push(rejection);
        }
        Ok(())
    }
}

/// Which limit an input passed, at which line.
#[derive(Debug, Clone, Copy)]
enum Breach {
    Decompressed(Limit),
    Line(Limit, u64),
}

impl Breach {
    fn into_error(self, origin: &str) -> IngestError {
        match self {
            Breach::Decompressed(limit) => IngestError::TooLarge {
                origin: origin.to_string(),
                max_bytes: limit.bytes,
                limit: limit.name,
            },
            Breach::Line(limit, line) => IngestError::LineTooLong {
                origin: origin.to_string(),
                line,
                max_bytes: limit.bytes,
                limit: limit.name,
            },
        }
    }
}

/// Enforces [`InputLimits`] on the decompressed bytes as they pass: counts them and the length
/// of the current line, and fails every read from the first byte past a limit on (recording
/// which in `breach`, so the pipeline reports that rather than what the parser made of it).
struct Bounded {
    inner: Box<dyn BufRead + Send>,
    max_decompressed: Option<Limit>,
    /// `None` for binary input.
    max_line: Option<Limit>,
    decompressed: u64,
    /// Newlines seen so far.
    lines: u64,
    /// Bytes since the last newline.
    line_length: u64,
    first_read: bool,
    breach: Arc<std::sync::Mutex<Option<Breach>>>,
}

impl Bounded {
    fn new(
        inner: Box<dyn BufRead + Send>,
        limits: InputLimits,
        binary: bool,
        breach: Arc<std::sync::Mutex<Option<Breach>>>,
    ) -> Self {
        Self {
            inner,
            max_decompressed: limits.max_decompressed,
            max_line: if binary { None } else { limits.max_line },
            decompressed: 0,
            lines: 0,
            line_length: 0,
            first_read: true,
            breach,
        }
    }

    fn fail(&self, breach: Breach) -> std::io::Error {
        let mut slot = self.breach.lock().expect("breach");
        let breach = *slot.get_or_insert(breach);
        std::io::Error::other(breach.into_error("input").to_string())
    }
}

impl Read for Bounded {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if let Some(breach) = *self.breach.lock().expect("breach") {
            return Err(self.fail(breach));
        }
        let n = self.inner.read(buf)?;
        let chunk = &buf[..n];
        if std::mem::take(&mut self.first_read) && chunk.starts_with(b"PAR1") {
            // A Parquet file (FOCUS): binary, no lines.
            self.max_line = None;
        }
        self.decompressed += n as u64;
        if let Some(limit) = self.max_decompressed
            && self.decompressed > limit.bytes
        {
            return Err(self.fail(Breach::Decompressed(limit)));
        }
        if let Some(limit) = self.max_line {
            let mut start = 0;
            for newline in memchr::memchr_iter(b'\n', chunk) {
                if self.line_length + (newline - start) as u64 > limit.bytes {
                    return Err(self.fail(Breach::Line(limit, self.lines + 1)));
                }
                self.lines += 1;
                self.line_length = 0;
                start = newline + 1;
            }
            self.line_length += (n - start) as u64;
            if self.line_length > limit.bytes {
                return Err(self.fail(Breach::Line(limit, self.lines + 1)));
            }
        }
        Ok(n)
    }
}

/// The column whose value identifies a row across inputs: a row whose identity already landed
/// is the same record delivered again. NULL identifies nothing (files written before
/// `scheduler_events.event_id` existed, producers that do not fill it).
fn identity_column(table: Table) -> Option<&'static str> {
    match table {
        Table::TokenUsage => Some("request_id"),
        Table::SchedulerEvents => Some("event_id"),
        _ => None,
    }
}

/// Identities of one table already landed, loaded per day partition as batches touch it, and
/// those of this input so far: a gateway request or a scheduler event delivered again, in a
/// later file or in the same one, lands once.
struct KnownIds {
    table: Table,
    column: &'static str,
    loaded_days: HashSet<String>,
    ids: HashSet<String>,
}

impl KnownIds {
    fn new(table: Table, column: &'static str) -> Self {
        Self {
            table,
            column,
            loaded_days: HashSet::new(),
            ids: HashSet::new(),
        }
    }

    async fn drop_known(
        &mut self,
        lake: &Lake,
        batch: RecordBatch,
    ) -> Result<(RecordBatch, u64), IngestError> {
        let times = batch
            .column_by_name(self.table.time_column())
            .expect("the table's time column")
            .as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
        let days: HashSet<String> = times
            .iter()
            .flatten()
            .filter_map(DateTime::from_timestamp_micros)
            .map(|t| t.format("%Y-%m-%d").to_string())
            .collect();
        let (from, to) = (
            arrow::compute::min(times).unwrap_or(0),
            arrow::compute::max(times).unwrap_or(0),
        );
        if days.iter().any(|d| !self.loaded_days.contains(d)) {
            for file in lake
                .catalog()
                .active_files(self.table, Some(from), Some(to + 1))
                .await?
            {
                if self.loaded_days.contains(&file.partition_date) {
                    continue;
                }
                self.load_ids(lake, &file.path).await?;
            }
            self.loaded_days.extend(days);
        }
        let ids = batch
            .column_by_name(self.column)
            .expect("the table's identity column")
            .as_string::<i32>();
        let keep: BooleanArray = ids
            .iter()
            .map(|id| Some(id.is_none_or(|id| self.ids.insert(id.to_string()))))
            .collect();
        let skipped = keep.false_count() as u64;
        if skipped == 0 {
            return Ok((batch, 0));
        }
        Ok((arrow::compute::filter_record_batch(&batch, &keep)?, skipped))
    }

    async fn load_ids(&mut self, lake: &Lake, path: &str) -> Result<(), IngestError> {
        let path = object_store::path::Path::from(path);
        let object = lake
            .table_reader()
            .get(&path)
            .await
            .map_err(gpuledger_lake::LakeError::from)?;
        let bytes = object
            .bytes()
            .await
            .map_err(gpuledger_lake::LakeError::from)?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .map_err(gpuledger_lake::LakeError::from)?;
        // A file written before the table had its identity column: its rows identify nothing.
        let Ok(column) = builder.schema().index_of(self.column) else {
            return Ok(());
        };
        let mask = ProjectionMask::roots(builder.parquet_schema(), [column]);
        for batch in builder
            .with_projection(mask)
            .build()
            .map_err(gpuledger_lake::LakeError::from)?
        {
            let batch = batch?;
            self.ids.extend(
                batch
                    .column(0)
                    .as_string::<i32>()
                    .iter()
                    .flatten()
                    .map(str::to_string),
            );
        }
        Ok(())
    }
}

mod group_commit;
mod hashed_input;
pub use group_commit::{GroupCommit, GroupLimits};

#[cfg(test)]
mod tests;
