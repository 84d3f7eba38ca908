-- ctl_cancel.sql - DQ_CTL_CANCEL: `execctl cancel`: the SQL API's
-- cancel(), answering cancelled, requested or not_found_or_finished.
--
-- Parameters: $1 id.
-- Result:     (answer); not_found_or_finished exits 122.
-- Index:      job_pkey.
-- Sent:       execctl, on its one connection.
-- On failure: execctl exits 115.
SELECT @schema@.cancel($1)
