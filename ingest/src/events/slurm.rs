//! Slurm `sacct --parsable2` (`-p` too): with its header line, or header-less in the layout
//! XDMoD asks for (`--format jobid,jobidraw,cluster,…,nodelist,jobname`).
//!
//! One record per job allocation; step rows (`123.batch`, `123.extern`, `123.0`) repeat the
//! allocation and are skipped. A pending array record (`123_[1-3,7%2]`) stands for each of its
//! tasks, as XDMoD reads it; het job components (`123+0`) are allocations of their own.
//!
//! Per job (task): `queued` at Submit with the GPUs asked (ReqTRES); unless the job is pending,
//! `start` at Start and, once it has ended, `stop` at End — one pair per node of NodeList
//! (`gpu[01-04]` expanded), the allocated GPUs (AllocTRES) split evenly over them, since sacct
//! only reports the total. Stop reasons: COMPLETED → `finished`, FAILED → `failed`,
//! PREEMPTED → `preempted`, REQUEUED → `evicted: REQUEUED`, and the other ends keep the state
//! for the user: `failed: TIMEOUT`, `failed: CANCELLED by 1234`, `failed: NODE_FAIL`, ….
//! RUNNING, SUSPENDED and RESIZING jobs have no stop yet. `Unknown`/`None` times are absent.
//!
//! `namespace` and `team` are the Account (Slurm's unit of chargeback), `queue` the Partition,
//! `priority` the QOS, `cluster` the Cluster field else the context's. Times are local time
//! unless sacct ran with `TZ=UTC`: they are read in the context's time zone.
//!
//! When clocks go back, an hour of local time happens twice and a Start or End in it has two
//! readings. The line's own length settles it: of the (Start, End) readings, the pair whose
//! difference is ElapsedRaw (else Elapsed) within a second is taken; without such a pair (no
//! Elapsed column, or a suspended job whose Elapsed leaves out the suspension), the earliest pair
//! that does not end before it starts. A line is rejected as ending before it starts only when
//! every reading does. Submit takes its earliest reading not after the start. A local time in
//! the hour skipped when clocks go forward is rejected: sacct prints times it read from a clock,
//! so such a time means the input was not written in the time zone given (`--tz`).

use chrono::{DateTime, TimeDelta, Utc};

use super::{Attribution, Bad, Event, EventKind, Source, StopClass, Subject};
use crate::record::ParseContext;

/// XDMoD's `--format`, the layout of header-less input.
const XDMOD_FORMAT: &str = "jobid,jobidraw,cluster,partition,qos,account,group,gid,user,uid,\
    submit,eligible,start,end,elapsed,exitcode,state,nnodes,ncpus,reqcpus,reqmem,reqtres,\
    alloctres,timelimit,nodelist,jobname";

/// Where the fields this reader uses sit in a line.
#[derive(Debug, Clone)]
pub(super) struct Sacct {
    width: usize,
    header: Vec<String>,
    job_id: usize,
    state: usize,
    start: usize,
    end: usize,
    submit: Option<usize>,
    /// ElapsedRaw (seconds) when the header has it, else Elapsed (`[D-]HH:MM:SS`).
    elapsed: Option<usize>,
    cluster: Option<usize>,
    partition: Option<usize>,
    qos: Option<usize>,
    account: Option<usize>,
    req_tres: Option<usize>,
    alloc_tres: Option<usize>,
    node_list: Option<usize>,
}

impl Sacct {
    /// The layout from the first line, and whether that line was a header.
    pub(super) fn from_first_line(line: &str) -> Result<(Self, bool), String> {
        let mut fields: Vec<&str> = line.split('|').collect();
        if fields
            .iter()
            .any(|f| f.trim().eq_ignore_ascii_case("jobid"))
        {
            if fields.last() == Some(&"") {
                fields.pop(); // `-p` ends every line with a `|`
            }
            return Ok((Self::from_names(&fields)?, true));
        }
        let xdmod: Vec<&str> = XDMOD_FORMAT.split(',').collect();
        if fields.len() != xdmod.len() {
            return Err(format!(
                "sacct output without a header must use XDMoD's --format ({} fields: {}); this \
                 line has {} fields — keep sacct's header (no --noheader) for other layouts",
                xdmod.len(),
                XDMOD_FORMAT,
                fields.len()
            ));
        }
        Ok((Self::from_names(&xdmod)?, false))
    }

