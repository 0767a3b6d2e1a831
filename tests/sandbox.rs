//! The SQL sandbox of `gpuledger serve`, as a hostile read token tries it, over HTTP and the
//! Postgres wire: statements too deep to plan, queries past their time, functions that build
//! huge values, predicates that would see another team's rows, engine settings, revoked
//! tokens, connections that would leak, and REST reads that would skip the query slots.

use std::io::{BufRead, BufReader, Write};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::golden::load_worked_example;
use crate::support::{self, Ledger, Server, describe, ledgers, memory_kb, psql_sqlstate, psycopg};

/// `psql` as `token` running `command`, in unaligned, tuples-only output.
fn psql(server: &Server, token: &str, command: &str) -> Output {
    support::psql(server, token, "disable", &["-t"], &[command])
}

/// `(status, sqlstate)` of a `POST /v1/sql`.
fn status(server: &Server, token: &str, query: &str) -> (u16, String) {
    let (status, body) = server.sql(token, query);
    let sqlstate = body["sqlstate"].as_str().unwrap_or_default().to_string();
    (status, sqlstate)
}

/// How long `/healthz` takes to answer 200.
fn health_latency(server: &Server) -> Duration {
    let started = Instant::now();
    let response = server.http.get(server.url("/healthz")).send().unwrap();
    assert_eq!(response.status().as_u16(), 200);
    started.elapsed()
}

/// User and system CPU time of `pid`, in clock ticks (100 a second).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which is in parentheses): utime and stime are 12th and 13th.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

fn chain(term: &str, op: &str, n: usize) -> String {
    vec![term; n].join(op)
}

fn sqlite_ledger() -> Ledger {
    ledgers().remove(0)
}

#[test]
fn deep_or_huge_statements_answer_54001_and_the_server_lives() {
    let ledger = sqlite_ledger();
    let reader = ledger.token("read", None);
    let server = ledger.serve(&[]);
    let union = vec!["select 1 as x"; 3000].join(" union all ");
    let statements = [
        format!("select {}", chain("1", "+", 2_000)),
        format!("select {}", chain("1", "+", 20_000)),
        format!("select {}", chain("'a'", "||", 5_000)),
        format!("select 1 where {}", chain("true", " and ", 5_000)),
        format!("select 1 where {}", chain("false", " or ", 5_000)),
        format!("select count(*) from ({union})"),
    ];
    for sql in &statements {
        let (status, body) = server.sql(&reader, sql);
        assert_eq!(
            (status, body["sqlstate"].as_str()),
            (400, Some("54001")),
            "{}…: {body}",
            &sql[..40]
        );
        let detail = body["detail"].as_str().unwrap();
        assert!(
            detail.starts_with("the statement is too complex to plan: "),
            "{detail}"
        );
        assert_eq!(psql_sqlstate(&server, &reader, sql), "54001");
    }
    // Over the extended protocol too (psycopg prepares with parameters).
    let script = format!(
        "import sys, psycopg\n\
         conn = psycopg.connect(sys.argv[1])\n\
         try:\n    conn.execute('select %s + {}', [1])\n\
         except psycopg.Error as e:\n    print(e.diag.sqlstate)\n",
        chain("1", "+", 3_000)
    );
    let out = psycopg(&server, &reader, &script).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "54001",
        "{}",
        describe(&out)
    );

    // Still serving, and a 300-term sum (deep, within the bounds) answers.
    assert!(health_latency(&server) < Duration::from_millis(500));
    let rows = server.rows(
        &reader,
        &format!("select cast({} as bigint) as n", chain("1", "+", 300)),
    );
    assert_eq!(rows[0]["n"], 300);
}

#[test]
fn a_timed_out_query_answers_at_its_limit_and_health_answers_meanwhile() {
    let ledger = sqlite_ledger();
    let reader = ledger.token("read", None);
    let server = ledger.serve(&["--query-timeout", "2s"]);
    // 10¹⁰ pairs: minutes of CPU.
    let slow = "select sum(a.value * b.value) as s from generate_series(1, 100000) a \
        cross join generate_series(1, 100000) b";
    let base = server.base.clone();
    let token = reader.clone();
    let started = Instant::now();
    let query = std::thread::spawn(move || {
        let response = reqwest::blocking::Client::new()
            .post(format!("{base}/v1/sql"))
            .bearer_auth(token)
            .json(&serde_json::json!({ "query": slow }))
            .send()
            .unwrap();
        let status = response.status().as_u16();
        let body: Value = response.json().unwrap();
        (status, body, Instant::now())
    });
    let mut slowest = Duration::ZERO;
    while !query.is_finished() {
        slowest = slowest.max(health_latency(&server));
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, body, answered) = query.join().unwrap();
    assert_eq!(
        (status, body["sqlstate"].as_str()),
        (422, Some("57014")),
        "{body}"
    );
    let took = answered - started;
    assert!(
        took < Duration::from_millis(3500),
        "answered after {took:?}"
    );
    assert!(
        slowest < Duration::from_secs(2),
        "/healthz took {slowest:?}"
    );
}

