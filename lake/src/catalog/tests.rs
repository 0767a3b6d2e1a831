use chrono::NaiveDate;

use super::*;
use crate::paths::TableFilePath;
use crate::testing::catalog_urls;

fn file(
    table: Table,
    batch: &str,
    seq: u32,
    scope: Option<&str>,
    rows: u64,
    range: (i64, i64),
) -> WrittenFile {
    WrittenFile {
        path: TableFilePath::new(
            table,
            NaiveDate::from_ymd_opt(2024, 9, 18).unwrap(),
            batch,
            seq,
        ),
        scope: scope.map(str::to_string),
        rows,
        bytes: 100,
        min_ts: range.0,
        max_ts: range.1,
    }
}

fn batch(id: &str, hash: &str, key: Option<&str>) -> NewBatch {
    NewBatch {
        batch_id: id.into(),
        source: "focus".into(),
        origin: format!("{id}.csv"),
        content_hash: hash.into(),
        idempotency_key: key.map(str::to_string),
        records_read: 3,
        started_at: 0,
    }
}

/// Every scenario runs on each catalog backend the test command provides.
async fn each_catalog(test: impl AsyncFn(Catalog)) {
    let dir = tempfile::tempdir().unwrap();
    for (backend, url) in catalog_urls(dir.path()).await {
        eprintln!("catalog backend: {backend}");
        test(Catalog::connect(&url).await.unwrap()).await;
    }
}

#[tokio::test]
async fn commit_lists_files_by_time_and_keeps_rejections() {
    each_catalog(async |catalog| {
        let files = [
            file(Table::TokenUsage, "b1", 1, None, 10, (100, 200)),
            file(Table::TokenUsage, "b1", 2, None, 5, (300, 400)),
        ];
        let rejected = [Rejection::new(7, "ts", "not a time", "{\"ts\": 1}")];
        let outcome = catalog
            .commit_batch(&batch("b1", "h1", None), &files, &rejected)
            .await
            .unwrap();
        assert_eq!(
            outcome,
            CommitOutcome::Committed {
                rows_landed: 15,
                rows_replaced: 0
            }
        );

        let all = catalog
            .active_files(Table::TokenUsage, None, None)
            .await
            .unwrap();
        assert_eq!(all.len(), 2);
        // [250, 300) touches neither file; [250, 301) touches the second; [200, 201) the first (inclusive max).
        assert!(
            catalog
                .active_files(Table::TokenUsage, Some(250), Some(300))
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            catalog
                .active_files(Table::TokenUsage, Some(250), Some(301))
                .await
                .unwrap()[0]
                .rows,
            5
        );
        assert_eq!(
            catalog
                .active_files(Table::TokenUsage, Some(200), Some(201))
                .await
                .unwrap()[0]
                .rows,
            10
        );
        assert!(
            catalog
                .active_files(Table::BillingLines, None, None)
                .await
                .unwrap()
                .is_empty()
        );

        let quarantine = catalog.quarantine().await.unwrap();
        assert_eq!(quarantine.len(), 1);
        assert_eq!(quarantine[0].rejection, rejected[0]);
        assert_eq!(quarantine[0].origin, "b1.csv");
        let batches = catalog.batches().await.unwrap();
        assert_eq!(
            (batches[0].rows_landed, batches[0].records_rejected),
            (15, 1)
        );
    })
    .await;
}

#[tokio::test]
async fn the_same_input_or_idempotency_key_commits_once() {
    each_catalog(async |catalog| {
        let f = [file(Table::TokenUsage, "b1", 1, None, 10, (0, 1))];
        catalog
            .commit_batch(&batch("b1", "same", Some("key-1")), &f, &[])
            .await
            .unwrap();
        let again = catalog
            .commit_batch(&batch("b2", "same", None), &f, &[])
            .await
            .unwrap();
        assert!(
            matches!(again, CommitOutcome::Duplicate(ref b) if b.batch_id == "b1"),
            "{again:?}"
        );
        let by_key = catalog
            .commit_batch(&batch("b3", "other", Some("key-1")), &f, &[])
            .await
            .unwrap();
        assert!(
            matches!(by_key, CommitOutcome::Duplicate(ref b) if b.batch_id == "b1"),
            "{by_key:?}"
        );
        assert_eq!(
            catalog
                .active_files(Table::TokenUsage, None, None)
                .await
                .unwrap()
                .len(),
            1
        );
        assert_eq!(catalog.batches().await.unwrap().len(), 1);
    })
    .await;
}

