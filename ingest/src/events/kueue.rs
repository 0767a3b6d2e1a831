//! Kueue: Workload objects (`kueue.x-k8s.io/v1beta1` and `v1beta2`) and the `kubectl get events`
//! table of Kueue and Job events.
//!
//! Both name the workload after its owner (the Job), as Pods do through their owner reference,
//! so Kueue and Kubernetes events of one job share `workload`. Kueue names a Workload object
//! `<owner kind>-<owner name>-<5 hex digits>` (`job-sample-job-team-a-mbd4h-1b468`); when only
//! that name is known the owner's name is read back from it.
//!
//! A Workload object gives: `queued` at creation; `admitted` and `start` when `Admitted` became
//! true (Kueue's billing interval starts there); `preempted` or `evicted` when `Evicted` became
//! true; a `stop` at the first of eviction and `Finished` after the admission (`failed` when
//! Finished's reason is `Failed`, else `finished`). GPUs are what the admission granted
//! (`podSetAssignments[].resourceUsage`), else what the pod sets ask (count × per-pod request);
//! `flavor` is the flavor the GPUs were granted from, `queue` the LocalQueue (`spec.queueName`).
//! A Workload that is evicted but still shows `Admitted` (kueue#14811) stops at the eviction.

use chrono::TimeDelta;
use serde_json::Value;

use super::kubernetes::{
    GpuCount, GpuResources, ObjectMeta, Transition, condition_transition, pod_spec_gpus,
};
use super::{
    Bad, Event, EventKind, Source, StopClass, Subject, json_array, json_map, json_string, map_str,
};
use crate::record::ParseContext;

pub(super) fn workload_events(workload: &Value, ctx: &ParseContext) -> Result<Vec<Event>, Bad> {
    let meta = ObjectMeta::read(workload, ctx)?;
    let gpus = workload_gpus(workload)?;
    let subject = Subject {
        cluster: ctx.cluster.clone(),
        namespace: meta.namespace.clone(),
        workload: Some(
            meta.owner
                .clone()
                .unwrap_or_else(|| owner_of_workload(&meta.name).to_string()),
        ),
        gpus: Some(gpus.count),
        flavor: granted_flavor(workload, gpus.resource.as_deref())?,
        mig_profile: gpus.mig_profile,
        queue: json_string(workload, "/spec/queueName")?,
        priority: priority(workload)?,
        labels: meta.attribution()?,
        ..Subject::default()
    };
    let event = |ts, kind| Event::new(Source::Kueue, &subject, ts, kind).of(&meta.uid);
    let mut events = Vec::new();
    if let Some(created) = meta.created {
        events.push(event(created, EventKind::Queued));
    }
    let admitted = condition_transition(workload, "Admitted", "True", ctx)?.map(|t| t.time);
    if let Some(time) = admitted {
        events.push(event(time, EventKind::Admitted));
        events.push(event(time, EventKind::Start));
    }
    let mut ends = Vec::new();
    if let Some(Transition { time, reason }) =
        condition_transition(workload, "Evicted", "True", ctx)?
    {
        let (kind, class, detail) = if reason == Some("Preempted") {
            // The Preempted condition says why (InClusterQueue, InCohortReclamation, …).
            let why =
                condition_transition(workload, "Preempted", "True", ctx)?.and_then(|t| t.reason);
            (EventKind::Preempted, StopClass::Preempted, why.or(reason))
        } else {
            (EventKind::Evicted, StopClass::Evicted, reason)
        };
        let mut evicted = event(time, kind);
        evicted.reason = detail.map(String::from);
        events.push(evicted);
        ends.push((time, class.reason(detail)));
    }
    if let Some(Transition { time, reason }) =
        condition_transition(workload, "Finished", "True", ctx)?
    {
        let class = if reason == Some("Failed") {
            StopClass::Failed
        } else {
            StopClass::Finished
        };
        ends.push((time, class.reason(None)));
    }
    if let Some(start) = admitted
        && let Some((stop, reason)) = ends.into_iter().filter(|(t, _)| *t >= start).min()
    {
        events.push(event(stop, EventKind::Stop).because(reason));
    }
    Ok(events)
}

