-- ctl_schedule_list.sql - DQ_CTL_SCHEDULE_LIST: `execctl schedule list`.
--
-- Parameters: none.
-- Result:     (name, cron, tz, service, next_run_at, last_run_at,
--             last_job_id, error) by name; times as text in the session's
--             zone, to the second.
-- Guard:      none (it reads).
-- Index:      schedule_pkey (the whole table).
-- Sent:       execctl, on its one connection.
-- On failure: execctl exits 115.
SELECT name, cron, tz, service,
       to_char(next_run_at, 'YYYY-MM-DD HH24:MI:SSOF'),
       to_char(last_run_at, 'YYYY-MM-DD HH24:MI:SSOF'),
       last_job_id, error
FROM @schema@.schedule
ORDER BY name
