-- list_jobs.sql - DQ_LIST_JOBS: `execctl jobs` and the console's job list
-- over every state: one page, newest first.
--
-- Keyset: id descending ($3: the last id of the page before).  Ids come
-- from the job_id_seq sequence at the insert: creation order.  No OFFSET:
-- each page reads only its own entries of job_pkey.
-- since: the ids are cut at the first job created at or after $2, found
-- by a binary search over job_pkey (about 20 probes at a million rows),
-- and created_at >= $2 is checked on each row.  The cut assumes
-- created_at grows with id; it does up to the time a submitting
-- transaction stays open (created_at is its start), so a job of such a
-- transaction at the cut may be left out.  Both id bounds are written
-- without OR so that a generic plan has them as index conditions.
-- Parameters: $1 service: NULL (execctl and the console refuse a service
--             without a state; with one this walks job_pkey until the
--             page is full), $2 since (created_at >= it) or NULL, $3
--             after (an id) or NULL, $4 page size (1 to 500).
-- Result:     one JSON array of jobs (id, service, state, priority,
--             attempts, runner_instance, created_at, started_at,
--             finished_at, error cut to 200 characters), as text.
-- Guard:      reads only.  An after id that is gone (the janitor) still
--             continues below it.
-- Index:      job_pkey (no index on created_at: see migration 011).
-- Sent:       execctl, on its one connection; the console's lane.
-- On failure: execctl exits 115; the console answers 503.
WITH RECURSIVE cut (lo, hi) AS (
    SELECT (SELECT min(id) FROM @schema@.job), (SELECT max(id) FROM @schema@.job) + 1
    WHERE $2::timestamptz IS NOT NULL
    UNION ALL
    SELECT CASE WHEN p.id IS NULL OR p.id >= c.hi OR p.created_at >= $2::timestamptz
                THEN c.lo ELSE p.id + 1 END,
        CASE WHEN p.id IS NULL OR p.id >= c.hi THEN c.lo + (c.hi - c.lo) / 2
             WHEN p.created_at >= $2::timestamptz THEN p.id ELSE c.hi END
    FROM cut c
    LEFT JOIN LATERAL (SELECT a.id, a.created_at FROM @schema@.job a
                       WHERE a.id >= c.lo + (c.hi - c.lo) / 2 ORDER BY a.id LIMIT 1) p ON true
    WHERE c.lo < c.hi
)
SELECT coalesce(json_agg(r ORDER BY r.id DESC), '[]')::text
FROM (
    SELECT id, service, state, priority, attempts, runner_instance, created_at, started_at,
        finished_at, left(error, 200) AS error
    FROM @schema@.job
    WHERE ($1::text IS NULL OR service = $1::text)
        AND ($2::timestamptz IS NULL OR created_at >= $2::timestamptz)
        AND id >= coalesce((SELECT min(c.hi) FROM cut c), 0)
        AND id < coalesce($3::bigint, 9223372036854775807)
    ORDER BY id DESC
    LIMIT $4::integer
) r
