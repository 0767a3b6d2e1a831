//! Group commit of HTTP ingest (`serve --ingest-group-rows`, `--ingest-group-wait`): scrapes that
//! arrive together share Parquet files and one catalog transaction, yet each request stays its
//! own batch — the same rows as one commit per request, repeats recognised inside a group, and
//! each request's own rows, quarantine and answer. (`tests/crash.rs` kills `serve` while 100
//! clients push through it.)

use std::sync::Barrier;

use serde_json::{Value, json};

use crate::support::{Ledger, Server, ledgers, protobuf};

/// 2026-11-02T10:00:00Z in milliseconds.
const T0_MS: i64 = 1_793_613_600_000;

/// A scrape of `gpus` GPUs of node `node` at minute `minute`, with explicit sample times; each
/// GPU's UUID carries `marker`, so a request's rows can be found again.
fn scrape(marker: &str, node: usize, minute: i64, gpus: usize) -> String {
    let ts = T0_MS + minute * 60_000;
    (0..gpus)
        .map(|gpu| {
            let labels = format!("gpu=\"{gpu}\",UUID=\"{marker}-{gpu}\",Hostname=\"n{node}\"");
            format!(
                "DCGM_FI_DEV_GPU_UTIL{{{labels}}} {} {ts}\nDCGM_FI_DEV_POWER_USAGE{{{labels}}} {}.5 {ts}\n",
                10 + gpu + node,
                300 + minute
            )
        })
        .collect()
}

