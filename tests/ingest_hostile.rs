//! Ingest as a hostile or unlucky client drives it: bodies re-sent without a key, gzip bombs,
//! endless lines, floods of bad lines, values no device reports, and clients that never finish
//! their request. Each case asserts what lands, what is refused, and that the service goes on.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use flate2::Compression;
use flate2::write::GzEncoder;
use reqwest::blocking::Body;
use serde_json::Value;

use crate::support::{Ledger, Server, describe, ledgers, memory_kb};

/// One GPU's scrape without timestamps: what dcgm-exporter serves.
const SCRAPE: &str = "\
DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-1\",Hostname=\"n1\",modelName=\"NVIDIA H100\"} 87
DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-1\",Hostname=\"n1\",modelName=\"NVIDIA H100\"} 71.5
";

/// A training job of team a: start and stop.
const EVENTS: &str = r#"{"ts":"2026-11-02T00:00:00Z","event":"start","cluster":"c","node":"n1","namespace":"ml","workload":"train","pod":"train-0","gpus":1,"labels":{"team":"a"}}
{"ts":"2026-11-02T06:00:00Z","event":"stop","cluster":"c","node":"n1","namespace":"ml","workload":"train","pod":"train-0","reason":"finished"}
"#;

fn post(server: &Server, path: &str, token: &str, body: impl Into<Body>) -> (u16, Value) {
    let response = server
        .http
        .post(server.url(path))
        .bearer_auth(token)
        .body(body)
        .send()
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn accepted(server: &Server, path: &str, token: &str, body: impl Into<Body>) -> Value {
    let (status, body) = post(server, path, token, body);
    assert_eq!(status, 202, "{path}: {body}");
    body
}

fn count(ledger: &Ledger, table: &str) -> i64 {
    ledger
        .scalar(&format!("select count(*) as n from {table}"))
        .as_i64()
        .unwrap()
}

/// The batches ingest committed: a serving ledger also commits its own builds (source `ledger`)
/// whenever its interval comes round, which these tests do not count.
fn ingest_batches(ledger: &Ledger) -> i64 {
    count(ledger, "system.ingest_batches where source <> 'ledger'")
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

#[test]
fn a_body_sent_again_without_a_key_lands_once() {
    for ledger in ledgers() {
        let backend = ledger.backend;
        let collector = ledger.token("ingest", None);
        let server = ledger.serve(&[]);

        let first = accepted(&server, "/v1/ingest/events", &collector, EVENTS);
        assert_eq!(first["outcome"], "landed", "[{backend}] {first}");
        assert_eq!(first["rows"]["scheduler_events"], 2);
        // The same bytes again, and gzip-compressed: the same delivery.
        for body in [EVENTS.as_bytes().to_vec(), gzip(EVENTS.as_bytes())] {
            let again = accepted(&server, "/v1/ingest/events", &collector, body);
            assert_eq!(
                (&again["outcome"], &again["batch_id"], &again["rows"]),
                (
                    &Value::from("unchanged"),
                    &first["batch_id"],
                    &serde_json::json!({})
                ),
                "[{backend}] {again}"
            );
        }

        // An untimestamped scrape retried byte for byte: stamped with its first arrival only.
        let scrape = accepted(&server, "/v1/ingest/dcgm?cluster=c", &collector, SCRAPE);
        assert_eq!(scrape["outcome"], "landed", "[{backend}] {scrape}");
        let retry = accepted(&server, "/v1/ingest/dcgm?cluster=c", &collector, SCRAPE);
        assert_eq!(
            (&retry["outcome"], &retry["batch_id"]),
            (&Value::from("unchanged"), &scrape["batch_id"]),
            "[{backend}] {retry}"
        );
        // Another token sending the same bytes is another exporter's reading: it lands.
        let other = ledger.token("ingest", None);
        let elsewhere = accepted(&server, "/v1/ingest/dcgm?cluster=c", &other, SCRAPE);
        assert_eq!(elsewhere["outcome"], "landed", "[{backend}] {elsewhere}");
        // With a declared time, the time is part of the delivery: a second scrape lands.
        for at in ["2026-11-02T10:00:00Z", "2026-11-02T10:00:30Z"] {
            let path = format!("/v1/ingest/dcgm?cluster=c&at={at}");
            assert_eq!(
                accepted(&server, &path, &collector, SCRAPE)["outcome"],
                "landed"
            );
            assert_eq!(
                accepted(&server, &path, &collector, SCRAPE)["outcome"],
                "unchanged"
            );
        }
        drop(server);
        assert_eq!(count(&ledger, "scheduler_events"), 2, "[{backend}]");
        assert_eq!(count(&ledger, "gpu_samples"), 4, "[{backend}]");
        assert_eq!(ingest_batches(&ledger), 5, "[{backend}]");
    }
}

#[test]
fn an_untimestamped_scrape_retried_after_the_window_is_a_new_reading() {
    let ledger = ledgers().remove(0);
    let collector = ledger.token("ingest", None);
    let server = ledger.serve(&["--ingest-retry-window", "1s"]);
    let first = accepted(&server, "/v1/ingest/dcgm", &collector, SCRAPE);
    std::thread::sleep(Duration::from_millis(1500));
    let later = accepted(&server, "/v1/ingest/dcgm", &collector, SCRAPE);
    assert_eq!(
        (&first["outcome"], &later["outcome"]),
        (&"landed".into(), &"landed".into())
    );
    drop(server);
    assert_eq!(count(&ledger, "gpu_samples"), 2);
}

#[test]
fn the_same_stdin_twice_lands_once() {
    for ledger in ledgers() {
        let backend = ledger.backend;
        for (source, text, table) in [
            ("events", EVENTS, "scheduler_events"),
            ("dcgm", SCRAPE, "gpu_samples"),
        ] {
            let first = ledger.run_with_stdin(&["ingest", source, "-"], text.as_bytes());
            assert!(first.status.success(), "{}", describe(&first));
            let rows = count(&ledger, table);
            assert!(rows > 0, "[{backend}] {source}");
            let second = ledger.run_with_stdin(&["ingest", source, "-"], text.as_bytes());
            assert!(second.status.success(), "{}", describe(&second));
            let said = String::from_utf8_lossy(&second.stdout);
            assert!(said.contains("already ingested"), "[{backend}] {said}");
            assert_eq!(count(&ledger, table), rows, "[{backend}] {source}");
        }
    }
}

/// gzip members of `member` (a few MiB of one byte), repeated: `repeats × member.len()` bytes
/// once decompressed, a few kilobytes each as sent.
fn bomb(prefix: &[u8], byte: u8, member_mib: usize, repeats: usize) -> Vec<u8> {
    let member = gzip(&vec![byte; member_mib << 20]);
    let mut body = gzip(prefix);
    for _ in 0..repeats {
        body.extend_from_slice(&member);
    }
    body
}

#[test]
fn gzip_bombs_and_endless_lines_are_refused_with_413() {
    let ledger = ledgers().remove(0);
    let collector = ledger.token("ingest", None);
    // 4 MiB: a debug build reads 4 M empty lines before the limit; the server's work is bounded
    // by the limit, not by the 1 GiB the body expands to.
    let server = ledger.serve(&["--ingest-max-decompressed-mb", "4"]);
    // 1 GiB of newlines, about 1 MiB as sent.
    let newlines = bomb(b"", b'\n', 8, 128);
    assert!(newlines.len() < 2 << 20, "{}", newlines.len());
    let focus_header =
        b"BilledCost,EffectiveCost,BillingCurrency,ChargePeriodStart,ChargePeriodEnd\n";
    let rss_before = memory_kb(server.pid(), "VmRSS");
    for (source, body) in [
        ("dcgm", newlines.clone()),
        ("tokens", newlines.clone()),
        ("events", newlines.clone()),
        ("focus", bomb(focus_header, b'\n', 8, 128)),
    ] {
        let started = Instant::now();
        let (status, problem) = post(&server, &format!("/v1/ingest/{source}"), &collector, body);
        assert_eq!(status, 413, "{source}: {problem}");
        assert_eq!(
            problem["detail"],
            format!(
                "http:{source}: the input is larger than 4 MiB once decompressed \
                 (the limit --ingest-max-decompressed-mb)"
            )
        );
        eprintln!("{source}: 413 after {:?}", started.elapsed());
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{source}: {:?}",
            started.elapsed()
        );
    }
    // A line of 2 MiB, even compressed to nothing, is refused at its line.
    let (status, problem) = post(
        &server,
        "/v1/ingest/dcgm",
        &collector,
        bomb(SCRAPE.as_bytes(), b'x', 2, 1),
    );
    assert_eq!(status, 413, "{problem}");
    assert_eq!(
        problem["detail"],
        "http:dcgm:3: the line is longer than 1024 KiB (the limit --ingest-max-line-kb)"
    );
    let rss_after = memory_kb(server.pid(), "VmRSS");
    assert!(
        rss_after < rss_before + 200 * 1024,
        "RSS grew from {rss_before} KiB to {rss_after} KiB"
    );
    // Nothing of them landed, and the service goes on.
    let landed = accepted(
        &server,
        "/v1/ingest/dcgm?at=2026-11-02T10:00:00Z",
        &collector,
        SCRAPE,
    );
    assert_eq!(landed["rows"]["gpu_samples"], 1);
    let health = server.http.get(server.url("/healthz")).send().unwrap();
    assert_eq!(health.status().as_u16(), 200);
    drop(server);
    assert_eq!(ingest_batches(&ledger), 1);
}

#[test]
fn the_cli_bounds_lines_and_decompressed_size_too() {
    let ledger = ledgers().remove(0);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bomb.prom.gz");
    std::fs::write(&path, bomb(b"", b'\n', 8, 32)).unwrap();
    let out = ledger.run(&[
        "ingest",
        "dcgm",
        path.to_str().unwrap(),
        "--max-decompressed-mb",
        "8",
    ]);
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(
            "the input is larger than 8 MiB once decompressed (the limit --max-decompressed-mb)"
        ),
        "{}",
        describe(&out)
    );
    let long = dir.path().join("long.prom");
    std::fs::write(&long, format!("{SCRAPE}{}\n", "x".repeat(3 << 20))).unwrap();
    let out = ledger.run(&["ingest", "dcgm", long.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!(
            "{}:3: the line is longer than 1024 KiB (the limit --max-line-kb)",
            long.display()
        )),
        "{}",
        describe(&out)
    );
    assert_eq!(ingest_batches(&ledger), 0);
}

