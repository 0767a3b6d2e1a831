//! Kubernetes Pod objects → the `start` and `stop` of the pod's GPU allocation, and the
//! object-reading helpers the Kueue Workload reader shares.
//!
//! - start: `status.startTime`, else the earliest container `startedAt`. The kubelet hands
//!   devices to a pod when it admits it, which is when it sets `startTime`; GPUs stay held through
//!   image pulls. `startTime` also stays the same when a container restarts, so a watch stream
//!   repeats one start rather than inventing new ones.
//! - stop, once the phase is `Succeeded` or `Failed`: the latest container `finishedAt` (else the
//!   `DisruptionTarget` or `Ready` condition's transition). Reason: `evicted` for `status.reason`
//!   `Evicted`; from a `DisruptionTarget` condition `preempted` (`PreemptionByScheduler`) or
//!   `evicted: <reason>`; `finished` for `Succeeded`; otherwise `failed`, with the pod's or a
//!   container's reason when it is more than `Error` (`failed: OOMKilled`).
//! - GPUs: effective request of `nvidia.com/gpu` (or `nvidia.com/gpu.shared`, the renamed
//!   time-sliced resource) or of one `nvidia.com/mig-<profile>` (then `mig_profile` is set and
//!   `gpus` counts slices): the sum over containers, or the largest init container if larger.
//! - workload: the controlling owner's name (the Job), else the `kueue.x-k8s.io/workload`
//!   annotation, else the pod's own name. Queue: label `kueue.x-k8s.io/queue-name`. GPU model:
//!   node selector `nvidia.com/gpu.product`. Priority: `spec.priorityClassName`.
//! - A pod without GPUs lands too, with `gpus` 0: it still holds its share of the node.
//! - A pod not started yet (no start time) holds nothing and is skipped.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::{
    Attribution, Bad, Event, EventKind, Source, StopClass, Subject, field_name, json_array,
    json_map, json_str, json_string, json_time, map_str,
};
use crate::record::ParseContext;

pub(super) fn pod_events(pod: &Value, ctx: &ParseContext) -> Result<Vec<Event>, Bad> {
    let meta = ObjectMeta::read(pod, ctx)?;
    let Some(start) = pod_start(pod, ctx)? else {
        return Ok(Vec::new());
    };
    let gpus = pod_spec_gpus(pod, "/spec")?.resolve("spec.containers")?;
    let node_selector = json_map(pod, "/spec/nodeSelector")?;
    let subject = Subject {
        cluster: ctx.cluster.clone(),
        node: json_string(pod, "/spec/nodeName")?,
        namespace: meta.namespace.clone(),
        workload: Some(
            meta.owner
                .clone()
                .or(meta.annotation("kueue.x-k8s.io/workload")?)
                .unwrap_or_else(|| meta.name.clone()),
        ),
        pod: Some(meta.name.clone()),
        gpus: Some(gpus.count),
        gpu_model: node_selector
            .map(|s| map_str(s, "nvidia.com/gpu.product", "spec.nodeSelector"))
            .transpose()?
            .flatten()
            .map(String::from),
        mig_profile: gpus.mig_profile,
        queue: meta.label("kueue.x-k8s.io/queue-name")?,
        priority: json_string(pod, "/spec/priorityClassName")?,
        labels: meta.attribution()?,
        ..Subject::default()
    };
    let event = |ts, kind| Event::new(Source::Kubernetes, &subject, ts, kind).of(&meta.uid);
    let mut events = vec![event(start, EventKind::Start)];
    let phase = json_str(pod, "/status/phase")?;
    if matches!(phase, Some("Succeeded" | "Failed")) {
        let stop = pod_stop(pod, ctx)?;
        if stop < start {
            return Err(Bad::new(
                "status.containerStatuses",
                "a container finished before the pod started",
            ));
        }
        let reason = pod_stop_reason(pod, phase == Some("Succeeded"))?;
        events.push(event(stop, EventKind::Stop).because(reason));
    }
    Ok(events)
}

fn pod_start(pod: &Value, ctx: &ParseContext) -> Result<Option<DateTime<Utc>>, Bad> {
    if let Some(start) = json_time(pod, "/status/startTime", ctx)? {
        return Ok(Some(start));
    }
    let mut earliest = None;
    for i in 0..json_array(pod, "/status/containerStatuses")?.len() {
        for state in ["running", "terminated"] {
            let pointer = format!("/status/containerStatuses/{i}/state/{state}/startedAt");
            if let Some(started) = json_time(pod, &pointer, ctx)? {
                earliest = Some(earliest.map_or(started, |e: DateTime<Utc>| e.min(started)));
            }
        }
    }
    Ok(earliest)
}