fn workload_gpus(workload: &Value) -> Result<GpuCount, Bad> {
    let mut total = GpuResources::default();
    let assignments = json_array(workload, "/status/admission/podSetAssignments")?;
    if !assignments.is_empty() {
        for i in 0..assignments.len() {
            let pointer = format!("/status/admission/podSetAssignments/{i}/resourceUsage");
            if let Some(usage) = json_map(workload, &pointer)? {
                let path = format!("status.admission.podSetAssignments[{i}].resourceUsage");
                total.add(&GpuResources::from_resource_list(usage, &path)?);
            }
        }
        return total.resolve("status.admission.podSetAssignments");
    }
    for (i, pod_set) in json_array(workload, "/spec/podSets")?.iter().enumerate() {
        let count = pod_set.get("count").and_then(Value::as_u64).unwrap_or(1);
        let per_pod = pod_spec_gpus(workload, &format!("/spec/podSets/{i}/template/spec"))?;
        total.add(&per_pod.times(count as f64));
    }
    total.resolve("spec.podSets")
}

/// The flavor the GPUs were granted from; for a workload without GPUs, its first flavor.
fn granted_flavor(workload: &Value, gpu_resource: Option<&str>) -> Result<Option<String>, Bad> {
    let assignments = json_array(workload, "/status/admission/podSetAssignments")?;
    let mut first = None;
    for i in 0..assignments.len() {
        let pointer = format!("/status/admission/podSetAssignments/{i}/flavors");
        let Some(flavors) = json_map(workload, &pointer)? else {
            continue;
        };
        if let Some(resource) = gpu_resource {
            let path = format!("status.admission.podSetAssignments[{i}].flavors");
            if let Some(flavor) = map_str(flavors, resource, &path)? {
                return Ok(Some(flavor.to_string()));
            }
        }
        first = first.or_else(|| flavors.values().find_map(Value::as_str).map(String::from));
    }
    Ok(first.filter(|_| gpu_resource.is_none()))
}

/// `priorityClassName` (v1beta1), `priorityClassRef.name` (v1beta2), else the number.
fn priority(workload: &Value) -> Result<Option<String>, Bad> {
    if let Some(class) = json_string(workload, "/spec/priorityClassName")? {
        return Ok(Some(class));
    }
    if let Some(class) = json_string(workload, "/spec/priorityClassRef/name")? {
        return Ok(Some(class));
    }
    Ok(workload
        .pointer("/spec/priority")
        .and_then(Value::as_i64)
        .map(|p| p.to_string()))
}

/// The owner's name inside a Kueue Workload name, or the name itself when it does not follow
/// Kueue's `<kind>-<owner>-<5 lower-case hex digits>` pattern.
fn owner_of_workload(name: &str) -> &str {
    let Some((_, rest)) = name.split_once('-') else {
        return name;
    };
    match rest.rsplit_once('-') {
        Some((owner, hash))
            if !owner.is_empty()
                && hash.len() == 5
                && hash
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) =>
        {
            owner
        }
        _ => name,
    }
}

/// The text table `kubectl get events` prints (`[NAMESPACE] LAST SEEN TYPE REASON OBJECT
/// MESSAGE`), or the same rows saved without header or age, as in the conformance evidence.
///
/// Event time = `ctx.at` − LAST SEEN (kubectl rounds ages, to the second under a few minutes,
/// coarser later). Without a LAST SEEN column the time is unknown and every event is stamped
/// `ctx.at`: the order is kept but intervals are empty, so such a table tells who was queued,
/// admitted and finished, not for how long.
///
/// Reasons and what they give (others, and every event of a `pod/…` object — container
/// lifecycle, not allocation — are skipped):
/// - Workload events: `Pending` → `queued` (the message as reason), `Admitted` → `admitted`,
///   `Preempted` → `preempted`, `Evicted` → `evicted` (message as reason). `QuotaReserved` is
///   skipped: it precedes `Admitted` for every workload and would count each admission twice.
/// - Job events from Kueue: `Started` → `start` (Kueue unsuspended the job), `Stopped` →
///   `stop` with `preempted: <message>` or `evicted: <message>`, `FinishedWorkload` → `stop`
///   `finished` (the message does not say whether the job failed). The Job controller's own
///   `Resumed`, `Suspended` and `Completed` repeat those and are skipped.
pub(super) struct EventsTable {
    pub(super) has_header: bool,
    /// Columns before TYPE as the header names them; `None` without a header (inferred per row).
    leading: Option<LeadingColumns>,
}

