//! Allocation intervals from scheduler events (docs/design.md §4, "exact intervals"): a 30-second pod is
//! charged 30 seconds. Events are paired per (cluster, namespace, workload, pod); each interval
//! is split into one allocation per physical GPU with the share of that GPU it held.
//!
//! Where the events name no GPU indices, the GPU comes from dcgm-exporter's `namespace/pod`
//! labels, else the allocation is packed onto the node's lowest GPUs with room at its start
//! (first fit, deterministic) and marked as such, so accounting stays per GPU and balanced.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::shares::{GpuRequest, gpu_share};
use crate::time::{Micros, Span};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    Start,
    Stop,
    Checkpoint,
    Progress,
    Queued,
    Admitted,
    Rejected,
    Preempted,
    Evicted,
    NodeUp,
    NodeDown,
}

impl EventKind {
    pub const ALL: [EventKind; 11] = [
        EventKind::Start,
        EventKind::Stop,
        EventKind::Checkpoint,
        EventKind::Progress,
        EventKind::Queued,
        EventKind::Admitted,
        EventKind::Rejected,
        EventKind::Preempted,
        EventKind::Evicted,
        EventKind::NodeUp,
        EventKind::NodeDown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Start => "start",
            EventKind::Stop => "stop",
            EventKind::Checkpoint => "checkpoint",
            EventKind::Progress => "progress",
            EventKind::Queued => "queued",
            EventKind::Admitted => "admitted",
            EventKind::Rejected => "rejected",
            EventKind::Preempted => "preempted",
            EventKind::Evicted => "evicted",
            EventKind::NodeUp => "node_up",
            EventKind::NodeDown => "node_down",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// The attribution labels of docs/design.md §3.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Labels {
    pub team: Option<String>,
    pub environment: Option<String>,
    pub workload_type: Option<String>,
    pub model: Option<String>,
    pub cost_center: Option<String>,
}

/// A scheduler event as the ledger needs it (a row of `scheduler_events`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Event {
    pub ts: Micros,
    pub kind: Option<EventKind>,
    pub cluster: String,
    pub node: Option<String>,
    pub namespace: Option<String>,
    pub workload: Option<String>,
    pub pod: Option<String>,
    pub gpus: Option<f64>,
    pub gpu_indices: Vec<u32>,
    pub mig_profile: Option<String>,
    pub gpu_fraction: Option<f64>,
    pub reason: Option<String>,
    pub labels: Labels,
}

impl Event {
    /// A total order over every field, so that the same events give the same runs whatever
    /// order they arrived in (floats compare by their bits).
    fn canonical_key(&self) -> impl Ord + '_ {
        (
            (self.ts, self.kind, &self.cluster, &self.node),
            (&self.namespace, &self.workload, &self.pod),
            (
                self.gpus.map(f64::to_bits),
                &self.gpu_indices,
                &self.mig_profile,
                self.gpu_fraction.map(f64::to_bits),
            ),
            (&self.reason, &self.labels),
        )
    }
}

/// The events in their canonical order, each fact once: a scheduler event delivered twice (a
/// re-export, a second collector, a retried push) is the same event, not a second one.
pub fn canonical_events(events: &[Event]) -> Vec<&Event> {
    let mut sorted: Vec<&Event> = events.iter().collect();
    sorted.sort_by(|a, b| a.canonical_key().cmp(&b.canonical_key()));
    sorted.dedup_by(|a, b| a.canonical_key() == b.canonical_key());
    sorted
}

/// Why an allocation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    Finished,
    Failed,
    Preempted,
    Evicted,
    /// The same pod started again: its earlier run ended there.
    Restarted,
    /// Still running at the end of the window.
    Running,
}

impl EndReason {
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Finished => "finished",
            EndReason::Failed => "failed",
            EndReason::Preempted => "preempted",
            EndReason::Evicted => "evicted",
            EndReason::Restarted => "restarted",
            EndReason::Running => "running",
        }
    }

    fn of_stop(kind: EventKind, reason: Option<&str>) -> Self {
        match kind {
            EventKind::Preempted => EndReason::Preempted,
            EventKind::Evicted => EndReason::Evicted,
            _ => match reason.map(str::to_ascii_lowercase) {
                Some(r) if r.starts_with("fail") => EndReason::Failed,
                Some(r) if r.starts_with("preempt") => EndReason::Preempted,
                Some(r) if r.starts_with("evict") => EndReason::Evicted,
                _ => EndReason::Finished,
            },
        }
    }
}

