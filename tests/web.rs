//! The dashboard in a real browser: `gpuledger serve` loaded with the worked example, and
//! tests/browser/dashboard.mjs driving Debian's chromium through playwright-core (both installed
//! by scripts/test). It signs in, checks the overview's totals against `POST /v1/sql` of the query
//! the page links to, the idle chart, the forms, a team token's view, and that no page logs an
//! error; screenshots of the main pages go to target/screenshots.

use std::path::Path;
use std::process::Command;

use crate::golden::load_worked_example;
use crate::support::{describe, ledgers};

const CHROMIUM: &str = "/usr/bin/chromium";

#[test]
fn the_dashboard_in_chromium() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let browser = root.join("tests/browser");
    if !Path::new(CHROMIUM).exists() || !browser.join("node_modules/playwright-core").exists() {
        eprintln!(
            "skipped: needs {CHROMIUM} and tests/browser/node_modules (scripts/test installs both)"
        );
        return;
    }
    // The pages read the catalog only through the API: one backend is enough.
    let ledger = ledgers().remove(0);
    load_worked_example(&ledger);
    let admin = ledger.token("admin", None);
    let nlp = ledger.token("read", Some("nlp"));
    let server = ledger.serve(&[]);
    let out = Command::new("node")
        .arg("dashboard.mjs")
        .current_dir(&browser)
        .env("GPULEDGER_URL", &server.base)
        .env("ADMIN_TOKEN", &admin)
        .env("TEAM_TOKEN", &nlp)
        .env("SCREENSHOTS", root.join("target/screenshots"))
        .env("CHROMIUM", CHROMIUM)
        .output()
        .expect("run node");
    println!("{}", String::from_utf8_lossy(&out.stdout));
    assert!(out.status.success(), "{}", describe(&out));
}
