-- ctl_pause.sql - DQ_CTL_PAUSE: `execctl pause`: the SQL API's pause() (migration 009).
--
-- Parameters: $1 service.
-- Result:     (answer).
-- Index:      paused_service_pkey.
-- Sent:       execctl, on its one connection.
-- On failure: execctl exits 115 (a bad service name: 2).
SELECT @schema@.pause($1::text)