/// The REST reads of the lake queue for the query slots users' SQL queues for: with
/// `--query-concurrency 1` held by a slow query, the weekly report, costs, a table function, the
/// bill's export, the balance and the budgets wait for it (as `gpuledger_queries_waiting` counts)
/// and answer after it. Before, each ran at once beside it, so a hundred clients asking for the
/// report ran a hundred reports at once.
#[test]
fn rest_reads_of_the_lake_wait_for_a_query_slot() {
    let ledger = sqlite_ledger();
    load_worked_example(&ledger);
    let reader = ledger.token("read", None);
    let server = ledger.serve(&["--query-concurrency", "1", "--query-timeout", "4s"]);
    let gauge = |name: &str| server.gauge(name);
    let wait_for = |name: &str, value: i64| {
        let started = Instant::now();
        while gauge(name) != value {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{name} never reached {value}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let reads = [
        "/v1/reports/weekly/2026-W45",
        "/v1/costs?from=2026-11-02&to=2026-11-03&aggregate=team",
        "/v1/idle?from=2026-11-02&to=2026-11-03",
        "/v1/export/focus?from=2026-11-02&to=2026-11-03",
        "/v1/ledger/balance?from=2026-11-02&to=2026-11-03",
        "/v1/budgets",
    ];
    // Alone, each answers 200.
    for path in reads {
        assert_eq!(
            server.get_as(&reader, path).status().as_u16(),
            200,
            "{path}"
        );
    }
    let slow = "select sum(a.value * b.value) as s from generate_series(1, 100000) a \
        cross join generate_series(1, 100000) b";
    std::thread::scope(|scope| {
        let query = scope.spawn(|| status(&server, &reader, slow));
        wait_for("queries_running", 1);
        let waiting: Vec<_> = reads
            .iter()
            .map(|&path| {
                let (server, reader) = (&server, &reader);
                scope.spawn(move || (path, server.get_as(reader, path).status().as_u16()))
            })
            .collect();
        wait_for("queries_waiting", reads.len() as i64);
        std::thread::sleep(Duration::from_millis(500));
        // Checked while the slow query still holds the slot (it runs 4 s).
        if !query.is_finished() {
            for read in &waiting {
                assert!(!read.is_finished(), "a read answered beside the slow query");
            }
        }
        let answer = query.join().unwrap();
        assert_eq!(answer, (422, "57014".into()));
        for read in waiting {
            let (path, status) = read.join().unwrap();
            assert_eq!(status, 200, "{path}");
        }
    });
    assert_eq!((gauge("queries_running"), gauge("queries_waiting")), (0, 0));
}

/// A cross join never yields between the batches it emits, so aborting its task alone left a
/// query thread busy after the answer (69 ticks in a second, 2.5 s after it): every operator
/// now checks the query's cancellation each time it is pulled (query/src/cancel.rs).
#[test]
fn a_timed_out_query_stops_burning_cpu() {
    let ledger = sqlite_ledger();
    let reader = ledger.token("read", None);
    let server = ledger.serve(&["--query-timeout", "2s"]);
    let pid = server.pid();
    let slow = "select sum(a.value * b.value) as s from generate_series(1, 100000) a \
        cross join generate_series(1, 100000) b";
    assert_eq!(status(&server, &reader, slow), (422, "57014".into()));
    // The work stops soon after the answer (the operator's current batch ends first): the idle
    // server then burns (almost) no CPU.
    std::thread::sleep(Duration::from_millis(2500));
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(1));
    let burnt = cpu_ticks(pid) - before;
    assert!(
        burnt < 25,
        "{burnt} ticks of CPU in the second after the timeout"
    );
    // A query after it waits for a query thread that the aborted join still holds.
    // Over psql as well.
    let started = Instant::now();
    assert_eq!(psql_sqlstate(&server, &reader, slow), "57014");
    assert!(started.elapsed() < Duration::from_millis(4000));
}

#[test]
fn functions_that_build_huge_values_fail_alone() {
    let ledger = sqlite_ledger();
    let reader = ledger.token("read", None);
    // 256 MiB per query: 64 MiB per function call.
    let server = ledger.serve(&["--query-memory-mb", "256"]);
    for sql in [
        "select length(repeat('x', 1500000000))",
        "select cardinality(array_repeat(1, 500000000))",
        "select length(repeat(arrow_cast('xxx', 'LargeUtf8'), 1000000000))",
        "select length(lpad('x', 2000000000))",
        "select length(rpad('x', 2000000000, 'ab'))",
        "select cardinality(range(0, 3000000000))",
        // Each operand under the cap, the `||` of them past it.
        "select length(repeat('x', 40000000) || repeat('x', 40000000))",
        "select length(concat(repeat('x', 40000000), repeat('y', 40000000)))",
    ] {
        let (status, body) = server.sql(&reader, sql);
        assert_eq!(
            (status, body["sqlstate"].as_str()),
            (422, Some("54000")),
            "{sql}: {body}"
        );
        assert!(
            body["detail"]
                .as_str()
                .unwrap()
                .ends_with("past the limit of 67108864 bytes for one value"),
            "{body}"
        );
        assert_eq!(psql_sqlstate(&server, &reader, sql), "54000", "{sql}");
    }
    // `||` under the cap is the operator as ever: NULL when a side is, named as written.
    let rows = server.rows(
        &reader,
        "select 'a' || 'b', 'a' || null as n, 1 || 'x' as mixed, \
         length(repeat('x', 1000) || repeat('y', 1000)) as l",
    );
    assert_eq!(
        rows,
        [
            serde_json::json!({"Utf8(\"a\") || Utf8(\"b\")": "ab", "n": null, "mixed": "1x", "l": 2000})
        ]
    );
    let (code, body) = server.sql(
        &reader,
        "select length(repeat('x', 40000000) || repeat('x', 40000000))",
    );
    assert_eq!(code, 422, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .starts_with("||: the result would be 80000000 bytes"),
        "{body}"
    );
    // string_agg keeps its state under the query's memory limit: 53200.
    let (status, sqlstate) = status(
        &server,
        &reader,
        "select length(string_agg(repeat('x', 4000), ',')) from generate_series(1, 500000)",
    );
    assert_eq!((status, sqlstate.as_str()), (422, "53200"));
    let rss_mb = memory_kb(server.pid(), "VmRSS") / 1024;
    assert!(rss_mb < 1024, "RSS {rss_mb} MB");
    assert_eq!(server.rows(&reader, "select 1 as one")[0]["one"], 1);
}

/// What a team-b token learns about team a (here nlp about vision) from whether a predicate
/// fails: nothing, since its predicates never see vision's rows.
#[test]
fn the_error_oracle_answers_the_same_whatever_other_teams_hold() {
    let ledger = sqlite_ledger();
    load_worked_example(&ledger);
    let admin = ledger.token("read", None);
    let nlp = ledger.token("read", Some("nlp"));
    let server = ledger.serve(&[]);
    let vision_value = |query: &str| -> f64 {
        let rows = server.rows(&admin, query);
        rows[0]["v"]
            .as_f64()
            .unwrap_or_else(|| panic!("{query}: {rows:?}"))
    };
    let sources = [
        (
            "cost_entries",
            "amount",
            vision_value("select amount as v from cost_entries where team = 'vision' limit 1"),
        ),
        (
            "gpu_hours",
            "alloc_seconds",
            vision_value(
                "select cast(alloc_seconds as double) as v from gpu_hours \
                 where team = 'vision' limit 1",
            ),
        ),
        (
            "team_costs('2026-11-02', '2026-11-03')",
            "total_cost",
            vision_value(
                "select total_cost as v from team_costs('2026-11-02', '2026-11-03') \
                 where team = 'vision'",
            ),
        ),
    ];
    for (source, column, value) in sources {
        let oracle = |v: f64| {
            format!(
                "select count(*) as n from {source} where cast(case when team = 'vision' and \
                 {column} between {} and {} then 'x' else '1' end as int) = 1",
                v - 0.001,
                v + 0.001
            )
        };
        let (hit, miss) = (oracle(value), oracle(value + 1000.0));
        // Unscoped, the oracle works: it fails on vision's row.
        assert_eq!(status(&server, &admin, &hit).0, 422, "{source}");
        // Scoped to nlp: the same answer either way, over HTTP and psql.
        let (hit_status, hit_body) = server.sql(&nlp, &hit);
        let (miss_status, miss_body) = server.sql(&nlp, &miss);
        assert_eq!(hit_status, 200, "{source}: {hit_body}");
        assert_eq!(
            (hit_status, &hit_body),
            (miss_status, &miss_body),
            "{source}"
        );
        let (hit, miss) = (psql(&server, &nlp, &hit), psql(&server, &nlp, &miss));
        assert!(hit.status.success(), "{source}: {}", describe(&hit));
        assert_eq!(hit.stdout, miss.stdout, "{source}");
    }

    // EXPLAIN ANALYZE counts nlp's rows only, and shows no scan beneath the team filter.
    let nlp_hours = server.rows(&nlp, "select count(*) as n from gpu_hours")[0]["n"].clone();
    let all_hours = server.rows(&admin, "select count(*) as n from gpu_hours")[0]["n"].clone();
    assert_ne!(nlp_hours, all_hours);
    let plan = server.rows(
        &nlp,
        "explain analyze select * from gpu_hours where hour is not null",
    );
    let text = serde_json::to_string(&plan).unwrap();
    assert!(text.contains("TeamRowsExec: team=nlp"), "{text}");
    assert!(text.contains(&format!("output_rows={nlp_hours}")), "{text}");
    assert!(
        !text.contains(&format!("output_rows={all_hours}")),
        "{text}"
    );
    assert!(!text.contains("DataSourceExec"), "{text}");
}

#[test]
fn engine_settings_are_refused_however_they_are_quoted() {
    let ledger = sqlite_ledger();
    let nlp = ledger.token("read", Some("nlp"));
    let server = ledger.serve(&[]);
    for sql in [
        r#"SET "datafusion"."runtime"."memory_limit" = '40G'"#,
        r#"SET "datafusion"."runtime"."temp_directory" = '/tmp'"#,
        r#"SET "datafusion.execution.target_partitions" = 1"#,
        "RESET ALL",
    ] {
        assert_eq!(psql_sqlstate(&server, &nlp, sql), "42501", "{sql}");
        assert_eq!(status(&server, &nlp, sql), (403, "42501".into()), "{sql}");
    }
    // The clients' own settings still work over psql.
    for sql in [
        "SET application_name = 'grafana'",
        "SET extra_float_digits = 3",
        "SET TIME ZONE 'UTC'",
    ] {
        let out = psql(&server, &nlp, sql);
        assert!(out.status.success(), "{sql}: {}", describe(&out));
    }
}

#[test]
fn a_revoked_tokens_open_postgres_session_ends() {
    let ledger = sqlite_ledger();
    let token = ledger.token("read", None);
    let id = token.split('_').nth(1).unwrap().to_string();
    let server = ledger.serve(&[]);
    let script = "import sys, time, psycopg\n\
        conn = psycopg.connect(sys.argv[1], autocommit=True)\n\
        print(conn.execute('select 1').fetchone()[0], flush=True)\n\
        sys.stdin.readline()\n\
        time.sleep(1.2)\n\
        try:\n    conn.execute('select 2')\n    print('still open')\n\
        except psycopg.Error as e:\n    print(e.diag.sqlstate, e.diag.severity)\n";
    let mut child = psycopg(&server, &token, script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "1");
    let revoked = ledger.run(&["token", "revoke", &id]);
    assert!(revoked.status.success(), "{}", describe(&revoked));
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "28000 FATAL");
    child.wait().unwrap();
}

