use super::document::{Bar, by_size};
use super::numbers::{Unit, amount, cents, change, duration, grouped, percent};
use super::*;
use crate::model::*;

fn recommendation(kind: &str, owner: &str, gpu_hours: f64, cost: f64) -> Recommendation {
    Recommendation {
        kind: kind.into(),
        owner: owner.into(),
        action: format!("Act on {kind} of {owner}"),
        cluster: Some("demo".into()),
        node: None,
        namespace: None,
        workload: None,
        gpu_hours,
        cost,
        cost_per_day: r6(cost / 7.0),
    }
}

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
        summary: Summary {
            total_cost: 118.2,
            previous_total_cost: 96.0,
            change: 22.2,
            change_share: Some(0.23125),
            teams: vec![
                TeamChange {
                    team: "nlp".into(),
                    total_cost: 40.728,
                    previous_total_cost: 32.0,
                    change: 8.728,
                    change_share: Some(0.27275),
                },
                TeamChange {
                    team: "vision".into(),
                    total_cost: 0.0,
                    previous_total_cost: 16.0,
                    change: -16.0,
                    change_share: Some(-1.0),
                },
            ],
        },
        recommendations: Recommendations {
            total_cost: 36.4,
            count: 3,
            top: vec![
                recommendation("unexplained_idle", "platform", 20.0, 32.0),
                recommendation("allocated_idle", "vision", 2.0, 3.2),
                recommendation("unexplained_idle", "platform", 1.0, 1.2),
            ],
            query: "SELECT * FROM recommendations('2026-11-02', '2026-11-09')".into(),
        },
        capacity: Capacity {
            total_gpus: 3,
            available_gpus: 1,
            faulty_gpus: 2,
            maintenance_gpus: 0,
            fault_gpu_hours: 4.0,
            gpu_hours: 504.0,
            available_gpu_hours: 500.0,
            maintenance_gpu_hours: 0.0,
            by_model: vec![
                CapacityGroup {
                    gpu_model: "NVIDIA L4".into(),
                    flavor: "on_demand".into(),
                    gpus: 1,
                    available_gpus: 1,
                    faulty_gpus: 0,
                    maintenance_gpus: 0,
                    gpu_hours: 168.0,
                    available_gpu_hours: 168.0,
                    fault_gpu_hours: 0.0,
                    maintenance_gpu_hours: 0.0,
                },
                CapacityGroup {
                    gpu_model: "NVIDIA H100 80GB HBM3".into(),
                    flavor: "on_demand".into(),
                    gpus: 2,
                    available_gpus: 0,
                    faulty_gpus: 2,
                    maintenance_gpus: 0,
                    gpu_hours: 336.0,
                    available_gpu_hours: 332.0,
                    fault_gpu_hours: 4.0,
                    maintenance_gpu_hours: 0.0,
                },
            ],
        },
        utilization: Utilization {
            allocated_gpu_hours: 19.0,
            busy_gpu_hours: 17.0,
            sm_active: Some(0.474286),
            memory_used_share: None,
            power_w_avg: Some(400.0),
            energy_kwh: 3.2,
            gpu_cost: 82.4,
            busy_cost_share: Some(0.893333),
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
fn csv_carries_every_json_figure_exactly() {
    let report = sample();
    let csv = String::from_utf8(Format::Csv.render(&report)).unwrap();
    for line in [
        "week,section,item,metric,value",
        "2026-W45,summary,,total_cost,118.2",
        "2026-W45,summary,nlp,teams.change,8.728",
        "2026-W45,recommendations,,total_cost,36.4",
        "2026-W45,capacity,,total_gpus,3",
        "2026-W45,capacity,,available_gpu_hours,500.0",
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
}

#[test]
fn html_and_markdown_open_with_the_story_in_people_s_figures() {
    let report = sample();
    let html = String::from_utf8(Format::Html.render(&report)).unwrap();
    let summary = "<p id=\"summary\">The week cost $118.20, ▲ $22.20 (+23.1%) against the week \
                   before ($96.00). Biggest movers: nlp ▲ $8.73 (+27.3%), vision ▼ $16.00 \
                   (-100.0%). 89.3% of the money of allocated GPUs paid for busy time. $36.40 \
                   could be reclaimed (3 actions, below). Ledger balance: billed $111.00 + \
                   manual $4.80 + rate card $2.40 = expected $118.20; accounted $118.20; \
                   difference $0.00 (balanced).</p>";
    assert!(html.contains(summary), "{html}");
    // The story comes before the tables, and every figure after it too is in people's units.
    let at = |needle: &str| {
        html.find(needle)
            .unwrap_or_else(|| panic!("{needle} in {html}"))
    };
    assert!(at("id=\"summary\"") < at("id=\"recommendations\""));
    assert!(at("id=\"recommendations\"") < at("id=\"teams-table\""));
    assert!(at("id=\"teams-table\"") < at("id=\"all-figures\""));
    assert!(html.contains(
        "<tr><td>nlp</td><td class=\"n\">12.0</td><td class=\"n\">$19.20</td><td class=\"n\">$21.53</td><td class=\"n\">$40.73</td><td class=\"n\">$32.00</td><td class=\"n\">▲ $8.73 (+27.3%)</td>"
    ), "{html}");
    // A team that cost nothing this week still shows its week before.
    assert!(
        html.contains("<tr><td>vision</td><td class=\"n\">0.0</td>"),
        "{html}"
    );
    assert!(html.contains("<td>nlp</td><td>teams.total_cost</td><td class=\"n\">$40.73</td>"));
    assert!(html.contains("<td></td><td>wait_p95_seconds</td><td class=\"n\">12.8 min</td>"));
    // Capacity in GPU-hours, the largest group first.
    assert!(
        at(
            "<tr><td>NVIDIA H100 80GB HBM3 (on_demand)</td><td class=\"n\">2</td><td class=\"n\">336.0</td><td class=\"n\">332.0</td><td class=\"n\">4.0</td>"
        ) < at("<tr><td>NVIDIA L4 (on_demand)</td>")
    );
    assert_eq!(html.matches("<svg").count(), 4);
    assert!(!html.contains("<script") && !html.contains("http://") && !html.contains("https://"));
    assert!(html.contains("@media print"));

    let md = String::from_utf8(Format::Markdown.render(&report)).unwrap();
    assert!(
        md.contains("\nThe week cost $118.20, ▲ $22.20 (+23.1%)"),
        "{md}"
    );
    assert!(
        md.contains("| nlp | 12.0 | $19.20 | $21.53 | $40.73 | $32.00 | ▲ $8.73 (+27.3%) |"),
        "{md}"
    );
    assert!(md.contains("| nlp | teams.total_cost | $40.73 |"), "{md}");
    assert!(
        md.contains("1. **platform**: Act on unexplained_idle of platform — **$32.00**"),
        "{md}"
    );
}

#[test]
fn the_recommended_actions_add_up_to_the_amount_they_claim() {
    // Three actions of a third of a dollar: printed $0.33 each, so the claim is $0.99, what the
    // list adds up to, and the list says there is more than it shows.
    let report = WeeklyReport {
        recommendations: Recommendations {
            total_cost: 1.5,
            count: 4,
            top: (0..3)
                .map(|_| recommendation("allocated_idle", "nlp", 1.0, 1.0 / 3.0))
                .collect(),
            query: "SELECT * FROM recommendations('2026-11-02', '2026-11-09')".into(),
        },
        ..sample()
    };
    let html = html(&report);
    let list = &html[html.find("<ol class=\"actions\"").unwrap()..html.find("</ol>").unwrap()];
    let printed: Vec<&str> = list
        .split("<b class=\"money\">")
        .skip(1)
        .map(|s| &s[..s.find("</b>").unwrap()])
        .collect();
    assert_eq!(printed, ["$0.33", "$0.33", "$0.33"]);
    assert!(
        html.contains("<p id=\"recommendations-total\">These 3 actions: $0.99, of $1.50 in 4 actions in all.</p>"),
        "{html}"
    );
    assert!(
        html.contains("<code>SELECT * FROM recommendations('2026-11-02', '2026-11-09')</code>")
    );
    let none = WeeklyReport {
        recommendations: Recommendations {
            total_cost: 0.0,
            count: 0,
            top: vec![],
            query: String::new(),
        },
        ..sample()
    };
    assert!(self::html(&none).contains("<p id=\"recommendations-total\">Nothing to reclaim"));
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
        warning < html.find("id=\"summary\"").unwrap(),
        "before the summary"
    );
    let md = markdown(&report);
    assert!(
        md.starts_with(
            "# GPU weekly report 2026-W45 (2026-11-02 to 2026-11-09, UTC)\n\nAmounts in USD.\n\n\
             > **Warning:** No data for this week: <check> the `ingest`.\n\nThe week cost"
        ),
        "{md}"
    );
    // A week with data has no warning line at all.
    assert!(!markdown(&sample()).contains("Warning"));
    assert!(!self::html(&sample()).contains("class=\"warning\""));
}

#[test]
fn figures_for_people_have_separators_currency_units_and_no_negative_zero() {
    assert_eq!(grouped(7966.46881, 2), "7,966.47");
    assert_eq!(grouped(70966.393445, 1), "70,966.4");
    assert_eq!(grouped(999.0, 0), "999");
    assert_eq!(grouped(1_000_000.0, 0), "1,000,000");
    assert_eq!(grouped(-1234.5, 2), "-1,234.50");
    assert_eq!(grouped(-0.001, 2), "0.00");
    // Half away from zero on the decimal figure, not on its binary neighbour.
    assert_eq!(grouped(44.15, 1), "44.2");
    assert_eq!(grouped(0.4415 * 100.0, 1), "44.2");
    assert_eq!(grouped(8.725, 2), "8.73");
    assert_eq!(grouped(-8.725, 2), "-8.73");
    assert_eq!(grouped(0.0049, 2), "0.00");
    assert_eq!(amount(0.005, "USD"), "$0.01");
    assert_eq!(amount(7966.46881, "USD"), "$7,966.47");
    assert_eq!(amount(-399.78, "USD"), "-$399.78");
    assert_eq!(amount(12.5, "EUR"), "12.50 EUR");
    assert_eq!(percent(0.474286), "47.4%");
    assert_eq!(duration(45.0), "45 s");
    assert_eq!(duration(870.0), "14.5 min");
    assert_eq!(duration(11_520.0), "3.2 h");
    assert_eq!(change(8.728, Some(0.27275), "USD"), "▲ $8.73 (+27.3%)");
    assert_eq!(change(-1.2, Some(-0.05), "USD"), "▼ $1.20 (-5.0%)");
    assert_eq!(change(5.208, None, "USD"), "▲ $5.21 (new)");
    assert_eq!(change(0.001, Some(0.0), "USD"), "no change");
    // Rounded as before: half away from zero at 2, 3 and 6 places.
    assert_eq!(
        (grouped(0.005, 2), grouped(-0.005, 2)),
        ("0.01".into(), "-0.01".into())
    );
    assert_eq!(grouped(999.9996, 3), "1,000.000");
    assert_eq!(grouped(-1234.5678904, 6), "-1,234.567890");
    // Carries through every digit, and past the whole part.
    assert_eq!(grouped(999_999.995, 2), "1,000,000.00");
    assert_eq!(grouped(-0.96, 0), "-1");
    // Any f64 prints, however large (a budget of 1e300 once panicked the weekly report), and
    // counts in cents as far as i128 reaches.
    assert_eq!(grouped(1e20, 2), "100,000,000,000,000,000,000.00");
    assert_eq!(grouped(1e300, 0).len(), 301 + 100);
    assert!(grouped(1e300, 0).starts_with("1,000,000,000,000,000,052,504"));
    assert_eq!(
        (
            grouped(f64::NAN, 2),
            grouped(f64::INFINITY, 2),
            amount(f64::NEG_INFINITY, "USD")
        ),
        ("NaN".into(), "∞".into(), "-$∞".into())
    );
    assert_eq!(cents(1e17), 10_i128.pow(19));
    assert_eq!((cents(1e300), cents(-1e300)), (i128::MAX, i128::MIN));
    assert_eq!(change(1e300, None, "USD").chars().next(), Some('▲'));
    for (metric, unit) in [
        ("teams.total_cost", Unit::Money),
        ("accounted", Unit::Money),
        ("reclaimed_cost", Unit::Money),
        ("models.week.cost_per_1m_slo_met_tokens", Unit::Money),
        ("by_model.fault_gpu_hours", Unit::GpuHours),
        ("slo_met_share", Unit::Share),
        ("sm_active", Unit::Share),
        ("wait_p50_seconds", Unit::Seconds),
        ("total_gpus", Unit::Plain),
        ("models.week.slo_met_tokens_per_second", Unit::Plain),
    ] {
        assert_eq!(Unit::of(metric), unit, "{metric}");
    }
    assert_eq!(Unit::Plain.format(0.024967, "USD"), "0.024967");
    assert_eq!(Unit::Plain.format(16000.0, "USD"), "16,000");
}

#[test]
fn tiles_read_as_amounts_and_bars_come_largest_first() {
    let html = html(&sample());
    assert!(html.contains("<span>cost</span><b>$118.20</b>"), "{html}");
    assert!(
        html.contains("<span>GPU-hours available</span><b>500.0</b>"),
        "{html}"
    );
    assert!(
        html.contains("<span>allocated GPU-hours</span><b>19.0</b>"),
        "{html}"
    );
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
    // GPU-hours by model: fault is red (COLOURS[2]), and so is the legend's swatch for it.
    let chart = &html[html.find("GPU-hours by model and flavor").unwrap()..];
    let chart = &chart[..chart.find("</svg>").unwrap()];
    let swatch = chart.rfind(">fault</text>").unwrap();
    let before = &chart[..swatch];
    let fill = before.rfind("fill=\"").unwrap();
    assert_eq!(&before[fill + 6..fill + 13], COLOURS[2]);
}