    fn from_names(names: &[&str]) -> Result<Self, String> {
        let header: Vec<String> = names.iter().map(|n| n.trim().to_string()).collect();
        let find = |name: &str| header.iter().position(|h| h.eq_ignore_ascii_case(name));
        let required = |name: &str| {
            find(name).ok_or_else(|| {
                format!("sacct header has no {name} column (needs JobID, State, Start, End)")
            })
        };
        Ok(Self {
            width: header.len(),
            job_id: required("JobID")?,
            state: required("State")?,
            start: required("Start")?,
            end: required("End")?,
            submit: find("Submit"),
            elapsed: find("ElapsedRaw").or_else(|| find("Elapsed")),
            cluster: find("Cluster"),
            partition: find("Partition"),
            qos: find("QOS"),
            account: find("Account"),
            req_tres: find("ReqTRES"),
            alloc_tres: find("AllocTRES"),
            node_list: find("NodeList"),
            header,
        })
    }

    pub(super) fn record(&self, line: &str, ctx: &ParseContext) -> Result<Vec<Event>, Bad> {
        let mut fields: Vec<&str> = line.split('|').collect();
        if fields.len() == self.width + 1 && fields.last() == Some(&"") {
            fields.pop(); // `-p` ends every line with a `|`
        }
        if fields.len() != self.width {
            return Err(Bad::new(
                "line",
                format!(
                    "{} `|`-separated fields where the header has {}",
                    fields.len(),
                    self.width
                ),
            ));
        }
        let value = |column: usize| fields[column].trim();
        let optional =
            |column: Option<usize>| column.map(|c| (c, value(c))).filter(|(_, v)| !v.is_empty());
        let text = |column: Option<usize>| optional(column).map(|(_, v)| v.to_string());

        let job_id = value(self.job_id);
        if job_id.contains('.') {
            return Ok(Vec::new());
        }
        let tasks = array_tasks(job_id)
            .ok_or_else(|| self.bad(self.job_id, format!("'{job_id}' is not a Slurm job id")))?;
        let state = job_state(value(self.state)).map_err(|reason| self.bad(self.state, reason))?;
        let readings = |column: usize| -> Result<Vec<DateTime<Utc>>, Bad> {
            match value(column) {
                "" | "Unknown" | "None" => Ok(Vec::new()),
                text => {
                    crate::time::readings(text, ctx.tz).map_err(|reason| self.bad(column, reason))
                }
            }
        };
        let elapsed = match optional(self.elapsed) {
            None => None,
            Some((c, text)) => elapsed_time(text).map_err(|reason| self.bad(c, reason))?,
        };
        let (start, end) = job_span(&readings(self.start)?, &readings(self.end)?, elapsed)
            .map_err(|reason| self.bad(self.end, reason))?;
        let submit = match self.submit {
            None => None,
            Some(column) => {
                let submits = readings(column)?;
                let not_after_start = submits.iter().find(|s| start.is_none_or(|t| **s <= t));
                not_after_start.or(submits.first()).copied()
            }
        };
        let tres = |column: Option<usize>| -> Result<Option<TresGpus>, Bad> {
            match optional(column) {
                None => Ok(None),
                Some((c, tres)) => tres_gpus(tres).map_err(|reason| self.bad(c, reason)),
            }
        };
        let asked = tres(self.req_tres)?;
        let allocated = tres(self.alloc_tres)?;
        let nodes = match optional(self.node_list) {
            None | Some((_, "None assigned")) => Vec::new(),
            Some((c, list)) => expand_hostlist(list)
                .ok_or_else(|| self.bad(c, format!("'{list}' is not a Slurm hostlist")))?,
        };

        let account = text(self.account);
        let job = Subject {
            cluster: text(self.cluster).or_else(|| ctx.cluster.clone()),
            namespace: account.clone(),
            queue: text(self.partition),
            priority: text(self.qos),
            labels: Attribution {
                team: account,
                ..Attribution::default()
            },
            ..Subject::default()
        };
        // Each task has a queued event, and a start and a stop on each node (as below), each a
        // copy of the job's names with the task's and the node's: counted, in ids and bytes,
        // before any is built.
        let longest = |names: &[String]| names.iter().map(String::len).max().unwrap_or(0);
        let job_names: usize = [&job.cluster, &job.namespace, &job.queue, &job.priority]
            .into_iter()
            .chain([&job.labels.team])
            .map(|name| name.as_ref().map_or(0, String::len))
            .sum();
        let event_bytes = size_of::<Event>() + job_names + longest(&tasks) + longest(&nodes);
        let starts = start.is_some() && !matches!(state, JobState::Pending);
        let stops = matches!(state, JobState::Ended(_)) && end.is_some();
        let per_node = usize::from(starts) * (1 + usize::from(stops));
        let per_task = usize::from(submit.is_some()) + per_node * nodes.len().max(1);
        let events = tasks.len().saturating_mul(per_task);
        if Expansion::default().take(events, event_bytes).is_none() {
            let reason = format!(
                "{} tasks on {} nodes stand for {events} events, more than a line may \
                 ({MAX_RANGE_IDS} events, {} MiB)",
                tasks.len(),
                nodes.len(),
                MAX_EXPANSION_BYTES >> 20
            );
            let column = match nodes.is_empty() {
                true => self.job_id,
                false => self.node_list.unwrap_or(self.job_id),
            };
            return Err(self.bad(column, reason));
        }
        let on_nodes: Vec<Option<String>> = match nodes.is_empty() {
            true => vec![None],
            false => nodes.into_iter().map(Some).collect(),
        };
        let mut events = Vec::new();
        for task in tasks {
            let task = Subject {
                workload: Some(task),
                ..job.clone()
            };
            if let Some(submit) = submit {
                let queued = with_gpus(&task, asked.as_ref().or(allocated.as_ref()), 1);
                events.push(Event::new(
                    Source::Slurm,
                    &queued,
                    submit,
                    EventKind::Queued,
                ));
            }
            let Some(start) = start.filter(|_| starts) else {
                continue;
            };
            for node in &on_nodes {
                let part = Subject {
                    node: node.clone(),
                    ..with_gpus(&task, allocated.as_ref(), on_nodes.len())
                };
                events.push(Event::new(Source::Slurm, &part, start, EventKind::Start));
                if let (JobState::Ended(reason), Some(end)) = (&state, end) {
                    events.push(
                        Event::new(Source::Slurm, &part, end, EventKind::Stop)
                            .because(reason.clone()),
                    );
                }
            }
        }
        Ok(events)
    }

