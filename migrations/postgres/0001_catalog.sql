-- The lake's manifest: which Parquet files exist, which ingest batch wrote them, what was rejected.
-- Times are microseconds since the Unix epoch (UTC) in BIGINT, the same in SQLite and PostgreSQL.

CREATE TABLE ingest_batches (
    batch_id         TEXT PRIMARY KEY,
    source           TEXT NOT NULL,      -- dcgm | focus | tokens | events
    origin           TEXT NOT NULL,      -- file path, '-' for stdin, or an HTTP client
    content_hash     TEXT NOT NULL,      -- sha256 of source, options and bytes: a re-sent input is found here
    idempotency_key  TEXT,
    records_read     BIGINT NOT NULL,
    rows_landed      BIGINT NOT NULL,
    records_rejected BIGINT NOT NULL,
    rows_replaced    BIGINT NOT NULL,    -- rows of earlier deliveries this batch restated
    started_at       BIGINT NOT NULL,
    committed_at     BIGINT NOT NULL
);
CREATE UNIQUE INDEX ingest_batches_content ON ingest_batches (source, content_hash);
CREATE UNIQUE INDEX ingest_batches_idempotency ON ingest_batches (idempotency_key) WHERE idempotency_key IS NOT NULL;

CREATE TABLE files (
    path           TEXT PRIMARY KEY,     -- object-store key, see lake/src/paths.rs
    table_name     TEXT NOT NULL,
    partition_date TEXT NOT NULL,        -- YYYY-MM-DD
    batch_id       TEXT NOT NULL REFERENCES ingest_batches (batch_id),
    scope          TEXT,                 -- restatement scope (billing: account|period)
    row_count      BIGINT NOT NULL,
    byte_count     BIGINT NOT NULL,
    min_ts         BIGINT NOT NULL,
    max_ts         BIGINT NOT NULL,
    created_at     BIGINT NOT NULL,
    replaced_by    TEXT                  -- the batch whose delivery of the same scope replaced this file
);
CREATE INDEX files_active_by_time ON files (table_name, min_ts, max_ts) WHERE replaced_by IS NULL;
CREATE INDEX files_active_by_scope ON files (table_name, scope) WHERE replaced_by IS NULL;

CREATE TABLE quarantine (
    id         BIGSERIAL PRIMARY KEY,
    batch_id   TEXT NOT NULL REFERENCES ingest_batches (batch_id),
    source     TEXT NOT NULL,
    origin     TEXT NOT NULL,
    line       BIGINT NOT NULL,
    field      TEXT NOT NULL,
    reason     TEXT NOT NULL,
    raw        TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX quarantine_batch ON quarantine (batch_id);
