//! `gpuledger ledger build` and `ledger check` on the worked example: late data, restated bills.

use std::fmt::Write as _;

use gpuledger_lake::catalog::LedgerDay;
use gpuledger_lake::tables::Table;
use gpuledger_lake::{Lake, LakeConfig};

use crate::golden::{build_days, load_worked_example, run_ok};
use crate::support::{Ledger, commit_without_columns, describe, ledgers};

fn direct_and_idle(ledger: &crate::support::Ledger, team: &str) -> (f64, f64) {
    let rows = ledger.sql(&format!(
        "SELECT round(sum(CASE WHEN bucket = 'direct' THEN amount END), 6) AS direct,
                round(sum(CASE WHEN bucket = 'allocated_idle' THEN amount ELSE 0 END), 6) AS idle
         FROM cost_entries WHERE team = '{team}'"
    ));
    (
        rows[0]["direct"].as_f64().unwrap(),
        rows[0]["idle"].as_f64().unwrap(),
    )
}

#[test]
fn check_prints_both_sides_and_late_telemetry_recomputes_two_hours() {
    for ledger in ledgers() {
        load_worked_example(&ledger);
        let out = ledger.run(&[
            "ledger",
            "check",
            "--from",
            "2026-11-02",
            "--to",
            "2026-11-02",
        ]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        let line = |label: &str| {
            text.lines()
                .find(|l| l.trim_start().starts_with(label))
                .map(|l| l.split_whitespace().last().unwrap().to_string())
        };
        assert_eq!(line("billed").as_deref(), Some("111.000000"), "{text}");
        assert_eq!(line("expected").as_deref(), Some("118.200000"), "{text}");
        assert_eq!(line("accounted").as_deref(), Some("118.200000"), "{text}");
        assert_eq!(line("difference").as_deref(), Some("0.000000"), "{text}");
        assert!(text.contains("balanced (within 1e-6 relative)"), "{text}");

        // Nothing new: nothing to do.
        let out = ledger.run(&[
            "ledger",
            "build",
            "--from",
            "2026-11-02",
            "--to",
            "2026-11-02",
        ]);
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("ledger is up to date"),
            "{}",
            describe(&out)
        );

        // Late telemetry: nlp's GPU (n1 GPU 1) was idle 08:00–09:00. The last sample (08:59:30)
        // stands for two minutes, so hours 08 and 09 of n1 are recomputed, and only those: n0's
        // GPU-hours are kept as built.
        land_nlp_idle_from_eight_to_nine(&ledger);
        let built = build_days(&ledger, "2026-11-02", "2026-11-02");
        assert!(
            built.contains("2026-11-02: 2 hours of 1 node recomputed")
                && built.contains("accounted 118.20 (balanced)"),
            "{built}"
        );
        // 1 h + 90 s of nlp's 1.60/h move from direct to allocated idle: 19.20 − 1.64 and 1.64.
        assert_eq!(direct_and_idle(&ledger, "nlp"), (17.56, 1.64));
    }
}

/// Late telemetry: nlp's GPU (n1 GPU 1) idle 08:00–09:00 of the worked example's day.
fn land_nlp_idle_from_eight_to_nine(ledger: &crate::support::Ledger) {
    let times = (8 * 3600..9 * 3600)
        .step_by(30)
        .map(|t| 1_793_577_600_000i64 + t * 1000);
    land_sm_readings(ledger, "demo", (1, "GPU-n1-1"), 0.0, times);
}

/// Lands SM activity `sm` of GPU `(index, UUID)` of node `n1` in `cluster`, a reading at each
/// time (in milliseconds).
fn land_sm_readings(
    ledger: &crate::support::Ledger,
    cluster: &str,
    (gpu, uuid): (u32, &str),
    sm: f64,
    times_ms: impl IntoIterator<Item = i64>,
) {
    let mut text = String::new();
    for ms in times_ms {
        writeln!(
            text,
            "DCGM_FI_PROF_SM_ACTIVE{{gpu=\"{gpu}\",UUID=\"{uuid}\",Hostname=\"n1\"}} {sm} {ms}"
        )
        .unwrap();
    }
    land_dcgm_text(ledger, cluster, &text);
}

/// Lands dcgm-exporter text for `cluster` through `gpuledger ingest dcgm`.
fn land_dcgm_text(ledger: &crate::support::Ledger, cluster: &str, text: &str) {
    let path = ledger.dir.path().join("readings.prom");
    std::fs::write(&path, text).unwrap();
    ledger.ingest_ok("dcgm", &path, &["--cluster", cluster]);
}

