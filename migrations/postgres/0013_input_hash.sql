-- The hash that identifies an input: its content, with the options it was landed under (see
-- `Identity` in the ingest pipeline). A catalog that holds no ingested batch yet takes BLAKE3,
-- twice as fast as SHA-256 over every byte of every input; one that already holds some keeps
-- SHA-256, the hash they are stored under, so that an input landed before is still known when
-- it comes again. Ledger builds and compactions store no content hash. A release before this one
-- refuses the catalog (an unknown migration), so it never lands a SHA-256 identity beside them.
CREATE TABLE input_hash (
    algorithm TEXT NOT NULL CHECK (algorithm IN ('sha256', 'blake3'))
);
INSERT INTO input_hash (algorithm)
SELECT CASE
    WHEN EXISTS (SELECT 1 FROM ingest_batches WHERE source NOT IN ('ledger', 'compaction'))
    THEN 'sha256'
    ELSE 'blake3'
END;
