-- list_held.sql - DQ_LIST_HELD: `execctl jobs --state claimed|running`
-- and the console's lists of them: one page, newest first.
--
-- Keyset: id descending ($3: the last id of the page before).  The held
-- rows are few (at most the claim shares of the dispatchers), all read
-- from their partial index and sorted.
-- Parameters: $1 state ('claimed' or 'running'), $2 service or NULL,
--             $3 since (created_at >= it) or NULL, $4 after (an id) or
--             NULL, $5 page size.
-- Result:     one JSON array of jobs as DQ_LIST_JOBS's, as text.
-- Guard:      reads only.
-- Index:      job_holder.
-- Sent:       execctl, on its one connection; the console's lane.
-- On failure: execctl exits 115; the console answers 503.
SELECT coalesce(json_agg(r ORDER BY r.id DESC), '[]')::text
FROM (
    SELECT id, service, state, priority, attempts, runner_instance, created_at, started_at,
        finished_at, left(error, 200) AS error
    FROM @schema@.job
    WHERE state IN ('claimed', 'running') AND state = $1::text
        AND ($2::text IS NULL OR service = $2::text)
        AND ($3::timestamptz IS NULL OR created_at >= $3::timestamptz)
        AND ($4::bigint IS NULL OR id < $4::bigint)
    ORDER BY id DESC
    LIMIT $5::integer
) r
