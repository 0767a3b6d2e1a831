//! Budgets over HTTP: created, read, replaced and deleted through `/v1/budgets` (the same store
//! as `/v1/objects/budget`), their status from the ledger on the worked example, team scoping,
//! and alerts: a crossing recorded once and its webhook called once, across evaluation rounds and
//! a restart of `serve`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::golden::{load_worked_example, run_ok};
use crate::support::{Ledger, ledgers};

fn close(actual: &Value, expected: f64) -> bool {
    actual.as_f64().is_some_and(|a| (a - expected).abs() < 1e-6)
}

/// Asserts a status's figures: spend to date, forecast, percent used, state, thresholds.
fn assert_status(
    status: &Value,
    spend: f64,
    forecast: f64,
    percent: f64,
    state: &str,
    crossed: Value,
) {
    assert!(close(&status["spend_to_date"], spend), "spend: {status}");
    assert!(close(&status["forecast"], forecast), "forecast: {status}");
    assert!(close(&status["percent_used"], percent), "percent: {status}");
    assert_eq!(status["state"], state, "{status}");
    assert_eq!(status["thresholds_crossed"], crossed, "{status}");
}

#[test]
fn budgets_and_their_status_on_the_worked_example() {
    for ledger in ledgers() {
        load_worked_example(&ledger);
        let admin = ledger.token("admin", None);
        let nlp = ledger.token("read", Some("nlp"));
        let vision_admin = ledger.token("admin", Some("vision"));
        let server = ledger.serve(&[]);
        let backend = ledger.backend;

        let (status, body) =
            server.create_budget(&admin, "nlp-monthly", json!({"team": "nlp", "amount": 100}));
        assert_eq!(status, 201, "[{backend}] {body}");
        assert_eq!(
            body,
            json!({"kind": "budget", "name": "nlp-monthly", "spec": {
                "team": "nlp", "namespace": null, "cost_center": null, "amount": 100.0,
                "currency": "USD", "thresholds": [50.0, 80.0, 100.0], "webhook": null}})
        );
        let (status, _) =
            server.create_budget(&admin, "nlp-monthly", json!({"team": "nlp", "amount": 5}));
        assert_eq!(status, 409);
        // An invalid spec is 422 (valid JSON, invalid budget), as on /v1/objects.
        let (status, body) =
            server.create_budget(&admin, "bad", json!({"team": "nlp", "amount": 0}));
        assert_eq!(status, 422);
        assert_eq!(body["detail"], "spec.amount: must be a number > 0 (got 0)");
        let (status, body) = server.create_budget(
            &admin,
            "bad",
            json!({"team": "nlp", "cost_center": "cc", "amount": 1}),
        );
        assert_eq!(status, 422);
        assert_eq!(
            body["detail"],
            "spec.cost_center: set exactly one of team, namespace, cost_center (team is set)"
        );
        assert_eq!(
            server
                .create_budget(
                    &admin,
                    "vision-monthly",
                    json!({"team": "vision", "amount": 40})
                )
                .0,
            201
        );
        assert_eq!(
            server
                .create_budget(
                    &admin,
                    "ml-namespace",
                    json!({"namespace": "ml", "amount": 50})
                )
                .0,
            201
        );

        // On 2026-11-03T00:00Z two of November's 30 days are gone: forecast = spend × 15.
        // nlp: team_costs total 40.728 (tests/sql/team_costs.slt) of 100 → 40.728 %, no
        // threshold, but 610.92 forecast past the amount → warn.
        let at = "?at=2026-11-03T00:00:00Z";
        let (status, body) = server.get(&admin, &format!("/v1/budgets/nlp-monthly/status{at}"));
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["budget"], "nlp-monthly");
        assert_eq!(body["month"], "2026-11");
        assert_eq!(body["amount"], 100.0);
        assert_eq!(body["currency"], "USD");
        assert_status(&body, 40.728, 610.92, 40.728, "warn", json!([]));
        // Asked two days later, with no data after Nov 2: the run rate is over the days the
        // ledger holds, so the forecast is the same 610.92 (not 40.728 × 30 / 4 = 305.46).
        let (_, later) = server.get(
            &admin,
            "/v1/budgets/nlp-monthly/status?at=2026-11-05T00:00:00Z",
        );
        assert_status(&later, 40.728, 610.92, 40.728, "warn", json!([]));
        // vision: 23.064 of 40 = 57.66 % → 50 crossed; forecast 345.96.
        let (_, body) = server.get(&admin, &format!("/v1/budgets/vision-monthly/status{at}"));
        assert_status(&body, 23.064, 345.96, 57.66, "warn", json!([50.0]));
        // Namespace ml: its GPU-hour cost, 19.20 + 9.60 + 1.20 = 30 of 50 = 60 %; forecast 450.
        let (_, body) = server.get(&admin, &format!("/v1/budgets/ml-namespace/status{at}"));
        assert_status(&body, 30.0, 450.0, 60.0, "warn", json!([50.0]));
        // Half-way through Nov 2 the day's entries count whole: 40.728 over 1.5 days × 30.
        let (_, body) = server.get(
            &admin,
            "/v1/budgets/nlp-monthly/status?at=2026-11-02T12:00:00Z",
        );
        assert_status(&body, 40.728, 814.56, 40.728, "warn", json!([]));
        // December has no spend yet.
        let (_, body) = server.get(
            &admin,
            "/v1/budgets/nlp-monthly/status?at=2026-12-05T00:00:00%2B01:00",
        );
        assert_eq!(body["month"], "2026-12");
        assert_status(&body, 0.0, 0.0, 0.0, "ok", json!([]));
        // The same statuses in SQL, every budget at once: budget_status(at).
        let statuses = |token: &str| {
            let (status, rows) = server.sql(
                token,
                "SELECT budget, coalesce(team, namespace, cost_center) AS watches, month, \
                 round(spend_to_date, 6) AS spend, round(forecast, 6) AS forecast, \
                 round(percent_used, 6) AS used, state, highest_threshold_crossed AS crossed \
                 FROM budget_status('2026-11-03T00:00:00Z') ORDER BY budget",
            );
            assert_eq!(status, 200, "{rows}");
            rows
        };
        assert_eq!(
            statuses(&admin),
            json!([
                {"budget": "ml-namespace", "watches": "ml", "month": "2026-11", "spend": 30.0,
                 "forecast": 450.0, "used": 60.0, "state": "warn", "crossed": 50.0},
                {"budget": "nlp-monthly", "watches": "nlp", "month": "2026-11", "spend": 40.728,
                 "forecast": 610.92, "used": 40.728, "state": "warn", "crossed": null},
                {"budget": "vision-monthly", "watches": "vision", "month": "2026-11",
                 "spend": 23.064, "forecast": 345.96, "used": 57.66, "state": "warn",
                 "crossed": 50.0}])
        );
        // A team's token sees its team's budget only (a namespace budget belongs to no team).
        assert_eq!(
            statuses(&nlp)
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["budget"].as_str().unwrap())
                .collect::<Vec<_>>(),
            ["nlp-monthly"]
        );
        let (status, body) = server.get(&admin, "/v1/budgets/nlp-monthly/status?at=tomorrow");
        assert_eq!(status, 400);
        assert!(
            body["detail"]
                .as_str()
                .unwrap()
                .starts_with("at: 'tomorrow' is not an RFC 3339 time")
        );

        // Listing: name, spec and the status now.
        let (status, body) = server.get(&admin, "/v1/budgets");
        assert_eq!(status, 200);
        let names: Vec<&str> = body
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["ml-namespace", "nlp-monthly", "vision-monthly"]);
        assert_eq!(body[1]["spec"]["team"], "nlp");
        assert_eq!(body[1]["status"]["budget"], "nlp-monthly");
        // The same store as the catalog objects.
        let (_, objects) = server.get(&admin, "/v1/objects/budget");
        assert_eq!(objects.as_array().unwrap().len(), 3);

        // A team token sees its team's budgets only, by every endpoint.
        let (_, body) = server.get(&nlp, "/v1/budgets");
        assert_eq!(body.as_array().unwrap().len(), 1, "{body}");
        assert_eq!(body[0]["name"], "nlp-monthly");
        assert_status(
            &server
                .get(&nlp, &format!("/v1/budgets/nlp-monthly/status{at}"))
                .1,
            40.728,
            610.92,
            40.728,
            "warn",
            json!([]),
        );
        for path in [
            "/v1/budgets/vision-monthly",
            "/v1/budgets/vision-monthly/status",
            "/v1/budgets/vision-monthly/alerts",
            "/v1/budgets/ml-namespace/status",
            "/v1/objects/budget/vision-monthly",
        ] {
            assert_eq!(server.get(&nlp, path).0, 404, "{path}");
        }
        // vision's admin token may not take nlp's budget over, nor make one for nlp.
        let (status, _) = server.send(
            "PUT",
            &vision_admin,
            "/v1/budgets/nlp-monthly",
            &json!({"spec": {"team": "vision", "amount": 1}}),
        );
        assert_eq!(status, 404);
        let (status, _) =
            server.create_budget(&vision_admin, "nlp-2", json!({"team": "nlp", "amount": 1}));
        assert_eq!(status, 403);
        assert_eq!(
            server
                .send(
                    "DELETE",
                    &vision_admin,
                    "/v1/budgets/nlp-monthly",
                    &json!({})
                )
                .0,
            404
        );
        // The same rule on /v1/objects/budget: another team's budget is not there for vision's
        // token, whether it replaces, deletes or creates one of that name (404, never a 409
        // that would confirm the name), and nlp's budget is unchanged.
        for (method, path, body) in [
            (
                "PUT",
                "/v1/objects/budget/nlp-monthly",
                json!({"spec": {"team": "vision", "amount": 1}}),
            ),
            ("DELETE", "/v1/objects/budget/nlp-monthly", json!({})),
            (
                "POST",
                "/v1/objects/budget",
                json!({"name": "nlp-monthly", "spec": {"team": "vision", "amount": 1}}),
            ),
            (
                "POST",
                "/v1/budgets",
                json!({"name": "nlp-monthly", "spec": {"team": "vision", "amount": 1}}),
            ),
        ] {
            let (status, answer) = server.send(method, &vision_admin, path, &body);
            assert_eq!(status, 404, "{method} {path}: {answer}");
            assert_eq!(answer["detail"], "no budget named 'nlp-monthly'");
        }
        let (_, kept) = server.get(&admin, "/v1/objects/budget/nlp-monthly");
        assert_eq!(kept["spec"]["team"], "nlp", "{kept}");
        assert_eq!(kept["spec"]["amount"], 100.0, "{kept}");
        // A read token changes nothing.
        assert_eq!(
            server
                .create_budget(&nlp, "nlp-3", json!({"team": "nlp", "amount": 1}))
                .0,
            403
        );

        // Replace, then delete.
        let (status, body) = server.send(
            "PUT",
            &admin,
            "/v1/budgets/nlp-monthly",
            &json!({"spec": {"team": "nlp", "amount": 40, "thresholds": [90, 100]}}),
        );
        assert_eq!(status, 200, "{body}");
        let (_, body) = server.get(&admin, &format!("/v1/budgets/nlp-monthly/status{at}"));
        // 40.728 of 40 = 101.82 %: over, both thresholds crossed.
        assert_status(&body, 40.728, 610.92, 101.82, "over", json!([90.0, 100.0]));
        let (status, _) = server.send("DELETE", &admin, "/v1/budgets/nlp-monthly", &json!({}));
        assert_eq!(status, 204);
        assert_eq!(server.get(&admin, "/v1/budgets/nlp-monthly").0, 404);
    }
}

