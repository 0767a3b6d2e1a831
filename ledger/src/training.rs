//! Training economics (docs/design.md §7): what a training workload's GPU time bought. Work done after a
//! run's last checkpoint is lost when the run fails or is preempted, so only the time up to that
//! checkpoint is *effective*; the lost GPU time, priced at the workload's own GPU-hour price, is
//! the failure loss (failed runs) or the recompute cost (preempted or evicted runs).
//!
//! Rules:
//! - a **run** is one pod from its `start` event to its next `stop`, `preempted` or `evicted`
//!   event; a `stop` whose reason is `finished`, `succeeded` or `completed` succeeded, any other
//!   `stop` failed; a run still open at the end of the events is running (fully effective so far);
//! - a workload is **training** when a start event says `workload_type: training` or when any of
//!   its events is a `checkpoint` or `progress`;
//! - **lost time** of a failed or preempted run: from its last checkpoint (its start when it never
//!   checkpointed) to its end, times its GPUs;
//! - `progress` events carry counters **cumulative within the run**: a run's effective samples and
//!   tokens are those of its last progress event, or for a failed or preempted run of its last
//!   progress event at or before its last checkpoint (later work is recomputed);
//! - the **GPU-hour price** is the workload's ledger cost over its allocated GPU-hours.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use hashbrown::Equivalent;

use crate::time::{MICROS_PER_HOUR, Micros};

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Running,
    Succeeded,
    Failed,
    Preempted,
}

/// One scheduler event, as `scheduler_events` holds it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Event<'a> {
    pub ts: Micros,
    pub kind: &'a str,
    pub cluster: Option<&'a str>,
    pub node: Option<&'a str>,
    pub namespace: Option<&'a str>,
    pub workload: Option<&'a str>,
    pub pod: Option<&'a str>,
    pub gpus: Option<f64>,
    pub reason: Option<&'a str>,
    pub samples: Option<i64>,
    pub tokens: Option<i64>,
    pub team: Option<&'a str>,
    pub workload_type: Option<&'a str>,
}

/// A workload: its namespace and name.
pub type WorkloadKey = (Option<String>, String);

/// One run of a pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// The node of its start event (`spot_savings` prices its lost time at that node's price).
    pub cluster: Option<String>,
    pub node: Option<String>,
    pub start: Micros,
    pub end: Option<Micros>,
    pub gpus: f64,
    pub ending: Ending,
    pub last_checkpoint: Option<Micros>,
    /// Counters of the last progress event, and of the last one at or before the last checkpoint.
    pub progress: (i64, i64),
    pub checkpointed_progress: (i64, i64),
}

impl Run {
    /// GPU-hours after the last checkpoint of a run that failed or was preempted.
    pub fn lost_gpu_hours(&self) -> f64 {
        match (self.ending, self.end) {
            (Ending::Failed | Ending::Preempted, Some(end)) => {
                let from = self.last_checkpoint.unwrap_or(self.start);
                (end - from).max(0) as f64 / MICROS_PER_HOUR as f64 * self.gpus
            }
            _ => 0.0,
        }
    }

    /// Samples and tokens that need not be recomputed.
    pub fn effective_progress(&self) -> (i64, i64) {
        match self.ending {
            Ending::Failed | Ending::Preempted => self.checkpointed_progress,
            Ending::Running | Ending::Succeeded => self.progress,
        }
    }
}

/// A workload's ledger cost (busy + allocated idle) and allocated GPU-hours in the window.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct WorkloadCost {
    pub cost: f64,
    pub gpu_hours: f64,
}

/// One row of `training_economics`.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub team: Option<String>,
    pub namespace: Option<String>,
    pub workload: String,
    pub runs: i64,
    pub succeeded: i64,
    pub failed: i64,
    pub preempted: i64,
    /// Succeeded over ended runs; `None` when no run ended.
    pub success_rate: Option<f64>,
    pub gpu_hours: f64,
    pub effective_gpu_hours: f64,
    pub cost: f64,
    pub failure_loss: Option<f64>,
    pub recompute_cost: Option<f64>,
    pub samples: i64,
    pub tokens: i64,
    pub cost_per_1m_samples: Option<f64>,
    pub cost_per_1b_tokens: Option<f64>,
}

#[derive(Debug, Default)]
struct Workload {
    team: Option<String>,
    training: bool,
    runs: Vec<Run>,
    /// The next workload of the same name (in another namespace), in `TrainingRuns::workloads`.
    same_name: Option<usize>,
}

/// A pod of a workload (its index in `TrainingRuns::workloads`).
#[derive(Debug, PartialEq, Eq, Hash)]
struct Pod(usize, Box<str>);

/// A [`Pod`] to look up, without allocating its name; hashes as the `Pod` it names.
struct PodRef<'a>(usize, &'a str);

impl Hash for PodRef<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
        self.1.hash(state);
    }
}

impl Equivalent<Pod> for PodRef<'_> {
    fn equivalent(&self, pod: &Pod) -> bool {
        self.0 == pod.0 && self.1 == &*pod.1
    }
}

/// Collects runs from scheduler events fed in time order. A week of a large fleet holds tens of
/// thousands of workloads (a Kubernetes Job is one), most with one pod and one run: finding an
/// event's workload and run allocates nothing, and a new run allocates only its strings.
#[derive(Debug, Default)]
pub struct TrainingRuns {
    /// In the order first seen; read in key order.
    workloads: Vec<(WorkloadKey, Workload)>,
    /// The first workload of each name in `workloads`; the others follow `same_name`.
    by_name: hashbrown::HashMap<Box<str>, usize>,
    /// The index in its workload's `runs` of each pod's open run.
    open: hashbrown::HashMap<Pod, usize>,
}

