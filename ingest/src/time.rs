//! Timestamps as the sources write them, read one way by every parser: RFC 3339 with an offset,
//! or a naive local time in the input's time zone (`--tz`, Slurm without `TZ=UTC`); and the one
//! range every landed time keeps, so an impossible time is a quarantined record, never a panic
//! further down (the lake partitions by its date). Durations read from input (kubectl's ages,
//! sacct's Elapsed) are bounded by the same range, so arithmetic on instants cannot overflow.

use chrono::{DateTime, LocalResult, NaiveDateTime, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;

/// 10000-01-01T00:00:00Z in µs. Every time a parser lands is from 1970-01-01 up to this (not
/// included): a date the lake can partition by and every client can print.
const MAX_TIME_MICROS: i64 = 253_402_300_800_000_000;

/// Whether a time, in µs since the epoch, is one the lake keeps (1970 to 9999).
pub(crate) fn is_landable(micros: i64) -> bool {
    (0..MAX_TIME_MICROS).contains(&micros)
}

/// `time` when the lake keeps it; else the reason, naming it.
pub(crate) fn landable(time: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    if is_landable(time.timestamp_micros()) {
        Ok(time)
    } else {
        Err(format!(
            "{} is outside 1970-01-01 to 9999-12-31",
            time.to_rfc3339()
        ))
    }
}

/// A duration of `seconds` read from input, if it fits in the lake's range (1970 to 9999): a
/// longer one cannot separate two landable times, and chrono panics on instants beyond its own.
pub(crate) fn duration(seconds: u64) -> Result<TimeDelta, String> {
    i64::try_from(seconds)
        .ok()
        .filter(|s| *s <= MAX_TIME_MICROS / 1_000_000)
        .and_then(TimeDelta::try_seconds)
        .ok_or_else(|| format!("{seconds} s is longer than 1970-01-01 to 9999-12-31"))
}

/// `at` less a duration read from input, when the lake keeps that time; else the reason.
pub(crate) fn before(at: DateTime<Utc>, duration: TimeDelta) -> Result<DateTime<Utc>, String> {
    at.checked_sub_signed(duration)
        .ok_or_else(|| format!("{} less {duration} is before any date", at.to_rfc3339()))
        .and_then(landable)
}

/// A timestamp: RFC 3339, or naive local time in `tz`. A local time repeated when clocks go
/// back is read as its first occurrence (Slurm lines choose by their Elapsed instead, see
/// [`readings`]); a local time skipped when clocks go forward does not exist and is an error.
pub(crate) fn parse(text: &str, tz: Tz) -> Result<DateTime<Utc>, String> {
    readings(text, tz).map(|readings| readings[0])
}

/// Every instant a timestamp can stand for, earliest first: one, or two for a local time that
/// clocks going back repeat. A local time in the gap when clocks go forward is an error: no
/// clock in `tz` showed it, so the time zone given is not the one the source wrote in.
pub(crate) fn readings(text: &str, tz: Tz) -> Result<Vec<DateTime<Utc>>, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(vec![t.with_timezone(&Utc)]);
    }
    let naive = NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f")
        .or_else(|_| NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f"))
        .map_err(|_| {
            format!(
                "'{text}' is not a timestamp (expected RFC 3339 such as 2025-01-24T09:20:46Z, \
                 or YYYY-MM-DDTHH:MM:SS in the input's time zone)"
            )
        })?;
    match tz.from_local_datetime(&naive) {
        LocalResult::Single(t) => Ok(vec![t.with_timezone(&Utc)]),
        LocalResult::Ambiguous(first, second) => {
            Ok(vec![first.with_timezone(&Utc), second.with_timezone(&Utc)])
        }
        LocalResult::None => Err(format!(
            "'{text}' does not exist in time zone {tz} (clocks jumped forward): is {tz} the \
             time zone the input was written in?"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().to_utc()
    }

    #[test]
    fn offsets_win_and_naive_times_are_local() {
        let berlin: Tz = "Europe/Berlin".parse().unwrap();
        assert_eq!(
            parse("2025-07-01T16:30:00+02:00", Tz::UTC),
            Ok(utc("2025-07-01T14:30:00Z"))
        );
        // CEST is UTC+2; the space form is Slurm's and PostgreSQL's.
        for text in ["2025-07-01T14:30:00", "2025-07-01 14:30:00"] {
            assert_eq!(parse(text, berlin), Ok(utc("2025-07-01T12:30:00Z")));
        }
        // 02:30 came twice on 2025-10-26 (CEST, then CET).
        assert_eq!(
            readings("2025-10-26T02:30:00", berlin),
            Ok(vec![
                utc("2025-10-26T00:30:00Z"),
                utc("2025-10-26T01:30:00Z")
            ])
        );
        assert_eq!(
            parse("2025-03-30T02:30:00", berlin),
            Err(
                "'2025-03-30T02:30:00' does not exist in time zone Europe/Berlin (clocks jumped \
                 forward): is Europe/Berlin the time zone the input was written in?"
                    .into()
            )
        );
        assert!(
            parse("yesterday", Tz::UTC)
                .unwrap_err()
                .starts_with("'yesterday' is not a timestamp")
        );
    }

    #[test]
    fn repeated_local_hour_is_read_as_its_first_occurrence() {
        let fall_back = parse("2024-11-03T01:30:00", chrono_tz::America::New_York).unwrap();
        assert_eq!(fall_back, utc("2024-11-03T05:30:00Z"));
        let utc_time = parse("2024-11-03T01:30:00", chrono_tz::UTC).unwrap();
        assert_eq!(utc_time, utc("2024-11-03T01:30:00Z"));
    }

    #[test]
    fn the_lake_keeps_1970_to_9999() {
        assert!(landable(utc("1970-01-01T00:00:00Z")).is_ok());
        assert!(landable(utc("9999-12-31T23:59:59.999999Z")).is_ok());
        assert_eq!(
            landable(utc("1969-12-31T23:59:59Z")),
            Err("1969-12-31T23:59:59+00:00 is outside 1970-01-01 to 9999-12-31".into())
        );
        assert!(!is_landable(MAX_TIME_MICROS));
    }

    #[test]
    fn durations_from_input_stay_inside_the_lakes_range() {
        assert_eq!(duration(90), Ok(TimeDelta::seconds(90)));
        // 1970-01-01 to 10000-01-01 is the longest duration taken, a second more is refused.
        assert_eq!(
            duration(253_402_300_800),
            Ok(TimeDelta::seconds(253_402_300_800))
        );
        assert_eq!(
            duration(253_402_300_801),
            Err("253402300801 s is longer than 1970-01-01 to 9999-12-31".into())
        );
        assert!(duration(u64::MAX).is_err());
        assert_eq!(
            before(utc("2026-12-06T00:00:10Z"), duration(86_400).unwrap()),
            Ok(utc("2026-12-05T00:00:10Z"))
        );
        // Before chrono's earliest instant there is no date, and no panic.
        assert!(
            before(DateTime::<Utc>::MIN_UTC, TimeDelta::seconds(1))
                .unwrap_err()
                .ends_with("is before any date")
        );
    }
}