#[derive(Debug, Clone, Copy)]
struct LeadingColumns {
    namespace: bool,
    last_seen: bool,
}

impl EventsTable {
    /// Recognises the table by its first line, a header or a row; `None` when it is neither,
    /// an error for a layout this reader does not handle.
    pub(super) fn from_first_line(line: &str) -> Option<Result<Self, String>> {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        let is_header = matches!(tokens.first(), Some(&("LAST" | "NAMESPACE" | "TYPE")))
            && tokens.contains(&"REASON")
            && tokens.contains(&"OBJECT");
        if is_header {
            if tokens.contains(&"SUBOBJECT") {
                let reason = "`kubectl get events -o wide` is not supported: save the default \
                              columns (LAST SEEN, TYPE, REASON, OBJECT, MESSAGE)";
                return Some(Err(reason.to_string()));
            }
            let leading = LeadingColumns {
                namespace: tokens.contains(&"NAMESPACE"),
                last_seen: tokens.windows(2).any(|w| w == ["LAST", "SEEN"]),
            };
            return Some(Ok(Self {
                has_header: true,
                leading: Some(leading),
            }));
        }
        // A header-less `|`-separated line is sacct output, even with a `Normal` job name.
        let is_row = !line.contains('|') && leading_tokens(&tokenize(line)).is_some();
        is_row.then_some(Ok(Self {
            has_header: false,
            leading: None,
        }))
    }

    pub(super) fn row(&self, line: &str, ctx: &ParseContext) -> Result<Vec<Event>, Bad> {
        let tokens = tokenize(line);
        let (leading, type_at) = leading_tokens(&tokens)
            .ok_or_else(|| Bad::new("TYPE", "expected Normal or Warning in the TYPE column"))?;
        let (namespace, age) = self.namespace_and_age(&leading)?;
        let (Some((_, reason)), Some((_, object))) =
            (tokens.get(type_at + 1), tokens.get(type_at + 2))
        else {
            return Err(Bad::new(
                "OBJECT",
                "the row ends before its REASON and OBJECT columns",
            ));
        };
        let message = tokens
            .get(type_at + 3)
            .map(|(at, _)| line[*at..].trim_end())
            .unwrap_or_default();
        let (object_kind, name) = match object.split_once('/') {
            Some((kind, name)) => (Some(kind.to_ascii_lowercase()), name),
            None => (None, *object),
        };
        if object_kind.as_deref() == Some("pod") {
            return Ok(Vec::new());
        }
        let on_workload_object = matches!(object_kind.as_deref(), Some("workload"))
            || (object_kind.is_none()
                && matches!(*reason, "Pending" | "Admitted" | "Preempted" | "Evicted"));
        let (kind, reason) = match *reason {
            "Pending" => (EventKind::Queued, Some(message.to_string())),
            "Admitted" => (EventKind::Admitted, None),
            "Preempted" => (EventKind::Preempted, Some(message.to_string())),
            "Evicted" => (EventKind::Evicted, Some(message.to_string())),
            "Started" => (EventKind::Start, None),
            "Stopped" => {
                let class = if message.starts_with("Preempted") {
                    StopClass::Preempted
                } else {
                    StopClass::Evicted
                };
                (EventKind::Stop, Some(class.reason(Some(message))))
            }
            "FinishedWorkload" => (EventKind::Stop, Some(StopClass::Finished.reason(None))),
            _ => return Ok(Vec::new()),
        };
        let workload = if on_workload_object {
            owner_of_workload(name)
        } else {
            name
        };
        let subject = Subject {
            cluster: ctx.cluster.clone(),
            namespace: namespace.map(String::from),
            workload: Some(workload.to_string()),
            ..Subject::default()
        };
        let at =
            crate::time::before(ctx.at, age).map_err(|reason| Bad::new("LAST SEEN", reason))?;
        let mut event = Event::new(Source::Kueue, &subject, at, kind);
        event.reason = reason.filter(|r| !r.is_empty());
        Ok(vec![event])
    }

