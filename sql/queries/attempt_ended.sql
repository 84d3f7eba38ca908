-- attempt_ended.sql - DQ_ATTEMPT_ENDED: the run of a claim that was
-- cancelled while held has ended (its receipt came, or its end without
-- one): the attempt's finished is set, so that retry() of the job no
-- longer answers stopping (docs/dispatch.md, "Retry").
--
-- Parameters: $1 instance, $2 id, $3 claims (the claim that ran).
-- Result:     none (the command tag counts the rows set: 0 when the claim
--             was not cancelled but rescued, or it was set already).
-- Guard:      the attempt row of exactly that claim (job, claim), ours
--             (runner), not finished yet.
-- Index:      job_attempt_pkey.
-- Sent:       chores lane, when the run of a lost claim ends.
-- On failure: logged, not sent again: the attempt stays unfinished until
--             this dispatcher's life ends (a stop, a rescue), after which
--             retry() takes the run as ended.
UPDATE @schema@.job_attempt SET finished = now()
WHERE job = $2::bigint AND claim = $3::int AND runner = $1 AND finished IS NULL
