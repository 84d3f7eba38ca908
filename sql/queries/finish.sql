-- finish.sql - DQ_FINISH: the outcomes of claims, a batch in one
-- statement: done, failed, or queued again after a retry delay (the
-- attempt given back when uncount is 1: "no slot").
--
-- A run that ended before start.sql saw it running (a short job) gets its
-- started_at here: every receipt of a run that started has duration_ms,
-- the time from the accepted JOB to its end, so the start is the finish
-- less that.  The receipt is the execserver's text: a duration_ms that is
-- not a number from 0 to 1e12 ms (about 31 years: a string, negative,
-- beyond the range of an interval) leaves started_at NULL rather than
-- failing the statement, which would cost the outcome its receipt.
--
-- Parameters: $1 instance, $2 ids (bigint[]), $3 claims (int[]),
--             $4 states (text[]: done, failed, queued), $5 uncount
--             (int[]: 1 gives the attempt back), $6 retry delay s (int[]),
--             $7 errors (text[]), $8 receipts (jsonb[]).
-- Result:     (id) per row whose claim was still ours.
-- Guard:      each row under its claim (id, claims, runner_instance,
--             held): a row cancelled, rescued or claimed again since is
--             not touched.
-- Index:      job_pkey.
-- Sent:       the hot path (hot1/hot2) when outcomes are due and nothing
--             is claimed with them; the chores lane to write outcomes
--             apart (a refused batch, the stop).
-- On failure: the database away: the outcomes stay due and are written
--             again; one whose reply was lost is asked about first
--             (landed.sql).  Refused: written again one row at a time on
--             the chores lane, and a row refused alone is cut down
--             (receipt, then error text, left out) until it is written.
UPDATE @schema@.job j SET
    state = u.state,
    runner_instance = CASE WHEN u.state = 'queued' THEN NULL ELSE j.runner_instance END,
    attempts = j.attempts - u.uncount,
    start_after = CASE WHEN u.state = 'queued'
        THEN now() + make_interval(secs => u.delay) ELSE j.start_after END,
    finished_at = CASE WHEN u.state = 'queued' THEN NULL ELSE now() END,
    started_at = CASE WHEN j.started_at IS NOT NULL
            OR jsonb_typeof(u.receipt->'duration_ms') IS DISTINCT FROM 'number' THEN j.started_at
        WHEN (u.receipt->>'duration_ms')::numeric BETWEEN 0 AND 1e12 THEN now()
            - make_interval(secs => (u.receipt->>'duration_ms')::float8 / 1000) END,
    error = u.error,
    receipt = u.receipt
FROM unnest($2::bigint[], $3::int[], $4::text[], $5::int[], $6::int[], $7::text[],
            $8::jsonb[]) AS u(id, claims, state, uncount, delay, error, receipt)
WHERE j.id = u.id AND j.runner_instance = $1 AND j.claims = u.claims
  AND j.state IN ('claimed', 'running')
RETURNING j.id