#[tokio::test]
async fn a_new_delivery_of_a_scope_replaces_the_old_one_only() {
    each_catalog(async |catalog| {
        let first = [
            file(
                Table::BillingLines,
                "d1",
                1,
                Some("acct|2024-09"),
                4,
                (0, 10),
            ),
            file(
                Table::BillingLines,
                "d1",
                2,
                Some("acct|2024-08"),
                6,
                (0, 10),
            ),
        ];
        catalog
            .commit_batch(&batch("d1", "h1", None), &first, &[])
            .await
            .unwrap();
        let restated = [file(
            Table::BillingLines,
            "d2",
            1,
            Some("acct|2024-09"),
            3,
            (0, 10),
        )];
        let outcome = catalog
            .commit_batch(&batch("d2", "h2", None), &restated, &[])
            .await
            .unwrap();
        assert_eq!(
            outcome,
            CommitOutcome::Committed {
                rows_landed: 3,
                rows_replaced: 4
            }
        );

        let active = catalog
            .active_files(Table::BillingLines, None, None)
            .await
            .unwrap();
        let mut paths: Vec<_> = active
            .iter()
            .map(|f| (f.batch_id.as_str(), f.rows))
            .collect();
        paths.sort();
        assert_eq!(
            paths,
            [("d1", 6), ("d2", 3)],
            "August stays, September is replaced"
        );
        let retired: Vec<_> = catalog
            .all_files()
            .await
            .unwrap()
            .into_iter()
            .filter(|f| f.replaced_by.is_some())
            .collect();
        assert_eq!(retired.len(), 1);
        assert_eq!(retired[0].replaced_by.as_deref(), Some("d2"));
    })
    .await;
}

/// Deliveries d1 (September 4 rows, August 6 rows), then d2 (September 3 rows), then d1's input
/// again: the latest delivery wins, whatever batch first landed its bytes.
#[tokio::test]
async fn an_earlier_delivery_sent_again_is_active_again() {
    each_catalog(async |catalog| {
        let sept = Some("acct|2024-09");
        let d1 = [
            file(Table::BillingLines, "d1", 1, sept, 4, (0, 10)),
            file(Table::BillingLines, "d1", 2, Some("acct|2024-08"), 6, (0, 10)),
        ];
        let d2 = [file(Table::BillingLines, "d2", 1, sept, 3, (0, 10))];
        let commit = async |id: &str, hash: &str, key: Option<&str>, files: &[WrittenFile]| {
            catalog
                .commit_batch(&batch(id, hash, key), files, &[])
                .await
                .unwrap()
        };
        let active = async || {
            let mut files: Vec<_> = catalog
                .active_files(Table::BillingLines, None, None)
                .await
                .unwrap()
                .into_iter()
                .map(|f| (f.batch_id, f.rows))
                .collect();
            files.sort();
            files
        };
        commit("d1", "h1", None, &d1).await;
        commit("d2", "h2", Some("key-2"), &d2).await;
        assert_eq!(active().await, [("d1".into(), 6), ("d2".into(), 3)]);

        let before = Utc::now().timestamp_micros();
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        // d3 holds d1's bytes: d1's September file comes back (4 rows), d2's is retired (3).
        let again = commit("d3", "h1", None, &d1).await;
        assert!(
            matches!(again, CommitOutcome::Reactivated { ref batch, rows_restored: 4, rows_replaced: 3, .. }
                if batch.batch_id == "d1"),
            "{again:?}"
        );
        assert_eq!(active().await, [("d1".into(), 4), ("d1".into(), 6)]);
        assert_eq!(catalog.batches().await.unwrap().len(), 2, "no new batch");
        // The ledger's view of what changed: the file that came back and the one it retired,
        // not d1's August file, which stayed active throughout.
        let changed: Vec<_> = catalog
            .files_committed_since(Table::BillingLines, before)
            .await
            .unwrap()
            .into_iter()
            .map(|f| (f.batch_id, f.rows, f.replaced_by))
            .collect();
        assert_eq!(
            changed,
            [("d2".into(), 3, Some("d1".into())), ("d1".into(), 4, None)]
        );

        // d1's bytes once more: identical to what is active, nothing changes.
        let same = commit("d4", "h1", None, &d1).await;
        assert!(
            matches!(same, CommitOutcome::Duplicate(ref b) if b.batch_id == "d1"),
            "{same:?}"
        );
        // A client's retry of d2's request (its Idempotency-Key) is the same request again: it
        // changes nothing. d2's bytes without that key are a re-delivery: d2 wins again.
        let retry = commit("d5", "h2", Some("key-2"), &d2).await;
        assert!(matches!(retry, CommitOutcome::Duplicate(_)), "{retry:?}");
        let redelivered = commit("d6", "h2", None, &d2).await;
        assert!(
            matches!(redelivered, CommitOutcome::Reactivated { rows_restored: 3, rows_replaced: 4, .. }),
            "{redelivered:?}"
        );
        assert_eq!(active().await, [("d1".into(), 6), ("d2".into(), 3)]);
    })
    .await;
}

