use super::*;

fn slo(model: &str, priority: &str, ttft_ms: Option<f64>, latency_ms: Option<f64>) -> SloSpec {
    SloSpec {
        model: model.into(),
        priority: priority.into(),
        ttft_ms,
        latency_ms,
        success_statuses: default_success_statuses(),
        objective: None,
    }
}

fn outcome(status: &str, ttft_ms: Option<f64>, latency_ms: Option<f64>) -> Outcome<'_> {
    Outcome {
        status: Some(status),
        ttft_ms,
        latency_ms,
    }
}

/// 2026-11-02 is a Monday.
fn at(day: u32, hour: u32) -> Micros {
    chrono::NaiveDate::from_ymd_opt(2026, 11, day)
        .unwrap()
        .and_hms_opt(hour, 0, 0)
        .unwrap()
        .and_utc()
        .timestamp_micros()
}

#[test]
fn a_request_meets_its_slo_only_when_it_succeeded_within_every_set_target() {
    let both = slo("m", "online", Some(500.0), Some(4000.0));
    assert!(slo_met(
        &outcome("success", Some(500.0), Some(4000.0)),
        Some(&both)
    ));
    assert!(!slo_met(
        &outcome("success", Some(500.1), Some(100.0)),
        Some(&both)
    ));
    assert!(!slo_met(
        &outcome("success", Some(100.0), Some(4000.1)),
        Some(&both)
    ));
    assert!(!slo_met(
        &outcome("failure", Some(100.0), Some(100.0)),
        Some(&both)
    ));
    // A target without a measurement: no evidence it was met.
    assert!(!slo_met(
        &outcome("success", None, Some(100.0)),
        Some(&both)
    ));
    // An unset target needs no measurement.
    let ttft_only = slo("m", "online", Some(500.0), None);
    assert!(slo_met(
        &outcome("success", Some(10.0), None),
        Some(&ttft_only)
    ));
}

#[test]
fn success_statuses_are_the_slos_and_success_alone_counts_without_an_slo() {
    let mut cached_ok = slo("m", "*", None, None);
    cached_ok.success_statuses = BTreeSet::from(["success".into(), "cached".into()]);
    assert!(slo_met(&outcome("cached", None, None), Some(&cached_ok)));
    assert!(!slo_met(&outcome("cached", None, None), None));
    assert!(slo_met(&outcome("success", None, None), None));
    assert!(!slo_met(&Outcome::default(), None));
}

#[test]
fn an_slo_for_the_priority_wins_over_the_models_any_priority_slo() {
    let slos = Slos::new([
        slo("m", "*", Some(1000.0), None),
        slo("m", "online", Some(300.0), None),
    ]);
    assert_eq!(
        slos.find(Some("m"), Some("online")).unwrap().ttft_ms,
        Some(300.0)
    );
    assert_eq!(
        slos.find(Some("m"), Some("batch")).unwrap().ttft_ms,
        Some(1000.0)
    );
    assert_eq!(slos.find(Some("m"), None).unwrap().ttft_ms, Some(1000.0));
    assert!(slos.find(Some("other"), Some("online")).is_none());
    assert!(slos.find(None, Some("online")).is_none());
}

#[test]
fn peak_is_eight_to_twenty_utc_on_weekdays() {
    assert!(!is_peak(at(2, 7)));
    assert!(is_peak(at(2, 8)));
    assert!(is_peak(at(6, 19))); // Friday
    assert!(!is_peak(at(6, 20)));
    assert!(!is_peak(at(7, 12))); // Saturday
    assert!(!is_peak(at(8, 12))); // Sunday
}

#[test]
fn prompt_buckets_count_k_as_1024_tokens() {
    assert_eq!(prompt_bucket(Some(0)), Some("<1k"));
    assert_eq!(prompt_bucket(Some(1023)), Some("<1k"));
    assert_eq!(prompt_bucket(Some(1024)), Some("1k-8k"));
    assert_eq!(prompt_bucket(Some(8191)), Some("1k-8k"));
    assert_eq!(prompt_bucket(Some(8192)), Some("8k-32k"));
    assert_eq!(prompt_bucket(Some(32768)), Some(">=32k"));
    assert_eq!(prompt_bucket(None), None);
}

