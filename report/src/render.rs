//! The report's formats: JSON (the versioned schema), CSV (one file, a `section` column),
//! Markdown, and a self-contained HTML page with inline SVG charts (no script, no CDN, print CSS).
//! CSV, Markdown and HTML print every figure exactly as the JSON has it.

use std::fmt::Write as _;

use serde_json::Value;

use crate::model::WeeklyReport;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Csv,
    Html,
    Markdown,
}

impl Format {
    /// What the scheduled export writes.
    pub const EXPORTED: [Format; 3] = [Format::Json, Format::Csv, Format::Html];

    pub fn extension(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Csv => "csv",
            Format::Html => "html",
            Format::Markdown => "md",
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Json => "application/json",
            Format::Csv => "text/csv; charset=utf-8",
            Format::Html => "text/html; charset=utf-8",
            Format::Markdown => "text/markdown; charset=utf-8",
        }
    }

    pub fn render(self, report: &WeeklyReport) -> Vec<u8> {
        match self {
            Format::Json => json(report),
            Format::Csv => csv(report),
            Format::Html => html(report).into_bytes(),
            Format::Markdown => markdown(report).into_bytes(),
        }
    }
}

const SECTIONS: [&str; 8] = [
    "capacity",
    "utilization",
    "queue",
    "training",
    "inference",
    "tenants",
    "optimization",
    "balance",
];

fn json(report: &WeeklyReport) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(report).expect("the report serializes");
    out.push(b'\n');
    out
}

/// One figure of a section: the row it belongs to (`""` for the section's own figures; a team,
/// a model, an idle class, …), its name, and its value as the JSON prints it.
struct Figure {
    item: String,
    metric: String,
    value: String,
}

fn text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The figures of one section, in a stable order.
fn figures(section: &Value) -> Vec<Figure> {
    fn walk(item: &str, prefix: &str, value: &Value, out: &mut Vec<Figure>) {
        let Value::Object(fields) = value else {
            return;
        };
        for (name, value) in fields {
            match value {
                Value::Object(_) => walk(item, &format!("{prefix}{name}."), value, out),
                Value::Array(elements) => {
                    for element in elements {
                        // An element is named by its text fields (a team, a model and flavor, …).
                        let label: Vec<String> = match element {
                            Value::Object(f) => f
                                .values()
                                .filter_map(|v| v.as_str().map(String::from))
                                .collect(),
                            _ => vec![],
                        };
                        let label = label.join(" / ");
                        let numbers = match element {
                            Value::Object(f) => Value::Object(
                                f.iter()
                                    .filter(|(_, v)| !v.is_string())
                                    .map(|(k, v)| (k.clone(), v.clone()))
                                    .collect(),
                            ),
                            other => other.clone(),
                        };
                        let item = if item.is_empty() {
                            label
                        } else {
                            format!("{item} / {label}")
                        };
                        walk(&item, &format!("{prefix}{name}."), &numbers, out);
                    }
                }
                scalar => out.push(Figure {
                    item: item.to_string(),
                    metric: format!("{prefix}{name}"),
                    value: text(scalar),
                }),
            }
        }
    }
    let mut out = Vec::new();
    walk("", "", section, &mut out);
    out
}

fn sections(report: &WeeklyReport) -> Vec<(&'static str, Vec<Figure>)> {
    let value = serde_json::to_value(report).expect("the report serializes");
    SECTIONS
        .iter()
        .map(|name| (*name, figures(&value[*name])))
        .collect()
}

fn csv(report: &WeeklyReport) -> Vec<u8> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    writer
        .write_record(["week", "section", "item", "metric", "value"])
        .expect("in memory");
    for (section, figures) in sections(report) {
        for f in figures {
            writer
                .write_record([&report.week, section, &f.item, &f.metric, &f.value])
                .expect("in memory");
        }
    }
    writer.into_inner().expect("in memory")
}