    /// A problem in a column, named as the header (or XDMoD's `--format`) names it.
    fn bad(&self, column: usize, reason: impl Into<String>) -> Bad {
        Bad::new(self.header[column].clone(), reason)
    }
}

/// A job's Start and End from their readings (see the module documentation).
fn job_span(
    starts: &[DateTime<Utc>],
    ends: &[DateTime<Utc>],
    elapsed: Option<TimeDelta>,
) -> Result<(Option<DateTime<Utc>>, Option<DateTime<Utc>>), String> {
    let (Some(&first_start), Some(&first_end)) = (starts.first(), ends.first()) else {
        return Ok((starts.first().copied(), ends.first().copied()));
    };
    let pairs = || {
        starts
            .iter()
            .flat_map(|s| ends.iter().map(move |e| (*s, *e)))
    };
    let agrees = |(start, end): &(DateTime<Utc>, DateTime<Utc>)| {
        elapsed.is_some_and(|elapsed| (*end - *start - elapsed).abs() <= TimeDelta::seconds(1))
    };
    pairs()
        .find(agrees)
        .or_else(|| pairs().find(|(start, end)| end >= start))
        .map(|(start, end)| (Some(start), Some(end)))
        .ok_or_else(|| format!("the job ends ({first_end}) before it starts ({first_start})"))
}

