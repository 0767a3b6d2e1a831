use std::io::Write;

use futures::TryStreamExt;
use gpuledger_lake::LakeConfig;

use super::*;

const SCRAPE: &str = "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-1\",Hostname=\"n1\"} 41 1790000000000\n\
                      DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-1\",Hostname=\"n1\"} 70.5 1790000000000\n";

async fn lake(dir: &tempfile::TempDir) -> Lake {
    Lake::open(&LakeConfig {
        data: dir.path().join("lake").display().to_string(),
        catalog: None,
    })
    .await
    .unwrap()
}

fn options(source: Source) -> IngestOptions {
    IngestOptions::new(
        source,
        ParseContext::new("test", DateTime::from_timestamp(1_790_000_000, 0).unwrap()),
    )
}

fn bytes(text: &[u8]) -> Input {
    Input::Bytes {
        origin: "body".into(),
        bytes: bytes::Bytes::copy_from_slice(text),
    }
}

async fn objects(lake: &Lake) -> Vec<String> {
    let mut paths: Vec<String> = lake
        .store()
        .list(None)
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .unwrap();
    paths.retain(|p| p.starts_with("tables/"));
    paths.sort();
    paths
}

#[tokio::test]
async fn the_same_input_lands_once_and_leaves_no_stray_objects() {
    let dir = tempfile::tempdir().unwrap();
    let lake = lake(&dir).await;
    let first = ingest(&lake, bytes(SCRAPE.as_bytes()), options(Source::Dcgm))
        .await
        .unwrap();
    assert_eq!(first.outcome, Outcome::Landed { rows_replaced: 0 });
    assert_eq!(
        (first.records_read, first.rows.clone()),
        (2, vec![(Table::GpuSamples, 1)])
    );
    let after_first = objects(&lake).await;
    assert_eq!(after_first.len(), 1);

    let second = ingest(&lake, bytes(SCRAPE.as_bytes()), options(Source::Dcgm))
        .await
        .unwrap();
    assert_eq!(
        second.outcome,
        Outcome::AlreadyIngested {
            batch_id: first.batch_id.clone()
        }
    );
    assert_eq!((second.rows_landed(), second.files_written), (0, 0));
    assert_eq!(
        objects(&lake).await,
        after_first,
        "the duplicate's objects were removed"
    );

    // The same bytes with another cluster name are another input.
    let mut other = options(Source::Dcgm);
    other.context.cluster = Some("east".into());
    assert!(matches!(
        ingest(&lake, bytes(SCRAPE.as_bytes()), other)
            .await
            .unwrap()
            .outcome,
        Outcome::Landed { .. }
    ));
}

/// `--ingest-retry-window` takes any duration: one longer than the calendar reaches back to its
/// start (it was subtracted from the arrival time unchecked, and every untimestamped scrape
/// panicked). The same untimestamped scrape sent again is then a retry, whenever it comes.
#[tokio::test]
async fn a_retry_window_longer_than_the_calendar_reaches_back_to_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let lake = lake(&dir).await;
    let untimestamped = "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-0\",Hostname=\"n1\"} 40\n";
    let scrape = |days_later: i64| {
        let mut options = options(Source::Dcgm);
        options.retry_window = std::time::Duration::MAX;
        // As over HTTP without `at`: read at its arrival.
        options.at_declared = false;
        options.context.at += chrono::TimeDelta::days(days_later);
        options
    };
    let first = ingest(&lake, bytes(untimestamped.as_bytes()), scrape(0))
        .await
        .unwrap();
    assert_eq!(first.outcome, Outcome::Landed { rows_replaced: 0 });
    let again = ingest(&lake, bytes(untimestamped.as_bytes()), scrape(400))
        .await
        .unwrap();
    assert_eq!(
        again.outcome,
        Outcome::AlreadyIngested {
            batch_id: first.batch_id
        }
    );
}

