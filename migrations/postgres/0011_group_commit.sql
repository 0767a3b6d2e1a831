-- Group commit (issue 18): small telemetry requests that arrive together share Parquet files and
-- one catalog transaction. Each request is still its own batch (its own identity, rows and
-- quarantine); the group's files are listed under the group's first batch, named here.
ALTER TABLE ingest_batches ADD COLUMN committed_with TEXT;  -- NULL: committed alone, its own files