#[test]
fn output_buckets_count_k_as_1024_tokens() {
    assert_eq!(output_bucket(Some(0)), Some("<256"));
    assert_eq!(output_bucket(Some(255)), Some("<256"));
    assert_eq!(output_bucket(Some(256)), Some("256-1k"));
    assert_eq!(output_bucket(Some(1023)), Some("256-1k"));
    assert_eq!(output_bucket(Some(1024)), Some("1k-4k"));
    assert_eq!(output_bucket(Some(4095)), Some("1k-4k"));
    assert_eq!(output_bucket(Some(4096)), Some(">=4k"));
    assert_eq!(output_bucket(None), None);
}

#[test]
fn unit_costs_divide_by_slo_met_output_only() {
    let traffic = Traffic {
        requests: 4,
        slo_met_requests: 3,
        input_tokens: 2000,
        output_tokens: 2000,
        cached_tokens: 0,
        tokens_slo_met: 3000,
    };
    let costs = unit_costs(12.0, &traffic);
    assert_eq!(costs.per_1m_tokens, Some(4000.0));
    assert_eq!(costs.per_successful_request, Some(4.0));
    assert_eq!(costs.slo_missed, 3.0);
    // Nothing effective: no unit cost, the whole cost is missed.
    let none_met = Traffic {
        slo_met_requests: 0,
        tokens_slo_met: 0,
        ..traffic
    };
    let costs = unit_costs(12.0, &none_met);
    assert_eq!(costs.per_1m_tokens, None);
    assert_eq!(costs.per_successful_request, None);
    assert_eq!(costs.slo_missed, 12.0);
}

fn serving() -> Serving {
    Serving {
        workloads: vec![
            WorkloadCost {
                team: "nlp".into(),
                namespace: Some("ml".into()),
                workload: "serve".into(),
                direct: 10.0,
            },
            WorkloadCost {
                team: "nlp".into(),
                namespace: Some("ml".into()),
                workload: "serve-b".into(),
                direct: 6.0,
            },
        ],
        models: vec![
            (Some("ml".into()), "serve".into(), "llama".into()),
            (Some("ml".into()), "serve-b".into(), "llama".into()),
        ],
        teams: BTreeMap::from([(
            "nlp".into(),
            TeamCost {
                direct: 20.0,
                shared: 5.0,
            },
        )]),
    }
}

fn request<'a>(ts: Micros, input: i64, output: i64, status: &'a str) -> Request<'a> {
    Request {
        ts,
        team: Some("caller"),
        namespace: Some("ml"),
        workload: Some("serve"),
        model: Some("llama"),
        priority: Some("online"),
        input_tokens: Some(input),
        output_tokens: Some(output),
        outcome: Outcome {
            status: Some(status),
            ttft_ms: Some(100.0),
            latency_ms: Some(100.0),
        },
        ..Request::default()
    }
}

#[test]
fn a_workloads_cost_is_split_over_its_rows_by_token_share_and_loaded_by_its_teams_shared_rate() {
    let mut economics = UnitEconomics::new(Slos::default(), serving());
    // Off-peak: 3000 tokens, all met. Peak: 1000 tokens, failed.
    economics.add(&request(at(2, 1), 1000, 2000, "success"));
    economics.add(&request(at(2, 9), 500, 500, "failure"));
    let rows = economics.finish();
    assert_eq!(rows.len(), 2);
    let (off_peak, peak) = (&rows[0], &rows[1]);
    assert!(!off_peak.key.peak && peak.key.peak);
    assert_eq!(off_peak.key.team.as_deref(), Some("nlp"));
    assert_eq!(off_peak.served_by.as_deref(), Some("ml/serve"));
    assert_eq!(off_peak.direct_cost, Some(7.5));
    assert_eq!(peak.direct_cost, Some(2.5));
    // nlp's shared rate: 5 / 20 = 0.25 on top of direct.
    assert_eq!(off_peak.loaded_cost, Some(9.375));
    let costs = off_peak.unit_costs.unwrap();
    assert_eq!(costs.per_1m_tokens, Some(3125.0));
    assert_eq!(costs.slo_missed, 0.0);
    let costs = peak.unit_costs.unwrap();
    assert_eq!(costs.per_1m_tokens, None);
    assert_eq!(costs.slo_missed, 3.125);
}

