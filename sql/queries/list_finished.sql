-- list_finished.sql - DQ_LIST_FINISHED: `execctl jobs --state
-- done|failed|cancelled` and the console's lists of them: one page,
-- finished last first.
--
-- Keyset: (finished_at, id) descending; the next page starts after the
-- last job of this one ($4: its id, whose key is read by job_pkey).
-- Parameters: $1 state ('done', 'failed' or 'cancelled'), $2 service or
--             NULL, $3 since (finished_at >= it) or NULL, $4 after (an
--             id) or NULL, $5 page size.
-- Result:     one JSON array of jobs as DQ_LIST_JOBS's, as text.
-- Guard:      reads only.  Without a service, the state is a filter on
--             job_finished's rows: a rare state reads that index until
--             the page is full (bounded by $3 when given).
-- Index:      job_finished, or job_service_finished with $2 (migration 011).
-- Sent:       execctl, on its one connection; the console's lane.
-- On failure: execctl exits 115; the console answers 503.
SELECT coalesce(json_agg(r ORDER BY r.finished_at DESC, r.id DESC), '[]')::text
FROM (
    SELECT id, service, state, priority, attempts, runner_instance, created_at, started_at,
        finished_at, left(error, 200) AS error
    FROM @schema@.job
    WHERE state IN ('done', 'failed', 'cancelled') AND state = $1::text
        AND ($2::text IS NULL OR service = $2::text)
        AND ($3::timestamptz IS NULL OR finished_at >= $3::timestamptz)
        AND ($4::bigint IS NULL
             OR (finished_at, id) < (SELECT a.finished_at, a.id FROM @schema@.job a WHERE a.id = $4::bigint))
    ORDER BY finished_at DESC, id DESC
    LIMIT $5::integer
) r
