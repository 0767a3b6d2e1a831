use super::*;

const H: Micros = MICROS_PER_HOUR;

fn event<'a>(hours: f64, kind: &'a str, workload: &'a str, pod: &'a str) -> Event<'a> {
    Event {
        ts: (hours * H as f64) as Micros,
        kind,
        namespace: Some("ml"),
        workload: Some(workload),
        pod: Some(pod),
        ..Event::default()
    }
}

fn progress<'a>(hours: f64, workload: &'a str, pod: &'a str, samples: i64) -> Event<'a> {
    Event {
        samples: Some(samples),
        tokens: Some(samples * 1_000),
        ..event(hours, "progress", workload, pod)
    }
}

fn start<'a>(hours: f64, workload: &'a str, pod: &'a str, gpus: f64) -> Event<'a> {
    Event {
        gpus: Some(gpus),
        team: Some("vision"),
        ..event(hours, "start", workload, pod)
    }
}

fn stop<'a>(hours: f64, workload: &'a str, pod: &'a str, reason: &'a str) -> Event<'a> {
    Event {
        reason: Some(reason),
        ..event(hours, "stop", workload, pod)
    }
}

fn key(workload: &str) -> WorkloadKey {
    (Some("ml".to_string()), workload.to_string())
}

/// `pretrain` on 2 GPUs: a run that checkpoints at 2 h and fails at 3.5 h (1.5 h × 2 GPUs lost),
/// then a run from 4 h to 8 h that finishes. 15 GPU-hours at 2.00 = 30.00.
fn pretrain() -> Vec<Event<'static>> {
    vec![
        start(0.0, "pretrain", "p-0", 2.0),
        progress(2.0, "pretrain", "p-0", 1_000),
        event(2.0, "checkpoint", "pretrain", "p-0"),
        progress(3.0, "pretrain", "p-0", 1_500),
        stop(3.5, "pretrain", "p-0", "failed"),
        start(4.0, "pretrain", "p-1", 2.0),
        progress(6.0, "pretrain", "p-1", 2_000),
        event(6.0, "checkpoint", "pretrain", "p-1"),
        stop(8.0, "pretrain", "p-1", "finished"),
    ]
}

fn costs(entries: &[(&str, f64, f64)]) -> HashMap<WorkloadKey, (String, WorkloadCost)> {
    entries
        .iter()
        .map(|&(workload, cost, gpu_hours)| {
            (
                key(workload),
                ("vision".to_string(), WorkloadCost { cost, gpu_hours }),
            )
        })
        .collect()
}

#[test]
fn a_failure_loses_the_time_after_the_last_checkpoint() {
    let mut runs = TrainingRuns::default();
    for event in &pretrain() {
        runs.add(event);
    }
    let rows = runs.finish(&costs(&[("pretrain", 30.0, 15.0)]));
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row.team.as_deref(), Some("vision"));
    assert_eq!(
        (row.runs, row.succeeded, row.failed, row.preempted),
        (2, 1, 1, 0)
    );
    assert_eq!(row.success_rate, Some(0.5));
    assert_eq!(row.effective_gpu_hours, 12.0);
    // 1.5 h × 2 GPUs × 2.00 per GPU-hour.
    assert_eq!(row.failure_loss, Some(6.0));
    assert_eq!(row.recompute_cost, Some(0.0));
    // The failed run keeps the 1,000 samples of its checkpoint, not the 1,500 after it.
    assert_eq!((row.samples, row.tokens), (3_000, 3_000_000));
    assert_eq!(row.cost_per_1m_samples, Some(10_000.0));
    assert_eq!(row.cost_per_1b_tokens, Some(10_000.0));
}

#[test]
fn a_preemption_is_recompute_cost_and_a_run_without_checkpoint_loses_everything() {
    let mut runs = TrainingRuns::default();
    for e in [
        start(0.0, "finetune", "f-0", 1.0),
        event(1.0, "checkpoint", "finetune", "f-0"),
        event(1.5, "preempted", "finetune", "f-0"),
        start(2.0, "finetune", "f-1", 1.0),
        event(2.25, "evicted", "finetune", "f-1"),
        start(3.0, "finetune", "f-2", 1.0),
    ] {
        runs.add(&e);
    }
    let rows = runs.finish(&costs(&[("finetune", 12.0, 4.0)]));
    let row = &rows[0];
    assert_eq!(
        (row.runs, row.succeeded, row.failed, row.preempted),
        (3, 0, 0, 2)
    );
    assert_eq!(row.success_rate, Some(0.0));
    // 0.5 h after the checkpoint + 0.25 h of a run that never checkpointed, at 3.00.
    assert_eq!(row.effective_gpu_hours, 3.25);
    assert_eq!(row.recompute_cost, Some(2.25));
    assert_eq!(row.failure_loss, Some(0.0));
    assert_eq!((row.samples, row.cost_per_1m_samples), (0, None));
}

#[test]
fn only_training_workloads_get_a_row_and_unknown_cost_has_no_price() {
    let mut runs = TrainingRuns::default();
    let serve = Event {
        workload_type: Some("inference"),
        ..start(0.0, "serve", "s-0", 1.0)
    };
    let sweep = Event {
        workload_type: Some("training"),
        ..start(0.0, "sweep", "w-0", 1.0)
    };
    for e in [serve, stop(1.0, "serve", "s-0", "failed"), sweep] {
        runs.add(&e);
    }
    let rows = runs.finish(&HashMap::new());
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].workload, "sweep");
    assert_eq!(rows[0].team.as_deref(), Some("vision"));
    assert_eq!((rows[0].runs, rows[0].success_rate), (1, None));
    assert_eq!((rows[0].cost, rows[0].failure_loss), (0.0, None));
}

/// Workloads are keyed by namespace and name: one name in two namespaces (and in none) is three
/// workloads, each with its own pods' runs, and they come out in key order (no namespace
/// first) whatever order they were first seen in.
#[test]
fn one_name_in_several_namespaces_is_several_workloads_in_key_order() {
    let in_namespace =
        |namespace: Option<&'static str>, e: Event<'static>| Event { namespace, ..e };
    let mut runs = TrainingRuns::default();
    for (namespace, gpus) in [(Some("vision"), 3.0), (None, 1.0), (Some("audio"), 2.0)] {
        runs.add(&in_namespace(namespace, start(0.0, "train", "t-0", gpus)));
    }
    for (namespace, reason) in [
        (Some("audio"), "finished"),
        (None, "failed"),
        (Some("vision"), "oom"),
    ] {
        runs.add(&in_namespace(namespace, progress(0.5, "train", "t-0", 10)));
        runs.add(&in_namespace(namespace, stop(1.0, "train", "t-0", reason)));
    }
    let rows = runs.finish(&HashMap::new());
    let seen: Vec<_> = rows
        .iter()
        .map(|r| (r.namespace.as_deref(), r.succeeded, r.failed))
        .collect();
    assert_eq!(
        seen,
        [(None, 0, 1), (Some("audio"), 1, 0), (Some("vision"), 0, 1)]
    );
    // The runs in the same order, each with its own GPUs: 1 h lost × 1 and × 3 GPUs.
    let lost: Vec<f64> = runs
        .training_runs()
        .map(|(_, r)| r.lost_gpu_hours())
        .collect();
    assert_eq!(lost, [1.0, 0.0, 3.0]);
}
