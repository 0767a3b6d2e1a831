use std::sync::{Arc, Mutex};

use chrono::TimeZone;
use gpuledger_lake::LakeConfig;
use gpuledger_lake::testing::catalog_urls;
use object_store::ObjectStoreExt;

use super::*;

/// A clock the test moves.
#[derive(Clone)]
struct TestClock(Arc<Mutex<DateTime<Utc>>>);

impl TestClock {
    fn at(t: DateTime<Utc>) -> Self {
        Self(Arc::new(Mutex::new(t)))
    }

    fn set(&self, t: DateTime<Utc>) {
        *self.0.lock().unwrap() = t;
    }
}

impl Clock for TestClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap()
    }
}

fn utc(y: i32, m: u32, d: u32, h: u32, min: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, m, d, h, min, s).unwrap()
}

fn week(name: &str) -> IsoWeek {
    name.parse().unwrap()
}

/// An empty lake in `dir` per catalog backend (its report has zero figures, but every object).
/// Each with its data directory and catalog URL, for a second replica to open.
async fn lakes(dir: &std::path::Path) -> Vec<(String, String, Lake)> {
    let mut lakes = Vec::new();
    for (backend, url) in catalog_urls(dir).await {
        let data = dir.join(format!("lake-{backend}"));
        let lake = Lake::open(&LakeConfig {
            data: data.display().to_string(),
            catalog: Some(url.clone()),
        })
        .await
        .unwrap();
        lakes.push((data.display().to_string(), url, lake));
    }
    lakes
}

fn scheduler(lake: &Lake, clock: &TestClock) -> Scheduler<TestClock> {
    Scheduler::new(
        lake.clone(),
        parse_schedule(DEFAULT_SCHEDULE).unwrap(),
        clock.clone(),
    )
}

fn weeks(attempts: &[Attempt]) -> Vec<String> {
    attempts.iter().map(|a| a.week.to_string()).collect()
}

async fn runs(lake: &Lake) -> Vec<(String, &'static str, i64)> {
    lake.catalog()
        .report_runs()
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.week, r.status.as_str(), r.attempts))
        .collect()
}

#[tokio::test]
async fn catches_up_missed_weeks_and_reruns_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    for (_, _, lake) in lakes(dir.path()).await {
        // Monday 2026-11-09 05:59, nothing exported yet: the latest firing (11-02 06:00) made W44
        // due; W45 (11-02 … 11-08) is not due before 06:00.
        let clock = TestClock::at(utc(2026, 11, 9, 5, 59, 0));
        let s = scheduler(&lake, &clock);
        assert_eq!(weeks(&s.tick().await.unwrap()), ["2026-W44"]);
        clock.set(utc(2026, 11, 9, 6, 0, 0));
        let first = s.tick().await.unwrap();
        assert_eq!(weeks(&first), ["2026-W45"]);
        assert_eq!(
            first[0].outcome.as_ref().unwrap(),
            &[
                "reports/weekly/2026-W45/report.json",
                "reports/weekly/2026-W45/report.csv",
                "reports/weekly/2026-W45/report.html"
            ]
        );
        // Nothing more that week, however often it looks.
        clock.set(utc(2026, 11, 12, 6, 0, 0));
        assert!(s.tick().await.unwrap().is_empty());
        // Down from Thursday until Tuesday 11-24: W46 and W47 were missed; a new replica
        // (another scheduler, another owner) catches both up at start.
        clock.set(utc(2026, 11, 24, 9, 0, 0));
        let restarted = scheduler(&lake, &clock);
        assert_eq!(
            weeks(&restarted.tick().await.unwrap()),
            ["2026-W46", "2026-W47"]
        );
        assert_eq!(
            runs(&lake).await,
            [
                ("2026-W44".into(), "succeeded", 1),
                ("2026-W45".into(), "succeeded", 1),
                ("2026-W46".into(), "succeeded", 1),
                ("2026-W47".into(), "succeeded", 1)
            ]
        );
        // A re-run replaces the same objects with the same bytes.
        let read = |key: &'static str| {
            let store = Arc::clone(lake.store());
            async move {
                store
                    .get(&object_store::path::Path::from(key))
                    .await
                    .unwrap()
                    .bytes()
                    .await
                    .unwrap()
            }
        };
        let before = [
            read("reports/weekly/2026-W46/report.json").await,
            read("reports/weekly/2026-W46/report.csv").await,
            read("reports/weekly/2026-W46/report.html").await,
        ];
        clock.set(utc(2026, 11, 24, 10, 0, 0));
        let again = restarted
            .export(week("2026-W46"), true)
            .await
            .unwrap()
            .unwrap();
        assert!(again.outcome.is_ok());
        let after = [
            read("reports/weekly/2026-W46/report.json").await,
            read("reports/weekly/2026-W46/report.csv").await,
            read("reports/weekly/2026-W46/report.html").await,
        ];
        assert_eq!(before, after);
        assert_eq!(runs(&lake).await[2], ("2026-W46".into(), "succeeded", 2));
        // Without `rerun`, an exported week is left alone.
        assert!(
            restarted
                .export(week("2026-W46"), false)
                .await
                .unwrap()
                .is_none()
        );
    }
}