/// How the GPU of an allocation was determined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuSource {
    /// The scheduler event named the GPU indices.
    Event,
    /// dcgm-exporter's `namespace/pod` labels showed which GPU the pod used.
    Telemetry,
    /// Neither: packed onto the node's lowest GPUs with room (first fit).
    Packed,
}

impl GpuSource {
    pub fn as_str(self) -> &'static str {
        match self {
            GpuSource::Event => "event",
            GpuSource::Telemetry => "telemetry",
            GpuSource::Packed => "packed",
        }
    }
}

/// One workload's hold on one physical GPU over one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Allocation {
    pub cluster: String,
    pub node: String,
    pub gpu_index: u32,
    pub namespace: Option<String>,
    pub workload: Option<String>,
    pub pod: Option<String>,
    pub labels: Labels,
    pub span: Span,
    /// Share of the physical GPU, in (0, 1].
    pub share: f64,
    pub mig_profile: Option<String>,
    pub end_reason: EndReason,
    pub gpu_source: GpuSource,
}

/// What the ledger knows about a node's GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeGpus {
    pub gpu_count: u32,
    pub gpu_model: String,
    /// Time-slicing replicas configured per GPU (1 when not time-sliced).
    pub replicas: u32,
}

/// A problem with the events that did not stop the build, for the user to see.
#[derive(Debug, Clone, PartialEq)]
pub struct Warning {
    pub ts: Micros,
    pub subject: String,
    pub message: String,
}

/// Which GPUs dcgm-exporter saw a pod on: (cluster, node, namespace, pod) → indices.
pub type PodGpus = HashMap<(String, String, String, String), Vec<u32>>;

/// (cluster, namespace, workload, pod, node when there is no pod): a Slurm job spanning several
/// nodes has one run per node.
type RunKey<'a> = (
    &'a str,
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
);

/// An interval before it is split per GPU.
struct Run<'a> {
    start_event: &'a Event,
    span: Span,
    end_reason: EndReason,
}