fn pod_stop(pod: &Value, ctx: &ParseContext) -> Result<DateTime<Utc>, Bad> {
    let mut latest = None;
    for i in 0..json_array(pod, "/status/containerStatuses")?.len() {
        let pointer = format!("/status/containerStatuses/{i}/state/terminated/finishedAt");
        latest = latest.max(json_time(pod, &pointer, ctx)?);
    }
    if let Some(stop) = latest {
        return Ok(stop);
    }
    // Without container times: when the pod was marked for disruption or stopped being ready.
    for (kind, status) in [("DisruptionTarget", "True"), ("Ready", "False")] {
        if let Some(transition) = condition_transition(pod, kind, status, ctx)? {
            return Ok(transition.time);
        }
    }
    Err(Bad::new(
        "status.containerStatuses",
        "the pod has ended but no container has a finishedAt time and no condition a transition time",
    ))
}

fn pod_stop_reason(pod: &Value, succeeded: bool) -> Result<String, Bad> {
    let status_reason = json_str(pod, "/status/reason")?;
    if status_reason == Some("Evicted") {
        return Ok(StopClass::Evicted.reason(None));
    }
    if let Some(disruption) = condition(pod, "DisruptionTarget", "True")? {
        match json_str(disruption, "/reason")? {
            Some("PreemptionByScheduler" | "PreemptionByKubeScheduler") => {
                return Ok(StopClass::Preempted.reason(None));
            }
            // The pod garbage collector only cleans up pods that had already ended.
            Some("DeletionByPodGC") => {}
            other => return Ok(StopClass::Evicted.reason(other)),
        }
    }
    if succeeded {
        return Ok(StopClass::Finished.reason(None));
    }
    // The pod's own reason (DeadlineExceeded, …), else the first telling container reason.
    let mut detail = status_reason.map(String::from);
    for i in 0..json_array(pod, "/status/containerStatuses")?.len() {
        if detail.is_some() {
            break;
        }
        let pointer = format!("/status/containerStatuses/{i}/state/terminated/reason");
        detail = json_str(pod, &pointer)?
            .filter(|reason| !matches!(*reason, "Completed" | "Error"))
            .map(String::from);
    }
    Ok(StopClass::Failed.reason(detail.as_deref()))
}

/// The condition of `status.conditions` of a type, if it has the given status.
pub(super) fn condition<'v>(
    object: &'v Value,
    kind: &str,
    status: &str,
) -> Result<Option<&'v Value>, Bad> {
    let conditions = json_array(object, "/status/conditions")?;
    Ok(conditions.iter().find(|c| {
        c.get("type").and_then(Value::as_str) == Some(kind)
            && c.get("status").and_then(Value::as_str) == Some(status)
    }))
}

/// When a condition last took its status, and why.
pub(super) struct Transition<'v> {
    pub(super) time: DateTime<Utc>,
    pub(super) reason: Option<&'v str>,
}

/// The transition of a condition that has the given status and a transition time.
pub(super) fn condition_transition<'v>(
    object: &'v Value,
    kind: &str,
    status: &str,
    ctx: &ParseContext,
) -> Result<Option<Transition<'v>>, Bad> {
    let Some(condition) = condition(object, kind, status)? else {
        return Ok(None);
    };
    let in_condition = |bad: Bad| bad.within(&format!("status.conditions[{kind}]"));
    let Some(time) = json_time(condition, "/lastTransitionTime", ctx).map_err(in_condition)? else {
        return Ok(None);
    };
    let reason = json_str(condition, "/reason").map_err(in_condition)?;
    Ok(Some(Transition { time, reason }))
}

/// The `metadata` fields the scheduler events need.
pub(super) struct ObjectMeta<'v> {
    pub(super) name: String,
    /// `metadata.uid`: part of the identity of the object's events.
    pub(super) uid: Option<String>,
    pub(super) namespace: Option<String>,
    /// The controlling owner's name (the Job of a Pod or a Workload), else the first owner's.
    pub(super) owner: Option<String>,
    pub(super) created: Option<DateTime<Utc>>,
    labels: Option<&'v Map<String, Value>>,
    annotations: Option<&'v Map<String, Value>>,
}

impl<'v> ObjectMeta<'v> {
    pub(super) fn read(object: &'v Value, ctx: &ParseContext) -> Result<Self, Bad> {
        let owners = json_array(object, "/metadata/ownerReferences")?;
        let controller = owners
            .iter()
            .find(|o| o.get("controller") == Some(&Value::Bool(true)));
        let owner = match controller.or(owners.first()) {
            Some(owner) => {
                json_string(owner, "/name").map_err(|bad| bad.within("metadata.ownerReferences"))?
            }
            None => None,
        };
        Ok(Self {
            name: json_string(object, "/metadata/name")?
                .ok_or_else(|| Bad::new("metadata.name", "missing"))?,
            uid: json_string(object, "/metadata/uid")?,
            namespace: json_string(object, "/metadata/namespace")?,
            owner,
            created: json_time(object, "/metadata/creationTimestamp", ctx)?,
            labels: json_map(object, "/metadata/labels")?,
            annotations: json_map(object, "/metadata/annotations")?,
        })
    }