#[test]
fn a_flood_of_bad_lines_is_counted_not_stored_and_stalls_nobody() {
    let ledger = ledgers().remove(0);
    let collector = ledger.token("ingest", None);
    let reader = ledger.token("read", None);
    let server = ledger.serve(&[]);
    let mut body = String::from(SCRAPE);
    for i in 0..200_000 {
        body.push_str(&format!(
            "DCGM_FI_DEV_GPU_TEMP{{gpu=\"{}\",UUID=\"GPU-x\"}} hot\n",
            i % 8
        ));
    }
    let base = server.base.clone();
    let me = std::thread::spawn(move || {
        let client = reqwest::blocking::Client::new();
        let mut slowest = Duration::ZERO;
        for _ in 0..20 {
            let started = Instant::now();
            let response = client
                .get(format!("{base}/v1/me"))
                .bearer_auth(&reader)
                .send()
                .unwrap();
            assert_eq!(response.status().as_u16(), 200);
            slowest = slowest.max(started.elapsed());
            std::thread::sleep(Duration::from_millis(50));
        }
        slowest
    });
    let answer = accepted(
        &server,
        "/v1/ingest/dcgm?at=2026-11-02T10:00:00Z",
        &collector,
        body,
    );
    let slowest = me.join().unwrap();
    assert!(slowest < Duration::from_secs(2), "/v1/me took {slowest:?}");
    assert_eq!(
        (
            &answer["quarantined"],
            &answer["quarantine_kept"],
            &answer["rows"]["gpu_samples"]
        ),
        (&Value::from(200_000), &Value::from(1000), &Value::from(1)),
        "{answer}"
    );
    assert_eq!(answer["rejections"].as_array().unwrap().len(), 20);
    assert_eq!(answer["rejections"][0]["line"], 3);
    drop(server);
    assert_eq!(count(&ledger, "quarantine"), 1000);
    assert_eq!(
        ledger.scalar("select records_rejected from system.ingest_batches where source = 'dcgm'"),
        200_000
    );
}