#[test]
fn without_a_workload_a_request_is_served_by_the_namespaces_workloads_of_its_model() {
    let mut economics = UnitEconomics::new(Slos::default(), serving());
    let mut by_model = request(at(2, 1), 10, 10, "success");
    by_model.workload = None;
    economics.add(&by_model);
    let mut unknown_model = by_model;
    unknown_model.model = Some("mistral");
    economics.add(&unknown_model);
    let rows = economics.finish();
    assert_eq!(rows.len(), 2);
    let linked = rows
        .iter()
        .find(|r| r.key.model.as_deref() == Some("llama"))
        .unwrap();
    assert_eq!(linked.served_by.as_deref(), Some("ml/serve, ml/serve-b"));
    assert_eq!(linked.direct_cost, Some(16.0));
    assert_eq!(linked.key.team.as_deref(), Some("nlp"));
    // No workload serves mistral: no cost (not zero), and the caller's team.
    let unlinked = rows
        .iter()
        .find(|r| r.key.model.as_deref() == Some("mistral"))
        .unwrap();
    assert_eq!(unlinked.direct_cost, None);
    assert_eq!(unlinked.unit_costs, None);
    assert_eq!(unlinked.key.team.as_deref(), Some("caller"));
    assert_eq!(unlinked.traffic.slo_met_requests, 1);
}

#[test]
fn a_workload_in_another_namespace_does_not_serve_the_request() {
    let mut economics = UnitEconomics::new(Slos::default(), serving());
    let mut elsewhere = request(at(2, 1), 10, 10, "success");
    elsewhere.namespace = Some("prod");
    economics.add(&elsewhere);
    let rows = economics.finish();
    assert_eq!(rows[0].served_by, None);
    assert_eq!(rows[0].direct_cost, None);
}

#[test]
fn throughput_that_breaks_the_ttft_slo_raises_the_cost_per_met_token() {
    let slos = || Slos::new([slo("llama", "online", Some(500.0), None)]);
    let window = |requests: &[(i64, f64)]| {
        let mut economics = UnitEconomics::new(slos(), serving());
        for (tokens, ttft) in requests {
            let mut r = request(at(2, 1), *tokens, 0, "success");
            r.outcome.ttft_ms = Some(*ttft);
            economics.add(&r);
        }
        let rows = economics.finish();
        assert_eq!(rows.len(), 1);
        rows[0].unit_costs.unwrap().per_1m_tokens.unwrap()
    };
    // Same cost (10 × 1.25 loaded) both times; the second window serves 2.5× the tokens but only
    // 200 of them within the TTFT target.
    let before = window(&[(100, 200.0), (100, 200.0)]);
    let after = window(&[
        (100, 200.0),
        (100, 900.0),
        (100, 900.0),
        (100, 900.0),
        (100, 900.0),
    ]);
    assert_eq!(before, 12.5 / 200.0 * 1e6);
    assert_eq!(after, 12.5 / 100.0 * 1e6);
    assert!(after > before);
}

