//! The worked example of `build/tests.rs` (one day, every bucket filled), split charge by
//! charge; the expected figures are worked out by hand below and cross-checked against the
//! journal the build wrote.

use super::*;
use crate::build::build;
use crate::build::tests::worked_example;
use crate::time::MICROS_PER_HOUR as H;

fn m(text: &str) -> Money {
    text.parse().unwrap()
}

/// (team, bucket) → amount of one charge's parts.
fn by_team(amount: Money, parts: &[ChargePart]) -> BTreeMap<(Option<String>, String), Money> {
    let mut sums = BTreeMap::new();
    for (part, money) in parts.iter().zip(split_amount(amount, parts)) {
        *sums
            .entry((part.team.clone(), part.bucket.clone()))
            .or_insert(Money::ZERO) += money;
    }
    sums
}

fn key(team: Option<&str>, bucket: &str) -> (Option<String>, String) {
    (team.map(str::to_string), bucket.to_string())
}

#[test]
fn a_node_line_follows_its_gpu_hours_and_its_overhead_the_default_rule() {
    let inputs = worked_example();
    let out = build(&inputs);
    let splitter = ChargeSplitter::new(&inputs.nodes, &out.gpu_hours, &inputs.usage, &inputs.rules);
    let compute = &inputs.billing[0];
    let parts = splitter.split(compute, |_| true).unwrap();
    let weights: f64 = parts.iter().map(|p| p.weight).sum();
    assert!((weights - 1.0).abs() < 1e-12, "{weights}");
    let sums = by_team(compute.effective_cost, &parts);
    // 96.00 × 0.8 = 76.80 over 2 GPUs × 24 h = 1.60 per GPU-hour; 19.20 of overhead is spread
    // by the default rule over direct cost (vision 9.60, nlp 19.20, unattributed 1.20 on n2):
    // × 0.32 / 0.64 / 0.04 = 6.144 / 12.288 / 0.768.
    for (team, bucket, want) in [
        (Some("vision"), "direct", "6.4"),         // 4 h busy
        (Some("vision"), "allocated_idle", "3.2"), // 2 h idle
        (Some("nlp"), "direct", "19.2"),           // 12 h
        (None, "reserved:warm_pool", "9.6"),       // 6 h on GPU 1
        (None, "unexplained", "32"),               // 20 h
        (None, "fault", "6.4"),                    // 2 GPUs × 2 h down
        (Some("vision"), "shared", "6.144"),
        (Some("nlp"), "shared", "12.288"),
        (Some("unattributed"), "shared", "0.768"),
    ] {
        let got = sums[&key(team, bucket)];
        assert!(
            (got - m(want)).abs() <= m("0.000000001"),
            "{team:?} {bucket}: {got} != {want}"
        );
    }
    assert_eq!(sums.len(), 9);
    assert_eq!(sums.values().copied().sum::<Money>(), m("96"));
    // The GPU-hours behind the parts: 2 GPUs × 24 h.
    let hours: f64 = parts.iter().map(|p| p.gpu_hours).sum();
    assert!((hours - 48.0).abs() < 1e-9, "{hours}");
    // Workloads are named on the team's GPU parts only.
    assert!(
        parts
            .iter()
            .all(|p| p.workload.is_some() == (p.team.is_some() && p.bucket != "shared"))
    );
    let vision = parts
        .iter()
        .find(|p| p.bucket == "direct" && p.team.as_deref() == Some("vision"))
        .unwrap();
    assert_eq!(
        (vision.namespace.as_deref(), vision.workload.as_deref()),
        (Some("ml"), Some("train"))
    );
}

#[test]
fn every_charge_adds_back_and_the_charges_add_to_the_journals_billed_lines() {
    let inputs = worked_example();
    let out = build(&inputs);
    let splitter = ChargeSplitter::new(&inputs.nodes, &out.gpu_hours, &inputs.usage, &inputs.rules);
    let mut split: BTreeMap<(Option<String>, String), Money> = BTreeMap::new();
    for line in &inputs.billing {
        let parts = splitter.split(line, |_| true).unwrap();
        let sums = by_team(line.effective_cost, &parts);
        assert_eq!(sums.values().copied().sum::<Money>(), line.effective_cost);
        for (k, v) in sums {
            *split.entry(k).or_insert(Money::ZERO) += v;
        }
    }
    // Networking 9.00 goes evenly to the three teams by its rule; storage 6.00 by the default.
    assert!((split[&key(Some("unattributed"), "shared")] - m("4.008")).abs() <= m("0.000000001"));
    // What the journal holds from billing, line by line of (team, bucket), to the cent and
    // closer: the charges are the same money, split the same way.
    let mut journal: BTreeMap<(Option<String>, String), Money> = BTreeMap::new();
    for entry in out.cost_entries.iter().filter(|e| e.source == "billing") {
        *journal
            .entry((entry.team.clone(), entry.bucket.clone()))
            .or_insert(Money::ZERO) += entry.amount;
    }
    // The journal's shared lines also hold the manual licence cost (4.80, vision and nlp 1:1):
    // not a billed charge.
    for team in ["vision", "nlp"] {
        let manual: Money = out
            .cost_entries
            .iter()
            .filter(|e| e.source == "manual" && e.team.as_deref() == Some(team))
            .map(|e| e.amount)
            .sum();
        assert_eq!(manual, m("2.4"));
    }
    assert_eq!(
        split.keys().collect::<Vec<_>>(),
        journal.keys().collect::<Vec<_>>()
    );
    for (k, want) in &journal {
        assert!(
            (split[k] - *want).abs() <= m("0.000000001"),
            "{k:?}: {} != {want}",
            split[k]
        );
    }
}

