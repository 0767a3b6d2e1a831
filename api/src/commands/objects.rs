//! `gpuledger apply | get | delete`: declared catalog objects, written like Kubernetes manifests.
//! Reading files and printing is here; what a valid object is lives in `gpuledger_ledger::objects`.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::error::Error;
use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

use gpuledger_lake::Lake;
use gpuledger_lake::catalog::PutOutcome;
use gpuledger_ledger::objects::{Object, ObjectKind, parse_document, split_list};
use serde::Deserialize;
use serde_json::Value;

use crate::EXIT_FAILED;
use crate::cli::{ApplyArgs, DeleteArgs, GetArgs, ObjectFormat};

/// Where a document sits: `objects.yaml: document 2` or `nodes.json: document 1 item 3`.
type Location = String;

pub async fn apply(lake: &Lake, args: ApplyArgs) -> Result<ExitCode, Box<dyn Error>> {
    let mut inputs = Vec::new();
    for path in &args.paths {
        inputs.push(read_input(path)?);
    }
    let objects = match validate(&inputs) {
        Ok(objects) => objects,
        Err(errors) => {
            for error in &errors {
                eprintln!("{error}");
            }
            eprintln!(
                "error: {}; nothing was applied",
                plural(errors.len(), "error")
            );
            return Ok(ExitCode::from(EXIT_FAILED));
        }
    };
    if objects.is_empty() {
        return Err("no objects to apply".into());
    }
    for (object, outcome) in objects.iter().zip(store(lake, &objects).await?) {
        println!("{}/{} {outcome}", object.kind, object.name);
    }
    Ok(ExitCode::SUCCESS)
}

/// Validates every document of the inputs (`(origin, text)`): the objects, or every error with
/// where it sits (an object declared twice is one).
pub fn validate(inputs: &[(String, String)]) -> Result<Vec<Object>, Vec<String>> {
    let mut objects: Vec<(Location, Object)> = Vec::new();
    let mut errors: Vec<String> = Vec::new();
    for (origin, text) in inputs {
        read_objects(origin, text, &mut objects, &mut errors);
    }
    let mut first_seen: HashMap<(ObjectKind, &str), &str> = HashMap::new();
    for (at, object) in &objects {
        match first_seen.entry((object.kind, &object.name)) {
            Entry::Occupied(first) => errors.push(format!(
                "{at} ({} {}): declared twice (first in {})",
                object.kind,
                object.name,
                first.get()
            )),
            Entry::Vacant(entry) => {
                entry.insert(at);
            }
        }
    }
    if errors.is_empty() {
        Ok(objects.into_iter().map(|(_, object)| object).collect())
    } else {
        Err(errors)
    }
}

/// Stores validated objects in one transaction.
pub async fn store(lake: &Lake, objects: &[Object]) -> Result<Vec<PutOutcome>, Box<dyn Error>> {
    Ok(lake
        .catalog()
        .put_objects(
            objects
                .iter()
                .map(|o| (o.kind.name(), o.name.as_str(), &o.spec)),
        )
        .await?)
}

/// Validates the documents of one input: valid objects and errors, each with where it sits.
fn read_objects(
    origin: &str,
    text: &str,
    objects: &mut Vec<(Location, Object)>,
    errors: &mut Vec<String>,
) {
    let documents = match documents(text) {
        Ok(documents) => documents,
        Err(error) => return errors.push(format!("{origin}: {error}")),
    };
    for (index, document) in documents.into_iter().enumerate() {
        if document.is_null() {
            continue;
        }
        let at = format!("{origin}: document {}", index + 1);
        let items = match split_list(document) {
            Ok(items) => items,
            Err(error) => {
                errors.push(format!("{at}: {error}"));
                continue;
            }
        };
        for (item, document) in items {
            let at = match item {
                Some(item) => format!("{at} item {item}"),
                None => at.clone(),
            };
            match parse_document(&document) {
                Ok(object) => objects.push((at, object)),
                Err(error) => errors.push(match error.subject() {
                    Some(subject) => format!("{at} ({subject}): {error}"),
                    None => format!("{at}: {error}"),
                }),
            }
        }
    }
}

pub async fn get(lake: &Lake, args: GetArgs) -> Result<ExitCode, Box<dyn Error>> {
    let mut objects = lake.catalog().documents(args.kind).await?;
    objects.retain(|o| args.name.as_ref().is_none_or(|name| *name == o.name));
    if let (Some(name), true) = (&args.name, objects.is_empty()) {
        return Err(format!("no {} named '{name}'", args.kind).into());
    }
    let documents: Vec<Value> = objects.iter().map(Object::to_document).collect();
    match args.format {
        ObjectFormat::Table => print_table(args.kind, &objects),
        ObjectFormat::Json => println!("{}", serde_json::to_string_pretty(&documents)?),
        ObjectFormat::Yaml => {
            for (i, document) in documents.iter().enumerate() {
                if i > 0 {
                    println!("---");
                }
                print!("{}", serde_yaml_ng::to_string(document)?);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn delete(lake: &Lake, args: DeleteArgs) -> Result<ExitCode, Box<dyn Error>> {
    if !lake
        .catalog()
        .delete_object(args.kind.name(), &args.name)
        .await?
    {
        return Err(format!("no {} named '{}'", args.kind, args.name).into());
    }
    println!("{}/{} deleted", args.kind, args.name);
    Ok(ExitCode::SUCCESS)
}

/// The input's name for messages and its text; `-` is stdin.
fn read_input(path: &Path) -> Result<(String, String), Box<dyn Error>> {
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        return Ok(("-".into(), text));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    Ok((path.display().to_string(), text))
}

/// The top-level documents of a file: JSON when it starts with `{` or `[` (one value, or a
/// stream of them), else YAML (`---`-separated; empty documents are skipped but keep their
/// number, so numbers match what a reader counts).
fn documents(text: &str) -> Result<Vec<Value>, String> {
    let values: Vec<Value> = if text.trim_start().starts_with(['{', '[']) {
        serde_json::Deserializer::from_str(text)
            .into_iter::<Value>()
            .collect::<Result<_, _>>()
            .map_err(|error| format!("not valid JSON: {error}"))?
    } else {
        serde_yaml_ng::Deserializer::from_str(text)
            .map(Value::deserialize)
            .collect::<Result<_, _>>()
            .map_err(|error| format!("not valid YAML: {error}"))?
    };
    Ok(values)
}

/// A plain table: the name and the kind's columns from each spec.
fn print_table(kind: ObjectKind, objects: &[Object]) {
    if objects.is_empty() {
        eprintln!("no {kind} declared");
        return;
    }
    let header: Vec<String> = std::iter::once("name")
        .chain(kind.columns().iter().copied())
        .map(str::to_uppercase)
        .collect();
    let rows: Vec<Vec<String>> = objects
        .iter()
        .map(|o| {
            std::iter::once(o.name.clone())
                .chain(kind.columns().iter().map(|c| cell(o.spec.get(*c))))
                .collect()
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            std::iter::once(&header)
                .chain(&rows)
                .map(|row| row[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in std::iter::once(&header).chain(&rows) {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:width$}"))
            .collect();
        println!("{}", line.join("  ").trim_end());
    }
}

fn cell(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "-".into(),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| cell(Some(item)))
            .collect::<Vec<_>>()
            .join(","),
        Some(other) => other.to_string(),
    }
}

fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}