#[test]
fn late_telemetry_compacted_and_vacuumed_before_the_build_is_still_built() {
    for ledger in ledgers() {
        load_worked_example(&ledger);
        land_nlp_idle_from_eight_to_nine(&ledger);
        // The late file is merged into the day's before any build sees it, and deleted: what it
        // held (which nodes, whether XID readings) can no longer be read, so every node is
        // rebuilt from its first hour, 08, to the day's end: 16 hours (the merged file moves no
        // row, so it dirties nothing).
        let compacted = run_ok(&ledger, &["compact", "--retain-superseded", "0s"]);
        assert!(
            compacted.contains("compacted 2 files into 1"),
            "{compacted}"
        );
        let built = build_days(&ledger, "2026-11-02", "2026-11-02");
        assert!(
            built.contains("2026-11-02: 16 hours recomputed,")
                && built.contains("accounted 118.20 (balanced)"),
            "{built}"
        );
        assert_eq!(direct_and_idle(&ledger, "nlp"), (17.56, 1.64));
    }
}

#[test]
fn a_restated_bill_rebalances_the_ledger() {
    for ledger in ledgers() {
        load_worked_example(&ledger);
        // The provider restates November: n1 now costs 120.00 for the day instead of 96.00.
        let original = std::fs::read_to_string(crate::golden::example("billing.csv")).unwrap();
        let restated = ledger.dir.path().join("restated.csv");
        std::fs::write(
            &restated,
            original.replace(",96.00,96.00,", ",120.00,120.00,"),
        )
        .unwrap();
        let out = ledger.ingest_ok("focus", &restated, &[]);
        assert!(out.contains("3 rows of an earlier delivery"), "{out}");
        let out = ledger.run(&[
            "ledger",
            "build",
            "--from",
            "2026-11-02",
            "--to",
            "2026-11-02",
        ]);
        // 120 + 9 + 6 = 135.00 billed; + 4.80 manual + 2.40 rate card = 142.20, all accounted.
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(
                "billed 135.00 + manual 4.80 + rate card 2.40 = accounted 142.20 (balanced)"
            ),
            "{}",
            describe(&out)
        );
        // n1's GPU price is now 120 × 0.8 / 2 / 24 = 2.00: vision's 4 busy hours cost 8.00.
        assert_eq!(direct_and_idle(&ledger, "vision"), (8.0, 4.0));
        let out = ledger.run(&[
            "ledger",
            "check",
            "--from",
            "2026-11-02",
            "--to",
            "2026-11-02",
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    }
}

#[test]
fn check_prices_unbilled_nodes_from_the_rate_card_not_from_the_journal() {
    for ledger in ledgers() {
        load_worked_example(&ledger);
        let check = || {
            ledger.run(&[
                "ledger",
                "check",
                "--from",
                "2026-11-02",
                "--to",
                "2026-11-02",
            ])
        };
        let figure = |text: &str, label: &str| {
            text.lines()
                .find(|l| l.trim_start().starts_with(label))
                .map(|l| l.split_whitespace().last().unwrap().to_string())
        };
        // The L4 rate goes from 1.20 to 1.50 and the ledger is not rebuilt. n2 (no billing line)
        // has 2 GPU-hours (00–01 allocated, 01–02 unexplained), so the rate card now says
        // 2 × 1.50 = 3.00 while the journal still holds 2 × 1.20 = 2.40: expected
        // 111.00 + 4.80 + 3.00 = 118.80 against 118.20 accounted.
        let rate = ledger.dir.path().join("rate.yaml");
        std::fs::write(
            &rate,
            "kind: rate_card\nspec: {gpu_model: NVIDIA L4, capacity_type: on_demand, price_per_gpu_hour: 1.50}\n",
        )
        .unwrap();
        crate::golden::run_ok(&ledger, &["apply", rate.to_str().unwrap()]);
        let out = check();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        assert_eq!(
            figure(&text, "rate card").as_deref(),
            Some("3.000000"),
            "{text}"
        );
        assert_eq!(
            figure(&text, "expected").as_deref(),
            Some("118.800000"),
            "{text}"
        );
        assert_eq!(
            figure(&text, "accounted").as_deref(),
            Some("118.200000"),
            "{text}"
        );
        assert_eq!(
            figure(&text, "difference").as_deref(),
            Some("-0.600000"),
            "{text}"
        );
        assert!(text.contains("DOES NOT BALANCE"), "{text}");

        // Rebuilt, the journal holds n2 at 1.50: 118.80 on both sides.
        crate::golden::run_ok(
            &ledger,
            &[
                "ledger",
                "build",
                "--from",
                "2026-11-02",
                "--to",
                "2026-11-02",
            ],
        );
        let out = check();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        assert_eq!(
            figure(&text, "accounted").as_deref(),
            Some("118.800000"),
            "{text}"
        );
        assert_eq!(
            figure(&text, "difference").as_deref(),
            Some("0.000000"),
            "{text}"
        );
    }
}

/// Gateway requests that land after a day was built re-split its `usage` pools: they make
/// their hours dirty like any input. The worked example's 15 requests are all nlp's, so a
/// network rule by requests gives nlp all 9.00; 5 late vision requests make it 15 : 5 of 20 →
/// nlp 6.75, vision 2.25.
#[test]
fn late_gateway_requests_resplit_usage_pools() {
    for ledger in ledgers() {
        load_worked_example(&ledger);
        let rule = ledger.dir.path().join("rule.yaml");
        std::fs::write(
            &rule,
            "kind: shared_cost_rule\nspec: {name: network-by-requests, priority: 5, matches: {service_category: Networking}, strategy: usage, basis: {usage: requests}}\n",
        )
        .unwrap();
        let build = [
            "ledger",
            "build",
            "--from",
            "2026-11-02",
            "--to",
            "2026-11-02",
        ];
        crate::golden::run_ok(&ledger, &["apply", rule.to_str().unwrap()]);
        crate::golden::run_ok(&ledger, &build);
        let network = |ledger: &crate::support::Ledger| {
            ledger.sql(
                "SELECT team, round(cast(sum(amount) as double), 6) AS amount FROM cost_entries
                 WHERE rule = 'network-by-requests' GROUP BY team ORDER BY team",
            )
        };
        assert_eq!(
            network(&ledger),
            [serde_json::json!({"team": "nlp", "amount": 9.0})],
            "[{}]",
            ledger.backend
        );
        let late = ledger.dir.path().join("late-tokens.jsonl");
        let mut lines = String::new();
        for i in 1..=5 {
            writeln!(
                lines,
                "{{\"ts\": \"2026-11-02T0{i}:30:00Z\", \"request_id\": \"v{i}\", \"team\": \"vision\", \"namespace\": \"vision\", \"workload\": \"caption\", \"model\": \"llava\", \"priority\": \"batch\", \"input_tokens\": 10, \"output_tokens\": 10, \"status\": \"success\"}}"
            )
            .unwrap();
        }
        std::fs::write(&late, lines).unwrap();
        crate::golden::run_ok(&ledger, &["ingest", "tokens", late.to_str().unwrap()]);
        let rebuilt = crate::golden::run_ok(&ledger, &build);
        assert!(rebuilt.contains("(balanced)"), "{rebuilt}");
        assert_eq!(
            network(&ledger),
            [
                serde_json::json!({"team": "nlp", "amount": 6.75}),
                serde_json::json!({"team": "vision", "amount": 2.25}),
            ],
            "[{}] {rebuilt}",
            ledger.backend
        );
    }
}

#[test]
fn a_day_that_fails_to_build_leaves_the_days_before_it_built() {
    // A day is computed while the day before is written: a failure of the later day must not
    // take the earlier one's write with it.
    let ledger = ledgers().remove(0);
    // 2026-11-02T10:00:00Z and 2026-11-03T10:00:00Z: one file per day.
    let day_apart = [1_793_613_600_000, 1_793_700_000_000];
    land_sm_readings(&ledger, "c", (0, "GPU-a"), 0.5, day_apart);
    // The second day's telemetry file is damaged on disk after it landed.
    let second = ledger.data_dir().join("tables/gpu_samples/date=2026-11-03");
    let damaged: Vec<_> = std::fs::read_dir(&second)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(damaged.len(), 1, "{damaged:?}");
    std::fs::write(&damaged[0], b"not a parquet file").unwrap();

    let build = "ledger build --from 2026-11-02 --to 2026-11-03";
    let out = ledger.run(&build.split(' ').collect::<Vec<_>>());
    assert!(!out.status.success(), "{}", describe(&out));
    let file = damaged[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&file),
        "the error names the file: {}",
        describe(&out)
    );
    // The first day was written and recorded: its GPU-hour (10:00: seen, so the whole hour
    // counts, and no one's) is there, and it is not built again.
    assert_eq!(
        ledger.sql("SELECT CAST(hour AS VARCHAR) AS hour, unexplained_seconds FROM gpu_hours"),
        vec![serde_json::json!({"hour": "2026-11-02T10:00:00Z", "unexplained_seconds": 3600.0})]
    );
    let again = build_days(&ledger, "2026-11-02", "2026-11-02");
    assert_eq!(
        again.trim(),
        "ledger is up to date for 2026-11-02 … 2026-11-02",
        "{again}"
    );
}

