//! The FOCUS 1.3 allocation export (`gpuledger export focus`, `focus_allocated(from, to)`,
//! `GET /v1/export/focus`) of the demo, checked rule by rule of the columns it writes, charge
//! by charge against the bill, team by team against the ledger, and read by DuckDB.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::str::FromStr;

use rust_decimal::Decimal;
use serde_json::Value;

use crate::demo::DEMO;
use crate::golden::run_ok;
use crate::support::{Ledger, describe, duckdb_available, ledgers};

const FROM: &str = "2026-11-01";
const TO: &str = "2026-11-03";

const METRICS: [&str; 7] = [
    "BilledCost",
    "EffectiveCost",
    "ListCost",
    "ContractedCost",
    "PricingQuantity",
    "ConsumedQuantity",
    "CommitmentDiscountQuantity",
];
const NUMBERS: [&str; 9] = [
    "BilledCost",
    "EffectiveCost",
    "ListCost",
    "ContractedCost",
    "ListUnitPrice",
    "ContractedUnitPrice",
    "PricingQuantity",
    "ConsumedQuantity",
    "CommitmentDiscountQuantity",
];
const DATES: [&str; 4] = [
    "BillingPeriodStart",
    "BillingPeriodEnd",
    "ChargePeriodStart",
    "ChargePeriodEnd",
];
const ALLOCATION: [&str; 5] = [
    "AllocatedMethodId",
    "AllocatedMethodDetails",
    "AllocatedResourceId",
    "AllocatedResourceName",
    "AllocatedTags",
];

type Row = BTreeMap<String, String>;

fn read_csv(bytes: &[u8]) -> (Vec<String>, Vec<Row>) {
    let mut reader = csv::Reader::from_reader(bytes);
    let headers: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    let rows = reader
        .records()
        .map(|r| {
            headers
                .iter()
                .cloned()
                .zip(r.unwrap().iter().map(String::from))
                .collect()
        })
        .collect();
    (headers, rows)
}

fn decimal(text: &str) -> Decimal {
    Decimal::from_str(text).unwrap_or_else(|_| panic!("not a decimal: {text}"))
}

fn json_decimal(value: &Value) -> Decimal {
    match value {
        Value::String(s) => decimal(s),
        Value::Number(n) => decimal(&n.to_string()),
        Value::Null => Decimal::ZERO,
        other => panic!("not a number: {other}"),
    }
}

fn origin(row: &Row) -> (String, String) {
    (row["x_SourceFile"].clone(), row["x_SourceLine"].clone())
}

fn tags(row: &Row) -> serde_json::Map<String, Value> {
    match serde_json::from_str(&row["AllocatedTags"]) {
        Ok(Value::Object(tags)) => tags,
        other => panic!("AllocatedTags is not a JSON object: {other:?}"),
    }
}

fn team_of(row: &Row) -> Option<String> {
    tags(row)
        .get("gpuledger/team")
        .map(|t| t.as_str().unwrap().to_string())
}

fn export(ledger: &Ledger, args: &[&str]) -> Vec<u8> {
    let mut all = vec!["export", "focus", "--from", FROM, "--to", TO];
    all.extend_from_slice(args);
    let out = ledger.run(&all);
    assert!(out.status.success(), "{}", describe(&out));
    out.stdout
}

