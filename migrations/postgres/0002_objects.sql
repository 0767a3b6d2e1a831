-- Declared catalog objects (`gpuledger apply`): nodes, reservations, shared-cost rules, rate cards,
-- manual costs, label policies, … One generic table: a kind's spec is JSON text, validated by the
-- ledger before it lands here, so a new kind needs no migration.
-- Times are microseconds since the Unix epoch (UTC), as in 0001.

CREATE TABLE catalog_objects (
    kind       TEXT NOT NULL,   -- node | reservation | shared_cost_rule | rate_card | manual_cost | label_policy
    name       TEXT NOT NULL,   -- unique within its kind, e.g. a node's cluster/node
    spec       TEXT NOT NULL,   -- JSON, in the normal form the ledger's validation returns
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL, -- the last time the spec changed (an unchanged re-apply keeps it)
    PRIMARY KEY (kind, name)
);
