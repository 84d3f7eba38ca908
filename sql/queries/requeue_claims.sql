-- requeue_claims.sql - DQ_REQUEUE_CLAIMS: requeue the held rows under
-- exactly the claims named (what find_own.sql or find_lost.sql found),
-- with the rescue's outcome rule: queued, or failed with dispatcher_lost
-- once attempts >= the service's maxAttempts (rescue.sql).  The
-- attempts of the claims named that were cancelled (job_attempt, finished
-- NULL) are marked finished: nobody runs a claim named here, so retry()
-- need not answer stopping for it.
--
-- Parameters: $1 instance, $2 ids (bigint[]), $3 claims (int[]),
--             $4 maxAttempts (top level), $5 token, $6 per-service
--             maxAttempts (jsonb {"svc": n}).
-- Result:     (id) per row requeued or failed.
-- Guard:      "me": our dispatcher row of this life, locked FOR KEY SHARE
--             (nothing is done unless it is there; meanwhile no rescue
--             takes it and no other life takes it over); each row under
--             the claim found (id, claims, runner_instance, held): a claim
--             made after the look bumped claims and is not touched,
--             however late this runs.
-- Index:      job_pkey, job_attempt_pkey.
-- Sent:       as the look before it: hot1 at the start, else chores lane.
-- On failure: as the look that found the rows (find_own.sql,
--             find_lost.sql): looked for and requeued again later.
WITH me AS MATERIALIZED (
    SELECT instance FROM @schema@.dispatcher
    WHERE instance = $1 AND started_at = $5::timestamptz
    FOR KEY SHARE),
ended AS (
    UPDATE @schema@.job_attempt a SET finished = now()
    FROM unnest($2::bigint[], $3::int[]) AS e(id, claims)
    WHERE a.job = e.id AND a.claim = e.claims AND a.runner = $1 AND a.finished IS NULL
      AND EXISTS (SELECT 1 FROM me))
UPDATE @schema@.job j SET
    state = CASE WHEN j.attempts >= coalesce(($6::jsonb ->> j.service)::int, $4::int)
        THEN 'failed' ELSE 'queued' END,
    runner_instance = CASE WHEN j.attempts >= coalesce(($6::jsonb ->> j.service)::int, $4::int)
        THEN j.runner_instance END,
    finished_at = CASE WHEN j.attempts >= coalesce(($6::jsonb ->> j.service)::int, $4::int)
        THEN now() END,
    error = CASE WHEN j.attempts >= coalesce(($6::jsonb ->> j.service)::int, $4::int)
        THEN 'dispatcher_lost' END,
    start_after = now()
FROM unnest($2::bigint[], $3::int[]) AS u(id, claims)
WHERE j.id = u.id AND j.claims = u.claims AND j.runner_instance = $1
  AND j.state IN ('claimed', 'running')
  AND EXISTS (SELECT 1 FROM me)
RETURNING j.id
