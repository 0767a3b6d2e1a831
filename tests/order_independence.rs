//! Issue 14: the same facts give the same ledger whatever order, file boundaries and repetition
//! they arrive in (docs/ledger.md, "Identity and ordering").
//!
//! Each case draws a small cluster day — pods that start and stop (some only stop: running since
//! before the day), telemetry whose SM activity changes by the hour, a bill per node and a shared
//! network line — cuts the events and the scrapes into files at random points, renders each scrape
//! file scrape-grouped or family-grouped, adds re-deliveries (byte-identical and re-serialized),
//! delivers the bill once or twice, shuffles everything, and lands it through the real parsers,
//! building the ledger incrementally after every file. The final `gpu_hours`, `allocations` and
//! `cost_entries` must equal, row for row, those of one build over the facts landed once, one file
//! per source, and balance. The lake is driven in-process (the same code `gpuledger ingest` and
//! `gpuledger ledger build` run) so that a case costs seconds, not a process per file.

use std::fmt::Write as _;

use chrono::{DateTime, Duration, NaiveDate, TimeZone, Utc};
use datafusion::arrow::util::pretty::pretty_format_batches;
use gpuledger_build::{balance, build_ledger, day_span, declared};
use gpuledger_ingest::ParseContext;
use gpuledger_ingest::pipeline::{IngestOptions, Input, Outcome, Source, ingest};
use gpuledger_lake::{Lake, LakeConfig};
use gpuledger_query::new_session;
use proptest::prelude::*;

const TEAMS: [&str; 3] = ["vision", "nlp", "search"];
/// Minutes between scrapes.
const SCRAPE_MINUTES: i64 = 10;

pub(crate) fn day() -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 11, 2).unwrap()
}

fn at(minute: i64) -> DateTime<Utc> {
    Utc.from_utc_datetime(&day().and_hms_opt(0, 0, 0).unwrap()) + Duration::minutes(minute)
}

#[derive(Debug, Clone)]
struct Pod {
    node: usize,
    /// The GPU the event names; `None` leaves it to telemetry or packing.
    gpu: Option<usize>,
    /// The GPU dcgm-exporter labels with the pod while it runs (its pod mapping), if any.
    seen_on: Option<usize>,
    team: usize,
    start: i64,
    minutes: i64,
    /// Started before the day: only its stop is in the data.
    lone_stop: bool,
    /// Still running at the day's end: no stop.
    running: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    pods: Vec<Pod>,
    /// Per node and GPU, SM activity by hour.
    activity: Vec<[[f64; 24]; 2]>,
    /// Per node, the day's effective cost in cents.
    node_cents: Vec<u32>,
    network_cents: u32,
    /// A GPU (node, index) that raises XID 79 (fallen off the bus) at the first scrape from this
    /// minute on and reports nothing after it: a fault to the day's end.
    fallen: Option<(usize, usize, i64)>,
}

fn pod() -> impl Strategy<Value = Pod> {
    (
        0usize..2,
        proptest::option::of(0usize..2),
        proptest::option::of(0usize..2),
        0usize..3,
        0i64..1380,
        1i64..600,
        proptest::bool::weighted(0.15),
        proptest::bool::weighted(0.2),
    )
        .prop_map(
            |(node, gpu, seen_on, team, start, minutes, lone_stop, running)| Pod {
                node,
                gpu,
                seen_on,
                team,
                start,
                minutes,
                lone_stop,
                running: running && !lone_stop,
            },
        )
}

pub(crate) fn scenario() -> impl Strategy<Value = Scenario> {
    // Idle (0.0), a stalled GPU whose utilisation still reads 14 % (0.02), busy.
    let level = prop_oneof![Just(0.0), Just(0.02), Just(0.3), Just(0.9)];
    let hours = proptest::array::uniform24(level);
    (
        proptest::collection::vec(pod(), 1..6),
        proptest::collection::vec(proptest::array::uniform2(hours), 2),
        proptest::collection::vec(2400u32..20000, 2),
        100u32..2000,
        proptest::option::of((0usize..2, 0usize..2, 0i64..1440)),
    )
        .prop_map(
            |(pods, activity, node_cents, network_cents, fallen)| Scenario {
                pods,
                activity,
                node_cents,
                network_cents,
                fallen,
            },
        )
}

