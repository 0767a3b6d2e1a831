use super::*;
use crate::model::*;

/// A report with every kind of row, some figures null.
fn sample() -> WeeklyReport {
    let figures = |requests, met| ModelFigures {
        requests,
        slo_met_requests: met,
        slo_met_tokens: met * 1000,
        slo_met_tokens_per_second: r6((met * 1000) as f64 / 604_800.0),
        cost: Some(40.728),
        cost_per_1m_slo_met_tokens: Some(5091.0),
        slo_missed_cost: None,
    };
    WeeklyReport {
        schema_version: SCHEMA_VERSION,
        week: "2026-W45".into(),
        from: "2026-11-02".into(),
        to: "2026-11-09".into(),
        currency: "USD".into(),
        warnings: vec![],
        capacity: Capacity {
            total_gpus: 3,
            available_gpus: 1,
            faulty_gpus: 2,
            maintenance_gpus: 0,
            fault_gpu_hours: 4.0,
            by_model: vec![CapacityGroup {
                gpu_model: "NVIDIA L4".into(),
                flavor: "on_demand".into(),
                gpus: 1,
                available_gpus: 1,
                faulty_gpus: 0,
                maintenance_gpus: 0,
            }],
        },
        utilization: Utilization {
            allocated_gpu_hours: 19.0,
            busy_gpu_hours: 17.0,
            sm_active: Some(0.474286),
            memory_used_share: None,
            power_w_avg: Some(400.0),
            energy_kwh: 3.2,
            gpu_cost: 82.4,
            idle: vec![IdleClass {
                class: "reserved:warm_pool".into(),
                gpu_hours: 6.0,
                cost: 9.6,
            }],
        },
        queue: Queue {
            queued: 3,
            admitted: 2,
            waits_measured: 2,
            wait_p50_seconds: Some(450.0),
            wait_p95_seconds: Some(765.0),
            rejections: 1,
            preemptions: 1,
            evictions: 0,
            borrowed_admissions: 1,
        },
        training: Training {
            workloads: 1,
            runs: 1,
            succeeded: 1,
            failed: 0,
            preempted: 0,
            success_rate: Some(1.0),
            gpu_hours: 6.0,
            effective_gpu_hours: 6.0,
            cost: 9.6,
            failure_loss: 0.0,
            recompute_cost: 0.0,
        },
        inference: Inference {
            models: vec![ModelWeeks {
                model: "llama-3-8b".into(),
                week: Some(figures(14, 5)),
                previous_week: None,
            }],
        },
        tenants: Tenants {
            limits: "not configured".into(),
            teams: vec![TeamRow {
                team: "nlp".into(),
                gpu_hours: 12.0,
                direct_cost: 19.2,
                shared_cost: 21.528,
                total_cost: 40.728,
                budget: None,
                budget_deviation: None,
                quota_gpus: None,
                quota_used_share: None,
            }],
            unattributed: Unattributed {
                total_cost: 5.208,
                workloads: vec![UnattributedWorkload {
                    namespace: Some("ml".into()),
                    workload: Some("promo".into()),
                    gpu_hours: 1.0,
                    cost: 1.2,
                }],
            },
        },
        optimization: Optimization {
            waste_gpu_hours: 23.0,
            waste_cost: 36.4,
            previous_waste_gpu_hours: 30.0,
            previous_waste_cost: 48.0,
            reclaimed_gpu_hours: 7.0,
            reclaimed_cost: 11.6,
            spot_net_savings: None,
            slo_met_share: Some(0.357143),
            previous_slo_met_share: Some(1.0),
            slo_missed_cost: Some(12.0),
        },
        balance: Balance {
            billed: 111.0,
            manual: 4.8,
            rate_card: 2.4,
            expected: 118.2,
            accounted: 118.2,
            difference: 0.0,
            balanced: true,
        },
    }
}