/// Every rule of the columns the export writes (FOCUS 1.3: names, formats, nullability, the
/// allocation columns' values), row by row.
fn check_columns_and_rows(headers: &[String], rows: &[Row]) {
    let custom_from = headers.iter().position(|h| h.starts_with("x_")).unwrap();
    for (i, name) in headers.iter().enumerate() {
        let pascal = name.chars().next().unwrap().is_ascii_uppercase()
            && name.chars().all(|c| c.is_ascii_alphanumeric());
        assert!(
            (i < custom_from && pascal) || (i >= custom_from && name.starts_with("x_")),
            "column {i} {name}: FOCUS columns are PascalCase, custom ones x_ and last"
        );
    }
    for column in ALLOCATION.iter().chain(&["Tags", "EffectiveCost"]) {
        assert!(headers.iter().any(|h| h == column), "no {column}");
    }
    for row in rows {
        for column in DATES {
            let text = &row[column];
            assert!(
                text.is_empty()
                    || (text.len() == 20
                        && chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%SZ")
                            .is_ok()),
                "{column}: {text} is not YYYY-MM-DDTHH:mm:ssZ"
            );
        }
        for column in NUMBERS {
            let text = &row[column];
            assert!(
                !text.contains(['+', 'e', 'E']),
                "{column}: {text} is not a plain decimal"
            );
            if !text.is_empty() {
                decimal(text);
            }
        }
        // AllocatedMethodId: never null on a split row, one of the documented ids.
        let method = &row["AllocatedMethodId"];
        let rule = method
            .strip_prefix("gpuledger:shared/")
            .and_then(|m| m.strip_suffix("@1"));
        assert!(
            method == "gpuledger:gpu-hours@1" || rule.is_some_and(|r| !r.is_empty()),
            "AllocatedMethodId {method}"
        );
        // AllocatedMethodDetails: {"Elements":[{AllocatedRatio, UsageUnit?, UsageQuantity?}]}.
        let details: Value = serde_json::from_str(&row["AllocatedMethodDetails"]).unwrap();
        let object = details.as_object().unwrap();
        assert_eq!(object.keys().collect::<Vec<_>>(), ["Elements"]);
        let elements = object["Elements"].as_array().unwrap();
        assert_eq!(elements.len(), 1, "{details}");
        let element = elements[0].as_object().unwrap();
        let ratio = json_decimal(&element["AllocatedRatio"]);
        assert!(ratio > Decimal::ZERO && ratio <= Decimal::ONE, "{details}");
        assert_eq!(
            element.contains_key("UsageUnit"),
            element.contains_key("UsageQuantity"),
            "UsageUnit and UsageQuantity come together: {details}"
        );
        if rule.is_none() {
            assert_eq!(element["UsageUnit"], "GPU-Hours");
            assert!(element["UsageQuantity"].as_f64().unwrap() > 0.0);
        } else {
            assert!(!element.contains_key("UsageUnit"), "{details}");
        }
        // AllocatedTags: an object of strings under gpuledger/, repeating none of the Tags keys.
        let allocated = tags(row);
        let own: serde_json::Map<String, Value> = if row["Tags"].is_empty() {
            Default::default()
        } else {
            serde_json::from_str(&row["Tags"]).unwrap()
        };
        for (key, value) in &allocated {
            assert!(
                key.starts_with("gpuledger/") && value.is_string(),
                "{key}: {value}"
            );
            assert!(
                !own.contains_key(key),
                "AllocatedTags repeats the Tags key {key}"
            );
        }
        let bucket = allocated["gpuledger/bucket"].as_str().unwrap();
        assert!(
            [
                "direct",
                "allocated_idle",
                "shared",
                "reserved",
                "unexplained",
                "fault"
            ]
            .contains(&bucket),
            "{bucket}"
        );
        assert_eq!(
            allocated.contains_key("gpuledger/reason"),
            bucket == "reserved"
        );
        assert_eq!(
            allocated.get("gpuledger/rule").and_then(Value::as_str),
            rule,
            "the rule tag names the method's rule"
        );
        let teams_bucket = ["direct", "allocated_idle", "shared"].contains(&bucket);
        assert_eq!(allocated.contains_key("gpuledger/team"), teams_bucket);
        // The workload: on a team's GPU time only, id and name together.
        let (id, name) = (&row["AllocatedResourceId"], &row["AllocatedResourceName"]);
        assert_eq!(id.is_empty(), name.is_empty());
        if !id.is_empty() {
            assert!(bucket == "direct" || bucket == "allocated_idle", "{bucket}");
            assert!(id.ends_with(&format!("/{name}")), "{id} {name}");
        }
    }
}

