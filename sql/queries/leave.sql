-- leave.sql - DQ_LEAVE: at the end of a stop, delete our dispatcher row of
-- this life and, in the same statement, requeue the rows still held under
-- our instance (the leaving dispatcher holds none it knows of: these are
-- claims whose result a lost connection took; the rescue's outcome rule),
-- so that a deleted dispatcher row still means every job it held was
-- requeued.
--
-- Parameters: $1 instance, $2 token, $3 maxAttempts (top level), $4
--             per-service maxAttempts (jsonb {"svc": n}; rescue.sql).
-- Result:     (id) per row requeued or failed.
-- Guard:      instance and token (gone): nothing is done unless our row of
--             this life is there; the rows held under the instance.
-- Index:      dispatcher_pkey, job_holder.
-- Sent:       the beat lane, or an idle hot connection when that lane is
--             not up, so that the stop never waits for a connection
--             attempt.
-- On failure: the loop ends all the same; our row stays, and the rescue of
--             another dispatcher (or our next start's find_own.sql)
--             requeues what it still holds.
WITH gone AS (
    DELETE FROM @schema@.dispatcher
    WHERE instance = $1 AND started_at = $2::timestamptz
    RETURNING instance)
UPDATE @schema@.job j SET
    state = CASE WHEN j.attempts >= coalesce(($4::jsonb ->> j.service)::int, $3::int)
        THEN 'failed' ELSE 'queued' END,
    runner_instance = CASE WHEN j.attempts >= coalesce(($4::jsonb ->> j.service)::int, $3::int)
        THEN j.runner_instance END,
    finished_at = CASE WHEN j.attempts >= coalesce(($4::jsonb ->> j.service)::int, $3::int)
        THEN now() END,
    error = CASE WHEN j.attempts >= coalesce(($4::jsonb ->> j.service)::int, $3::int)
        THEN 'dispatcher_lost' END,
    start_after = now()
FROM gone
WHERE j.runner_instance = gone.instance AND j.state IN ('claimed', 'running')
RETURNING j.id
