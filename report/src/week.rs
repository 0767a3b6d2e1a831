//! ISO weeks (`2026-W45`), in UTC: Monday 00:00 to the next Monday 00:00.

use std::fmt;
use std::str::FromStr;

use chrono::{Datelike, NaiveDate, Weekday};
use gpuledger_build::day_span;
use gpuledger_ledger::time::Span;

use crate::error::ReportError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IsoWeek {
    /// The Monday that starts the week.
    monday: NaiveDate,
}

impl IsoWeek {
    /// The week that contains `day`.
    pub fn of(day: NaiveDate) -> Self {
        let week = day.iso_week();
        Self {
            monday: NaiveDate::from_isoywd_opt(week.year(), week.week(), Weekday::Mon)
                .expect("an ISO week has a Monday"),
        }
    }

    pub fn monday(self) -> NaiveDate {
        self.monday
    }

    /// The day after the week's Sunday.
    pub fn next_monday(self) -> NaiveDate {
        self.monday + chrono::Days::new(7)
    }

    pub fn previous(self) -> Self {
        Self {
            monday: self.monday - chrono::Days::new(7),
        }
    }

    pub fn next(self) -> Self {
        Self {
            monday: self.next_monday(),
        }
    }

    /// `[Monday 00:00, next Monday 00:00)` UTC, in microseconds.
    pub fn span(self) -> Span {
        Span::new(
            day_span(self.monday).start,
            day_span(self.next_monday()).start,
        )
    }

    /// The week's seven days.
    pub fn days(self) -> impl Iterator<Item = NaiveDate> {
        self.monday.iter_days().take(7)
    }
}

impl fmt::Display for IsoWeek {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let week = self.monday.iso_week();
        write!(f, "{}-W{:02}", week.year(), week.week())
    }
}

impl FromStr for IsoWeek {
    type Err = ReportError;

    fn from_str(s: &str) -> Result<Self, ReportError> {
        let invalid = |reason: &str| ReportError::Week {
            week: s.to_string(),
            reason: reason.to_string(),
        };
        let (year, week) = s
            .split_once("-W")
            .ok_or_else(|| invalid("expected YYYY-Www"))?;
        if year.len() != 4 || week.len() != 2 {
            return Err(invalid("expected a 4-digit year and a 2-digit week"));
        }
        let year: i32 = year
            .parse()
            .map_err(|_| invalid("the year is not a number"))?;
        let week: u32 = week
            .parse()
            .map_err(|_| invalid("the week is not a number"))?;
        // The ledger's timestamps (and their SQL literals) are four-digit years from 1970 on.
        if !(1970..=9998).contains(&year) {
            return Err(invalid("the year must be from 1970 to 9998"));
        }
        if !(1..=53).contains(&week) {
            return Err(invalid("the week must be from 01 to 53"));
        }
        NaiveDate::from_isoywd_opt(year, week, Weekday::Mon)
            .map(|monday| Self { monday })
            .ok_or(ReportError::NoSuchWeek { year, week })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weeks_parse_print_and_step() {
        let w: IsoWeek = "2026-W45".parse().unwrap();
        // 2026-01-01 is a Thursday, so week 1 starts Monday 2025-12-29 and week 45 on 11-02.
        assert_eq!(w.monday(), NaiveDate::from_ymd_opt(2026, 11, 2).unwrap());
        assert_eq!(w.to_string(), "2026-W45");
        assert_eq!(w.previous().to_string(), "2026-W44");
        assert_eq!(
            "2026-W01".parse::<IsoWeek>().unwrap().monday().to_string(),
            "2025-12-29"
        );
        // 2026 has 53 ISO weeks (it starts on a Thursday); its week 53 ends on 2027-01-03.
        assert_eq!(
            "2026-W53".parse::<IsoWeek>().unwrap().next().to_string(),
            "2027-W01"
        );
        for bad in [
            "1969-W10",
            "2026-45",
            "2026-W4",
            "2025-W53",
            "2026-W00",
            "20x6-W01",
            "2026-W45x",
        ] {
            assert!(bad.parse::<IsoWeek>().is_err(), "{bad}");
        }
        assert_eq!(
            IsoWeek::of(NaiveDate::from_ymd_opt(2026, 11, 8).unwrap()),
            w,
            "Sunday belongs to the week that started on Monday"
        );
        assert_eq!(w.span().end - w.span().start, 7 * 86_400_000_000);
    }
}
