-- list_jobs.sql - DQ_LIST_JOBS: `execctl jobs` and the console's job list
-- over every state: one page, newest first.
--
-- Keyset: (created_at, id) descending; the next page starts after the
-- last job of this one ($3: its id, whose key is read by job_pkey).  No
-- OFFSET: each page reads only its own rows of the index.
-- Parameters: $1 service or NULL, $2 since (created_at >= it) or NULL,
--             $3 after (an id) or NULL, $4 page size (1 to 500).
-- Result:     one JSON array of jobs (id, service, state, priority,
--             attempts, runner_instance, created_at, started_at,
--             finished_at, error cut to 200 characters), as text.
-- Guard:      reads only.  An after id that is gone (the janitor) gives
--             an empty page.
-- Index:      job_created, or job_service_created with $1 (migration 008).
-- Sent:       execctl, on its one connection; the console's lane.
-- On failure: execctl exits 115; the console answers 503.
SELECT coalesce(json_agg(r ORDER BY r.created_at DESC, r.id DESC), '[]')::text
FROM (
    SELECT id, service, state, priority, attempts, runner_instance, created_at, started_at,
        finished_at, left(error, 200) AS error
    FROM @schema@.job
    WHERE ($1::text IS NULL OR service = $1::text)
        AND ($2::timestamptz IS NULL OR created_at >= $2::timestamptz)
        AND ($3::bigint IS NULL
             OR (created_at, id) < (SELECT a.created_at, a.id FROM @schema@.job a WHERE a.id = $3::bigint))
    ORDER BY created_at DESC, id DESC
    LIMIT $4::integer
) r
