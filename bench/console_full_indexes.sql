-- console_full_indexes.sql - the two full indexes that migration 011 does
-- without: the variant bench/hotpath_indexes.py measures against it
-- (bench/notes/console.md: the variant "full" = 011_console.sql + this file).
-- A state change is never a heap-only update, so each full index takes an
-- entry at every claim, start and finish.
CREATE INDEX IF NOT EXISTS job_created ON @schema@.job (created_at, id);
CREATE INDEX IF NOT EXISTS job_service_created ON @schema@.job (service, created_at, id);
