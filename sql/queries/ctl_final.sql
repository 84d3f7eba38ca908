-- ctl_final.sql - DQ_CTL_FINAL: `execctl wait`: a finished job's error,
-- exit code, receipt and service, shown as `execctl run` shows a receipt.
--
-- Parameters: $1 id.
-- Result:     (error or '', exit code, receipt, service), or none when
--             the row was removed since (retainDoneDays).
-- Index:      job_pkey.
-- Sent:       execctl, on its one connection.
-- On failure: execctl exits 115.
SELECT coalesce(error, ''), receipt->>'exit_code', receipt::text, service
FROM @schema@.job
WHERE id = $1
