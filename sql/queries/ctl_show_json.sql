-- ctl_show_json.sql - DQ_CTL_SHOW_JSON: `execctl show --json`: the job's
-- row as one JSON object.
--
-- Parameters: $1 id.
-- Result:     (row as JSON text), or none.
-- Index:      job_pkey.
-- Sent:       execctl, on its one connection.
-- On failure: execctl exits 115; no row: 122 ("not found").
SELECT row_to_json(j)::text FROM @schema@.job j WHERE id = $1
