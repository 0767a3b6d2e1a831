//! FOCUS billing through the real binary: sums to the cent, re-ingest, restatement.

use std::path::Path;

use rust_decimal::Decimal;
use serde_json::json;

use crate::support::{ledgers, shared};

/// Sums of BilledCost and EffectiveCost straight from a FOCUS CSV, independent of the product.
fn csv_sums(path: &Path) -> (Decimal, Decimal) {
    let mut reader = csv::Reader::from_path(path).unwrap();
    let headers = reader.headers().unwrap().clone();
    let column = |name: &str| {
        headers
            .iter()
            .position(|h| h.trim_start_matches('\u{feff}') == name)
            .unwrap()
    };
    let (billed, effective) = (column("BilledCost"), column("EffectiveCost"));
    let parse = |s: &str| {
        if s.is_empty() || s == "NULL" {
            Decimal::ZERO
        } else {
            s.parse::<Decimal>().unwrap()
        }
    };
    reader
        .records()
        .map(Result::unwrap)
        .fold((Decimal::ZERO, Decimal::ZERO), |(b, e), r| {
            (b + parse(&r[billed]), e + parse(&r[effective]))
        })
}

fn decimal(value: &serde_json::Value) -> Decimal {
    value.as_str().unwrap().parse().unwrap()
}

const SUMS: &str = "select cast(sum(billed_cost) as varchar) as billed, cast(sum(effective_cost) as varchar) as effective, \
                    count(*) as n from billing_lines";

#[test]
fn the_real_focus_sample_sums_to_the_cent_and_lands_once() {
    let Some(path) = shared("focus-sample-data/focus_sample.csv") else {
        return;
    };
    let (billed, effective) = csv_sums(&path);
    // Worked out with Python's decimal module over the same file: 20.52022672899 and 14.97651418586.
    assert_eq!(
        (billed.to_string(), effective.to_string()),
        ("20.52022672899".into(), "14.97651418586".into())
    );
    for ledger in ledgers() {
        let out = ledger.ingest_ok("focus", &path, &[]);
        assert!(out.contains("landed 1000 rows into billing_lines"), "{out}");
        let row = &ledger.sql(SUMS)[0];
        assert_eq!(
            (decimal(&row["billed"]), decimal(&row["effective"])),
            (billed, effective),
            "[{}]",
            ledger.backend
        );
        assert_eq!(row["n"], 1000);

        let again = ledger.ingest_ok("focus", &path, &[]);
        assert!(
            again.contains("identical to the active delivery: nothing changed"),
            "{again}"
        );
        let row = &ledger.sql(SUMS)[0];
        assert_eq!(
            (
                decimal(&row["billed"]),
                decimal(&row["effective"]),
                row["n"].as_i64()
            ),
            (billed, effective, Some(1000))
        );

        let providers = ledger
            .sql("select provider_name, count(*) as n from billing_lines group by 1 order by 1");
        assert_eq!(
            providers,
            [
                json!({"provider_name": "AWS", "n": 942}),
                json!({"provider_name": "Microsoft", "n": 51}),
                json!({"provider_name": "Oracle", "n": 7})
            ]
        );
    }
}

const HEADER: &str = "BillingAccountId,BillingAccountName,BillingCurrency,BillingPeriodStart,BillingPeriodEnd,\
ChargePeriodStart,ChargePeriodEnd,ChargeCategory,ChargeClass,ChargeDescription,BilledCost,EffectiveCost,ListCost,\
ContractedCost,PricingQuantity,PricingUnit,ProviderName,PublisherName,InvoiceIssuerName,ServiceCategory,ServiceName,ResourceId\n";

fn line(account: &str, period: &str, day: u32, cost: &str, resource: &str) -> String {
    let next = if period == "2026-09" {
        "2026-10"
    } else {
        "2026-11"
    };
    format!(
        "{account},Acct,USD,{period}-01T00:00:00Z,{next}-01T00:00:00Z,{period}-{day:02}T00:00:00Z,{period}-{:02}T00:00:00Z,\
         Usage,,GPU node,{cost},{cost},{cost},{cost},24,Hours,Cloud,Cloud,Cloud,Compute,Compute,{resource}\n",
        day + 1
    )
}

