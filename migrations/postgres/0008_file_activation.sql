-- When a file last became active and when it was retired. A re-delivery of an earlier billing
-- delivery makes that delivery's files active again without a new batch: the ledger finds what
-- changed since it built a day by these times, not by `created_at` (the first commit).
ALTER TABLE files ADD COLUMN activated_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE files ADD COLUMN replaced_at BIGINT;
UPDATE files SET activated_at = created_at;
UPDATE files SET replaced_at = (SELECT committed_at FROM ingest_batches b WHERE b.batch_id = files.replaced_by)
 WHERE replaced_by IS NOT NULL;
