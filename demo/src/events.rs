//! The plan's scheduler events as canonical JSON lines (`gpuledger ingest events`): queued,
//! admitted, start, checkpoint and progress, stop / preempted, and the node fault.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};

use crate::scenario::{CLUSTER, Labels, MIG_LAYOUT, Outcome, Run, Scenario};

/// Sequence length of the language models' training samples.
const TOKENS_PER_SAMPLE: u64 = 4_096;

/// Every event of the plan, one JSON object per line, in time order.
pub fn events_jsonl(scenario: &Scenario) -> Vec<u8> {
    let start = scenario.spec.start_time();
    let mut events: Vec<(i64, Value)> = Vec::new();
    for run in &scenario.runs {
        run_events(scenario, run, &mut events);
    }
    for fault in &scenario.faults {
        let node = &scenario.nodes[fault.node];
        events.push((
            fault.down,
            json!({"event": "node_down", "cluster": CLUSTER, "node": node.name,
                   "reason": "XID 79: GPU has fallen off the bus"}),
        ));
        if fault.up < scenario.window_seconds() {
            events.push((
                fault.up,
                json!({"event": "node_up", "cluster": CLUSTER, "node": node.name, "gpus": node.gpus,
                       "gpu_model": node.model().name}),
            ));
        }
    }
    events.sort_by_key(|(t, _)| *t);
    let mut text = Vec::new();
    for (t, mut event) in events {
        event
            .as_object_mut()
            .expect("events are objects")
            .insert("ts".into(), Value::String(timestamp(start, t)));
        serde_json::to_writer(&mut text, &event).expect("serialisable");
        text.push(b'\n');
    }
    text
}

/// RFC 3339 in UTC for `t` seconds after `start`.
pub fn timestamp(start: DateTime<Utc>, t: i64) -> String {
    (start + chrono::Duration::seconds(t)).to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn labels_json(labels: &Labels) -> Value {
    let pairs = [
        ("team", labels.team),
        ("environment", labels.environment),
        ("workload_type", labels.workload_type),
        ("model", labels.model),
        ("cost_center", labels.cost_center),
    ];
    Value::Object(
        pairs
            .into_iter()
            .filter_map(|(k, v)| Some((k.to_string(), Value::String(v?.to_string()))))
            .collect::<Map<_, _>>(),
    )
}

fn run_events(scenario: &Scenario, run: &Run, events: &mut Vec<(i64, Value)>) {
    let node = &scenario.nodes[run.node];
    let labels = labels_json(&run.labels);
    let queue = format!("{}-queue", run.namespace);
    let gang = json!({"cluster": CLUSTER, "namespace": run.namespace, "workload": run.workload,
                      "queue": queue, "labels": labels});
    let with = |event: &str, extra: Value| {
        let mut value = gang.clone();
        let object = value.as_object_mut().expect("object");
        object.insert("event".into(), Value::String(event.into()));
        if let Value::Object(extra) = extra {
            object.extend(extra);
        }
        value
    };
    let gpus = run.gpus.len();
    if let (Some(queued), Some(admitted)) = (run.queued, run.admitted) {
        events.push((queued, with("queued", json!({"gpus": gpus}))));
        events.push((
            admitted,
            with(
                "admitted",
                json!({"gpus": gpus, "flavor": node.role.group()}),
            ),
        ));
    }
    let placed = json!({"node": node.name, "pod": run.pod});
    let mut start = with("start", placed.clone());
    let object = start.as_object_mut().expect("object");
    object.insert("gpus".into(), json!(gpus));
    object.insert("gpu_indices".into(), json!(run.gpus));
    object.insert("gpu_model".into(), json!(node.model().name));
    if let Some(i) = run.mig {
        object.insert("mig_profile".into(), json!(MIG_LAYOUT[i].0));
    }
    object.insert(
        "priority".into(),
        json!(if run.queued.is_some() {
            "batch"
        } else {
            "online"
        }),
    );
    events.push((run.start, start));
    // Training reports its cumulative work at each checkpoint, and once more when it finishes.
    let progress = |t: i64| {
        let samples = (run.samples_per_gpu_second * gpus as f64 * (t - run.start) as f64) as u64;
        let mut progress = with("progress", placed.clone());
        progress["samples"] = json!(samples);
        if run
            .labels
            .model
            .is_some_and(|m| m.starts_with("llama") || m.starts_with("mistral"))
        {
            progress["tokens"] = json!(samples * TOKENS_PER_SAMPLE);
        }
        (t, progress)
    };
    for &checkpoint in &run.checkpoints {
        events.push((checkpoint, with("checkpoint", placed.clone())));
        events.push(progress(checkpoint));
    }
    match run.outcome {
        Outcome::Finished => {
            if run.samples_per_gpu_second > 0.0 {
                events.push(progress(run.end));
            }
            let mut stop = with("stop", placed);
            stop["reason"] = json!("finished");
            events.push((run.end, stop));
        }
        Outcome::Failed(reason) => {
            let mut stop = with("stop", placed);
            stop["reason"] = json!(reason);
            events.push((run.end, stop));
        }
        Outcome::Preempted => {
            let mut preempted = with("preempted", placed);
            preempted["reason"] = json!("spot capacity reclaimed");
            events.push((run.end, preempted));
        }
        Outcome::Running => {}
    }
}

#[cfg(test)]
mod tests;