#[tokio::test]
async fn declared_objects_are_created_updated_listed_and_deleted() {
    each_catalog(async |catalog| {
        let h100 = serde_json::json!({"cluster": "demo", "node": "h100-1", "gpu_count": 8});
        let a100 = serde_json::json!({"cluster": "demo", "node": "a100-1", "gpu_count": 4});
        assert_eq!(
            catalog
                .put_object("node", "demo/h100-1", &h100)
                .await
                .unwrap(),
            PutOutcome::Created
        );
        assert_eq!(
            catalog
                .put_object("node", "demo/h100-1", &h100)
                .await
                .unwrap(),
            PutOutcome::Unchanged
        );
        let outcomes = catalog
            .put_objects([
                ("node", "demo/a100-1", &a100),
                (
                    "rate_card",
                    "H100/spot",
                    &serde_json::json!({"price_per_gpu_hour": 2.5}),
                ),
            ])
            .await
            .unwrap();
        assert_eq!(outcomes, [PutOutcome::Created, PutOutcome::Created]);

        let nodes = catalog.objects("node").await.unwrap();
        let names: Vec<&str> = nodes.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(
            names,
            ["demo/a100-1", "demo/h100-1"],
            "sorted by name, one kind only"
        );
        assert_eq!(nodes[1].spec, h100);
        let created = nodes[1].updated_at;
        assert_eq!(nodes[1].created_at, created);

        let mut resized = h100.clone();
        resized["gpu_count"] = 4.into();
        assert_eq!(
            catalog
                .put_object("node", "demo/h100-1", &resized)
                .await
                .unwrap(),
            PutOutcome::Updated
        );
        let updated = &catalog.objects("node").await.unwrap()[1];
        assert_eq!(updated.spec, resized);
        assert_eq!(updated.created_at, created);
        assert!(updated.updated_at >= created);

        assert!(catalog.delete_object("node", "demo/h100-1").await.unwrap());
        assert!(!catalog.delete_object("node", "demo/h100-1").await.unwrap());
        assert!(
            !catalog
                .delete_object("rate_card", "demo/a100-1")
                .await
                .unwrap()
        );
        assert_eq!(catalog.objects("node").await.unwrap().len(), 1);
        assert_eq!(
            catalog.objects("rate_card").await.unwrap()[0].name,
            "H100/spot"
        );
        assert!(catalog.objects("reservation").await.unwrap().is_empty());
    })
    .await;
}

#[tokio::test]
async fn a_budget_alert_is_recorded_once_and_its_delivery_kept() {
    each_catalog(async |catalog| {
        let alert = BudgetAlert {
            budget: "nlp-cap".into(),
            month: "2026-11".into(),
            threshold: 80.0,
            spend: 12.0,
            amount: 14.0,
            currency: "USD".into(),
            percent_used: 85.714286,
            recorded_at: 1,
            webhook: Some("http://127.0.0.1:9/hook".into()),
            delivery: "pending".into(),
            attempts: 0,
            delivered_at: None,
            last_error: None,
        };
        assert!(catalog.record_budget_alert(&alert).await.unwrap());
        // Another round, or another replica, finds it recorded.
        let again = BudgetAlert {
            recorded_at: 2,
            spend: 13.0,
            ..alert.clone()
        };
        assert!(!catalog.record_budget_alert(&again).await.unwrap());
        // The next threshold, or the next month, is another alert.
        let next = BudgetAlert {
            month: "2026-12".into(),
            ..alert.clone()
        };
        assert!(catalog.record_budget_alert(&next).await.unwrap());
        catalog
            .set_budget_alert_delivery(&alert, "delivered", 2, Some(5), Some("first try: 503"))
            .await
            .unwrap();
        let alerts = catalog.budget_alerts("nlp-cap").await.unwrap();
        assert_eq!(alerts.len(), 2);
        assert_eq!(alerts[0], next, "latest month first");
        assert_eq!(
            alerts[1],
            BudgetAlert {
                delivery: "delivered".into(),
                attempts: 2,
                delivered_at: Some(5),
                last_error: Some("first try: 503".into()),
                ..alert
            }
        );
        assert!(catalog.budget_alerts("other").await.unwrap().is_empty());
    })
    .await;
}

#[tokio::test]
async fn the_first_response_to_an_idempotency_key_is_kept() {
    each_catalog(async |catalog| {
        assert_eq!(catalog.idempotent_response("k").await.unwrap(), None);
        let first = StoredResponse {
            route: "/v1/ingest/dcgm".into(),
            batch_id: "b1".into(),
            status: 202,
            body: "{\"batch_id\":\"b1\"}".into(),
        };
        catalog
            .record_idempotent_response("k", &first)
            .await
            .unwrap();
        let later = StoredResponse {
            batch_id: "b2".into(),
            ..first.clone()
        };
        catalog
            .record_idempotent_response("k", &later)
            .await
            .unwrap();
        assert_eq!(catalog.idempotent_response("k").await.unwrap(), Some(first));
    })
    .await;
}

