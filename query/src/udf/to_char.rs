//! `to_char(time, format)`: PostgreSQL's template patterns (`'YYYY-MM-DD HH24:MI'`), and
//! DataFusion's chrono formats (`'%Y-%m-%d'`) as before.
//!
//! DataFusion's `to_char` reads only chrono's `%` specifiers, so the PostgreSQL template that
//! psql, Grafana and every PostgreSQL client write came back as its own literal text. A format
//! with a `%` in it is still DataFusion's; any other is a PostgreSQL template, formatted here as
//! PostgreSQL formats it (zero padding, names padded to 9, `FM` to drop padding, `TH` for
//! ordinals, `"quoted"` text); letters that are no pattern are copied as text, as in
//! PostgreSQL. A time of day takes a chrono format only: PostgreSQL's templates are for dates and
//! timestamps here, and asked of a time they are an error, never a wrong answer.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use arrow::compute::cast;
use arrow::datatypes::{DataType, TimeUnit, TimestampMicrosecondType};
use chrono::{DateTime, Datelike, NaiveDateTime, Offset, Timelike};
use chrono_tz::Tz;
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::error::DataFusionError;
use datafusion::functions::datetime::to_char::ToCharFunc;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature,
};
use datafusion_macros::user_doc;

#[user_doc(
    doc_section(label = "Time and Date Functions"),
    description = "A date or time as text. `format` is a PostgreSQL template (`YYYY`, `MM`, \
        `DD`, `HH24`, `HH12`, `MI`, `SS`, `MS`, `US`, `AM`, `Month`, `Mon`, `Day`, `Dy`, \
        `DDD`, `D`, `ID`, `W`, `WW`, `IW`, `IYYY`, `Q`, `CC`, `J`, `RM`, `TZ`, `OF`, with the \
        `FM` prefix and the `TH` suffix) or, when it holds a `%`, a chrono format as in \
        DataFusion. Times with a zone are written in that zone.",
    syntax_example = "to_char(time, format)",
    sql_example = r#"```sql
> select to_char(timestamp '2026-11-02T09:05:00Z', 'YYYY-MM-DD HH24:MI') as pg,
         to_char(timestamp '2026-11-02T09:05:00Z', 'FMDay, FMDDth FMMonth') as words,
         to_char(timestamp '2026-11-02T09:05:00Z', '%Y/%m/%d') as chrono;
