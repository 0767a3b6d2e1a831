//! The report's formats: JSON (the versioned schema) and CSV (one file, a `section` column)
//! carry every figure exactly; Markdown and a self-contained HTML page (`document.rs`, printed
//! by `markdown.rs` and `html.rs`) tell the week to people, in `numbers.rs`'s formats.

mod document;
mod html;
mod markdown;
mod numbers;

use serde_json::Value;

use crate::model::WeeklyReport;
use html::html;
use markdown::markdown;

/// The chart colours; a legend entry and its bars share one.
const COLOURS: [&str; 4] = ["#2b6cb0", "#dd6b20", "#c53030", "#718096"];

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

const SECTIONS: [&str; 10] = [
    "summary",
    "recommendations",
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
    value: Value,
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
                    value: scalar.clone(),
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
                .write_record([&report.week, section, &f.item, &f.metric, &text(&f.value)])
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

#[cfg(test)]
mod tests;