fn title(section: &str) -> String {
    let mut chars = section.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

fn markdown(report: &WeeklyReport) -> String {
    let mut out = format!(
        "# GPU weekly report {} ({} to {}, UTC)\n\n",
        report.week, report.from, report.to
    );
    for warning in &report.warnings {
        let _ = writeln!(out, "> **Warning:** {warning}\n");
    }
    let _ = writeln!(out, "{}", balance_line(report));
    for (section, figures) in sections(report) {
        let _ = write!(
            out,
            "\n## {}\n\n| item | metric | value |\n|---|---|---|\n",
            title(section)
        );
        for f in figures {
            let _ = writeln!(
                out,
                "| {} | {} | {} |",
                f.item.replace('|', "\\|"),
                f.metric,
                f.value.replace('|', "\\|")
            );
        }
    }
    out
}

/// A figure as the JSON prints it (`0.0`, not Rust's `0`).
fn num(x: f64) -> String {
    Value::from(x).to_string()
}

/// The ledger balance line every format shows.
fn balance_line(report: &WeeklyReport) -> String {
    let b = &report.balance;
    format!(
        "Ledger balance: billed {} + manual {} + rate card {} = expected {}; accounted {}; difference {} ({}).",
        num(b.billed),
        num(b.manual),
        num(b.rate_card),
        num(b.expected),
        num(b.accounted),
        num(b.difference),
        if b.balanced {
            "balanced"
        } else {
            "DOES NOT BALANCE"
        }
    )
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One bar of a chart: its label and one value per entry of the chart's legend, which gives the
/// segment its colour (so a bar and its legend cannot disagree).
struct Bar {
    label: String,
    values: Vec<f64>,
}

const COLOURS: [&str; 4] = ["#2b6cb0", "#dd6b20", "#c53030", "#718096"];

/// A horizontal stacked bar chart as inline SVG, each bar labelled with its total.
/// Bars largest first, as a reader compares them (the tables after keep the JSON's order).
fn by_size(mut bars: Vec<Bar>) -> Vec<Bar> {
    let total = |b: &Bar| b.values.iter().map(|v| v.max(0.0)).sum::<f64>();
    bars.sort_by(|a, b| total(b).total_cmp(&total(a)));
    bars
}

/// `x` with thousands separators and `places` decimals: `7,966.47`.
fn grouped(x: f64, places: usize) -> String {
    let text = format!("{:.places$}", x.abs());
    let (whole, fraction) = text
        .split_once('.')
        .map_or((text.as_str(), None), |(w, f)| (w, Some(f)));
    let mut out = String::new();
    for (i, digit) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    if let Some(fraction) = fraction {
        out.push('.');
        out.push_str(fraction);
    }
    // No "-0.00": a negative that rounds to zero is zero.
    if x < 0.0 && out.chars().any(|c| c.is_ascii_digit() && c != '0') {
        out.insert(0, '-');
    }
    out
}

/// An amount as a person reads it: `$7,966.47` (other currencies by their code: `7,966.47 EUR`).
fn amount(x: f64, currency: &str) -> String {
    let figure = grouped(x, 2);
    match (currency, figure.strip_prefix('-')) {
        ("USD", Some(positive)) => format!("-${positive}"),
        ("USD", None) => format!("${figure}"),
        _ => format!("{figure} {currency}"),
    }
}

/// `legend`: each segment's name and the colour its bars are drawn in.
fn bar_chart(title: &str, legend: &[(&str, &str)], bars: &[Bar]) -> String {
    let width = 640.0;
    let label_width = 220.0;
    let plot = width - label_width - 90.0;
    let row = 24.0;
    let height = 30.0 + row * bars.len().max(1) as f64 + 24.0;
    let max = bars
        .iter()
        .map(|b| b.values.iter().map(|v| v.max(0.0)).sum::<f64>())
        .fold(0.0, f64::max);
    let mut svg = format!(
        "<figure class=\"chart\"><figcaption>{}</figcaption>\
         <svg role=\"img\" aria-label=\"{}\" viewBox=\"0 0 {width} {height}\" width=\"{width}\" height=\"{height}\">",
        escape(title),
        escape(title)
    );
    for (i, bar) in bars.iter().enumerate() {
        let y = 10.0 + row * i as f64;
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            label_width - 6.0,
            y + 15.0,
            escape(&bar.label)
        );
        let mut x = label_width;
        let mut total = 0.0;
        for (value, (_, colour)) in bar.values.iter().zip(legend) {
            let w = if max > 0.0 {
                value.max(0.0) / max * plot
            } else {
                0.0
            };
            let _ = write!(
                svg,
                "<rect x=\"{x:.1}\" y=\"{y}\" width=\"{w:.1}\" height=\"18\" fill=\"{colour}\"/>"
            );
            x += w;
            total += value;
        }
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{}\">{}</text>",
            x + 4.0,
            y + 15.0,
            grouped(total, 2)
        );
    }
    let y = height - 8.0;
    let mut x = label_width;
    for (name, colour) in legend {
        let _ = write!(
            svg,
            "<rect x=\"{x}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{colour}\"/><text x=\"{}\" y=\"{y}\">{}</text>",
            y - 9.0,
            x + 14.0,
            escape(name)
        );
        x += 24.0 + 8.0 * name.len() as f64;
    }
    svg.push_str("</svg></figure>\n");
    svg
}

