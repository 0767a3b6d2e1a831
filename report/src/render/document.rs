//! The report for people, as blocks that the HTML and Markdown renderers both print: the story
//! first (warnings, a summary paragraph, key figures, the recommended actions), then each section
//! as a table sorted by size with the week before beside it, then every figure of the JSON.

use super::numbers::{Unit, amount, cents, change, duration, gpu_hours, grouped, percent};
use super::{COLOURS, sections, title};
use crate::model::{ModelFigures, WeeklyReport};

pub(super) enum Block {
    Warning(String),
    /// A paragraph with an id to find it by.
    Paragraph(&'static str, String),
    Heading(&'static str, String),
    /// Key figures: label and value.
    Tiles(Vec<(String, String)>),
    Actions(Actions),
    Table(Table),
    Chart(Chart),
    /// Blocks a reader opens when they want them.
    Details(String, Vec<Block>),
}

pub(super) struct Actions {
    pub items: Vec<Action>,
    /// The sentence after the list, with the sum of the amounts printed above.
    pub claim: String,
    pub query: String,
}

pub(super) struct Action {
    pub owner: String,
    pub action: String,
    pub detail: String,
    /// The amount as printed.
    pub cost: String,
}

pub(super) struct Table {
    pub id: String,
    pub caption: String,
    pub headers: Vec<&'static str>,
    pub rows: Vec<Vec<Cell>>,
}

pub(super) struct Cell {
    pub text: String,
    /// Right-aligned, as figures are.
    pub numeric: bool,
}

fn text(s: impl Into<String>) -> Cell {
    Cell {
        text: s.into(),
        numeric: false,
    }
}

fn number(s: impl Into<String>) -> Cell {
    Cell {
        text: s.into(),
        numeric: true,
    }
}

/// A horizontal stacked bar chart: each bar's values, one per legend entry (whose colour the
/// segment takes); bars are drawn in the order given.
pub(super) struct Chart {
    pub title: String,
    pub legend: Vec<(&'static str, &'static str)>,
    pub bars: Vec<Bar>,
    pub unit: Unit,
    pub currency: String,
}

pub(super) struct Bar {
    pub label: String,
    pub values: Vec<f64>,
}

/// Bars largest first, as a reader compares them.
pub(super) fn by_size(mut bars: Vec<Bar>) -> Vec<Bar> {
    let total = |b: &Bar| b.values.iter().map(|v| v.max(0.0)).sum::<f64>();
    bars.sort_by(|a, b| total(b).total_cmp(&total(a)));
    bars
}

/// The ledger balance line every format shows.
pub(super) fn balance_line(report: &WeeklyReport) -> String {
    let b = &report.balance;
    let money = |x: f64| amount(x, &report.currency);
    format!(
        "Ledger balance: billed {} + manual {} + rate card {} = expected {}; accounted {}; difference {} ({}).",
        money(b.billed),
        money(b.manual),
        money(b.rate_card),
        money(b.expected),
        money(b.accounted),
        money(b.difference),
        if b.balanced {
            "balanced"
        } else {
            "DOES NOT BALANCE"
        }
    )
}

/// The week in a paragraph: its cost against the week before, the three biggest movers, what
/// could be reclaimed, and the balance.
fn summary(report: &WeeklyReport) -> String {
    let s = &report.summary;
    let currency = report.currency.as_str();
    let money = |x: f64| amount(x, currency);
    let mut out = format!(
        "The week cost {}, {} against the week before ({}).",
        money(s.total_cost),
        change(s.change, s.change_share, currency),
        money(s.previous_total_cost)
    );
    let movers: Vec<String> = s
        .teams
        .iter()
        .filter(|t| cents(t.change) != 0)
        .take(3)
        .map(|t| format!("{} {}", t.team, change(t.change, t.change_share, currency)))
        .collect();
    if !movers.is_empty() {
        out.push_str(&format!(" Biggest movers: {}.", movers.join(", ")));
    }
    if let Some(share) = report.utilization.busy_cost_share {
        out.push_str(&format!(
            " {} of the money of allocated GPUs paid for busy time.",
            percent(share)
        ));
    }
    let r = &report.recommendations;
    if r.count > 0 {
        out.push_str(&format!(
            " {} could be reclaimed ({} {}, below).",
            money(r.total_cost),
            r.count,
            if r.count == 1 { "action" } else { "actions" }
        ));
    }
    out.push(' ');
    out.push_str(&balance_line(report));
    out
}

fn actions(report: &WeeklyReport) -> Actions {
    let r = &report.recommendations;
    let currency = report.currency.as_str();
    let items: Vec<Action> = r
        .top
        .iter()
        .map(|a| Action {
            owner: a.owner.clone(),
            action: a.action.clone(),
            detail: format!(
                "{} GPU-hours in the week, {} a day",
                gpu_hours(a.gpu_hours),
                amount(a.cost_per_day, currency)
            ),
            cost: amount(a.cost, currency),
        })
        .collect();
    // The claim is the sum of the amounts as printed, so the list adds up to it to the cent.
    let shown_cents = r
        .top
        .iter()
        .map(|a| cents(a.cost))
        .fold(0, i128::saturating_add);
    let shown = amount(shown_cents as f64 / 100.0, currency);
    let claim = match (r.count, r.top.len()) {
        (0, _) => "Nothing to reclaim: no workload held idle GPUs and every idle GPU had a \
                   declared reason."
            .to_string(),
        (1, _) => format!("This action: {shown}."),
        (count, top) if count as usize > top => format!(
            "These {top} actions: {shown}, of {} in {count} actions in all.",
            amount(r.total_cost, currency)
        ),
        (count, _) => format!("These {count} actions: {shown}."),
    };
    Actions {
        items,
        claim,
        query: r.query.clone(),
    }
}

fn teams(report: &WeeklyReport) -> Vec<Block> {
    let currency = report.currency.as_str();
    let money = |x: f64| number(amount(x, currency));
    let mut teams: Vec<_> = report.tenants.teams.iter().collect();
    teams.sort_by(|a, b| {
        b.total_cost
            .total_cmp(&a.total_cost)
            .then(a.team.cmp(&b.team))
    });
    let before = |team: &str| report.summary.teams.iter().find(|t| t.team == team);
    let mut rows: Vec<Vec<Cell>> = teams
        .iter()
        .map(|t| {
            let was = before(&t.team);
            vec![
                text(&t.team),
                number(gpu_hours(t.gpu_hours)),
                money(t.direct_cost),
                money(t.shared_cost),
                money(t.total_cost),
                money(was.map_or(0.0, |w| w.previous_total_cost)),
                number(
                    was.map_or_else(String::new, |w| change(w.change, w.change_share, currency)),
                ),
                number(t.budget.map_or_else(String::new, |b| amount(b, currency))),
                number(t.budget_deviation.map_or_else(String::new, |d| {
                    if d > 0.0 {
                        format!("{} over", amount(d, currency))
                    } else {
                        format!("{} under", amount(-d, currency))
                    }
                })),
            ]
        })
        .collect();
    // Teams that cost only the week before still show, at zero.
    for gone in report
        .summary
        .teams
        .iter()
        .filter(|c| !teams.iter().any(|t| t.team == c.team))
    {
        rows.push(vec![
            text(&gone.team),
            number(gpu_hours(0.0)),
            money(0.0),
            money(0.0),
            money(0.0),
            money(gone.previous_total_cost),
            number(change(gone.change, gone.change_share, currency)),
            number(""),
            number(""),
        ]);
    }
    vec![
        Block::Heading("teams", "Cost per team".into()),
        Block::Chart(Chart {
            title: "Cost per team".into(),
            legend: vec![("direct", COLOURS[0]), ("shared", COLOURS[1])],
            bars: by_size(
                teams
                    .iter()
                    .map(|t| Bar {
                        label: t.team.clone(),
                        values: vec![t.direct_cost, t.shared_cost],
                    })
                    .collect(),
            ),
            unit: Unit::Money,
            currency: currency.to_string(),
        }),
        Block::Table(Table {
            id: "teams-table".into(),
            caption: format!(
                "Cost per team, largest first (budgets: {})",
                report.tenants.limits
            ),
            headers: vec![
                "team",
                "GPU-hours",
                "direct",
                "shared",
                "total",
                "week before",
                "change",
                "budget",
                "against budget",
            ],
            rows,
        }),
    ]
}

fn idle(report: &WeeklyReport) -> Vec<Block> {
    let currency = report.currency.as_str();
    let mut classes: Vec<_> = report.utilization.idle.iter().collect();
    classes.sort_by(|a, b| b.cost.total_cmp(&a.cost).then(a.class.cmp(&b.class)));
    let intent = |class: &str| {
        if class.starts_with("reserved:") {
            "intentional"
        } else if class == "allocated_idle" || class == "unexplained" {
            "waste"
        } else {
            "fault"
        }
    };
    vec![
        Block::Heading("idle", "Idle GPU time".into()),
        Block::Chart(Chart {
            title: "Idle cost by class".into(),
            legend: vec![("cost", COLOURS[0])],
            bars: by_size(
                classes
                    .iter()
                    .map(|i| Bar {
                        label: i.class.clone(),
                        values: vec![i.cost],
                    })
                    .collect(),
            ),
            unit: Unit::Money,
            currency: currency.to_string(),
        }),
        Block::Table(Table {
            id: "idle-table".into(),
            caption: "Idle by class, largest first".into(),
            headers: vec!["class", "kind", "GPU-hours", "cost"],
            rows: classes
                .iter()
                .map(|i| {
                    vec![
                        text(&i.class),
                        text(intent(&i.class)),
                        number(gpu_hours(i.gpu_hours)),
                        number(amount(i.cost, currency)),
                    ]
                })
                .collect(),
        }),
    ]
}

fn capacity(report: &WeeklyReport) -> Vec<Block> {
    let c = &report.capacity;
    let mut groups: Vec<_> = c.by_model.iter().collect();
    groups.sort_by(|a, b| {
        b.gpu_hours
            .total_cmp(&a.gpu_hours)
            .then((&a.gpu_model, &a.flavor).cmp(&(&b.gpu_model, &b.flavor)))
    });
    let label = |model: &str, flavor: &str| format!("{model} ({flavor})");
    let mut rows: Vec<Vec<Cell>> = groups
        .iter()
        .map(|g| {
            vec![
                text(label(&g.gpu_model, &g.flavor)),
                number(grouped(g.gpus as f64, 0)),
                number(gpu_hours(g.gpu_hours)),
                number(gpu_hours(g.available_gpu_hours)),
                number(gpu_hours(g.fault_gpu_hours)),
                number(gpu_hours(g.maintenance_gpu_hours)),
            ]
        })
        .collect();
    rows.push(vec![
        text("all"),
        number(grouped(c.total_gpus as f64, 0)),
        number(gpu_hours(c.gpu_hours)),
        number(gpu_hours(c.available_gpu_hours)),
        number(gpu_hours(c.fault_gpu_hours)),
        number(gpu_hours(c.maintenance_gpu_hours)),
    ]);
    vec![
        Block::Heading("capacity", "Capacity".into()),
        Block::Chart(Chart {
            title: "GPU-hours by model and flavor".into(),
            legend: vec![
                ("available", COLOURS[0]),
                ("fault", COLOURS[2]),
                ("maintenance", COLOURS[3]),
            ],
            bars: groups
                .iter()
                .map(|g| Bar {
                    label: label(&g.gpu_model, &g.flavor),
                    values: vec![
                        g.available_gpu_hours,
                        g.fault_gpu_hours,
                        g.maintenance_gpu_hours,
                    ],
                })
                .collect(),
            unit: Unit::GpuHours,
            currency: report.currency.clone(),
        }),
        Block::Table(Table {
            id: "capacity-table".into(),
            caption: "GPU-hours of the week by model and flavor, largest first".into(),
            headers: vec![
                "model (flavor)",
                "GPUs",
                "GPU-hours",
                "available",
                "fault",
                "maintenance",
            ],
            rows,
        }),
    ]
}

fn inference(report: &WeeklyReport) -> Vec<Block> {
    let currency = report.currency.as_str();
    let per_1m = |f: &Option<ModelFigures>| f.as_ref().and_then(|f| f.cost_per_1m_slo_met_tokens);
    let cost = |f: &Option<ModelFigures>| f.as_ref().and_then(|f| f.cost).unwrap_or(0.0);
    let mut models: Vec<_> = report.inference.models.iter().collect();
    models.sort_by(|a, b| {
        cost(&b.week)
            .total_cmp(&cost(&a.week))
            .then(a.model.cmp(&b.model))
    });
    let money = |x: Option<f64>| number(x.map_or_else(String::new, |x| amount(x, currency)));
    vec![
        Block::Heading("inference", "Inference".into()),
        Block::Chart(Chart {
            title: "Cost per 1M SLO-met tokens, this week and the week before".into(),
            legend: vec![("this week", COLOURS[0]), ("week before", COLOURS[1])],
            bars: models
                .iter()
                .flat_map(|m| {
                    [
                        Bar {
                            label: m.model.clone(),
                            values: vec![per_1m(&m.week).unwrap_or(0.0), 0.0],
                        },
                        Bar {
                            label: format!("{} (week before)", m.model),
                            values: vec![0.0, per_1m(&m.previous_week).unwrap_or(0.0)],
                        },
                    ]
                })
                .collect(),
            unit: Unit::Money,
            currency: currency.to_string(),
        }),
        Block::Table(Table {
            id: "inference-table".into(),
            caption: "Models by cost, largest first".into(),
            headers: vec![
                "model",
                "requests",
                "SLO met",
                "cost",
                "per 1M SLO-met tokens",
                "week before",
                "cost of missed SLOs",
            ],
            rows: models
                .iter()
                .map(|m| {
                    let w = m.week.as_ref();
                    vec![
                        text(&m.model),
                        number(w.map_or_else(String::new, |w| grouped(w.requests as f64, 0))),
                        number(w.filter(|w| w.requests > 0).map_or_else(String::new, |w| {
                            percent(w.slo_met_requests as f64 / w.requests as f64)
                        })),
                        money(w.and_then(|w| w.cost)),
                        money(per_1m(&m.week)),
                        money(per_1m(&m.previous_week)),
                        money(w.and_then(|w| w.slo_missed_cost)),
                    ]
                })
                .collect(),
        }),
    ]
}

/// A section's figures as label and value pairs, in a two-column table.
fn pairs(id: &str, caption: &str, figures: Vec<(&str, String)>) -> Block {
    Block::Table(Table {
        id: id.into(),
        caption: caption.into(),
        headers: vec!["figure", "value"],
        rows: figures
            .into_iter()
            .map(|(label, value)| vec![text(label), number(value)])
            .collect(),
    })
}

fn operations(report: &WeeklyReport) -> Vec<Block> {
    let currency = report.currency.as_str();
    let money = |x: f64| amount(x, currency);
    let maybe = |x: Option<f64>, f: &dyn Fn(f64) -> String| x.map_or_else(String::new, f);
    let u = &report.utilization;
    let t = &report.training;
    let q = &report.queue;
    let o = &report.optimization;
    let mut workloads: Vec<_> = report.tenants.unattributed.workloads.iter().collect();
    workloads.sort_by(|a, b| b.cost.total_cmp(&a.cost));
    vec![
        Block::Heading("utilization", "Utilization".into()),
        pairs(
            "utilization-table",
            "Allocated GPU time and what it did",
            vec![
                ("allocated GPU-hours", gpu_hours(u.allocated_gpu_hours)),
                ("busy GPU-hours", gpu_hours(u.busy_gpu_hours)),
                (
                    "busy share of allocated cost",
                    maybe(u.busy_cost_share, &percent),
                ),
                ("SM active (allocated time)", maybe(u.sm_active, &percent)),
                ("framebuffer used", maybe(u.memory_used_share, &percent)),
                (
                    "power, average",
                    maybe(u.power_w_avg, &|w| format!("{} W", grouped(w, 0))),
                ),
                ("energy", format!("{} kWh", grouped(u.energy_kwh, 1))),
                ("cost of all GPU time", money(u.gpu_cost)),
            ],
        ),
        Block::Heading("optimization", "Optimization".into()),
        pairs(
            "optimization-table",
            "Waste (allocated idle + unexplained) against the week before",
            vec![
                ("waste", money(o.waste_cost)),
                ("waste, week before", money(o.previous_waste_cost)),
                ("waste GPU-hours", gpu_hours(o.waste_gpu_hours)),
                (
                    "waste GPU-hours, week before",
                    gpu_hours(o.previous_waste_gpu_hours),
                ),
                (
                    "since the week before",
                    if o.reclaimed_cost >= 0.0 {
                        format!("{} less waste", money(o.reclaimed_cost))
                    } else {
                        format!("{} more waste", money(-o.reclaimed_cost))
                    },
                ),
                ("spot net savings", maybe(o.spot_net_savings, &money)),
                ("SLO-met share", maybe(o.slo_met_share, &percent)),
                (
                    "SLO-met share, week before",
                    maybe(o.previous_slo_met_share, &percent),
                ),
                ("cost of missed SLOs", maybe(o.slo_missed_cost, &money)),
            ],
        ),
        Block::Heading("training", "Training".into()),
        pairs(
            "training-table",
            "Training workloads of the week",
            vec![
                ("workloads", grouped(t.workloads as f64, 0)),
                (
                    "runs (succeeded / failed / preempted)",
                    format!(
                        "{} ({} / {} / {})",
                        t.runs, t.succeeded, t.failed, t.preempted
                    ),
                ),
                ("success rate", maybe(t.success_rate, &percent)),
                ("GPU-hours", gpu_hours(t.gpu_hours)),
                ("effective GPU-hours", gpu_hours(t.effective_gpu_hours)),
                ("cost", money(t.cost)),
                ("lost to failures", money(t.failure_loss)),
                ("recompute cost", money(t.recompute_cost)),
            ],
        ),
        Block::Heading("queue", "Queue".into()),
        pairs(
            "queue-table",
            "Admission of queued workloads",
            vec![
                ("queued", grouped(q.queued as f64, 0)),
                ("admitted", grouped(q.admitted as f64, 0)),
                ("wait, median", maybe(q.wait_p50_seconds, &duration)),
                (
                    "wait, 95th percentile",
                    maybe(q.wait_p95_seconds, &duration),
                ),
                ("rejections", grouped(q.rejections as f64, 0)),
                ("preemptions", grouped(q.preemptions as f64, 0)),
                ("evictions", grouped(q.evictions as f64, 0)),
                (
                    "admissions that borrowed quota",
                    grouped(q.borrowed_admissions as f64, 0),
                ),
            ],
        ),
        Block::Heading("unattributed", "Unattributed".into()),
        Block::Table(Table {
            id: "unattributed-table".into(),
            caption: format!(
                "Workloads without an allowed team, largest first ({} in all, shared costs included)",
                money(report.tenants.unattributed.total_cost)
            ),
            headers: vec!["namespace / workload", "GPU-hours", "cost"],
            rows: workloads
                .iter()
                .map(|w| {
                    vec![
                        text(format!(
                            "{} / {}",
                            w.namespace.as_deref().unwrap_or("-"),
                            w.workload.as_deref().unwrap_or("-")
                        )),
                        number(gpu_hours(w.gpu_hours)),
                        number(money(w.cost)),
                    ]
                })
                .collect(),
        }),
    ]
}

/// Every figure of the JSON, section by section, in the report's units.
fn all_figures(report: &WeeklyReport) -> Block {
    let tables = sections(report)
        .into_iter()
        .map(|(section, figures)| {
            Block::Table(Table {
                id: format!("figures-{section}"),
                caption: title(section),
                headers: vec!["item", "metric", "value"],
                rows: figures
                    .into_iter()
                    .map(|f| {
                        let value = Unit::of(&f.metric).value(&f.value, &report.currency);
                        vec![text(f.item), text(f.metric), number(value)]
                    })
                    .collect(),
            })
        })
        .collect();
    Block::Details("All figures".into(), tables)
}

pub(super) fn document(report: &WeeklyReport) -> Vec<Block> {
    let currency = report.currency.as_str();
    let money = |x: f64| amount(x, currency);
    let mut blocks: Vec<Block> = report
        .warnings
        .iter()
        .cloned()
        .map(Block::Warning)
        .collect();
    blocks.push(Block::Paragraph("summary", summary(report)));
    let c = &report.capacity;
    let u = &report.utilization;
    blocks.push(Block::Tiles(vec![
        ("cost".into(), money(report.summary.total_cost)),
        (
            "against the week before".into(),
            change(report.summary.change, report.summary.change_share, currency),
        ),
        (
            "GPU-hours available".into(),
            gpu_hours(c.available_gpu_hours),
        ),
        (
            "allocated GPU-hours".into(),
            gpu_hours(u.allocated_gpu_hours),
        ),
        (
            "busy share of allocated cost".into(),
            u.busy_cost_share.map_or_else(|| "–".into(), percent),
        ),
        (
            "reclaimable".into(),
            money(report.recommendations.total_cost),
        ),
        ("accounted".into(), money(report.balance.accounted)),
    ]));
    blocks.push(Block::Heading("actions", "Recommended actions".into()));
    blocks.push(Block::Actions(actions(report)));
    blocks.extend(teams(report));
    blocks.extend(idle(report));
    blocks.extend(capacity(report));
    blocks.extend(inference(report));
    blocks.extend(operations(report));
    blocks.push(Block::Heading("balance", "Ledger balance".into()));
    blocks.push(Block::Paragraph("balance-line", balance_line(report)));
    blocks.push(all_figures(report));
    blocks
}
