-- ctl_resume.sql - DQ_CTL_RESUME: `execctl resume`: the SQL API's resume() (migration 009).
--
-- Parameters: $1 service.
-- Result:     (answer).
-- Index:      paused_service_pkey.
-- Sent:       execctl, on its one connection.
-- On failure: execctl exits 115 (a bad service name: 2).
SELECT @schema@.resume($1::text)
