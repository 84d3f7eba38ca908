-- ctl_show.sql - DQ_CTL_SHOW: `execctl show`: the job's row, every column.
--
-- Parameters: $1 id.
-- Result:     the row, or none.
-- Index:      job_pkey.
-- Sent:       execctl, on its one connection.
-- On failure: execctl exits 115; no row: 122 ("not found").
SELECT * FROM @schema@.job WHERE id = $1