#[test]
fn the_demo_exports_every_charge_split_in_focus_1_3_and_adds_back_to_the_bill_and_the_ledger() {
    let ledger = ledgers().into_iter().next().unwrap();
    run_ok(&ledger, &DEMO);
    let csv_bytes = export(&ledger, &[]);
    let (headers, rows) = read_csv(&csv_bytes);
    check_columns_and_rows(&headers, &rows);

    // Charge by charge against billing_lines: every line of the window is there, its ratios add
    // to exactly 1, each metric's rows to its value, and every other column is copied.
    let lines = ledger.sql(&format!(
        "SELECT source_file, CAST(source_line AS VARCHAR) AS source_line,
                CAST(billed_cost AS VARCHAR) AS \"BilledCost\", CAST(effective_cost AS VARCHAR) AS \"EffectiveCost\",
                CAST(list_cost AS VARCHAR) AS \"ListCost\", CAST(contracted_cost AS VARCHAR) AS \"ContractedCost\",
                CAST(pricing_quantity AS VARCHAR) AS \"PricingQuantity\", CAST(consumed_quantity AS VARCHAR) AS \"ConsumedQuantity\",
                CAST(commitment_discount_quantity AS VARCHAR) AS \"CommitmentDiscountQuantity\"
         FROM billing_lines WHERE charge_period_start >= '{FROM}' AND charge_period_start < '{TO}'"
    ));
    assert_eq!(
        lines.len(),
        350,
        "7 billed nodes × 48 hours + 7 daily lines × 2 days"
    );
    let mut by_origin: BTreeMap<(String, String), Vec<&Row>> = BTreeMap::new();
    for row in &rows {
        by_origin.entry(origin(row)).or_default().push(row);
    }
    assert_eq!(by_origin.len(), lines.len());
    let copied: Vec<&String> = headers
        .iter()
        .filter(|h| !METRICS.contains(&h.as_str()) && !ALLOCATION.contains(&h.as_str()))
        .collect();
    for line in &lines {
        let key = (
            line["source_file"].as_str().unwrap().to_string(),
            line["source_line"].as_str().unwrap().to_string(),
        );
        let parts = &by_origin[&key];
        let ratios: Decimal = parts
            .iter()
            .map(|r| {
                let details: Value = serde_json::from_str(&r["AllocatedMethodDetails"]).unwrap();
                json_decimal(&details["Elements"][0]["AllocatedRatio"])
            })
            .sum();
        assert_eq!(ratios, Decimal::ONE, "{key:?}");
        for metric in METRICS {
            match &line[metric] {
                Value::Null => assert!(parts.iter().all(|r| r[metric].is_empty()), "{metric}"),
                value => {
                    let whole = json_decimal(value);
                    let sum: Decimal = parts.iter().map(|r| decimal(&r[metric])).sum();
                    assert_eq!(sum, whole, "{key:?} {metric}");
                    // Each metric is split by the row's ratio, so ListCost = ListUnitPrice ×
                    // PricingQuantity holds on the rows wherever it holds on the charge.
                    for part in parts {
                        let details: Value =
                            serde_json::from_str(&part["AllocatedMethodDetails"]).unwrap();
                        let ratio = json_decimal(&details["Elements"][0]["AllocatedRatio"]);
                        let tolerance = decimal("0.000000001") * whole.abs().max(Decimal::ONE);
                        assert!(
                            (decimal(&part[metric]) - whole * ratio).abs() <= tolerance,
                            "{key:?} {metric}: {} is not {ratio} of {whole}",
                            part[metric]
                        );
                    }
                }
            }
        }
        for column in &copied {
            let values: BTreeSet<&String> = parts.iter().map(|r| &r[*column]).collect();
            assert_eq!(values.len(), 1, "{key:?} {column}: {values:?}");
        }
    }

    // The export's total is the bill's, to the last digit.
    let exported: Decimal = rows.iter().map(|r| decimal(&r["EffectiveCost"])).sum();
    let billed = json_decimal(&ledger.scalar(&format!(
        "SELECT CAST(sum(effective_cost) AS VARCHAR) FROM billing_lines
         WHERE charge_period_start >= '{FROM}' AND charge_period_start < '{TO}'"
    )));
    assert_eq!(exported, billed);

    // Team by team: what the ledger journaled from billing. `team_costs` adds the money that is
    // no charge of the bill (rate-card GPU time, manual costs).
    let mut by_team: BTreeMap<Option<String>, Decimal> = BTreeMap::new();
    for row in &rows {
        *by_team.entry(team_of(row)).or_default() += decimal(&row["EffectiveCost"]);
    }
    let journal: BTreeMap<(Option<String>, String), Decimal> = ledger
        .sql(&format!(
            "SELECT team, source, CAST(sum(amount) AS VARCHAR) AS amount FROM cost_entries
             WHERE day >= '{FROM}' AND day < '{TO}' GROUP BY team, source"
        ))
        .iter()
        .map(|r| {
            (
                (
                    r["team"].as_str().map(String::from),
                    r["source"].as_str().unwrap().to_string(),
                ),
                json_decimal(&r["amount"]),
            )
        })
        .collect();
    let cent = decimal("0.005");
    for (team, exported) in &by_team {
        let billed = journal[&(team.clone(), "billing".to_string())];
        assert!(
            (*exported - billed).abs() < cent,
            "{team:?}: {exported} vs {billed}"
        );
    }
    for row in ledger.sql(&format!(
        "SELECT team, CAST(total_cost AS VARCHAR) AS total FROM team_costs('{FROM}', '{TO}')"
    )) {
        let team = row["team"].as_str().map(String::from);
        let others: Decimal = ["rate_card", "manual"]
            .iter()
            .filter_map(|s| journal.get(&(team.clone(), s.to_string())))
            .sum();
        assert!(
            (json_decimal(&row["total"]) - by_team[&team] - others).abs() < cent,
            "{team:?}"
        );
    }

    // The same rows in Parquet, and DuckDB groups them by AllocatedTags to the same teams.
    let parquet = ledger.dir.path().join("focus.parquet");
    export(
        &ledger,
        &["--format", "parquet", "--out", parquet.to_str().unwrap()],
    );
    if duckdb_available() {
        let script = format!(
            "import duckdb, json\n\
             rows = duckdb.connect().execute(\"\"\"select AllocatedTags->>'$.\"gpuledger/team\"' as team,\n\
               cast(sum(EffectiveCost) as varchar), count(*) from read_parquet('{}') group by 1\"\"\").fetchall()\n\
             print(json.dumps(rows))\n",
            parquet.display()
        );
        let out = Command::new("python3")
            .args(["-c", &script])
            .output()
            .unwrap();
        assert!(out.status.success(), "duckdb: {}", describe(&out));
        let duck: Vec<(Option<String>, String, i64)> = serde_json::from_slice(&out.stdout).unwrap();
        let duck: BTreeMap<Option<String>, Decimal> =
            duck.into_iter().map(|(t, s, _)| (t, decimal(&s))).collect();
        assert_eq!(duck, by_team, "DuckDB over the Parquet export");
    }

    // The table function is the same rows; a second export is the same bytes.
    let sql = ledger.sql(&format!(
        "SELECT count(*) AS n, CAST(sum(\"EffectiveCost\") AS VARCHAR) AS s FROM focus_allocated('{FROM}', '{TO}')"
    ));
    assert_eq!(sql[0]["n"], rows.len());
    assert_eq!(json_decimal(&sql[0]["s"]), exported);
    assert_eq!(
        export(&ledger, &[]),
        csv_bytes,
        "the export is deterministic"
    );

    // Over HTTP: the same CSV to an administrator; refused to a team's token and to SQL in its
    // name; parameters checked.
    let server = ledger.serve(&[]);
    let admin = ledger.token("read", None);
    let response = server.get_as(&admin, &format!("/v1/export/focus?from={FROM}&to={TO}"));
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers()["content-type"], "text/csv");
    assert_eq!(response.bytes().unwrap().as_ref(), csv_bytes.as_slice());
    let response = server.get_as(
        &admin,
        &format!("/v1/export/focus?from={FROM}&to={TO}&format=parquet"),
    );
    assert_eq!(response.status().as_u16(), 200);
    assert!(response.bytes().unwrap().starts_with(b"PAR1"));
    let team = ledger.token("read", Some("research"));
    let (status, body) = server.get(&team, &format!("/v1/export/focus?from={FROM}&to={TO}"));
    assert_eq!(status, 403, "{body}");
    let (status, body) = server.sql(
        &team,
        &format!("SELECT count(*) FROM focus_allocated('{FROM}', '{TO}')"),
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("not available to a token scoped to team")
    );
    for bad in [
        format!("from={TO}&to={FROM}"),
        format!("from={FROM}"),
        format!("from={FROM}&to={TO}&format=xml"),
        "from=2026-01-01&to=2027-06-01".to_string(),
    ] {
        let (status, body) = server.get(&admin, &format!("/v1/export/focus?{bad}"));
        assert_eq!(status, 400, "{bad}: {body}");
    }
    drop(server);

    // A charge on a day the ledger has not built: a clear refusal naming the day and the charge.
    let late = ledger.dir.path().join("late.csv");
    std::fs::write(
        &late,
        "ChargePeriodStart,ChargePeriodEnd,BilledCost,EffectiveCost,ServiceCategory\n\
         2026-11-10T00:00:00Z,2026-11-11T00:00:00Z,5,5,Storage\n",
    )
    .unwrap();
    ledger.ingest_ok("focus", &late, &[]);
    let out = ledger.run(&[
        "export",
        "focus",
        "--from",
        "2026-11-10",
        "--to",
        "2026-11-11",
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the ledger of 2026-11-10 is not built") && stderr.contains("late.csv:2"),
        "{stderr}"
    );
    let server = ledger.serve(&[]);
    let (status, body) = server.get(&admin, "/v1/export/focus?from=2026-11-10&to=2026-11-11");
    assert_eq!(
        (status, body["sqlstate"].as_str()),
        (409, Some("55000")),
        "{body}"
    );
}