    pub(super) fn label(&self, key: &str) -> Result<Option<String>, Bad> {
        let Some(labels) = self.labels else {
            return Ok(None);
        };
        Ok(map_str(labels, key, "metadata.labels")?.map(String::from))
    }

    fn annotation(&self, key: &str) -> Result<Option<String>, Bad> {
        let Some(annotations) = self.annotations else {
            return Ok(None);
        };
        Ok(map_str(annotations, key, "metadata.annotations")?.map(String::from))
    }

    pub(super) fn attribution(&self) -> Result<Attribution, Bad> {
        Attribution::from_labels(self.labels, "metadata.labels")
    }
}

/// GPU devices of a Pod spec (`spec` of a Pod, `template.spec` of a Kueue pod set): the sum
/// over containers, or the largest init container when that is larger (Kubernetes' rule for
/// the effective request).
pub(super) fn pod_spec_gpus(object: &Value, spec: &str) -> Result<GpuResources, Bad> {
    let mut app = GpuResources::default();
    for i in 0..json_array(object, &format!("{spec}/containers"))?.len() {
        app.add(&container_gpus(object, &format!("{spec}/containers/{i}"))?);
    }
    let mut init = GpuResources::default();
    for i in 0..json_array(object, &format!("{spec}/initContainers"))?.len() {
        init.keep_max(&container_gpus(
            object,
            &format!("{spec}/initContainers/{i}"),
        )?);
    }
    app.keep_max(&init);
    Ok(app)
}

/// Extended resources have limit = request; limits are read first, requests when absent.
fn container_gpus(object: &Value, container: &str) -> Result<GpuResources, Bad> {
    for list in ["limits", "requests"] {
        let pointer = format!("{container}/resources/{list}");
        if let Some(resources) = json_map(object, &pointer)? {
            let gpus = GpuResources::from_resource_list(resources, &field_name(&pointer))?;
            if !gpus.0.is_empty() {
                return Ok(gpus);
            }
        }
    }
    Ok(GpuResources::default())
}

/// GPU devices by resource name (`nvidia.com/gpu`, `nvidia.com/mig-1g.10gb`, …).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct GpuResources(BTreeMap<String, f64>);

/// The GPU kind and count one allocation row holds.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct GpuCount {
    pub(super) count: f64,
    pub(super) mig_profile: Option<String>,
    /// The Kubernetes resource name, to find the flavor it was granted from.
    pub(super) resource: Option<String>,
}

const WHOLE_GPU_RESOURCES: [&str; 2] = ["nvidia.com/gpu", "nvidia.com/gpu.shared"];
const MIG_RESOURCE_PREFIX: &str = "nvidia.com/mig-";

impl GpuResources {
    /// The GPU entries of a resource list; device counts are whole numbers (string or number).
    pub(super) fn from_resource_list(list: &Map<String, Value>, path: &str) -> Result<Self, Bad> {
        let mut gpus = Self::default();
        for (name, quantity) in list {
            if !(WHOLE_GPU_RESOURCES.contains(&name.as_str())
                || name.starts_with(MIG_RESOURCE_PREFIX))
            {
                continue;
            }
            let count = match quantity {
                Value::String(s) => s.trim().parse::<u64>().ok(),
                other => other.as_u64(),
            }
            .ok_or_else(|| {
                Bad::new(
                    format!("{path}.{name}"),
                    format!("{quantity} is not a whole number of devices"),
                )
            })?;
            gpus.0.insert(name.clone(), count as f64);
        }
        Ok(gpus)
    }

    pub(super) fn add(&mut self, other: &Self) {
        for (name, count) in &other.0 {
            *self.0.entry(name.clone()).or_default() += count;
        }
    }

    pub(super) fn times(mut self, factor: f64) -> Self {
        self.0.values_mut().for_each(|count| *count *= factor);
        self
    }

    fn keep_max(&mut self, other: &Self) {
        for (name, count) in &other.0 {
            let entry = self.0.entry(name.clone()).or_default();
            *entry = entry.max(*count);
        }
    }

    /// One kind of device per allocation row: asking for several kinds at once is rejected.
    pub(super) fn resolve(&self, path: &str) -> Result<GpuCount, Bad> {
        let asked: Vec<_> = self.0.iter().filter(|(_, count)| **count > 0.0).collect();
        match asked[..] {
            [] => Ok(GpuCount {
                count: 0.0,
                mig_profile: None,
                resource: None,
            }),
            [(name, count)] => Ok(GpuCount {
                count: *count,
                mig_profile: name.strip_prefix(MIG_RESOURCE_PREFIX).map(String::from),
                resource: Some(name.clone()),
            }),
            _ => {
                let names: Vec<_> = asked.iter().map(|(name, _)| name.as_str()).collect();
                Err(Bad::new(
                    path,
                    format!(
                        "asks for several GPU kinds ({}); one allocation holds one kind",
                        names.join(", ")
                    ),
                ))
            }
        }
    }
}