/// Builds allocations inside `window` from events (any order, repeats allowed: see
/// [`canonical_events`]).
pub fn build_allocations(
    events: &[Event],
    window: Span,
    nodes: &HashMap<(String, String), NodeGpus>,
    pod_gpus: &PodGpus,
) -> (Vec<Allocation>, Vec<Warning>) {
    let mut warnings = Vec::new();
    let events = canonical_events(events);
    let runs = pair_runs(&events, window, &mut warnings);
    // Looked up by the events' own text, with no key built per run.
    let nodes: hashbrown::HashMap<(&str, &str), &NodeGpus> = nodes
        .iter()
        .map(|((cluster, node), gpus)| ((cluster.as_str(), node.as_str()), gpus))
        .collect();
    let pod_gpus: hashbrown::HashMap<[&str; 4], &Vec<u32>> = pod_gpus
        .iter()
        .map(|((cluster, node, namespace, pod), gpus)| {
            ([cluster, node, namespace, pod].map(String::as_str), gpus)
        })
        .collect();
    let mut allocations = Vec::new();
    let mut unresolved = Vec::new();
    for run in runs {
        let event = run.start_event;
        let Some(node_name) = event.node.as_deref() else {
            warnings.push(Warning {
                ts: event.ts,
                subject: describe(event),
                message: "start event names no node; not allocated".into(),
            });
            continue;
        };
        let Some(node) = nodes.get(&(event.cluster.as_str(), node_name)) else {
            warnings.push(Warning {
                ts: event.ts,
                subject: describe(event),
                message: format!("node {node_name} is not in the inventory; not allocated"),
            });
            continue;
        };
        let request = match (&event.mig_profile, event.gpu_fraction) {
            (Some(profile), _) => GpuRequest::Mig(profile),
            (None, Some(fraction)) => GpuRequest::Fraction(fraction),
            (None, None) if node.replicas > 1 => GpuRequest::TimeSliced {
                replicas: node.replicas,
            },
            (None, None) => GpuRequest::Whole,
        };
        let share = match gpu_share(&request, &node.gpu_model) {
            Ok(share) => share,
            Err(message) => {
                warnings.push(Warning {
                    ts: event.ts,
                    subject: describe(event),
                    message,
                });
                continue;
            }
        };
        let template = Allocation {
            cluster: event.cluster.clone(),
            node: node_name.to_string(),
            gpu_index: 0,
            namespace: event.namespace.clone(),
            workload: event.workload.clone(),
            pod: event.pod.clone(),
            labels: event.labels.clone(),
            span: run.span,
            share,
            mig_profile: event.mig_profile.clone(),
            end_reason: run.end_reason,
            gpu_source: GpuSource::Event,
        };
        let telemetry = match (event.namespace.as_deref(), event.pod.as_deref()) {
            (Some(ns), Some(pod)) => pod_gpus
                .get(&[event.cluster.as_str(), node_name, ns, pod])
                .copied(),
            _ => None,
        };
        let (indices, source) = if !event.gpu_indices.is_empty() {
            (event.gpu_indices.clone(), GpuSource::Event)
        } else if let Some(indices) = telemetry {
            (indices.clone(), GpuSource::Telemetry)
        } else {
            // Whole-GPU count to place; a shared request (MIG, fraction, replica) needs one GPU.
            let count = if matches!(request, GpuRequest::Whole) {
                event.gpus.unwrap_or(1.0).ceil().max(1.0) as u32
            } else {
                1
            };
            unresolved.push((template, count, node.gpu_count));
            continue;
        };
        for index in indices {
            if index >= node.gpu_count {
                warnings.push(Warning {
                    ts: event.ts,
                    subject: describe(event),
                    message: format!(
                        "GPU {index} does not exist on {node_name} ({} GPUs)",
                        node.gpu_count
                    ),
                });
                continue;
            }
            allocations.push(Allocation {
                gpu_index: index,
                gpu_source: source,
                ..template.clone()
            });
        }
    }
    pack(&mut allocations, unresolved, &mut warnings);
    allocations.sort_by(|a, b| {
        (&a.cluster, &a.node, a.gpu_index, a.span.start).cmp(&(
            &b.cluster,
            &b.node,
            b.gpu_index,
            b.span.start,
        ))
    });
    (allocations, warnings)
}

fn describe(event: &Event) -> String {
    let part = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    format!(
        "{}/{}/{}/{}",
        event.cluster,
        part(&event.namespace),
        part(&event.workload),
        part(&event.pod)
    )
}