/// `ledger build` with no range builds the days with rows: telemetry on two days half a year
/// apart, events on a third, and a two-day charge (2026-11-04 00:00 → 2026-11-06 00:00) — five
/// days, not the 212 between the first and the last. Built again with nothing new, it builds
/// nothing.
#[test]
fn a_build_without_a_range_builds_the_days_with_rows_and_then_nothing() {
    let ledger = ledgers().remove(0);
    let dir = tempfile::tempdir().unwrap();
    // 2026-11-02T10:00:00Z and 2027-06-01T10:00:00Z.
    let months_apart = [1_793_613_600_000, 1_811_844_000_000];
    land_sm_readings(&ledger, "c", (0, "GPU-a"), 0.5, months_apart);
    let events = dir.path().join("events.jsonl");
    std::fs::write(
        &events,
        "{\"ts\":\"2026-11-03T01:00:00Z\",\"event\":\"start\",\"cluster\":\"c\",\"node\":\"n1\",\"namespace\":\"ml\",\
         \"workload\":\"w\",\"pod\":\"w-0\",\"gpus\":1,\"gpu_indices\":[0]}\n",
    )
    .unwrap();
    ledger.ingest_ok("events", &events, &["--tz", "UTC"]);
    let bill = dir.path().join("bill.csv");
    std::fs::write(
        &bill,
        "BillingAccountId,BillingCurrency,BillingPeriodStart,BillingPeriodEnd,ChargePeriodStart,ChargePeriodEnd,\
         ChargeCategory,BilledCost,EffectiveCost,ServiceCategory,ResourceId\n\
         a,USD,2026-11-01T00:00:00Z,2026-12-01T00:00:00Z,2026-11-04T00:00:00Z,2026-11-06T00:00:00Z,Usage,4.00,4.00,Storage,bucket\n",
    )
    .unwrap();
    ledger.ingest_ok("focus", &bill, &[]);

    let out = ledger.run(&["ledger", "build"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let built: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| Some(line.split_once(": ")?.0.to_string()))
        .collect();
    assert_eq!(
        built,
        [
            "2026-11-02",
            "2026-11-03",
            "2026-11-04",
            "2026-11-05",
            "2027-06-01"
        ],
        "{}",
        describe(&out)
    );
    let again = ledger.run(&["ledger", "build"]);
    assert_eq!(
        String::from_utf8_lossy(&again.stdout).trim(),
        "ledger is up to date for 2026-11-02 … 2027-06-01",
        "{}",
        describe(&again)
    );
}

/// n1 GPU 0 of cluster `c` reads every 30 s through 10:00–11:00 of 2026-11-02: 30,000 of
/// 80,000 MiB of framebuffer used at 250 W for the first half hour, 50,000 at 350 W for the
/// second. Built, the hour is seen, so it counts whole (no one's): memory (0.375 + 0.625) / 2 =
/// 0.5 of the framebuffer, power (250 + 350) / 2 = 300 W, 300 Wh.
pub(crate) fn land_framebuffer_and_power_readings(ledger: &crate::support::Ledger) {
    let hour_ms = 1_793_613_600_000i64;
    let mut text = String::new();
    for ms in (0..3_600_000).step_by(30_000).map(|t| hour_ms + t) {
        let (used, power) = if ms < hour_ms + 1_800_000 {
            (30_000, 250)
        } else {
            (50_000, 350)
        };
        let labels = "gpu=\"0\",UUID=\"GPU-a\",Hostname=\"n1\"";
        writeln!(
            text,
            "DCGM_FI_PROF_SM_ACTIVE{{{labels}}} 0.5 {ms}\n\
             DCGM_FI_DEV_FB_USED{{{labels}}} {used} {ms}\n\
             DCGM_FI_DEV_FB_FREE{{{labels}}} {} {ms}\n\
             DCGM_FI_DEV_POWER_USAGE{{{labels}}} {power} {ms}",
            80_000 - used
        )
        .unwrap();
    }
    land_dcgm_text(ledger, "c", &text);
}

/// Restates 2026-11-02's `gpu_hours` with a file of the rows as they are, written without
/// `memory_used_share` and `power_w`, as a release before them wrote it.
async fn restate_gpu_hours_without_the_framebuffer_and_power(ledger: &Ledger, lake: &Lake) {
    let ctx = gpuledger_query::new_session(lake).unwrap();
    let batches = ctx
        .sql("SELECT * FROM gpu_hours")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let rows = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
    commit_without_columns(
        lake,
        &ledger.data_dir(),
        Table::GpuHours,
        &rows,
        &["memory_used_share", "power_w"],
        "ledger",
    )
    .await;
}

#[test]
fn a_day_built_in_an_older_format_is_built_again_whole() {
    let ledger = ledgers().remove(0);
    land_framebuffer_and_power_readings(&ledger);
    let built = build_days(&ledger, "2026-11-02", "2026-11-02");
    assert!(built.contains("2026-11-02: 24 hours recomputed"), "{built}");
    // As the helper works them out; the last reading's two minutes end past the hour, where
    // the GPU is not seen.
    let hour = "SELECT CAST(hour AS VARCHAR) AS hour, memory_used_share, power_w,
                       round(energy_wh, 6) AS energy_wh
                FROM gpu_hours";
    let expected = vec![serde_json::json!({"hour": "2026-11-02T10:00:00Z",
        "memory_used_share": 0.5, "power_w": 300.0, "energy_wh": 300.0})];
    assert_eq!(ledger.sql(hour), expected);

    // The day as a release before these columns recorded it (format 1, as the migration leaves
    // every day built before it): the next build builds it again whole, then finds it current.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let lake = runtime
        .block_on(Lake::open(&LakeConfig {
            data: ledger.data_dir().display().to_string(),
            catalog: Some(ledger.catalog.clone()),
        }))
        .unwrap();
    let day = |lake: &Lake| {
        runtime
            .block_on(lake.catalog().ledger_days())
            .unwrap()
            .remove("2026-11-02")
            .unwrap()
    };
    let current = day(&lake);
    assert_eq!(current.format, gpuledger_build::LEDGER_FORMAT);
    let older = LedgerDay {
        format: 1,
        ..current.clone()
    };
    runtime
        .block_on(lake.catalog().record_ledger_day("2026-11-02", &older))
        .unwrap();
    runtime.block_on(restate_gpu_hours_without_the_framebuffer_and_power(
        &ledger, &lake,
    ));
    // Until it is built again the older file reads the two columns as NULL, and the report
    // runs on it.
    let old = vec![serde_json::json!({"hour": "2026-11-02T10:00:00Z",
        "memory_used_share": null, "power_w": null, "energy_wh": 300.0})];
    assert_eq!(ledger.sql(hour), old);
    let report = run_ok(&ledger, &["report", "weekly", "--week", "2026-W45"]);
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(
        report["utilization"]["power_w_avg"],
        serde_json::Value::Null,
        "{report}"
    );
    let rebuilt = build_days(&ledger, "2026-11-02", "2026-11-02");
    assert!(
        rebuilt.contains("2026-11-02: 24 hours recomputed"),
        "{rebuilt}"
    );
    assert_eq!(ledger.sql(hour), expected);
    let after = day(&lake);
    assert_eq!(after.format, gpuledger_build::LEDGER_FORMAT);
    assert_ne!(after.batch_id, current.batch_id);
    let again = build_days(&ledger, "2026-11-02", "2026-11-02");
    assert_eq!(
        again.trim(),
        "ledger is up to date for 2026-11-02 … 2026-11-02",
        "{again}"
    );
    // A day a newer release recorded is left to it, not rebuilt in this format.
    let newer = LedgerDay {
        format: gpuledger_build::LEDGER_FORMAT + 1,
        ..after
    };
    runtime
        .block_on(lake.catalog().record_ledger_day("2026-11-02", &newer))
        .unwrap();
    let left = build_days(&ledger, "2026-11-02", "2026-11-02");
    assert_eq!(
        left.trim(),
        "ledger is up to date for 2026-11-02 … 2026-11-02",
        "{left}"
    );
}
