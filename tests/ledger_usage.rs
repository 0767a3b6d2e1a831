//! Usage as dcgm-exporter reports it, end to end through `gpuledger ingest` and `ledger build`
//! (issue 14 §0, §2, §7): MIG instances measured apart, one measure per reading whatever the
//! order of the exposition, and XID faults.

use std::fmt::Write as _;

use crate::golden::{build_days, run_ok};
use crate::support::{Ledger, ledgers, protobuf};

/// Declares a one-GPU H100 node priced by the rate card at `price` per GPU-hour.
fn declare_node(ledger: &Ledger, node: &str, price: &str) {
    let objects = ledger.dir.path().join(format!("{node}.yaml"));
    std::fs::write(
        &objects,
        format!(
            "kind: node\nspec: {{cluster: demo, node: {node}, gpu_count: 1, gpu_model: NVIDIA H100 80GB HBM3}}\n\
             ---\nkind: rate_card\nspec: {{gpu_model: NVIDIA H100 80GB HBM3, capacity_type: on_demand, price_per_gpu_hour: {price}}}\n"
        ),
    )
    .unwrap();
    run_ok(ledger, &["apply", objects.to_str().unwrap()]);
}

fn ingest_text(ledger: &Ledger, source: &str, name: &str, text: &str) {
    let path = ledger.dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    run_ok(
        ledger,
        &[
            "ingest",
            source,
            path.to_str().unwrap(),
            "--cluster",
            "demo",
        ],
    );
}

