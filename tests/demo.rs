//! `gpuledger demo` end to end: a small cluster generated and loaded through the real binary
//! (every input through its real parser), then checked with `ledger check` and `gpuledger sql`.

use std::collections::BTreeSet;

use chrono::NaiveDate;
use gpuledger_demo::focus::billing_lines;
use gpuledger_demo::tokens::TokenRequests;
use gpuledger_demo::{DemoSpec, Scenario, events};
use serde_json::Value;

use crate::golden::run_ok;
use crate::support::{Ledger, ledgers};

pub const DEMO: [&str; 10] = [
    "demo",
    "--gpus",
    "16",
    "--days",
    "2",
    "--seed",
    "7",
    "--start",
    "2026-11-01",
    "--no-serve",
];

/// The plan the binary generates for `DEMO`.
pub fn plan() -> Scenario {
    Scenario::plan(&DemoSpec {
        gpus: 16,
        days: 2,
        seed: 7,
        start: NaiveDate::from_ymd_opt(2026, 11, 1).unwrap(),
        scrape_interval_s: 30,
    })
}

fn run_demo(ledger: &Ledger) -> String {
    run_ok(ledger, &DEMO)
}

#[test]
fn a_small_demo_loads_through_every_path_balances_and_shows_every_idle_class() {
    let scenario = plan();
    let billed_micros: i64 = billing_lines(&scenario)
        .iter()
        .map(|l| l.effective_micros)
        .sum();
    let events = events::events_jsonl(&scenario)
        .iter()
        .filter(|b| **b == b'\n')
        .count();
    let tokens = TokenRequests::new(&scenario);
    let requests: u64 = (0..3)
        .flat_map(|service| (0..48).map(move |hour| (service, hour)))
        .map(|(service, hour)| tokens.requests_in_hour(service, hour))
        .sum();
    for ledger in ledgers() {
        let out = run_demo(&ledger);
        // 7 billed nodes × 48 hours + 7 daily lines × 2 days.
        assert!(out.contains("demo/focus.csv: 350 records read"), "{out}");
        assert!(
            out.contains(&format!("demo/events.jsonl: {events} records read")),
            "{out}"
        );
        assert!(
            out.contains(&format!("demo/tokens.jsonl: {requests} records read")),
            "{out}"
        );
        // 2 days × 2,880 scrapes × 24 series (14 whole GPUs + 2 MIG GPUs × (1 + 4 instances)) =
        // 138,240 rows, less the fault: 3 h = 360 scrapes of the down node's 2 GPUs.
        assert!(out.contains("landed 137520 rows into gpu_samples"), "{out}");
        assert!(out.contains("(balanced)"), "{out}");

        let check = run_ok(
            &ledger,
            &[
                "ledger",
                "check",
                "--from",
                "2026-11-01",
                "--to",
                "2026-11-02",
            ],
        );
        let figure = |label: &str| {
            check
                .lines()
                .find(|l| l.trim_start().starts_with(label))
                .and_then(|l| l.split_whitespace().last())
                .map(str::to_string)
        };
        let billed = format!(
            "{}.{:06}",
            billed_micros / 1_000_000,
            billed_micros % 1_000_000
        );
        assert_eq!(figure("billed"), Some(billed), "{check}");
        // The license: 2.50 per GPU-day × 16 GPUs × 2 days.
        assert_eq!(figure("manual"), Some("80.000000".into()), "{check}");
        assert!(check.contains("balanced (within 1e-6 relative)"), "{check}");

        let classes: BTreeSet<String> = ledger
            .sql(
                "SELECT class, reason FROM idle_summary('2026-11-01', '2026-11-03') WHERE gpu_hours > 0",
            )
            .iter()
            .map(|row| match &row["reason"] {
                Value::String(reason) => format!("{}:{reason}", row["class"].as_str().unwrap()),
                _ => row["class"].as_str().unwrap().to_string(),
            })
            .collect();
        let expected: BTreeSet<String> = [
            "busy",
            "allocated_idle",
            "unexplained",
            "fault",
            "reserved:gang_wait",
            "reserved:ha_redundancy",
            "reserved:latency_guarantee",
            "reserved:maintenance",
            "reserved:release_overlap",
            "reserved:warm_pool",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        assert_eq!(classes, expected, "[{}]", ledger.backend);

        // Workloads labelled outside the policy (or not at all) cost the unattributed team.
        let teams: BTreeSet<String> = ledger
            .sql("SELECT team FROM team_costs('2026-11-01', '2026-11-03') WHERE total_cost > 0")
            .iter()
            .map(|row| row["team"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            teams,
            [
                "assistant",
                "platform",
                "research",
                "search",
                "unattributed",
                "vision"
            ]
            .into_iter()
            .map(String::from)
            .collect()
        );
        // The fault is the a100-spot node's 3 hours down, both GPUs.
        assert_eq!(
            ledger.scalar("SELECT sum(fault_seconds) / 3600 FROM gpu_hours"),
            serde_json::json!(6.0)
        );
        // Search indexing is worth 50 USD per 1,000 embedding requests on days its success rate
        // is at least 98.5 %: 1,486 of 1,501 requests succeeded on Nov 1 (99.0 %), 1,472 of
        // 1,500 on Nov 2 (98.1 %), so only Nov 1's 1,501 requests count: 75.05 USD.
        let search = ledger.sql(
            "SELECT days, days_met, events, round(value, 2) AS value FROM value_report('2026-11-01', '2026-11-03') WHERE mapping = 'search-indexing'",
        );
        assert_eq!(
            search,
            vec![serde_json::json!({"days": 2, "days_met": 1, "events": 1501, "value": 75.05})],
            "[{}]",
            ledger.backend
        );

        // The budgets, asked over REST at the end of the data: exactly one is over.
        let server = ledger.serve(&[]);
        let admin = ledger.token("admin", None);
        let states: Vec<(String, String)> = [
            "research-monthly",
            "assistant-namespace",
            "search-cost-center",
        ]
        .into_iter()
        .map(|name| {
            let status: Value = server
                .http
                .get(server.url(&format!(
                    "/v1/budgets/{name}/status?at=2026-11-02T23:59:59Z"
                )))
                .bearer_auth(&admin)
                .send()
                .unwrap()
                .json()
                .unwrap();
            (
                name.to_string(),
                status["state"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
        assert_eq!(
            states,
            [
                ("research-monthly".to_string(), "over".to_string()),
                ("assistant-namespace".to_string(), "warn".to_string()),
                ("search-cost-center".to_string(), "ok".to_string()),
            ],
            "[{}]",
            ledger.backend
        );
    }
}

/// A free loopback port (free when asked; the demo binds it right after).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `demo` without `--no-serve` prints where it serves and commands to try; each of them, run as
/// a user would paste it into a shell, returns rows.
#[test]
fn the_commands_the_demo_prints_return_rows() {
    use std::io::BufRead;
    // As a user runs it: only --data, so the catalog is the default one inside the lake.
    let dir = tempfile::tempdir().unwrap();
    let (http, postgres) = (free_port(), free_port());
    let mut args: Vec<String> = DEMO[..DEMO.len() - 1]
        .iter()
        .map(std::string::ToString::to_string)
        .collect();
    args.extend([
        "--listen".into(),
        format!("127.0.0.1:{http}"),
        "--pg-listen".into(),
        format!("127.0.0.1:{postgres}"),
    ]);
    let mut demo = std::process::Command::new(env!("CARGO_BIN_EXE_gpuledger"))
        .arg("--data")
        .arg(dir.path().join("lake"))
        .env_remove("GPULEDGER_DATA")
        .env_remove("GPULEDGER_CATALOG")
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(demo.stdout.take().unwrap()).lines();
    let mut printed = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if line.starts_with("gpuledger serving ") {
            break;
        }
        printed.push(line);
    }
    std::thread::spawn(move || for _ in lines {});
    let text = printed.join("\n");
    assert!(
        text.contains(&format!("dashboard    http://127.0.0.1:{http}/")),
        "{text}"
    );
    assert!(
        text.contains(&format!("PostgreSQL   127.0.0.1:{postgres}")),
        "{text}"
    );
    assert!(text.contains("budget research-monthly: "), "{text}");

    // `gpuledger` as a user has it: on the PATH.
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_gpuledger"))
        .parent()
        .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let commands: Vec<&str> = printed
        .iter()
        // Commands are indented; the server's own lines ("gpuledger postgres …") are not.
        .filter_map(|l| l.strip_prefix("  "))
        .filter(|l| {
            ["gpuledger ", "psql ", "curl "]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .collect();
    // Three queries as `gpuledger sql`, the same three through psql, two curl calls.
    assert_eq!(commands.len(), 8, "{text}");
    for command in commands {
        let out = std::process::Command::new("sh")
            .args(["-c", command])
            .env("PATH", &path)
            .env_remove("GPULEDGER_DATA")
            .env_remove("GPULEDGER_CATALOG")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{command}: {}",
            crate::support::describe(&out)
        );
        let has_rows = if command.starts_with("psql ") {
            !stdout.contains("(0 rows)")
                && (stdout.contains(" rows)") || stdout.contains("(1 row)"))
        } else if command.starts_with("curl ") {
            stdout.contains("\"state\":\"over\"") || stdout.starts_with("[{")
        } else {
            // A table: a header, a rule, and at least one row between the rules.
            stdout.lines().filter(|l| l.starts_with('|')).count() >= 2
        };
        assert!(has_rows, "{command} returned no rows:\n{stdout}");
    }
    let _ = std::process::Command::new("kill")
        .arg(demo.id().to_string())
        .status();
    let _ = demo.wait();
}

/// Two runs with the same seed land the same numbers (batch ids and load times aside).
#[test]
fn the_same_seed_gives_the_same_data() {
    const SUMS: &str = "SELECT
        (SELECT sum(effective_cost) FROM billing_lines) AS billed,
        (SELECT sum(input_tokens + output_tokens) FROM token_usage) AS tokens,
        (SELECT count(*) FROM scheduler_events) AS events,
        (SELECT sum(gr_engine_active) FROM gpu_samples) AS gr_engine_active,
        (SELECT round(sum(cost), 6) FROM gpu_hours) AS cost,
        (SELECT round(sum(unexplained_seconds), 6) FROM gpu_hours) AS unexplained";
    let sums: Vec<Vec<Value>> = ledgers()
        .into_iter()
        .take(1)
        .chain(ledgers().into_iter().take(1))
        .map(|ledger| {
            run_demo(&ledger);
            ledger.sql(SUMS)
        })
        .collect();
    assert_eq!(sums[0], sums[1]);
    assert!(sums[0][0]["events"].as_i64().unwrap() > 0, "{:?}", sums[0]);
}

/// A demo's size is checked before any date is computed from it: four billion days once
/// panicked subtracting them from today.
#[test]
fn a_demo_longer_than_ten_years_is_refused_naming_the_flag() {
    let ledger = ledgers().remove(0);
    let out = ledger.run(&["demo", "--days", "4000000000", "--no-serve"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "invalid value '4000000000' for '--days <DAYS>': 4000000000 is not in 1..=3660"
        ),
        "{stderr}"
    );
}
