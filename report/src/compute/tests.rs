use super::*;

#[test]
fn a_monthly_budget_is_prorated_over_the_weeks_days() {
    // W45 (11-02 … 11-08) lies in November (30 days): 3,000 × 7 / 30 = 700.
    assert!((prorated(3000.0, "2026-W45".parse().unwrap()) - 700.0).abs() < 1e-9);
    // W44 (10-26 … 11-01): six October days at 3,100 / 31 = 100 and one November day at 3,000 /
    // 30 = 100: 700 again, each day at its own month's rate.
    let w44 = prorated(3100.0, "2026-W44".parse().unwrap());
    assert!((w44 - (6.0 * 100.0 + 3100.0 / 30.0)).abs() < 1e-9, "{w44}");
    assert_eq!(
        days_in_month(NaiveDate::from_ymd_opt(2028, 2, 10).unwrap()),
        29
    );
}