/// Pairs start and stop events per run key. A workload seen both as pods (Kubernetes) and as a
/// whole (Kueue) is counted from its pods only: the same GPUs must not be allocated twice.
fn pair_runs<'a>(events: &[&'a Event], window: Span, warnings: &mut Vec<Warning>) -> Vec<Run<'a>> {
    let lifecycle = |e: &&&Event| {
        matches!(
            e.kind,
            Some(EventKind::Start | EventKind::Stop | EventKind::Preempted | EventKind::Evicted)
        )
    };
    // foldhash maps, the runs put in key order once grouped: a B-tree of a month's events by
    // their string keys, and SipHash, were a tenth of a late hour's build.
    let with_pods: hashbrown::HashSet<(&str, Option<&str>, Option<&str>)> = events
        .iter()
        .filter(lifecycle)
        .filter(|e| e.pod.is_some())
        .map(|e| {
            (
                e.cluster.as_str(),
                e.namespace.as_deref(),
                e.workload.as_deref(),
            )
        })
        .collect();
    let mut by_key: hashbrown::HashMap<RunKey, Vec<&Event>> = hashbrown::HashMap::new();
    for &event in events.iter().filter(lifecycle) {
        if event.pod.is_none()
            && with_pods.contains(&(
                event.cluster.as_str(),
                event.namespace.as_deref(),
                event.workload.as_deref(),
            ))
        {
            continue;
        }
        let node = if event.pod.is_none() {
            event.node.as_deref()
        } else {
            None
        };
        let key = (
            event.cluster.as_str(),
            event.namespace.as_deref(),
            event.workload.as_deref(),
            event.pod.as_deref(),
            node,
        );
        by_key.entry(key).or_default().push(event);
    }
    // In key order, so that the same events give the same runs in the same order.
    let mut by_key: Vec<_> = by_key.into_iter().collect();
    by_key.sort_unstable_by_key(|(key, _)| *key);
    let mut runs = Vec::new();
    for (_, mut events) in by_key {
        // Stable on the canonical order: ties keep it.
        events.sort_by_key(|e| (e.ts, e.kind != Some(EventKind::Start)));
        let mut open: Option<&Event> = None;
        // When the key's latest run ended: a second stop at that very time (the same stop told
        // twice, say with other words) closes nothing and opens nothing.
        let mut closed_at: Option<Micros> = None;
        for event in events {
            match event.kind {
                Some(EventKind::Start) => {
                    if let Some(start) = open.replace(event) {
                        runs.push(Run {
                            start_event: start,
                            span: Span::new(start.ts, event.ts),
                            end_reason: EndReason::Restarted,
                        });
                    }
                }
                Some(kind) => match open.take() {
                    Some(start) => {
                        closed_at = Some(event.ts);
                        runs.push(Run {
                            start_event: start,
                            span: Span::new(start.ts, event.ts),
                            end_reason: EndReason::of_stop(kind, event.reason.as_deref()),
                        });
                    }
                    None if closed_at == Some(event.ts) => {}
                    // Stopped without a start in the data: it was running before the window opened.
                    None if event.ts > window.start && event.node.is_some() => {
                        closed_at = Some(event.ts);
                        runs.push(Run {
                            start_event: event,
                            span: Span::new(window.start, event.ts),
                            end_reason: EndReason::of_stop(kind, event.reason.as_deref()),
                        });
                    }
                    None => warnings.push(Warning {
                        ts: event.ts,
                        subject: describe(event),
                        message: "stop without a start and without a node; ignored".into(),
                    }),
                },
                None => {}
            }
        }
        if let Some(start) = open {
            runs.push(Run {
                start_event: start,
                span: Span::new(start.ts, window.end.max(start.ts)),
                end_reason: EndReason::Running,
            });
        }
    }
    runs.into_iter()
        .filter_map(|mut run| {
            run.span = run.span.intersect(&window);
            (!run.span.is_empty()).then_some(run)
        })
        .collect()
}

/// First-fit placement of allocations whose GPUs are unknown, in start order.
fn pack(
    allocations: &mut Vec<Allocation>,
    mut unresolved: Vec<(Allocation, u32, u32)>,
    warnings: &mut Vec<Warning>,
) {
    unresolved.sort_by(|a, b| {
        (a.0.span.start, &a.0.node, &a.0.pod).cmp(&(b.0.span.start, &b.0.node, &b.0.pod))
    });
    for (template, count, gpu_count) in unresolved {
        let load = |index: u32, allocations: &[Allocation]| -> f64 {
            allocations
                .iter()
                .filter(|a| {
                    a.cluster == template.cluster && a.node == template.node && a.gpu_index == index
                })
                .filter(|a| !a.span.intersect(&template.span).is_empty())
                .map(|a| a.share)
                .sum()
        };
        let mut free: Vec<u32> = (0..gpu_count)
            .filter(|&i| load(i, allocations) + template.share <= 1.0 + 1e-9)
            .take(count as usize)
            .collect();
        if free.len() < count as usize {
            warnings.push(Warning {
                ts: template.span.start,
                subject: format!("{}/{}", template.cluster, template.node),
                message: format!(
                    "{} GPUs requested but only {} free; the node is overcommitted",
                    count,
                    free.len()
                ),
            });
            free = (0..gpu_count.min(count)).collect();
        }
        for index in free {
            allocations.push(Allocation {
                gpu_index: index,
                gpu_source: GpuSource::Packed,
                ..template.clone()
            });
        }
    }
}

#[cfg(test)]
mod tests;
