-- ctl_position.sql - DQ_CTL_POSITION: `execctl position`, `wait` and
-- `show`: the SQL API's position() of a job.
--
-- Parameters: $1 id.
-- Result:     (position as JSON text), NULL for no such job (exit 122).
-- Index:      job_pkey, then position()'s own (job_claim_service,
--             job_holder).
-- Sent:       execctl, on its one connection.
-- On failure: execctl exits 115.
SELECT @schema@.position($1)::text