+------------------+----------------------+------------+
| pg               | words                | chrono     |
+------------------+----------------------+------------+
| 2026-11-02 09:05 | Monday, 2nd November | 2026/11/02 |
+------------------+----------------------+------------+
```"#,
    argument(
        name = "time",
        description = "A timestamp (with or without a zone), date or time."
    ),
    argument(
        name = "format",
        description = "A PostgreSQL template, or a chrono format with `%` specifiers."
    )
)]
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct ToChar {
    inner: ToCharFunc,
}

impl ScalarUDFImpl for ToChar {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [time, format] = args.args.as_slice() else {
            return exec_err!("to_char takes a time and a format");
        };
        let template = match format {
            ColumnarValue::Scalar(ScalarValue::Utf8(Some(format))) if !format.contains('%') => {
                Template::parse(format)?
            }
            // A chrono format, a NULL format or one per row: DataFusion's.
            _ => return self.inner.invoke_with_args(args),
        };
        if matches!(time.data_type(), DataType::Time32(_) | DataType::Time64(_)) {
            return exec_err!(
                "to_char: a PostgreSQL template formats dates and timestamps; format a time of \
                 day with a chrono format such as '%H:%M:%S'"
            );
        }
        let rows = args.number_rows;
        let array = time.to_array(rows)?;
        let zone = match array.data_type() {
            DataType::Timestamp(_, Some(zone)) => Some(zone.parse::<Tz>().map_err(|error| {
                DataFusionError::Execution(format!("to_char: time zone '{zone}': {error}"))
            })?),
            _ => None,
        };
        let micros = cast(&array, &DataType::Timestamp(TimeUnit::Microsecond, None))?;
        let micros = micros.as_primitive::<TimestampMicrosecondType>();
        let mut out = StringBuilder::with_capacity(micros.len(), micros.len() * 16);
        let mut text = String::new();
        for value in micros {
            let Some(value) = value else {
                out.append_null();
                continue;
            };
            let Some(utc) = DateTime::from_timestamp_micros(value) else {
                return exec_err!("to_char: {value} µs is outside the dates it can write");
            };
            text.clear();
            match zone {
                Some(zone) => template.write(&utc.with_timezone(&zone), &mut text),
                None => template.write(&Naive(utc.naive_utc()), &mut text),
            }
            out.append_value(&text);
        }
        let out: ArrayRef = Arc::new(out.finish());
        Ok(match time {
            ColumnarValue::Scalar(_) => {
                ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
            }
            ColumnarValue::Array(_) => ColumnarValue::Array(out),
        })
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.doc()
    }
}

/// What a template needs of a time: its wall clock, and its zone when it has one.
trait WallClock {
    fn local(&self) -> NaiveDateTime;
    /// The zone's abbreviation and its offset from UTC in seconds; `None` without a zone.
    fn zone(&self) -> Option<(String, i32)>;
}

impl WallClock for DateTime<Tz> {
    fn local(&self) -> NaiveDateTime {
        self.naive_local()
    }

    fn zone(&self) -> Option<(String, i32)> {
        let offset = self.offset();
        Some((
            self.format("%Z").to_string(),
            offset.fix().local_minus_utc(),
        ))
    }
}

/// A time without a zone (PostgreSQL's `timestamp`): `TZ` and `OF` write nothing.
struct Naive(NaiveDateTime);

impl WallClock for Naive {
    fn local(&self) -> NaiveDateTime {
        self.0
    }

    fn zone(&self) -> Option<(String, i32)> {
        None
    }
}

/// Which letters of a name pattern are capitals: `MONTH`, `Month`, `month`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Case {
    Upper,
    Capitalized,
    Lower,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Field {
    Hour24,
    Hour12,
    Minute,
    Second,
    Millisecond,
    Microsecond,
    SecondsOfDay,
    Meridiem { dots: bool, case: Case },
    Era { dots: bool, case: Case },
    Year(usize),
    YearWithComma,
    IsoYear(usize),
    MonthName(Case),
    MonthAbbrev(Case),
    Month,
    DayName(Case),
    DayAbbrev(Case),
    DayOfYear,
    IsoDayOfYear,
    DayOfMonth,
    DayOfWeekFromSunday,
    IsoDayOfWeek,
    WeekOfMonth,
    WeekOfYear,
    IsoWeek,
    Century,
    JulianDay,
    Quarter,
    RomanMonth(Case),
    ZoneAbbrev(Case),
    ZoneHours,
    ZoneMinutes,
    Offset,
}

/// One piece of a template.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Field {
        field: Field,
        /// `FM`: no padding.
        fill: bool,
        /// `TH` or `th`: an ordinal suffix, upper- or lower-case.
        ordinal: Option<Case>,
    },
}

/// The patterns, longest first where one begins another. Numeric patterns match in any case;
/// names in the three spellings that set their case.
const PATTERNS: &[(&str, Field)] = &[
    ("HH24", Field::Hour24),
    ("HH12", Field::Hour12),
    ("HH", Field::Hour12),
    ("MI", Field::Minute),
    ("SSSSS", Field::SecondsOfDay),
    ("SSSS", Field::SecondsOfDay),
    ("SS", Field::Second),
    ("MS", Field::Millisecond),
    ("US", Field::Microsecond),
    ("Y,YYY", Field::YearWithComma),
    ("YYYY", Field::Year(4)),
    ("YYY", Field::Year(3)),
    ("YY", Field::Year(2)),
    ("Y", Field::Year(1)),
    ("IYYY", Field::IsoYear(4)),
    ("IYY", Field::IsoYear(3)),
    ("IY", Field::IsoYear(2)),
    ("IDDD", Field::IsoDayOfYear),
    ("ID", Field::IsoDayOfWeek),
    ("IW", Field::IsoWeek),
    ("I", Field::IsoYear(1)),
    ("MM", Field::Month),
    ("DDD", Field::DayOfYear),
    ("DD", Field::DayOfMonth),
    ("D", Field::DayOfWeekFromSunday),
    ("WW", Field::WeekOfYear),
    ("W", Field::WeekOfMonth),
    ("CC", Field::Century),
    ("J", Field::JulianDay),
    ("Q", Field::Quarter),
    ("OF", Field::Offset),
];

/// Name patterns: (upper-case spelling, what each case gives).
const NAMES: &[(&str, fn(Case) -> Field)] = &[
    ("MONTH", Field::MonthName),
    ("MON", Field::MonthAbbrev),
    ("DAY", Field::DayName),
    ("DY", Field::DayAbbrev),
    ("RM", Field::RomanMonth),
    ("TZ", Field::ZoneAbbrev),
];

/// Meridiem and era markers: `AM` and `PM` both write the time's own, `AD` and `BC` its era.
const MARKERS: &[(&str, bool, Case)] = &[
    ("A.M.", true, Case::Upper),
    ("P.M.", true, Case::Upper),
    ("a.m.", true, Case::Lower),
    ("p.m.", true, Case::Lower),
    ("AM", false, Case::Upper),
    ("PM", false, Case::Upper),
    ("am", false, Case::Lower),
    ("pm", false, Case::Lower),
    ("A.D.", true, Case::Upper),
    ("B.C.", true, Case::Upper),
    ("a.d.", true, Case::Lower),
    ("b.c.", true, Case::Lower),
    ("AD", false, Case::Upper),
    ("BC", false, Case::Upper),
    ("ad", false, Case::Lower),
    ("bc", false, Case::Lower),
];

/// A parsed PostgreSQL template.
#[derive(Debug, Clone, PartialEq)]
struct Template(Vec<Piece>);

impl Template {
    fn parse(format: &str) -> Result<Self> {
        let mut pieces = Vec::new();
        let mut text = String::new();
        let mut rest = format;
        while !rest.is_empty() {
            if let Some(quoted) = rest.strip_prefix('"') {
                // "text" is copied; \" inside it is a quote.
                let mut chars = quoted.char_indices();
                let mut end = quoted.len();
                while let Some((at, c)) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some((_, escaped)) = chars.next() {
                                text.push(escaped);
                            }
                        }
                        '"' => {
                            end = at + 1;
                            break;
                        }
                        c => text.push(c),
                    }
                }
                rest = &quoted[end.min(quoted.len())..];
                continue;
            }
            if let Some(escaped) = rest.strip_prefix('\\')
                && let Some(c) = escaped.chars().next()
            {
                text.push(c);
                rest = &escaped[c.len_utf8()..];
                continue;
            }
            let (fill, after_prefix) = strip_modifiers(rest);
            if let Some((field, length)) = field_at(after_prefix) {
                let after = &after_prefix[length..];
                let (ordinal, after) = if let Some(after) = after.strip_prefix("TH") {
                    (Some(Case::Upper), after)
                } else if let Some(after) = after.strip_prefix("th") {
                    (Some(Case::Lower), after)
                } else {
                    (None, after)
                };
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(Piece::Field {
                    field,
                    fill,
                    ordinal,
                });
                rest = after;
                continue;
            }
            let c = rest.chars().next().expect("not empty");
            text.push(c);
            rest = &rest[c.len_utf8()..];
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        Ok(Self(pieces))
    }

    fn write(&self, time: &impl WallClock, out: &mut String) {
        use std::fmt::Write;
        let local = time.local();
        for piece in &self.0 {
            let (field, fill, ordinal) = match piece {
                Piece::Text(text) => {
                    out.push_str(text);
                    continue;
                }
                Piece::Field {
                    field,
                    fill,
                    ordinal,
                } => (*field, *fill, *ordinal),
            };
            let number = |value: i64, width: usize, out: &mut String| {
                if fill {
                    let _ = write!(out, "{value}");
                } else {
                    let _ = write!(out, "{value:0width$}");
                }
                if let Some(case) = ordinal {
                    out.push_str(&ordinal_suffix(value, case));
                }
            };
            let name = |name: &str, case: Case, pad: usize, out: &mut String| {
                let cased = match case {
                    Case::Upper => name.to_uppercase(),
                    Case::Lower => name.to_lowercase(),
                    Case::Capitalized => name.to_string(),
                };
                if fill {
                    out.push_str(&cased);
                } else {
                    let _ = write!(out, "{cased:<pad$}");
                }
            };
            let date = local.date();
            let hour12 = match local.hour() % 12 {
                0 => 12,
                h => h,
            };
            match field {
                Field::Hour24 => number(local.hour().into(), 2, out),
                Field::Hour12 => number(hour12.into(), 2, out),
                Field::Minute => number(local.minute().into(), 2, out),
                Field::Second => number(local.second().into(), 2, out),
                Field::Millisecond => number((local.nanosecond() / 1_000_000).into(), 3, out),
                Field::Microsecond => number((local.nanosecond() / 1_000).into(), 6, out),
                Field::SecondsOfDay => number(local.num_seconds_from_midnight().into(), 0, out),
                Field::Meridiem { dots, case } => marker(
                    local.hour() < 12,
                    ["AM", "PM", "A.M.", "P.M."],
                    dots,
                    case,
                    out,
                ),
                Field::Era { dots, case } => marker(
                    date.year() > 0,
                    ["AD", "BC", "A.D.", "B.C."],
                    dots,
                    case,
                    out,
                ),
                Field::Year(digits) => year(date.year(), digits, fill, ordinal, out),
                Field::YearWithComma => {
                    let y = date.year();
                    let _ = write!(out, "{},{:03}", y / 1000, (y % 1000).abs());
                }
                Field::IsoYear(digits) => year(date.iso_week().year(), digits, fill, ordinal, out),
                Field::MonthName(case) => name(&month_name(date.month()), case, 9, out),
                Field::MonthAbbrev(case) => name(&month_name(date.month())[..3], case, 3, out),
                Field::Month => number(date.month().into(), 2, out),
                Field::DayName(case) => name(&day_name(date.weekday()), case, 9, out),
                Field::DayAbbrev(case) => name(&day_name(date.weekday())[..3], case, 3, out),
                Field::DayOfYear => number(date.ordinal().into(), 3, out),
                Field::IsoDayOfYear => {
                    let week = i64::from(date.iso_week().week());
                    let day = i64::from(date.weekday().number_from_monday());
                    number((week - 1) * 7 + day, 3, out);
                }
                Field::DayOfMonth => number(date.day().into(), 2, out),
                Field::DayOfWeekFromSunday => {
                    number(date.weekday().number_from_sunday().into(), 1, out);
                }
                Field::IsoDayOfWeek => number(date.weekday().number_from_monday().into(), 1, out),
                Field::WeekOfMonth => number(((date.day() - 1) / 7 + 1).into(), 1, out),
                Field::WeekOfYear => number(((date.ordinal() - 1) / 7 + 1).into(), 2, out),
                Field::IsoWeek => number(date.iso_week().week().into(), 2, out),
                Field::Century => {
                    let y = date.year();
                    let century = if y > 0 {
                        (y + 99) / 100
                    } else {
                        -((99 - y) / 100)
                    };
                    number(century.into(), 2, out);
                }
                Field::JulianDay => {
                    // Days since 24 November 4714 BC (proleptic Gregorian), day 0.
                    let epoch = chrono::NaiveDate::from_ymd_opt(-4713, 11, 24).expect("a date");
                    number((date - epoch).num_days(), 0, out);
                }
                Field::Quarter => number(((date.month() - 1) / 3 + 1).into(), 1, out),
                Field::RomanMonth(case) => {
                    const ROMAN: [&str; 12] = [
                        "I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII",
                    ];
                    name(ROMAN[date.month0() as usize], case, 4, out);
                }
                Field::ZoneAbbrev(case) => {
                    if let Some((abbrev, _)) = time.zone() {
                        name(&abbrev, case, 0, out);
                    }
                }
                Field::ZoneHours => {
                    if let Some((_, offset)) = time.zone() {
                        let sign = if offset < 0 { '-' } else { '+' };
                        let _ = write!(out, "{sign}{:02}", offset.abs() / 3600);
                    }
                }
                Field::ZoneMinutes => {
                    if let Some((_, offset)) = time.zone() {
                        let _ = write!(out, "{:02}", offset.abs() % 3600 / 60);
                    }
                }
                Field::Offset => {
                    if let Some((_, offset)) = time.zone() {
                        let sign = if offset < 0 { '-' } else { '+' };
                        let (hours, minutes) = (offset.abs() / 3600, offset.abs() % 3600 / 60);
                        let _ = write!(out, "{sign}{hours:02}");
                        if minutes != 0 {
                            let _ = write!(out, ":{minutes:02}");
                        }
                    }
                }
            }
        }
    }
}

/// `FM` (fill mode) and the prefixes that change nothing here (`FX`, `TM`), in any order.
fn strip_modifiers(mut rest: &str) -> (bool, &str) {
    let mut fill = false;
    loop {
        let upper = rest.get(..2).map(str::to_ascii_uppercase);
        match upper.as_deref() {
            Some("FM") if field_at(&rest[2..]).is_some() => fill = true,
            Some("FX" | "TM") if field_at(&rest[2..]).is_some() => {}
            _ => return (fill, rest),
        }
        rest = &rest[2..];
    }
}

/// The field a template pattern at the start of `rest` stands for, and its length.
fn field_at(rest: &str) -> Option<(Field, usize)> {
    // `TZH` and `TZM` before the name `TZ`.
    for (pattern, field) in [("TZH", Field::ZoneHours), ("TZM", Field::ZoneMinutes)] {
        if rest
            .get(..3)
            .is_some_and(|head| head.eq_ignore_ascii_case(pattern))
        {
            return Some((field, 3));
        }
    }
    for (spelling, dots, case) in MARKERS {
        if rest.starts_with(spelling) {
            let (dots, case) = (*dots, *case);
            let era = matches!(spelling.as_bytes()[0], b'A' | b'a' | b'B' | b'b')
                && !spelling.eq_ignore_ascii_case("am")
                && !spelling.eq_ignore_ascii_case("a.m.");
            let field = if era {
                Field::Era { dots, case }
            } else {
                Field::Meridiem { dots, case }
            };
            return Some((field, spelling.len()));
        }
    }
    for (upper, field) in NAMES {
        let Some(head) = rest.get(..upper.len()) else {
            continue;
        };
        let capitalized = format!("{}{}", &upper[..1], upper[1..].to_lowercase());
        let case = if head == *upper {
            Case::Upper
        } else if head == capitalized {
            Case::Capitalized
        } else if head == upper.to_lowercase() {
            Case::Lower
        } else {
            continue;
        };
        // `MONTH` before `MON`, `MON` before `MI`…; `DAY` before `DD`; `DY` before `D`.
        return Some((field(case), upper.len()));
    }
    PATTERNS.iter().find_map(|(pattern, field)| {
        let head = rest.get(..pattern.len())?;
        head.eq_ignore_ascii_case(pattern)
            .then_some((*field, pattern.len()))
    })
}

/// A two-valued marker (`AM`/`PM`, `AD`/`BC`): `spellings` are the first and the second
/// without dots, then with them.
fn marker(first: bool, spellings: [&str; 4], dots: bool, case: Case, out: &mut String) {
    let text = spellings[usize::from(!first) + 2 * usize::from(dots)];
    if case == Case::Lower {
        out.push_str(&text.to_lowercase());
    } else {
        out.push_str(text);
    }
}

fn year(year: i32, digits: usize, fill: bool, ordinal: Option<Case>, out: &mut String) {
    use std::fmt::Write;
    let modulus = 10_i64.pow(digits as u32);
    let value = if digits >= 4 {
        i64::from(year)
    } else {
        i64::from(year).rem_euclid(modulus)
    };
    if fill {
        let _ = write!(out, "{value}");
    } else {
        let _ = write!(out, "{value:0digits$}");
    }
    if let Some(case) = ordinal {
        out.push_str(&ordinal_suffix(value, case));
    }
}

fn ordinal_suffix(value: i64, case: Case) -> String {
    let suffix = match (value.abs() % 100, value.abs() % 10) {
        (11..=13, _) => "th",
        (_, 1) => "st",
        (_, 2) => "nd",
        (_, 3) => "rd",
        _ => "th",
    };
    if case == Case::Upper {
        suffix.to_uppercase()
    } else {
        suffix.to_string()
    }
}

fn month_name(month: u32) -> String {
    chrono::Month::try_from(month as u8)
        .map(|m| m.name().to_string())
        .unwrap_or_default()
}

fn day_name(day: chrono::Weekday) -> String {
    [
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
    ][day.num_days_from_monday() as usize]
        .to_string()
}

#[cfg(test)]
mod tests;