/// Posts every `(path, headers, body)` at once, one thread each, released together: the
/// statuses and JSON answers, in the order given.
fn post_together(
    server: &Server,
    token: &str,
    requests: &[(
        String,
        Vec<(&str, String)>,
        impl Into<Vec<u8>> + Clone + Sync,
    )],
) -> Vec<(u16, Value)> {
    let barrier = Barrier::new(requests.len());
    std::thread::scope(|scope| {
        let handles: Vec<_> = requests
            .iter()
            .map(|(path, headers, body)| {
                let barrier = &barrier;
                scope.spawn(move || {
                    let mut request = server
                        .http
                        .post(server.url(path))
                        .bearer_auth(token)
                        .body(body.clone().into());
                    for (name, value) in headers {
                        request = request.header(*name, value);
                    }
                    barrier.wait();
                    let response = request.send().unwrap();
                    let status = response.status().as_u16();
                    (status, response.json().unwrap_or(Value::Null))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn plain(path: &str, body: String) -> (String, Vec<(&'static str, String)>, String) {
    (path.to_string(), vec![], body)
}

/// The `_count` and `_sum` of the group-size histogram in `/metrics`.
fn group_metric(server: &Server) -> (u64, u64) {
    let text = server.metrics();
    let value = |name: &str| -> u64 {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.trim().parse::<f64>().ok())
            .unwrap_or_else(|| panic!("{name} in {text}")) as u64
    };
    (
        value("gpuledger_ingest_group_inputs_count"),
        value("gpuledger_ingest_group_inputs_sum"),
    )
}

/// `serve <extra>` over `ledger`, an ingest token and a read token.
fn collector_and_reader(ledger: &Ledger, extra: &[&str]) -> (Server, String, String) {
    let token = ledger.token("ingest", None);
    let reader = ledger.token("read", None);
    (ledger.serve(extra), token, reader)
}

fn one_backend_pair() -> Vec<(Ledger, Ledger)> {
    ledgers().into_iter().zip(ledgers()).collect()
}

#[test]
fn scrapes_sent_together_share_files_and_a_commit_and_land_as_one_at_a_time() {
    // 3 nodes × 8 minutes, 2 GPUs each: 24 requests, 48 gpu_samples rows.
    let bodies: Vec<String> = (0..24)
        .map(|i| scrape(&format!("g{i}"), i % 3, (i / 3) as i64, 2))
        .collect();
    let path = "/v1/ingest/dcgm?cluster=c";
    for (grouped, alone) in one_backend_pair() {
        let backend = grouped.backend;
        let (token_g, token_a) = (grouped.token("admin", None), alone.token("admin", None));
        let server_g = grouped.serve(&["--ingest-group-wait", "1s"]);
        let server_a = alone.serve(&["--ingest-group-rows", "0"]);

        let requests: Vec<_> = bodies.iter().map(|b| plain(path, b.clone())).collect();
        let answers = post_together(&server_g, &token_g, &requests);
        for (status, answer) in &answers {
            assert_eq!(*status, 202, "[{backend}] {answer}");
            assert_eq!(
                (&answer["rows"], &answer["duplicate"]),
                (&json!({"gpu_samples": 2}), &json!(false)),
                "[{backend}] {answer}"
            );
        }
        let mut batch_ids: Vec<_> = answers.iter().map(|(_, a)| a["batch_id"].clone()).collect();
        batch_ids.sort_by_key(ToString::to_string);
        batch_ids.dedup();
        assert_eq!(batch_ids.len(), 24, "[{backend}] one batch per request");
        for body in &bodies {
            let (status, _) =
                post_together(&server_a, &token_a, &[plain(path, body.clone())])[0].clone();
            assert_eq!(status, 202);
        }

        // Each request its own batch of 2 rows; those committed together name the first of
        // their group, whose files hold them all: fewer files than requests.
        let batches = server_g.rows(
            &token_g,
            "select count(*) as n, sum(rows_landed) as rows, count(committed_with) as grouped, \
                    count(distinct coalesce(committed_with, batch_id)) as commits \
             from system.ingest_batches where source = 'dcgm'",
        );
        let (n, rows, grouped, commits) = (
            &batches[0]["n"],
            &batches[0]["rows"],
            batches[0]["grouped"].as_i64().unwrap(),
            batches[0]["commits"].as_i64().unwrap(),
        );
        assert_eq!((n, rows), (&json!(24), &json!(48)), "[{backend}]");
        assert!(grouped >= 2 && commits < 24, "[{backend}] {batches:?}");
        let files = server_g.rows(
            &token_g,
            "select count(*) as files, sum(rows) as rows from system.files where table_name = 'gpu_samples'",
        );
        assert_eq!(files[0]["rows"], 48, "[{backend}]");
        assert_eq!(
            files[0]["files"], commits,
            "[{backend}] one file per group and day"
        );
        let alone_files = server_a.rows(
            &token_a,
            "select count(*) as files, count(committed_with) as grouped from system.files f \
             join system.ingest_batches b using (batch_id) where table_name = 'gpu_samples'",
        );
        assert_eq!(
            alone_files,
            [json!({"files": 24, "grouped": 0})],
            "[{backend}]"
        );

        // The same rows, column for column, as one commit per request.
        let every_row = "select * from gpu_samples order by node, gpu_uuid, ts";
        let rows_g = server_g.rows(&token_g, every_row);
        assert_eq!(rows_g.len(), 48);
        assert_eq!(rows_g, server_a.rows(&token_a, every_row), "[{backend}]");

        // Every committed request observed its group's size: 24 inputs, 24 × the mean size.
        let (count, sum) = group_metric(&server_g);
        assert_eq!(count, 24, "[{backend}]");
        assert!(sum > 24, "[{backend}] groups of more than one: sum {sum}");
        assert_eq!(group_metric(&server_a), (24, 24), "[{backend}] all alone");
    }
}

#[test]
fn repeats_inside_one_group_land_once() {
    let path = "/v1/ingest/dcgm?cluster=c";
    let timestamped = scrape("same", 1, 0, 2);
    // Untimestamped: stamped with its arrival, known again only as a retry by the same token.
    let untimestamped: String = scrape("retry", 2, 0, 1)
        .lines()
        .map(|line| format!("{}\n", line.rsplit_once(' ').unwrap().0))
        .collect();
    for ledger in ledgers() {
        let backend = ledger.backend;
        let (server, token, reader) = collector_and_reader(&ledger, &["--ingest-group-wait", "1s"]);
        let mut requests = Vec::new();
        requests.extend((0..6).map(|_| plain(path, timestamped.clone())));
        requests.extend((0..4).map(|_| plain(path, untimestamped.clone())));
        // One key, four different bodies: the first to commit is the key's.
        requests.extend((0..4).map(|i| {
            (
                path.to_string(),
                vec![("idempotency-key", "one-key".to_string())],
                scrape(&format!("key{i}"), 3, 0, 1),
            )
        }));
        let answers = post_together(&server, &token, &requests);
        for (status, answer) in &answers {
            assert_eq!(*status, 202, "[{backend}] {answer}");
        }
        for (name, range) in [("timestamped", 0..6), ("retried", 6..10), ("keyed", 10..14)] {
            let group = &answers[range];
            let landed: Vec<_> = group
                .iter()
                .filter(|(_, a)| a["duplicate"] == false)
                .collect();
            assert_eq!(landed.len(), 1, "[{backend}] {name}: {group:?}");
            let batch = &landed[0].1["batch_id"];
            for (_, answer) in group {
                assert_eq!(&answer["batch_id"], batch, "[{backend}] {name}: {answer}");
                if answer["duplicate"] == true {
                    assert_eq!(answer["rows"], json!({}), "[{backend}] {name}: {answer}");
                }
            }
        }
        let winner = answers[10..14]
            .iter()
            .position(|(_, a)| a["duplicate"] == false)
            .unwrap();
        let rows = server.rows(
            &reader,
            "select split_part(gpu_uuid, '-', 1) as marker, count(*) as n from gpu_samples \
             group by 1 order by 1",
        );
        assert_eq!(
            rows,
            [
                json!({"marker": format!("key{winner}"), "n": 1}),
                json!({"marker": "retry", "n": 1}),
                json!({"marker": "same", "n": 2}),
            ],
            "[{backend}]"
        );
        // The three that landed were one group (the repeats waited for the next one, which
        // recognised them): one transaction, one file.
        assert_eq!(
            server.rows(
                &reader,
                "select count(*) as n, count(distinct committed_with) as groups, \
                        count(committed_with) as grouped from system.ingest_batches where source = 'dcgm'"
            ),
            [json!({"n": 3, "groups": 1, "grouped": 3})],
            "[{backend}]"
        );
    }
}

#[test]
fn a_request_too_large_for_a_group_and_one_with_bad_lines_keep_their_own_accounts() {
    let path = "/v1/ingest/dcgm?cluster=c";
    // The bad line is line 3: a value that is not a number.
    let bad = format!(
        "{}DCGM_FI_DEV_GPU_UTIL{{gpu=\"1\",UUID=\"bad-1\",Hostname=\"n9\"}} lots {T0_MS}\n",
        scrape("bad", 9, 0, 1)
    );
    for ledger in ledgers() {
        let backend = ledger.backend;
        // Groups of at most 4 rows: two 2-GPU scrapes fill one; a 6-GPU scrape is alone.
        let (server, token, reader) = collector_and_reader(
            &ledger,
            &["--ingest-group-rows", "4", "--ingest-group-wait", "1s"],
        );
        let mut requests: Vec<_> = (0..6)
            .map(|i| plain(path, scrape(&format!("s{i}"), i, 0, 2)))
            .collect();
        requests.push(plain(path, scrape("big", 7, 0, 6)));
        requests.push(plain(path, bad.clone()));
        let answers = post_together(&server, &token, &requests);
        for (status, answer) in &answers {
            assert_eq!(*status, 202, "[{backend}] {answer}");
        }
        let (big, bad_answer) = (&answers[6].1, &answers[7].1);
        assert_eq!(big["rows"], json!({"gpu_samples": 6}));
        assert_eq!(
            (
                &bad_answer["rows"],
                &bad_answer["quarantined"],
                &bad_answer["rejections"][0]["line"]
            ),
            (&json!({"gpu_samples": 1}), &json!(1), &json!(3)),
            "[{backend}] {bad_answer}"
        );

        let batches = server.rows(
            &reader,
            "select batch_id, rows_landed, records_rejected, committed_with from system.ingest_batches \
             where source = 'dcgm'",
        );
        assert_eq!(batches.len(), 8, "[{backend}]");
        let of = |id: &Value| {
            batches
                .iter()
                .find(|b| &b["batch_id"] == id)
                .unwrap()
                .clone()
        };
        assert_eq!(
            of(&big["batch_id"])["committed_with"],
            Value::Null,
            "[{backend}] alone"
        );
        assert_eq!(
            (
                of(&bad_answer["batch_id"])["rows_landed"].clone(),
                of(&bad_answer["batch_id"])["records_rejected"].clone()
            ),
            (json!(1), json!(1))
        );
        // No group holds more than 4 rows.
        let groups = server.rows(
            &reader,
            "select coalesce(committed_with, batch_id) as lead, sum(rows_landed) as rows \
             from system.ingest_batches where source = 'dcgm' group by 1",
        );
        for group in &groups {
            let rows = group["rows"].as_i64().unwrap();
            assert!(
                rows <= 4 || group["lead"] == big["batch_id"],
                "[{backend}] {groups:?}"
            );
        }
        // …and groups did form: 20 rows in fewer commits than the 8 requests.
        assert!(groups.len() < 8, "[{backend}] {groups:?}");
        // The big request's own file; the quarantine under the bad request's batch.
        assert_eq!(
            server.rows(
                &reader,
                &format!(
                    "select rows from system.files where batch_id = '{}'",
                    big["batch_id"].as_str().unwrap()
                ),
            ),
            [json!({"rows": 6})],
            "[{backend}]"
        );
        assert_eq!(
            server.rows(
                &reader,
                "select batch_id, line, field from system.quarantine"
            ),
            [
                json!({"batch_id": bad_answer["batch_id"], "line": 3, "field": "DCGM_FI_DEV_GPU_UTIL"})
            ],
            "[{backend}]"
        );
        assert_eq!(
            server.rows(&reader, "select count(*) as n from gpu_samples"),
            [json!({"n": 6 * 2 + 6 + 1})],
            "[{backend}]"
        );
    }
}

#[test]
fn remote_write_bodies_sent_together_are_one_group() {
    // Five Prometheus remote-write bodies, one GPU each with two samples of two fields.
    let bodies: Vec<Vec<u8>> = (0..5)
        .map(|i| {
            let uuid = format!("rw-{i}");
            let labels = |name| {
                vec![
                    ("__name__", name),
                    ("Hostname", "n1"),
                    ("UUID", uuid.as_str()),
                    ("gpu", "0"),
                ]
            };
            let samples = [(40.0 + f64::from(i), T0_MS), (41.0, T0_MS + 15_000)];
            let mut request = Vec::new();
            for name in ["DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE"] {
                protobuf::bytes(
                    &mut request,
                    1,
                    &protobuf::time_series(&labels(name), &samples),
                );
            }
            snap::raw::Encoder::new().compress_vec(&request).unwrap()
        })
        .collect();
    for ledger in ledgers() {
        let backend = ledger.backend;
        let (server, token, reader) = collector_and_reader(&ledger, &["--ingest-group-wait", "1s"]);
        let requests: Vec<_> = bodies
            .iter()
            .map(|body| ("/v1/prom/write?cluster=c".to_string(), vec![], body.clone()))
            .collect();
        for (status, answer) in post_together(&server, &token, &requests) {
            assert_eq!(status, 202, "[{backend}] {answer}");
            assert_eq!(
                answer["rows"],
                json!({"gpu_samples": 2}),
                "[{backend}] {answer}"
            );
        }
        assert_eq!(
            server.rows(
                &reader,
                "select count(*) as n, sum(rows_landed) as rows, count(distinct committed_with) as groups, \
                        count(committed_with) as grouped \
                 from system.ingest_batches where source = 'remote_write'"
            ),
            [json!({"n": 5, "rows": 10, "groups": 1, "grouped": 5})],
            "[{backend}]"
        );
        assert_eq!(
            server.rows(
                &reader,
                "select count(*) as rows, sum(gpu_temp_c) as temp from gpu_samples"
            ),
            // 40 + 41 + 42 + 43 + 44 at T0, 41 five times 15 s later.
            [json!({"rows": 10, "temp": 210.0 + 205.0})],
            "[{backend}]"
        );
    }
}
