-- 004_claim_service.sql - the per-service claim's own index
-- (docs/dispatch.md, "The table").
--
-- The exec-bound claim (DQ_CLAIM_EXEC, DQ_FINISH_CLAIM) takes each
-- service's queued rows in claim order up to that service's admission,
-- one index scan per service.  On job_claim alone that scan walks the
-- queued rows of every service in priority order and filters by service,
-- so a service whose rows sit behind many rows of others paid for all of
-- them.  This index is exactly that scan's filter and order: state in the
-- predicate only (updates that leave it queued stay heap-only), service,
-- priority and id never change.  job_claim stays for the other class and
-- the local services' claim, which span services.
--
-- Inside the migration's transaction (no CONCURRENTLY): the build holds a
-- lock on the table for as long as it reads the queued rows, which a
-- queue keeps few.  IF NOT EXISTS: an index made by hand beforehand under
-- this name is taken as it is.

CREATE INDEX IF NOT EXISTS job_claim_service ON @schema@.job (service, priority DESC, id)
    WHERE state = 'queued';
