-- The format of the ledger tables a day was built in. A release whose `gpu_hours` carries new
-- columns raises its format: days built in an older one are rebuilt whole by the next build
-- (the live ledger's first round, or `gpuledger ledger build`), not left with those columns NULL.
ALTER TABLE ledger_days ADD COLUMN format BIGINT NOT NULL DEFAULT 1;