fn html(report: &WeeklyReport) -> String {
    let b = &report.balance;
    let c = &report.capacity;
    let u = &report.utilization;
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>GPU weekly report {week}</title>\
         <style>\
         body{{font-family:system-ui,sans-serif;margin:2em;color:#1a202c;max-width:60em}}\
         h1{{font-size:1.6em}} h2{{border-bottom:1px solid #cbd5e0;margin-top:1.6em}}\
         .totals{{display:flex;flex-wrap:wrap;gap:1em}}\
         .total{{border:1px solid #cbd5e0;border-radius:6px;padding:.6em 1em}}\
         .total b{{display:block;font-size:1.4em}}\
         table{{border-collapse:collapse;font-size:.9em}} td,th{{border:1px solid #e2e8f0;padding:.2em .6em;text-align:left}}\
         td.n{{text-align:right;font-variant-numeric:tabular-nums}}\
         figure.chart{{margin:1em 0}} figcaption{{font-weight:600}} svg text{{font-size:12px}}\
         .unbalanced{{color:#c53030;font-weight:700}}\
         .warning{{border:1px solid #c53030;background:#fff5f5;border-radius:6px;padding:.6em 1em}}\
         @media print{{body{{margin:0;max-width:none}} figure.chart,table,.totals{{break-inside:avoid}} h2{{break-after:avoid}}}}\
         </style></head><body>\n\
         <h1>GPU weekly report {week}</h1>\n<p>{from} to {to} (UTC, ISO week), amounts in {currency}.</p>\n",
        week = escape(&report.week),
        from = report.from,
        to = report.to,
        currency = escape(&report.currency),
    );
    for warning in &report.warnings {
        let _ = writeln!(
            out,
            "<p class=\"warning\" role=\"alert\"><b>Warning:</b> {}</p>",
            escape(warning)
        );
    }
    let total = |label: &str, value: String| {
        format!(
            "<div class=\"total\"><span>{}</span><b>{}</b></div>",
            escape(label),
            escape(&value)
        )
    };
    out.push_str("<section class=\"totals\" id=\"totals\">");
    let money = |x: f64| amount(x, &report.currency);
    out.push_str(&total("GPUs", grouped(c.total_gpus as f64, 0)));
    out.push_str(&total(
        "available GPUs",
        grouped(c.available_gpus as f64, 0),
    ));
    out.push_str(&total(
        "allocated GPU-hours",
        grouped(u.allocated_gpu_hours, 1),
    ));
    out.push_str(&total("GPU cost", money(u.gpu_cost)));
    out.push_str(&total("accounted", money(b.accounted)));
    out.push_str(&total("balance difference", money(b.difference)));
    out.push_str("</section>\n");
    let _ = writeln!(
        out,
        "<p id=\"balance\" class=\"{}\">{}</p>",
        if b.balanced { "balanced" } else { "unbalanced" },
        escape(&balance_line(report))
    );

    out.push_str("<h2>Charts</h2>\n");
    out.push_str(&bar_chart(
        "Idle cost by class",
        &[("cost", COLOURS[0])],
        &by_size(
            u.idle
                .iter()
                .map(|i| Bar {
                    label: i.class.clone(),
                    values: vec![i.cost],
                })
                .collect(),
        ),
    ));
    out.push_str(&bar_chart(
        "Cost per team",
        &[("direct", COLOURS[0]), ("shared", COLOURS[1])],
        &by_size(
            report
                .tenants
                .teams
                .iter()
                .map(|t| Bar {
                    label: t.team.clone(),
                    values: vec![t.direct_cost, t.shared_cost],
                })
                .collect(),
        ),
    ));
    out.push_str(&bar_chart(
        "GPUs by model and flavor",
        &[
            ("available", COLOURS[0]),
            ("faulty", COLOURS[2]),
            ("maintenance", COLOURS[3]),
        ],
        &by_size(
            c.by_model
                .iter()
                .map(|g| Bar {
                    label: format!("{} ({})", g.gpu_model, g.flavor),
                    values: vec![
                        g.available_gpus as f64,
                        g.faulty_gpus as f64,
                        g.maintenance_gpus as f64,
                    ],
                })
                .collect(),
        ),
    ));
    let cost = |f: &Option<crate::model::ModelFigures>| {
        f.as_ref()
            .and_then(|f| f.cost_per_1m_slo_met_tokens)
            .unwrap_or(0.0)
    };
    // The costliest model first, each beside its week before.
    let mut models: Vec<_> = report.inference.models.iter().collect();
    models.sort_by(|a, b| cost(&b.week).total_cmp(&cost(&a.week)));
    out.push_str(&bar_chart(
        "Cost per 1M SLO-met tokens, this week and the week before",
        &[("this week", COLOURS[0]), ("previous week", COLOURS[1])],
        &models
            .into_iter()
            .flat_map(|m| {
                [
                    Bar {
                        label: m.model.clone(),
                        values: vec![cost(&m.week), 0.0],
                    },
                    Bar {
                        label: format!("{} (previous)", m.model),
                        values: vec![0.0, cost(&m.previous_week)],
                    },
                ]
            })
            .collect::<Vec<_>>(),
    ));

    for (section, figures) in sections(report) {
        let _ = write!(
            out,
            "<h2 id=\"{section}\">{}</h2>\n<table><thead><tr><th>item</th><th>metric</th><th>value</th></tr></thead><tbody>\n",
            title(section)
        );
        for f in figures {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td></tr>",
                escape(&f.item),
                escape(&f.metric),
                escape(&f.value)
            );
        }
        out.push_str("</tbody></table>\n");
    }
    out.push_str("</body></html>\n");
    out
}

#[cfg(test)]
mod tests;
