//! The weekly report on known data: the worked example of docs/ledger.md is week 2026-W45
//! (Monday 2026-11-02), and `tests/data/report-example` adds the week before (2026-10-26: n1 billed
//! 96.00, vision/train 6 h and nlp/serve 12 h without telemetry, two SLO-met requests) and W45's
//! queue (three workloads queued on 11-03). Every figure below is worked out by hand from those.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::golden::{load_worked_example, run_ok};
use crate::support::{Ledger, describe, ledgers};

fn data(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/report-example")
        .join(file)
}

pub(crate) fn load_report_example(ledger: &Ledger) {
    load_worked_example(ledger);
    for (source, file) in [
        ("events", "events.jsonl"),
        ("focus", "billing.csv"),
        ("tokens", "tokens.jsonl"),
    ] {
        ledger.ingest_ok(source, &data(file), &[]);
    }
    let built = run_ok(
        ledger,
        &[
            "ledger",
            "build",
            "--from",
            "2026-10-26",
            "--to",
            "2026-10-26",
        ],
    );
    assert!(built.contains("(balanced)"), "{built}");
}

fn report(ledger: &Ledger, format: &str) -> Vec<u8> {
    let out = ledger.run(&["report", "weekly", "--week", "2026-W45", "--format", format]);
    assert!(out.status.success(), "{}", describe(&out));
    out.stdout
}

