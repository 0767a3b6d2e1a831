//! What the README and deploy/ tell users to type matches the binary: every flag and environment
//! variable they name exists, and the README's configuration table lists every flag that has an
//! environment variable.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The subcommands whose flags users set, as `gpuledger <words> --help` takes them.
const COMMANDS: [&[&str]; 14] = [
    &[],
    &["serve"],
    &["demo"],
    &["ingest"],
    &["sql"],
    &["apply"],
    &["get"],
    &["ledger", "build"],
    &["ledger", "check"],
    &["report", "weekly"],
    &["export", "focus"],
    &["token", "create"],
    &["migrate"],
    &["compact"],
];

/// Each `--flag` of `gpuledger <words> --help`, with its environment variable if it has one.
fn flags(words: &[&str]) -> Vec<(String, Option<String>)> {
    let out = Command::new(env!("CARGO_BIN_EXE_gpuledger"))
        .args(words)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "gpuledger {words:?} --help");
    let help = String::from_utf8(out.stdout).unwrap();
    let mut flags: Vec<(String, Option<String>)> = Vec::new();
    for line in help.lines() {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed
            .strip_prefix("--")
            .or_else(|| trimmed.get(4..).and_then(|s| s.strip_prefix("--")))
        {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            if name != "help" && name != "version" {
                flags.push((format!("--{name}"), None));
            }
        }
        // The env note may sit on the flag's line or on a later line of its description.
        if let Some(start) = line.find("[env: ") {
            let env: String = line[start + 6..]
                .chars()
                .take_while(|c| *c != '=' && *c != ']')
                .collect();
            if let Some(last) = flags.last_mut() {
                last.1 = Some(env);
            }
        }
    }
    flags
}

#[test]
fn the_readme_configuration_table_lists_every_flag_with_its_environment_variable() {
    let readme = std::fs::read_to_string(repository().join("README.md")).unwrap();
    let mut missing = Vec::new();
    for words in COMMANDS {
        for (flag, env) in flags(words) {
            let Some(env) = env else {
                continue;
            };
            // One table row names both.
            let listed = readme.lines().any(|l| {
                l.starts_with('|') && l.contains(&format!("`{flag}`")) && l.contains(&env)
            });
            if !listed {
                missing.push(format!("gpuledger {} {flag} ({env})", words.join(" ")));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "README.md's configuration table lacks: {missing:#?}"
    );
}

#[test]
fn every_setting_of_serve_and_demo_has_an_environment_variable() {
    for words in [&["serve"][..], &["demo"], &["ingest"]] {
        let without: Vec<String> = flags(words)
            .into_iter()
            .filter(|(_, env)| env.is_none())
            .map(|(flag, _)| flag)
            .collect();
        assert!(
            without.is_empty(),
            "gpuledger {words:?}: {without:?} have no environment variable"
        );
    }
}

/// The flags and `GPULEDGER_*` variables that deploy/ hands to `gpuledger serve` are real.
#[test]
fn the_deployment_files_use_real_flags_and_variables() {
    let serve: Vec<(String, Option<String>)> =
        [&[][..], &["serve"]].into_iter().flat_map(flags).collect();
    let known_flags: BTreeSet<&str> = serve.iter().map(|(f, _)| f.as_str()).collect();
    let mut known_env: BTreeSet<&str> = serve.iter().filter_map(|(_, e)| e.as_deref()).collect();
    // The log filter is read by the tracing subscriber, not by a flag.
    known_env.insert("GPULEDGER_LOG");

    let deploy = repository().join("deploy");
    let mut texts = vec![std::fs::read_to_string(deploy.join("Dockerfile")).unwrap()];
    for file in ["compose.yaml", "kubernetes/gpuledger.yaml"] {
        texts.push(std::fs::read_to_string(deploy.join(file)).unwrap());
    }
    let mut used_flags = BTreeSet::new();
    let mut used_env = BTreeSet::new();
    for text in &texts {
        let commands = text.lines().filter(|l| !l.trim_start().starts_with('#'));
        for token in
            commands.flat_map(|l| l.split(|c: char| c.is_whitespace() || "\"',[]{}:".contains(c)))
        {
            // A flag starts with a letter (`---` separates YAML documents).
            if let Some(flag) = token
                .strip_prefix("--")
                .filter(|f| f.starts_with(|c: char| c.is_ascii_alphabetic()))
            {
                let flag = flag.split('=').next().unwrap();
                // Docker's, cargo's and apt's own flags in the Dockerfile.
                if ![
                    "from",
                    "release",
                    "locked",
                    "no-install-recommends",
                    "system",
                    "uid",
                ]
                .contains(&flag)
                {
                    used_flags.insert(format!("--{flag}"));
                }
            }
            if token.starts_with("GPULEDGER_") {
                used_env.insert(token.split('=').next().unwrap().to_string());
            }
        }
    }
    assert!(used_flags.contains("--pg-listen"), "{used_flags:?}");
    for flag in &used_flags {
        assert!(
            known_flags.contains(flag.as_str()),
            "deploy/ uses {flag}, which `gpuledger serve` does not take"
        );
    }
    assert!(used_env.contains("GPULEDGER_CATALOG"), "{used_env:?}");
    for env in &used_env {
        assert!(
            known_env.contains(env.as_str()),
            "deploy/ sets {env}, which `gpuledger serve` does not read"
        );
    }
    // Two replicas are only safe because the catalog is shared: not SQLite in a pod.
    let kubernetes = &texts[2];
    let manifests: Vec<serde_yaml_ng::Value> = serde_yaml_ng::Deserializer::from_str(kubernetes)
        .map(serde::Deserialize::deserialize)
        .collect::<Result<_, _>>()
        .unwrap();
    let kinds: Vec<&str> = manifests
        .iter()
        .map(|m| m["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["Deployment", "Service"]);
}