/// A number of a JSON result, written as a number or (a decimal) as a string.
fn num(value: &serde_json::Value) -> f64 {
    value
        .as_f64()
        .or_else(|| value.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or_else(|| panic!("not a number: {value}"))
}

/// `bucket → amount` of the journal, for the buckets `where` keeps.
fn buckets(ledger: &Ledger, filter: &str) -> Vec<(String, f64)> {
    ledger
        .sql(&format!(
            "SELECT bucket, round(sum(amount), 6) AS amount FROM cost_entries
             WHERE {filter} GROUP BY bucket ORDER BY bucket"
        ))
        .iter()
        .map(|r| (r["bucket"].as_str().unwrap().to_string(), num(&r["amount"])))
        .collect()
}

fn build(ledger: &Ledger) {
    build_days(ledger, "2026-11-02", "2026-11-02");
}

/// 2026-11-02T00:00:00Z in milliseconds, plus `seconds`.
fn ms(seconds: i64) -> i64 {
    (1_793_577_600 + seconds) * 1000
}

/// An H100 cut into seven 1g.10gb instances, one pod of team vision on each from 01:00 to 02:00.
/// dcgm-exporter labels each instance's series with its pod; p0 and p1 are busy (SM 0.8), the five
/// others are zombies (0.0). Each pod holds 1/7 of the GPU for an hour: 3600 / 7 = 514.29 s.
/// At 7.00 per GPU-hour that is 1.00 per pod: vision's direct cost is 2.00 and its allocated
/// idle 5.00. Measured by the GPU's average (1.6 / 7 = 0.229) every pod was busy: 7.00 direct.
#[test]
fn mig_instances_are_measured_apart() {
    for ledger in ledgers() {
        declare_node(&ledger, "h1", "7.00");
        let mut events = String::new();
        for pod in 0..7 {
            for (ts, kind) in [("01:00:00", "start"), ("02:00:00", "stop")] {
                writeln!(
                    events,
                    r#"{{"ts":"2026-11-02T{ts}Z","event":"{kind}","cluster":"demo","node":"h1","namespace":"ml","workload":"w{pod}","pod":"p{pod}","gpus":1,"gpu_indices":[0],"mig_profile":"1g.10gb","labels":{{"team":"vision"}}}}"#
                )
                .unwrap();
            }
        }
        ingest_text(&ledger, "events", "mig-events.jsonl", &events);
        // Family-grouped: every SM line of every scrape, then every power line.
        let mut text = String::new();
        for family in ["DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_POWER_USAGE"] {
            for t in (3600..7200).step_by(30) {
                for pod in 0..7 {
                    let value = match (family, pod) {
                        ("DCGM_FI_DEV_POWER_USAGE", _) => "200",
                        (_, 0 | 1) => "0.8",
                        _ => "0",
                    };
                    writeln!(
                        text,
                        r#"{family}{{gpu="0",UUID="GPU-h1-0",GPU_I_ID="{pod}",GPU_I_PROFILE="1g.10gb",Hostname="h1",namespace="ml",pod="p{pod}"}} {value} {}"#,
                        ms(t)
                    )
                    .unwrap();
                }
            }
        }
        ingest_text(&ledger, "dcgm", "mig.prom", &text);
        build(&ledger);
        let rows = ledger.sql(
            "SELECT workload, round(busy_seconds, 2) AS busy, round(allocated_idle_seconds, 2) AS idle,
                    round(sm_active, 3) AS sm
             FROM gpu_hours WHERE team = 'vision' ORDER BY workload",
        );
        let got: Vec<(String, f64, f64, f64)> = rows
            .iter()
            .map(|r| {
                (
                    r["workload"].as_str().unwrap().to_string(),
                    r["busy"].as_f64().unwrap(),
                    r["idle"].as_f64().unwrap(),
                    r["sm"].as_f64().unwrap(),
                )
            })
            .collect();
        let expected: Vec<(String, f64, f64, f64)> = (0..7)
            .map(|pod| {
                let (busy, idle, sm) = if pod < 2 {
                    (514.29, 0.0, 0.8)
                } else {
                    (0.0, 514.29, 0.0)
                };
                (format!("w{pod}"), busy, idle, sm)
            })
            .collect();
        assert_eq!(got, expected, "[{}]", ledger.backend);
        let money = buckets(&ledger, "team = 'vision'");
        assert_eq!(
            money,
            [
                ("allocated_idle".to_string(), 5.0),
                ("direct".to_string(), 2.0)
            ],
            "[{}]",
            ledger.backend
        );
    }
}

/// An idle GPU seen every minute from 00:00 to 06:00 reports XID 79 (fallen off the bus) from
/// 02:00 until its reset at 03:00, then 0 again. Hour 02 is `fault` (3600 s, 2.00 at 2.00 per
/// GPU-hour); the other five hours are `unexplained` (10.00). The readings come
/// scrape-grouped in one file, family-grouped in another and as remote-write: the same ledger.
#[test]
fn an_xid_79_is_fault_time() {
    for shape in [
        Shape::ScrapeGrouped,
        Shape::FamilyGrouped,
        Shape::RemoteWrite,
    ] {
        for ledger in ledgers() {
            declare_node(&ledger, "h2", "2.00");
            let mut samples: Vec<(usize, &str, i64, f64)> = Vec::new();
            for t in (0..6 * 3600).step_by(60) {
                let xid = if (2 * 3600..3 * 3600).contains(&t) {
                    79.0
                } else {
                    0.0
                };
                for (family, name, value) in [
                    (0, "DCGM_FI_DEV_XID_ERRORS", xid),
                    (1, "DCGM_FI_PROF_SM_ACTIVE", 0.0),
                    (2, "DCGM_FI_DEV_POWER_USAGE", 60.0),
                ] {
                    samples.push((family, name, t, value));
                }
            }
            land(&ledger, shape, samples);
            build(&ledger);
            let hours = ledger.sql(
                "SELECT extract(hour FROM hour) AS h, sum(fault_seconds) AS fault,
                        sum(unexplained_seconds) AS unexplained
                 FROM gpu_hours GROUP BY 1 ORDER BY 1",
            );
            let hours: Vec<(i64, f64, f64)> = hours
                .iter()
                .map(|r| {
                    (
                        r["h"].as_f64().unwrap() as i64,
                        r["fault"].as_f64().unwrap(),
                        r["unexplained"].as_f64().unwrap(),
                    )
                })
                .collect();
            let expected: Vec<(i64, f64, f64)> = (0..6)
                .map(|h| {
                    if h == 2 {
                        (h, 3600.0, 0.0)
                    } else {
                        (h, 0.0, 3600.0)
                    }
                })
                .collect();
            assert_eq!(hours, expected, "[{}] {shape:?}", ledger.backend);
            let buckets = buckets(&ledger, "true");
            assert_eq!(
                buckets,
                [
                    ("fault".to_string(), 2.0),
                    ("unexplained".to_string(), 10.0)
                ],
                "[{}] {shape:?}",
                ledger.backend
            );
        }
    }
}

/// The same readings, scrape-grouped, family-grouped and as remote-write, land the same
/// `gpu_samples` rows cell for cell: one row per (GPU, time) with every family's value, never
/// one row per family. 3 families every 60 s for an hour: 60 rows of 3 values each.
#[test]
fn every_shape_of_the_same_samples_lands_identical_rows() {
    let mut landed = Vec::new();
    for shape in [
        Shape::ScrapeGrouped,
        Shape::FamilyGrouped,
        Shape::RemoteWrite,
    ] {
        let ledger = ledgers().swap_remove(0);
        let mut samples: Vec<(usize, &str, i64, f64)> = Vec::new();
        for t in (0..3600).step_by(60) {
            samples.push((0, "DCGM_FI_DEV_XID_ERRORS", t, 0.0));
            samples.push((1, "DCGM_FI_PROF_SM_ACTIVE", t, t as f64 / 3600.0));
            samples.push((2, "DCGM_FI_DEV_POWER_USAGE", t, 60.0 + t as f64 / 60.0));
        }
        land(&ledger, shape, samples);
        let rows = ledger.sql("SELECT * FROM gpu_samples ORDER BY cluster, node, gpu_uuid, ts");
        assert_eq!(rows.len(), 60, "{shape:?}");
        assert_eq!(rows[30]["sm_active"], 0.5, "{shape:?}: {}", rows[30]);
        assert_eq!(rows[30]["power_w"], 90.0, "{shape:?}: {}", rows[30]);
        assert_eq!(rows[30]["xid_last"], 0.0, "{shape:?}: {}", rows[30]);
        landed.push((shape, rows));
    }
    for (shape, rows) in &landed[1..] {
        assert_eq!(rows, &landed[0].1, "{shape:?} against {:?}", landed[0].0);
    }
}

/// How the same readings reach the lake.
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// Exposition text, each scrape's families together (dcgm-exporter's own order).
    ScrapeGrouped,
    /// Exposition text, each family's samples together across scrapes.
    FamilyGrouped,
    /// Prometheus remote-write to `serve`: one series at a time, all its samples.
    RemoteWrite,
}