pub(crate) fn check_json(report: &Value) {
    assert_eq!(report["schema_version"], 1);
    // The week holds data: nothing to warn about.
    assert_eq!(report["warnings"], json!([]));
    assert_eq!(
        (&report["week"], &report["from"], &report["to"]),
        (
            &json!("2026-W45"),
            &json!("2026-11-02"),
            &json!("2026-11-09")
        )
    );
    // W45 cost 118.20 (docs/ledger.md). W44: vision 6 h × 1.60 = 9.60 direct + 6.40 of n1's
    // 19.20 overhead (its share of the direct basis, 9.60 / 28.80) = 16.00; nlp 19.20 + 12.80 =
    // 32.00; unexplained 48.00 (below): 96.00, n1's bill. +22.20 = +23.125 %. Per team, the largest
    // change first: nlp 40.728 − 32 = 8.728 (+27.275 %), vision 23.064 − 16 = 7.064 (+44.15 %),
    // unattributed 5.208 (nothing the week before).
    assert_eq!(
        report["summary"],
        json!({"total_cost": 118.2, "previous_total_cost": 96.0, "change": 22.2,
               "change_share": 0.23125,
               "teams": [
                   {"team": "nlp", "total_cost": 40.728, "previous_total_cost": 32.0,
                    "change": 8.728, "change_share": 0.27275},
                   {"team": "vision", "total_cost": 23.064, "previous_total_cost": 16.0,
                    "change": 7.064, "change_share": 0.4415},
                   {"team": "unattributed", "total_cost": 5.208, "previous_total_cost": 0.0,
                    "change": 5.208, "change_share": null}]})
    );
    // recommendations(W45) as tests/sql/recommendations.slt works them out for the day, over the
    // week's 7 days: n1 32.00 (4.571429 a day), ml/train 3.20 (0.457143), n2 1.20 (0.171429);
    // 36.40 in all, the week's waste below.
    let action = |kind: &str,
                  owner: &str,
                  node: Option<&str>,
                  workload: Option<&str>,
                  text: &str,
                  hours: f64,
                  cost: f64,
                  per_day: f64| {
        json!({"kind": kind, "owner": owner, "action": text, "cluster": "demo", "node": node,
               "namespace": workload.map(|_| "ml"), "workload": workload, "gpu_hours": hours,
               "cost": cost, "cost_per_day": per_day})
    };
    let node_action = |node: &str| {
        format!(
            "Find an owner for the idle GPUs of demo/{node}, reserve them for a reason, or release them"
        )
    };
    assert_eq!(
        report["recommendations"],
        json!({"total_cost": 36.4, "count": 3,
               "top": [
                   action("unexplained_idle", "platform", Some("n1"), None, &node_action("n1"),
                          20.0, 32.0, 4.571429),
                   action("allocated_idle", "vision", None, Some("train"),
                          "Release or right-size ml/train: allocated GPUs that sat idle",
                          2.0, 3.2, 0.457143),
                   action("unexplained_idle", "platform", Some("n2"), None, &node_action("n2"),
                          1.0, 1.2, 0.171429)],
               "query": "SELECT * FROM recommendations('2026-11-02', '2026-11-09') ORDER BY cost DESC, kind, cluster, node, namespace, workload"})
    );
    // n1's two H100s were down 20–22 h (fault); n2's L4 never faulted: 1 of 3 available. In
    // GPU-hours: 3 × 168 = 504, of which 4 in fault: 500 available.
    assert_eq!(
        report["capacity"],
        json!({"total_gpus": 3, "available_gpus": 1, "faulty_gpus": 2, "maintenance_gpus": 0,
               "fault_gpu_hours": 4.0, "gpu_hours": 504.0, "available_gpu_hours": 500.0,
               "maintenance_gpu_hours": 0.0,
               "by_model": [
                   {"gpu_model": "NVIDIA H100 80GB HBM3", "flavor": "on_demand", "gpus": 2,
                    "available_gpus": 0, "faulty_gpus": 2, "maintenance_gpus": 0,
                    "gpu_hours": 336.0, "available_gpu_hours": 332.0, "fault_gpu_hours": 4.0,
                    "maintenance_gpu_hours": 0.0},
                   {"gpu_model": "NVIDIA L4", "flavor": "on_demand", "gpus": 1,
                    "available_gpus": 1, "faulty_gpus": 0, "maintenance_gpus": 0,
                    "gpu_hours": 168.0, "available_gpu_hours": 168.0, "fault_gpu_hours": 0.0,
                    "maintenance_gpu_hours": 0.0}]})
    );
    // Allocated: vision 6 h + nlp 12 h + promo 1 h = 19; busy 19 − 2 h of allocated idle = 17.
    // SM active over allocated time with telemetry: (4 × 0.60 + 2 × 0.01 + 1 × 0.90) / 7 = 0.474286.
    // Power: every sample says 400 W; energy: n1 GPU 0 6 h × 400 W = 2,400 Wh, plus 10 Wh that its
    // last sample (05:59:30, standing for 2 min) puts in hour 06 (tests/sql/gpu_hours.slt), and n2
    // GPU 0 2 h × 400 W = 800 Wh: 3.21 kWh. No framebuffer fields in the example: memory is null.
    // GPU cost: 118.20 − shared 39.00 = 79.20 (docs/ledger.md). Busy cost 26.80 of the 30.00
    // allocated GPUs cost: 0.893333.
    // Idle by class as in docs/ledger.md's table.
    assert_eq!(
        report["utilization"],
        json!({"allocated_gpu_hours": 19.0, "busy_gpu_hours": 17.0, "sm_active": 0.474286,
               "memory_used_share": null, "power_w_avg": 400.0, "energy_kwh": 3.21,
               "gpu_cost": 79.2, "busy_cost_share": 0.893333,
               "idle": [
                   {"class": "allocated_idle", "gpu_hours": 2.0, "cost": 3.2},
                   {"class": "reserved:warm_pool", "gpu_hours": 6.0, "cost": 9.6},
                   {"class": "unexplained", "gpu_hours": 21.0, "cost": 33.2},
                   {"class": "fault", "gpu_hours": 4.0, "cost": 6.4}]})
    );
    // Waits 300 s (batch-a) and 900 s (batch-b): p50 600, p95 300 + 0.95 × 600 = 870 (linear
    // interpolation); batch-c was rejected, batch-a admitted by borrowing, then preempted.
    assert_eq!(
        report["queue"],
        json!({"queued": 3, "admitted": 2, "waits_measured": 2, "wait_p50_seconds": 600.0,
               "wait_p95_seconds": 870.0, "rejections": 1, "preemptions": 1, "evictions": 0,
               "borrowed_admissions": 1})
    );
    // vision/train: one run 00–06 that finished: 6 GPU-hours, 4 h busy + 2 h idle at 1.60.
    assert_eq!(
        report["training"],
        json!({"workloads": 1, "runs": 1, "succeeded": 1, "failed": 0, "preempted": 0,
               "success_rate": 1.0, "gpu_hours": 6.0, "effective_gpu_hours": 6.0, "cost": 9.6,
               "failure_loss": 0.0, "recompute_cost": 0.0})
    );
    // W45 (tests/sql/unit_economics.slt): nlp/serve's loaded cost 40.728 serves 14 online requests
    // of 1,000 tokens (3 + 2 met their SLO) and the batch request b1 (10,100 tokens, no batch SLO,
    // succeeded: met): 15 requests, 6 met, 15,100 SLO-met tokens of 24,100.
    // 40.728 / 15,100 × 1e6 = 2697.218543 per 1M SLO-met tokens; 15,100 / 604,800 s = 0.024967
    // tokens/s; the 9 missed (9,000 tokens) carry 40.728 × 9,000 / 24,100 = 15.209627.
    // W44: 19.20 direct + 12.80 shared (node overhead 19.20 × 19.20 / 28.80) = 32.00 over 2,000
    // tokens: 16000 per 1M; 2,000 / 604,800 = 0.003307.
    assert_eq!(
        report["inference"],
        json!({"models": [{"model": "llama-3-8b",
            "week": {"requests": 15, "slo_met_requests": 6, "slo_met_tokens": 15100,
                     "slo_met_tokens_per_second": 0.024967, "cost": 40.728,
                     "cost_per_1m_slo_met_tokens": 2697.218543, "slo_missed_cost": 15.209627},
            "previous_week": {"requests": 2, "slo_met_requests": 2, "slo_met_tokens": 2000,
                     "slo_met_tokens_per_second": 0.003307, "cost": 32.0,
                     "cost_per_1m_slo_met_tokens": 16000.0, "slo_missed_cost": 0.0}}]})
    );
    // docs/ledger.md's team totals; nothing configured, so no budget or quota.
    let team = |team: &str, hours: f64, direct: f64, shared: f64, total: f64| {
        json!({"team": team, "gpu_hours": hours, "direct_cost": direct, "shared_cost": shared,
               "total_cost": total, "budget": null, "budget_deviation": null,
               "quota_gpus": null, "quota_used_share": null})
    };
    assert_eq!(
        report["tenants"],
        json!({"limits": "not configured",
               "teams": [team("nlp", 12.0, 19.2, 21.528, 40.728),
                         team("unattributed", 1.0, 1.2, 4.008, 5.208),
                         team("vision", 6.0, 9.6, 13.464, 23.064)],
               "unattributed": {"total_cost": 5.208, "workloads": [
                   {"namespace": "ml", "workload": "promo", "gpu_hours": 1.0, "cost": 1.2}]}})
    );
    // Waste (allocated idle + unexplained): W45 2 + 21 = 23 h, 3.20 + 33.20 = 36.40; W44 GPU 0
    // 06–24 h and GPU 1 12–24 h unexplained = 30 h × 1.60 = 48.00. Reclaimed 7 h, 11.60. No spot
    // node. SLO-met share 6 / 15 = 0.4, the week before 2 / 2; missed cost as in inference.
    assert_eq!(
        report["optimization"],
        json!({"waste_gpu_hours": 23.0, "waste_cost": 36.4, "previous_waste_gpu_hours": 30.0,
               "previous_waste_cost": 48.0, "reclaimed_gpu_hours": 7.0, "reclaimed_cost": 11.6,
               "spot_net_savings": null, "slo_met_share": 0.4, "previous_slo_met_share": 1.0,
               "slo_missed_cost": 15.209627})
    );
    // docs/ledger.md: billed 111.00 + manual 4.80 + rate card 2.40 = 118.20, all accounted.
    assert_eq!(
        report["balance"],
        json!({"billed": 111.0, "manual": 4.8, "rate_card": 2.4, "expected": 118.2,
               "accounted": 118.2, "difference": 0.0, "balanced": true})
    );
}

