//! Group commit: small telemetry inputs that arrive at the same time (one scrape per request,
//! remote-write bodies of a few thousand samples) share their Parquet files and one catalog
//! transaction, instead of paying a file, a footer, a compression context per column and a
//! transaction each.
//!
//! ```text
//! request ─► parse, hold the rows ─► queue ─┐
//! request ─► parse, hold the rows ─► queue ─┼─► committer: recognise repeats ─► one file per
//! request ─► parse, hold the rows ─► queue ─┘   table and day ─► Catalog::commit_group ─► answers
//! ```
//!
//! Each input stays its own batch: its own identity (a repeat of it lands nothing), rows landed,
//! quarantine and answer, given only once the group's transaction is committed. One committer
//! commits one group at a time; the inputs that arrive meanwhile form the next group, so the
//! busier the service, the larger the groups, and an idle service commits an input alone at once.
//! Two inputs of one group never share an identity: a repeat waits for the next group, where it
//! is recognised. A group that loses a race to another writer (a replica, the CLI) is written
//! again without the input that writer committed.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use gpuledger_lake::catalog::{
    CommitOptions, CommitOutcome, GroupCommitOutcome, GroupMember, NewBatch,
};
use gpuledger_lake::tables::Table;
use gpuledger_lake::writer::{TableWriter, WrittenFile};
use gpuledger_lake::{Lake, Rejection};
use tokio::sync::{mpsc, oneshot};

use crate::error::IngestError;

/// Inputs waiting for the committer; past this, senders wait (their rows are already parsed, so
/// this bounds how many requests' rows are held, with the server's connection limit).
const QUEUE: usize = 1024;

/// Times a group is written again after losing a race to another writer.
const ATTEMPTS: usize = 3;

/// A handle on the committer: cheap to clone, one per service.
#[derive(Debug, Clone)]
pub struct GroupCommit {
    sender: mpsc::Sender<Waiting>,
    max_rows: usize,
}

/// How large a group grows, and how long it waits to grow.
#[derive(Debug, Clone, Copy)]
pub struct GroupLimits {
    /// An input of more rows writes its own files (it is a group on its own); a group holds at
    /// most this many.
    pub max_rows: usize,
    /// How long a group waits for more inputs after its first, unless it is full first. Zero:
    /// a group is what arrived while the one before was committed.
    pub wait: std::time::Duration,
}

/// An input whose rows wait for a group.
pub(crate) struct Member {
    pub batch: NewBatch,
    pub options: CommitOptions,
    pub tables: Vec<(Table, RecordBatch)>,
    pub rejections: Vec<Rejection>,
    pub records_rejected: u64,
}

impl Member {
    fn rows(&self) -> usize {
        self.tables.iter().map(|(_, batch)| batch.num_rows()).sum()
    }

    fn rows_by_table(&self) -> Vec<(Table, u64)> {
        let mut rows: BTreeMap<Table, u64> = BTreeMap::new();
        for (table, batch) in &self.tables {
            *rows.entry(*table).or_default() += batch.num_rows() as u64;
        }
        rows.into_iter().filter(|(_, n)| *n > 0).collect()
    }

    /// The identities by which a repeat of this input is recognised: two inputs sharing one
    /// never go in the same group.
    fn identities(&self) -> Vec<String> {
        let content = match self.options.retry_since {
            // A retry hash ends in the time it started: the content is what repeats.
            Some(_) => &self.batch.content_hash[..self.batch.content_hash.len().saturating_sub(20)],
            None => self.batch.content_hash.as_str(),
        };
        let mut identities = vec![format!("{}\u{1f}{content}", self.batch.source)];
        if let Some(key) = &self.batch.idempotency_key {
            identities.push(format!("key\u{1f}{key}"));
        }
        identities
    }
}

/// What committing a member did.
pub(crate) struct Committed {
    pub outcome: CommitOutcome,
    /// Its rows per table, in the group's files (none unless committed).
    pub rows: Vec<(Table, u64)>,
    /// The files of its group.
    pub files_written: usize,
    /// Inputs committed in its group's transaction, itself included.
    pub group_inputs: usize,
}

struct Waiting {
    member: Member,
    reply: oneshot::Sender<Result<Committed, IngestError>>,
}

impl GroupCommit {
    /// Starts the committer on the current tokio runtime.
    pub fn start(lake: Lake, limits: GroupLimits) -> Self {
        let (sender, receiver) = mpsc::channel(QUEUE);
        tokio::spawn(run(lake, receiver, limits));
        Self {
            sender,
            max_rows: limits.max_rows,
        }
    }

    /// The most rows an input may hold for a group.
    pub(crate) fn max_rows(&self) -> usize {
        self.max_rows
    }

    /// Tables whose rows can share files across inputs: no restatement scope (a file's scope is
    /// one delivery's), no identity column (those rows are checked against the lake one input
    /// at a time) and not written by the ledger.
    pub(crate) fn takes(table: Table) -> bool {
        table.scope_columns().is_empty()
            && !table.is_derived()
            && super::identity_column(table).is_none()
    }

