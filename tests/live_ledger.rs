//! `serve` keeps the ledger current: what lands over HTTP (declared objects, scheduler events)
//! reaches `team_costs`, a budget's status, `/v1/ledger/status` and the lag metric within the
//! configured `--ledger-interval`, with no `gpuledger ledger build`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Server, assert_accepted, exporter, ledgers, protobuf};

fn post_events(server: &Server, token: &str, body: String) {
    let response = server
        .http
        .post(server.url("/v1/ingest/events?tz=UTC"))
        .bearer_auth(token)
        .body(body)
        .send()
        .unwrap();
    assert_accepted(response);
}

fn event(time: &str, event: &str, team: &str, extra: &str) -> String {
    format!(
        "{{\"ts\":\"2026-11-02T{time}Z\",\"event\":\"{event}\",\"cluster\":\"live\",\"node\":\"l4-1\",\
         \"namespace\":\"{team}\",\"workload\":\"job\",\"pod\":\"job-{team}\",{extra}\
         \"labels\":{{\"team\":\"{team}\"}}}}\n"
    )
}

/// nlp holds GPU 0 of l4-1 from 00:00 to 10:00 on 2026-11-02 (10 GPU-hours).
fn nlp_from_midnight_to_ten() -> String {
    event(
        "00:00:00",
        "start",
        "nlp",
        "\"gpus\":1,\"gpu_indices\":[0],",
    ) + &event("10:00:00", "stop", "nlp", "\"reason\":\"finished\",")
}