/// The figures a reader checks, as CSV rows (`week,section,item,metric,value`, the strings the
/// JSON prints) and as the HTML page's table of all figures prints them for people.
const FIGURES: [(&str, &str, &str, &str, &str); 11] = [
    ("summary", "nlp", "teams.change", "8.728", "$8.73"),
    ("capacity", "", "total_gpus", "3", "3"),
    (
        "capacity",
        "on_demand / NVIDIA L4",
        "by_model.available_gpu_hours",
        "168.0",
        "168.0",
    ),
    ("utilization", "unexplained", "idle.cost", "33.2", "$33.20"),
    ("queue", "", "wait_p95_seconds", "870.0", "14.5 min"),
    ("training", "", "cost", "9.6", "$9.60"),
    (
        "inference",
        "llama-3-8b",
        "models.week.cost_per_1m_slo_met_tokens",
        "2697.218543",
        "$2,697.22",
    ),
    (
        "inference",
        "llama-3-8b",
        "models.previous_week.cost_per_1m_slo_met_tokens",
        "16000.0",
        "$16,000.00",
    ),
    ("tenants", "nlp", "teams.total_cost", "40.728", "$40.73"),
    ("optimization", "", "reclaimed_cost", "11.6", "$11.60"),
    ("balance", "", "accounted", "118.2", "$118.20"),
];

