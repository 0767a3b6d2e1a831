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
        assert!(again.contains("already ingested"), "{again}");
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