/// How the inputs are cut, repeated and ordered.
#[derive(Debug, Clone)]
pub(crate) struct Delivery {
    /// Where the events (in time order) are cut into files: fractions of their count.
    event_cuts: Vec<f64>,
    /// Where the day's scrapes are cut into files: fractions of the day.
    scrape_cuts: Vec<f64>,
    /// Per scrape file: rendered family-grouped rather than scrape-grouped.
    family_grouped: Vec<bool>,
    /// Per scrape file: cut in one file per node (a node's scrapes landing late).
    by_node: Vec<bool>,
    /// Indices (mod the file count) of files delivered again byte for byte, and re-serialized.
    again: Vec<usize>,
    again_reserialized: Vec<usize>,
    /// 0: the bill once; 1: twice byte for byte; 2: twice, re-serialized.
    bill_twice: u8,
    /// A seed for the shuffle of all files.
    order: Vec<usize>,
}

pub(crate) fn delivery() -> impl Strategy<Value = Delivery> {
    (
        proptest::collection::vec(0.0f64..1.0, 0..3),
        proptest::collection::vec(0.0f64..1.0, 0..4),
        proptest::collection::vec(any::<bool>(), 5),
        proptest::collection::vec(any::<bool>(), 5),
        proptest::collection::vec(0usize..100, 0..3),
        proptest::collection::vec(0usize..100, 0..3),
        0u8..3,
        proptest::collection::vec(0usize..1000, 16),
    )
        .prop_map(
            |(
                event_cuts,
                scrape_cuts,
                family_grouped,
                by_node,
                again,
                again_reserialized,
                bill_twice,
                order,
            )| {
                Delivery {
                    event_cuts,
                    scrape_cuts,
                    family_grouped,
                    by_node,
                    again,
                    again_reserialized,
                    bill_twice,
                    order,
                }
            },
        )
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct File {
    source: Source,
    name: String,
    bytes: Vec<u8>,
}

/// One canonical JSON event; `reserialized` writes the same fields in another key order and
/// spacing (what a second collector or a retried push sends).
fn event_line(pod: usize, p: &Pod, kind: &str, minute: i64, reserialized: bool) -> String {
    let ts = at(minute).format("%Y-%m-%dT%H:%M:%SZ");
    let node = format!("n{}", p.node);
    let team = TEAMS[p.team];
    let gpus = match (kind, p.gpu) {
        ("start", Some(gpu)) => format!(r#","gpu_indices":[{gpu}]"#),
        _ => String::new(),
    };
    if reserialized {
        format!(
            r#"{{ "labels": {{ "team": "{team}" }}, "pod": "p{pod}", "workload": "w{pod}", "namespace": "ml", "node": "{node}", "cluster": "demo", "event": "{kind}", "ts": "{ts}", "gpus": 1{gpus} }}"#
        )
    } else {
        format!(
            r#"{{"ts":"{ts}","event":"{kind}","cluster":"demo","node":"{node}","namespace":"ml","workload":"w{pod}","pod":"p{pod}","gpus":1{gpus},"labels":{{"team":"{team}"}}}}"#
        )
    }
}

/// The events as (time, line, re-serialized line), in time order.
fn events(s: &Scenario) -> Vec<(i64, String, String)> {
    let mut all = Vec::new();
    for (i, p) in s.pods.iter().enumerate() {
        let mut push = |kind: &str, minute: i64| {
            all.push((
                minute,
                event_line(i, p, kind, minute, false),
                event_line(i, p, kind, minute, true),
            ));
        };
        if !p.lone_stop {
            push("start", p.start);
        }
        if !p.running {
            push("stop", (p.start + p.minutes).min(1439));
        }
    }
    all.sort();
    all
}

/// dcgm-exporter text with timestamps for the scrapes in `[from, to)` minutes, of one node or
/// of all.
fn scrapes(s: &Scenario, from: i64, to: i64, family_grouped: bool, only: Option<usize>) -> String {
    let families = [
        "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_XID_ERRORS",
    ];
    let measures = 5;
    // The scrape at which the fallen GPU raises its XID.
    let falls = s.fallen.map(|(node, gpu, minute)| {
        (
            node,
            gpu,
            (minute + SCRAPE_MINUTES - 1) / SCRAPE_MINUTES * SCRAPE_MINUTES,
        )
    });
    let value = |family: usize, sm: f64| match family {
        0 => format!("{sm}"),
        // A stalled GPU reads 14 % utilisation while its SMs are 2 % active.
        1 if sm == 0.02 => "14".into(),
        1 => format!("{}", sm * 100.0),
        2 => "300".into(),
        // Framebuffer used and free (MiB of 81,559) follow the activity: cut apart from each
        // other by a file boundary or a family-grouped order, they still make one share.
        3 => format!("{}", 512.0 + (sm * 60_000.0).round()),
        _ => format!("{}", 81_559.0 - 512.0 - (sm * 60_000.0).round()),
    };
    // The first pod running on a GPU at a minute, as dcgm-exporter's pod mapping labels it.
    let pod_on = |node: usize, gpu: usize, minute: i64| {
        s.pods
            .iter()
            .enumerate()
            .find(|(_, p)| {
                p.node == node
                    && p.seen_on == Some(gpu)
                    && (p.lone_stop || p.start <= minute)
                    && (p.running || minute < (p.start + p.minutes).min(1439))
            })
            .map_or(String::new(), |(i, _)| {
                format!(r#",namespace="ml",pod="p{i}""#)
            })
    };
    let mut samples: Vec<(usize, i64, usize, usize, String)> = Vec::new();
    let first = from.div_euclid(SCRAPE_MINUTES) * SCRAPE_MINUTES;
    let mut minute = if first < from {
        first + SCRAPE_MINUTES
    } else {
        first
    };
    while minute < to {
        for (node, gpus) in s.activity.iter().enumerate() {
            if only.is_some_and(|only| only != node) {
                continue;
            }
            for (gpu, hours) in gpus.iter().enumerate() {
                let sm = hours[(minute / 60) as usize];
                let xid = match falls {
                    Some((n, g, at)) if (n, g) == (node, gpu) => {
                        if minute > at {
                            continue; // off the bus: no more readings
                        }
                        Some(if minute == at { "79" } else { "0" })
                    }
                    _ => None,
                };
                for family in 0..measures {
                    samples.push((family, minute, node, gpu, value(family, sm)));
                }
                if let Some(xid) = xid {
                    samples.push((measures, minute, node, gpu, xid.to_string()));
                }
            }
        }
        minute += SCRAPE_MINUTES;
    }
    if !family_grouped {
        samples.sort_by_key(|(family, minute, node, gpu, _)| (*minute, *node, *gpu, *family));
    }
    let mut text = String::new();
    for (family, minute, node, gpu, value) in samples {
        writeln!(
            text,
            r#"{}{{gpu="{gpu}",UUID="GPU-n{node}-{gpu}",Hostname="n{node}",modelName="NVIDIA H100 80GB HBM3"{}}} {value} {}"#,
            families[family],
            pod_on(node, gpu, minute),
            at(minute).timestamp_millis()
        )
        .unwrap();
    }
    text
}

fn bill(s: &Scenario, reserialized: bool) -> String {
    let header = "BillingAccountId,BillingAccountName,BillingCurrency,BillingPeriodStart,BillingPeriodEnd,ChargePeriodStart,ChargePeriodEnd,ChargeCategory,ChargeClass,ChargeDescription,BilledCost,EffectiveCost,ListCost,ContractedCost,PricingQuantity,PricingUnit,ProviderName,PublisherName,InvoiceIssuerName,ServiceCategory,ServiceName,ResourceId,Tags";
    let line = |description: &str, cents: u32, category: &str, resource: &str| {
        let cost = format!("{}.{:02}", cents / 100, cents % 100);
        let fields = [
            "acct",
            "Acct",
            "USD",
            "2026-11-01T00:00:00Z",
            "2026-12-01T00:00:00Z",
            "2026-11-02T00:00:00Z",
            "2026-11-03T00:00:00Z",
            "Usage",
            "",
            description,
            &cost,
            &cost,
            &cost,
            &cost,
            "24",
            "Hours",
            "AWS",
            "AWS",
            "AWS",
            category,
            "svc",
            resource,
            "",
        ];
        if reserialized {
            fields
                .iter()
                .map(|f| format!("\"{f}\""))
                .collect::<Vec<_>>()
                .join(",")
        } else {
            fields.join(",")
        }
    };
    let mut lines = vec![header.to_string()];
    for (node, cents) in s.node_cents.iter().enumerate() {
        lines.push(line(
            &format!("node n{node}"),
            *cents,
            "Compute",
            &format!("arn:aws:ec2:us-east-1:1:instance/i-n{node}"),
        ));
    }
    lines.push(line("transfer", s.network_cents, "Networking", ""));
    let newline = if reserialized { "\r\n" } else { "\n" };
    lines.join(newline) + newline
}

/// The files of one delivery, in the order they arrive.
pub(crate) fn files(s: &Scenario, d: &Delivery) -> Vec<File> {
    let events = events(s);
    let mut cuts: Vec<usize> = d
        .event_cuts
        .iter()
        .map(|f| (f * events.len() as f64) as usize)
        .collect();
    cuts.extend([0, events.len()]);
    cuts.sort_unstable();
    cuts.dedup();
    let mut out = Vec::new();
    let mut again = Vec::new();
    for (i, w) in cuts.windows(2).enumerate() {
        let chunk = &events[w[0]..w[1]];
        let render = |reserialized: bool| -> Vec<u8> {
            chunk
                .iter()
                .map(|(_, line, other)| if reserialized { other } else { line })
                .fold(String::new(), |text, line| text + line + "\n")
                .into_bytes()
        };
        out.push(File {
            source: Source::Events,
            name: format!("events-{i}.jsonl"),
            bytes: render(false),
        });
        again.push(File {
            source: Source::Events,
            name: format!("events-{i}-again.jsonl"),
            bytes: render(true),
        });
    }
    let mut minutes: Vec<i64> = d.scrape_cuts.iter().map(|f| (f * 1440.0) as i64).collect();
    minutes.extend([0, 1440]);
    minutes.sort_unstable();
    minutes.dedup();
    for (i, w) in minutes.windows(2).enumerate() {
        let family = d.family_grouped[i % d.family_grouped.len()];
        let parts: Vec<(String, Option<usize>)> = if d.by_node[i % d.by_node.len()] {
            (0..s.activity.len())
                .map(|node| (format!("scrape-{i}-n{node}"), Some(node)))
                .collect()
        } else {
            vec![(format!("scrape-{i}"), None)]
        };
        for (name, only) in parts {
            let text = scrapes(s, w[0], w[1], family, only);
            if text.is_empty() {
                continue;
            }
            out.push(File {
                source: Source::Dcgm,
                name: format!("{name}.prom"),
                bytes: text.into_bytes(),
            });
            again.push(File {
                source: Source::Dcgm,
                name: format!("{name}-again.prom"),
                bytes: scrapes(s, w[0], w[1], !family, only).into_bytes(),
            });
        }
    }
    out.push(File {
        source: Source::Focus,
        name: "bill.csv".into(),
        bytes: bill(s, false).into_bytes(),
    });
    let landed_once = out.len();
    for &i in &d.again {
        out.push(out[i % landed_once].clone());
    }
    for &i in &d.again_reserialized {
        if let Some(file) = again.get(i % again.len().max(1)) {
            out.push(file.clone());
        }
    }
    match d.bill_twice {
        1 => out.push(out[landed_once - 1].clone()),
        2 => out.push(File {
            source: Source::Focus,
            name: "bill-restated.csv".into(),
            bytes: bill(s, true).into_bytes(),
        }),
        _ => {}
    }
    // A shuffle driven by the drawn numbers.
    for (i, pick) in d.order.iter().enumerate().take(out.len()) {
        let j = i + pick % (out.len() - i);
        out.swap(i, j);
    }
    out
}

pub(crate) async fn lake_with_nodes(dir: &std::path::Path) -> Lake {
    let lake = Lake::open(&LakeConfig {
        data: dir.display().to_string(),
        catalog: None,
    })
    .await
    .unwrap();
    for node in 0..2 {
        let spec = serde_json::json!({
            "cluster": "demo", "node": format!("n{node}"), "resource_id": format!("i-n{node}"),
            "gpu_count": 2, "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_cost_share": 0.9,
        });
        lake.catalog()
            .put_object("node", &format!("n{node}"), &spec)
            .await
            .unwrap();
    }
    lake
}

pub(crate) async fn land(lake: &Lake, file: &File) {
    let mut context = ParseContext::new(file.name.clone(), at(0));
    context.cluster = Some("demo".into());
    let report = ingest(
        lake,
        Input::Bytes {
            origin: file.name.clone(),
            bytes: file.bytes.clone().into(),
        },
        IngestOptions::new(file.source, context),
    )
    .await
    .unwrap_or_else(|e| panic!("{}: {e}", file.name));
    assert!(
        report.rejections.is_empty(),
        "{}: {:?}",
        file.name,
        report.rejections
    );
    assert!(!matches!(report.outcome, Outcome::Landed { .. }) || report.records_read > 0);
}

async fn build(lake: &Lake) {
    let declared = declared(lake.catalog()).await.unwrap();
    build_ledger(lake, &declared, [day()]).await.unwrap();
}

/// The ledger's tables, every row, in a total order.
pub(crate) async fn ledger_tables(lake: &Lake) -> String {
    let ctx = new_session(lake).unwrap();
    let mut text = String::new();
    for table in ["gpu_hours", "allocations", "cost_entries"] {
        let columns = ctx.table(table).await.unwrap().schema().fields().len();
        let order: Vec<String> = (1..=columns).map(|i| i.to_string()).collect();
        let batches = ctx
            .sql(&format!(
                "SELECT * FROM {table} ORDER BY {}",
                order.join(", ")
            ))
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        writeln!(
            text,
            "{table}\n{}",
            pretty_format_batches(&batches).unwrap()
        )
        .unwrap();
    }
    text
}

async fn case(s: Scenario, d: Delivery) -> Result<(), TestCaseError> {
    let reference_dir = tempfile::tempdir().unwrap();
    let reference = lake_with_nodes(reference_dir.path()).await;
    let once = files(
        &s,
        &Delivery {
            // One file per source: the file boundaries differ from the case's too.
            event_cuts: vec![],
            scrape_cuts: vec![],
            by_node: vec![false],
            again: vec![],
            again_reserialized: vec![],
            bill_twice: 0,
            order: vec![0; 16],
            ..d.clone()
        },
    );
    for file in &once {
        land(&reference, file).await;
    }
    build(&reference).await;
    let expected = ledger_tables(&reference).await;
    // The framebuffer reaches the ledger (else its column would agree by being NULL throughout).
    let with_memory = new_session(&reference)
        .unwrap()
        .sql("SELECT count(memory_used_share) FROM gpu_hours")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let with_memory = arrow::array::AsArray::as_primitive::<arrow::datatypes::Int64Type>(
        with_memory[0].column(0),
    )
    .value(0);
    prop_assert!(with_memory > 0, "{expected}");

    let dir = tempfile::tempdir().unwrap();
    let lake = lake_with_nodes(dir.path()).await;
    for file in files(&s, &d) {
        land(&lake, &file).await;
        build(&lake).await;
    }
    let got = ledger_tables(&lake).await;
    prop_assert_eq!(&got, &expected);
    let declared = declared(lake.catalog()).await.unwrap();
    let balance = balance(&lake, &declared, day_span(day())).await.unwrap();
    prop_assert!(balance.balances(), "{balance:?}");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(8),
        max_shrink_iters: 32,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_ledger_is_the_same_whatever_order_and_repetition(s in scenario(), d in delivery()) {
        tokio::runtime::Runtime::new().unwrap().block_on(case(s, d))?;
    }
}
