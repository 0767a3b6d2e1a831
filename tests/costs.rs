//! The cost endpoints over HTTP on the worked example (docs/ledger.md): `/v1/costs` by window
//! and dimension, the table functions over a window, their validation, and team scoping.
//!
//! The GPU-hour ledger of 2026-11-02, worked out from the example: n1's H100 GPUs cost
//! 96 × 0.8 / 2 / 24 = 1.60 per GPU-hour; n2's L4 is 1.20 per GPU-hour (rate card) for the two
//! hours its telemetry saw it (00:00–02:00).
//! - nlp (ml/serve, model llama-3-8b): 12 GPU-h × 1.60 = 19.20;
//! - vision (ml/train): 6 GPU-h × 1.60 = 9.60;
//! - unattributed (ml/promo on the L4, 00:00–01:00): 1 GPU-h × 1.20 = 1.20;
//! - unallocated: H100 48 − 18 = 30 GPU-h × 1.60 = 48.00, and the L4's second hour 1.20: 31 GPU-h,
//!   49.20, of which fault 4 GPU-h (n1 down 20:00–22:00, 2 GPUs) = 6.40, reserved (warm pool
//!   12:00–18:00, 1 GPU) 9.60, unexplained 20 × 1.60 + 1.20 = 33.20.

use serde_json::Value;

use crate::golden::load_worked_example;
use crate::support::ledgers;

fn close(actual: &Value, expected: f64) -> bool {
    actual.as_f64().is_some_and(|a| (a - expected).abs() < 1e-6)
}

fn assert_group(group: &Value, cost: f64, allocated_gpu_hours: f64, gpu_hours: f64) {
    assert!(close(&group["cost"], cost), "{group}");
    assert!(
        close(&group["allocated_gpu_hours"], allocated_gpu_hours),
        "{group}"
    );
    assert!(close(&group["gpu_hours"], gpu_hours), "{group}");
}

