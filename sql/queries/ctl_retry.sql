-- ctl_retry.sql - DQ_CTL_RETRY: `execctl retry`: the SQL API's retry() (migration 009).
--
-- Parameters: $1 id.
-- Result:     (answer).
-- Index:      job_pkey, job_attempt_pkey.
-- Sent:       execctl, on its one connection.
-- On failure: execctl exits 115.
SELECT @schema@.retry($1::bigint)
