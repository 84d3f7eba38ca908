-- sched_failed.sql - DQ_SCHED_FAILED: the back-off of a schedule whose
-- fire failed other than by a refusal of its job (a user trigger's
-- P0001, a permission, a timeout): failures counted, and the row left
-- out of the passes until retry_at (docs/dispatch.md, "Periodic jobs").
-- The n-th failure in a row waits base * 2^(n-1) seconds, at most an
-- hour; a fire or a replace resets both.
--
-- Parameters: $1 name, $2 updated_us, $3 next_us (as DQ_SCHED_DUE read
--             them for the failed fire), $4 the base in seconds
--             (scheduleCheckSec).
-- Result:     (failures, wait_s) when this statement wrote it: the
--             failures in a row and the seconds until retry_at; no row
--             when the row changed meanwhile (another dispatcher fired
--             it, a replace) or another session holds it.
-- Guard:      next_run_at and updated_at as read, error NULL; the row
--             locked with SKIP LOCKED first (the lane never waits).
-- Index:      schedule_pkey.
-- Sent:       chores lane, after a DQ_SCHED_FIRE that failed.
-- On failure: logged; the row is tried again at the next pass.
WITH held AS (
    SELECT name
    FROM @schema@.schedule
    WHERE name = $1
      AND error IS NULL
      AND (extract(epoch FROM updated_at) * 1000000)::bigint = $2::bigint
      AND (extract(epoch FROM next_run_at) * 1000000)::bigint = $3::bigint
    FOR UPDATE SKIP LOCKED)
UPDATE @schema@.schedule s
SET failures = s.failures + 1,
    retry_at = now() + make_interval(secs => least($4::bigint * power(2, least(s.failures, 20)), 3600))
FROM held h
WHERE s.name = h.name
RETURNING s.failures, ceil(extract(epoch FROM s.retry_at - now()))::bigint
