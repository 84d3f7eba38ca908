-- claim_exec.sql - DQ_CLAIM_EXEC: claim exec-bound rows, each service up
-- to its own admission (picked_s: their claim order, one index scan per
-- service), and the rows of every other service that is not local, up to
-- a bound (picked_o: a service not seen yet, or one no execserver runs,
-- whose rows end unknown_service).  Two CTEs, since FOR UPDATE does not
-- go with UNION.  A paused service (paused_service, migration 009) is
-- dropped from the service list before any index scan: its queued rows
-- are never read.  picked_o walks the distinct services of the queued
-- rows (svc: one probe of job_claim_service per service, none when $4 is
-- 0), drops the listed, local and paused ones, and takes each other
-- service's first rows in claim order (at most $4 each), then the first
-- $4 of those.  A claim clears the error and receipt of the attempt
-- before (job_attempt keeps them), so that an attempt never records an
-- older one.
--
-- Parameters: $1 instance, $2 services (text[]), $3 their limits (int[]),
--             $4 at most this many rows of services not in $2, $5 the
--             local services (text[], never claimed here), $6 token.
-- Result:     (id, attempts, priority, service, job, claims, waited) per
--             row claimed.
-- Guard:      as claim.sql: "me" FOR KEY SHARE, FOR UPDATE SKIP LOCKED,
--             the rows by primary key from an array.
-- Index:      job_claim_service (picked_s, svc, picked_o), job_pkey,
--             paused_service_pkey.
-- Sent:       the hot path (hot1/hot2) when no outcome is due.
-- On failure: logged; the reservation ends; the database away: the
--             claims whose reply was lost are looked for (find_lost.sql)
--             before the next claim.
WITH RECURSIVE me AS MATERIALIZED (
    SELECT instance FROM @schema@.dispatcher
    WHERE instance = $1 AND started_at = $6::timestamptz
    FOR KEY SHARE),
picked_s AS MATERIALIZED (
    SELECT p.id FROM (
        SELECT * FROM unnest($2::text[], $3::int[]) AS u(service, lim)
        WHERE NOT EXISTS (SELECT 1 FROM @schema@.paused_service ps
                          WHERE ps.service = u.service)) AS s
    CROSS JOIN LATERAL (
        SELECT id FROM @schema@.job
        WHERE state = 'queued' AND start_after <= now() AND service = s.service
          AND EXISTS (SELECT 1 FROM me)
        ORDER BY priority DESC, id
        LIMIT s.lim
        FOR UPDATE SKIP LOCKED) p),
svc AS (
    (SELECT service FROM @schema@.job
     WHERE state = 'queued' AND $4::int > 0
     ORDER BY service LIMIT 1)
    UNION ALL
    SELECT (SELECT j.service FROM @schema@.job j
            WHERE j.state = 'queued' AND j.service > svc.service
            ORDER BY j.service LIMIT 1)
    FROM svc WHERE svc.service IS NOT NULL),
picked_o AS MATERIALIZED (
    SELECT id FROM @schema@.job
    WHERE id = ANY(ARRAY(
        SELECT c.id FROM svc CROSS JOIN LATERAL (
            SELECT id, priority FROM @schema@.job
            WHERE state = 'queued' AND start_after <= now() AND service = svc.service
            ORDER BY priority DESC, id
            LIMIT $4::int) c
        WHERE svc.service IS NOT NULL AND svc.service <> ALL($2::text[])
          AND NOT svc.service = ANY($5::text[]) AND EXISTS (SELECT 1 FROM me)
          AND NOT EXISTS (SELECT 1 FROM @schema@.paused_service ps
                          WHERE ps.service = svc.service)
        ORDER BY c.priority DESC, c.id
        LIMIT $4::int))
      AND state = 'queued' AND start_after <= now()
    FOR UPDATE SKIP LOCKED),
picked AS (SELECT id FROM picked_s UNION ALL SELECT id FROM picked_o)
UPDATE @schema@.job j SET
    state = 'claimed', runner_instance = $1,
    attempts = j.attempts + 1, claims = j.claims + 1,
    started_at = NULL, exec_position = NULL, error = NULL, receipt = NULL
WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
RETURNING j.id, j.attempts, j.priority, j.service, j.job::text, j.claims,
    floor(extract(epoch FROM now() - j.start_after) * 1000)::bigint AS waited