/// An input of several read chunks is hashed on a thread of its own while it is parsed: every
/// row lands, and the same bytes read in other chunks, or gzipped, are the same input.
#[tokio::test]
async fn an_input_of_many_chunks_lands_whole_and_is_known_again_however_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let lake = lake(&dir).await;
    let text: String = (0..2_000)
        .flat_map(|t| {
            (0..20).map(move |gpu| {
                format!(
                    "DCGM_FI_DEV_GPU_TEMP{{gpu=\"{gpu}\",UUID=\"GPU-{gpu}\",Hostname=\"n1\"}} {} {}\n",
                    40 + (t + gpu) % 7,
                    1_790_000_000_000i64 + t * 15_000
                )
            })
        })
        .collect();
    assert!(text.len() > 2 * MAX_READ_BUFFER, "{} bytes", text.len());
    let first = ingest(&lake, bytes(text.as_bytes()), options(Source::Dcgm))
        .await
        .unwrap();
    assert_eq!(first.outcome, Outcome::Landed { rows_replaced: 0 });
    assert_eq!(
        (first.records_read, first.rows.clone()),
        (40_000, vec![(Table::GpuSamples, 40_000)])
    );
    let mut gzipped = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gzipped.write_all(text.as_bytes()).unwrap();
    let gzipped = gzipped.finish().unwrap();
    let again = [
        // Read in chunks of 8 KiB (the size declared picks the chunk).
        Input::Reader {
            origin: "stream".into(),
            reader: Box::new(std::io::Cursor::new(text.clone().into_bytes())),
            size: Some(1),
        },
        bytes(&gzipped),
    ];
    for input in again {
        let origin = input.origin();
        let report = ingest(&lake, input, options(Source::Dcgm)).await.unwrap();
        assert_eq!(
            report.outcome,
            Outcome::AlreadyIngested {
                batch_id: first.batch_id.clone()
            },
            "{origin}"
        );
    }
}

#[tokio::test]
async fn strict_mode_lands_nothing_and_gzip_is_detected_by_content() {
    let dir = tempfile::tempdir().unwrap();
    let lake = lake(&dir).await;
    let bad = format!(
        "{SCRAPE}DCGM_FI_DEV_GPU_UTIL{{gpu=\"0\",UUID=\"GPU-1\",Hostname=\"n1\"}} ERROR 1790000000000\n"
    );
    let mut strict = options(Source::Dcgm);
    strict.strict = true;
    let error = ingest(&lake, bytes(bad.as_bytes()), strict)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("test:3: field 'DCGM_FI_DEV_GPU_UTIL'"),
        "{error}"
    );
    assert!(objects(&lake).await.is_empty());
    assert!(lake.catalog().batches().await.unwrap().is_empty());

    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bad.as_bytes()).unwrap();
    let report = ingest(&lake, bytes(&gz.finish().unwrap()), options(Source::Dcgm))
        .await
        .unwrap();
    assert_eq!(report.rows, vec![(Table::GpuSamples, 1)]);
    assert_eq!(report.rejections.len(), 1);
    assert_eq!(report.rejections[0].line, 3);
    assert_eq!(
        lake.catalog().quarantine().await.unwrap()[0].rejection,
        report.rejections[0]
    );
}

#[tokio::test]
async fn a_request_delivered_again_in_a_later_input_counts_once() {
    let dir = tempfile::tempdir().unwrap();
    let lake = lake(&dir).await;
    let line = |id: &str, ts: &str| {
        format!(
            "{{\"ts\":\"{ts}\",\"request_id\":\"{id}\",\"model\":\"m\",\"input_tokens\":1,\"output_tokens\":2}}\n"
        )
    };
    let first = [
        line("a", "2026-11-01T10:00:00Z"),
        line("b", "2026-11-02T10:00:00Z"),
    ]
    .concat();
    ingest(&lake, bytes(first.as_bytes()), options(Source::Tokens))
        .await
        .unwrap();
    // b again (same day partition), c new, a again with a different day: counted by request id.
    let second = [
        line("b", "2026-11-02T10:00:00Z"),
        line("c", "2026-11-02T11:00:00Z"),
        line("a", "2026-11-01T10:00:00Z"),
    ]
    .concat();
    let report = ingest(&lake, bytes(second.as_bytes()), options(Source::Tokens))
        .await
        .unwrap();
    assert_eq!((report.duplicates_skipped, report.rows_landed()), (2, 1));
}

