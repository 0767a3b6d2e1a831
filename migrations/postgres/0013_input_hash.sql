-- The hash that identifies an input: its content, with the options it was landed under (see
-- `Identity` in the ingest pipeline). The first connection after this migration decides, once
-- (`Catalog::connect`): BLAKE3, twice as fast as SHA-256 over every byte of every input, for a
-- catalog this release created; SHA-256 for one an earlier release made, whose inputs are stored
-- under it and whose processes may still be running, landing SHA-256 identities (a release checks
-- the migrations only as it connects, and refuses a catalog migrated past what it knows).
CREATE TABLE input_hash (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    algorithm TEXT NOT NULL CHECK (algorithm IN ('sha256', 'blake3'))
);