/// ElapsedRaw (`5400`) or Elapsed (`[D-][HH:]MM:SS`, as sacct prints durations); `INVALID`,
/// sacct's word for a negative time, and a negative ElapsedRaw are no length.
fn elapsed_time(text: &str) -> Result<Option<TimeDelta>, String> {
    if text == "INVALID" {
        return Ok(None);
    }
    let unreadable = || format!("'{text}' is not a duration (expected seconds or [D-]HH:MM:SS)");
    if let Ok(seconds) = text.parse::<i64>() {
        return u64::try_from(seconds)
            .ok()
            .map(crate::time::duration)
            .transpose();
    }
    let number = |part: &str| part.parse::<u64>().map_err(|_| unreadable());
    let (days, clock) = match text.split_once('-') {
        Some((days, clock)) => (number(days)?, clock),
        None => (0, text),
    };
    let parts: Vec<u64> = clock.split(':').map(number).collect::<Result<_, _>>()?;
    let (hours, minutes, seconds) = match parts[..] {
        [hours, minutes, seconds] => (hours, minutes, seconds),
        [minutes, seconds] => (0, minutes, seconds),
        _ => return Err(unreadable()),
    };
    // Saturates past 64 bits, for `duration` to refuse as too long.
    let total = [(days, 86_400), (hours, 3_600), (minutes, 60), (seconds, 1)]
        .iter()
        .fold(0u64, |total, (count, unit)| {
            total.saturating_add(count.saturating_mul(*unit))
        });
    crate::time::duration(total).map(Some)
}

/// The subject with `tres`'s GPUs shared evenly over `parts` nodes.
fn with_gpus(subject: &Subject, tres: Option<&TresGpus>, parts: usize) -> Subject {
    let Some(tres) = tres else {
        return subject.clone();
    };
    Subject {
        gpus: Some(tres.count as f64 / parts as f64),
        gpu_model: tres.model.clone(),
        mig_profile: tres.mig_profile.clone(),
        ..subject.clone()
    }
}

#[derive(Debug, Clone, PartialEq)]
enum JobState {
    Pending,
    Running,
    /// Ended, with the stop reason.
    Ended(String),
}

/// A job state of sacct(1)'s JOB STATE CODES; the text after the code (`CANCELLED by 1234`)
/// is kept in the reason.
fn job_state(text: &str) -> Result<JobState, String> {
    let code = text.split_whitespace().next().unwrap_or_default();
    Ok(match code {
        "PENDING" => JobState::Pending,
        "RUNNING" | "SUSPENDED" | "RESIZING" => JobState::Running,
        "COMPLETED" => JobState::Ended(StopClass::Finished.reason(None)),
        "FAILED" => JobState::Ended(StopClass::Failed.reason(None)),
        "PREEMPTED" => JobState::Ended(StopClass::Preempted.reason(None)),
        "REQUEUED" => JobState::Ended(StopClass::Evicted.reason(Some(text))),
        "CANCELLED" | "TIMEOUT" | "OUT_OF_MEMORY" | "NODE_FAIL" | "BOOT_FAIL" | "DEADLINE"
        | "REVOKED" => JobState::Ended(StopClass::Failed.reason(Some(text))),
        _ => {
            return Err(format!(
                "unknown Slurm job state '{text}': expected one of BOOT_FAIL, CANCELLED, \
                 COMPLETED, DEADLINE, FAILED, NODE_FAIL, OUT_OF_MEMORY, PENDING, PREEMPTED, \
                 RUNNING, REQUEUED, RESIZING, REVOKED, SUSPENDED, TIMEOUT"
            ));
        }
    })
}

/// GPUs in a TRES list (`billing=10,cpu=10,gres/gpu=4,mem=374000M,node=2`).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct TresGpus {
    pub(super) count: u64,
    /// The GRES type when the GPUs are of one type (`gres/gpu:a100=1` → `a100`).
    pub(super) model: Option<String>,
    /// From a MIG GRES type (`gres/gpu:a100_3g.20gb` → `3g.20gb`).
    pub(super) mig_profile: Option<String>,
}