fn events_options() -> IngestOptions {
    options(Source::Events)
}

/// Rows landed and duplicates skipped of one ingest.
async fn landed(lake: &Lake, text: &str, options: IngestOptions) -> (u64, u64) {
    let report = ingest(lake, bytes(text.as_bytes()), options).await.unwrap();
    assert!(
        matches!(report.outcome, Outcome::Landed { .. }),
        "{report:?}"
    );
    (report.rows_landed(), report.duplicates_skipped)
}

const TRAIN: &str = r#"{"ts":"2026-11-02T00:00:00Z","event":"start","cluster":"demo","node":"n1","namespace":"ml","workload":"train","pod":"train-0","gpus":1,"gpu_indices":[0],"labels":{"team":"vision"}}
{"ts":"2026-11-02T06:00:00Z","event":"stop","cluster":"demo","node":"n1","namespace":"ml","workload":"train","pod":"train-0","reason":"finished"}
"#;

#[tokio::test]
async fn scheduler_events_delivered_again_in_other_bytes_land_once() {
    let dir = tempfile::tempdir().unwrap();
    let lake = lake(&dir).await;
    assert_eq!(landed(&lake, TRAIN, events_options()).await, (2, 0));
    // Another collector's export of the same two events: keys reordered, spaces, an offset.
    let reserialized = r#"{ "event": "start", "pod": "train-0", "workload": "train", "namespace": "ml", "node": "n1", "cluster": "demo", "ts": "2026-11-02T01:00:00+01:00", "gpus": 1, "gpu_indices": [0], "labels": {"team": "vision"} }
{ "reason": "finished", "ts": "2026-11-02T06:00:00Z", "event": "stop", "cluster": "demo", "node": "n1", "namespace": "ml", "workload": "train", "pod": "train-0" }
"#;
    assert_eq!(landed(&lake, reserialized, events_options()).await, (0, 2));
    // A file that overlaps: train's stop again, serve's start and stop new, and serve's start
    // twice within the file. 2 land, 2 are skipped.
    let overlapping = r#"{"ts":"2026-11-02T06:00:00Z","event":"stop","cluster":"demo","node":"n1","namespace":"ml","workload":"train","pod":"train-0","reason":"finished"}
{"ts":"2026-11-02T00:00:00Z","event":"start","cluster":"demo","node":"n1","namespace":"ml","workload":"serve","pod":"serve-0","gpus":1,"gpu_indices":[1]}
{"ts":"2026-11-02T00:00:00Z","event":"start","cluster":"demo","node":"n1","namespace":"ml","workload":"serve","pod":"serve-0","gpus":1,"gpu_indices":[1]}
{"ts":"2026-11-02T12:00:00Z","event":"stop","cluster":"demo","node":"n1","namespace":"ml","workload":"serve","pod":"serve-0","reason":"finished"}
"#;
    assert_eq!(landed(&lake, overlapping, events_options()).await, (2, 2));
    let active = lake
        .catalog()
        .active_files(Table::SchedulerEvents, None, None)
        .await
        .unwrap();
    assert_eq!(active.iter().map(|f| f.rows).sum::<i64>(), 4);
}