/// Reads until the server closes the connection (or `limit` passes): whether it did.
fn closed_by_server(stream: &mut std::net::TcpStream, limit: Duration) -> bool {
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut buffer = [0u8; 1024];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

#[test]
fn half_sent_requests_are_cut_off_and_health_still_answers() {
    let ledger = ledgers().remove(0);
    let server = ledger.serve(&["--header-timeout", "1s", "--max-connections", "200"]);
    let address = server.base.trim_start_matches("http://").to_string();
    let mut slow: Vec<std::net::TcpStream> = (0..500)
        .map(|_| {
            let mut stream = std::net::TcpStream::connect(&address).unwrap();
            stream
                .write_all(b"GET /v1/me HTTP/1.1\r\nHost: x\r\nAuthori")
                .unwrap();
            stream
        })
        .collect();
    // Past the connection cap, /healthz waits for a slot, which the header timeout frees.
    let started = Instant::now();
    let health = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
        .get(server.url("/healthz"))
        .send()
        .unwrap();
    assert_eq!(health.status().as_u16(), 200);
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    // Every half-sent request is closed by the server once its headers are late.
    let closed = slow
        .iter_mut()
        .map(|stream| closed_by_server(stream, Duration::from_secs(10)))
        .filter(|closed| *closed)
        .count();
    assert_eq!(closed, 500);
}

/// A client that stops sending its body is answered 408 after `--body-timeout`, whether its body
/// is small enough to be read whole before parsing (a scrape), streams to the parser (a large
/// declared length), or has no declared length (chunked); nothing lands, and the service goes on.
#[test]
fn a_body_that_stops_arriving_is_answered_408_whatever_its_size() {
    let ledger = ledgers().remove(0);
    let collector = ledger.token("ingest", None);
    let server = ledger.serve(&["--body-timeout", "1s"]);
    let address = server.base.trim_start_matches("http://").to_string();
    let half = &SCRAPE.as_bytes()[..SCRAPE.len() / 2];
    for (case, framing, sent) in [
        (
            "small",
            format!("Content-Length: {}\r\n", SCRAPE.len()),
            half.to_vec(),
        ),
        (
            "large",
            "Content-Length: 200000\r\n".to_string(),
            half.to_vec(),
        ),
        ("chunked", "Transfer-Encoding: chunked\r\n".to_string(), {
            let mut chunk = format!("{:x}\r\n", half.len()).into_bytes();
            chunk.extend_from_slice(half);
            chunk.extend_from_slice(b"\r\n");
            chunk
        }),
    ] {
        let mut stream = std::net::TcpStream::connect(&address).unwrap();
        let head = format!(
            "POST /v1/ingest/dcgm?cluster=c HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {collector}\r\n{framing}\r\n"
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(&sent).unwrap();
        let started = Instant::now();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut answer = Vec::new();
        let mut buffer = [0u8; 4096];
        while !String::from_utf8_lossy(&answer).contains("\r\n\r\n") {
            let n = stream.read(&mut buffer).expect("an answer before 20 s");
            assert!(n > 0, "{case}: closed without an answer");
            answer.extend_from_slice(&buffer[..n]);
        }
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 408"), "{case}: {answer}");
        assert!(started.elapsed() >= Duration::from_millis(900), "{case}");
    }
    assert_eq!(ingest_batches(&ledger), 0);
    // The whole scrape still lands.
    let landed = accepted(&server, "/v1/ingest/dcgm?cluster=c", &collector, SCRAPE);
    assert_eq!(landed["rows"]["gpu_samples"], 1, "{landed}");
}
