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
-- Result:     (id) of the job inserted; no row when the guard failed.
-- Guard:      next_run_at and updated_at as read, and still due.  Two
--             dispatchers that read the same occurrence send this with the
--             same $3: the second waits for the first's row lock, then
--             (READ COMMITTED) checks its WHERE again on the row the first
--             committed, whose next_run_at is $5 now: no row, no insert.
--             A replace or a remove in between fails it the same way.
--             The job's id is taken from its sequence in the UPDATE
--             (last_job_id) and the INSERT uses it: the row is updated
--             once.  The INSERT is a plain insert into job: the triggers
--             of submissions apply (notify, the payload's checks).
-- Index:      schedule_pkey; job's insert.
-- Sent:       chores lane, after DQ_SCHED_DUE, one per due row.
-- On failure: a refusal of the job (SQLSTATE class 22 or 23) is written
--             to the row's error (DQ_SCHED_REFUSE); any other failure
--             rolls back both and the row is looked at again at the next
--             pass (still due: the occurrence is not lost).
WITH fired AS (
    UPDATE @schema@.schedule
    SET next_run_at = to_timestamp($5::bigint),
        last_run_at = to_timestamp($4::bigint),
        last_job_id = nextval(pg_get_serial_sequence('@schema@.job', 'id'))
    WHERE name = $1
      AND error IS NULL
      AND (extract(epoch FROM updated_at) * 1000000)::bigint = $2::bigint
      AND (extract(epoch FROM next_run_at) * 1000000)::bigint = $3::bigint
      AND next_run_at <= now()
    RETURNING last_job_id, service, job, priority)
INSERT INTO @schema@.job (id, service, job, priority)
SELECT last_job_id, service, job, priority FROM fired
RETURNING id
