//! Every object-store key the product writes, as small types with a constructor and a parser.
//! Nothing else in the code base formats a key: change the layout here and only here.
//!
//! ```text
//! tables/<table>/date=YYYY-MM-DD/<batch_id>-<seq>.parquet    landed records (Hive style): the
//!                                                             active files, and only those
//! _staging/tables/<table>/date=…/<file>.parquet               files written, not yet committed
//!                                                             and placed (a crash leaves them
//!                                                             here, never under `tables/`)
//! _superseded/tables/<table>/date=…/<file>.parquet            retired files, until their grace
//!                                                             period ends (outside `tables/`, so
//!                                                             outside readers' globs miss them)
//! reports/weekly/<YYYY-Www>/report.<ext>                       weekly report exports
//! ```

use chrono::NaiveDate;
use object_store::path::Path;

use crate::error::{LakeError, Result};
use crate::tables::Table;

/// An immutable Parquet file of a table, in its day partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableFilePath {
    pub table: Table,
    pub date: NaiveDate,
    pub batch_id: String,
    pub seq: u32,
}

impl TableFilePath {
    pub fn new(table: Table, date: NaiveDate, batch_id: &str, seq: u32) -> Self {
        Self {
            table,
            date,
            batch_id: batch_id.to_string(),
            seq,
        }
    }

    /// The folder of one table (for listing by hand; scans use the catalog instead).
    pub fn table_prefix(table: Table) -> Path {
        Path::from(format!("tables/{table}"))
    }

    pub fn to_path(&self) -> Path {
        Path::from(format!(
            "tables/{}/date={}/{}-{:05}.parquet",
            self.table,
            self.date.format("%Y-%m-%d"),
            self.batch_id,
            self.seq
        ))
    }

    pub fn parse(path: &Path) -> Result<Self> {
        let invalid = |reason: &str| LakeError::Path {
            path: path.to_string(),
            reason: reason.into(),
        };
        let parts: Vec<_> = path.parts().collect();
        let [tables, table, date, file] = parts.as_slice() else {
            return Err(invalid("expected tables/<table>/date=<day>/<file>.parquet"));
        };
        if tables.as_ref() != "tables" {
            return Err(invalid("not under tables/"));
        }
        let table: Table = table.as_ref().parse().map_err(|e: String| invalid(&e))?;
        let date = date
            .as_ref()
            .strip_prefix("date=")
            .and_then(|d| NaiveDate::parse_from_str(d, "%Y-%m-%d").ok())
            .ok_or_else(|| invalid("partition is not date=YYYY-MM-DD"))?;
        let stem = file
            .as_ref()
            .strip_suffix(".parquet")
            .ok_or_else(|| invalid("not .parquet"))?;
        let (batch_id, seq) = stem
            .rsplit_once('-')
            .ok_or_else(|| invalid("no sequence number"))?;
        let seq = seq
            .parse()
            .map_err(|_| invalid("sequence is not a number"))?;
        Ok(Self {
            table,
            date,
            batch_id: batch_id.to_string(),
            seq,
        })
    }
}

/// The places where a table file's object waits outside `tables/`, under its live key with a
/// prefix, so that a glob over `tables/**/*.parquet` never matches it (lake/src/retirement.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aside {
    /// Written and not yet placed: the writer puts every file here, and only its commit
    /// (`retirement::place`) moves it to `tables/`.
    Staged,
    /// Retired by a restatement, a ledger rebuild or a compaction, until its grace period ends.
    Superseded,
}

impl Aside {
    pub fn prefix(self) -> &'static str {
        match self {
            Aside::Staged => "_staging",
            Aside::Superseded => "_superseded",
        }
    }

    /// The key of the table file `live` (`tables/…`) in this place.
    pub fn of(self, live: &Path) -> Path {
        Path::from(format!("{}/{}", self.prefix(), live))
    }

    /// The live key of a key in this place, when it is one.
    pub fn live_of(self, path: &Path) -> Option<Path> {
        let live = path.prefix_match(&Path::from(self.prefix()))?;
        let live = Path::from_iter(live);
        Self::applies_to(&live).then_some(live)
    }

    /// Whether `path` is a table file's key (`tables/…`): only those have places aside.
    pub fn applies_to(path: &Path) -> bool {
        path.prefix_matches(&Path::from("tables"))
    }
}

/// One object of an exported weekly report, e.g. `reports/weekly/2026-W48/report.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeeklyReportPath {
    /// ISO week as `YYYY-Www`.
    pub week: String,
    pub extension: String,
}

impl WeeklyReportPath {
    pub fn to_path(&self) -> Path {
        Path::from(format!(
            "reports/weekly/{}/report.{}",
            self.week, self.extension
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_file_path_round_trips() {
        let day = NaiveDate::from_ymd_opt(2024, 9, 18).unwrap();
        let p = TableFilePath::new(Table::BillingLines, day, "b7f3a1", 12);
        let path = p.to_path();
        assert_eq!(
            path.as_ref(),
            "tables/billing_lines/date=2024-09-18/b7f3a1-00012.parquet"
        );
        assert_eq!(TableFilePath::parse(&path).unwrap(), p);
    }

    #[test]
    fn foreign_paths_are_refused() {
        for bad in [
            "tables/nope/date=2024-09-18/a-00001.parquet",
            "tables/gpu_samples/day=2024-09-18/a-00001.parquet",
            "tables/gpu_samples/date=2024-09-18/a.parquet",
            "reports/weekly/2024-W01/report.json",
        ] {
            assert!(TableFilePath::parse(&Path::from(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn files_aside_live_outside_tables() {
        let live = TableFilePath::new(
            Table::CostEntries,
            NaiveDate::from_ymd_opt(2024, 9, 18).unwrap(),
            "ledger-x",
            1,
        )
        .to_path();
        assert!(Aside::applies_to(&live));
        for (aside, key) in [
            (
                Aside::Superseded,
                "_superseded/tables/cost_entries/date=2024-09-18/ledger-x-00001.parquet",
            ),
            (
                Aside::Staged,
                "_staging/tables/cost_entries/date=2024-09-18/ledger-x-00001.parquet",
            ),
        ] {
            let moved = aside.of(&live);
            assert_eq!(moved.as_ref(), key);
            assert!(!Aside::applies_to(&moved));
            assert_eq!(aside.live_of(&moved), Some(live.clone()));
            assert_eq!(aside.live_of(&live), None);
        }
        assert_eq!(Aside::Staged.live_of(&Path::from("_staging/other/x")), None);
    }

    #[test]
    fn weekly_report_path() {
        let p = WeeklyReportPath {
            week: "2026-W48".into(),
            extension: "html".into(),
        };
        assert_eq!(p.to_path().as_ref(), "reports/weekly/2026-W48/report.html");
    }
}
