-- Work that one replica of `gpuledger serve` does for all that share this catalog (the ledger's
-- continuous build): the row is the claim, held until `lease_until` (microseconds) and renewed
-- by its owner while it works; a lease that ran out (its replica died) may be taken over.
CREATE TABLE leases (
    name        TEXT PRIMARY KEY,
    owner       TEXT NOT NULL,
    lease_until BIGINT NOT NULL
);