#[test]
fn a_charge_on_a_day_the_ledger_has_not_costed_is_refused() {
    let inputs = worked_example();
    let out = build(&inputs);
    let splitter = ChargeSplitter::new(&inputs.nodes, &out.gpu_hours, &inputs.usage, &inputs.rules);
    assert_eq!(
        splitter.split(&inputs.billing[1], |day| day != 0),
        Err(NotBuilt { day: 0 })
    );
    // A node's line for a day without rows (the day is said to be built, the rows are not there).
    let mut late = inputs.billing[0].clone();
    late.charge_period = Span::new(48 * H, 72 * H);
    assert_eq!(
        splitter.split(&late, |_| true),
        Err(NotBuilt { day: 48 * H })
    );
}

#[test]
fn a_line_covering_part_of_an_hour_weighs_only_that_part() {
    let inputs = worked_example();
    let out = build(&inputs);
    let splitter = ChargeSplitter::new(&inputs.nodes, &out.gpu_hours, &inputs.usage, &inputs.rules);
    // 10.00 for n1 from 03:30 to 04:30: half of hour 3 (vision busy on GPU 0, nlp busy on GPU 1)
    // and half of hour 4 (vision idle, nlp busy): 8.00 of GPU time in four equal quarters.
    let mut line = inputs.billing[0].clone();
    line.charge_period = Span::new(3 * H + H / 2, 4 * H + H / 2);
    line.effective_cost = m("10");
    let parts = splitter.split(&line, |_| true).unwrap();
    let sums = by_team(line.effective_cost, &parts);
    for (team, bucket, want) in [
        ("vision", "direct", "2"),
        ("vision", "allocated_idle", "2"),
        ("nlp", "direct", "4"),
    ] {
        let got = sums[&key(Some(team), bucket)];
        assert!(
            (got - m(want)).abs() <= m("0.000000001"),
            "{team} {bucket}: {got}"
        );
    }
    let gpu_hours: f64 = parts.iter().map(|p| p.gpu_hours).sum();
    assert!((gpu_hours - 2.0).abs() < 1e-12);
}

#[test]
fn a_credit_splits_in_the_same_proportions() {
    let inputs = worked_example();
    let out = build(&inputs);
    let splitter = ChargeSplitter::new(&inputs.nodes, &out.gpu_hours, &inputs.usage, &inputs.rules);
    let mut credit = inputs.billing[0].clone();
    credit.effective_cost = m("-96");
    let parts = splitter.split(&credit, |_| true).unwrap();
    let sums = by_team(credit.effective_cost, &parts);
    assert!((sums[&key(Some("nlp"), "direct")] + m("19.2")).abs() <= m("0.000000001"));
    assert_eq!(sums.values().copied().sum::<Money>(), m("-96"));
}

#[test]
fn the_same_rows_in_any_order_split_alike_to_the_last_digit() {
    let inputs = worked_example();
    let out = build(&inputs);
    let mut reversed = out.gpu_hours.clone();
    reversed.reverse();
    let mut rotated = out.gpu_hours.clone();
    rotated.rotate_left(out.gpu_hours.len() / 3);
    let split_with = |rows: &[GpuHour]| -> Vec<(Vec<ChargePart>, Vec<Money>)> {
        let splitter = ChargeSplitter::new(&inputs.nodes, rows, &inputs.usage, &inputs.rules);
        inputs
            .billing
            .iter()
            .map(|line| {
                let parts = splitter.split(line, |_| true).unwrap();
                let money = split_amount(line.effective_cost, &parts);
                (parts, money)
            })
            .collect()
    };
    let first = split_with(&out.gpu_hours);
    assert_eq!(split_with(&reversed), first);
    assert_eq!(split_with(&rotated), first);
}
