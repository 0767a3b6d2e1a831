-- API tokens for `gpuledger serve` (REST and the Postgres wire). Only a SHA-256 of the secret is
-- kept: a token is shown once, when it is created.
CREATE TABLE api_tokens (
    id          TEXT PRIMARY KEY,          -- the public part of the token, for listing and revoking
    name        TEXT NOT NULL,
    secret_hash TEXT NOT NULL UNIQUE,      -- hex SHA-256 of the whole token
    scope       TEXT NOT NULL,             -- read | ingest | admin
    team        TEXT,                      -- NULL: every team
    created_at  BIGINT NOT NULL,           -- microseconds
    revoked_at  BIGINT
);
