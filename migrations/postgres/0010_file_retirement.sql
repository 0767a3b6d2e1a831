-- Where a retired file's object is, so that `tables/` holds exactly the active files (issue 16):
-- a file retired by a restatement, a ledger rebuild or a compaction is moved under
-- `_superseded/` (lake/src/paths.rs) and deleted there after a grace period. The catalog is
-- changed first and the store follows (lake/src/retirement.rs), so a pass interrupted at any
-- step is finished by the next one.
ALTER TABLE files ADD COLUMN compacted_at BIGINT;  -- merged into a compacted file: never active again
ALTER TABLE files ADD COLUMN moved_at BIGINT;      -- its object is under _superseded/
ALTER TABLE files ADD COLUMN deleted_at BIGINT;    -- its object is gone
CREATE INDEX files_to_move ON files (path) WHERE replaced_by IS NOT NULL AND moved_at IS NULL AND deleted_at IS NULL;
CREATE INDEX files_to_restore ON files (path) WHERE replaced_by IS NULL AND moved_at IS NOT NULL;
CREATE INDEX files_to_delete ON files (moved_at) WHERE moved_at IS NOT NULL AND deleted_at IS NULL;