/// Lands `(family, metric, seconds after midnight, value)` readings of GPU 0 of node h2.
fn land(ledger: &Ledger, shape: Shape, mut samples: Vec<(usize, &str, i64, f64)>) {
    const LABELS: [(&str, &str); 3] = [("gpu", "0"), ("UUID", "GPU-h2-0"), ("Hostname", "h2")];
    if !matches!(shape, Shape::ScrapeGrouped) {
        samples.sort_by_key(|(family, _, t, _)| (*family, *t));
    }
    if let Shape::RemoteWrite = shape {
        let mut request = Vec::new();
        for family in samples.chunk_by(|a, b| a.0 == b.0) {
            let mut labels = vec![("__name__", family[0].1)];
            labels.extend(LABELS);
            let points: Vec<(f64, i64)> = family.iter().map(|s| (s.3, ms(s.2))).collect();
            protobuf::bytes(&mut request, 1, &protobuf::time_series(&labels, &points));
        }
        let collector = ledger.token("ingest", None);
        ledger.serve(&[]).remote_write(&collector, "demo", &request);
        return;
    }
    let text: String = samples
        .iter()
        .map(|(_, name, t, value)| {
            let labels: Vec<String> = LABELS.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
            format!("{name}{{{}}} {value} {}\n", labels.join(","), ms(*t))
        })
        .collect();
    ingest_text(ledger, "dcgm", "xid.prom", &text);
}
