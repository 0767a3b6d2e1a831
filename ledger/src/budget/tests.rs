use chrono::{DateTime, Utc};

use super::*;

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

#[test]
fn a_month_is_its_calendar_bounds_in_utc() {
    let november = Month::of(at("2026-11-02T12:00:00Z"));
    assert_eq!(november.label, "2026-11");
    assert_eq!(
        november.start,
        at("2026-11-01T00:00:00Z").timestamp_micros()
    );
    assert_eq!(november.end, at("2026-12-01T00:00:00Z").timestamp_micros());
    // December rolls over into the next year; an offset is read in UTC first.
    let december = Month::of(at("2027-01-01T00:30:00+01:00"));
    assert_eq!(december.label, "2026-12");
    assert_eq!(december.end, at("2027-01-01T00:00:00Z").timestamp_micros());
    assert_eq!(Month::of(at("0001-01-01T00:00:00Z")).label, "0001-01");
}

#[test]
fn forecast_runs_the_spend_on_to_month_end() {
    // November has 30 days; 2 of them elapsed by Nov 3 00:00. 40.728 in 2 days is 20.364 a day,
    // × 30 = 610.92. 40.728 of 100 is 40.728 %: no threshold, but the forecast passes the amount.
    let november = Month::of(at("2026-11-03T00:00:00Z"));
    let s = status(
        100.0,
        &DEFAULT_THRESHOLDS,
        &november,
        at("2026-11-03T00:00:00Z").timestamp_micros(),
        40.728,
    );
    assert!((s.forecast - 610.92).abs() < 1e-9, "{s:?}");
    assert!((s.percent_used - 40.728).abs() < 1e-9);
    assert_eq!(s.thresholds_crossed, Vec::<f64>::new());
    assert_eq!(s.state, BudgetState::Warn);
}

#[test]
fn state_follows_thresholds_and_the_amount() {
    // Half the month (15 of 30 days) gone: the forecast is twice the spend.
    let november = Month::of(at("2026-11-16T00:00:00Z"));
    let half = at("2026-11-16T00:00:00Z").timestamp_micros();
    let of_1000 = |spend| status(1000.0, &DEFAULT_THRESHOLDS, &november, half, spend);

    // 300 of 1000: 30 %, forecast 600 — ok.
    let s = of_1000(300.0);
    assert_eq!((s.forecast, s.state), (600.0, BudgetState::Ok));
    // 499.99: forecast 999.98, still below the amount and the first threshold.
    assert_eq!(of_1000(499.99).state, BudgetState::Ok);
    // 500: 50 % reached exactly — crossed, warn.
    let s = of_1000(500.0);
    assert_eq!(
        (s.thresholds_crossed, s.state),
        (vec![50.0], BudgetState::Warn)
    );
    // 850: 85 %, 50 and 80 crossed.
    assert_eq!(of_1000(850.0).thresholds_crossed, vec![50.0, 80.0]);
    // 1000: every default threshold, and over.
    let s = of_1000(1000.0);
    assert_eq!(
        (s.thresholds_crossed, s.state),
        (vec![50.0, 80.0, 100.0], BudgetState::Over)
    );
}

#[test]
fn over_does_not_need_a_threshold_of_100() {
    // Thresholds [120] only: 110 % of 100 is over the amount without crossing a threshold.
    let november = Month::of(at("2026-11-30T00:00:00Z"));
    let s = status(100.0, &[120.0], &november, november.end - 1, 110.0);
    assert_eq!(s.state, BudgetState::Over);
    assert!(s.thresholds_crossed.is_empty());
}

#[test]
fn at_the_first_instant_the_forecast_is_the_spend() {
    let november = Month::of(at("2026-11-01T00:00:00Z"));
    let s = status(10.0, &DEFAULT_THRESHOLDS, &november, november.start, 0.0);
    assert_eq!(
        (s.forecast, s.percent_used, s.state),
        (0.0, 0.0, BudgetState::Ok)
    );
}

#[test]
fn a_budget_has_the_one_target_it_declares() {
    let spec = BudgetSpec {
        team: None,
        namespace: Some("ml".into()),
        cost_center: None,
        amount: 1.0,
        currency: "USD".into(),
        thresholds: default_thresholds(),
        webhook: None,
    };
    assert_eq!(spec.target(), Some(BudgetTarget::Namespace("ml".into())));
    let both = BudgetSpec {
        team: Some("nlp".into()),
        ..spec
    };
    assert_eq!(both.target(), None);
    assert_eq!(both.targets().len(), 2);
}

mod validation {
    use serde_json::json;

    use crate::objects::{ObjectKind, validate};

    fn error(spec: serde_json::Value) -> String {
        validate(ObjectKind::Budget, Some("b"), &spec)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_budget_is_normalised_with_its_defaults() {
        let object = validate(
            ObjectKind::Budget,
            Some("nlp-monthly"),
            &json!({"team": "nlp", "amount": 5000, "thresholds": [100, 80]}),
        )
        .unwrap();
        assert_eq!(object.name, "nlp-monthly");
        assert_eq!(
            object.spec,
            json!({"team": "nlp", "namespace": null, "cost_center": null, "amount": 5000.0,
                   "currency": "USD", "thresholds": [80.0, 100.0], "webhook": null})
        );
    }

    #[test]
    fn errors_name_the_field() {
        assert_eq!(
            error(json!({"amount": 10})),
            "spec.team: set exactly one of team, namespace, cost_center"
        );
        assert_eq!(
            error(json!({"team": "nlp", "namespace": "ml", "amount": 10})),
            "spec.namespace: set exactly one of team, namespace, cost_center (team is set)"
        );
        assert_eq!(
            error(json!({"team": "nlp", "amount": 0})),
            "spec.amount: must be a number > 0 (got 0)"
        );
        assert_eq!(
            error(json!({"team": "nlp", "amount": 1, "thresholds": [50, -1]})),
            "spec.thresholds[0]: must be a percentage > 0 and ≤ 1000 (got -1)"
        );
        assert_eq!(
            error(json!({"team": "nlp", "amount": 1, "thresholds": [80, 80]})),
            "spec.thresholds[1]: 80 is listed twice"
        );
        assert_eq!(
            error(json!({"team": "nlp", "amount": 1, "webhook": "ftp://example.com/x"})),
            "spec.webhook: must be an http:// or https:// URL with a host (got 'ftp://example.com/x')"
        );
        assert_eq!(
            error(json!({"team": "nlp", "amount": 1, "currency": "usd"})),
            "spec.currency: must be an ISO 4217 code such as USD (got 'usd')"
        );
        assert!(
            error(json!({"team": "nlp", "amount": 1, "limit": 2}))
                .starts_with("spec.limit: unknown field")
        );
    }
}
