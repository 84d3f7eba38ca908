-- landed.sql - DQ_LANDED: whether an outcome whose reply a lost
-- connection took was written: the row carries it under its claim.
--
-- Parameters: $1 id, $2 claims, $3 state, $4 error, $5 receipt (jsonb),
--             $6 instance.
-- Result:     one row if it was written, else none.
-- Guard:      reads only; the claim (id, claims) and the outcome's every
--             column: a row finished otherwise since (cancelled, rescued)
--             does not match.
-- Index:      job_pkey.
-- Sent:       chores lane.
-- On failure: no answer is not "not landed": the outcome stays due, is
--             written again at the next turn, and asked about again.
SELECT 1 FROM @schema@.job
WHERE id = $1::bigint AND claims = $2::int AND state = $3
  AND error IS NOT DISTINCT FROM $4
  AND receipt IS NOT DISTINCT FROM $5::jsonb
  AND (runner_instance = $6 OR (state = 'queued' AND runner_instance IS NULL))