/// A token found valid is trusted for a second (`TOKEN_RECHECK`) so that requests cost no
/// catalog statement each; a revoked one must then be refused, and no other token with it.
#[test]
fn a_revoked_token_is_refused_over_http_within_its_recheck() {
    let ledger = sqlite_ledger();
    let token = ledger.token("read", None);
    let other = ledger.token("read", None);
    let id = token.split('_').nth(1).unwrap().to_string();
    let server = ledger.serve(&[]);
    assert_eq!(status(&server, &token, "select 1"), (200, String::new()));
    let revoked = ledger.run(&["token", "revoke", &id]);
    assert!(revoked.status.success(), "{}", describe(&revoked));
    let revoked_at = Instant::now();
    while status(&server, &token, "select 1") == (200, String::new()) {
        assert!(
            revoked_at.elapsed() < Duration::from_secs(3),
            "a revoked token still answered 200 after {:?}",
            revoked_at.elapsed()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for _ in 0..5 {
        assert_eq!(status(&server, &token, "select 1"), (401, "28000".into()));
    }
    assert_eq!(status(&server, &other, "select 1"), (200, String::new()));
}

#[test]
fn postgres_connections_do_not_leak() {
    let ledger = sqlite_ledger();
    let reader = ledger.token("read", None);
    let server = ledger.serve(&[]);
    let rounds = |n: usize| {
        let script = format!(
            "import sys, psycopg\n\
             for _ in range({n}):\n    \
                 with psycopg.connect(sys.argv[1]) as conn:\n        \
                     assert conn.execute('select 1').fetchone()[0] == 1\n"
        );
        let out = psycopg(&server, &reader, &script).output().unwrap();
        assert!(out.status.success(), "{}", describe(&out));
    };
    rounds(15);
    let warm = memory_kb(server.pid(), "VmRSS");
    rounds(300);
    let after = memory_kb(server.pid(), "VmRSS");
    let grown_mb = after.saturating_sub(warm) / 1024;
    assert!(
        grown_mb < 50,
        "300 connections grew RSS by {grown_mb} MB ({warm} kB → {after} kB)"
    );
}
