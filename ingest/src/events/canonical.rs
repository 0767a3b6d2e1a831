//! Canonical JSON lines: one event per line, in the table's own terms.
//!
//! `{"ts": "2025-03-02T10:00:00Z", "event": "start", "cluster": …, "node": …, "namespace": …,
//! "workload": …, "pod": …, "gpus": 1, "gpu_indices": [0], "gpu_uuids": ["GPU-…"],
//! "gpu_model": …, "mig_profile": "1g.10gb", "gpu_fraction": 0.25, "queue": …, "flavor": …,
//! "priority": …, "reason": …, "samples": …, "tokens": …, "labels": {"team": …, …}}`.
//! Only `ts` and `event` are required; `cluster` defaults to the context's. A `ts` without an
//! offset is local time in the context's time zone. Keys the schema does not know are ignored.

use serde_json::Value;

use super::{
    Attribution, Bad, Event, EventKind, Source, Subject, json_array, json_map, json_str,
    json_string, json_time, normalize_stop_reason,
};
use crate::record::ParseContext;

pub(super) fn events(record: &Value, ctx: &ParseContext) -> Result<Vec<Event>, Bad> {
    if !record.is_object() {
        return Err(Bad::new("json", "expected a JSON object per line"));
    }
    let name = json_str(record, "/event")?.ok_or_else(|| Bad::new("event", "missing"))?;
    let kind = EventKind::parse(name).ok_or_else(|| {
        let allowed: Vec<_> = EventKind::ALL.iter().map(|k| k.as_str()).collect();
        Bad::new(
            "event",
            format!(
                "unknown event '{name}': expected one of {}",
                allowed.join(", ")
            ),
        )
    })?;
    let ts = json_time(record, "/ts", ctx)?.ok_or_else(|| Bad::new("ts", "missing"))?;
    let gpu_fraction = number(record, "gpu_fraction")?;
    if let Some(fraction) = gpu_fraction
        && !(fraction > 0.0 && fraction <= 1.0)
    {
        return Err(Bad::new(
            "gpu_fraction",
            format!("{fraction} is not a share of one GPU in (0, 1]"),
        ));
    }
    let subject = Subject {
        cluster: json_string(record, "/cluster")?.or_else(|| ctx.cluster.clone()),
        node: json_string(record, "/node")?,
        namespace: json_string(record, "/namespace")?,
        workload: json_string(record, "/workload")?,
        pod: json_string(record, "/pod")?,
        gpus: number(record, "gpus")?,
        gpu_indices: gpu_indices(record)?,
        gpu_uuids: gpu_uuids(record)?,
        gpu_model: json_string(record, "/gpu_model")?,
        mig_profile: json_string(record, "/mig_profile")?,
        gpu_fraction,
        queue: json_string(record, "/queue")?,
        flavor: json_string(record, "/flavor")?,
        priority: priority(record)?,
        samples: count(record, "samples")?,
        tokens: count(record, "tokens")?,
        labels: Attribution::from_labels(json_map(record, "/labels")?, "labels")?,
    };
    let mut event = Event::new(Source::Canonical, &subject, ts, kind);
    event.reason = json_string(record, "/reason")?.map(|reason| match kind {
        EventKind::Stop => normalize_stop_reason(&reason),
        _ => reason,
    });
    Ok(vec![event])
}

/// A non-negative number.
fn number(record: &Value, key: &str) -> Result<Option<f64>, Bad> {
    match record.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(x) if x >= 0.0 => Ok(Some(x)),
            _ => Err(Bad::new(key, format!("{n} is negative"))),
        },
        Some(other) => Err(Bad::new(key, format!("expected a number, found {other}"))),
    }
}

/// A non-negative whole count (samples, tokens).
fn count(record: &Value, key: &str) -> Result<Option<i64>, Bad> {
    match record.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(x) if x >= 0 => Ok(Some(x)),
            _ => Err(Bad::new(
                key,
                format!("{n} is not a non-negative whole number"),
            )),
        },
        Some(other) => Err(Bad::new(
            key,
            format!("expected a whole number, found {other}"),
        )),
    }
}

/// Priority is a class name in Kubernetes and a number in some schedulers: kept as text.
fn priority(record: &Value) -> Result<Option<String>, Bad> {
    match record.get("priority") {
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        _ => json_string(record, "/priority"),
    }
}

fn gpu_indices(record: &Value) -> Result<Option<Vec<i32>>, Bad> {
    if record.get("gpu_indices").is_none_or(Value::is_null) {
        return Ok(None);
    }
    json_array(record, "/gpu_indices")?
        .iter()
        .map(|index| {
            index
                .as_u64()
                .and_then(|i| i32::try_from(i).ok())
                .ok_or_else(|| Bad::new("gpu_indices", format!("{index} is not a GPU index")))
        })
        .collect::<Result<_, _>>()
        .map(Some)
}

fn gpu_uuids(record: &Value) -> Result<Option<Vec<String>>, Bad> {
    if record.get("gpu_uuids").is_none_or(Value::is_null) {
        return Ok(None);
    }
    json_array(record, "/gpu_uuids")?
        .iter()
        .map(|uuid| {
            uuid.as_str()
                .map(String::from)
                .ok_or_else(|| Bad::new("gpu_uuids", format!("{uuid} is not a GPU UUID string")))
        })
        .collect::<Result<_, _>>()
        .map(Some)
}