#[tokio::test]
async fn a_lease_has_one_holder_until_it_runs_out_or_is_released() {
    each_catalog(async |catalog| {
        assert!(catalog.claim_lease("ledger", "a", 100, 200).await.unwrap());
        // Held by a: b cannot take it before it runs out; a renews it.
        assert!(!catalog.claim_lease("ledger", "b", 150, 250).await.unwrap());
        assert!(catalog.claim_lease("ledger", "a", 150, 300).await.unwrap());
        assert!(!catalog.claim_lease("ledger", "b", 299, 400).await.unwrap());
        // Run out (a died): b takes it over, and a's late release leaves b's lease alone.
        assert!(catalog.claim_lease("ledger", "b", 301, 400).await.unwrap());
        catalog.release_lease("ledger", "a").await.unwrap();
        assert!(!catalog.claim_lease("ledger", "a", 350, 450).await.unwrap());
        // Released by its holder: free at once.
        catalog.release_lease("ledger", "b").await.unwrap();
        assert!(catalog.claim_lease("ledger", "a", 360, 460).await.unwrap());
        // Other names are other leases.
        assert!(catalog.claim_lease("compact", "b", 360, 460).await.unwrap());
    })
    .await;
}

/// Nor does a query's list of files: a long commit would otherwise stall every scan planned
/// meanwhile (the weekly report plans some forty).
#[tokio::test]
async fn authentication_and_file_listings_do_not_wait_for_the_writers() {
    each_catalog(async |catalog| {
        let landed = [file(Table::TokenUsage, "b1", 1, None, 10, (100, 200))];
        catalog
            .commit_batch(&batch("b1", "h1", None), &landed, &[])
            .await
            .unwrap();
        let token = TokenRecord {
            id: "t1".into(),
            name: "reader".into(),
            scope: "read".into(),
            team: None,
            created_at: 0,
            revoked_at: None,
        };
        catalog.create_token(&token, "hash-1").await.unwrap();
        // Every write connection inside a transaction that has written (a long commit, a
        // compaction): SQLite has one, PostgreSQL a few.
        let mut writers = Vec::new();
        for _ in 0..catalog.pool().options().get_max_connections() {
            let mut tx = catalog.pool().begin().await.unwrap();
            sqlx::query("UPDATE api_tokens SET name = name WHERE id = 'no such token'")
                .execute(&mut *tx)
                .await
                .unwrap();
            writers.push(tx);
        }
        let found = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            catalog.token_by_hash("hash-1"),
        )
        .await
        .expect("authentication waited for the writers")
        .unwrap();
        assert_eq!(found, Some(token));
        let listed = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            catalog.active_files(Table::TokenUsage, None, None),
        )
        .await
        .expect("the file listing waited for the writers")
        .unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].path, landed[0].path.to_path().to_string());
        for tx in writers {
            tx.rollback().await.unwrap();
        }
    })
    .await;
}

fn group_member<'a>(
    batch: &'a NewBatch,
    rows_landed: u64,
    rejections: &'a [Rejection],
    options: &'a CommitOptions,
) -> GroupMember<'a> {
    GroupMember {
        batch,
        rows_landed,
        rejections,
        records_rejected: rejections.len() as u64,
        options,
    }
}

/// Each quarantined record's batch and line.
async fn quarantined(catalog: &Catalog) -> Vec<(String, u64)> {
    let quarantine = catalog.quarantine().await.unwrap();
    quarantine
        .into_iter()
        .map(|q| (q.batch_id, q.rejection.line))
        .collect()
}

