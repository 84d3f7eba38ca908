-- ctl_attempts.sql - DQ_CTL_ATTEMPTS: `execctl show`: the job's attempts
-- that ended (attempts(id), migration 009: job_attempt's rows
-- and the row's own final one), oldest first.
--
-- Parameters: $1 id.
-- Result:     (attempt, state, runner, started, finished, error, receipt)
--             per attempt; finished empty for a cancelled run whose end
--             its dispatcher has not reported.
-- Index:      job_attempt_pkey, job_pkey.
-- Sent:       execctl, on its one connection.
-- On failure: execctl exits 115.
SELECT attempt, state, coalesce(runner, ''), coalesce(started::text, ''),
    coalesce(finished::text, ''), coalesce(error, ''), coalesce(receipt::text, '')
FROM @schema@.attempts($1::bigint)
ORDER BY claim