/// A local webhook receiver: every request's JSON body, answered 200.
struct Receiver {
    url: String,
    calls: Arc<Mutex<Vec<Value>>>,
}

impl Receiver {
    fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let calls = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&calls);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some((name, value)) = line.split_once(':')
                        && name.eq_ignore_ascii_case("content-length")
                    {
                        length = value.trim().parse().unwrap();
                    }
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                seen.lock()
                    .unwrap()
                    .push(serde_json::from_slice(&body).unwrap());
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                );
            }
        });
        Receiver { url, calls }
    }

    fn calls(&self) -> Vec<Value> {
        self.calls.lock().unwrap().clone()
    }

    /// Waits (up to a minute) until `n` calls came in.
    fn wait_for(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.calls().len() < n && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Lands a GPU-hour cost in the current month: an L4 on a rate card of 1.20 per GPU-hour, held by
/// team nlp (cost center cc-42) for the 10 hours that ended last → 12.00 for nlp (and cc-42,
/// whose spend counts only hours that have ended). `false` (nothing landed) in the first 10 hours
/// of a month, which hold no 10 ended hours of it.
fn land_spend_in_ended_hours(ledger: &Ledger) -> bool {
    use chrono::{Datelike, DurationRound, TimeDelta};
    let now = chrono::Utc::now();
    let end = now.duration_trunc(TimeDelta::hours(1)).unwrap();
    let start = end - TimeDelta::hours(10);
    if start.month() != now.month() {
        eprintln!("skipped: the first 10 hours of a month hold no 10 ended hours of it");
        return false;
    }
    let objects = ledger.dir.path().join("now.yaml");
    std::fs::write(
        &objects,
        "kind: node\nspec: {cluster: now, node: l4-1, gpu_count: 1, gpu_model: NVIDIA L4, capacity_type: on_demand}\n\
         ---\nkind: rate_card\nspec: {gpu_model: NVIDIA L4, capacity_type: on_demand, price_per_gpu_hour: 1.20}\n",
    )
    .unwrap();
    let events = ledger.dir.path().join("now.jsonl");
    let event = |at: chrono::DateTime<chrono::Utc>, event: &str, extra: &str| {
        format!(
            "{{\"ts\":\"{}\",\"event\":\"{event}\",\"cluster\":\"now\",\"node\":\"l4-1\",\
             \"namespace\":\"chat\",\"workload\":\"bot\",\"pod\":\"bot-0\",{extra}\
             \"labels\":{{\"team\":\"nlp\",\"cost_center\":\"cc-42\"}}}}\n",
            at.to_rfc3339()
        )
    };
    std::fs::write(
        &events,
        event(start, "start", "\"gpus\":1,\"gpu_indices\":[0],")
            + &event(end, "stop", "\"reason\":\"finished\","),
    )
    .unwrap();
    run_ok(ledger, &["apply", objects.to_str().unwrap()]);
    run_ok(ledger, &["ingest", "events", events.to_str().unwrap()]);
    let (from, to) = (start.date_naive().to_string(), end.date_naive().to_string());
    run_ok(ledger, &["ledger", "build", "--from", &from, "--to", &to]);
    true
}

#[test]
fn a_crossing_calls_the_webhook_once_across_rounds_and_restarts() {
    for ledger in ledgers() {
        if !land_spend_in_ended_hours(&ledger) {
            return;
        }
        let admin = ledger.token("admin", None);
        let receiver = Receiver::start();
        let server = ledger.serve(&["--budget-interval", "1s"]);
        let backend = ledger.backend;
        // 12.00 of 14 is 85.71 %: 80 is crossed, 100 is not.
        let (status, body) = server.create_budget(
            &admin,
            "nlp-cap",
            json!({"team": "nlp", "amount": 14, "thresholds": [80, 100], "webhook": receiver.url}),
        );
        assert_eq!(status, 201, "[{backend}] {body}");
        // The cost center reads the label of nlp's allocations: the same 12.00, no webhook.
        assert_eq!(
            server
                .create_budget(
                    &admin,
                    "cc-42",
                    json!({"cost_center": "cc-42", "amount": 10})
                )
                .0,
            201
        );
        receiver.wait_for(1);
        // Several more rounds (one a second) record nothing new.
        std::thread::sleep(Duration::from_secs(4));
        let calls = receiver.calls();
        assert_eq!(calls.len(), 1, "[{backend}] {calls:?}");
        let call = &calls[0];
        assert_eq!(call["kind"], "budget_alert");
        assert_eq!(call["budget"], "nlp-cap");
        assert_eq!(call["threshold"], 80.0);
        assert!(close(&call["status"]["spend_to_date"], 12.0), "{call}");
        assert!(
            close(&call["status"]["percent_used"], 1200.0 / 14.0),
            "{call}"
        );
        assert_eq!(call["status"]["thresholds_crossed"], json!([80.0]));

        let (_, alerts) = server.get(&admin, "/v1/budgets/nlp-cap/alerts");
        let alerts = alerts.as_array().unwrap().clone();
        assert_eq!(alerts.len(), 1, "{alerts:?}");
        let month = chrono::Utc::now().format("%Y-%m").to_string();
        assert_eq!(alerts[0]["month"], month.as_str());
        assert_eq!(alerts[0]["threshold"], 80.0);
        assert_eq!(alerts[0]["delivery"], "delivered");
        assert_eq!(alerts[0]["attempts"], 1);
        assert!(close(&alerts[0]["spend_to_date"], 12.0));
        // 12.00 of 10 for cc-42: over, and its alerts recorded without a webhook.
        let (_, status) = server.get(&admin, "/v1/budgets/cc-42/status");
        assert!(close(&status["spend_to_date"], 12.0), "{status}");
        assert_eq!(status["state"], "over");
        let (_, cc_alerts) = server.get(&admin, "/v1/budgets/cc-42/alerts");
        let deliveries: Vec<&Value> = cc_alerts
            .as_array()
            .unwrap()
            .iter()
            .map(|a| &a["delivery"])
            .collect();
        assert_eq!(deliveries, [&json!("none"), &json!("none"), &json!("none")]);

        // A restart evaluates again at once, and still calls nobody twice.
        drop(server);
        let server = ledger.serve(&["--budget-interval", "1s"]);
        std::thread::sleep(Duration::from_secs(3));
        assert_eq!(receiver.calls().len(), 1, "[{backend}] after a restart");
        assert_eq!(
            server
                .get(&admin, "/v1/budgets/nlp-cap/alerts")
                .1
                .as_array()
                .unwrap()
                .len(),
            1
        );
        let metrics = server.metrics();
        assert!(
            metrics.contains("gpuledger_budget_alerts_total 0"),
            "{metrics}"
        );
    }
}
