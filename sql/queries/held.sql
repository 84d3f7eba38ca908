-- held.sql - DQ_HELD: the cancel poll: which held rows are still ours.
--
-- Parameters: $1 instance, $2 ids (bigint[]).
-- Result:     (id, claims, ours 0|1, ms since the cancel's commit for a
--             cancelled row, position asked for in the last 5 s 0|1).
-- Guard:      reads only; "ours" is the claim (runner_instance, held
--             state) and the caller compares claims.
-- Index:      job_pkey.
-- Sent:       chores lane, every cancelPollMs while rows are held.
-- On failure: logged; the next poll comes at cancelPollMs.  A row not
--             ours any more has its run dropped (cancelled, or rescued).
SELECT id, claims,
    (runner_instance = $1 AND state IN ('claimed', 'running'))::int,
    CASE WHEN state = 'cancelled' THEN
        floor(extract(epoch FROM clock_timestamp() - finished_at) * 1000)::bigint END,
    (position_wanted_at > now() - interval '5 seconds')::int
FROM @schema@.job
WHERE id = ANY($2::bigint[])
