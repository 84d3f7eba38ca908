-- queue_stats.sql - DQ_QUEUE_STATS: the queue's figures for /metrics: the
-- rows not finished per service and state, and for the queued ones how
-- long the one due longest has waited (ms on the database's clock; 0
-- while none is due), ordered by service; and a row (service, 'paused',
-- 1, 0) per paused service (migration 009: execdispatch_service_paused).
--
-- Parameters: none.
-- Result:     (service, state, rows, ms waited) per service and state.
-- Guard:      reads only.  Each half reads the rows of a partial index
--             (queued: job_claim_service or job_claim; held: job_holder),
--             never the finished rows.
-- Index:      job_claim_service or job_claim, job_holder; paused_service
--             (a few rows, read whole).
-- Sent:       chores lane, every METRICS_QUEUE_MS (or ten times as long
--             as the last one took) while /metrics is on.
-- On failure: logged once; the queue's series are left out of /metrics
--             until the next answer.
SELECT service, 'queued', count(*),
    greatest(0, floor(extract(epoch FROM now() - min(start_after)) * 1000))::bigint
FROM @schema@.job
WHERE state = 'queued'
GROUP BY service
UNION ALL
SELECT service, state, count(*), 0
FROM @schema@.job
WHERE state IN ('claimed', 'running')
GROUP BY service, state
UNION ALL
SELECT service, 'paused', 1, 0
FROM @schema@.paused_service
ORDER BY 1
