//! `gpuledger serve`: the real binary over HTTP — tokens and scopes, SQL in every format, team
//! scoping that no query gets around, refusals and limits, catalog objects, health and metrics.

use serde_json::{Value, json};

use crate::golden::load_worked_example;
use crate::support::{Server, ledgers};

/// The team totals of the worked example (tests/sql/team_costs.slt): nlp 40.728, unattributed
/// 5.208, vision 23.064.
const TEAM_COSTS: &str = "select team, round(total_cost, 3) as total from \
    team_costs('2026-11-02', '2026-11-03') order by team";

fn totals(rows: &[Value]) -> Vec<(String, f64)> {
    rows.iter()
        .map(|r| {
            (
                r["team"].as_str().unwrap().to_string(),
                r["total"].as_f64().unwrap(),
            )
        })
        .collect()
}

fn problem(server: &Server, token: &str, query: &str) -> (u16, String, String) {
    let (status, body) = server.sql(token, query);
    (
        status,
        body["title"].as_str().unwrap_or_default().to_string(),
        body["detail"].as_str().unwrap_or_default().to_string(),
    )
}

#[test]
fn tokens_scopes_and_team_scoping_over_http() {
    for ledger in ledgers() {
        load_worked_example(&ledger);
        let admin = ledger.token("admin", None);
        let reader = ledger.token("read", None);
        let nlp = ledger.token("read", Some("nlp"));
        let collector = ledger.token("ingest", None);
        let server = ledger.serve(&[]);
        let backend = ledger.backend;

        // No token, a wrong token, a token of the wrong scope.
        let anonymous = server
            .http
            .post(server.url("/v1/sql"))
            .json(&json!({"query": "select 1"}))
            .send()
            .unwrap();
        assert_eq!(anonymous.status().as_u16(), 401, "[{backend}]");
        assert_eq!(
            anonymous.headers()["content-type"],
            "application/problem+json"
        );
        assert_eq!(server.sql("glt_0000_nonsense", "select 1").0, 401);
        let (status, _, detail) = problem(&server, &collector, "select 1");
        assert_eq!(status, 403);
        assert_eq!(
            detail,
            "this token's scope does not allow queries (it needs a 'read' token; this one is 'ingest')"
        );

        // Everyone's view, and the team's: the same numbers, fewer rows.
        let all = totals(&server.rows(&reader, TEAM_COSTS));
        let expected = [("nlp", 40.728), ("unattributed", 5.208), ("vision", 23.064)];
        assert_eq!(
            all,
            expected.map(|(t, c)| (t.to_string(), c)).to_vec(),
            "[{backend}]"
        );
        assert_eq!(
            totals(&server.rows(&nlp, TEAM_COSTS)),
            vec![("nlp".to_string(), 40.728)]
        );
        assert_eq!(totals(&server.rows(&admin, TEAM_COSTS)), all);

        // Ways around the scope: each sees nlp's rows, or nothing.
        let ways_around = [
            (
                "select distinct team from gpu_hours where team is not null or team is null",
                &["nlp"][..],
            ),
            (
                "select distinct team from allocations union select distinct team from cost_entries \
                 where team is not null",
                &["nlp"],
            ),
            // The subquery resolves `gpu_hours` to the same view: vision's hours are not there.
            (
                "select distinct team from gpu_hours where hour in \
                 (select hour from gpu_hours where team = 'vision')",
                &[],
            ),
            (
                "select distinct team from team_costs('2026-11-01', '2026-12-01') \
                 union select distinct team from unit_economics('2026-11-01', '2026-12-01')",
                &["nlp"],
            ),
            (
                "select distinct team from gpuledger.public.cost_entries where team is not null",
                &["nlp"],
            ),
        ];
        for (query, expected) in ways_around {
            let teams: Vec<Value> = server
                .rows(&nlp, query)
                .into_iter()
                .map(|r| r["team"].clone())
                .collect();
            assert_eq!(teams, expected.to_vec(), "[{backend}] {query}");
        }
        for query in [
            "select * from billing_lines",
            "select * from system.files",
            "select * from quarantine",
            "select * from idle_summary('2026-11-02', '2026-11-03')",
        ] {
            let (status, _, detail) = problem(&server, &nlp, query);
            assert_eq!(status, 400, "[{backend}] {query}: {detail}");
        }
        let listed = server.rows(
            &nlp,
            "select count(*) as n from information_schema.tables where table_name = 'billing_lines'",
        );
        assert_eq!(listed[0]["n"], 0);

        // Only queries; the refusals come before anything runs.
        for query in [
            "CREATE EXTERNAL TABLE pw (line varchar) STORED AS CSV LOCATION '/etc/passwd'",
            "COPY (select * from gpu_hours) TO '/tmp/gpuledger-leak.csv' STORED AS CSV",
            "SET datafusion.execution.target_partitions = 1",
        ] {
            let (status, title, detail) = problem(&server, &admin, query);
            assert_eq!(
                (status, title.as_str()),
                (403, "Not a read-only query"),
                "{query}"
            );
            assert!(
                detail.starts_with("only read-only queries are allowed"),
                "{detail}"
            );
        }
        assert!(!std::path::Path::new("/tmp/gpuledger-leak.csv").exists());

        // A syntax error names itself; an unknown table is a 400 with its SQLSTATE.
        let (status, body) = server.sql(&reader, "selec 1");
        assert_eq!((status, body["sqlstate"].as_str()), (400, Some("42601")));
        let (status, body) = server.sql(&reader, "select * from no_such_table");
        assert_eq!((status, body["sqlstate"].as_str()), (400, Some("42P01")));
    }
}