fn check_csv(csv: &str) {
    assert!(csv.starts_with("week,section,item,metric,value\n"), "{csv}");
    for (section, item, metric, value, _) in FIGURES {
        let line = format!("2026-W45,{section},{item},{metric},{value}");
        assert!(csv.lines().any(|l| l == line), "{line} not in\n{csv}");
    }
}

/// An amount as the page prints it (`$1,234.56`, `-$3.20`) in cents.
fn printed_cents(amount: &str) -> i64 {
    let negative = amount.starts_with('-');
    let digits: String = amount.chars().filter(char::is_ascii_digit).collect();
    assert!(
        amount.trim_start_matches('-').starts_with('$') && amount.contains('.'),
        "{amount} is not an amount"
    );
    let cents: i64 = digits.parse().unwrap();
    if negative { -cents } else { cents }
}

/// The text of every element that opens with `open` (up to its closing `close`) in `within`.
fn texts<'a>(within: &'a str, open: &str, close: &str) -> Vec<&'a str> {
    within
        .split(open)
        .skip(1)
        .map(|s| &s[..s.find(close).unwrap()])
        .collect()
}

fn check_html(html: &str, csv: &str) {
    for (_, item, metric, _, value) in FIGURES {
        let cells = format!("<td>{item}</td><td>{metric}</td><td class=\"n\">{value}</td>");
        assert!(html.contains(&cells), "{cells} not in the page");
    }
    assert!(html.contains("difference $0.00 (balanced)"));
    // The summary paragraph: the week against the week before, per team, largest change first.
    assert!(
        html.contains(
            "<p id=\"summary\">The week cost $118.20, ▲ $22.20 (+23.1%) against the week before \
             ($96.00). Biggest movers: nlp ▲ $8.73 (+27.3%), vision ▲ $7.06 (+44.2%), unattributed \
             ▲ $5.21 (new)."
        ),
        "{html}"
    );
    // Every money figure of the data (CSV rows whose metric is an amount) prints with currency.
    let money_metric = |metric: &str| {
        let name = metric.rsplit('.').next().unwrap();
        name.contains("cost")
            || [
                "budget",
                "billed",
                "manual",
                "rate_card",
                "expected",
                "accounted",
                "difference",
            ]
            .contains(&name)
    };
    let mut checked = 0;
    for line in csv.lines().skip(1) {
        let row: Vec<&str> = line.splitn(5, ',').collect();
        let (section, item, metric, value) = (row[1], row[2], row[3], row[4]);
        if !money_metric(metric) || value.is_empty() || item.contains('"') {
            continue;
        }
        let table = &html[html
            .find(&format!("<table id=\"figures-{section}\""))
            .unwrap()..];
        let table = &table[..table.find("</table>").unwrap()];
        let cell = format!("<td>{item}</td><td>{metric}</td><td class=\"n\">");
        let at = table
            .find(&cell)
            .unwrap_or_else(|| panic!("{cell} not in {section}"))
            + cell.len();
        let printed = &table[at..at + table[at..].find("</td>").unwrap()];
        let exact: f64 = value.parse().unwrap();
        assert_eq!(
            printed_cents(printed),
            (exact * 100.0).round() as i64,
            "{metric} of {item}"
        );
        checked += 1;
    }
    assert!(checked > 30, "{checked} money figures checked");
    // Sections come sorted by size: teams by total, idle classes by cost.
    let order = |table: &str, names: &[&str]| {
        let table = &html[html.find(&format!("<table id=\"{table}\"")).unwrap()..];
        let table = &table[..table.find("</table>").unwrap()];
        let at: Vec<usize> = names
            .iter()
            .map(|n| table.find(&format!("<tr><td>{n}</td>")).unwrap())
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{table}: {names:?}");
    };
    order("teams-table", &["nlp", "vision", "unattributed"]);
    order(
        "idle-table",
        &[
            "unexplained",
            "reserved:warm_pool",
            "fault",
            "allocated_idle",
        ],
    );
    // The recommended actions add up to the amount the page claims for them.
    let list = &html[html.find("<ol class=\"actions\"").unwrap()..];
    let list = &list[..list.find("</ol>").unwrap()];
    let amounts = texts(list, "<b class=\"money\">", "</b>");
    assert_eq!(amounts, ["$32.00", "$3.20", "$1.20"]);
    let claim = texts(html, "<p id=\"recommendations-total\">", "</p>")[0];
    assert_eq!(claim, "These 3 actions: $36.40.");
    let claimed = claim.rsplit(' ').next().unwrap().trim_end_matches('.');
    assert_eq!(
        amounts.iter().map(|a| printed_cents(a)).sum::<i64>(),
        printed_cents(claimed)
    );
    assert_eq!(html.matches("<svg").count(), 4);
    assert!(
        !html.contains("<script") && !html.contains("://"),
        "self-contained"
    );
}

