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
use std::sync::atomic::{AtomicUsize, Ordering};

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

/// Rows all inputs may hold for groups at once, in groups' worth (`max_rows`): past it, an input
/// writes its own files as it streams, so memory stays bounded however many requests arrive.
const HELD_GROUPS: usize = 4;

/// A handle on the committer: cheap to clone, one per service.
#[derive(Debug, Clone)]
pub struct GroupCommit {
    sender: mpsc::Sender<Waiting>,
    max_rows: usize,
    held: Arc<HeldRows>,
}

/// Rows held by every input for groups, now, and the most they may hold together.
#[derive(Debug)]
struct HeldRows {
    now: AtomicUsize,
    max: usize,
}

/// The rows one input holds for a group, counted in the service's total until dropped.
#[derive(Debug)]
pub(crate) struct Held {
    batches: Vec<(Table, RecordBatch)>,
    rows: usize,
    /// This input's share: a group's rows, or one parser batch if that is fewer.
    max_rows: usize,
    total: Arc<HeldRows>,
}

impl Held {
    /// Holds `batch` if it can share a group's files and fits both this input's share and
    /// the service's; gives it back otherwise.
    pub(crate) fn try_add(&mut self, table: Table, batch: RecordBatch) -> Result<(), RecordBatch> {
        let rows = batch.num_rows();
        if !GroupCommit::takes(table) || self.rows + rows > self.max_rows {
            return Err(batch);
        }
        let max = self.total.max;
        let reserved = self
            .total
            .now
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |total| {
                (total + rows <= max).then_some(total + rows)
            });
        if reserved.is_err() {
            return Err(batch);
        }
        self.rows += rows;
        self.batches.push((table, batch));
        Ok(())
    }

    /// The batches, no longer counted as held.
    pub(crate) fn into_batches(mut self) -> Vec<(Table, RecordBatch)> {
        std::mem::take(&mut self.batches)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.total.now.fetch_sub(self.rows, Ordering::AcqRel);
    }
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
    /// Its rows, counted as held until its group is committed.
    pub held: Held,
    pub rejections: Vec<Rejection>,
    pub records_rejected: u64,
}

impl Member {
    fn rows(&self) -> usize {
        self.held.rows
    }