/// The untyped `gres/gpu=N` is the total; typed entries (`gres/gpu:a100=1`) are listed beside
/// it only when the type is accounted, so they count only when the total is absent. A TRES
/// list without GPUs holds 0; an empty one (a pending job's AllocTRES) is `None`.
pub(super) fn tres_gpus(tres: &str) -> Result<Option<TresGpus>, String> {
    if tres.trim().is_empty() {
        return Ok(None);
    }
    let mut total = None;
    let mut typed = 0;
    let mut types = Vec::new();
    for item in tres.split(',') {
        let (name, value) = item.split_once('=').unwrap_or((item, ""));
        let gpu_type = match name.strip_prefix("gres/gpu") {
            Some("") => None,
            Some(typed_name) => match typed_name.strip_prefix(':') {
                Some(gpu_type) => Some(gpu_type),
                None => continue, // gres/gpumem, gres/gpuutil
            },
            None => continue,
        };
        let count: u64 = value
            .parse()
            .map_err(|_| format!("'{item}' has no whole GPU count"))?;
        match gpu_type {
            None => total = Some(count),
            Some(gpu_type) => {
                // Saturates for `Event::check` to refuse as no real count.
                typed = u64::saturating_add(typed, count);
                if !types.contains(&gpu_type) {
                    types.push(gpu_type);
                }
            }
        }
    }
    let (model, mig_profile) = match types[..] {
        [gpu_type] => split_mig_type(gpu_type),
        _ => (None, None),
    };
    Ok(Some(TresGpus {
        count: total.unwrap_or(typed),
        model,
        mig_profile,
    }))
}

/// `a100_3g.20gb` → (`a100`, `3g.20gb`); a type without a MIG profile is the model alone.
fn split_mig_type(gpu_type: &str) -> (Option<String>, Option<String>) {
    let is_mig_profile = |p: &str| {
        p.split_once("g.").is_some_and(|(slices, memory)| {
            !slices.is_empty()
                && slices.bytes().all(|b| b.is_ascii_digit())
                && memory
                    .strip_suffix("gb")
                    .is_some_and(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()))
        })
    };
    match gpu_type.rsplit_once('_') {
        Some((model, profile)) if is_mig_profile(profile) => {
            (Some(model.to_string()), Some(profile.to_string()))
        }
        _ => (Some(gpu_type.to_string()), None),
    }
}

/// The job ids a JobID field stands for: itself, or each task of a pending array record
/// (`123_[1-3,7]`; a `%N` throttle is not a task); `None` for another shape or more than an
/// [`Expansion`] holds.
pub(super) fn array_tasks(job_id: &str) -> Option<Vec<String>> {
    let Some((base, ranges)) = job_id.split_once("_[") else {
        return Some(vec![job_id.to_string()]);
    };
    let ranges = ranges.strip_suffix(']')?;
    let ranges = ranges.split_once('%').map_or(ranges, |(ranges, _)| ranges);
    let mut expansion = Expansion::default();
    expand_ranges(ranges)?
        .into_iter()
        .map(|task| expansion.hold(format!("{base}_{task}")))
        .collect()
}

/// The most ids a JobID's ranges, a NodeList, or a line's events may stand for: Slurm's
/// largest `MaxArraySize`. Guards memory against a mistyped range (`node[1-999999999]`) and
/// against products of ranges (`n[1-2000]x[1-2000]y[1-2000]`).
const MAX_RANGE_IDS: usize = 4_000_001;

/// The most memory one line's expansion may hold: its task ids, its hosts, and its events, each
/// counted before it is built. Counts alone do not bound it: `n[1-4000000]` after a megabyte of
/// name is 4 TB. A pending array of some 450,000 tasks fits (an event is 536 bytes and its names).
const MAX_EXPANSION_BYTES: usize = 256 << 20;

/// What one expansion holds so far, in ids and bytes, against [`MAX_RANGE_IDS`] and
/// [`MAX_EXPANSION_BYTES`].
#[derive(Default)]
struct Expansion {
    ids: usize,
    bytes: usize,
}