#[test]
fn a_query_past_its_memory_limit_fails_cleanly_and_the_service_goes_on() {
    let ledger = ledgers().remove(0);
    let reader = ledger.token("read", None);
    let server = ledger.serve(&["--query-memory-mb", "16"]);
    // A cross join of 3 M × 3 M rows: its build side alone is 3 M values (24 MB), past 16 MiB.
    let (status, body) = server.sql(
        &reader,
        "select sum(a.value + b.value) from generate_series(1, 3000000) a \
         cross join generate_series(1, 3000000) b",
    );
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["title"], "Query memory limit exceeded");
    assert_eq!(body["sqlstate"], "53200");
    assert_eq!(server.rows(&reader, "select 1 + 1 as two")[0]["two"], 2);
}

#[test]
fn sql_answers_in_json_csv_arrow_and_parquet() {
    let ledger = ledgers().remove(0);
    let reader = ledger.token("read", None);
    let server = ledger.serve(&[]);
    let query = "select value as n, value * 1.5 as x, 'g' || value as s, \
        case when value = 2 then null else value end as maybe \
        from generate_series(1, 3) order by n";
    let fetch = |format: Option<&str>, accept: Option<&str>| {
        let mut body = json!({ "query": query });
        if let Some(format) = format {
            body["format"] = json!(format);
        }
        let mut request = server
            .http
            .post(server.url("/v1/sql"))
            .bearer_auth(&reader)
            .json(&body);
        if let Some(accept) = accept {
            request = request.header("accept", accept);
        }
        let response = request.send().unwrap();
        let status = response.status().as_u16();
        let media = response.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_string();
        (status, media, response.bytes().unwrap())
    };

    let (status, media, body) = fetch(None, None);
    assert_eq!((status, media.as_str()), (200, "application/json"));
    let rows: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        rows,
        json!([
            {"n": 1, "x": 1.5, "s": "g1", "maybe": 1},
            {"n": 2, "x": 3.0, "s": "g2", "maybe": null},
            {"n": 3, "x": 4.5, "s": "g3", "maybe": 3}
        ])
    );

    let (_, media, body) = fetch(Some("csv"), None);
    assert_eq!(media, "text/csv; charset=utf-8");
    assert_eq!(
        std::str::from_utf8(&body).unwrap(),
        "n,x,s,maybe\n1,1.5,g1,1\n2,3.0,g2,\n3,4.5,g3,3\n"
    );

    let (_, media, body) = fetch(None, Some("application/vnd.apache.arrow.stream"));
    assert_eq!(media, "application/vnd.apache.arrow.stream");
    let reader_ipc =
        arrow::ipc::reader::StreamReader::try_new(std::io::Cursor::new(body), None).unwrap();
    let batches: Vec<_> = reader_ipc.map(Result::unwrap).collect();
    assert_eq!(
        batches
            .iter()
            .map(arrow::array::RecordBatch::num_rows)
            .sum::<usize>(),
        3
    );
    assert_eq!(batches[0].schema().field(2).name(), "s");

    let (_, media, body) = fetch(Some("parquet"), None);
    assert_eq!(media, "application/vnd.apache.parquet");
    let parquet = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(body)
        .unwrap()
        .build()
        .unwrap();
    let rows: usize = parquet.map(|b| b.unwrap().num_rows()).sum();
    assert_eq!(rows, 3);

    let (status, media, _) = fetch(None, Some("image/png"));
    assert_eq!((status, media.as_str()), (406, "application/problem+json"));
    let (status, _, body) = fetch(Some("xml"), None);
    assert_eq!(status, 422);
    assert!(
        String::from_utf8_lossy(&body)
            .contains("format: 'xml' is not one of json, csv, arrow, parquet")
    );
}