    fn namespace_and_age<'l>(
        &self,
        leading: &[&'l str],
    ) -> Result<(Option<&'l str>, TimeDelta), Bad> {
        let in_range = |seconds| {
            crate::time::duration(seconds).map_err(|reason| Bad::new("LAST SEEN", reason))
        };
        let age = |text: &str| match age_seconds(text) {
            Some(seconds) => in_range(seconds),
            None => Err(Bad::new(
                "LAST SEEN",
                format!("'{text}' is not an age like 33s, 2m10s or 3d4h"),
            )),
        };
        let unexpected = || Bad::new("TYPE", "expected Normal or Warning in the TYPE column");
        match (self.leading, leading) {
            (None, []) => Ok((None, TimeDelta::zero())),
            (None, [one]) => match age_seconds(one) {
                Some(seconds) => Ok((None, in_range(seconds)?)),
                None => Ok((Some(*one), TimeDelta::zero())),
            },
            (None, [namespace, last_seen]) => Ok((Some(*namespace), age(last_seen)?)),
            (None, _) => Err(unexpected()),
            (Some(columns), _) => {
                if leading.len() != usize::from(columns.namespace) + usize::from(columns.last_seen)
                {
                    return Err(unexpected());
                }
                let namespace = columns.namespace.then(|| leading[0]);
                let age = match columns.last_seen {
                    true => age(leading[leading.len() - 1])?,
                    false => TimeDelta::zero(),
                };
                Ok((namespace, age))
            }
        }
    }
}

/// Whitespace-separated tokens with their byte offsets (the message keeps its own spacing).
fn tokenize(line: &str) -> Vec<(usize, &str)> {
    let mut tokens = Vec::new();
    let mut start = None;
    for (at, c) in line.char_indices().chain([(line.len(), ' ')]) {
        match (c.is_whitespace(), start) {
            (false, None) => start = Some(at),
            (true, Some(from)) => {
                tokens.push((from, &line[from..at]));
                start = None;
            }
            _ => {}
        }
    }
    tokens
}

/// The tokens before the TYPE column and the TYPE token's index, leaving out the repeat note
/// `(x3 over 10m)` that `kubectl events` adds to LAST SEEN.
fn leading_tokens<'l>(tokens: &[(usize, &'l str)]) -> Option<(Vec<&'l str>, usize)> {
    let type_at = tokens
        .iter()
        .take(8)
        .position(|(_, t)| matches!(*t, "Normal" | "Warning"))?;
    let mut in_note = false;
    let leading = tokens[..type_at]
        .iter()
        .map(|(_, t)| *t)
        .filter(|t| {
            let skip = in_note || t.starts_with("(x");
            in_note = skip && !t.ends_with(')');
            !skip
        })
        .collect();
    Some((leading, type_at))
}

/// kubectl's age column in seconds: `33s`, `2m10s`, `5h`, `3d4h`, `2y10d`; `None` for text of
/// another shape. Past 64 bits it saturates, for [`crate::time::duration`] to refuse.
fn age_seconds(text: &str) -> Option<u64> {
    let mut seconds: u64 = 0;
    let mut number: Option<u64> = None;
    for c in text.chars() {
        if let Some(digit) = c.to_digit(10) {
            let number = number.get_or_insert(0);
            *number = number.saturating_mul(10).saturating_add(u64::from(digit));
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3_600,
            'd' => 86_400,
            'y' => 365 * 86_400,
            _ => return None,
        };
        seconds = seconds.saturating_add(number.take()?.saturating_mul(unit));
    }
    (number.is_none() && !text.is_empty()).then_some(seconds)
}