#[tokio::test]
async fn pods_and_sacct_exported_again_land_only_what_is_new() {
    let dir = tempfile::tempdir().unwrap();
    let lake = lake(&dir).await;
    let pod = |phase: &str, version: &str| {
        let finished = match phase {
            "Succeeded" => {
                r#","containerStatuses":[{"name":"main","state":{"terminated":{"exitCode":0,"reason":"Completed","startedAt":"2026-11-02T10:00:05Z","finishedAt":"2026-11-02T11:00:00Z"}}}]"#
            }
            _ => "",
        };
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p-0","namespace":"ml","uid":"6a1f","resourceVersion":"{version}"}},"spec":{{"nodeName":"n1","containers":[{{"name":"main","resources":{{"limits":{{"nvidia.com/gpu":"1"}}}}}}]}},"status":{{"phase":"{phase}","startTime":"2026-11-02T10:00:00Z"{finished}}}}}"#
        )
    };
    // The watch saw the pod running; a later `kubectl get -o json` sees it finished, at
    // another resourceVersion: only the stop is new.
    assert_eq!(
        landed(&lake, &pod("Running", "10"), events_options()).await,
        (1, 0)
    );
    let later = serde_json::to_string_pretty(
        &serde_json::from_str::<serde_json::Value>(&pod("Succeeded", "42")).unwrap(),
    )
    .unwrap();
    assert_eq!(landed(&lake, &later, events_options()).await, (1, 1));

    let sacct = "JobID|Account|Start|End|State|AllocTRES|NodeList\n\
                 77|ml|2026-11-02T08:00:00|2026-11-02T10:00:00|COMPLETED|gres/gpu=2|gpu[01-02]\n";
    let reordered = "NodeList|State|JobID|End|Start|AllocTRES|Account|\n\
                     gpu[01-02]|COMPLETED|77|2026-11-02T10:00:00|2026-11-02T08:00:00|gres/gpu=2|ml|\n";
    assert_eq!(landed(&lake, sacct, events_options()).await, (4, 0));
    assert_eq!(landed(&lake, reordered, events_options()).await, (0, 4));
}

const FOCUS_HEADER: &str = "BillingAccountId,BillingCurrency,BillingPeriodStart,BillingPeriodEnd,\
ChargePeriodStart,ChargePeriodEnd,ChargeCategory,BilledCost,EffectiveCost,ServiceName,ResourceId\n";

/// A FOCUS delivery of account A's September 2026: one line per (day, cost).
fn focus(lines: &[(u32, &str)]) -> String {
    let mut text = FOCUS_HEADER.to_string();
    for (day, cost) in lines {
        text.push_str(&format!(
            "A,USD,2026-09-01T00:00:00Z,2026-10-01T00:00:00Z,2026-09-{day:02}T00:00:00Z,\
             2026-09-{:02}T00:00:00Z,Usage,{cost},{cost},Compute,i-1\n",
            day + 1
        ));
    }
    text
}

#[tokio::test]
async fn the_latest_billing_delivery_wins_whatever_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let lake = lake(&dir).await;
    let a = focus(&[(1, "100.00"), (2, "50.00")]);
    let b = focus(&[(1, "120.00")]);
    let deliver = async |text: &str| {
        ingest(&lake, bytes(text.as_bytes()), options(Source::Focus))
            .await
            .unwrap()
    };
    let first = deliver(&a).await;
    assert_eq!(first.outcome, Outcome::Landed { rows_replaced: 0 });
    assert_eq!(
        deliver(&b).await.outcome,
        Outcome::Landed { rows_replaced: 2 }
    );
    let objects_before = objects(&lake).await;
    // A's bytes again: A is the latest delivery, its 2 rows active again, B's 1 retired.
    let again = deliver(&a).await;
    assert_eq!(
        again.outcome,
        Outcome::Reactivated {
            batch_id: first.batch_id.clone(),
            rows_restored: 2,
            rows_replaced: 1
        }
    );
    assert_eq!((again.rows_landed(), again.files_written), (0, 0));
    let active = lake
        .catalog()
        .active_files(Table::BillingLines, None, None)
        .await
        .unwrap();
    assert!(active.iter().all(|f| f.batch_id == first.batch_id));
    assert_eq!(active.iter().map(|f| f.rows).sum::<i64>(), 2);
    // tables/ holds the active files only: B's left it, and A's rows are back in this
    // delivery's own copies (A's first objects are under _superseded/, maybe deleted already).
    let mut active_paths: Vec<String> = active.iter().map(|f| f.path.clone()).collect();
    active_paths.sort();
    let after = objects(&lake).await;
    assert_eq!(after, active_paths);
    assert!(
        after.iter().all(|p| !objects_before.contains(p)),
        "{after:?} {objects_before:?}"
    );
    // And once more, a day later (over HTTP `at` is the arrival time): identical to the active
    // delivery, nothing changes.
    let mut later = options(Source::Focus);
    later.context.at += chrono::TimeDelta::days(1);
    let same = ingest(&lake, bytes(a.as_bytes()), later).await.unwrap();
    assert_eq!(
        same.outcome,
        Outcome::AlreadyIngested {
            batch_id: first.batch_id
        }
    );
}