#[test]
fn a_corrected_delivery_replaces_its_billing_period_only() {
    for ledger in ledgers() {
        let dir = ledger.dir.path();
        // First delivery: account A September (100 + 50), account A October (7), account B September (20).
        let first = dir.join("first.csv");
        std::fs::write(
            &first,
            [
                HEADER.to_string(),
                line("A", "2026-09", 1, "100.00", "i-1"),
                line("A", "2026-09", 2, "50.00", "i-1"),
                line("A", "2026-10", 1, "7.00", "i-1"),
                line("B", "2026-09", 1, "20.00", "i-2"),
            ]
            .concat(),
        )
        .unwrap();
        ledger.ingest_ok("focus", &first, &[]);
        assert_eq!(
            ledger.scalar("select cast(sum(effective_cost) as double) from billing_lines"),
            177.0
        );

        // The provider restates account A's September: one line of 120 replaces 100 + 50.
        let corrected = dir.join("corrected.csv");
        std::fs::write(
            &corrected,
            [HEADER.to_string(), line("A", "2026-09", 1, "120.00", "i-1")].concat(),
        )
        .unwrap();
        let out = ledger.ingest_ok("focus", &corrected, &[]);
        assert!(out.contains("2 rows of an earlier delivery"), "{out}");
        // 120 (A Sept, restated) + 7 (A Oct, untouched) + 20 (B Sept, untouched) = 147.
        assert_eq!(
            ledger.scalar("select cast(sum(effective_cost) as double) from billing_lines"),
            147.0
        );
        let by_scope = ledger.sql(
            "select billing_account_id as a, date_part('month', billing_period_start) as m, cast(sum(billed_cost) as double) as c \
             from billing_lines group by 1, 2 order by 1, 2",
        );
        assert_eq!(
            by_scope,
            [
                json!({"a": "A", "m": 9, "c": 120.0}),
                json!({"a": "A", "m": 10, "c": 7.0}),
                json!({"a": "B", "m": 9, "c": 20.0})
            ]
        );
        assert_eq!(
            ledger.scalar("select count(*) from system.files where not active"),
            2,
            "A/Sept's two day files are retired, not deleted"
        );
    }
}