    fn rows_by_table(&self) -> Vec<(Table, u64)> {
        let mut rows: BTreeMap<Table, u64> = BTreeMap::new();
        for (table, batch) in &self.held.batches {
            *rows.entry(*table).or_default() += batch.num_rows() as u64;
        }
        rows.into_iter().filter(|(_, n)| *n > 0).collect()
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
            held: Arc::new(HeldRows {
                now: AtomicUsize::new(0),
                max: limits.max_rows.saturating_mul(HELD_GROUPS),
            }),
        }
    }

    /// What an input holds for a group: nothing yet. It holds at most one parser batch
    /// (`batch_rows`): an input larger than that writes its own files as it streams, so grouping
    /// never keeps more of one input in memory than streaming it would.
    pub(crate) fn hold(&self, batch_rows: usize) -> Held {
        Held {
            batches: vec![],
            rows: 0,
            max_rows: self.max_rows.min(batch_rows),
            total: Arc::clone(&self.held),
        }
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
            // Two inputs sharing an identity never go in one group: the later is recognised
            // as the repeat it is by the next.
            let ids = next.member.batch.identities(&next.member.options);
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
    for _ in 0..ATTEMPTS {
        group = answer_repeats(&lake, group).await;
        if group.is_empty() {
            return;
        }
        match write_and_commit(&lake, &group).await {
            Ok(Some(files)) => {
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
            Ok(None) => tracing::info!(
                inputs = group.len(),
                "another writer committed an input of this group first: writing it again"
            ),
            Err(error) if group.len() > 1 => {
                tracing::warn!(inputs = group.len(), %error, "a group commit failed: committing its inputs one by one");
                return commit_each_alone(lake, group).await;
            }
            Err(error) => {
                tracing::error!(%error, "an ingest commit failed");
                if let Some(waiting) = group.into_iter().next() {
                    let _ = waiting.reply.send(Err(error));
                }
                return;
            }
        }
    }
    if group.len() > 1 {
        return commit_each_alone(lake, group).await;
    }
    for waiting in group {
        let _ = waiting.reply.send(Err(IngestError::Pipeline(format!(
            "other writers committed the same input {ATTEMPTS} times while this one was written"
        ))));
    }
}

/// One input's failure is not the others': each is committed alone, so that only one that
/// fails on its own is answered with an error.
async fn commit_each_alone(lake: Lake, group: Vec<Waiting>) {
    for waiting in group {
        Box::pin(commit_group(lake.clone(), vec![waiting])).await;
    }
}

/// Answers the inputs committed before (by another writer, or an earlier group) with what they
/// are, without files; returns the new ones. One lookup for the group; should it fail, each
/// input is looked for alone, so that only one whose own lookup fails is answered with an error
/// (as is one that could not be made active again).
async fn answer_repeats(lake: &Lake, group: Vec<Waiting>) -> Vec<Waiting> {
    let identities: Vec<_> = group
        .iter()
        .map(|waiting| (&waiting.member.batch, &waiting.member.options))
        .collect();
    let recognised = lake.catalog().recognise(&identities).await;
    let outcomes = match recognised {
        Ok(outcomes) => outcomes,
        Err(error) if group.len() > 1 => {
            tracing::warn!(inputs = group.len(), %error, "looking for a group's inputs failed: looking for each alone");
            let mut fresh = Vec::with_capacity(group.len());
            for waiting in group {
                fresh.extend(Box::pin(answer_repeats(lake, vec![waiting])).await);
            }
            return fresh;
        }
        Err(error) => {
            if let Some(waiting) = group.into_iter().next() {
                let _ = waiting.reply.send(Err(error.into()));
            }
            return vec![];
        }
    };
    let mut fresh = Vec::with_capacity(group.len());
    for (waiting, outcome) in group.into_iter().zip(outcomes) {
        match outcome {
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
    fresh
}

/// Writes the group's files and commits them with its batches: the files, or `None` when
/// another writer committed one of its inputs first. Nothing of the group stays behind when
/// it is not committed.
async fn write_and_commit(
    lake: &Lake,
    group: &[Waiting],
) -> Result<Option<Vec<WrittenFile>>, IngestError> {
    let lead = &group[0].member.batch.batch_id;
    let files = write(lake, lead, group).await?;
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
            Ok(Some(files))
        }
        Ok(GroupCommitOutcome::Raced) => {
            gpuledger_lake::retirement::discard(lake, &files).await;
            Ok(None)
        }
        Err(error) => {
            gpuledger_lake::retirement::keep_after_failed_commit(&files);
            Err(error.into())
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
        for (table, batch) in &waiting.member.held.batches {
            by_table.entry(*table).or_default().push(batch);
        }
    }
    let mut writer = TableWriter::new(Arc::clone(lake.store()), lead);
    let mut files = Vec::new();
    for (table, batches) in by_table {
        let schema = batches[0].schema();
        let written = if batches
            .iter()
            .any(|b| b.schema().fields() != schema.fields())
        {
            // Arrow's concatenation would panic; the inputs are committed one by one instead.
            Err(IngestError::Pipeline(format!(
                "{table}: the inputs of a group hold rows of different columns"
            )))
        } else {
            match arrow::compute::concat_batches(&schema, batches) {
                Ok(batch) => writer.write(table, &batch).await.map_err(IngestError::from),
                Err(error) => Err(error.into()),
            }
        };
        match written {
            Ok(written) => files.extend(written),
            Err(error) => {
                gpuledger_lake::retirement::discard(lake, &files).await;
                return Err(error);
            }
        }
    }
    Ok(files)
}
