//! deploy/grafana: the provisioned data source points the dashboard at gpuledger's Postgres port,
//! and every panel's query, its macros expanded as Grafana's PostgreSQL data source expands them,
//! runs over that port against a demo lake (`gpuledger demo`, 16 GPUs × 2 days) and gives the
//! ledger's own figures.

use std::collections::BTreeMap;
use std::path::Path;

use gpuledger_demo::focus::billing_lines;
use serde_json::Value;

use crate::demo::{DEMO, plan};
use crate::golden::run_ok;
use crate::support::{Server, describe, ledgers, psql};

fn repository(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// A panel query as Grafana sends it for the range `[from, to]` (RFC 3339): the macros of its
/// PostgreSQL data source (grafana/pkg/tsdb/grafana-postgresql-datasource/macros.go) expanded.
fn expand(sql: &str, from: &str, to: &str) -> String {
    let mut out = sql
        .replace("$__timeFrom()", &format!("'{from}'"))
        .replace("$__timeTo()", &format!("'{to}'"));
    // `$__timeFilter(column)` and `$__timeGroupAlias(column, 'interval')`.
    while let Some(at) = out.find("$__timeFilter(") {
        let close = at + out[at..].find(')').unwrap();
        let column = out[at + "$__timeFilter(".len()..close].trim().to_string();
        out.replace_range(at..=close, &format!("{column} BETWEEN '{from}' AND '{to}'"));
    }
    while let Some(at) = out.find("$__timeGroupAlias(") {
        let close = at + out[at..].find(')').unwrap();
        let args: Vec<String> = out[at + "$__timeGroupAlias(".len()..close]
            .split(',')
            .map(|a| a.trim().trim_matches('\'').to_string())
            .collect();
        let seconds = match args[1].as_str() {
            "1d" => 86_400,
            "1h" => 3_600,
            other => panic!("interval {other} not expanded here"),
        };
        out.replace_range(
            at..=close,
            &format!(
                "floor(extract(epoch from {})/{seconds})*{seconds} AS \"time\"",
                args[0]
            ),
        );
    }
    assert!(!out.contains("$__"), "a macro left in {out}");
    out
}

/// The rows of `sql` run over the Postgres port as `token`, by column name (psql, CSV).
fn rows(server: &Server, token: &str, sql: &str) -> Vec<BTreeMap<String, String>> {
    let out = psql(server, token, "disable", &["--csv"], &[sql]);
    assert!(out.status.success(), "{sql}\n{}", describe(&out));
    let mut reader = csv::Reader::from_reader(out.stdout.as_slice());
    let headers = reader.headers().unwrap().clone();
    reader
        .records()
        .map(|r| {
            let r = r.unwrap();
            headers
                .iter()
                .zip(r.iter())
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

fn number(row: &BTreeMap<String, String>, column: &str) -> f64 {
    row[column]
        .parse()
        .unwrap_or_else(|_| panic!("{column} of {row:?}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[test]
fn the_grafana_dashboard_s_every_panel_runs_over_the_postgres_port_on_the_demo() {
    let datasource: serde_yaml_ng::Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(repository(
            "deploy/grafana/provisioning/datasources/gpuledger.yaml",
        ))
        .unwrap(),
    )
    .unwrap();
    let source = &datasource["datasources"][0];
    assert_eq!(
        source["type"].as_str(),
        Some("grafana-postgresql-datasource")
    );
    assert_eq!(source["jsonData"]["database"].as_str(), Some("gpuledger"));
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(repository("deploy/grafana/dashboards/gpuledger.json")).unwrap(),
    )
    .unwrap();
    let mut panels: BTreeMap<String, String> = BTreeMap::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        // Every panel reads the provisioned data source.
        assert_eq!(panel["datasource"]["uid"].as_str(), source["uid"].as_str());
        let title = panel["title"].as_str().unwrap().to_string();
        let sql = panel["targets"][0]["rawSql"].as_str().unwrap().to_string();
        panels.insert(title, sql);
    }
    assert_eq!(
        panels.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "Budgets this month",
            "Cost per 1M SLO-met tokens",
            "Idle by class",
            "Ledger balance",
            "Spend by team"
        ]
    );

    let ledger = ledgers().remove(0);
    run_ok(&ledger, &DEMO);
    let token = ledger.token("read", None);
    let server = ledger.serve(&[]);
    // The demo's two days, as a Grafana range.
    let (from, to) = ("2026-11-01T00:00:00Z", "2026-11-03T00:00:00Z");
    let panel = |title: &str| rows(&server, &token, &expand(&panels[title], from, to));

    // Spend by team: one series per team, summing to team_costs over the range.
    let mut spend: BTreeMap<String, f64> = BTreeMap::new();
    for row in panel("Spend by team") {
        assert!(
            number(&row, "time") % 86_400.0 == 0.0,
            "a day bucket: {row:?}"
        );
        *spend.entry(row["metric"].clone()).or_default() += number(&row, "value");
    }
    let teams = rows(
        &server,
        &token,
        "SELECT team, total_cost FROM team_costs('2026-11-01', '2026-11-03') ORDER BY team",
    );
    assert!(teams.len() >= 3, "{teams:?}");
    assert_eq!(spend.len(), teams.len());
    for team in &teams {
        let shown = spend[&team["team"]];
        assert!(
            close(shown, number(team, "total_cost")),
            "{}: {shown}",
            team["team"]
        );
    }

    // Ledger balance: the demo's daily lines, billed and accounted, to the cent of the bill.
    let balance: BTreeMap<String, f64> = panel("Ledger balance")
        .iter()
        .map(|r| (r["side"].clone(), number(r, "amount")))
        .collect();
    let billed = billing_lines(&plan())
        .iter()
        .map(|l| l.effective_micros)
        .sum::<i64>() as f64
        / 1e6;
    assert!(
        close(balance["billed (effective cost)"], billed),
        "{balance:?} vs {billed}"
    );
    assert!(
        close(balance["accounted from billing"], billed),
        "{balance:?}"
    );

    // Idle by class: the non-busy classes of idle_summary, largest first.
    let idle = panel("Idle by class");
    assert!(idle.iter().any(|r| r["class"] == "unexplained"), "{idle:?}");
    assert!(
        idle.iter().any(|r| r["class"].starts_with("reserved:")),
        "{idle:?}"
    );
    let costs: Vec<f64> = idle.iter().map(|r| number(r, "cost")).collect();
    assert!(costs.windows(2).all(|w| w[0] >= w[1]), "{costs:?}");
    let expected = rows(
        &server,
        &token,
        "SELECT sum(cost) AS cost FROM idle_summary('2026-11-01', '2026-11-03') WHERE class <> 'busy'",
    );
    assert!(close(costs.iter().sum(), number(&expected[0], "cost")));

    // Cost per 1M SLO-met tokens: the demo's models, each a positive cost.
    let models = panel("Cost per 1M SLO-met tokens");
    assert!(!models.is_empty());
    for model in &models {
        assert!(
            number(model, "cost_per_1m_slo_met_tokens") > 0.0,
            "{model:?}"
        );
    }

    // Budgets this month: the demo's budgets, each as GET /v1/budgets/{name}/status says at the
    // range's end.
    let budgets = panel("Budgets this month");
    assert!(budgets.len() >= 3, "{budgets:?}");
    let admin = ledger.token("admin", None);
    for budget in &budgets {
        let (status, rest) = server.get(
            &admin,
            &format!("/v1/budgets/{}/status?at={to}", budget["budget"]),
        );
        assert_eq!(status, 200, "{rest}");
        assert!(close(
            number(budget, "percent_used"),
            rest["percent_used"].as_f64().unwrap()
        ));
        assert_eq!(budget["state"], rest["state"].as_str().unwrap());
    }
    assert!(budgets.iter().any(|b| b["state"] == "over"), "{budgets:?}");
}

#[test]
fn grafana_macros_expand_as_grafana_does() {
    assert_eq!(
        expand(
            "SELECT $__timeGroupAlias(day, '1d'), x FROM t WHERE $__timeFilter(day) AND f($__timeFrom(), $__timeTo())",
            "2026-11-01T00:00:00Z",
            "2026-11-03T00:00:00Z"
        ),
        "SELECT floor(extract(epoch from day)/86400)*86400 AS \"time\", x FROM t WHERE day BETWEEN \
         '2026-11-01T00:00:00Z' AND '2026-11-03T00:00:00Z' AND f('2026-11-01T00:00:00Z', '2026-11-03T00:00:00Z')"
    );
}