    /// Commits `member` with whatever else is waiting; returns once its group is committed (or
    /// it is recognised as a repeat, or the group failed).
    pub(crate) async fn commit(&self, member: Member) -> Result<Committed, IngestError> {
        let (reply, answer) = oneshot::channel();
        let stopped = || IngestError::Pipeline("the group committer stopped".into());
        self.sender
            .send(Waiting { member, reply })
            .await
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

async fn run(lake: Lake, mut receiver: mpsc::Receiver<Waiting>, limits: GroupLimits) {
    let mut queue: VecDeque<Waiting> = VecDeque::new();
    loop {
        if queue.is_empty() {
            match receiver.recv().await {
                Some(waiting) => queue.push_back(waiting),
                None => return,
            }
        }
        let deadline = tokio::time::Instant::now() + limits.wait;
        let mut group = Vec::new();
        let mut next_round = VecDeque::new();
        let mut identities = HashSet::new();
        let mut rows = 0;
        while rows < limits.max_rows {
            let next = match queue.pop_front().or_else(|| receiver.try_recv().ok()) {
                Some(waiting) => waiting,
                None if limits.wait.is_zero() => break,
                None => match tokio::time::timeout_at(deadline, receiver.recv()).await {
                    Ok(Some(waiting)) => waiting,
                    Ok(None) | Err(_) => break,
                },
            };
            if !group.is_empty() && rows + next.member.rows() > limits.max_rows {
                // Full: it starts the next group.
                queue.push_front(next);
                break;
            }
            let ids = next.member.identities();
            if ids.iter().any(|id| identities.contains(id)) {
                next_round.push_back(next);
                continue;
            }
            identities.extend(ids);
            rows += next.member.rows();
            group.push(next);
        }
        next_round.extend(queue.drain(..));
        queue = next_round;
        // Its own task: should a group's commit panic, its inputs are answered with an error
        // (their reply channels close) and the committer goes on with the next group.
        let committed = tokio::spawn(commit_group(lake.clone(), group)).await;
        if let Err(error) = committed {
            tracing::error!(%error, "a group commit stopped");
        }
    }
}

/// Commits one group and answers each of its inputs.
async fn commit_group(lake: Lake, mut group: Vec<Waiting>) {
    let lake = &lake;
    for attempt in 1..=ATTEMPTS {
        let mut fresh = Vec::with_capacity(group.len());
        for waiting in group {
            let member = &waiting.member;
            match lake
                .catalog()
                .recognise(&member.batch, &member.options)
                .await
            {
                Ok(None) => fresh.push(waiting),
                Ok(Some(outcome)) => {
                    let _ = waiting.reply.send(Ok(Committed {
                        outcome,
                        rows: vec![],
                        files_written: 0,
                        group_inputs: 0,
                    }));
                }
                Err(error) => {
                    let _ = waiting.reply.send(Err(error.into()));
                }
            }
        }
        group = fresh;
        let Some(lead) = group.first() else {
            return;
        };
        let lead = lead.member.batch.batch_id.clone();
        let files = match write(lake, &lead, &group).await {
            Ok(files) => files,
            Err(error) => return fail(lake, group, &[], &error).await,
        };
        let members: Vec<GroupMember> = group
            .iter()
            .map(|waiting| GroupMember {
                batch: &waiting.member.batch,
                rows_landed: waiting.member.rows() as u64,
                rejections: &waiting.member.rejections,
                records_rejected: waiting.member.records_rejected,
                options: &waiting.member.options,
            })
            .collect();
        match lake.catalog().commit_group(&members, &files).await {
            Ok(GroupCommitOutcome::Committed) => {
                gpuledger_lake::retirement::place(lake, &files).await;
                let group_inputs = group.len();
                for waiting in group {
                    let rows = waiting.member.rows_by_table();
                    let _ = waiting.reply.send(Ok(Committed {
                        outcome: CommitOutcome::Committed {
                            rows_landed: waiting.member.rows() as u64,
                            rows_replaced: 0,
                        },
                        rows,
                        files_written: files.len(),
                        group_inputs,
                    }));
                }
                return;
            }
            Ok(GroupCommitOutcome::Raced) if attempt < ATTEMPTS => {
                tracing::info!(
                    inputs = group.len(),
                    "another writer committed an input of this group first: writing it again"
                );
                gpuledger_lake::retirement::discard(lake, &files).await;
            }
            Ok(GroupCommitOutcome::Raced) => {
                let error = IngestError::GroupCommit(format!(
                    "other writers committed inputs of this group {ATTEMPTS} times over"
                ));
                return fail(lake, group, &files, &error).await;
            }
            Err(error) => return fail(lake, group, &files, &error.into()).await,
        }
    }
}

/// The group's rows, one file per table and day, named after its first batch.
async fn write(
    lake: &Lake,
    lead: &str,
    group: &[Waiting],
) -> Result<Vec<WrittenFile>, IngestError> {
    let mut by_table: BTreeMap<Table, Vec<&RecordBatch>> = BTreeMap::new();
    for waiting in group {
        for (table, batch) in &waiting.member.tables {
            by_table.entry(*table).or_default().push(batch);
        }
    }
    let mut writer = TableWriter::new(Arc::clone(lake.store()), lead);
    let mut files = Vec::new();
    for (table, batches) in by_table {
        let batch = arrow::compute::concat_batches(&batches[0].schema(), batches)?;
        match writer.write(table, &batch).await {
            Ok(written) => files.extend(written),
            Err(error) => {
                gpuledger_lake::retirement::discard(lake, &files).await;
                return Err(error.into());
            }
        }
    }
    Ok(files)
}

/// Answers every input of a failed group with its error; nothing of the group is committed.
async fn fail(lake: &Lake, group: Vec<Waiting>, files: &[WrittenFile], error: &IngestError) {
    tracing::error!(inputs = group.len(), %error, "a group commit failed");
    gpuledger_lake::retirement::discard(lake, files).await;
    for waiting in group {
        let _ = waiting
            .reply
            .send(Err(IngestError::GroupCommit(error.to_string())));
    }
}
