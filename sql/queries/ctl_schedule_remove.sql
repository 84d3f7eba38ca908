-- ctl_schedule_remove.sql - DQ_CTL_SCHEDULE_REMOVE: `execctl schedule
-- remove`: unschedule(name).
--
-- Parameters: $1 name.
-- Result:     (true) if it was there, (false) if not.
-- Guard:      none needed (one DELETE by the primary key).
-- Index:      schedule_pkey.
-- Sent:       execctl, on its one connection.
-- On failure: execctl exits 115.
SELECT @schema@.unschedule($1)
