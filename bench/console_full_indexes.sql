-- console_full_indexes.sql - the console migration with two full indexes (job_created, job_service_created): the variant bench/hotpath_indexes.py compares against migration 011 (bench/notes/console.md).
--
-- Two indexes for the job lists in creation order (newest first, keyset
-- (created_at, id)): job_created for all services, job_service_created
-- for one; and job_service_finished for the finished lists of one service
-- and state (last finished first): without it a state a service rarely
-- ends in reads every finished row of the table for a page (1.3 s at a
-- million rows).  Their cost: a change of state is never a heap-only
-- (HOT) update (state is in the partial indexes' predicates), so every
-- index takes an entry at each of a job's versions: job_created and
-- job_service_created four per job (submit, claim, start, finish),
-- job_service_finished one (the finished version only).  Measured on
-- 50,000 rows changed in one statement each: claim, start and finish
-- together 2.4 s before, 3.9 s after, about 30 us per job
-- (docs/dispatch.md, "Listing and statistics").

-- Two views for applications, read by the statements of
-- sql/queries/stats.sql and state_counts.sql:
--   service_stats  per service: queued, claimed, running (exact, from the
--                  partial indexes), done, failed and cancelled in the last
--                  hour (exact, from job_finished), the oldest due queued
--                  row's wait, and p50/p95 of queue wait and run time over
--                  the window: the rows finished in the last hour, at most
--                  the 10,000 newest (all services together);
--   state_counts   rows per state; queued, claimed and running exact;
--                  the finished states exact while the table holds at most
--                  100,000 rows by pg_class.reltuples (or was never
--                  analyzed), else estimated from reltuples and the state
--                  column's statistics (pg_stats), with estimated = true.
--
-- CREATE INDEX takes the job table's SHARE lock for the build (submits,
-- claims and finishes wait: about a second per million rows); the lock
-- itself is waited for 2 s at most (then the migration fails, "lock
-- timeout", to be run again).  Applied again over its own result it
-- changes nothing (IF NOT EXISTS, CREATE OR REPLACE).

SET LOCAL lock_timeout = '2s';
CREATE INDEX IF NOT EXISTS job_created ON @schema@.job (created_at, id);
CREATE INDEX IF NOT EXISTS job_service_created ON @schema@.job (service, created_at, id);
CREATE INDEX IF NOT EXISTS job_service_finished ON @schema@.job (service, state, finished_at, id)
    WHERE state IN ('done', 'failed', 'cancelled');
SET LOCAL lock_timeout = DEFAULT;

CREATE OR REPLACE VIEW @schema@.service_stats AS
WITH q AS (
    SELECT service, count(*) AS queued,
        greatest(0, floor(extract(epoch FROM now() - min(start_after)) * 1000))::bigint
            AS oldest_queued_ms
    FROM @schema@.job WHERE state = 'queued' GROUP BY service
), h AS (
    SELECT service, count(*) FILTER (WHERE state = 'claimed') AS claimed,
        count(*) FILTER (WHERE state = 'running') AS running
    FROM @schema@.job WHERE state IN ('claimed', 'running') GROUP BY service
), f AS (
    SELECT service, count(*) FILTER (WHERE state = 'done') AS done_last_hour,
        count(*) FILTER (WHERE state = 'failed') AS failed_last_hour,
        count(*) FILTER (WHERE state = 'cancelled') AS cancelled_last_hour
    FROM @schema@.job
    WHERE state IN ('done', 'failed', 'cancelled') AND finished_at >= now() - interval '1 hour'
    GROUP BY service
), w AS (
    SELECT service, started_at - greatest(start_after, created_at) AS wait,
        finished_at - started_at AS run
    FROM @schema@.job
    WHERE state IN ('done', 'failed', 'cancelled') AND finished_at >= now() - interval '1 hour'
        AND started_at IS NOT NULL
    ORDER BY finished_at DESC
    LIMIT 10000
), p AS (
    SELECT service, count(*) AS window_rows,
        floor(1000 * extract(epoch FROM percentile_disc(0.5) WITHIN GROUP (ORDER BY wait)))::bigint AS wait_p50_ms,
        floor(1000 * extract(epoch FROM percentile_disc(0.95) WITHIN GROUP (ORDER BY wait)))::bigint AS wait_p95_ms,
        floor(1000 * extract(epoch FROM percentile_disc(0.5) WITHIN GROUP (ORDER BY run)))::bigint AS run_p50_ms,
        floor(1000 * extract(epoch FROM percentile_disc(0.95) WITHIN GROUP (ORDER BY run)))::bigint AS run_p95_ms
    FROM w GROUP BY service
), s AS (
    SELECT service FROM q UNION SELECT service FROM h UNION SELECT service FROM f
)
SELECT s.service, coalesce(q.queued, 0) AS queued, coalesce(h.claimed, 0) AS claimed,
    coalesce(h.running, 0) AS running, coalesce(f.done_last_hour, 0) AS done_last_hour,
    coalesce(f.failed_last_hour, 0) AS failed_last_hour,
    coalesce(f.cancelled_last_hour, 0) AS cancelled_last_hour,
    coalesce(q.oldest_queued_ms, 0) AS oldest_queued_ms, coalesce(p.window_rows, 0) AS window_rows,
    p.wait_p50_ms, p.wait_p95_ms, p.run_p50_ms, p.run_p95_ms
FROM s LEFT JOIN q USING (service) LEFT JOIN h USING (service) LEFT JOIN f USING (service)
    LEFT JOIN p USING (service);

CREATE OR REPLACE VIEW @schema@.state_counts AS
WITH t AS (
    SELECT c.reltuples > 100000 AS big, greatest(c.reltuples, 0)::bigint AS n
    FROM pg_class c WHERE c.oid = '@schema@.job'::regclass
), live AS (
    SELECT (SELECT count(*) FROM @schema@.job WHERE state = 'queued') AS queued,
        count(*) FILTER (WHERE state = 'claimed') AS claimed,
        count(*) FILTER (WHERE state = 'running') AS running
    FROM @schema@.job WHERE state IN ('claimed', 'running')
), mcv AS (
    SELECT v.state, v.freq
    FROM pg_stats st, unnest(st.most_common_vals::text::text[], st.most_common_freqs) AS v(state, freq)
    WHERE st.tablename = 'job' AND st.attname = 'state'
        AND format('%I.%I', st.schemaname, st.tablename)::regclass = '@schema@.job'::regclass
), fin AS (
    -- the CASE here, row by row, so that only the count it takes runs
    SELECT s.state, t.big AS estimated,
        CASE WHEN t.big
            THEN round(t.n * coalesce((SELECT m.freq FROM mcv m WHERE m.state = s.state), 0))::bigint
            ELSE (SELECT count(*) FROM @schema@.job j
                  WHERE j.state IN ('done', 'failed', 'cancelled') AND j.state = s.state)
        END AS rows
    FROM (VALUES ('done'), ('failed'), ('cancelled')) AS s(state), t
)
SELECT 'queued'::text AS state, live.queued AS rows, false AS estimated FROM live
UNION ALL SELECT 'claimed', live.claimed, false FROM live
UNION ALL SELECT 'running', live.running, false FROM live
UNION ALL SELECT fin.state, fin.rows, fin.estimated FROM fin;
