//! The report as Markdown: the same blocks as the HTML page, without the charts (their figures
//! are in the tables beside them).

use std::fmt::Write as _;

use super::document::{Block, Table, document};
use crate::model::WeeklyReport;

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

pub(super) fn markdown(report: &WeeklyReport) -> String {
    let mut out = format!(
        "# GPU weekly report {} ({} to {}, UTC)\n\nAmounts in {}.\n\n",
        report.week, report.from, report.to, report.currency
    );
    for block in document(report) {
        write_block(&mut out, &block);
    }
    out
}

fn write_block(out: &mut String, block: &Block) {
    match block {
        Block::Warning(text) => {
            let _ = writeln!(out, "> **Warning:** {text}\n");
        }
        Block::Paragraph(_, text) => {
            let _ = writeln!(out, "{text}\n");
        }
        Block::Heading(_, text) => {
            let _ = writeln!(out, "## {text}\n");
        }
        Block::Tiles(tiles) => {
            for (label, value) in tiles {
                let _ = writeln!(out, "- {label}: **{value}**");
            }
            out.push('\n');
        }
        Block::Actions(actions) => {
            for (i, a) in actions.items.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "{}. **{}**: {} — **{}** ({})",
                    i + 1,
                    a.owner,
                    a.action,
                    a.cost,
                    a.detail
                );
            }
            let _ = writeln!(
                out,
                "\n{}\n\nAll of them: `{}`\n",
                actions.claim, actions.query
            );
        }
        Block::Table(table) => write_table(out, table),
        // The chart's figures are in the table beside it.
        Block::Chart(_) => {}
        Block::Details(summary, blocks) => {
            let _ = writeln!(out, "## {summary}\n");
            for block in blocks {
                write_block(out, block);
            }
        }
    }
}

fn write_table(out: &mut String, table: &Table) {
    let _ = writeln!(out, "**{}**\n", table.caption);
    let _ = writeln!(out, "| {} |", table.headers.join(" | "));
    let _ = writeln!(
        out,
        "|{}|",
        table
            .headers
            .iter()
            .enumerate()
            .map(|(i, _)| {
                if table
                    .rows
                    .iter()
                    .any(|r| r.get(i).is_some_and(|c| c.numeric))
                {
                    "---:"
                } else {
                    "---"
                }
            })
            .collect::<Vec<_>>()
            .join("|")
    );
    for row in &table.rows {
        let cells: Vec<String> = row.iter().map(|c| cell(&c.text)).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out.push('\n');
}