/// The balance line of `ledger build` for 2026-11-02 of the worked example.
fn build_day(ledger: &crate::support::Ledger) -> String {
    let out = ledger.run(&[
        "ledger",
        "build",
        "--from",
        "2026-11-02",
        "--to",
        "2026-11-02",
    ]);
    assert!(out.status.success(), "{}", crate::support::describe(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn an_earlier_bill_delivered_again_after_a_newer_one_wins_again() {
    for ledger in ledgers() {
        // A: the worked example's November bill (n1 96.00 + transfer 9.00 + bucket 6.00).
        crate::golden::load_worked_example(&ledger);
        let a = crate::golden::example("billing.csv");
        // B: the same account and period restated, n1 at 120.00.
        let b = ledger.dir.path().join("restated.csv");
        let text = std::fs::read_to_string(&a).unwrap();
        std::fs::write(&b, text.replace(",96.00,96.00,", ",120.00,120.00,")).unwrap();
        let billed = |ledger: &crate::support::Ledger| {
            decimal(&ledger.scalar(
                "select cast(sum(billed_cost) as varchar) from billing_lines \
                 where billing_account_id = 'demo-account'",
            ))
        };
        let out = ledger.ingest_ok("focus", &b, &[]);
        assert!(out.contains("3 rows of an earlier delivery"), "{out}");
        assert_eq!(billed(&ledger), "135".parse::<Decimal>().unwrap());
        assert!(build_day(&ledger).contains("billed 135.00"));

        // A again, byte for byte: the latest delivery of the period is A's, whatever batch
        // first landed those bytes. 111.00 = 96 + 9 + 6.
        let out = ledger.ingest_ok("focus", &a, &[]);
        assert!(
            out.contains(
                "re-delivery of an earlier delivery (batch 2026" // the batch id's date
            ) && out.contains("active again, 3 rows restored, 3 rows replaced"),
            "[{}] {out}",
            ledger.backend
        );
        assert_eq!(billed(&ledger), "111".parse::<Decimal>().unwrap());
        assert_eq!(ledger.scalar("select count(*) from billing_lines"), 3);
        // The ledger sees the change: 111.00 billed + 4.80 manual + 2.40 rate card.
        let out = build_day(&ledger);
        assert!(
            out.contains(
                "billed 111.00 + manual 4.80 + rate card 2.40 = accounted 118.20 (balanced)"
            ),
            "[{}] {out}",
            ledger.backend
        );

        // A once more: identical to the active delivery, nothing changes, nothing to rebuild.
        let out = ledger.ingest_ok("focus", &a, &[]);
        assert!(
            out.contains("identical to the active delivery: nothing changed"),
            "{out}"
        );
        assert_eq!(billed(&ledger), "111".parse::<Decimal>().unwrap());
        assert!(build_day(&ledger).contains("ledger is up to date"));
    }
}

#[test]
fn over_http_a_redelivery_says_whether_it_changed_anything() {
    for ledger in ledgers() {
        let collector = ledger.token("ingest", None);
        let server = ledger.serve(&[]);
        let post = |body: String| -> serde_json::Value {
            let response = server
                .http
                .post(server.url("/v1/ingest/focus"))
                .bearer_auth(&collector)
                .body(body)
                .send()
                .unwrap();
            assert_eq!(response.status().as_u16(), 202);
            response.json().unwrap()
        };
        // A: account A's September, 100 + 50; B: the same period restated, 120.
        let a = [
            HEADER.to_string(),
            line("A", "2026-09", 1, "100.00", "i-1"),
            line("A", "2026-09", 2, "50.00", "i-1"),
        ]
        .concat();
        let b = [HEADER.to_string(), line("A", "2026-09", 1, "120.00", "i-1")].concat();
        let first = post(a.clone());
        assert_eq!(
            (&first["outcome"], &first["message"]),
            (&json!("landed"), &json!("landed 2 rows"))
        );
        assert_eq!(post(b)["rows_replaced"], 2);
        let again = post(a.clone());
        let expected = format!(
            "re-delivery of an earlier delivery (batch {}): active again, 2 rows restored, 1 rows replaced",
            first["batch_id"].as_str().unwrap()
        );
        assert_eq!(
            (
                &again["outcome"],
                &again["message"],
                &again["rows_replaced"]
            ),
            (&json!("reactivated"), &json!(expected), &json!(1)),
            "[{}] {again}",
            ledger.backend
        );
        assert_eq!(again["batch_id"], first["batch_id"]);
        let same = post(a);
        assert_eq!(
            (&same["outcome"], &same["duplicate"]),
            (&json!("unchanged"), &json!(true))
        );
        assert_eq!(
            ledger.scalar("select cast(sum(billed_cost) as double) from billing_lines"),
            150.0
        );
    }
}

#[test]
fn an_export_without_mandatory_columns_says_which_it_lacks() {
    let ledger = ledgers().remove(0);
    let dir = tempfile::tempdir().unwrap();
    // Without a ChargePeriodEnd column no line has a period: the file is not FOCUS.
    let bare = dir.path().join("bare.csv");
    std::fs::write(
        &bare,
        "ChargePeriodStart,BilledCost,EffectiveCost\n2026-11-02T00:00:00Z,1,1\n",
    )
    .unwrap();
    let out = ledger.run(&["ingest", "focus", bare.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("not a FOCUS file: missing mandatory columns ChargePeriodEnd"),
        "{stderr}"
    );
    assert_eq!(ledger.scalar("select count(*) from billing_lines"), 0);

    // With it the line lands, and every other Mandatory column it lacks is named.
    let four = dir.path().join("four.csv");
    std::fs::write(
        &four,
        "ChargePeriodStart,ChargePeriodEnd,BilledCost,EffectiveCost\n\
         2026-11-02T00:00:00Z,2026-11-02T01:00:00Z,1,1\n",
    )
    .unwrap();
    let lacks = "the input lacks the FOCUS Mandatory columns BillingAccountId, BillingAccountName, \
                 BillingCurrency, BillingPeriodStart, BillingPeriodEnd, ChargeCategory, ChargeClass, \
                 ChargeDescription, ListCost, ContractedCost, PricingQuantity, PricingUnit, \
                 ProviderName, PublisherName, InvoiceIssuerName, ServiceCategory, ServiceName";
    let out = ledger.ingest_ok("focus", &four, &[]);
    assert!(out.contains("landed 1 rows into billing_lines"), "{out}");
    assert!(
        out.contains(&format!("  {lacks}: null in every row")),
        "{out}"
    );

    let collector = ledger.token("ingest", None);
    let server = ledger.serve(&[]);
    let response = server
        .http
        .post(server.url("/v1/ingest/focus"))
        .bearer_auth(&collector)
        .body(
            "ChargePeriodStart,ChargePeriodEnd,BilledCost,EffectiveCost,BillingCurrency\n\
             2026-11-03T00:00:00Z,2026-11-03T01:00:00Z,2,2,USD\n",
        )
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 202);
    let body: serde_json::Value = response.json().unwrap();
    assert_eq!(
        body["missing_columns"].as_array().unwrap().len(),
        16,
        "{body}"
    );
    assert_eq!(body["missing_columns"][0], "BillingAccountId");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("landed 1 rows; the input lacks the FOCUS Mandatory columns BillingAccountId, BillingAccountName, BillingPeriodStart"),
        "{body}"
    );
}

/// The provider-native samples land through the binary as FOCUS lines, once; a later delivery
/// of the same account and billing period (AWS's month-to-date CUR, here the sample's first 100
/// lines again as a new file) replaces the whole earlier one.
#[test]
fn provider_native_bills_land_once_and_a_redelivery_replaces_its_period() {
    let (Some(cur), Some(ea)) = (
        shared("focus_converters/sample-anonymous-aws-export-dataset.csv"),
        shared("focus_converters/sample-anonymous-ea-export-dataset.csv"),
    ) else {
        return;
    };
    for ledger in ledgers() {
        let out = ledger.ingest_ok("aws-cur", &cur, &[]);
        assert!(out.contains("landed 1281 rows into billing_lines"), "{out}");
        let out = ledger.ingest_ok("azure-ea", &ea, &[]);
        assert!(out.contains("landed 27 rows into billing_lines"), "{out}");
        let by_currency = "select billing_currency, cast(sum(billed_cost) as varchar) as billed, \
                           cast(sum(effective_cost) as varchar) as effective, count(*) as n \
                           from billing_lines group by 1 order by 1";
        // Python's decimal module on the files: AWS 1.6823086974 (USD); Azure 1.261369265057
        // (CAD) once its two values beyond 12 decimals are rounded half to even.
        assert_eq!(
            ledger.sql(by_currency),
            [
                json!({"billing_currency": "CAD", "billed": "1.261369265057", "effective": "1.261369265057", "n": 27}),
                json!({"billing_currency": "USD", "billed": "1.682308697400", "effective": "1.682308697400", "n": 1281}),
            ],
            "[{}]",
            ledger.backend
        );
        let again = ledger.ingest_ok("aws-cur", &cur, &[]);
        assert!(again.contains("nothing changed"), "{again}");

        let text = std::fs::read_to_string(&cur).unwrap();
        let partial: String = text.lines().take(101).map(|l| format!("{l}\n")).collect();
        let redelivery = ledger.dir.path().join("cur-redelivered.csv");
        std::fs::write(&redelivery, partial).unwrap();
        let out = ledger.ingest_ok("aws-cur", &redelivery, &[]);
        assert!(
            out.contains("landed 100 rows into billing_lines")
                && out.contains("restated: 1281 rows of an earlier delivery"),
            "{out}"
        );
        let usd = "select count(*) as n from billing_lines where billing_currency = 'USD'";
        assert_eq!(ledger.sql(usd)[0]["n"], 100);
        let cad = "select count(*) as n from billing_lines where billing_currency = 'CAD'";
        assert_eq!(ledger.sql(cad)[0]["n"], 27);
    }
}
