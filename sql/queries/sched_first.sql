-- sched_first.sql - DQ_SCHED_FIRST: a new or replaced schedule's
-- first next_run_at: the first occurrence after both its updated_at (the
-- schedule() call) and its last_run_at (an occurrence submitted before
-- a replace is never submitted again), computed by the dispatcher with
-- cron_next.
--
-- Parameters: $1 name, $2 updated_us (as DQ_SCHED_DUE read it), $3
--             the occurrence in seconds since the epoch.
-- Result:     none (the command tag: 0 when another dispatcher set it
--             first, or holds the row, or the row was replaced or
--             removed meanwhile).
-- Guard:      next_run_at IS NULL, updated_at as read (a replace in
--             between, which sets updated_at, keeps its own NULL), and
--             the occurrence after last_run_at.  The row is locked with
--             SKIP LOCKED first: a row another session holds is left for
--             the next pass, the chores lane never waits for it.
-- Index:      schedule_pkey.
-- Sent:       chores lane, after DQ_SCHED_DUE, one per such row.
-- On failure: logged; the row is looked at again at the next pass.
WITH held AS (
    SELECT name
    FROM @schema@.schedule
    WHERE name = $1
      AND next_run_at IS NULL
      AND error IS NULL
      AND (extract(epoch FROM updated_at) * 1000000)::bigint = $2::bigint
      AND (last_run_at IS NULL OR last_run_at < to_timestamp($3::bigint))
    FOR UPDATE SKIP LOCKED)
UPDATE @schema@.schedule s
SET next_run_at = to_timestamp($3::bigint)
FROM held h
WHERE s.name = h.name
