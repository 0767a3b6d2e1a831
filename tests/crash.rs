//! `kill -9` of `serve` while 100 clients push HTTP ingest, ten times over: every body a client
//! sends lands exactly once, whether its acknowledgement arrived, was lost with the process, or
//! the client sent it again after an acknowledgement, with and without an `Idempotency-Key`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde_json::Value;

use crate::support::{Ledger, ledgers};

const CLIENTS: usize = 100;
/// Bodies each client sends, one after another.
const BODIES_PER_CLIENT: usize = 4;
const CYCLES: usize = 10;
/// 2026-11-02T10:00:00Z in milliseconds: the dcgm bodies' first reading.
const T0_MS: i64 = 1_793_613_600_000;

/// A small seeded generator (splitmix64): the kill points are the same on every run.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One body: its route, its bytes, the rows it lands (marked with its number), and whether it
/// carries an Idempotency-Key.
struct Body {
    number: usize,
    path: &'static str,
    text: String,
    table: &'static str,
    rows: u64,
    keyed: bool,
}

/// Body `n`: dcgm readings at explicit times, a job's start and stop, or three requests, each
/// distinguishable by its marker `crash-<n>` (GPU UUID, pod, workload).
fn body(n: usize) -> Body {
    let marker = format!("crash-{n}");
    let keyed = n.is_multiple_of(2);
    match n % 3 {
        0 => {
            let text = (0..3)
                .map(|i| {
                    format!(
                        "DCGM_FI_DEV_GPU_UTIL{{gpu=\"0\",UUID=\"{marker}\",Hostname=\"n{n}\"}} {} {}\n",
                        40 + i,
                        T0_MS + i * 15_000
                    )
                })
                .collect();
            Body {
                number: n,
                path: "/v1/ingest/dcgm?cluster=c",
                text,
                table: "gpu_samples",
                rows: 3,
                keyed,
            }
        }
        1 => {
            let text = format!(
                "{{\"ts\":\"2026-11-02T00:00:00Z\",\"event\":\"start\",\"cluster\":\"c\",\"node\":\"n{n}\",\"namespace\":\"ml\",\"workload\":\"train\",\"pod\":\"{marker}\",\"gpus\":1,\"labels\":{{\"team\":\"a\"}}}}\n\
                 {{\"ts\":\"2026-11-02T06:00:00Z\",\"event\":\"stop\",\"cluster\":\"c\",\"node\":\"n{n}\",\"namespace\":\"ml\",\"workload\":\"train\",\"pod\":\"{marker}\",\"reason\":\"finished\"}}\n"
            );
            Body {
                number: n,
                path: "/v1/ingest/events",
                text,
                table: "scheduler_events",
                rows: 2,
                keyed,
            }
        }
        _ => {
            let text = (0..3)
                .map(|i| {
                    format!(
                        "{{\"ts\":\"2026-11-02T10:00:0{i}Z\",\"request_id\":\"{marker}-{i}\",\"workload\":\"{marker}\",\"model\":\"m\",\"input_tokens\":10,\"output_tokens\":5,\"status\":\"success\"}}\n"
                    )
                })
                .collect();
            Body {
                number: n,
                path: "/v1/ingest/tokens",
                text,
                table: "token_usage",
                rows: 3,
                keyed,
            }
        }
    }
}

/// The service's address while it is up, `None` while it is down.
type Address = Arc<RwLock<Option<String>>>;

/// An acknowledged answer: `outcome` and `batch_id` of a 202, and whether it was the stored
/// answer to its Idempotency-Key given again.
#[derive(Debug, Clone)]
struct Ack {
    body: usize,
    outcome: String,
    batch_id: String,
    rows: u64,
    replayed: bool,
}

/// Sends `body` until a 202 comes back, through every crash; a 4xx is a failure of the test.
fn deliver(http: &reqwest::blocking::Client, address: &Address, token: &str, body: &Body) -> Ack {
    loop {
        let Some(base) = address.read().unwrap().clone() else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        let mut request = http
            .post(format!("{base}{}", body.path))
            .bearer_auth(token)
            .body(body.text.clone());
        if body.keyed {
            request = request.header("Idempotency-Key", format!("body-{}", body.number));
        }
        // Refused, reset or cut off by the kill: the client does not know; it sends again.
        let Ok(response) = request.send() else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        let status = response.status().as_u16();
        let replayed = response.headers().contains_key("idempotent-replayed");
        let Ok(text) = response.text() else {
            continue;
        };
        if status >= 500 {
            continue;
        }
        assert_eq!(status, 202, "body {}: {text}", body.number);
        let answer: Value = serde_json::from_str(&text).unwrap();
        return Ack {
            body: body.number,
            outcome: answer["outcome"].as_str().unwrap().to_string(),
            batch_id: answer["batch_id"].as_str().unwrap().to_string(),
            rows: answer["rows"][body.table].as_u64().unwrap_or(0),
            replayed,
        };
    }
}

