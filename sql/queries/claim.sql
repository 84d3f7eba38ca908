-- claim.sql - DQ_CLAIM: claim a batch of one class of services: the
-- local services (run by execdispatch itself) or all the others.
--
-- Parameters: $1 instance, $2 limit, $3 the local services (text[]),
--             $4 true: claim those, false: the others, $5 the lowest
--             priority (the reserved local slots), $6 token.
-- Result:     (id, attempts, priority, service, job, claims, waited: ms
--             from its start_after to the claim) per row claimed.
-- Guard:      "me": our dispatcher row of this life, locked FOR KEY SHARE:
--             nothing is claimed unless it is there, and while the claim
--             runs no rescue can take the row (its FOR UPDATE skips it,
--             its DELETE waits) and no other life of the instance can
--             take it over (register.sql waits); the beat, a non-key
--             update, is not held back.  FOR UPDATE SKIP LOCKED: two
--             claims take disjoint rows.  A claim starts without the
--             POSITION written under the one before (exec_position NULL).
--             The rows by primary key from an array, not a join: the
--             planner estimates a CTE of LIMIT $n at a tenth of the table
--             and would hash-join it with a sequential scan of the whole
--             table at every claim.
-- Index:      job_claim (the pick, in its order: no sort), job_pkey.
-- Sent:       the local services' claim (chores lane).
-- Paused:     the rows of a paused service (paused_service, migration
--             009) are left, filtered on the walk of job_claim: this claim
--             spans the local services, which are few; a claim clears the
--             error and receipt of the attempt before (claim_exec.sql).
-- On failure: logged; the database away: the claims whose reply was lost
--             are looked for (find_lost.sql) before the next claim.
WITH me AS MATERIALIZED (
    SELECT instance FROM @schema@.dispatcher
    WHERE instance = $1 AND started_at = $6::timestamptz
    FOR KEY SHARE),
picked AS MATERIALIZED (
    SELECT id FROM @schema@.job
    WHERE state = 'queued' AND start_after <= now() AND EXISTS (SELECT 1 FROM me)
      AND (service = ANY($3::text[])) = $4::bool AND priority >= $5::int
      AND NOT coalesce((SELECT true FROM @schema@.paused_service ps WHERE ps.service = job.service), false)
    ORDER BY priority DESC, id
    LIMIT $2::int
    FOR UPDATE SKIP LOCKED)
UPDATE @schema@.job j SET
    state = 'claimed', runner_instance = $1,
    attempts = j.attempts + 1, claims = j.claims + 1,
    started_at = NULL, exec_position = NULL, error = NULL, receipt = NULL
WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
RETURNING j.id, j.attempts, j.priority, j.service, j.job::text, j.claims,
    floor(extract(epoch FROM now() - j.start_after) * 1000)::bigint AS waited
