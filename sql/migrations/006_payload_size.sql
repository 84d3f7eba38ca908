-- 006_payload_size.sql - a cap on the size of a job's payload
-- (docs/dispatch.md, "Payload size").
--
-- A payload is sent whole in one broker JOB message, and an execserver
-- closes a connection that sends a message larger than its maxFrameBytes
-- (1 MiB by default) with every job on it.  A claim loads up to 100 rows'
-- payloads at once.  So a payload may take at most 1044480 bytes as
-- PostgreSQL's JSON text (octet_length(job::text)): 1 MiB less 4 KiB for
-- the JOB's envelope and the two env entries the dispatcher adds (a few
-- hundred bytes).  The client library still checks every JOB against the
-- limit its instance announces (an execserver with a smaller
-- maxFrameBytes, or a payload that json-c's escaping makes longer): that
-- job ends bad_job, the connection untouched.
--
--  * submit() refuses a larger payload with a clear error (22023);
--  * the CHECK job_payload_size refuses one from any other INSERT or
--    UPDATE of a row not finished (23514), so a row the dispatchers can
--    claim is never over the cap;
--  * rows not finished that are over the cap when this runs end failed,
--    bad_job (the error names the cap), as the dispatcher would have
--    ended them; a dispatcher holding one drops its result (its guarded
--    write finds the row no longer held);
--  * finished rows are left as they are: the check holds for them by
--    their state, so it is added NOT VALID (no scan of the whole table
--    while the migration holds its lock) and is nevertheless true for
--    every row once this commits.
--
-- Idempotent: the constraint is added only when missing, submit() is
-- replaced, and the update finds nothing the second time.

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_constraint
                   WHERE conname = 'job_payload_size' AND conrelid = '@schema@.job'::regclass) THEN
        -- first, so that the table's lock keeps out any row the update
        -- below would not see
        ALTER TABLE @schema@.job ADD CONSTRAINT job_payload_size
            CHECK (state IN ('done', 'failed', 'cancelled') OR octet_length(job::text) <= 1044480)
            NOT VALID;
    END IF;
END $$;

UPDATE @schema@.job
SET state = 'failed', finished_at = now(), receipt = NULL,
    error = 'bad_job: the payload is ' || octet_length(job::text)
            || ' bytes as JSON text, more than 1044480 (migration 006)'
WHERE state IN ('queued', 'claimed', 'running') AND octet_length(job::text) > 1044480;

-- submit(service, job, priority, start_after): as in 001, and the cap.
CREATE OR REPLACE FUNCTION @schema@.submit(p_service text, p_job jsonb, p_priority integer DEFAULT 0,
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
    IF octet_length(p_job::text) > 1044480 THEN
        RAISE EXCEPTION 'submit: job is % bytes as JSON text, more than 1044480 (docs/dispatch.md, "Payload size")',
            octet_length(p_job::text)
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