#[test]
fn costs_by_window_and_dimension() {
    for ledger in ledgers() {
        load_worked_example(&ledger);
        let reader = ledger.token("read", None);
        let nlp = ledger.token("read", Some("nlp"));
        let server = ledger.serve(&[]);
        let backend = ledger.backend;

        let (status, body) = server.get(
            &reader,
            "/v1/costs?from=2026-11-01&to=2026-12-01&aggregate=team&step=day",
        );
        assert_eq!(status, 200, "[{backend}] {body}");
        assert_eq!(body["from"], "2026-11-01T00:00:00Z");
        assert_eq!(body["to"], "2026-12-01T00:00:00Z");
        assert_eq!(body["step"], "day");
        assert_eq!(body["aggregate"], serde_json::json!(["team"]));
        let windows = body["windows"].as_array().unwrap();
        assert_eq!(windows.len(), 1, "only the day with costs: {body}");
        assert_eq!(windows[0]["start"], "2026-11-02T00:00:00Z");
        assert_eq!(windows[0]["end"], "2026-11-03T00:00:00Z");
        let groups = windows[0]["groups"].as_object().unwrap();
        let names: Vec<&str> = groups.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            ["__unallocated__", "nlp", "unattributed", "vision"],
            "[{backend}]"
        );
        assert_group(&groups["nlp"], 19.2, 12.0, 12.0);
        assert_eq!(groups["nlp"]["name"], "nlp");
        assert_eq!(
            groups["nlp"]["properties"],
            serde_json::json!({"team": "nlp"})
        );
        assert_group(&groups["vision"], 9.6, 6.0, 6.0);
        assert_group(&groups["unattributed"], 1.2, 1.0, 1.0);
        let unallocated = &groups["__unallocated__"];
        assert_group(unallocated, 49.2, 0.0, 31.0);
        assert_eq!(unallocated["properties"], serde_json::json!({"team": null}));
        assert!(close(&unallocated["cost_fault"], 6.4));
        assert!(close(&unallocated["cost_reserved"], 9.6));
        assert!(close(&unallocated["cost_unexplained"], 33.2));

        // A month step clipped to the window; two dimensions name a group by both values.
        let (status, body) = server.get(
            &reader,
            "/v1/costs?from=2026-11-02&to=2026-11-03T00:00:00Z&aggregate=namespace,team&step=month",
        );
        assert_eq!(status, 200, "{body}");
        let window = &body["windows"][0];
        assert_eq!(window["start"], "2026-11-02T00:00:00Z");
        assert_eq!(window["end"], "2026-11-03T00:00:00Z");
        assert_group(&window["groups"]["ml/nlp"], 19.2, 12.0, 12.0);
        assert_eq!(
            window["groups"]["ml/nlp"]["properties"],
            serde_json::json!({"namespace": "ml", "team": "nlp"})
        );
        assert_group(
            &window["groups"]["__unallocated__/__unallocated__"],
            49.2,
            0.0,
            31.0,
        );

        // The model label comes from the workload's allocations; filters narrow first.
        let (status, body) = server.get(
            &reader,
            "/v1/costs?from=2026-11-01&to=2026-12-01&aggregate=model&filter=team:nlp,team:vision",
        );
        assert_eq!(status, 200, "{body}");
        let groups = body["windows"][0]["groups"].as_object().unwrap();
        let names: Vec<&str> = groups.keys().map(String::as_str).collect();
        // vision's training run has no model label.
        assert_eq!(names, ["__unallocated__", "llama-3-8b"]);
        assert_group(&groups["llama-3-8b"], 19.2, 12.0, 12.0);
        assert_group(&groups["__unallocated__"], 9.6, 6.0, 6.0);

        // Any attribution label the ledger keeps, as label:<key>, to group and to filter:
        // vision's run is training (6 GPU-hours, 9.60), nlp's serving inference (12, 19.20).
        let (status, body) = server.get(
            &reader,
            "/v1/costs?from=2026-11-01&to=2026-12-01&aggregate=label:workload_type&filter=team:nlp,team:vision",
        );
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["aggregate"], serde_json::json!(["workload_type"]));
        let groups = body["windows"][0]["groups"].as_object().unwrap();
        let names: Vec<&str> = groups.keys().map(String::as_str).collect();
        assert_eq!(names, ["inference", "training"]);
        assert_group(&groups["inference"], 19.2, 12.0, 12.0);
        assert_group(&groups["training"], 9.6, 6.0, 6.0);
        let (status, body) = server.get(
            &reader,
            "/v1/costs?from=2026-11-01&to=2026-12-01&aggregate=team&filter=label:workload_type:training",
        );
        assert_eq!(status, 200, "{body}");
        let groups = body["windows"][0]["groups"].as_object().unwrap();
        assert_eq!(groups.keys().collect::<Vec<_>>(), ["vision"]);

        // Absurd windows are fine: only windows with costs are listed.
        let (status, body) = server.get(
            &reader,
            "/v1/costs?from=0001-01-01&to=9999-12-31&aggregate=node&step=week",
        );
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["windows"].as_array().unwrap().len(), 1);
        // 2026-11-02 is a Monday: the ISO week starts that day.
        assert_eq!(body["windows"][0]["start"], "2026-11-02T00:00:00Z");
        assert_eq!(body["windows"][0]["end"], "2026-11-09T00:00:00Z");

        // A team token sees its team's hours only, whatever it asks for.
        let (status, body) = server.get(
            &nlp,
            "/v1/costs?from=2026-11-01&to=2026-12-01&aggregate=team,namespace",
        );
        assert_eq!(status, 200, "{body}");
        let groups = body["windows"][0]["groups"].as_object().unwrap();
        assert_eq!(groups.keys().collect::<Vec<_>>(), ["nlp/ml"]);
        let (status, body) = server.get(
            &nlp,
            "/v1/costs?from=2026-11-01&to=2026-12-01&filter=team:vision",
        );
        assert_eq!(
            (status, body["windows"].clone()),
            (200, serde_json::json!([]))
        );

        // Invalid parameters: 400, problem+json naming the parameter.
        for (query, detail) in [
            (
                "from=2026-13-01&to=2026-12-01",
                "from: '2026-13-01' is not a date (2026-11-01) or an RFC 3339 time (2026-11-01T00:00:00Z)",
            ),
            (
                "from=2026-11-01&to=2026-11-01",
                "to: must be after from (the window is [from, to))",
            ),
            (
                "from=2026-11-01&to=2026-12-01&aggregate=colour",
                "aggregate: 'colour' is not one of cluster, node, team, namespace, workload, model, cost_center, environment, workload_type, or label:<key>",
            ),
            (
                "from=2026-11-01&to=2026-12-01&aggregate=label:app",
                "aggregate: 'label:app': the ledger keeps the attribution labels model, cost_center, environment, workload_type",
            ),
            (
                "from=2026-11-01&to=2026-12-01&step=hour",
                "step: 'hour' is not one of day, week, month",
            ),
            (
                "from=2026-11-01&to=2026-12-01&filter=nlp",
                "filter: 'nlp' is not dimension:value, e.g. team:nlp",
            ),
        ] {
            let response = server
                .http
                .get(server.url(&format!("/v1/costs?{query}")))
                .bearer_auth(&reader)
                .send()
                .unwrap();
            assert_eq!(response.status().as_u16(), 400, "{query}");
            assert_eq!(
                response.headers()["content-type"],
                "application/problem+json"
            );
            let body: Value = response.json().unwrap();
            assert_eq!(body["detail"], detail, "{query}");
        }
        let (status, body) = server.get(&reader, "/v1/costs?to=2026-12-01");
        assert_eq!(status, 400);
        assert!(body["detail"].as_str().unwrap().contains("from"), "{body}");
    }
}

