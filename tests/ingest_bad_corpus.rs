//! The bad-input corpus: small hostile files of every format under `tests/data/bad/`, each with
//! its expected outcome in `tests/data/bad/EXPECTED.tsv` (landed, quarantined with the line,
//! field and reason, or rejected whole), checked through the CLI by one test.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::support::{describe, ledgers};

/// What one file of the corpus must give.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// Landed without a rejection; the summary line contains the text (e.g. `landed 2 rows into
    /// gpu_samples`).
    Landed(String),
    /// These (line, field, reason substring) rejections, kept in the quarantine; the rest landed.
    Quarantined(Vec<(u64, String, String)>),
    /// Refused as a whole: `error: <file>: …` contains the text, and nothing of it landed.
    Rejected(String),
}

struct Case {
    file: String,
    source: String,
    outcome: Outcome,
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/bad")
}

/// `EXPECTED.tsv`: file, source, outcome, line, field, reason; a quarantined file has one row
/// per rejected line, `-` where a column does not apply.
fn expectations() -> Vec<Case> {
    let text = std::fs::read_to_string(corpus_dir().join("EXPECTED.tsv")).unwrap();
    let mut cases: Vec<Case> = Vec::new();
    for (number, row) in text.lines().enumerate() {
        if row.starts_with('#') || row.trim().is_empty() {
            continue;
        }
        let columns: Vec<&str> = row.split('\t').collect();
        let [file, source, outcome, line, field, reason] = columns[..] else {
            panic!(
                "EXPECTED.tsv:{}: six tab-separated columns: {row:?}",
                number + 1
            );
        };
        let reason = reason.to_string();
        let outcome = match outcome {
            "landed" => Outcome::Landed(reason),
            "rejected" => Outcome::Rejected(reason),
            "quarantined" => {
                let line = line.parse().expect("a line number");
                let rejection = (line, field.to_string(), reason);
                if let Some(case) = cases.last_mut()
                    && case.file == file
                    && let Outcome::Quarantined(rows) = &mut case.outcome
                {
                    rows.push(rejection);
                    continue;
                }
                Outcome::Quarantined(vec![rejection])
            }
            other => panic!("EXPECTED.tsv:{}: unknown outcome {other}", number + 1),
        };
        cases.push(Case {
            file: file.to_string(),
            source: source.to_string(),
            outcome,
        });
    }
    cases
}

const OPTIONS: [&str; 4] = ["--at", "2026-11-02T10:00:00Z", "--cluster", "c"];

#[test]
fn every_file_of_the_bad_input_corpus_has_its_expected_outcome() {
    let cases = expectations();
    let dir = corpus_dir();
    let on_disk: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name != "EXPECTED.tsv")
        .collect();
    let listed: BTreeSet<String> = cases.iter().map(|c| c.file.clone()).collect();
    assert_eq!(
        on_disk, listed,
        "every file has one expectation, and only those"
    );
    assert!(cases.len() >= 80, "{} files", cases.len());

    let ledger = ledgers().remove(0);
    let path_of = |case: &Case| dir.join(&case.file).to_str().unwrap().to_string();
    let mut failures = Vec::new();

    // Files refused whole stop an `ingest` of several files: one command each.
    for case in &cases {
        let Outcome::Rejected(reason) = &case.outcome else {
            continue;
        };
        let path = path_of(case);
        let mut args = vec!["ingest", case.source.as_str(), path.as_str()];
        args.extend(OPTIONS);
        let out = ledger.run(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.code() != Some(2) || !stderr.contains(&format!("error: {path}: ")) {
            failures.push(format!(
                "{}: not rejected whole: {}",
                case.file,
                describe(&out)
            ));
        } else if !stderr.contains(reason.as_str()) {
            failures.push(format!(
                "{}: rejected, but not with {reason:?}: {stderr}",
                case.file
            ));
        }
    }

    // The others, one command per source: each file is its own batch with its own summary line.
    let mut by_source: BTreeMap<&str, Vec<&Case>> = BTreeMap::new();
    for case in &cases {
        if !matches!(case.outcome, Outcome::Rejected(_)) {
            by_source
                .entry(case.source.as_str())
                .or_default()
                .push(case);
        }
    }
    for (source, cases) in &by_source {
        let paths: Vec<String> = cases.iter().map(|case| path_of(case)).collect();
        let mut args = vec!["ingest", source];
        args.extend(paths.iter().map(String::as_str));
        args.extend(OPTIONS);
        let out = ledger.run(&args);
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "ingest {source}: {}",
            describe(&out)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        for (case, path) in cases.iter().zip(&paths) {
            let summary = stdout
                .lines()
                .find(|line| line.starts_with(&format!("{path}: ")))
                .unwrap_or_default();
            match &case.outcome {
                Outcome::Landed(text) => {
                    if !summary.ends_with("; 0 rejected") || !summary.contains(text.as_str()) {
                        failures.push(format!(
                            "{}: expected {text:?}, 0 rejected: {summary:?}",
                            case.file
                        ));
                    }
                }
                Outcome::Quarantined(rows) => {
                    if !summary.ends_with(&format!("; {} rejected", rows.len())) {
                        failures.push(format!(
                            "{}: expected {} rejected: {summary:?}",
                            case.file,
                            rows.len()
                        ));
                    }
                    // The message names the file, the line and the field.
                    for (line, field, reason) in rows {
                        let said = format!("  {path}:{line}: field '{field}': ");
                        let told = stderr.lines().any(|l| {
                            l.starts_with(&said) && l[said.len()..].contains(reason.as_str())
                        });
                        if !told {
                            failures
                                .push(format!("{}: no {said}{reason:?} in: {stderr}", case.file));
                        }
                    }
                }
                Outcome::Rejected(_) => unreachable!(),
            }
        }
    }

    // What the quarantine keeps is what the messages said, file by file.
    let mut kept: BTreeMap<String, Vec<(u64, String, String)>> = BTreeMap::new();
    for row in ledger.sql(
        "select file as origin, line, field, reason from quarantine order by file, line, field",
    ) {
        let origin = row["origin"].as_str().unwrap();
        let file = Path::new(origin)
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        kept.entry(file).or_default().push((
            row["line"].as_u64().unwrap(),
            row["field"].as_str().unwrap().to_string(),
            row["reason"].as_str().unwrap().to_string(),
        ));
    }
    for case in &cases {
        let expected: &[(u64, String, String)] = match &case.outcome {
            Outcome::Quarantined(rows) => rows,
            _ => &[],
        };
        let got = kept.remove(&case.file).unwrap_or_default();
        let matches = got.len() == expected.len()
            && got
                .iter()
                .zip(expected)
                .all(|((gl, gf, gr), (el, ef, er))| {
                    gl == el && gf == ef && gr.contains(er.as_str())
                });
        if !matches {
            failures.push(format!(
                "{}: quarantine holds {got:?}, expected {expected:?}",
                case.file
            ));
        }
    }
    assert!(kept.is_empty(), "quarantine rows of no case: {kept:?}");

    // Nothing of a file refused whole landed: no batch names it.
    let origins: BTreeSet<String> = ledger
        .sql("select origin from system.ingest_batches")
        .iter()
        .filter_map(|row| row["origin"].as_str())
        .filter_map(|origin| Path::new(origin).file_name()?.to_str().map(str::to_string))
        .collect();
    for case in &cases {
        let landed_a_batch = origins.contains(&case.file);
        if matches!(case.outcome, Outcome::Rejected(_)) == landed_a_batch {
            failures.push(format!(
                "{}: a batch was committed: {landed_a_batch}",
                case.file
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} files:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
