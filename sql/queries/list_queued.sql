-- list_queued.sql - DQ_LIST_QUEUED: `execctl jobs --state queued` and the
-- console's list of queued jobs: one page in claim order (the waiting
-- line: priority, then id).
--
-- Keyset: (priority descending, id ascending), the claim's order; the
-- next page starts after the last job of this one ($3: its id, whose
-- priority is read by job_pkey): the rest of its priority (id > $3),
-- then the lower priorities, two range reads of the index (a row
-- comparison cannot mix the directions).
-- Parameters: $1 service or NULL, $2 since (created_at >= it) or NULL,
--             $3 after (an id) or NULL, $4 page size.
-- Result:     one JSON array of jobs as DQ_LIST_JOBS's, as text.
-- Guard:      reads only.
-- Index:      job_claim, or job_claim_service with $1.
-- Sent:       execctl, on its one connection; the console's lane.
-- On failure: execctl exits 115; the console answers 503.
SELECT coalesce(json_agg(r ORDER BY r.priority DESC, r.id), '[]')::text
FROM (
    SELECT * FROM (
        (SELECT id, service, state, priority, attempts, runner_instance, created_at, started_at,
            finished_at, left(error, 200) AS error
        FROM @schema@.job
        WHERE state = 'queued' AND $3::bigint IS NULL
            AND ($1::text IS NULL OR service = $1::text)
            AND ($2::timestamptz IS NULL OR created_at >= $2::timestamptz)
        ORDER BY priority DESC, id
        LIMIT $4::integer)
        UNION ALL
        (SELECT id, service, state, priority, attempts, runner_instance, created_at, started_at,
            finished_at, left(error, 200) AS error
        FROM @schema@.job
        WHERE state = 'queued'
            AND priority = (SELECT a.priority FROM @schema@.job a WHERE a.id = $3::bigint)
            AND id > $3::bigint
            AND ($1::text IS NULL OR service = $1::text)
            AND ($2::timestamptz IS NULL OR created_at >= $2::timestamptz)
        ORDER BY priority DESC, id
        LIMIT $4::integer)
        UNION ALL
        (SELECT id, service, state, priority, attempts, runner_instance, created_at, started_at,
            finished_at, left(error, 200) AS error
        FROM @schema@.job
        WHERE state = 'queued'
            AND priority < (SELECT a.priority FROM @schema@.job a WHERE a.id = $3::bigint)
            AND ($1::text IS NULL OR service = $1::text)
            AND ($2::timestamptz IS NULL OR created_at >= $2::timestamptz)
        ORDER BY priority DESC, id
        LIMIT $4::integer)
    ) u
    ORDER BY priority DESC, id
    LIMIT $4::integer
) r
