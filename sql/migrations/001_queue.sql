-- 001_queue.sql - the job queue of execdispatch (docs/dispatch.md).
--
-- @schema@ is replaced by the configured schema (a quoted identifier) when
-- `execdispatch --migrate` applies this file; the whole migration runs in
-- one transaction together with its row in schema_version.
--
-- Invariants the dispatchers rely on:
--  * a held row (claimed or running) names its dispatcher in runner_instance
--    (queued rows have none; finished rows keep the last one);
--  * every change of a held row names its claim in the WHERE clause
--    (runner_instance, attempts, state; since 005 claims instead of
--    attempts), so a changed claim is a changed row count, never an
--    overwritten outcome;
--  * done, failed and cancelled are final: nothing moves a row out of them.

CREATE TABLE @schema@.job (
    id              bigserial PRIMARY KEY,
    service         text NOT NULL,
    priority        integer NOT NULL DEFAULT 0,
    job             jsonb NOT NULL,
    state           text NOT NULL DEFAULT 'queued',
    attempts        integer NOT NULL DEFAULT 0,
    runner_instance text,
    start_after     timestamptz NOT NULL DEFAULT now(),
    created_at      timestamptz NOT NULL DEFAULT now(),
    started_at      timestamptz,
    finished_at     timestamptz,
    error           text,
    receipt         jsonb,
    CONSTRAINT job_state CHECK (state IN ('queued', 'claimed', 'running', 'done', 'failed', 'cancelled')),
    CONSTRAINT job_held CHECK (state NOT IN ('claimed', 'running') OR runner_instance IS NOT NULL),
    CONSTRAINT job_priority CHECK (priority BETWEEN -1000 AND 1000),
    CONSTRAINT job_service CHECK (service ~ '^[A-Za-z0-9_.-]{1,64}$'),
    CONSTRAINT job_payload CHECK (jsonb_typeof(job) = 'object')
) WITH (
    -- room on each page for a row's next versions.  A claim, start or
    -- finish is never a heap-only (HOT) update: state is in the partial
    -- indexes' predicates, which count as indexed columns (none of
    -- 1,350,000 such updates was, bench/hotpath_indexes.py); so each
    -- version takes an entry in job_pkey and in every partial index whose
    -- predicate it matches.  The free space keeps the new version on the
    -- old one's page.
    fillfactor = 70,
    -- a queue turns its rows over quickly: vacuum after 2 % dead rows, not
    -- 20 %, and without the cost delay, so that SKIP LOCKED scans do not
    -- wade through dead tuples
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 200,
    autovacuum_analyze_scale_factor = 0.05,
    autovacuum_vacuum_cost_delay = 0
);

-- The claim: queued rows in priority order then id.  Exactly the filter
-- and order of the claim statement; finished and held rows are not in it.
CREATE INDEX job_claim ON @schema@.job (priority DESC, id) WHERE state = 'queued';
-- The rescue and a dispatcher's start: held rows by their dispatcher.
CREATE INDEX job_holder ON @schema@.job (runner_instance) WHERE state IN ('claimed', 'running');
-- The retention janitor: finished rows by age.
CREATE INDEX job_finished ON @schema@.job (finished_at) WHERE state IN ('done', 'failed', 'cancelled');

-- One row per live dispatcher, refreshed every heartbeatSec.
CREATE TABLE @schema@.dispatcher (
    instance     text PRIMARY KEY,
    host         text NOT NULL,
    pid          integer NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 50);

-- submit(service, job, priority, start_after): enqueues one job; the id.
CREATE FUNCTION @schema@.submit(p_service text, p_job jsonb, p_priority integer DEFAULT 0,
                                p_start_after timestamptz DEFAULT now())
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    new_id bigint;
BEGIN
    IF p_service IS NULL OR p_service !~ '^[A-Za-z0-9_.-]{1,64}$' THEN
        RAISE EXCEPTION 'submit: service must be 1 to 64 of A-Z a-z 0-9 _ . - (got %)', quote_nullable(p_service)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_job IS NULL OR jsonb_typeof(p_job) <> 'object' OR jsonb_typeof(p_job -> 'command') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION 'submit: job must be a JSON object with a string "command" (docs/job-payload.md)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_priority IS NULL OR p_priority NOT BETWEEN -1000 AND 1000 THEN
        RAISE EXCEPTION 'submit: priority must be between -1000 and 1000 (got %)', quote_nullable(p_priority)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO @schema@.job (service, job, priority, start_after)
    VALUES (p_service, p_job, p_priority, coalesce(p_start_after, now()))
    RETURNING id INTO new_id;
    RETURN new_id;
END $$;

-- cancel(id): one of exactly three answers.
--   cancelled              it had not started (it was queued): now cancelled
--   requested              a dispatcher holds it: the row is cancelled now and
--                          its dispatcher stops the run within cancelPollMs
--   not_found_or_finished  no such row, or it was already done, failed or
--                          cancelled (its outcome is left as it was)
-- The row is locked first (FOR UPDATE waits for a concurrent claim, finish
-- or rescue and then reads what it committed), so the answer always
-- matches the state the cancel acted on.
CREATE FUNCTION @schema@.cancel(p_id bigint) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    cur text;
BEGIN
    SELECT state INTO cur FROM @schema@.job WHERE id = p_id FOR UPDATE;
    IF cur = 'queued' THEN
        UPDATE @schema@.job SET state = 'cancelled', finished_at = now(), error = 'cancelled'
        WHERE id = p_id;
        RETURN 'cancelled';
    ELSIF cur IN ('claimed', 'running') THEN
        UPDATE @schema@.job SET state = 'cancelled', finished_at = now(), error = 'cancelled'
        WHERE id = p_id;
        RETURN 'requested';
    END IF;
    RETURN 'not_found_or_finished';
END $$;

-- position(id): where a job stands, as one JSON object
--   {"state": S, "ahead": N, "running": R, "service": SVC}
-- ahead: for a queued row, the queued rows of its service before it in
-- claim order (null for other states); running: the held rows of its
-- service.  NULL for an unknown id.
CREATE FUNCTION @schema@.position(p_id bigint) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'state', j.state,
        'service', j.service,
        'ahead', CASE WHEN j.state = 'queued' THEN
            (SELECT count(*) FROM @schema@.job q
             WHERE q.state = 'queued' AND q.service = j.service
               AND (q.priority > j.priority OR (q.priority = j.priority AND q.id < j.id)))
            END,
        'running', (SELECT count(*) FROM @schema@.job r
                    WHERE r.state IN ('claimed', 'running') AND r.service = j.service))
    FROM @schema@.job j WHERE j.id = p_id
$$;