#[test]
fn catalog_objects_over_rest() {
    let ledger = ledgers().remove(0);
    let admin = ledger.token("admin", None);
    let reader = ledger.token("read", None);
    let vision = ledger.token("admin", Some("vision"));
    let server = ledger.serve(&[]);
    let url = |path: &str| server.url(path);
    let reservation = json!({
        "name": "warm-pool",
        "spec": {"cluster": "demo", "node": "n1", "gpu_indices": [0], "reason": "warm_pool",
                 "from": "2026-11-02T00:00:00Z", "to": "2026-11-09T00:00:00Z"}
    });
    let created = server
        .http
        .post(url("/v1/objects/reservation"))
        .bearer_auth(&admin)
        .json(&reservation)
        .send()
        .unwrap();
    let status = created.status().as_u16();
    let body: Value = created.json().unwrap();
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["name"], "warm-pool");
    assert_eq!(body["kind"], "reservation");

    let again = server
        .http
        .post(url("/v1/objects/reservation"))
        .bearer_auth(&admin)
        .json(&reservation)
        .send()
        .unwrap();
    assert_eq!(again.status().as_u16(), 409);

    // Validation names the field.
    let bad = json!({"name": "bad", "spec": {"cluster": "demo", "node": "n1", "reason": "warm_pool", "from": "yesterday", "to": "2026-11-09T00:00:00Z"}});
    let invalid = server
        .http
        .post(url("/v1/objects/reservation"))
        .bearer_auth(&admin)
        .json(&bad)
        .send()
        .unwrap();
    assert_eq!(invalid.status().as_u16(), 422);
    let detail = invalid.json::<Value>().unwrap()["detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        detail.starts_with("spec.from: 'yesterday' is not an RFC 3339 time"),
        "{detail}"
    );

    // A reader reads, but does not write.
    let listed: Value = server
        .get_as(&reader, "/v1/objects/reservation")
        .json()
        .unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    let refused = server
        .http
        .delete(url("/v1/objects/reservation/warm-pool"))
        .bearer_auth(&reader)
        .send()
        .unwrap();
    assert_eq!(refused.status().as_u16(), 403);

    // PUT replaces. A reservation belongs to no team: a team's token neither sees nor changes it.
    let mut replaced = reservation["spec"].clone();
    replaced["gpu_indices"] = json!([0, 1]);
    let put = |token: &str| {
        server
            .http
            .put(url("/v1/objects/reservation/warm-pool"))
            .bearer_auth(token)
            .json(&json!({"spec": replaced}))
            .send()
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(put(&vision), 403);
    assert_eq!(put(&admin), 200);
    let got: Value = server
        .get_as(&reader, "/v1/objects/reservation/warm-pool")
        .json()
        .unwrap();
    assert_eq!(got["spec"]["gpu_indices"], json!([0, 1]));
    let hidden = server.get_as(&vision, "/v1/objects/reservation/warm-pool");
    assert_eq!(hidden.status().as_u16(), 404);
    let unknown = server.get_as(&reader, "/v1/objects/spaceship");
    assert_eq!(unknown.status().as_u16(), 404);

    let deleted = server
        .http
        .delete(url("/v1/objects/reservation/warm-pool"))
        .bearer_auth(&admin)
        .send()
        .unwrap();
    assert_eq!(deleted.status().as_u16(), 204);
    let gone = server.get_as(&reader, "/v1/objects/reservation/warm-pool");
    assert_eq!(gone.status().as_u16(), 404);
}

/// A server stopped (SIGTERM) while its background rounds run (the live ledger, compaction and
/// the budget evaluator, each every 10 ms, over the worked example and a budget) exits 0 and logs
/// no failure: the rounds are stopped before the runtime goes, not cancelled under each other by
/// its teardown, and the leases of rounds cut short are freed, so the next server builds at once.
/// A `0s` interval turns a loop off (the budget evaluator's used to panic).
#[test]
fn a_server_stopped_mid_round_exits_cleanly_and_quietly() {
    for ledger in ledgers() {
        let backend = ledger.backend;
        load_worked_example(&ledger);
        let admin = ledger.token("admin", None);
        let busy = [
            "--ledger-interval",
            "10ms",
            "--budget-interval",
            "10ms",
            "--compact-interval",
            "10ms",
        ];
        let off = [
            "--ledger-interval",
            "0s",
            "--budget-interval",
            "0s",
            "--compact-interval",
            "0s",
        ];
        for (run, extra) in [&busy, &busy, &busy, &busy, &off].into_iter().enumerate() {
            let log = ledger.dir.path().join(format!("serve-{run}.log"));
            let server = ledger.serve_logging_to(extra, &log);
            if run == 0 {
                let (status, body) =
                    server.create_budget(&admin, "nlp-cap", json!({"team": "nlp", "amount": 10}));
                assert_eq!(status, 201, "[{backend}] {body}");
            }
            if extra == &busy {
                // Rounds run under the ledger lease (the server stopped before freed it, though
                // its round was cut short); the stop lands at a different point of one each time.
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
                while server.get(&admin, "/v1/ledger/status").1["last_round"]["held_lease"] != true
                {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "[{backend}] run {run}: no round under the lease"
                    );
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                std::thread::sleep(std::time::Duration::from_millis(13 * run as u64 + 50));
            } else {
                assert_eq!(server.get(&admin, "/v1/ledger/status").0, 200);
            }
            let exit = server.stop();
            let log = std::fs::read_to_string(&log).unwrap();
            assert!(exit.success(), "[{backend}] run {run}: {exit}\n{log}");
            for failure in ["ERROR", "panicked"] {
                assert!(!log.contains(failure), "[{backend}] run {run}:\n{log}");
            }
        }
    }
}

