//! Ingest over HTTP through the real binary: `POST /v1/ingest/{source}` with the real sample
//! files, Idempotency-Key replays, quarantine, auth and size limits, a large streamed body,
//! Prometheus remote-write, and scrape targets served from inside the test.

use std::io::{Read, Write};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use reqwest::blocking::Body;
use serde_json::{Value, json};

use crate::support::{Server, exporter, ledgers, memory_kb, protobuf, shared};

/// One GPU's scrape, without timestamps: two wide fields and one the wide table does not know.
const SCRAPE: &str = "\
# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-1\",Hostname=\"n1\",modelName=\"NVIDIA H100\"} 41
DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-1\",Hostname=\"n1\",modelName=\"NVIDIA H100\"} 71.5
DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{gpu=\"0\",UUID=\"GPU-1\",Hostname=\"n1\",modelName=\"NVIDIA H100\"} 0
";

/// The status, the headers and the JSON body of a POST.
fn post(
    server: &Server,
    path: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: impl Into<Body>,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut request = server.http.post(server.url(path)).body(body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, headers, body)
}

/// A POST that must answer 202: its JSON body.
fn accepted(server: &Server, path: &str, token: &str, body: impl Into<Body>) -> Value {
    let (status, _, body) = post(server, path, Some(token), &[], body);
    assert_eq!(status, 202, "{path}: {body}");
    body
}

#[test]
fn every_source_lands_over_http() {
    let (Some(prom), Some(focus), Some(spend_log), Some(sacct)) = (
        shared("cncf-k8s-ai-conformance/dcgm-exporter-kops-aws-L4.prom"),
        shared("focus-sample-data/focus_sample.csv"),
        shared("litellm/spend_logs_payload.json"),
        shared("xdmod-slurm/accounting-logs.log"),
    ) else {
        return;
    };
    for ledger in ledgers() {
        let collector = ledger.token("ingest", None);
        let reader = ledger.token("read", None);
        let server = ledger.serve(&[]);
        let backend = ledger.backend;

        // The L4 scrape: 23 sample lines of one GPU (grep -vc '^#'), one wide row.
        let dcgm = accepted(
            &server,
            "/v1/ingest/dcgm?cluster=lab&at=2026-11-02T10:00:00Z",
            &collector,
            std::fs::read(&prom).unwrap(),
        );
        assert_eq!(dcgm["records_read"], 23, "[{backend}] {dcgm}");
        assert_eq!(dcgm["rows"]["gpu_samples"], 1);
        assert_eq!(
            (&dcgm["duplicate"], &dcgm["quarantined"], &dcgm["source"]),
            (&json!(false), &json!(0), &json!("dcgm"))
        );
        let l4 = server.rows(
            &reader,
            "select node, cluster, cast(ts as varchar) as ts from gpu_samples",
        );
        assert_eq!(
            l4,
            [
                json!({"node": "i-030791dc5a37cd257", "cluster": "lab", "ts": "2026-11-02T10:00:00Z"})
            ]
        );

        // FOCUS: the 1000 lines of the sample (tests/ingest_focus.rs counts them by provider).
        let bill = accepted(
            &server,
            "/v1/ingest/focus",
            &collector,
            std::fs::read(&focus).unwrap(),
        );
        assert_eq!(bill["rows"], json!({"billing_lines": 1000}), "[{backend}]");

        // LiteLLM: one spend log, one request.
        let tokens = accepted(
            &server,
            "/v1/ingest/tokens",
            &collector,
            std::fs::read(&spend_log).unwrap(),
        );
        assert_eq!(tokens["rows"], json!({"token_usage": 1}), "[{backend}]");

        // Slurm sacct, gzip-compressed as a collector would send it: 86 events, as from the CLI.
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gzip.write_all(&std::fs::read(&sacct).unwrap()).unwrap();
        let events = accepted(
            &server,
            "/v1/ingest/events?cluster=ccr&tz=UTC",
            &collector,
            gzip.finish().unwrap(),
        );
        assert_eq!(
            events["rows"],
            json!({"scheduler_events": 86}),
            "[{backend}]"
        );

        // The counters of /metrics: 1 + 1000 + 1 + 86 rows, by source.
        let metrics = server.metrics();
        for line in [
            "gpuledger_ingest_rows_total{source=\"dcgm\"} 1",
            "gpuledger_ingest_rows_total{source=\"focus\"} 1000",
            "gpuledger_ingest_rows_total{source=\"tokens\"} 1",
            "gpuledger_ingest_rows_total{source=\"events\"} 86",
        ] {
            assert!(metrics.contains(line), "[{backend}] no {line} in {metrics}");
        }
    }
}

#[test]
fn an_idempotency_key_replays_the_first_response_and_the_same_body_lands_once() {
    for ledger in ledgers() {
        let collector = ledger.token("ingest", None);
        let reader = ledger.token("read", None);
        let server = ledger.serve(&[]);
        let backend = ledger.backend;
        let path = "/v1/ingest/dcgm?at=2026-11-02T10:00:00Z";
        let key = [("Idempotency-Key", "scrape-n1-1000")];

        let (status, headers, first) = post(&server, path, Some(&collector), &key, SCRAPE);
        assert_eq!(status, 202, "[{backend}] {first}");
        assert!(headers.get("idempotent-replayed").is_none());
        // Two wide fields make one gpu_samples row; the throttle reasons are kept in the extra table.
        assert_eq!(
            first["rows"],
            json!({"gpu_samples": 1, "gpu_samples_extra": 1})
        );

        // The same key, even with another body: the first response, and nothing lands.
        let other = SCRAPE.replace("} 41", "} 45");
        let (status, headers, again) = post(&server, path, Some(&collector), &key, other);
        assert_eq!((status, &again), (202, &first), "[{backend}]");
        assert_eq!(headers["idempotent-replayed"], "true");

        // The same body and parameters without a key: recognised by content, nothing lands.
        let duplicate = accepted(&server, path, &collector, SCRAPE);
        assert_eq!(duplicate["duplicate"], true, "[{backend}] {duplicate}");
        assert_eq!(duplicate["batch_id"], first["batch_id"]);
        assert_eq!(duplicate["rows"], json!({}));

        let rows = server.rows(
            &reader,
            "select count(*) as n, max(gpu_temp_c) as temp from gpu_samples",
        );
        assert_eq!(rows, [json!({"n": 1, "temp": 41.0})], "[{backend}]");
        let batches = server.rows(
            &reader,
            "select count(*) as n from system.ingest_batches where source <> 'ledger'",
        );
        assert_eq!(batches, [json!({"n": 1})]);

        // A key of 256 characters is refused.
        let long = "k".repeat(256);
        let (status, _, problem) = post(
            &server,
            path,
            Some(&collector),
            &[("Idempotency-Key", &long)],
            SCRAPE,
        );
        assert_eq!(status, 400, "{problem}");
    }
}

#[test]
fn a_bad_record_is_quarantined_with_its_line_and_field_and_strict_refuses_all() {
    for ledger in ledgers() {
        let collector = ledger.token("ingest", None);
        let reader = ledger.token("read", None);
        let server = ledger.serve(&[]);
        let backend = ledger.backend;
        let bad = SCRAPE.replace("} 71.5", "} ERROR - FAILED TO CONVERT TO STRING");

        let report = accepted(
            &server,
            "/v1/ingest/dcgm?at=2026-11-02T10:00:00Z",
            &collector,
            bad.clone(),
        );
        assert_eq!(report["quarantined"], 1, "[{backend}] {report}");
        assert_eq!(
            report["rejections"],
            json!([{
                "file": "http:dcgm",
                "line": 3,
                "field": "DCGM_FI_DEV_POWER_USAGE",
                "reason": "value 'ERROR - FAILED TO CONVERT TO STRING' is not a number"
            }])
        );
        assert_eq!(
            report["rows"],
            json!({"gpu_samples": 1, "gpu_samples_extra": 1})
        );
        let quarantined = server.rows(&reader, "select file, line, field from quarantine");
        assert_eq!(
            quarantined,
            [json!({"file": "http:dcgm", "line": 3, "field": "DCGM_FI_DEV_POWER_USAGE"})]
        );

        // strict: 422, naming line and field, and nothing more lands.
        let (status, headers, problem) = post(
            &server,
            "/v1/ingest/dcgm?at=2026-11-02T11:00:00Z&strict=true",
            Some(&collector),
            &[],
            bad,
        );
        assert_eq!(status, 422, "{problem}");
        assert_eq!(headers["content-type"], "application/problem+json");
        assert_eq!(
            problem["detail"],
            "http:dcgm:3: field 'DCGM_FI_DEV_POWER_USAGE': value 'ERROR - FAILED TO CONVERT TO STRING' \
             is not a number (strict mode rejects the whole input)"
        );
        let rows = server.rows(&reader, "select count(*) as n from gpu_samples");
        assert_eq!(rows, [json!({"n": 1})], "[{backend}]");
    }
}

#[test]
fn tokens_scopes_sources_and_the_size_limit() {
    let ledger = ledgers().remove(0);
    let collector = ledger.token("ingest", None);
    let reader = ledger.token("read", None);
    let admin = ledger.token("admin", None);
    let server = ledger.serve(&["--ingest-max-mb", "1"]);
    let path = "/v1/ingest/dcgm?at=2026-11-02T10:00:00Z";

    let (status, headers, _) = post(&server, path, None, &[], SCRAPE);
    assert_eq!(status, 401);
    assert_eq!(headers["content-type"], "application/problem+json");
    let (status, _, problem) = post(&server, path, Some(&reader), &[], SCRAPE);
    assert_eq!(status, 403);
    assert_eq!(
        problem["detail"],
        "this token's scope does not allow ingest (it needs a 'ingest' token; this one is 'read')"
    );
    let (status, _, _) = post(&server, "/v1/prom/write", Some(&reader), &[], SCRAPE);
    assert_eq!(status, 403);
    // admin may ingest too.
    accepted(&server, path, &admin, SCRAPE);

    let (status, _, problem) = post(&server, "/v1/ingest/logs", Some(&collector), &[], SCRAPE);
    assert_eq!(status, 404, "{problem}");
    let (status, _, problem) = post(
        &server,
        "/v1/ingest/events?tz=Mars/Olympus",
        Some(&collector),
        &[],
        "",
    );
    assert_eq!(
        (status, problem["detail"].as_str()),
        (400, Some("tz: 'Mars/Olympus' is not a time zone"))
    );

    // 1 MiB + 1 byte is one byte too many: refused by its Content-Length…
    let (status, headers, problem) = post(
        &server,
        path,
        Some(&collector),
        &[],
        vec![b'#'; (1 << 20) + 1],
    );
    assert_eq!(status, 413, "{problem}");
    assert_eq!(headers["content-type"], "application/problem+json");
    assert_eq!(
        problem["detail"],
        "the body is larger than 1 MiB (--ingest-max-mb)"
    );
    // …and, streamed without one, once that many bytes have arrived.
    let streamed = Body::new(std::io::Cursor::new(vec![b'#'; 3 << 20]));
    let (status, _, problem) = post(&server, path, Some(&collector), &[], streamed);
    assert_eq!(status, 413, "{problem}");
    // The service goes on.
    accepted(
        &server,
        "/v1/ingest/dcgm?at=2026-11-02T12:00:00Z",
        &collector,
        SCRAPE,
    );
}

/// dcgm-exporter text made as it is read: `scrapes` scrapes of 8 GPUs × 10 fields, ~300 bytes a
/// line, with millisecond timestamps 15 s apart.
struct GeneratedScrapes {
    scrapes: u64,
    line: u64,
    pending: Vec<u8>,
    at: usize,
}

impl GeneratedScrapes {
    const GPUS: u64 = 8;
    const FIELDS: [&str; 10] = [
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_MEM_CLOCK",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE",
    ];
    const LINES_PER_SCRAPE: u64 = Self::GPUS * Self::FIELDS.len() as u64;

    fn new(scrapes: u64) -> Self {
        Self {
            scrapes,
            line: 0,
            pending: Vec::new(),
            at: 0,
        }
    }
}

impl Read for GeneratedScrapes {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.pending.len() {
            if self.line == self.scrapes * Self::LINES_PER_SCRAPE {
                return Ok(0);
            }
            self.pending.clear();
            self.at = 0;
            let scrape = self.line / Self::LINES_PER_SCRAPE;
            let field = (self.line / Self::GPUS) % Self::FIELDS.len() as u64;
            let gpu = self.line % Self::GPUS;
            let ts = 1_780_000_000_000 + scrape * 15_000;
            writeln!(
                self.pending,
                "{}{{gpu=\"{gpu}\",UUID=\"GPU-4f2a9c1e-0000-4000-8000-00000000000{gpu}\",device=\"nvidia{gpu}\",\
                 modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"gpu-node-0001.cluster.internal\",\
                 DCGM_FI_DRIVER_VERSION=\"550.54.15\",container=\"trainer\",namespace=\"research-llm\",\
                 pod=\"llama-pretrain-7b-worker-{gpu}-5d8f7c9b6-x2k4q\"}} {} {ts}",
                Self::FIELDS[field as usize],
                (scrape + gpu) % 100
            )?;
            self.line += 1;
        }
        let n = buf.len().min(self.pending.len() - self.at);
        buf[..n].copy_from_slice(&self.pending[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[test]
fn a_large_body_streams_through_in_bounded_memory() {
    let ledger = ledgers().remove(0);
    let collector = ledger.token("ingest", None);
    let reader = ledger.token("read", None);
    // Batches of 4,096 rows: the body's 67,200 rows must pass through as 17 batches, each written
    // as it fills (with the default, 262,144 rows, this body would be a single batch).
    let server = ledger.serve(&["--ingest-batch-rows", "4096"]);
    let pid = server.pid();
    // Warm the service up with a small ingest, so that what follows measures the body alone.
    accepted(
        &server,
        "/v1/ingest/dcgm?at=2026-11-01T00:00:00Z",
        &collector,
        SCRAPE,
    );
    // The peak so far (start-up, the warm-up) is forgotten: VmHWM restarts from VmRSS. Where
    // /proc refuses that, growth is counted from the resident set now (an overestimate).
    let before = match std::fs::write(format!("/proc/{pid}/clear_refs"), "5") {
        Ok(()) => memory_kb(pid, "VmHWM"),
        Err(_) => memory_kb(pid, "VmRSS"),
    };

    // 8 400 scrapes × 80 lines of ~300 bytes: about 200 MB, sent chunked (no Content-Length).
    let scrapes = 8_400;
    // The test build is unoptimised: give the request more than the client's default 30 s.
    let response = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()
        .unwrap()
        .post(server.url("/v1/ingest/dcgm?cluster=big"))
        .bearer_auth(&collector)
        .body(Body::new(GeneratedScrapes::new(scrapes)))
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 202);
    let report: Value = response.json().unwrap();
    assert_eq!(
        report["records_read"],
        scrapes * GeneratedScrapes::LINES_PER_SCRAPE,
        "{report}"
    );
    // One wide row per GPU and scrape.
    assert_eq!(report["rows"], json!({"gpu_samples": scrapes * 8}));
    let peak = memory_kb(pid, "VmHWM");
    let growth_mib = peak.saturating_sub(before) / 1024;
    eprintln!("200 MB streamed: the server grew by {growth_mib} MiB at its peak");
    // A body held whole would add its 200 MB at least, its rows as one batch about 120 MiB.
    assert!(
        growth_mib < 64,
        "the server grew by {growth_mib} MiB ({before} KiB before, {peak} KiB at the peak)"
    );
    let batch = report["batch_id"].as_str().unwrap();
    let files = server.rows(
        &reader,
        &format!(
            "select count(*) as files, max(rows) as largest from system.files \
             where batch_id = '{batch}'"
        ),
    );
    // 17 batches (16 of 4,096 rows and one of 1,664); the scrapes run 35 hours over three UTC
    // days, and the two batches that straddle midnight are written as a file per day: 19.
    assert_eq!(files, [json!({"files": 19, "largest": 4096})]);
    let rows = server.rows(
        &reader,
        "select count(*) as n from gpu_samples where cluster = 'big'",
    );
    assert_eq!(rows, [json!({"n": scrapes * 8})]);
}

#[test]
fn remote_write_lands_dcgm_samples_that_sql_then_reads() {
    for ledger in ledgers() {
        let collector = ledger.token("ingest", None);
        let reader = ledger.token("read", None);
        let server = ledger.serve(&[]);
        let backend = ledger.backend;

        let gpu = |name| {
            vec![
                ("__name__", name),
                ("Hostname", "n7"),
                ("UUID", "GPU-rw"),
                ("gpu", "3"),
                ("modelName", "NVIDIA A100-SXM4-80GB"),
            ]
        };
        // 2026-11-02T10:00:00Z and 15 s later, in milliseconds.
        let (t0, t1) = (1_793_613_600_000, 1_793_613_615_000);
        let mut request = Vec::new();
        for series in [
            protobuf::time_series(&gpu("DCGM_FI_DEV_GPU_TEMP"), &[(40.0, t0), (44.0, t1)]),
            protobuf::time_series(
                &[("__name__", "node_load1"), ("instance", "n7:9100")],
                &[(1.5, t0)],
            ),
            protobuf::time_series(&gpu("DCGM_FI_DEV_POWER_USAGE"), &[(250.5, t0), (260.0, t1)]),
        ] {
            protobuf::bytes(&mut request, 1, &series);
        }
        let body = snap::raw::Encoder::new().compress_vec(&request).unwrap();
        let headers = [
            ("Content-Encoding", "snappy"),
            ("Content-Type", "application/x-protobuf"),
            ("X-Prometheus-Remote-Write-Version", "0.1.0"),
        ];
        let (status, _, report) = post(
            &server,
            "/v1/prom/write?cluster=prod",
            Some(&collector),
            &headers,
            body.clone(),
        );
        assert_eq!(status, 202, "[{backend}] {report}");
        // 5 samples read; node_load1 is not DCGM's; two scrape times of one GPU → two rows.
        assert_eq!(report["records_read"], 5);
        assert_eq!(report["ignored_series"], 1);
        assert_eq!(report["rows"], json!({"gpu_samples": 2}));
        assert_eq!(report["source"], "remote_write");

        let rows = server.rows(
            &reader,
            "select cast(ts as varchar) as ts, cluster, node, gpu_index, gpu_model, gpu_temp_c, power_w \
             from gpu_samples where gpu_uuid = 'GPU-rw' order by ts",
        );
        assert_eq!(
            rows,
            [
                json!({"ts": "2026-11-02T10:00:00Z", "cluster": "prod", "node": "n7", "gpu_index": 3,
                       "gpu_model": "NVIDIA A100-SXM4-80GB", "gpu_temp_c": 40.0, "power_w": 250.5}),
                json!({"ts": "2026-11-02T10:00:15Z", "cluster": "prod", "node": "n7", "gpu_index": 3,
                       "gpu_model": "NVIDIA A100-SXM4-80GB", "gpu_temp_c": 44.0, "power_w": 260.0}),
            ],
            "[{backend}]"
        );

        // Prometheus re-sends a body it got no answer for: it lands once.
        let (status, _, again) = post(
            &server,
            "/v1/prom/write?cluster=prod",
            Some(&collector),
            &headers,
            body,
        );
        assert_eq!((status, &again["duplicate"]), (202, &json!(true)));
        let (status, _, problem) = post(
            &server,
            "/v1/prom/write",
            Some(&collector),
            &headers,
            "not snappy",
        );
        assert_eq!(status, 422, "{problem}");
        let count = server.rows(&reader, "select count(*) as n from gpu_samples");
        assert_eq!(count, [json!({"n": 2})]);
    }
}

/// A dcgm-exporter stand-in on 127.0.0.1: answers every request with `SCRAPE` and counts them.
/// Polls `query`'s single `n` until `done` holds, for at most 30 s.
fn wait_for(server: &Server, token: &str, query: &str, done: impl Fn(i64) -> bool) -> i64 {
    let started = Instant::now();
    loop {
        let n = server.rows(token, query)[0]["n"].as_i64().unwrap();
        if done(n) || started.elapsed() > Duration::from_secs(30) {
            return n;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn scrape_targets_are_scraped_on_their_interval_until_deleted() {
    for ledger in ledgers() {
        let admin = ledger.token("admin", None);
        let server = ledger.serve(&[]);
        let backend = ledger.backend;
        let (url, hits) = exporter(SCRAPE);

        let create = |name: &str, url: &str| {
            let response = server
                .http
                .post(server.url("/v1/objects/scrape_target"))
                .bearer_auth(&admin)
                .json(&json!({"name": name, "spec": {
                    "url": url, "interval": "1s", "cluster": "lab", "labels": {"rack": "r1"}}}))
                .send()
                .unwrap();
            assert_eq!(response.status().as_u16(), 201, "[{backend}]");
        };
        // Validation names the field.
        let response = server
            .http
            .post(server.url("/v1/objects/scrape_target"))
            .bearer_auth(&admin)
            .json(&json!({"name": "x", "spec": {"url": url, "interval": "soon", "cluster": "lab"}}))
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 422);
        let problem: Value = response.json().unwrap();
        assert!(
            problem["detail"]
                .as_str()
                .unwrap()
                .starts_with("spec.interval: must be a number and a unit"),
            "{problem}"
        );

        create("node-1", &url);
        // A target nothing listens on: its failures are counted, and the service goes on.
        create("gone", "http://127.0.0.1:9/metrics");
        let count = "select count(*) as n from gpu_samples where cluster = 'lab'";
        let scraped = wait_for(&server, &admin, count, |n| n >= 2);
        assert!(scraped >= 2, "[{backend}] {scraped} scrapes landed");
        // Each scrape is one row at its own time, with the target's label.
        let rows = server.rows(
            &admin,
            "select count(*) as n, count(distinct ts) as times, min(labels) as labels, \
             min(gpu_temp_c) as temp from gpu_samples where cluster = 'lab'",
        );
        assert_eq!(rows[0]["n"], rows[0]["times"], "[{backend}] {rows:?}");
        assert_eq!(
            (&rows[0]["labels"], &rows[0]["temp"]),
            (&json!("{\"rack\":\"r1\"}"), &json!(41.0)),
            "[{backend}]"
        );
        let metrics = || server.metrics();
        let failed = "gpuledger_scrapes_total{target=\"gone\",outcome=\"error\"}";
        let started = Instant::now();
        while !metrics().contains(failed) && started.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(300));
        }
        let metrics = metrics();
        assert!(metrics.contains(failed), "{metrics}");
        assert!(metrics.contains("gpuledger_scrapes_total{target=\"node-1\",outcome=\"ok\"}"));

        // Deleted: scraping stops once the service has read the targets again (every 2 s).
        let response = server
            .http
            .delete(server.url("/v1/objects/scrape_target/node-1"))
            .bearer_auth(&admin)
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 204);
        std::thread::sleep(Duration::from_secs(4));
        let stopped_at = hits.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_secs(3));
        assert_eq!(
            hits.load(Ordering::SeqCst),
            stopped_at,
            "[{backend}] still scraped"
        );
        assert_eq!(server.sql(&admin, "select 1").0, 200);
    }
}

/// One ownership rule for team-scoped senders: a team's ingest token lands only rows labelled
/// with its team (events, gateway requests), nothing of another team, of no team, or of the
/// fleet (telemetry); and an Idempotency-Key is the client's within one token and route.
#[test]
fn team_tokens_land_only_their_team_and_keys_are_per_token_and_route() {
    let ledger = ledgers().remove(0);
    let team_a = ledger.token("ingest", Some("a"));
    let admin = ledger.token("admin", None);
    let server = ledger.serve(&[]);
    let post = |token: &str, path: &str, key: Option<&str>, body: String| {
        let mut request = server
            .http
            .post(server.url(path))
            .bearer_auth(token)
            .body(body);
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        let response = request.send().unwrap();
        let replayed = response.headers().contains_key("idempotent-replayed");
        let status = response.status().as_u16();
        (status, replayed, response.json::<Value>().unwrap())
    };
    let event = |pod: &str, labels: &str| {
        format!(
            "{{\"ts\":\"2026-11-02T00:00:00Z\",\"event\":\"start\",\"cluster\":\"c\",\"node\":\"n\",\
             \"namespace\":\"ns\",\"workload\":\"w\",\"pod\":\"{pod}\",\"gpus\":1,\"gpu_indices\":[0],\
             \"labels\":{{{labels}}}}}\n"
        )
    };
    let events = || ledger.scalar("select count(*) as n from scheduler_events");

    // Another team's row anywhere in the body: 403 naming it, and nothing of the body lands.
    let (status, _, body) = post(
        &team_a,
        "/v1/ingest/events",
        None,
        event("p1", "\"team\":\"a\"") + &event("p2", "\"team\":\"b\""),
    );
    assert_eq!(status, 403, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("scheduler_events row 2: labelled team 'b'"),
        "{body}"
    );
    // No team label, or fleet telemetry: refused too.
    let (status, _, body) = post(&team_a, "/v1/ingest/events", None, event("p3", ""));
    assert_eq!(status, 403, "{body}");
    let dcgm = "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",Hostname=\"n\"} 50 1793577600000\n".to_string();
    let (status, _, body) = post(&team_a, "/v1/ingest/dcgm?cluster=c", None, dcgm);
    assert_eq!(status, 403, "{body}");
    assert_eq!(events(), serde_json::json!(0));
    // Refused before its rows could join a group commit: none of them landed.
    assert_eq!(ledger.scalar("select count(*) from gpu_samples"), 0);
    // Its own rows land.
    let (status, _, body) = post(
        &team_a,
        "/v1/ingest/events",
        None,
        event("p4", "\"team\":\"a\""),
    );
    assert_eq!(status, 202, "{body}");
    assert_eq!(events(), serde_json::json!(1));

    // team a's key "k1" on events; the admin's "k1" is another key: its body lands, not a replay.
    let (status, replayed, _) = post(
        &team_a,
        "/v1/ingest/events",
        Some("k1"),
        event("p5", "\"team\":\"a\""),
    );
    assert_eq!((status, replayed), (202, false));
    let (status, replayed, body) = post(
        &admin,
        "/v1/ingest/events",
        Some("k1"),
        event("p6", "\"team\":\"b\""),
    );
    assert_eq!((status, replayed), (202, false), "{body}");
    assert_eq!(events(), serde_json::json!(3));
    // The same token and route again: the first answer, replayed, nothing lands.
    let (status, replayed, _) = post(
        &team_a,
        "/v1/ingest/events",
        Some("k1"),
        event("p7", "\"team\":\"a\""),
    );
    assert_eq!((status, replayed), (202, true));
    assert_eq!(events(), serde_json::json!(3));
}