/// Nothing but these batches is committed: no files, no quarantine (a group that raced).
async fn assert_only_batches(catalog: &Catalog, expected: &[&str]) {
    let ids: Vec<String> = catalog
        .batches()
        .await
        .unwrap()
        .into_iter()
        .map(|b| b.batch_id)
        .collect();
    assert_eq!(ids, expected);
    assert!(catalog.all_files().await.unwrap().is_empty());
    assert!(catalog.quarantine().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_group_commits_each_batch_with_shared_files_or_nothing() {
    each_catalog(async |catalog| {
        let (b1, b2, b3) = (
            batch("g1", "h-g1", None),
            batch("g2", "h-g2", Some("key-g2")),
            batch("g3", "h-g3", None),
        );
        let files = [file(Table::GpuSamples, "g1", 1, None, 7, (0, 10))];
        let options = CommitOptions::default();
        let rejected = [Rejection::new(4, "gpu", "not a GPU index", "x")];
        let rejected = rejected.as_slice();
        let member =
            |batch, rows_landed, rejections| group_member(batch, rows_landed, rejections, &options);

        // Another writer commits g3's input first: the group that holds it commits nothing.
        catalog
            .commit_batch(&batch("cli", "h-g3", None), &[], &[])
            .await
            .unwrap();
        let raced = [
            member(&b1, 3, &[]),
            member(&b2, 4, rejected),
            member(&b3, 0, &[]),
        ];
        assert_eq!(
            catalog.commit_group(&raced, &files).await.unwrap(),
            GroupCommitOutcome::Raced
        );
        assert_only_batches(&catalog, &["cli"]).await;
        // …and recognise says what g3 is, without writing anything.
        let [Ok(Some(CommitOutcome::Duplicate(earlier))), Ok(None)] = &catalog
            .recognise(&[(&b3, &options), (&b1, &options)])
            .await
            .unwrap()[..]
        else {
            panic!("g3 is a repeat, g1 is not")
        };
        assert_eq!(earlier.batch_id, "cli");

        // Without g3: both batches, their own counts and quarantine, the files under the first.
        let group = [member(&b1, 3, &[]), member(&b2, 4, rejected)];
        assert_eq!(
            catalog.commit_group(&group, &files).await.unwrap(),
            GroupCommitOutcome::Committed
        );
        let batches = catalog.batches().await.unwrap();
        let committed: Vec<_> = batches
            .iter()
            .filter(|b| b.batch_id != "cli")
            .map(|b| {
                (
                    b.batch_id.as_str(),
                    b.rows_landed,
                    b.records_rejected,
                    b.committed_with.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            committed,
            [("g1", 3, 0, Some("g1")), ("g2", 4, 1, Some("g1"))]
        );
        let listed = catalog.all_files().await.unwrap();
        assert_eq!(
            listed
                .iter()
                .map(|f| (f.batch_id.as_str(), f.rows))
                .collect::<Vec<_>>(),
            [("g1", 7)]
        );
        assert_eq!(quarantined(&catalog).await, [("g2".to_string(), 4)]);
        // The key of a grouped batch is known like any other.
        let by_key = batch("", "other", Some("key-g2"));
        let found = catalog
            .earlier_deliveries(&[(&by_key, &CommitOptions::default())])
            .await
            .unwrap();
        assert_eq!(
            found
                .into_iter()
                .map(|b| b.map(|b| b.batch_id))
                .collect::<Vec<_>>(),
            [Some("g2".to_string())]
        );

        // A group of one is a batch committed alone; a scoped file is never shared.
        let alone = batch("g4", "h-g4", None);
        catalog
            .commit_group(&[member(&alone, 0, &[])], &[])
            .await
            .unwrap();
        assert_eq!(
            catalog
                .batches()
                .await
                .unwrap()
                .last()
                .unwrap()
                .committed_with,
            None
        );
        let scoped = [file(
            Table::BillingLines,
            "g5",
            1,
            Some("acct|2024-09"),
            1,
            (0, 1),
        )];
        let error = catalog
            .commit_group(&[member(&batch("g5", "h-g5", None), 1, &[])], &scoped)
            .await
            .unwrap_err();
        assert!(error.to_string().contains("restatement scope"), "{error}");
    })
    .await;
}

#[tokio::test]
async fn a_rejected_record_with_nul_bytes_is_kept_showing_them() {
    let rejection = Rejection::new(2, "gpu\0", "not a number: '\0'", "DCGM\0{gpu=\"0\"} x");
    assert_eq!(
        (rejection.field.as_str(), rejection.raw.as_str()),
        ("gpu\u{2400}", "DCGM\u{2400}{gpu=\"0\"} x")
    );
    each_catalog(async |catalog| {
        let committed = catalog
            .commit_batch(
                &batch("nul", "h-nul", None),
                &[],
                std::slice::from_ref(&rejection),
            )
            .await
            .unwrap();
        assert!(matches!(committed, CommitOutcome::Committed { .. }));
        assert_eq!(catalog.quarantine().await.unwrap()[0].rejection, rejection);
    })
    .await;
}

#[tokio::test]
async fn retries_of_one_scrape_committed_at_once_by_two_writers_land_once() {
    // Two replicas (two pools on one catalog) commit retries of one arrival-stamped scrape at
    // the same moment: their stored hashes differ (each ends in when it started), so no unique
    // index stops the second; the commit looks again inside its transaction.
    let dir = tempfile::tempdir().unwrap();
    for (backend, url) in catalog_urls(dir.path()).await {
        let (one, two) = (
            Catalog::connect(&url).await.unwrap(),
            Catalog::connect(&url).await.unwrap(),
        );
        let content = format!("{backend:0>64}");
        let retry = |id: &str, started_at: i64| NewBatch {
            source: "dcgm".into(),
            content_hash: retry_hash(&content, started_at),
            started_at,
            ..batch(id, "", None)
        };
        let options = CommitOptions {
            retry_since: Some(0),
            ..CommitOptions::default()
        };
        let (first, second) = (retry("first", 1_000), retry("second", 2_000));
        let (a, b) = tokio::join!(
            one.commit_batch_recognising(&first, &[], &[], &options),
            two.commit_batch_recognising(&second, &[], &[], &options),
        );
        let outcomes = [a.unwrap(), b.unwrap()];
        let committed = outcomes
            .iter()
            .filter(|o| matches!(o, CommitOutcome::Committed { .. }))
            .count();
        assert_eq!(committed, 1, "[{backend}] {outcomes:?}");
        assert_eq!(one.batches().await.unwrap().len(), 1, "[{backend}]");

        // The same through group commits, with a content not seen before: one group commits,
        // the other lost the race and commits nothing.
        let again = format!("{backend:1>64}");
        let retry_of_again = |id: &str, started_at: i64| NewBatch {
            content_hash: retry_hash(&again, started_at),
            ..retry(id, started_at)
        };
        let (third, fourth) = (
            retry_of_again("third", 3_000),
            retry_of_again("fourth", 4_000),
        );
        let (group_one, group_two) = (
            [group_member(&third, 0, &[], &options)],
            [group_member(&fourth, 0, &[], &options)],
        );
        let (a, b) = tokio::join!(
            one.commit_group(&group_one, &[]),
            two.commit_group(&group_two, &[]),
        );
        let mut outcomes = [a.unwrap(), b.unwrap()];
        outcomes.sort_by_key(|o| *o == GroupCommitOutcome::Raced);
        assert_eq!(
            outcomes,
            [GroupCommitOutcome::Committed, GroupCommitOutcome::Raced],
            "[{backend}]"
        );
        assert_eq!(one.batches().await.unwrap().len(), 2, "[{backend}]");
    }
}

#[test]
fn retries_of_one_content_and_batches_of_one_key_share_an_identity() {
    let retry = CommitOptions {
        retry_since: Some(0),
        ..CommitOptions::default()
    };
    let at = |started_at| NewBatch {
        content_hash: retry_hash("abc", started_at),
        ..batch("b", "", None)
    };
    // Retries started at different times are one content; as exact hashes they would differ.
    assert_eq!(at(1).identities(&retry), at(2).identities(&retry));
    let exact = CommitOptions::default();
    assert_ne!(at(1).identities(&exact), at(2).identities(&exact));
    // Other bodies under one key share the key's identity, and only that.
    let (one, two) = (batch("1", "h1", Some("k")), batch("2", "h2", Some("k")));
    let shared: Vec<_> = one
        .identities(&exact)
        .into_iter()
        .filter(|id| two.identities(&exact).contains(id))
        .collect();
    assert_eq!(shared, ["key\u{1f}k"]);
}

/// A catalog this release creates identifies inputs by BLAKE3, and keeps it on every later
/// connection; one an earlier release made keeps SHA-256 for good, empty or not: that release's
/// processes may still be landing SHA-256 identities in it.
#[tokio::test]
async fn inputs_are_identified_by_blake3_in_a_new_catalog_and_by_sha256_in_an_upgraded_one() {
    let dir = tempfile::tempdir().unwrap();
    for (backend, url) in catalog_urls(dir.path()).await {
        let catalog = Catalog::connect(&url).await.unwrap();
        assert_eq!(
            catalog.input_hash(),
            InputHash::Blake3,
            "{backend}: a new catalog"
        );
        let again = Catalog::connect_existing(&url).await.unwrap();
        assert_eq!(
            again.input_hash(),
            InputHash::Blake3,
            "{backend}: connected again"
        );
        crate::testing::undo_input_hash_migration(&catalog).await;
        for connection in 0..2 {
            let upgraded = Catalog::connect(&url).await.unwrap();
            assert_eq!(
                upgraded.input_hash(),
                InputHash::Sha256,
                "{backend}: an upgraded catalog, connection {connection}"
            );
        }
    }
}

/// Connections that race to decide agree: whichever proposal is written first is the answer
/// of both.
#[tokio::test]
async fn the_first_decision_on_the_input_hash_is_the_one_every_connection_reads() {
    each_catalog(async |catalog| {
        // This release created it: BLAKE3, whatever a later connection proposes.
        assert_eq!(
            decide_input_hash(catalog.pool(), true).await.unwrap(),
            InputHash::Blake3
        );
        // Undecided (just migrated): the first proposal, SHA-256, holds against BLAKE3's.
        sqlx::query("DELETE FROM input_hash")
            .execute(catalog.pool())
            .await
            .unwrap();
        assert_eq!(
            decide_input_hash(catalog.pool(), true).await.unwrap(),
            InputHash::Sha256
        );
        assert_eq!(
            decide_input_hash(catalog.pool(), false).await.unwrap(),
            InputHash::Sha256
        );
    })
    .await;
}

/// A release refuses a catalog that a later one migrated: what the input hash's decision relies
/// on (a running process of an earlier release is the only one that can land its identities).
#[tokio::test]
async fn a_catalog_migrated_by_a_later_release_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (backend, url) in catalog_urls(dir.path()).await {
        let catalog = Catalog::connect(&url).await.unwrap();
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
             SELECT 9999, 'from a later release', success, checksum, execution_time
             FROM _sqlx_migrations WHERE version = 13",
        )
        .execute(catalog.pool())
        .await
        .unwrap();
        let refused = Catalog::connect(&url).await.map(|_| ()).unwrap_err();
        assert!(refused.to_string().contains("9999"), "{backend}: {refused}");
    }
}

/// Group commit looks for all its inputs in one lookup: each gets the batch its identities name,
/// by every kind of identity and in their order, wherever it stands among hundreds.
#[tokio::test]
async fn a_group_of_inputs_is_recognised_in_one_lookup_by_each_identity() {
    each_catalog(async |catalog| {
        let dcgm = |id: &str, hash: &str, key: Option<&str>| NewBatch {
            source: "dcgm".into(),
            ..batch(id, hash, key)
        };
        let content = "c".repeat(64);
        // Committed one after another, so in this order of `committed_at`.
        for earlier in [
            dcgm("by-content", "h-content", None),
            dcgm("z-by-key", "h-other", Some("k-shared")),
            dcgm("by-content-later", "h-both", None),
            dcgm("by-legacy", "h-legacy", None),
            dcgm("retry-too-old", &retry_hash(&content, 500), None),
            dcgm("retry-in-window", &retry_hash(&content, 1_000), None),
        ] {
            catalog.commit_batch(&earlier, &[], &[]).await.unwrap();
        }
        let (exact, legacy) = (
            CommitOptions::default(),
            CommitOptions {
                legacy_hashes: vec!["h-legacy".into()],
                ..CommitOptions::default()
            },
        );
        let retry_since = |since| CommitOptions {
            retry_since: Some(since),
            legacy_hashes: vec!["h-content".into()],
            ..CommitOptions::default()
        };
        let (since_800, since_1001) = (retry_since(800), retry_since(1_001));
        let new: Vec<NewBatch> = (0..300)
            .map(|i| dcgm(&format!("n{i}"), &format!("h-new-{i}"), None))
            .collect();
        let retry_now = dcgm("r", &retry_hash(&content, 2_000), None);
        let other_content = dcgm("o", &retry_hash(&"d".repeat(64), 2_000), None);
        let named: Vec<(NewBatch, &CommitOptions, Option<&str>)> = vec![
            // A retry in the window outranks a legacy hash of an earlier batch.
            (retry_now.clone(), &since_800, Some("retry-in-window")),
            // Out of the window: the legacy hash.
            (retry_now, &since_1001, Some("by-content")),
            (other_content, &exact, None),
            (dcgm("l", "h-new-x", None), &legacy, Some("by-legacy")),
            // A legacy hash outranks the content, though committed later.
            (dcgm("l2", "h-content", None), &legacy, Some("by-legacy")),
            // Content and key are one rank: the earlier committed wins.
            (
                dcgm("k", "h-both", Some("k-shared")),
                &exact,
                Some("z-by-key"),
            ),
            (dcgm("c", "h-content", None), &exact, Some("by-content")),
            // The content of another source is another input.
            (batch("f", "h-content", None), &exact, None),
        ];
        // 246 new inputs first (one identity each, 16 identities to a statement), so that "l2"
        // has its legacy hash (which wins) at the end of one statement and its content at the
        // start of the next; 54 more new ones follow the named.
        const BEFORE: usize = 246;
        let mut group: Vec<(&NewBatch, &CommitOptions)> =
            new[..BEFORE].iter().map(|b| (b, &exact)).collect();
        group.extend(named.iter().map(|(b, options, _)| (b, *options)));
        group.extend(new[BEFORE..].iter().map(|b| (b, &exact)));
        let found: Vec<Option<String>> = catalog
            .earlier_deliveries(&group)
            .await
            .unwrap()
            .into_iter()
            .map(|b| b.map(|b| b.batch_id))
            .collect();
        let expected: Vec<Option<String>> = std::iter::repeat_n(None, BEFORE)
            .chain(named.iter().map(|(_, _, id)| id.map(str::to_owned)))
            .chain(std::iter::repeat_n(None, 300 - BEFORE))
            .collect();
        assert_eq!(found, expected);

        // What each is, as group commit asks: the same as asking for each alone.
        let (from, to) = (BEFORE - 5, BEFORE + named.len() + 5);
        let outcomes = catalog.recognise(&group[from..to]).await.unwrap();
        let outcomes: Vec<Option<CommitOutcome>> =
            outcomes.into_iter().map(Result::unwrap).collect();
        for (position, outcome) in outcomes.iter().enumerate() {
            let mut alone = catalog
                .recognise(&group[from + position..][..1])
                .await
                .unwrap();
            assert_eq!(outcome, &alone.remove(0).unwrap(), "input {position}");
        }
        let repeats: Vec<_> = outcomes
            .iter()
            .map(|outcome| match outcome {
                Some(CommitOutcome::Duplicate(batch)) => Some(batch.batch_id.as_str()),
                None => None,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(repeats[..5], [None; 5]);
        assert_eq!(repeats[13..], [None; 5]);
        assert_eq!(
            &repeats[5..13],
            [
                Some("retry-in-window"),
                Some("by-content"),
                None,
                Some("by-legacy"),
                Some("by-legacy"),
                Some("z-by-key"),
                Some("by-content"),
                None
            ]
        );
    })
    .await;
}

/// A group's batch rows take several statements past 16 members: all of them commit, or none
/// when any member's input turns out to be committed by another writer meanwhile, whichever
/// statement meets it.
#[tokio::test]
async fn a_group_of_hundreds_commits_every_batch_or_none() {
    each_catalog(async |catalog| {
        let options = CommitOptions::default();
        let batches: Vec<NewBatch> = (0..150)
            .map(|i| batch(&format!("m{i:03}"), &format!("h-m{i:03}"), None))
            .collect();
        let rejected = [Rejection::new(7, "gpu", "not a GPU index", "x")];
        let members: Vec<GroupMember> = batches
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let rejections: &[Rejection] = if i == 100 { &rejected } else { &[] };
                group_member(b, i as u64, rejections, &options)
            })
            .collect();
        // Σ i for i in 0..150 = 150·149/2 = 11,175 rows in the group's one file.
        let files = [file(Table::GpuSamples, "m000", 1, None, 11_175, (0, 10))];

        // Another writer commits the 141st input first: its row is in the ninth INSERT, after
        // eight that went through.
        catalog
            .commit_batch(&batch("cli", "h-m140", None), &[], &[])
            .await
            .unwrap();
        assert_eq!(
            catalog.commit_group(&members, &files).await.unwrap(),
            GroupCommitOutcome::Raced
        );
        assert_only_batches(&catalog, &["cli"]).await;

        // Without it: 149 batches, each with its own rows (11,175 − 140 = 11,035 in all) and
        // the lead's name, and the one rejection.
        let without: Vec<GroupMember> = members
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 140)
            .map(|(_, m)| *m)
            .collect();
        assert_eq!(
            catalog.commit_group(&without, &files).await.unwrap(),
            GroupCommitOutcome::Committed
        );
        let grouped: Vec<BatchRecord> = catalog
            .batches()
            .await
            .unwrap()
            .into_iter()
            .filter(|b| b.batch_id != "cli")
            .collect();
        assert_eq!(grouped.len(), 149);
        assert_eq!(grouped.iter().map(|b| b.rows_landed).sum::<i64>(), 11_035);
        for b in &grouped {
            let i: i64 = b.batch_id[1..].parse().unwrap();
            assert_eq!(
                (
                    b.rows_landed,
                    b.records_rejected,
                    b.committed_with.as_deref()
                ),
                (i, i64::from(i == 100), Some("m000")),
                "{}",
                b.batch_id
            );
        }
        assert_eq!(quarantined(&catalog).await, [("m100".to_string(), 7)]);

        // 120 arrival-stamped retries (240 identities, 15 statements' worth), one of which
        // another writer committed in its window, started at another time: no unique index
        // stops it, the look inside the transaction does.
        let retries: Vec<NewBatch> = (0..120)
            .map(|i| NewBatch {
                source: "dcgm".into(),
                ..batch(
                    &format!("r{i:03}"),
                    &retry_hash(&format!("{i:0>64}"), 5_000),
                    None,
                )
            })
            .collect();
        let in_window = CommitOptions {
            retry_since: Some(4_000),
            ..CommitOptions::default()
        };
        catalog
            .commit_batch(
                &NewBatch {
                    source: "dcgm".into(),
                    ..batch(
                        "other-writer",
                        &retry_hash(&format!("{:0>64}", 110), 4_500),
                        None,
                    )
                },
                &[],
                &[],
            )
            .await
            .unwrap();
        let members: Vec<GroupMember> = retries
            .iter()
            .map(|b| group_member(b, 1, &[], &in_window))
            .collect();
        assert_eq!(
            catalog.commit_group(&members, &[]).await.unwrap(),
            GroupCommitOutcome::Raced
        );
        assert_eq!(catalog.batches().await.unwrap().len(), 151);
        assert_eq!(
            catalog.commit_group(&members[..110], &[]).await.unwrap(),
            GroupCommitOutcome::Committed
        );
        assert_eq!(catalog.batches().await.unwrap().len(), 261);
    })
    .await;
}