/// `rows` rows of `table` at the epoch, every other column null.
fn rows_of(table: Table, rows: usize) -> RecordBatch {
    let schema = table.schema();
    let columns = schema
        .fields()
        .iter()
        .map(|field| match field.name().as_str() {
            "ts" => Arc::new(
                arrow::array::TimestampMicrosecondArray::from(vec![0; rows]).with_timezone("UTC"),
            ) as arrow::array::ArrayRef,
            _ => arrow::array::new_null_array(field.data_type(), rows),
        })
        .collect();
    RecordBatch::try_new(schema, columns).unwrap()
}

#[tokio::test]
async fn inputs_hold_rows_for_a_group_within_their_share_and_the_services() {
    let dir = tempfile::tempdir().unwrap();
    let limits = GroupLimits {
        max_rows: 10,
        wait: std::time::Duration::ZERO,
    };
    let group = GroupCommit::start(lake(&dir).await, limits);
    let samples = |n| rows_of(Table::GpuSamples, n);

    // One input: at most 10 rows; gateway requests are checked one input at a time, never held.
    let mut first = group.hold(DEFAULT_BATCH_ROWS);
    assert!(first.try_add(Table::GpuSamples, samples(6)).is_ok());
    assert!(first.try_add(Table::GpuSamples, samples(5)).is_err());
    let requests = RecordBatch::new_empty(Table::TokenUsage.schema());
    assert!(first.try_add(Table::TokenUsage, requests).is_err());
    assert!(first.try_add(Table::GpuSamples, samples(4)).is_ok());

    // The service: at most 4 groups' worth (40 rows) held by all inputs at once.
    let mut others: Vec<_> = (0..3).map(|_| group.hold(DEFAULT_BATCH_ROWS)).collect();
    for held in &mut others {
        assert!(held.try_add(Table::GpuSamples, samples(10)).is_ok());
    }
    let mut last = group.hold(DEFAULT_BATCH_ROWS);
    assert!(
        last.try_add(Table::GpuSamples, samples(1)).is_err(),
        "41 rows"
    );
    // Rows given up (an input that writes its own files, or a committed group) free the room.
    drop(others.pop());
    assert!(last.try_add(Table::GpuSamples, samples(10)).is_ok());
    assert_eq!(first.into_batches().len(), 2);
    assert!(
        last.try_add(Table::GpuSamples, samples(10)).is_err(),
        "its own share"
    );
    // Nor more than one parser batch: a larger input streams its own files, as it would alone.
    drop(last);
    let mut streamed = group.hold(3);
    assert!(streamed.try_add(Table::GpuSamples, samples(3)).is_ok());
    assert!(
        streamed.try_add(Table::GpuSamples, samples(1)).is_err(),
        "a second batch"
    );
}

