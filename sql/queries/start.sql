-- start.sql - DQ_START: claimed rows whose run started are marked running.
--
-- Parameters: $1 instance, $2 ids (bigint[]), $3 claims (int[]).
-- Result:     (id, 1) per row changed or already running under the same
--             claim, (id, 0) per row still claimed that another
--             transaction has locked.
-- Progress:   cleared: a requeued row (retry, rescue, give-back) still
--             holds its last attempt's, which is not the new run's.
-- Guard:      each row under its claim (id, claims, runner_instance,
--             state claimed or running).  A row another transaction has
--             locked is skipped, not waited for, and answered as still
--             claimed (0), so that its start is tried again (FOR NO KEY
--             UPDATE, the UPDATE's own lock: a key-share lock is not
--             skipped).  A row already running under the same claim is
--             answered as started: a START whose commit went through but
--             whose reply the lost connection took, sent again, finds its
--             runs started, not their claims lost.
-- Index:      job_pkey.
-- Sent:       chores lane, every START_CHECK_MS while runs are unstarted.
-- On failure: logged; tried again at the next START_CHECK_MS.  A row not
--             answered at all lost its claim: its run is dropped.
WITH u AS (SELECT * FROM unnest($2::bigint[], $3::int[]) AS u(id, claims)),
mine AS (
    SELECT j.id, j.state FROM @schema@.job j
    JOIN u ON j.id = u.id AND j.claims = u.claims
    WHERE j.runner_instance = $1 AND j.state IN ('claimed', 'running')),
free AS MATERIALIZED (
    SELECT j.id FROM @schema@.job j
    JOIN u ON j.id = u.id AND j.claims = u.claims
    WHERE j.runner_instance = $1 AND j.state = 'claimed'
    FOR NO KEY UPDATE OF j SKIP LOCKED),
run AS (
    UPDATE @schema@.job j SET state = 'running', started_at = now(), progress = NULL
    WHERE j.id IN (SELECT id FROM free)
    RETURNING j.id)
SELECT id, 1 FROM run
UNION ALL SELECT id, 1 FROM mine WHERE state = 'running'
UNION ALL SELECT id, 0 FROM mine
    WHERE state = 'claimed' AND id NOT IN (SELECT id FROM free)