impl Expansion {
    /// Counts `count` more ids of `bytes` each; `None` past either limit.
    fn take(&mut self, count: usize, bytes: usize) -> Option<()> {
        self.ids = self.ids.checked_add(count)?;
        self.bytes = count
            .checked_mul(bytes)
            .and_then(|more| self.bytes.checked_add(more))?;
        (self.ids <= MAX_RANGE_IDS && self.bytes <= MAX_EXPANSION_BYTES).then_some(())
    }

    /// `name`, once counted.
    fn hold(&mut self, name: String) -> Option<String> {
        self.take(1, size_of::<String>() + name.len())?;
        Some(name)
    }
}

/// The most digits a range bound may have: a `u64`'s. More would be zero padding no host name
/// carries, and `format!` refuses widths past `u16::MAX`.
const MAX_RANGE_DIGITS: usize = 20;

/// `01-03,7,10-14:2` → `01 02 03 7 10 12 14`, keeping the zero padding of the range start.
fn expand_ranges(ranges: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for range in ranges.split(',') {
        let (range, step) = match range.split_once(':') {
            Some((range, step)) => (range, step.parse::<u64>().ok().filter(|s| *s > 0)?),
            None => (range, 1),
        };
        let (first, last) = range.split_once('-').unwrap_or((range, range));
        if first.len().max(last.len()) > MAX_RANGE_DIGITS {
            return None;
        }
        let (from, to) = (first.parse::<u64>().ok()?, last.parse::<u64>().ok()?);
        // The count less one, which cannot overflow: (to - from) / step < u64::MAX.
        let more = usize::try_from(to.checked_sub(from)? / step).ok()?;
        if more >= MAX_RANGE_IDS - out.len() {
            return None;
        }
        let width = first.len();
        out.extend(
            (from..=to)
                .step_by(usize::try_from(step).ok()?)
                .map(|n| format!("{n:0width$}")),
        );
    }
    Some(out)
}

/// Every host of a Slurm hostlist: `gpu[01-02],cpu7,rack[1-2]n[1-2]` → `gpu01 gpu02 cpu7
/// rack1n1 rack1n2 rack2n1 rack2n2`; `None` for text of another shape or more than an
/// [`Expansion`] holds.
pub(super) fn expand_hostlist(list: &str) -> Option<Vec<String>> {
    let mut hosts = Vec::new();
    let mut expansion = Expansion::default();
    let mut depth = 0u32;
    let mut from = 0;
    for (at, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = u32::checked_sub(depth, 1)?,
            ',' if depth == 0 => {
                expand_host(&list[from..at], &mut hosts, &mut expansion)?;
                from = at + 1;
            }
            _ => {}
        }
    }
    if depth > 0 {
        return None;
    }
    expand_host(&list[from..], &mut hosts, &mut expansion)?;
    Some(hosts)
}

/// Adds the hosts of one pattern (`rack[1-2]n[1-2]`) to `hosts`: the product of its bracket
/// groups, first group outermost. The groups are read first and each name is written once, in
/// a loop (no recursion, no name rebuilt per group), counted by `expansion` before it is kept.
fn expand_host(pattern: &str, hosts: &mut Vec<String>, expansion: &mut Expansion) -> Option<()> {
    if pattern.is_empty() {
        return None;
    }
    let mut groups = Vec::new();
    let mut rest = pattern;
    while let Some((literal, after)) = rest.split_once('[') {
        let (ranges, tail) = after.split_once(']')?;
        groups.push((literal, expand_ranges(ranges)?));
        rest = tail;
    }
    // Which number of each group the next name takes, the last group turning fastest.
    let mut at = vec![0; groups.len()];
    loop {
        let mut name = String::new();
        for ((literal, numbers), i) in groups.iter().zip(&at) {
            name.push_str(literal);
            name.push_str(&numbers[*i]);
        }
        name.push_str(rest);
        hosts.push(expansion.hold(name)?);
        let Some(turned) = (0..groups.len())
            .rev()
            .find(|&g| at[g] + 1 < groups[g].1.len())
        else {
            return Some(());
        };
        at[turned] += 1;
        at[turned + 1..].fill(0);
    }
}
