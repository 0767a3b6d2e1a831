//! The fuzz corpus as a regression test: every input `cargo fuzz` kept (`fuzz/corpus/<target>/`)
//! and every crash it found (`fuzz/regressions/<target>/`, fixed since) goes through its parser
//! again in the ordinary test run, which needs no nightly flags and no fuzzer.

use std::path::PathBuf;

use super::{Target, parse};

fn inputs(folder: &str, target: Target) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz")
        .join(folder)
        .join(target.name());
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut files: Vec<_> = entries
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .map(|path| {
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect();
    files.sort();
    files
}

#[test]
fn every_corpus_input_and_every_crash_found_parses_without_a_panic() {
    for target in Target::ALL {
        let corpus = inputs("corpus", target);
        assert!(
            corpus.len() >= 3,
            "fuzz/corpus/{} holds {} inputs",
            target.name(),
            corpus.len()
        );
        for (path, bytes) in corpus.iter().chain(&inputs("regressions", target)) {
            let outcome = std::panic::catch_unwind(|| parse(target, bytes));
            assert!(
                outcome.is_ok(),
                "{} panicked on {}",
                target.name(),
                path.display()
            );
        }
    }
}