#[test]
fn a_workload_found_by_name_and_by_model_is_costed_once() {
    let mut economics = UnitEconomics::new(Slos::default(), serving());
    // Found by name: ml/serve only. Found by model: ml/serve and ml/serve-b.
    economics.add(&request(at(2, 1), 20, 10, "success"));
    let mut by_model = request(at(2, 1), 5, 5, "success");
    by_model.workload = None;
    by_model.priority = Some("batch");
    economics.add(&by_model);
    let rows = economics.finish();
    assert_eq!(rows.len(), 2);
    let (batch, online) = (&rows[0], &rows[1]);
    // ml/serve's 10.0 over 30 : 10 tokens; ml/serve-b's 6.0 all to the batch row.
    assert_eq!(online.direct_cost, Some(7.5));
    assert_eq!(online.served_by.as_deref(), Some("ml/serve"));
    assert_eq!(batch.direct_cost, Some(2.5 + 6.0));
    assert_eq!(batch.served_by.as_deref(), Some("ml/serve, ml/serve-b"));
}

#[test]
fn a_request_is_priced_as_its_row_was() {
    let mut economics = UnitEconomics::new(Slos::default(), serving());
    let by_name = request(at(2, 1), 20, 10, "success");
    let mut by_model = request(at(2, 1), 5, 5, "success");
    by_model.workload = None;
    by_model.priority = Some("batch");
    let mut unserved = by_model;
    unserved.namespace = Some("elsewhere");
    for r in [&by_name, &by_model, &unserved] {
        economics.add(r);
    }
    let (rows, mut costing) = economics.into_costing();
    // Each request is alone in its row, so it costs what its row costs.
    let row_of = |priority: &str, served: bool| {
        rows.iter()
            .find(|r| {
                r.key.priority.as_deref() == Some(priority) && r.served_by.is_some() == served
            })
            .unwrap()
            .loaded_cost
    };
    assert!(row_of("online", true).is_some());
    assert_eq!(costing.loaded_cost(&by_name), row_of("online", true));
    assert_eq!(costing.loaded_cost(&by_model), row_of("batch", true));
    assert_eq!(costing.loaded_cost(&unserved), None);
    assert_eq!(row_of("batch", false), None);
}

#[test]
fn builds_of_one_model_get_their_own_rows_but_share_its_slo_and_workload() {
    let slos = Slos::new([slo("llama", "online", Some(500.0), None)]);
    let mut economics = UnitEconomics::new(slos, serving());
    let build = |version, quantization, ttft_ms| {
        let mut r = request(at(2, 9), 60, 40, "success");
        r.model_version = Some(version);
        r.quantization = Some(quantization);
        r.outcome.ttft_ms = Some(ttft_ms);
        r
    };
    // Two bf16 requests within the 500 ms TTFT target, three fp8 ones past it; 100 tokens each.
    for _ in 0..2 {
        economics.add(&build("llama-bf16", "bf16", 200.0));
    }
    for _ in 0..3 {
        economics.add(&build("llama-fp8", "fp8", 900.0));
    }
    let rows = economics.finish();
    assert_eq!(rows.len(), 2);
    let (bf16, fp8) = (&rows[0], &rows[1]);
    assert_eq!(bf16.key.quantization.as_deref(), Some("bf16"));
    assert_eq!(fp8.key.model_version.as_deref(), Some("llama-fp8"));
    assert_eq!(fp8.key.output_bucket, Some("<256"));
    // The llama/online SLO judged both; ml/serve served both: its 10.0 × 1.25 loaded = 12.5 is split
    // 200 : 300 tokens. bf16: 5.0 over 200 met tokens = 25000 per 1M. fp8: 7.5, all of it missed,
    // no effective output to divide by.
    assert_eq!(bf16.loaded_cost, Some(5.0));
    assert_eq!(bf16.unit_costs.unwrap().per_1m_tokens, Some(25_000.0));
    assert_eq!(fp8.loaded_cost, Some(7.5));
    let fp8_costs = fp8.unit_costs.unwrap();
    assert_eq!(fp8_costs.per_1m_tokens, None);
    assert_eq!(fp8_costs.per_successful_request, None);
    assert_eq!(fp8_costs.slo_missed, 7.5);
}