#[tokio::test]
async fn inputs_arriving_together_commit_together_and_a_repeat_after_them_lands_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let lake = lake(&dir).await;
    let limits = GroupLimits {
        max_rows: 4,
        wait: std::time::Duration::from_millis(300),
    };
    let group = GroupCommit::start(lake.clone(), limits);
    let grouped = |text: &str| {
        let mut options = options(Source::Dcgm);
        options.group = Some(group.clone());
        ingest(&lake, bytes(text.as_bytes()), options)
    };
    let other_gpu = SCRAPE.replace("GPU-1", "GPU-2");
    let (one, two) = tokio::join!(grouped(SCRAPE), grouped(&other_gpu));
    let (one, two) = (one.unwrap(), two.unwrap());
    for report in [&one, &two] {
        assert_eq!(report.outcome, Outcome::Landed { rows_replaced: 0 });
        assert_eq!(report.rows, [(Table::GpuSamples, 1)]);
        assert_eq!((report.group_inputs, report.files_written), (2, 1));
    }
    // Both batches name the first of the group, under which its one file is listed.
    let files = lake.catalog().all_files().await.unwrap();
    assert_eq!(files.len(), 1);
    let lead = files[0].batch_id.clone();
    assert_eq!(files[0].rows, 2);
    assert!([&one.batch_id, &two.batch_id].contains(&&lead));
    let batches = lake.catalog().batches().await.unwrap();
    assert_eq!(
        batches
            .iter()
            .map(|b| (b.rows_landed, b.committed_with.clone()))
            .collect::<Vec<_>>(),
        [(1, Some(lead.clone())), (1, Some(lead.clone()))]
    );

    // The same scrape again lands nothing and writes nothing.
    let again = grouped(SCRAPE).await.unwrap();
    assert!(matches!(again.outcome, Outcome::AlreadyIngested { .. }));
    assert_eq!((again.group_inputs, again.files_written), (0, 0));
    // Five GPUs are more than a group holds: the input lands alone, in its own file.
    let five: String = (3..8)
        .map(|g| SCRAPE.replace("GPU-1", &format!("GPU-{g}")))
        .collect();
    let alone = grouped(&five).await.unwrap();
    assert_eq!(alone.rows, [(Table::GpuSamples, 5)]);
    assert_eq!((alone.group_inputs, alone.files_written), (1, 1));
    let files = lake.catalog().all_files().await.unwrap();
    assert!(
        files
            .iter()
            .any(|f| f.batch_id == alone.batch_id && f.rows == 5),
        "{files:?}"
    );
    // Every object under tables/ is a listed file: the repeat left nothing behind.
    let mut listed: Vec<_> = files.iter().map(|f| f.path.clone()).collect();
    listed.sort();
    assert_eq!(objects(&lake).await, listed);
}

#[tokio::test]
async fn an_input_its_group_cannot_write_fails_alone_and_the_others_land() {
    let dir = tempfile::tempdir().unwrap();
    let lake = lake(&dir).await;
    let limits = GroupLimits {
        max_rows: 100,
        wait: std::time::Duration::from_millis(300),
    };
    let group = GroupCommit::start(lake.clone(), limits);
    let member = |id: &str, rows: RecordBatch| {
        let mut held = group.hold(DEFAULT_BATCH_ROWS);
        held.try_add(Table::GpuSamples, rows).unwrap();
        Member {
            batch: NewBatch {
                batch_id: id.into(),
                source: "dcgm".into(),
                origin: id.into(),
                content_hash: format!("content-of-{id}"),
                idempotency_key: None,
                records_read: 1,
                started_at: 0,
            },
            options: CommitOptions::default(),
            held,
            rejections: vec![],
            records_rejected: 0,
        }
    };
    // Rows of another shape than the table's (a parser bug, say): the group cannot hold both.
    let only_ts = rows_of(Table::GpuSamples, 1).project(&[0]).unwrap();
    let (good, bad) = tokio::join!(
        group.commit(member("good", rows_of(Table::GpuSamples, 2))),
        group.commit(member("bad", only_ts)),
    );
    let good = good.unwrap();
    assert_eq!(good.rows, [(Table::GpuSamples, 2)]);
    assert_eq!(
        good.group_inputs, 1,
        "committed alone after the group failed"
    );
    assert!(bad.is_err());
    let batches = lake.catalog().batches().await.unwrap();
    assert_eq!(
        batches
            .iter()
            .map(|b| b.batch_id.as_str())
            .collect::<Vec<_>>(),
        ["good"]
    );
    let files = lake.catalog().all_files().await.unwrap();
    assert_eq!(
        files
            .iter()
            .map(|f| (f.batch_id.as_str(), f.rows))
            .collect::<Vec<_>>(),
        [("good", 2)]
    );
    // Nothing of the failed attempt is under tables/.
    let mut listed: Vec<_> = files.iter().map(|f| f.path.clone()).collect();
    listed.sort();
    assert_eq!(objects(&lake).await, listed);
}

