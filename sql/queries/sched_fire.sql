-- sched_fire.sql - DQ_SCHED_FIRE: one occurrence of a due schedule:
-- next_run_at moved on and the job inserted, in one statement, so that
-- each occurrence is submitted exactly once across the fleet
-- (docs/dispatch.md, "Periodic jobs").
--
-- Parameters: $1 name, $2 updated_us, $3 next_us (both as
--             DQ_SCHED_DUE read them), $4 the occurrence this run
--             stands for (last_run_at: the latest one not after now), $5
--             the next occurrence after now (both in seconds since the
--             epoch).
-- Result:     one row (id, moved): id of the job inserted (NULL: none);
--             moved true when next_run_at was moved on.  moved without
--             id: the occurrence is at or before last_run_at (submitted
--             already), moved on without a job.  Neither: the guard
--             failed or another session holds the row.
-- Guard:      next_run_at and updated_at as read, and still due; the row
--             locked with SKIP LOCKED, so the chores lane never waits
--             for a schedule's lock.  Two dispatchers that read the same
--             occurrence send this with the same $3: while the first's
--             statement holds the row the second skips it; once the
--             first committed, the second (READ COMMITTED) checks its
--             WHERE on the row the first committed, whose next_run_at is
--             $5 now: no row, no insert.  A first that rolled back left
--             the row due: the next pass submits it.  A replace or a
--             remove in between fails the guard the same way.  A job is
--             inserted only when $4 is after last_run_at: an occurrence
--             at or before the last one submitted never again, whatever
--             next_run_at says.  The job's id is taken from its sequence
--             in the UPDATE (last_job_id) and the INSERT uses it: the row
--             is updated once.  The INSERT is a plain insert into job:
--             the triggers of submissions apply (notify, the payload's
--             checks).  A fire resets the back-off (failures, retry_at).
-- Index:      schedule_pkey; job's insert.
-- Sent:       chores lane, after DQ_SCHED_DUE, one per due row.
-- On failure: a refusal of the job (SQLSTATE class 22 or 23) is written
--             to the row's error (DQ_SCHED_REFUSE); any other failure
--             rolls back both, the row's back-off is moved on
--             (DQ_SCHED_FAILED) and it is tried again once retry_at is
--             past (still due: the occurrence is not lost).
WITH held AS (
    SELECT name, (last_run_at IS NULL OR last_run_at < to_timestamp($4::bigint)) AS fresh
    FROM @schema@.schedule
    WHERE name = $1
      AND error IS NULL
      AND (extract(epoch FROM updated_at) * 1000000)::bigint = $2::bigint
      AND (extract(epoch FROM next_run_at) * 1000000)::bigint = $3::bigint
      AND next_run_at <= now()
    FOR UPDATE SKIP LOCKED),
fired AS (
    UPDATE @schema@.schedule s
    SET next_run_at = to_timestamp($5::bigint),
        last_run_at = CASE WHEN h.fresh THEN to_timestamp($4::bigint) ELSE s.last_run_at END,
        last_job_id = CASE WHEN h.fresh
                      THEN nextval(pg_get_serial_sequence('@schema@.job', 'id'))
                      ELSE s.last_job_id END,
        failures = 0,
        retry_at = NULL
    FROM held h
    WHERE s.name = h.name
    RETURNING h.fresh, s.last_job_id, s.service, s.job, s.priority),
submitted AS (
    INSERT INTO @schema@.job (id, service, job, priority)
    SELECT last_job_id, service, job, priority FROM fired WHERE fresh
    RETURNING id)
SELECT (SELECT id FROM submitted), EXISTS (SELECT 1 FROM fired)
