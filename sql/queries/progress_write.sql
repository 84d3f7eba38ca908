-- progress_write.sql - DQ_PROGRESS_WRITE: the latest progress of the
-- running jobs of one dispatcher, all in one statement (docs/dispatch.md,
-- "Progress of running jobs").
--
-- Parameters: $1 instance, $2 the rows: a jsonb array of
--             {"id": bigint, "claims": int, "progress": {"fraction", "text"}}.
-- Result:     the ids written.
-- Guard:      each row's claim (id, runner_instance, claims) and state
--             running.  A row another transaction has locked is skipped,
--             not waited for (its next value is written at the next write).
-- Index:      job_pkey.
-- Sent:       chores lane, at most every progressWriteSec.
-- On failure: dropped (a hint): the next value of each job goes next time.
WITH v AS (
    SELECT * FROM jsonb_to_recordset($2::jsonb) AS v(id bigint, claims int, progress jsonb)),
free AS MATERIALIZED (
    SELECT j.id, v.progress FROM @schema@.job j JOIN v ON j.id = v.id AND j.claims = v.claims
    WHERE j.runner_instance = $1 AND j.state = 'running'
    FOR NO KEY UPDATE OF j SKIP LOCKED)
UPDATE @schema@.job j SET progress = free.progress
FROM free WHERE j.id = free.id
RETURNING j.id