#[test]
fn csv_markdown_and_html_carry_the_json_figures() {
    let report = sample();
    let csv = String::from_utf8(Format::Csv.render(&report)).unwrap();
    for line in [
        "week,section,item,metric,value",
        "2026-W45,capacity,,total_gpus,3",
        "2026-W45,capacity,on_demand / NVIDIA L4,by_model.gpus,1",
        "2026-W45,utilization,reserved:warm_pool,idle.cost,9.6",
        "2026-W45,utilization,,memory_used_share,",
        "2026-W45,inference,llama-3-8b,models.week.cost_per_1m_slo_met_tokens,5091.0",
        "2026-W45,inference,llama-3-8b,models.previous_week,",
        "2026-W45,tenants,nlp,teams.total_cost,40.728",
        "2026-W45,tenants,,limits,not configured",
        "2026-W45,tenants,ml / promo,unattributed.workloads.cost,1.2",
        "2026-W45,balance,,accounted,118.2",
    ] {
        assert!(csv.lines().any(|l| l == line), "{line} not in\n{csv}");
    }
    let md = String::from_utf8(Format::Markdown.render(&report)).unwrap();
    assert!(md.contains("| nlp | teams.total_cost | 40.728 |"), "{md}");
    assert!(
        md.contains("difference 0 (balanced)") || md.contains("difference 0.0 (balanced)"),
        "{md}"
    );
    let html = String::from_utf8(Format::Html.render(&report)).unwrap();
    assert_eq!(html.matches("<svg").count(), 4);
    assert!(!html.contains("<script") && !html.contains("http://") && !html.contains("https://"));
    assert!(html.contains("<td>nlp</td><td>teams.total_cost</td><td class=\"n\">40.728</td>"));
    assert!(html.contains("@media print"));
}

#[test]
fn warnings_come_before_the_figures_in_html_and_markdown() {
    let report = WeeklyReport {
        warnings: vec!["No data for this week: <check> the `ingest`.".into()],
        ..sample()
    };
    let html = html(&report);
    let warning = html
        .find("<p class=\"warning\" role=\"alert\"><b>Warning:</b> No data for this week: &lt;check&gt; the `ingest`.</p>")
        .expect("the warning, escaped");
    assert!(
        warning < html.find("id=\"totals\"").unwrap(),
        "before the totals"
    );
    let md = markdown(&report);
    assert!(
        md.starts_with(
            "# GPU weekly report 2026-W45 (2026-11-02 to 2026-11-09, UTC)\n\n\
             > **Warning:** No data for this week: <check> the `ingest`.\n\nLedger balance:"
        ),
        "{md}"
    );
    // A week with data has no warning line at all.
    assert!(!markdown(&sample()).contains("Warning"));
    assert!(!self::html(&sample()).contains("class=\"warning\""));
}

#[test]
fn figures_for_people_have_separators_currency_and_no_negative_zero() {
    assert_eq!(grouped(7966.46881, 2), "7,966.47");
    assert_eq!(grouped(70966.393445, 1), "70,966.4");
    assert_eq!(grouped(999.0, 0), "999");
    assert_eq!(grouped(1_000_000.0, 0), "1,000,000");
    assert_eq!(grouped(-1234.5, 2), "-1,234.50");
    assert_eq!(grouped(-0.001, 2), "0.00");
    assert_eq!(amount(7966.46881, "USD"), "$7,966.47");
    assert_eq!(amount(-399.78, "USD"), "-$399.78");
    assert_eq!(amount(12.5, "EUR"), "12.50 EUR");
}

#[test]
fn html_tiles_read_as_amounts_and_bars_come_largest_first() {
    let report = sample();
    let html = html(&report);
    assert!(html.contains("<span>GPU cost</span><b>$"), "{html}");
    assert!(
        html.contains("<span>allocated GPU-hours</span><b>19.0</b>"),
        "{html}"
    );
    // Bars are drawn in the order given; by_size puts the largest total first.
    let bars = by_size(vec![
        Bar {
            label: "small".into(),
            values: vec![1.0],
        },
        Bar {
            label: "large".into(),
            values: vec![2.0, 3.0],
        },
        Bar {
            label: "middle".into(),
            values: vec![4.0],
        },
    ]);
    let order: Vec<_> = bars.iter().map(|b| b.label.as_str()).collect();
    assert_eq!(order, ["large", "middle", "small"]);
}

#[test]
fn a_legend_shows_the_colour_its_bars_are_drawn_in() {
    let html = html(&sample());
    // GPUs by model: faulty bars are red (COLOURS[2]), and so is the legend's swatch for them.
    let chart = &html[html.find("GPUs by model and flavor").unwrap()..];
    let chart = &chart[..chart.find("</svg>").unwrap()];
    let swatch = chart.rfind(">faulty</text>").unwrap();
    let before = &chart[..swatch];
    let fill = before.rfind("fill=\"").unwrap();
    assert_eq!(&before[fill + 6..fill + 13], COLOURS[2]);
}