#[test]
fn health_metrics_openapi_and_the_reference_page() {
    let ledger = ledgers().remove(0);
    let reader = ledger.token("read", None);
    let server = ledger.serve(&[]);
    let get = |path: &str| server.http.get(server.url(path)).send().unwrap();
    assert_eq!(get("/healthz").text().unwrap(), "ok\n");
    assert_eq!(get("/readyz").text().unwrap(), "ready\n");
    server.rows(&reader, "select 1");
    let metrics = get("/metrics").text().unwrap();
    assert!(
        metrics.contains("gpuledger_http_requests_total{route=\"/v1/sql\",status=\"200\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("gpuledger_query_duration_seconds_count{outcome=\"ok\"} 1"),
        "{metrics}"
    );

    let openapi: Value = get("/openapi.json").json().unwrap();
    assert_eq!(openapi["openapi"], "3.1.0");
    assert!(openapi["paths"]["/v1/sql"]["post"].is_object());
    assert!(openapi["paths"]["/v1/objects/{kind}/{name}"]["put"].is_object());
    assert!(openapi["components"]["securitySchemes"]["bearer"].is_object());
    let page = get("/docs/");
    assert_eq!(page.status().as_u16(), 200);
    let html = page.text().unwrap();
    assert!(html.contains("swagger-ui"), "{html}");
    // Every asset comes from the binary: no CDN.
    assert!(!html.contains("https://"), "{html}");
}

#[test]
fn who_a_token_is_and_the_ledger_balance() {
    let ledger = ledgers().remove(0);
    load_worked_example(&ledger);
    let admin = ledger.token("admin", None);
    let nlp = ledger.token("read", Some("nlp"));
    let server = ledger.serve(&[]);
    let get = |token: &str, path: &str| {
        let response = server.get_as(token, path);
        let status = response.status().as_u16();
        (status, response.json::<Value>().unwrap())
    };

    assert_eq!(
        get(&admin, "/v1/me"),
        (200, json!({"scope": "admin", "team": null}))
    );
    assert_eq!(
        get(&nlp, "/v1/me"),
        (200, json!({"scope": "read", "team": "nlp"}))
    );

    // docs/ledger.md: billed 96 + 9 + 6 = 111.00, manual 4.80, rate card 2 h × 1.20 = 2.40;
    // accounted 118.20. November holds only that day.
    let (status, balance) = get(&admin, "/v1/ledger/balance?from=2026-11-01&to=2026-12-01");
    assert_eq!(status, 200, "{balance}");
    let figure = |name: &str| (balance[name].as_f64().unwrap() * 1e6).round() / 1e6;
    assert_eq!(
        [
            "billed",
            "manual",
            "rate_card",
            "expected",
            "accounted",
            "difference"
        ]
        .map(figure),
        [111.0, 4.8, 2.4, 118.2, 118.2, 0.0]
    );
    assert_eq!(balance["balanced"], true);
    // The day after holds nothing.
    let (_, empty) = get(&admin, "/v1/ledger/balance?from=2026-11-03&to=2026-11-04");
    assert_eq!(
        (empty["expected"].as_f64(), empty["balanced"].as_bool()),
        (Some(0.0), Some(true))
    );

    // Every team's money: not for a team token. Malformed windows: 400.
    assert_eq!(
        get(&nlp, "/v1/ledger/balance?from=2026-11-01&to=2026-12-01").0,
        403
    );
    for query in [
        "from=2026-11-01",
        "from=2026-11-01&to=2026-11-01",
        "from=11/01/2026&to=2026-12-01",
        "from=2026-01-01&to=2030-01-01",
    ] {
        let (status, problem) = get(&admin, &format!("/v1/ledger/balance?{query}"));
        assert_eq!(status, 400, "{query}: {problem}");
    }
}