const SUCCESS_REASONS: [&str; 3] = ["finished", "succeeded", "completed"];

impl TrainingRuns {
    pub fn add(&mut self, event: &Event) {
        let (Some(name), Some(pod)) = (event.workload, event.pod) else {
            return;
        };
        let index = self.workload(event.namespace, name);
        let workload = &mut self.workloads[index].1;
        if event.kind == "start" {
            workload.training |= event.workload_type == Some("training");
            if workload.team.is_none() {
                workload.team = event.team.map(str::to_string);
            }
            workload.runs.push(Run {
                cluster: event.cluster.map(str::to_string),
                node: event.node.map(str::to_string),
                start: event.ts,
                end: None,
                gpus: event.gpus.unwrap_or(0.0),
                ending: Ending::Running,
                last_checkpoint: None,
                progress: (0, 0),
                checkpointed_progress: (0, 0),
            });
            let run = workload.runs.len() - 1;
            match self.open.get_mut(&PodRef(index, pod)) {
                Some(open) => *open = run,
                None => {
                    self.open.insert(Pod(index, pod.into()), run);
                }
            }
            return;
        }
        workload.training |= matches!(event.kind, "checkpoint" | "progress");
        let Some(&run) = self.open.get(&PodRef(index, pod)) else {
            return;
        };
        let run = &mut workload.runs[run];
        let ending = match event.kind {
            "checkpoint" => {
                run.last_checkpoint = Some(event.ts);
                run.checkpointed_progress = run.progress;
                None
            }
            "progress" => {
                run.progress = (
                    event.samples.unwrap_or(run.progress.0),
                    event.tokens.unwrap_or(run.progress.1),
                );
                None
            }
            "stop" if event.reason.is_some_and(|r| SUCCESS_REASONS.contains(&r)) => {
                Some(Ending::Succeeded)
            }
            "stop" => Some(Ending::Failed),
            "preempted" | "evicted" => Some(Ending::Preempted),
            _ => None,
        };
        if let Some(ending) = ending {
            run.ending = ending;
            run.end = Some(event.ts);
            self.open.remove(&PodRef(index, pod));
        }
    }

    /// The index in `workloads` of the workload `name` in `namespace`, added when new.
    fn workload(&mut self, namespace: Option<&str>, name: &str) -> usize {
        let first = self.by_name.get(name).copied();
        let mut next = first;
        while let Some(index) = next {
            let (key, workload) = &self.workloads[index];
            if key.0.as_deref() == namespace {
                return index;
            }
            next = workload.same_name;
        }
        let index = self.workloads.len();
        let key = (namespace.map(str::to_string), name.to_string());
        self.workloads.push((
            key,
            Workload {
                same_name: first,
                ..Workload::default()
            },
        ));
        self.by_name.insert(name.into(), index);
        index
    }

    /// The training workloads in key order (the order sums over them run in).
    fn training_workloads(&self) -> Vec<&(WorkloadKey, Workload)> {
        let mut workloads: Vec<_> = self.workloads.iter().filter(|(_, w)| w.training).collect();
        workloads.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        workloads
    }

    /// The runs of training workloads, with their workload.
    pub fn training_runs(&self) -> impl Iterator<Item = (&WorkloadKey, &Run)> {
        self.training_workloads()
            .into_iter()
            .flat_map(|(key, w)| w.runs.iter().map(move |run| (key, run)))
    }

    /// One row per training workload. `costs` holds each workload's ledger cost and the team the
    /// ledger charged (which wins over the scheduler's team label).
    pub fn finish(&self, costs: &HashMap<WorkloadKey, (String, WorkloadCost)>) -> Vec<Row> {
        self.training_workloads()
            .into_iter()
            .map(|(key, w)| {
                let charged = costs.get(key);
                let cost = charged.map(|(_, c)| *c).unwrap_or_default();
                let count = |ending| w.runs.iter().filter(|r| r.ending == ending).count() as i64;
                let (succeeded, failed, preempted) = (
                    count(Ending::Succeeded),
                    count(Ending::Failed),
                    count(Ending::Preempted),
                );
                let ended = succeeded + failed + preempted;
                let lost = |ending| -> f64 {
                    w.runs
                        .iter()
                        .filter(|r| r.ending == ending)
                        .map(Run::lost_gpu_hours)
                        // `Sum` of no floats is -0.0.
                        .fold(0.0, |total, hours| total + hours)
                };
                let (failed_hours, preempted_hours) =
                    (lost(Ending::Failed), lost(Ending::Preempted));
                let price = (cost.gpu_hours > 0.0).then(|| cost.cost / cost.gpu_hours);
                let (samples, tokens) = w
                    .runs
                    .iter()
                    .map(Run::effective_progress)
                    .fold((0, 0), |(s, t), (rs, rt)| (s + rs, t + rt));
                let per =
                    |units: i64, scale: f64| (units > 0).then(|| cost.cost / units as f64 * scale);
                Row {
                    team: charged
                        .map(|(team, _)| team.clone())
                        .or_else(|| w.team.clone()),
                    namespace: key.0.clone(),
                    workload: key.1.clone(),
                    runs: w.runs.len() as i64,
                    succeeded,
                    failed,
                    preempted,
                    success_rate: (ended > 0).then(|| succeeded as f64 / ended as f64),
                    gpu_hours: cost.gpu_hours,
                    effective_gpu_hours: (cost.gpu_hours - failed_hours - preempted_hours).max(0.0),
                    cost: cost.cost,
                    failure_loss: price.map(|p| failed_hours * p),
                    recompute_cost: price.map(|p| preempted_hours * p),
                    samples,
                    tokens,
                    cost_per_1m_samples: per(samples, 1e6),
                    cost_per_1b_tokens: per(tokens, 1e9),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