/// Polls `what` (up to 60 s) until it returns `Some`.
fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(found) = probe() {
            return found;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn team_totals(server: &Server, token: &str) -> Vec<(String, f64)> {
    server
        .rows(
            token,
            "select team, cast(total_cost as double) as total from team_costs('2026-11-02', '2026-11-03') order by team",
        )
        .iter()
        .map(|r| (r["team"].as_str().unwrap().to_string(), r["total"].as_f64().unwrap()))
        .collect()
}

#[test]
fn serve_builds_the_ledger_from_what_lands() {
    for ledger in ledgers() {
        let backend = ledger.backend;
        let admin = ledger.token("admin", None);
        let server = ledger.serve(&["--ledger-interval", "1s", "--budget-interval", "1s"]);
        // One L4 at 1.20 per GPU-hour (the rate card: no bill).
        for (kind, spec) in [
            (
                "node",
                json!({"cluster": "live", "node": "l4-1", "gpu_count": 1, "gpu_model": "NVIDIA L4", "capacity_type": "on_demand"}),
            ),
            (
                "rate_card",
                json!({"gpu_model": "NVIDIA L4", "capacity_type": "on_demand", "price_per_gpu_hour": 1.20}),
            ),
        ] {
            let (status, body) = server.send(
                "POST",
                &admin,
                &format!("/v1/objects/{kind}"),
                &json!({"spec": spec}),
            );
            assert_eq!(status, 201, "[{backend}] {body}");
        }
        let (status, body) =
            server.create_budget(&admin, "nlp-cap", json!({"team": "nlp", "amount": 10}));
        assert_eq!(status, 201, "[{backend}] {body}");

        // nlp holds the GPU 00:00–10:00: 10 GPU-hours × 1.20 = 12.00.
        post_events(&server, &admin, nlp_from_midnight_to_ten());
        let totals = eventually("nlp's 12.00", || {
            let totals = team_totals(&server, &admin);
            (totals == [("nlp".to_string(), 12.0)]).then_some(totals)
        });
        assert_eq!(totals, [("nlp".to_string(), 12.0)], "[{backend}]");
        // The budget reads the rebuilt ledger: 12.00 of 10 in November.
        let status = eventually("the budget over", || {
            let (_, body) =
                server.get(&admin, "/v1/budgets/nlp-cap/status?at=2026-11-03T00:00:00Z");
            (body["state"] == "over").then_some(body)
        });
        assert_eq!(status["spend_to_date"], 12.0, "[{backend}] {status}");

        // Late data: vision takes the GPU 12:00–18:00 (6 × 1.20 = 7.20); only that day's dirty
        // hours are rebuilt, nlp keeps 12.00.
        post_events(
            &server,
            &admin,
            event(
                "12:00:00",
                "start",
                "vision",
                "\"gpus\":1,\"gpu_indices\":[0],",
            ) + &event("18:00:00", "stop", "vision", "\"reason\":\"finished\","),
        );
        let expected = [("nlp".to_string(), 12.0), ("vision".to_string(), 7.2)];
        eventually("vision's 7.20", || {
            (team_totals(&server, &admin) == expected).then_some(())
        });
        // A changed rate card restates every built day: 1.50 → nlp 15.00, vision 9.00.
        let (status, _) = server.send(
            "PUT",
            &admin,
            "/v1/objects/rate_card/NVIDIA%20L4%2Fon_demand",
            &json!({"spec": {"gpu_model": "NVIDIA L4", "capacity_type": "on_demand", "price_per_gpu_hour": 1.50}}),
        );
        assert!(status == 200 || status == 201, "[{backend}] {status}");
        let restated = [("nlp".to_string(), 15.0), ("vision".to_string(), 9.0)];
        eventually("the new rate", || {
            (team_totals(&server, &admin) == restated).then_some(())
        });
        // Those reads went through the files `serve` keeps decoded (--decoded-cache-mb), yet
        // each saw the files the catalog listed at the time: the late day and the restated
        // rate, not the files they replaced.
        assert!(
            server.gauge("decoded_cache_bytes") > 0,
            "[{backend}] nothing decoded"
        );
        assert!(
            server.gauge("decoded_cache_files") > 0,
            "[{backend}] nothing decoded"
        );
        // The day balances: the rate card prices the GPU time the ledger sees (no telemetry
        // here: the 16 allocated hours), 16 × 1.50 = 24.00 = 15.00 + 9.00.
        let (_, balance) = server.get(&admin, "/v1/ledger/balance?from=2026-11-02&to=2026-11-03");
        assert_eq!(balance["accounted"], 24.0, "[{backend}] {balance}");
        assert_eq!(balance["balanced"], true, "[{backend}] {balance}");

        // Current: status and the lag metric say so once a round has run after the last input.
        let status: Value = eventually("a current ledger", || {
            let (_, status) = server.get(&admin, "/v1/ledger/status");
            (status["lag_seconds"] == 0.0 && status["last_round"]["error"].is_null())
                .then_some(status)
        });
        assert_eq!(
            status["built_through"], "2026-11-02",
            "[{backend}] {status}"
        );
        assert_eq!(status["interval_seconds"], 1.0);
        eventually("the lag metric at 0", || {
            let metrics = server.metrics();
            (metrics.contains("gpuledger_ledger_lag_seconds 0.0")
                && metrics.contains("gpuledger_ledger_rounds_total{outcome=\"built\"}"))
            .then_some(())
        });
    }
}

/// The scheduled weekly export of last week, with telemetry-free inputs that land over HTTP
/// after the last ledger round and before the export fires: the export waits for the ledger to
/// take them in, so the report carries the hand-worked figures, not the stale ledger's.
#[test]
fn the_weekly_export_waits_for_a_current_ledger() {
    let ledger = ledgers().remove(0);
    let dir = tempfile::tempdir().unwrap();
    let objects = dir.path().join("objects.yaml");
    std::fs::write(
        &objects,
        "kind: node\nspec: {cluster: live, node: l4-1, gpu_count: 1, gpu_model: NVIDIA L4, capacity_type: on_demand}\n\
         ---\nkind: rate_card\nspec: {gpu_model: NVIDIA L4, capacity_type: on_demand, price_per_gpu_hour: 1.20}\n",
    )
    .unwrap();
    let out = ledger.run(&["apply", objects.to_str().unwrap()]);
    assert!(out.status.success(), "{}", crate::support::describe(&out));

    // One firing, 15 s from now (the cron year field keeps it from having fired before): it
    // exports the ISO week before the firing's.
    let fires = chrono::Utc::now() + chrono::TimeDelta::seconds(15);
    let schedule = fires.format("%S %M %H %d %m * %Y").to_string();
    let monday = fires.date_naive().week(chrono::Weekday::Mon).first_day() - chrono::Days::new(7);
    let week = monday.format("%G-W%V").to_string();
    let admin = ledger.token("admin", None);
    // The only round before the firing runs at start, on an empty lake.
    let server = ledger.serve(&["--ledger-interval", "1h", "--report-schedule", &schedule]);
    // nlp holds the GPU 00:00–10:00 on last week's Monday: 10 GPU-hours × 1.20 = 12.00.
    let day = monday.format("%Y-%m-%d").to_string();
    post_events(
        &server,
        &admin,
        nlp_from_midnight_to_ten().replace("2026-11-02", &day),
    );
    assert!(
        chrono::Utc::now() < fires,
        "serve took over 15 s to start: the export fired before the events landed"
    );
    let run = eventually("the export of last week", || {
        let (_, runs) = server.get(&admin, "/v1/reports/runs");
        let run = runs
            .as_array()?
            .iter()
            .find(|r| r["week"] == week.as_str())?;
        (run["status"] == "succeeded").then(|| run.clone())
    });
    assert_eq!(run["attempts"], 1, "{run}");
    let report: Value = serde_json::from_slice(
        &std::fs::read(
            ledger
                .data_dir()
                .join(format!("reports/weekly/{week}/report.json")),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        (
            &report["utilization"]["allocated_gpu_hours"],
            &report["utilization"]["gpu_cost"]
        ),
        (&json!(10.0), &json!(12.0)),
        "{}",
        report["utilization"]
    );
}

/// Every input of one day over HTTP into a running `serve`: an hourly bill, scheduler events,
/// remote-write pushes and a scrape target. Worked by hand, for one L4 (node l4-1) billed 24.00
/// for 2026-11-02, so 1.00 per GPU-hour:
/// - nlp holds the GPU 00:00–10:00 (events); SM activity is 0.9 until 06:00 and 0.01 after
///   (remote-write until 12:00, the scrape target from 12:00).
/// - busy 00–06: 6 h, 6.00; allocated idle 06–10: 4 h, 4.00 (nlp's); unexplained 10–24: 14 h,
///   14.00; no faults. nlp's cost is 10.00, over its budget of 8; the day accounts for 24.00.
#[test]
fn every_input_over_http_reaches_the_ledger_without_a_build() {
    let ledger = ledgers().remove(0);
    let admin = ledger.token("admin", None);
    let server = ledger.serve(&["--ledger-interval", "1s", "--budget-interval", "1s"]);
    let (status, body) = server.send(
        "POST",
        &admin,
        "/v1/objects/node",
        &json!({"spec": {"cluster": "live", "node": "l4-1", "resource_id": "i-l4", "gpu_count": 1,
                         "gpu_model": "NVIDIA L4", "capacity_type": "on_demand"}}),
    );
    assert_eq!(status, 201, "{body}");
    let (status, body) =
        server.create_budget(&admin, "nlp-cap", json!({"team": "nlp", "amount": 8}));
    assert_eq!(status, 201, "{body}");

    // Telemetry: one sample a minute, SM activity and temperature.
    let midnight_ms: i64 = 1_793_577_600_000; // 2026-11-02T00:00:00Z
    let sm_active = |minute: i64| if minute < 6 * 60 { 0.9 } else { 0.01 };
    let gpu = |name| {
        vec![
            ("__name__", name),
            ("Hostname", "l4-1"),
            ("UUID", "GPU-l4"),
            ("gpu", "0"),
            ("modelName", "NVIDIA L4"),
        ]
    };
    // Remote-write, one push per hour of the morning.
    for hour in 0..12 {
        let minutes: Vec<i64> = (hour * 60..(hour + 1) * 60).collect();
        let at = |m: &i64| midnight_ms + m * 60_000;
        let mut request = Vec::new();
        for series in [
            protobuf::time_series(
                &gpu("DCGM_FI_PROF_SM_ACTIVE"),
                &minutes
                    .iter()
                    .map(|m| (sm_active(*m), at(m)))
                    .collect::<Vec<_>>(),
            ),
            protobuf::time_series(
                &gpu("DCGM_FI_DEV_GPU_TEMP"),
                &minutes.iter().map(|m| (40.0, at(m))).collect::<Vec<_>>(),
            ),
        ] {
            protobuf::bytes(&mut request, 1, &series);
        }
        server.remote_write(&admin, "live", &request);
    }
    // The afternoon from a scrape target whose exposition carries its samples' times.
    let labels = "gpu=\"0\",UUID=\"GPU-l4\",Hostname=\"l4-1\",modelName=\"NVIDIA L4\"";
    let afternoon: String = (12 * 60..24 * 60)
        .map(|m: i64| {
            let ms = midnight_ms + m * 60_000;
            format!("DCGM_FI_PROF_SM_ACTIVE{{{labels}}} 0.01 {ms}\nDCGM_FI_DEV_GPU_TEMP{{{labels}}} 38 {ms}\n")
        })
        .collect();
    let (url, scrapes) = exporter(&afternoon);
    let (status, body) = server.send(
        "POST",
        &admin,
        "/v1/objects/scrape_target",
        &json!({"name": "l4-1", "spec": {"url": url, "interval": "1s", "cluster": "live"}}),
    );
    assert_eq!(status, 201, "{body}");
    post_events(&server, &admin, nlp_from_midnight_to_ten());
    let bill = "BillingAccountId,BillingAccountName,BillingCurrency,BillingPeriodStart,BillingPeriodEnd,\
        ChargePeriodStart,ChargePeriodEnd,ChargeCategory,ChargeClass,ChargeDescription,BilledCost,EffectiveCost,\
        ListCost,ContractedCost,PricingQuantity,PricingUnit,ProviderName,PublisherName,InvoiceIssuerName,\
        ServiceCategory,ServiceName,ResourceId,Tags\n\
        live,Live,USD,2026-11-01T00:00:00Z,2026-12-01T00:00:00Z,2026-11-02T00:00:00Z,2026-11-03T00:00:00Z,\
        Usage,,g6 instance l4-1,24.00,24.00,24.00,24.00,24,Hours,AWS,AWS,AWS,Compute,Amazon EC2,\
        arn:aws:ec2:us-east-1:123456789012:instance/i-l4,\n";
    let response = server
        .http
        .post(server.url("/v1/ingest/focus"))
        .bearer_auth(&admin)
        .body(bill)
        .send()
        .unwrap();
    assert_eq!(
        response.status().as_u16(),
        202,
        "{}",
        response.text().unwrap()
    );

    let classes = |server: &Server| {
        server.rows(
            &admin,
            "select class, cast(gpu_hours as double) as hours, cast(cost as double) as cost \
                 from idle_summary('2026-11-02', '2026-11-03') order by class",
        )
    };
    let expected = vec![
        json!({"class": "allocated_idle", "hours": 4.0, "cost": 4.0}),
        json!({"class": "busy", "hours": 6.0, "cost": 6.0}),
        json!({"class": "fault", "hours": 0.0, "cost": 0.0}),
        json!({"class": "unexplained", "hours": 14.0, "cost": 14.0}),
    ];
    let seen = eventually("the day's classes", || {
        let seen = classes(&server);
        (seen == expected).then_some(seen)
    });
    assert_eq!(seen, expected);
    // The afternoon's hours are unexplained with or without its telemetry (the bill covers
    // them): the scrape may come after the classes are right, so it is waited for too.
    eventually("a scrape of the target", || {
        (scrapes.load(std::sync::atomic::Ordering::SeqCst) >= 1).then_some(())
    });
    assert_eq!(team_totals(&server, &admin), [("nlp".to_string(), 10.0)]);
    let status = eventually("the budget over", || {
        let (_, body) = server.get(&admin, "/v1/budgets/nlp-cap/status?at=2026-11-03T00:00:00Z");
        (body["state"] == "over").then_some(body)
    });
    assert_eq!(status["spend_to_date"], 10.0, "{status}");
    let (_, balance) = server.get(&admin, "/v1/ledger/balance?from=2026-11-02&to=2026-11-03");
    assert_eq!(
        (&balance["accounted"], &balance["balanced"]),
        (&json!(24.0), &json!(true)),
        "{balance}"
    );
    // The scrape target goes on answering the same samples: they land once, and the ledger
    // catches up to its newest input (lag 0).
    let samples = || server.rows(&admin, "select count(*) as n from gpu_samples");
    let day = [json!({"n": 24 * 60})];
    eventually("the afternoon's samples", || {
        (samples() == day).then_some(())
    });
    let scraped = scrapes.load(std::sync::atomic::Ordering::SeqCst);
    eventually("two scrapes more", || {
        (scrapes.load(std::sync::atomic::Ordering::SeqCst) >= scraped + 2).then_some(())
    });
    eventually("the lag metric at 0", || {
        let metrics = server.metrics();
        metrics
            .contains("gpuledger_ledger_lag_seconds 0.0")
            .then_some(())
    });
    assert_eq!(samples(), day);
}
