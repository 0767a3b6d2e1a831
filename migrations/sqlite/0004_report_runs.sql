-- Exports of the weekly report (`gpuledger serve --report-schedule`), one row per ISO week. The
-- row is also the claim: a replica exports a week only after it took the row's lease, so several
-- replicas sharing this catalog export each week once.
CREATE TABLE report_runs (
    week            TEXT PRIMARY KEY,   -- ISO week, YYYY-Www
    status          TEXT NOT NULL,      -- running | succeeded | failed
    attempts        BIGINT NOT NULL,
    started_at      BIGINT NOT NULL,    -- microseconds, of the latest attempt
    finished_at     BIGINT,
    error           TEXT,               -- of the latest failed attempt
    objects         TEXT NOT NULL,      -- JSON array of the object-store keys written
    lease_owner     TEXT NOT NULL,      -- the replica running (or that last ran) the export
    lease_until     BIGINT NOT NULL,    -- a running export not finished by then may be taken over
    next_attempt_at BIGINT              -- a failed export is retried from then on (backoff)
);