fn crash_cycles(ledger: &Ledger) {
    let backend = ledger.backend;
    let token = Arc::new(ledger.token("ingest", None));
    // Long rounds: the live ledger's own batches do not interleave with the count.
    let serve_args = ["--ledger-interval", "1h"];
    let address: Address = Arc::new(RwLock::new(None));
    let acked = Arc::new(AtomicUsize::new(0));
    let acks = Arc::new(Mutex::new(Vec::<Ack>::new()));

    let mut server = ledger.serve(&serve_args);
    *address.write().unwrap() = Some(server.base.clone());

    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (address, token, acked, acks) = (
                Arc::clone(&address),
                Arc::clone(&token),
                Arc::clone(&acked),
                Arc::clone(&acks),
            );
            std::thread::spawn(move || {
                let http = reqwest::blocking::Client::builder()
                    .timeout(Duration::from_secs(30))
                    .build()
                    .unwrap();
                for i in 0..BODIES_PER_CLIENT {
                    let body = body(i * CLIENTS + client);
                    let ack = deliver(&http, &address, &token, &body);
                    acks.lock().unwrap().push(ack);
                    // Every third client sends each body again after its acknowledgement, as a
                    // client does that lost the answer: it must land nothing.
                    if client % 3 == 0 {
                        let again = deliver(&http, &address, &token, &body);
                        acks.lock().unwrap().push(again);
                    }
                    acked.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();

    let total = CLIENTS * BODIES_PER_CLIENT;
    let mut rng = SplitMix(0x5eed_0015);
    for cycle in 0..CYCLES {
        // Kill after a seeded number of further acknowledgements (while the other clients are
        // in flight), early enough that every cycle has load left.
        let target = (acked.load(Ordering::SeqCst) + 5 + rng.below(20) as usize).min(total - 1);
        while acked.load(Ordering::SeqCst) < target {
            std::thread::sleep(Duration::from_millis(1));
        }
        *address.write().unwrap() = None;
        server.kill();
        assert!(
            acked.load(Ordering::SeqCst) < total,
            "[{backend}] cycle {cycle}: every body was acknowledged before the kill"
        );
        server = ledger.serve(&serve_args);
        *address.write().unwrap() = Some(server.base.clone());
    }
    for client in clients {
        client.join().unwrap();
    }
    drop(server);

    // Acknowledged = landed, exactly once: each body's marker has its rows, no more.
    let mut landed: BTreeMap<String, u64> = BTreeMap::new();
    for (table, column) in [
        ("gpu_samples", "gpu_uuid"),
        ("scheduler_events", "pod"),
        ("token_usage", "workload"),
    ] {
        for row in ledger.sql(&format!(
            "select {column} as marker, count(*) as n from {table} group by {column}"
        )) {
            landed.insert(
                row["marker"].as_str().unwrap().to_string(),
                row["n"].as_u64().unwrap(),
            );
        }
    }
    let expected: BTreeMap<String, u64> = (0..total)
        .map(|n| (format!("crash-{n}"), body(n).rows))
        .collect();
    assert_eq!(landed, expected, "[{backend}] rows per body");

    // Every acknowledgement names a committed batch; a body has one batch that landed it, and
    // at most one acknowledgement that says it landed (the others: it was there already).
    let batches: BTreeMap<String, u64> = ledger
        .sql("select batch_id, rows_landed from system.ingest_batches where source <> 'ledger'")
        .iter()
        .map(|row| {
            (
                row["batch_id"].as_str().unwrap().to_string(),
                row["rows_landed"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(batches.len(), total, "[{backend}] one batch per body");
    let acks = acks.lock().unwrap();
    let mut landed_acks: BTreeMap<usize, usize> = BTreeMap::new();
    for ack in acks.iter() {
        assert!(
            batches.contains_key(&ack.batch_id),
            "[{backend}] body {} was acknowledged with batch {}, which is not in the catalog",
            ack.body,
            ack.batch_id
        );
        assert!(!ack.replayed || body(ack.body).keyed, "[{backend}] {ack:?}");
        match ack.outcome.as_str() {
            "landed" => {
                assert_eq!(ack.rows, body(ack.body).rows, "[{backend}] {ack:?}");
                if !ack.replayed {
                    *landed_acks.entry(ack.body).or_default() += 1;
                }
            }
            "unchanged" => assert_eq!(ack.rows, 0, "[{backend}] {ack:?}"),
            other => panic!("[{backend}] body {}: outcome {other}", ack.body),
        }
    }
    assert!(
        landed_acks.values().all(|n| *n == 1),
        "[{backend}] a body acknowledged as landed twice: {landed_acks:?}"
    );
    let resent = (0..CLIENTS).filter(|c| c % 3 == 0).count() * BODIES_PER_CLIENT;
    assert_eq!(acks.len(), total + resent, "[{backend}]");
    eprintln!(
        "[{backend}] {CYCLES} kills: {} bodies, {} acknowledgements, {} of them 'landed'",
        total,
        acks.len(),
        landed_acks.len()
    );
}

#[test]
fn kill_9_during_concurrent_ingest_lands_every_acknowledged_body_exactly_once() {
    for ledger in ledgers() {
        crash_cycles(&ledger);
    }
}
