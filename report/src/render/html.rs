//! The report as a self-contained HTML page: inline SVG charts, no script, no CDN, print CSS.

use std::fmt::Write as _;

use super::document::{Block, Chart, Table, document};
use crate::model::WeeklyReport;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#1a202c;max-width:60em;line-height:1.45}\
h1{font-size:1.6em} h2{border-bottom:1px solid #cbd5e0;margin-top:1.6em}\
#summary{font-size:1.1em}\
.totals{display:flex;flex-wrap:wrap;gap:1em}\
.total{border:1px solid #cbd5e0;border-radius:6px;padding:.6em 1em}\
.total b{display:block;font-size:1.4em}\
table{border-collapse:collapse;font-size:.9em;margin:.6em 0} caption{text-align:left;font-weight:600;padding:.3em 0}\
td,th{border:1px solid #e2e8f0;padding:.2em .6em;text-align:left}\
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}\
ol.actions li{margin:.4em 0} .owner{font-weight:700} .detail{color:#4a5568}\
code{font-size:.85em;background:#edf2f7;padding:.1em .3em;border-radius:3px}\
figure.chart{margin:1em 0} figcaption{font-weight:600} figure.chart svg{max-width:100%;height:auto} svg text{font-size:12px}\
.unbalanced{color:#c53030;font-weight:700}\
.warning{border:1px solid #c53030;background:#fff5f5;border-radius:6px;padding:.6em 1em}\
@media print{body{margin:0;max-width:none} details{display:block} figure.chart,table,.totals{break-inside:avoid} h2{break-after:avoid}}";

pub(super) fn html(report: &WeeklyReport) -> String {
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>GPU weekly report {week}</title><style>{STYLE}</style></head><body>\n\
         <h1>GPU weekly report {week}</h1>\n<p>{from} to {to} (UTC, ISO week), amounts in {currency}.</p>\n",
        week = escape(&report.week),
        from = report.from,
        to = report.to,
        currency = escape(&report.currency),
    );
    for block in document(report) {
        write_block(&mut out, &block, report.balance.balanced);
    }
    out.push_str("</body></html>\n");
    out
}

fn write_block(out: &mut String, block: &Block, balanced: bool) {
    match block {
        Block::Warning(text) => {
            let _ = writeln!(
                out,
                "<p class=\"warning\" role=\"alert\"><b>Warning:</b> {}</p>",
                escape(text)
            );
        }
        Block::Paragraph(id, text) => {
            let class = if *id == "balance-line" && !balanced {
                " class=\"unbalanced\""
            } else {
                ""
            };
            let _ = writeln!(out, "<p id=\"{id}\"{class}>{}</p>", escape(text));
        }
        Block::Heading(id, text) => {
            let _ = writeln!(out, "<h2 id=\"{id}\">{}</h2>", escape(text));
        }
        Block::Tiles(tiles) => {
            out.push_str("<section class=\"totals\" id=\"totals\">");
            for (label, value) in tiles {
                let _ = write!(
                    out,
                    "<div class=\"total\"><span>{}</span><b>{}</b></div>",
                    escape(label),
                    escape(value)
                );
            }
            out.push_str("</section>\n");
        }
        Block::Actions(actions) => {
            out.push_str("<ol class=\"actions\" id=\"recommendations\">\n");
            for a in &actions.items {
                let _ = writeln!(
                    out,
                    "<li><span class=\"owner\">{}</span>: {} — <b class=\"money\">{}</b> <span class=\"detail\">({})</span></li>",
                    escape(&a.owner),
                    escape(&a.action),
                    escape(&a.cost),
                    escape(&a.detail)
                );
            }
            let _ = writeln!(
                out,
                "</ol>\n<p id=\"recommendations-total\">{}</p>\n<p class=\"detail\">All of them: <code>{}</code></p>",
                escape(&actions.claim),
                escape(&actions.query)
            );
        }
        Block::Table(table) => write_table(out, table),
        Block::Chart(chart) => out.push_str(&bar_chart(chart)),
        Block::Details(summary, blocks) => {
            let _ = writeln!(
                out,
                "<details id=\"all-figures\"><summary>{}</summary>",
                escape(summary)
            );
            for block in blocks {
                write_block(out, block, balanced);
            }
            out.push_str("</details>\n");
        }
    }
}

fn write_table(out: &mut String, table: &Table) {
    let numeric: Vec<bool> = (0..table.headers.len())
        .map(|i| {
            table
                .rows
                .iter()
                .any(|r| r.get(i).is_some_and(|c| c.numeric))
        })
        .collect();
    let _ = write!(
        out,
        "<table id=\"{}\"><caption>{}</caption><thead><tr>",
        table.id,
        escape(&table.caption)
    );
    for (header, numeric) in table.headers.iter().zip(&numeric) {
        let class = if *numeric { " class=\"n\"" } else { "" };
        let _ = write!(out, "<th{class}>{}</th>", escape(header));
    }
    out.push_str("</tr></thead><tbody>\n");
    for row in &table.rows {
        out.push_str("<tr>");
        for cell in row {
            let class = if cell.numeric { " class=\"n\"" } else { "" };
            let _ = write!(out, "<td{class}>{}</td>", escape(&cell.text));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
}

/// The characters of a bar's label that fit its 214 px at 12 px.
const LABEL_CHARS: usize = 32;

/// A horizontal stacked bar chart as inline SVG, each bar labelled with its total in the chart's
/// unit.
fn bar_chart(chart: &Chart) -> String {
    let width = 640.0;
    let label_width = 220.0;
    let plot = width - label_width - 100.0;
    let row = 24.0;
    let height = 30.0 + row * chart.bars.len().max(1) as f64 + 24.0;
    let max = chart
        .bars
        .iter()
        .map(|b| b.values.iter().map(|v| v.max(0.0)).sum::<f64>())
        .fold(0.0, f64::max);
    let title = escape(&chart.title);
    let mut svg = format!(
        "<figure class=\"chart\"><figcaption>{title}</figcaption>\
         <svg role=\"img\" aria-label=\"{title}\" viewBox=\"0 0 {width} {height}\" width=\"{width}\" height=\"{height}\">"
    );
    for (i, bar) in chart.bars.iter().enumerate() {
        let y = 10.0 + row * i as f64;
        // A label longer than its room is cut, its whole text in the element's title.
        let shown: String = if bar.label.chars().count() > LABEL_CHARS {
            bar.label
                .chars()
                .take(LABEL_CHARS - 1)
                .chain(['…'])
                .collect()
        } else {
            bar.label.clone()
        };
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\"><title>{}</title>{}</text>",
            label_width - 6.0,
            y + 15.0,
            escape(&bar.label),
            escape(&shown)
        );
        let mut x = label_width;
        let mut total = 0.0;
        for (value, (_, colour)) in bar.values.iter().zip(&chart.legend) {
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
            escape(&chart.unit.format(total, &chart.currency))
        );
    }
    let y = height - 8.0;
    let mut x = label_width;
    for (name, colour) in &chart.legend {
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
