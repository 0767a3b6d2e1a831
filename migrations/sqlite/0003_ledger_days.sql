-- When each day of the ledger was last built. Input files committed (or catalog objects changed)
-- after `built_at` make the hours they touch dirty; `gpuledger ledger build` recomputes those.
CREATE TABLE ledger_days (
    day      TEXT PRIMARY KEY,   -- YYYY-MM-DD (UTC)
    built_at BIGINT NOT NULL,    -- microseconds; the moment the build read its inputs
    batch_id TEXT NOT NULL       -- the batch that holds the day's gpu_hours, cost_entries, allocations
);