#[test]
fn the_weekly_report_has_every_sections_figures_in_every_format() {
    for (i, ledger) in ledgers().into_iter().enumerate() {
        load_report_example(&ledger);
        let json = report(&ledger, "json");
        check_json(&serde_json::from_slice(&json).unwrap());
        if i == 0 {
            keeps_to_its_schema(&ledger, &json);
        }
        let csv = String::from_utf8(report(&ledger, "csv")).unwrap();
        check_csv(&csv);
        let html_path = ledger.dir.path().join("report.html");
        run_ok(
            &ledger,
            &[
                "report", "weekly", "--week", "2026-W45", "--format", "html", "--out",
            ]
            .into_iter()
            .chain([html_path.to_str().unwrap()])
            .collect::<Vec<_>>(),
        );
        let html = std::fs::read_to_string(&html_path).unwrap();
        check_html(&html, &csv);
        let md = String::from_utf8(report(&ledger, "md")).unwrap();
        assert!(md.contains("| nlp | teams.total_cost | $40.73 |"), "{md}");
        if i == 0 {
            renders_in_chromium(&html_path);
            rest_matches_the_cli(&ledger, &json, &csv, &html);
        }
    }
}

/// A week the ledger holds nothing for says so before its figures, in JSON, Markdown and HTML,
/// although the declared nodes still count as capacity and the (empty) ledger balances.
#[test]
fn a_week_without_data_says_so() {
    let ledger = ledgers().remove(0);
    load_report_example(&ledger);
    let week = |format: &str| {
        let out = ledger.run(&["report", "weekly", "--week", "2026-W30", "--format", format]);
        assert!(out.status.success(), "{}", describe(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let json: Value = serde_json::from_str(&week("json")).unwrap();
    let warnings = json["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0]
            .as_str()
            .unwrap()
            .starts_with("No data for this week: the ledger holds no allocated GPU time, no costs and no bills from 2026-07-20 to 2026-07-27."),
        "{warnings:?}"
    );
    assert_eq!(json["balance"]["balanced"], true);
    assert!(week("md").contains("\n> **Warning:** No data for this week"));
    assert!(
        week("html")
            .contains("<p class=\"warning\" role=\"alert\"><b>Warning:</b> No data for this week")
    );
    keeps_to_its_schema(&ledger, week("json").as_bytes());
    // Past 2262, where a nanosecond TIMESTAMP literal ends, the lake's microseconds go on: a week
    // of 9997 reports (nothing), and the ledger builds its days (nothing to build).
    let far = ledger.run(&["report", "weekly", "--week", "9997-W06", "--format", "json"]);
    assert!(far.status.success(), "{}", describe(&far));
    let far: Value = serde_json::from_slice(&far.stdout).unwrap();
    assert_eq!(far["from"], "9997-02-03");
    assert_eq!(far["warnings"].as_array().unwrap().len(), 1);
    run_ok(
        &ledger,
        &[
            "ledger",
            "build",
            "--from",
            "9997-02-03",
            "--to",
            "9997-02-04",
        ],
    );
}

/// A team's declared monthly budget reaches the tenants section prorated to the week: nlp's 3,000
/// for November (30 days) is 700.00 for W45's 7 days, and its 40.728 is 659.272 under it. A
/// namespace's budget is no team's.
#[test]
fn declared_team_budgets_set_the_tenants_budget_and_deviation() {
    let ledger = ledgers().remove(0);
    load_report_example(&ledger);
    let budgets = ledger.dir.path().join("budgets.yaml");
    std::fs::write(
        &budgets,
        "kind: budget\nname: nlp-monthly\nspec: {team: nlp, amount: 3000}\n---\n\
         kind: budget\nname: ml-namespace\nspec: {namespace: ml, amount: 100}\n",
    )
    .unwrap();
    run_ok(&ledger, &["apply", budgets.to_str().unwrap()]);
    let report: Value = serde_json::from_slice(&report(&ledger, "json")).unwrap();
    let tenants = &report["tenants"];
    assert_eq!(tenants["limits"], "configured");
    let nlp = tenants["teams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["team"] == "nlp")
        .unwrap();
    assert_eq!(nlp["budget"], serde_json::json!(700.0));
    assert_eq!(nlp["budget_deviation"], serde_json::json!(-659.272));
    let vision = tenants["teams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["team"] == "vision")
        .unwrap();
    assert_eq!(vision["budget"], Value::Null);
}

/// A budget is any finite amount above 0, so one of 1e300 must print: the HTML and Markdown
/// reports rounded figures through a u128 and panicked on it (the scheduled export with them).
/// Prorated to W45's 7 of November's 30 days it is ~2.33e299, printed whole, to the cent.
#[test]
fn an_enormous_budget_prints_in_every_format() {
    let ledger = ledgers().remove(0);
    load_report_example(&ledger);
    let budgets = ledger.dir.path().join("budgets.yaml");
    std::fs::write(
        &budgets,
        "kind: budget\nname: nlp-monthly\nspec: {team: nlp, amount: 1e300}\n",
    )
    .unwrap();
    run_ok(&ledger, &["apply", budgets.to_str().unwrap()]);
    let report_json: Value = serde_json::from_slice(&report(&ledger, "json")).unwrap();
    let nlp = report_json["tenants"]["teams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["team"] == "nlp")
        .unwrap();
    let budget = nlp["budget"].as_f64().unwrap();
    assert!(
        (budget / (1e300 * 7.0 / 30.0) - 1.0).abs() < 1e-12,
        "{budget}"
    );
    for format in ["md", "html"] {
        let text = String::from_utf8(report(&ledger, format)).unwrap();
        let printed = text
            .split("$233,333,333,333,333")
            .nth(1)
            .unwrap_or_else(|| panic!("{format}: no budget of $2.33e299 in {text}"));
        // 299 more digits in groups of three, then the cents.
        let rest: String = printed
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ',')
            .collect();
        let digits = rest.chars().filter(char::is_ascii_digit).count();
        assert_eq!(
            (digits, printed[rest.len()..].get(..3)),
            (300 - 15, Some(".00")),
            "{format}"
        );
    }
}

/// The JSON validates against docs/report.schema.json with Python's `jsonschema` (installed with
/// schemathesis by scripts/test), and a report with a field the schema does not know does not.
fn keeps_to_its_schema(ledger: &Ledger, json: &[u8]) {
    let check = "import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
jsonschema.Draft202012Validator(schema).validate(json.load(open(sys.argv[2])))";
    if !Command::new("python3")
        .args(["-c", "import jsonschema"])
        .output()
        .is_ok_and(|o| o.status.success())
    {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have python3 jsonschema"
        );
        eprintln!("skipped: python3 jsonschema is not installed (scripts/test installs it)");
        return;
    }
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/report.schema.json");
    let validate = |body: &[u8]| {
        let file = ledger.dir.path().join("report-to-validate.json");
        std::fs::write(&file, body).unwrap();
        Command::new("python3")
            .args(["-c", check])
            .arg(&schema)
            .arg(&file)
            .output()
            .unwrap()
    };
    let out = validate(json);
    assert!(out.status.success(), "{}", describe(&out));
    let mut extra: Value = serde_json::from_slice(json).unwrap();
    extra["balance"]["note"] = json!("not in the schema");
    assert!(
        !validate(&serde_json::to_vec(&extra).unwrap())
            .status
            .success()
    );
}

/// REST gives the CLI's bytes, figure for figure; the report covers the fleet, so a team's token
/// is refused; a malformed week or format is a 400 naming the parameter.
fn rest_matches_the_cli(ledger: &Ledger, json: &[u8], csv: &str, html: &str) {
    let admin = ledger.token("read", None);
    let team = ledger.token("read", Some("nlp"));
    let server = ledger.serve(&[]);
    let get = |path: &str, token: &str| {
        let response = server.get_as(token, path);
        let status = response.status().as_u16();
        let content_type = response.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_string();
        (status, content_type, response.bytes().unwrap().to_vec())
    };
    let (status, content_type, body) = get("/v1/reports/weekly/2026-W45", &admin);
    assert_eq!((status, content_type.as_str()), (200, "application/json"));
    assert_eq!(body, json);
    let (_, content_type, body) = get("/v1/reports/weekly/2026-W45?format=csv", &admin);
    assert!(content_type.starts_with("text/csv"));
    assert_eq!(String::from_utf8(body).unwrap(), csv);
    let (_, content_type, body) = get("/v1/reports/weekly/2026-W45?format=html", &admin);
    assert!(content_type.starts_with("text/html"));
    assert_eq!(String::from_utf8(body).unwrap(), html);
    let (status, _, body) = get("/v1/reports/weekly/2026-W45", &team);
    assert_eq!(status, 403, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("whole fleet"));
    // A well-formed week the year does not have is no such report: 2025 has 52 ISO weeks.
    let (status, _, body) = get("/v1/reports/weekly/2025-W53", &admin);
    let problem: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (status, problem["detail"].as_str()),
        (404, Some("week: 2025 has no ISO week 53"))
    );
    for (path, parameter) in [
        ("/v1/reports/weekly/2026-45", "week"),
        ("/v1/reports/weekly/2026-W54", "week"),
        ("/v1/reports/weekly/2026-W45?format=xml", "format"),
    ] {
        let (status, _, body) = get(path, &admin);
        let problem: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status, 400, "{path}: {problem}");
        assert!(
            problem["detail"].as_str().unwrap().contains(parameter),
            "{path}: {problem}"
        );
    }
}

/// The page opened in headless Chromium (Debian's, installed by scripts/test): the DOM it
/// builds has the charts and the totals, and the browser logs no console message.
fn renders_in_chromium(page: &Path) {
    let Some(chromium) = ["chromium", "chromium-browser"].into_iter().find(|b| {
        Command::new(b)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    }) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have chromium (scripts/test installs it)"
        );
        eprintln!("skipped: chromium is not installed (scripts/test installs it)");
        return;
    };
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(["--enable-logging=stderr", "--v=0", "--dump-dom"])
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium");
    assert!(out.status.success(), "{}", describe(&out));
    let dom = String::from_utf8(out.stdout).unwrap();
    assert_eq!(dom.matches("<svg").count(), 4, "{dom}");
    assert!(dom.matches("<rect").count() >= 8, "bars and legends drawn");
    assert!(
        dom.contains("<span>accounted</span><b>$118.20</b>")
            && dom.contains("<span>GPU-hours available</span><b>500.0</b>"),
        "totals: {dom}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("CONSOLE"), "console messages: {stderr}");
}

/// `serve` exports on its schedule at start: the last week due is caught up, written to the
/// store under reports/weekly/<week>/ and listed by GET /v1/reports/runs.
#[test]
fn serve_exports_the_due_week_at_start_and_lists_the_run() {
    let ledger = ledgers().remove(0);
    let token = ledger.token("read", None);
    let server = ledger.serve(&[]);
    let mut runs = Value::Null;
    for _ in 0..100 {
        runs = server.get_as(&token, "/v1/reports/runs").json().unwrap();
        if runs[0]["status"] == "succeeded" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let run = &runs[0];
    assert_eq!(run["status"], "succeeded", "{runs}");
    assert_eq!(run["attempts"], 1);
    assert!(run["error"].is_null() && run["finished_at"].is_string());
    let week = run["week"].as_str().unwrap();
    let keys: Vec<String> = ["json", "csv", "html"]
        .iter()
        .map(|e| format!("reports/weekly/{week}/report.{e}"))
        .collect();
    assert_eq!(run["objects"], json!(keys));
    for key in &keys {
        assert!(ledger.data_dir().join(key).is_file(), "{key}");
    }
    let metrics = server.metrics();
    assert!(
        metrics.contains("report_runs_total{outcome=\"succeeded\"} 1"),
        "{metrics}"
    );
    let listed = ledger.sql("select week, status, attempts from system.report_runs");
    assert_eq!(
        listed,
        [json!({"week": week, "status": "succeeded", "attempts": 1})]
    );
}

/// The week's framebuffer share and power come from `gpu_hours`, weighted by each row's seconds.
#[test]
fn utilization_reads_framebuffer_and_power_from_the_ledger() {
    let ledger = ledgers().remove(0);
    crate::ledger::land_framebuffer_and_power_readings(&ledger);
    run_ok(&ledger, &["ledger", "build"]);
    let report: Value = serde_json::from_slice(&report(&ledger, "json")).unwrap();
    // One seen hour: 0.5 of the framebuffer at 300 W (tests/ledger.rs works them out), 0.3 kWh.
    let utilization = &report["utilization"];
    assert_eq!(
        (
            &utilization["memory_used_share"],
            &utilization["power_w_avg"],
            &utilization["energy_kwh"]
        ),
        (&json!(0.5), &json!(300.0), &json!(0.3)),
        "{utilization}"
    );
}

/// A week with more actions than the report lists: it lists the largest five and counts and sums
/// all seven. Nodes n1…n7, one GPU each, idle and unallocated for 2026-11-03 10:00–11:00, node
/// n`k` billed `k`.00 for that hour: seven `unexplained_idle` actions of `k`.00 each, 28.00 in
/// all; listed n7 down to n3. (Each node is declared with its resource id, as docs/ledger.md's
/// are, so that its bill is its own.)
#[test]
fn the_report_lists_the_largest_actions_and_counts_and_sums_them_all() {
    let ledger = ledgers().remove(0);
    let hour_ms = 1_794_045_600_000i64; // 2026-11-03T10:00:00Z
    let mut text = String::new();
    let mut billing = String::from(
        "BillingAccountId,BillingAccountName,BillingCurrency,BillingPeriodStart,BillingPeriodEnd,\
         ChargePeriodStart,ChargePeriodEnd,ChargeCategory,ChargeClass,ChargeDescription,BilledCost,\
         EffectiveCost,ListCost,ContractedCost,PricingQuantity,PricingUnit,ProviderName,\
         PublisherName,InvoiceIssuerName,ServiceCategory,ServiceName,ResourceId,Tags\n",
    );
    for k in 1..=7 {
        for ms in (0..3_600_000).step_by(60_000).map(|t| hour_ms + t) {
            text += &format!(
                "DCGM_FI_PROF_SM_ACTIVE{{gpu=\"0\",UUID=\"GPU-n{k}\",Hostname=\"n{k}\"}} 0 {ms}\n"
            );
        }
        billing += &format!(
            "a,A,USD,2026-11-01T00:00:00Z,2026-12-01T00:00:00Z,2026-11-03T10:00:00Z,\
             2026-11-03T11:00:00Z,Usage,,n{k},{k}.00,{k}.00,{k}.00,{k}.00,1,Hours,AWS,AWS,AWS,\
             Compute,Amazon EC2,arn:aws:ec2:us-east-1:1:instance/i-n{k},\"{{\"\"cluster\"\":\"\"c\"\"}}\"\n"
        );
    }
    let nodes: Vec<String> = (1..=7)
        .map(|k| {
            format!(
                "kind: node\nspec: {{cluster: c, node: n{k}, resource_id: i-n{k}, gpu_count: 1, \
                 gpu_model: NVIDIA L4, capacity_type: on_demand, gpu_cost_share: 1.0}}\n"
            )
        })
        .collect();
    let objects = ledger.dir.path().join("nodes.yaml");
    std::fs::write(&objects, nodes.join("---\n")).unwrap();
    run_ok(&ledger, &["apply", objects.to_str().unwrap()]);
    let prom = ledger.dir.path().join("idle.prom");
    std::fs::write(&prom, text).unwrap();
    ledger.ingest_ok("dcgm", &prom, &["--cluster", "c"]);
    let csv = ledger.dir.path().join("billing.csv");
    std::fs::write(&csv, billing).unwrap();
    ledger.ingest_ok("focus", &csv, &[]);
    let built = run_ok(&ledger, &["ledger", "build"]);
    assert!(built.contains("(balanced)"), "{built}");
    let report: Value = serde_json::from_slice(&report(&ledger, "json")).unwrap();
    let actions = &report["recommendations"];
    let listed: Vec<(&str, f64)> = actions["top"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["node"].as_str().unwrap(), a["cost"].as_f64().unwrap()))
        .collect();
    assert_eq!(
        listed,
        [
            ("n7", 7.0),
            ("n6", 6.0),
            ("n5", 5.0),
            ("n4", 4.0),
            ("n3", 3.0)
        ],
        "{actions}"
    );
    assert_eq!(
        (&actions["count"], &actions["total_cost"]),
        (&json!(7), &json!(28.0)),
        "{actions}"
    );
}
