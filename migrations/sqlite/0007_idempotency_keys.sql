-- The responses of `POST /v1/ingest/{source}` and `POST /v1/prom/write` by the client's
-- Idempotency-Key: the same key again is answered with the first response and lands nothing.
CREATE TABLE idempotency_keys (
    idempotency_key TEXT PRIMARY KEY,
    route           TEXT NOT NULL,      -- the request path, e.g. /v1/ingest/dcgm
    batch_id        TEXT NOT NULL,      -- the ingest batch the first request committed
    status          BIGINT NOT NULL,    -- HTTP status of the first response
    response        TEXT NOT NULL,      -- its JSON body
    created_at      BIGINT NOT NULL     -- microseconds
);
