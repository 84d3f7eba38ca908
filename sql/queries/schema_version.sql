-- schema_version.sql - DQ_SCHEMA_VERSION: the highest migration applied.
--
-- Parameters: none.
-- Result:     (version); NULL when the table is empty.
-- Guard:      none (reads only).
-- Sent:       hot1 at the start (the first contact); `execdispatch
--             --migrate`.
-- On failure: the daemon names the missing or unknown schema and the
--             command that makes it, and exits (migrate_judge).
SELECT max(version) FROM @schema@.schema_version