/// A new catalog stores an input under blake3(options, blake3(its bytes after gunzip)): the
/// same bytes gzipped are the same input, known without any SHA-256.
#[tokio::test]
async fn a_new_catalog_knows_an_input_by_the_blake3_of_its_content() {
    let dir = tempfile::tempdir().unwrap();
    let lake = lake(&dir).await;
    assert_eq!(lake.catalog().input_hash(), InputHash::Blake3);
    let first = ingest(&lake, bytes(SCRAPE.as_bytes()), options(Source::Dcgm))
        .await
        .unwrap();
    assert!(matches!(first.outcome, Outcome::Landed { .. }));
    let mut key = blake3::Hasher::new();
    key.update(options_fingerprint(&options(Source::Dcgm), None).as_bytes());
    key.update(blake3::hash(SCRAPE.as_bytes()).as_bytes());
    let by_content = NewBatch {
        batch_id: String::new(),
        source: "dcgm".into(),
        origin: String::new(),
        content_hash: key.finalize().to_hex().to_string(),
        idempotency_key: None,
        records_read: 0,
        started_at: 0,
    };
    let stored = lake
        .catalog()
        .earlier_deliveries(&[(&by_content, &CommitOptions::default())])
        .await
        .unwrap();
    assert_eq!(
        stored
            .into_iter()
            .map(|batch| batch.map(|batch| batch.batch_id))
            .collect::<Vec<_>>(),
        [Some(first.batch_id.clone())]
    );
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gzip.write_all(SCRAPE.as_bytes()).unwrap();
    let again = ingest(&lake, bytes(&gzip.finish().unwrap()), options(Source::Dcgm))
        .await
        .unwrap();
    assert_eq!(
        again.outcome,
        Outcome::AlreadyIngested {
            batch_id: first.batch_id
        }
    );
}

#[tokio::test]
async fn an_input_landed_by_an_earlier_release_is_known_by_its_hash_of_then() {
    // A catalog upgraded while holding inputs keeps identifying them by SHA-256. Before this
    // release an input was stored under sha256(options, sha256(its bytes after gunzip)); before
    // content identities, under sha256(options with the parse time, sha256(the bytes as they
    // came, gzip included)). Such a batch, plain and gzipped, is the input it was: landing it
    // again lands nothing.
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gzip.write_all(SCRAPE.replace("GPU-1", "GPU-9").as_bytes())
        .unwrap();
    let gzipped = gzip.finish().unwrap();
    let content_of_gzipped = SCRAPE.replace("GPU-1", "GPU-9").into_bytes();
    let sent = [
        ("plain, by content", SCRAPE.as_bytes().to_vec(), false),
        ("gzip, by content", gzipped.clone(), false),
        (
            "plain, from before content identities",
            SCRAPE.as_bytes().to_vec(),
            true,
        ),
        ("gzip, from before content identities", gzipped, true),
    ];
    for (name, sent, before_content_identities) in sent {
        let dir = tempfile::tempdir().unwrap();
        let lake = lake(&dir).await;
        let options = options(Source::Dcgm);
        let mut old_hash = Sha256::new();
        if before_content_identities {
            old_hash.update(options_fingerprint(&options, Some(options.context.at)));
            old_hash.update(Sha256::digest(&sent));
        } else {
            old_hash.update(options_fingerprint(&options, None));
            let content = if sent.starts_with(&[0x1f, 0x8b]) {
                &content_of_gzipped
            } else {
                &sent
            };
            old_hash.update(Sha256::digest(content));
        }
        let earlier = NewBatch {
            batch_id: "earlier".into(),
            source: "dcgm".into(),
            origin: "hour.prom".into(),
            content_hash: hex::encode(old_hash.finalize()),
            idempotency_key: None,
            records_read: 2,
            started_at: 0,
        };
        lake.catalog()
            .commit_batch(&earlier, &[], &[])
            .await
            .unwrap();
        // The release's upgrade finds the catalog holding an input.
        gpuledger_lake::testing::undo_input_hash_migration(lake.catalog()).await;
        drop(lake);
        let lake = self::lake(&dir).await;
        assert_eq!(lake.catalog().input_hash(), InputHash::Sha256, "{name}");
        let again = ingest(&lake, bytes(&sent), options).await.unwrap();
        assert_eq!(
            again.outcome,
            Outcome::AlreadyIngested {
                batch_id: earlier.batch_id.clone()
            },
            "{name}"
        );
    }
}

