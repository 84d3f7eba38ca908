-- janitor.sql - DQ_JANITOR: the retention janitor: delete at most 1000
-- finished rows older than retainDoneDays.
--
-- Parameters: $1 days.
-- Result:     none (the command tag counts the rows deleted).
-- Guard:      finished rows only (done, failed, cancelled); a row another
--             transaction has locked is skipped, never waited for (the
--             chores queued behind the janitor, the heartbeat's among
--             them, would wait with it).
-- Index:      job_finished, job_pkey.  The oldest first: in that order
--             the index is the cheaper plan whatever the planner makes of
--             the cutoff (a generic plan, plan_cache_mode
--             force_generic_plan, takes a third of the finished rows to
--             qualify and would read the table from its first page
--             instead).
-- Sent:       chores lane, every hour; again after a second while it
--             deletes full batches.
-- On failure: logged; again at the next period (after a second when the
--             database was away).
DELETE FROM @schema@.job
WHERE id IN (
    SELECT id FROM @schema@.job
    WHERE state IN ('done', 'failed', 'cancelled')
      AND finished_at < now() - make_interval(days => $1::int)
    ORDER BY finished_at
    LIMIT 1000
    FOR UPDATE SKIP LOCKED)