#[tokio::test]
async fn a_failed_week_is_retried_with_backoff_without_blocking_the_next() {
    let dir = tempfile::tempdir().unwrap();
    for (data, _, lake) in lakes(dir.path()).await {
        let clock = TestClock::at(utc(2026, 11, 9, 6, 0, 0));
        let s = scheduler(&lake, &clock);
        // A file where W45's folder goes: the store cannot write W45's objects.
        let blocker = std::path::Path::new(&data).join("reports/weekly/2026-W45");
        std::fs::create_dir_all(blocker.parent().unwrap()).unwrap();
        std::fs::write(&blocker, "in the way").unwrap();
        let failed = s.tick().await.unwrap();
        assert_eq!(weeks(&failed), ["2026-W45"]);
        assert!(failed[0].outcome.is_err());
        let run = &lake.catalog().report_runs().await.unwrap()[0];
        assert_eq!((run.status, run.attempts), (RunStatus::Failed, 1));
        assert!(
            run.error.as_deref().unwrap().contains("object store"),
            "{run:?}"
        );
        // The first retry waits a minute.
        assert_eq!(
            run.next_attempt_at,
            Some(utc(2026, 11, 9, 6, 1, 0).timestamp_micros())
        );
        // A week later W45 still fails (its retry is due), and W46 is exported all the same.
        clock.set(utc(2026, 11, 16, 6, 0, 0));
        let next = s.tick().await.unwrap();
        assert_eq!(weeks(&next), ["2026-W45", "2026-W46"]);
        assert!(next[0].outcome.is_err() && next[1].outcome.is_ok());
        // The second failure waits two minutes: not retried one minute on.
        std::fs::remove_file(&blocker).unwrap();
        clock.set(utc(2026, 11, 16, 6, 1, 0));
        assert!(s.tick().await.unwrap().is_empty());
        clock.set(utc(2026, 11, 16, 6, 2, 0));
        assert_eq!(weeks(&s.tick().await.unwrap()), ["2026-W45"]);
        assert_eq!(
            runs(&lake).await,
            [
                ("2026-W45".into(), "succeeded", 3),
                ("2026-W46".into(), "succeeded", 1)
            ]
        );
    }
}

/// Waiting for a ledger that panics.
struct PanickingLedger;

#[async_trait::async_trait]
impl LedgerReady for PanickingLedger {
    async fn ready(&self) -> std::result::Result<(), String> {
        panic!("a ledger that panics");
    }
}

/// An export that panics is a failed attempt, retried with backoff like any other failure; the
/// schedule goes on (the export ran on the scheduler's own task, and a panic ended it for good).
#[tokio::test]
async fn an_export_that_panics_fails_its_attempt_and_the_schedule_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    for (_, _, lake) in lakes(dir.path()).await {
        let clock = TestClock::at(utc(2026, 11, 9, 6, 0, 0));
        let s = scheduler(&lake, &clock).after_ledger(PanickingLedger);
        let failed = s.tick().await.unwrap();
        assert_eq!(weeks(&failed), ["2026-W45"]);
        let error = failed[0].outcome.as_ref().unwrap_err();
        assert!(error.starts_with("the export stopped: task"), "{error}");
        assert!(error.contains("panicked"), "{error}");
        let run = &lake.catalog().report_runs().await.unwrap()[0];
        assert_eq!((run.status, run.attempts), (RunStatus::Failed, 1));
        assert_eq!(
            run.next_attempt_at,
            Some(utc(2026, 11, 9, 6, 1, 0).timestamp_micros())
        );
        // The retry is due a minute on, and fails the same way: the scheduler still runs.
        clock.set(utc(2026, 11, 9, 6, 1, 0));
        assert_eq!(weeks(&s.tick().await.unwrap()), ["2026-W45"]);
        assert_eq!(runs(&lake).await, [("2026-W45".into(), "failed", 2)]);
    }
}

#[tokio::test]
async fn two_replicas_sharing_a_catalog_export_each_week_once() {
    let dir = tempfile::tempdir().unwrap();
    for (data, url, lake) in lakes(dir.path()).await {
        // A second replica: its own connection to the same catalog and store.
        let other = Lake::open(&LakeConfig {
            data: data.clone(),
            catalog: Some(url),
        })
        .await
        .unwrap();
        let clock = TestClock::at(utc(2026, 11, 23, 6, 0, 0));
        let (a, b) = (scheduler(&lake, &clock), scheduler(&other, &clock));
        let (ran_a, ran_b) = tokio::join!(a.tick(), b.tick());
        let mut all = weeks(&ran_a.unwrap());
        all.extend(weeks(&ran_b.unwrap()));
        all.sort();
        assert_eq!(all, ["2026-W47"]);
        assert_eq!(runs(&lake).await, [("2026-W47".into(), "succeeded", 1)]);
    }
}
