-- Budget alerts: one row per (budget, month, threshold) ever crossed. The primary key is what
-- makes an alert once-only: every replica's evaluator inserts with ON CONFLICT DO NOTHING, and
-- only the one whose insert landed calls the webhook.
CREATE TABLE budget_alerts (
    budget        TEXT NOT NULL,             -- the budget's name (catalog_objects kind 'budget')
    month         TEXT NOT NULL,             -- YYYY-MM (UTC)
    threshold     DOUBLE PRECISION NOT NULL,   -- percent of the amount
    spend         DOUBLE PRECISION NOT NULL,   -- spend to date when the crossing was recorded
    amount        DOUBLE PRECISION NOT NULL,
    currency      TEXT NOT NULL,
    percent_used  DOUBLE PRECISION NOT NULL,
    recorded_at   BIGINT NOT NULL,           -- microseconds
    webhook       TEXT,                      -- NULL: the budget has no webhook
    delivery      TEXT NOT NULL,             -- none | pending | delivered | failed
    attempts      BIGINT NOT NULL DEFAULT 0,
    delivered_at  BIGINT,
    last_error    TEXT,
    PRIMARY KEY (budget, month, threshold)
);
