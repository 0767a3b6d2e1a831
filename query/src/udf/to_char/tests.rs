use datafusion::logical_expr::ScalarUDF;
use datafusion::prelude::SessionContext;

use super::*;

fn session() -> SessionContext {
    let ctx = SessionContext::new();
    ctx.register_udf(ScalarUDF::new_from_impl(ToChar::default()));
    ctx
}

/// `to_char(<time>, <format>)` for each format, as one row of text.
async fn formats(time: &str, formats: &[&str]) -> Vec<Option<String>> {
    let ctx = session();
    let mut out = Vec::new();
    for format in formats {
        let sql = format!(
            "select to_char({time}, '{}') as t",
            format.replace('\'', "''")
        );
        let batches = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
        let column = batches[0].column(0);
        let text = cast(column, &DataType::Utf8).unwrap();
        let text = text.as_string::<i32>();
        out.push(text.is_valid(0).then(|| text.value(0).to_string()));
    }
    out
}

/// Monday 2 November 2026, 09:05:07.123456 UTC: day 306 of the year, ISO week 45, Julian day
/// 2461347 (Python: `date(2026, 11, 2).toordinal() + 1721425`).
const MONDAY: &str =
    "arrow_cast('2026-11-02T09:05:07.123456Z', 'Timestamp(Microsecond, Some(\"UTC\"))')";

#[tokio::test]
async fn numeric_patterns_are_zero_padded_unless_fm() {
    let cases = [
        ("YYYY-MM-DD HH24:MI:SS", "2026-11-02 09:05:07"),
        ("yyyy-mm-dd hh24:mi", "2026-11-02 09:05"),
        ("HH12:MI AM", "09:05 AM"),
        ("FMHH12 pm", "9 am"),
        ("MS US", "123 123456"),
        ("DDD D ID W WW IW Q CC", "306 2 1 1 44 45 4 21"),
        ("J", "2461347"),
        ("IYYY YY Y", "2026 26 6"),
        ("Y,YYY", "2,026"),
        ("SSSS", "32707"),
        ("DDth FMDDth FMDDTH FMMMth", "02nd 2nd 2ND 11th"),
    ];
    let (formats_, expected): (Vec<&str>, Vec<&str>) = cases.into_iter().unzip();
    let got = formats(MONDAY, &formats_).await;
    let expected: Vec<Option<String>> = expected.iter().map(|e| Some(e.to_string())).collect();
    assert_eq!(got, expected);
}

#[tokio::test]
async fn names_take_their_case_from_the_pattern_and_pad_to_nine() {
    let got = formats(
        MONDAY,
        &[
            "Month|",
            "FMMonth|",
            "MONTH|",
            "month|",
            "Mon MON mon",
            "Day|",
            "FMDay DY dy",
            "RM|",
            "FMrm",
        ],
    )
    .await;
    let expected = [
        "November |",
        "November|",
        "NOVEMBER |",
        "november |",
        "Nov NOV nov",
        "Monday   |",
        "Monday MON mon",
        "XI  |",
        "xi",
    ];
    assert_eq!(got, expected.map(|e| Some(e.to_string())));
}

#[tokio::test]
async fn quoted_text_and_unknown_letters_are_copied() {
    let got = formats(
        MONDAY,
        &[
            r#""Quarter" Q, "week" IW"#,
            r#"YYYY"T"HH24"#,
            r#"YYYY\YMM"#,
            "x-y!",
            "YYYY AD b.c.",
        ],
    )
    .await;
    let expected = [
        "Quarter 4, week 45",
        "2026T09",
        "2026Y11",
        "x-6!",
        "2026 AD a.d.",
    ];
    assert_eq!(got, expected.map(|e| Some(e.to_string())));
}

#[tokio::test]
async fn a_zone_writes_its_wall_clock_abbreviation_and_offset() {
    let berlin = "arrow_cast(arrow_cast('2026-11-02T09:05:00Z', 'Timestamp(Microsecond, Some(\"UTC\"))'), 'Timestamp(Microsecond, Some(\"Europe/Berlin\"))')";
    let kolkata = "arrow_cast(arrow_cast('2026-11-02T09:05:00Z', 'Timestamp(Microsecond, Some(\"UTC\"))'), 'Timestamp(Microsecond, Some(\"Asia/Kolkata\"))')";
    assert_eq!(
        formats(berlin, &["HH24:MI TZ OF TZH TZM tz"]).await,
        [Some("10:05 CET +01 +01 00 cet".to_string())]
    );
    assert_eq!(
        formats(kolkata, &["HH24:MI OF"]).await,
        [Some("14:35 +05:30".to_string())]
    );
    // Without a zone, TZ and OF write nothing (PostgreSQL's `timestamp`).
    let naive = "arrow_cast('2026-11-02T09:05:00', 'Timestamp(Microsecond, None)')";
    assert_eq!(
        formats(naive, &["HH24:MI[TZ][OF]"]).await,
        [Some("09:05[][]".to_string())]
    );
}

#[tokio::test]
async fn dates_nulls_and_chrono_formats() {
    assert_eq!(
        formats("date '2000-01-01'", &["J FMDay", "%Y/%m/%d"]).await,
        [Some("2451545 Saturday".into()), Some("2000/01/01".into())]
    );
    assert_eq!(
        formats(
            "arrow_cast(NULL, 'Timestamp(Microsecond, None)')",
            &["YYYY"]
        )
        .await,
        [None]
    );
}

#[tokio::test]
async fn a_time_of_day_needs_a_chrono_format() {
    let ctx = session();
    let error = ctx
        .sql("select to_char(arrow_cast('09:05:00', 'Time64(Microsecond)'), 'HH24:MI')")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("format a time of day with a chrono format"),
        "{error}"
    );
    let batches = ctx
        .sql("select to_char(arrow_cast('09:05:00', 'Time64(Microsecond)'), '%H:%M') as t")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(batches[0].column(0).as_string::<i32>().value(0), "09:05");
}