#[test]
fn table_functions_over_a_window() {
    for ledger in ledgers() {
        load_worked_example(&ledger);
        let reader = ledger.token("read", None);
        let nlp = ledger.token("read", Some("nlp"));
        let vision = ledger.token("read", Some("vision"));
        let server = ledger.serve(&[]);
        let window = "from=2026-11-01&to=2026-12-01";

        // idle_summary: the unallocated hours above by class.
        let (status, rows) = server.get(&reader, &format!("/v1/idle?{window}"));
        assert_eq!(status, 200, "{rows}");
        let cost_of = |class: &str| -> f64 {
            rows.as_array()
                .unwrap()
                .iter()
                .filter(|r| r["class"] == class)
                .map(|r| r["cost"].as_f64().unwrap())
                .sum()
        };
        assert!((cost_of("unexplained") - 33.2).abs() < 1e-6, "{rows}");
        assert!((cost_of("fault") - 6.4).abs() < 1e-6, "{rows}");

        // Team rows: each team token sees its own only (vision trains, nlp serves).
        let teams = |token: &str, path: &str| -> Vec<String> {
            let (status, rows) = server.get(token, &format!("{path}?{window}"));
            assert_eq!(status, 200, "{path}: {rows}");
            let mut teams: Vec<String> = rows
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["team"].as_str().unwrap().to_string())
                .collect();
            teams.dedup();
            teams
        };
        assert_eq!(teams(&reader, "/v1/unit-economics"), ["nlp"]);
        assert_eq!(teams(&nlp, "/v1/unit-economics"), ["nlp"]);
        assert_eq!(teams(&vision, "/v1/unit-economics"), Vec::<String>::new());
        assert_eq!(teams(&reader, "/v1/training-economics"), ["vision"]);
        assert_eq!(teams(&vision, "/v1/training-economics"), ["vision"]);
        assert_eq!(teams(&nlp, "/v1/training-economics"), Vec::<String>::new());

        // Rows that belong to no team are refused to a team token.
        for path in ["/v1/idle", "/v1/spot-savings", "/v1/value-report"] {
            let (status, body) = server.get(&nlp, &format!("{path}?{window}"));
            assert_eq!(status, 403, "{path}: {body}");
            let (status, body) = server.get(&reader, &format!("{path}?{window}"));
            assert_eq!(status, 200, "{path}: {body}");
            assert!(body.is_array());
        }

        // Absurd windows: answered at once, or refused where the function walks day by day.
        let absurd = "from=0001-01-01&to=9999-12-31";
        for path in [
            "/v1/idle",
            "/v1/unit-economics",
            "/v1/training-economics",
            "/v1/spot-savings",
        ] {
            let (status, body) = server.get(&reader, &format!("{path}?{absurd}"));
            assert_eq!(status, 200, "{path}: {body}");
        }
        let (status, body) = server.get(&reader, &format!("/v1/value-report?{absurd}"));
        assert_eq!(status, 400);
        assert_eq!(
            body["detail"],
            "to: the window may span at most 366 days (it is evaluated day by day)"
        );
        let (status, body) = server.get(&reader, "/v1/idle?from=yesterday&to=2026-12-01");
        assert_eq!(status, 400);
        assert_eq!(
            body["detail"],
            "from: 'yesterday' is not a date (2026-11-01) or an RFC 3339 time (2026-11-01T00:00:00Z)"
        );
    }
}
