-- sched_first.sql - DQ_SCHED_FIRST: a new or replaced schedule's
-- first next_run_at: the first occurrence after its updated_at (the
-- schedule() call), computed by the dispatcher with cron_next.
--
-- Parameters: $1 name, $2 updated_us (as DQ_SCHED_DUE read it), $3
--             the occurrence in seconds since the epoch.
-- Result:     none (the command tag: 0 when another dispatcher set it
--             first, or the row was replaced or removed meanwhile).
-- Guard:      next_run_at IS NULL and updated_at as read: a replace in
--             between (which sets updated_at) keeps its own NULL.
-- Index:      schedule_pkey.
-- Sent:       chores lane, after DQ_SCHED_DUE, one per such row.
-- On failure: logged; the row is looked at again at the next pass.
UPDATE @schema@.schedule
SET next_run_at = to_timestamp($3::bigint)
WHERE name = $1
  AND next_run_at IS NULL
  AND error IS NULL
  AND (extract(epoch FROM updated_at) * 1000000)::bigint = $2::bigint