/// A body small enough to parse on the calling task lands exactly what the same bytes land
/// streamed through a blocking thread: rows, rejections, counts and identity (each is known as
/// the other); a strict refusal, a line past its limit and another team's rows are the same
/// errors.
#[tokio::test]
async fn a_small_body_parsed_inline_lands_what_it_would_streamed() {
    let bad = format!(
        "{SCRAPE}DCGM_FI_DEV_GPU_UTIL{{gpu=\"0\",UUID=\"GPU-1\",Hostname=\"n1\"}} ERROR 1790000000000\n"
    );
    assert!(bad.len() <= PARSED_INLINE);
    let streamed = |text: &str| Input::Reader {
        origin: "body".into(),
        reader: Box::new(std::io::Cursor::new(text.as_bytes().to_vec())),
        size: Some(text.len() as u64),
    };
    let (inline_dir, thread_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (inline_lake, thread_lake) = (lake(&inline_dir).await, lake(&thread_dir).await);
    let inline = ingest(&inline_lake, bytes(bad.as_bytes()), options(Source::Dcgm))
        .await
        .unwrap();
    let thread = ingest(&thread_lake, streamed(&bad), options(Source::Dcgm))
        .await
        .unwrap();
    let account = |r: &IngestReport| {
        (
            r.outcome.clone(),
            r.records_read,
            r.rows.clone(),
            r.rejections.clone(),
            r.records_rejected,
            r.files_written,
        )
    };
    assert_eq!(account(&inline), account(&thread));
    // Two readings of one GPU in one row; the third line's value is no number.
    assert_eq!(
        (
            inline.records_read,
            inline.rows.clone(),
            inline.records_rejected
        ),
        (3, vec![(Table::GpuSamples, 1)], 1)
    );
    assert_eq!(inline.rejections[0].line, 3);
    let rows = |lake: Lake| async move {
        let files = lake.catalog().all_files().await.unwrap();
        assert_eq!(files.len(), 1);
        lake.read_file(&files[0].path).await.unwrap()
    };
    assert_eq!(
        rows(inline_lake.clone()).await,
        rows(thread_lake.clone()).await
    );
    // Each is known as the other.
    for (lake, other_way, first) in [
        (&inline_lake, streamed(&bad), &inline),
        (&thread_lake, bytes(bad.as_bytes()), &thread),
    ] {
        let again = ingest(lake, other_way, options(Source::Dcgm)).await;
        let batch_id = first.batch_id.clone();
        assert_eq!(
            again.unwrap().outcome,
            Outcome::AlreadyIngested { batch_id }
        );
    }

    // The same errors, and nothing landed for them.
    let mut strict = options(Source::Dcgm);
    strict.strict = true;
    let mut short_lines = options(Source::Dcgm);
    short_lines.limits.max_line = Some(Limit {
        bytes: 40,
        name: "--max-line-kb",
    });
    let mut team_b = options(Source::Events);
    team_b.only_team = Some("b".into());
    let events = r#"{"ts":"2026-11-02T00:00:00Z","event":"start","cluster":"c","node":"n1","namespace":"ml","workload":"w","pod":"w-0","gpus":1,"labels":{"team":"a"}}"#;
    for (options, text) in [
        (strict, bad.as_str()),
        (short_lines, SCRAPE),
        (team_b, events),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let lake = lake(&dir).await;
        let inline = ingest(&lake, bytes(text.as_bytes()), options.clone()).await;
        let thread = ingest(&lake, streamed(text), options).await;
        let (inline, thread) = (inline.unwrap_err(), thread.unwrap_err());
        assert_eq!(inline.to_string(), thread.to_string());
        assert!(
            lake.catalog().batches().await.unwrap().is_empty(),
            "{inline}"
        );
        assert!(objects(&lake).await.is_empty(), "{inline}");
    }
}
