-- console_dispatchers.sql - DQ_CONSOLE_DISPATCHERS: the console's list of
-- dispatchers: instance, host, pid, started, heartbeat age, why it claims
-- nothing (or null), and the rows it holds (claimed, running).
--
-- Parameters: none.
-- Result:     one JSON array, as text.
-- Guard:      reads only.
-- Index:      dispatcher_pkey (the table is small), job_holder.
-- Sent:       the console's lane.
-- On failure: the console answers 503.
SELECT coalesce(json_agg(r ORDER BY r.instance), '[]')::text
FROM (
    SELECT d.instance, d.host, d.pid, d.started_at,
        floor(extract(epoch FROM now() - d.heartbeat_at) * 1000)::bigint AS heartbeat_age_ms,
        d.claiming_nothing,
        (SELECT count(*) FROM @schema@.job j
         WHERE j.state IN ('claimed', 'running') AND j.runner_instance = d.instance) AS held
    FROM @schema@.dispatcher d
) r
