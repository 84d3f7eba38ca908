-- finish_claim.sql - DQ_FINISH_CLAIM: finish.sql and claim_exec.sql's
-- claim of the listed services (not the other services) in one round
-- trip: the hot path after outcomes.  The rows being finished are held
-- (not queued) in the statement's snapshot, so the claim never picks one
-- of them.  Paused services are dropped from $9 before the per-service
-- scans, and a claim clears the error and receipt of the attempt before
-- (claim_exec.sql).
--
-- Parameters: $1..$8 as finish.sql, $9 services (text[]), $10 their
--             limits (int[]), $11 token.
-- Result:     ('f', id) per outcome written, and ('c', id, attempts,
--             priority, service, job, claims, waited) per row claimed.
-- Guard:      fin: finish.sql's (each row under its claim); the claim:
--             claim.sql's ("me" FOR KEY SHARE, FOR UPDATE SKIP LOCKED,
--             the rows by primary key from an array).
-- Index:      job_pkey (fin, claimed), job_claim_service (picked_s).
-- Sent:       the hot path (hot1/hot2).
-- On failure: as finish.sql for the outcomes; the database away: the
--             claims whose reply was lost are looked for (find_lost.sql)
--             before the next claim.
WITH fin AS (
    UPDATE @schema@.job j SET
        state = u.state,
        runner_instance = CASE WHEN u.state = 'queued' THEN NULL ELSE j.runner_instance END,
        attempts = j.attempts - u.uncount,
        start_after = CASE WHEN u.state = 'queued'
            THEN now() + make_interval(secs => u.delay) ELSE j.start_after END,
        finished_at = CASE WHEN u.state = 'queued' THEN NULL ELSE now() END,
        started_at = CASE WHEN j.started_at IS NOT NULL
                OR jsonb_typeof(u.receipt->'duration_ms') IS DISTINCT FROM 'number' THEN j.started_at
            WHEN (u.receipt->>'duration_ms')::numeric BETWEEN 0 AND 1e12 THEN now()
                - make_interval(secs => (u.receipt->>'duration_ms')::float8 / 1000) END,
        error = u.error,
        receipt = u.receipt
    FROM unnest($2::bigint[], $3::int[], $4::text[], $5::int[], $6::int[], $7::text[],
                $8::jsonb[]) AS u(id, claims, state, uncount, delay, error, receipt)
    WHERE j.id = u.id AND j.runner_instance = $1 AND j.claims = u.claims
      AND j.state IN ('claimed', 'running')
    RETURNING j.id),
me AS MATERIALIZED (
    SELECT instance FROM @schema@.dispatcher
    WHERE instance = $1 AND started_at = $11::timestamptz
    FOR KEY SHARE),
picked_s AS MATERIALIZED (
    SELECT p.id FROM (
        SELECT * FROM unnest($9::text[], $10::int[]) AS u(service, lim)
        WHERE NOT EXISTS (SELECT 1 FROM @schema@.paused_service ps
                          WHERE ps.service = u.service)) AS s
    CROSS JOIN LATERAL (
        SELECT id FROM @schema@.job
        WHERE state = 'queued' AND start_after <= now() AND service = s.service
          AND EXISTS (SELECT 1 FROM me)
        ORDER BY priority DESC, id
        LIMIT s.lim
        FOR UPDATE SKIP LOCKED) p),
claimed AS (
    UPDATE @schema@.job j SET
        state = 'claimed', runner_instance = $1,
        attempts = j.attempts + 1, claims = j.claims + 1,
        started_at = NULL, exec_position = NULL, error = NULL, receipt = NULL
    WHERE j.id = ANY(ARRAY(SELECT id FROM picked_s))
    RETURNING j.id, j.attempts, j.priority, j.service, j.job::text, j.claims,
        floor(extract(epoch FROM now() - j.start_after) * 1000)::bigint AS waited)
SELECT 'c', id, attempts, priority, service, job, claims, waited FROM claimed
UNION ALL SELECT 'f', id, NULL, NULL, NULL, NULL, NULL, NULL FROM fin
