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
--  * the trigger job_payload_size refuses one from any other INSERT or
--    UPDATE (23514, constraint job_payload_size), so a row the
--    dispatchers can claim is never over the cap;
--  * rows not finished that are over the cap when this runs end failed,
--    bad_job (the error names the cap), as the dispatcher would have
--    ended them; a dispatcher holding one drops its result (its guarded
--    write finds the row no longer held).
--
-- A trigger, not a CHECK: a CHECK is evaluated at every UPDATE of a row,
-- and the dispatchers update each row three to five times (claim, start,
-- position, requeue, finish) without touching its payload; reading the
-- payload for the check fetches it from TOAST and decompresses it each
-- time.  The trigger reads it only when an INSERT or an UPDATE sets job,
-- or when an UPDATE brings a finished row back (state), so the hot path
-- never reads it.  001's CHECK job_payload (a JSON object) read it at
-- every UPDATE as well: the trigger takes it over (same SQLSTATE, same
-- constraint name) and it is dropped.  Measured (docs/dispatch.md,
-- "Payload size"): 100 rows of a 100 KiB payload, 10000 rows in all,
-- start (claimed -> running) took 28 ms with both CHECKs, 13 ms with
-- job_payload alone, 3.8 ms with neither (this trigger).
--
-- Idempotent: the function and submit() are replaced, the triggers
-- created again, the constraints dropped if present, and the update finds
-- nothing the second time.

-- job_payload_size(): the trigger function.  A finished row is not
-- checked for size (it is never claimed again unless brought back, and a
-- row brought back is checked then).
CREATE OR REPLACE FUNCTION @schema@.job_payload_size() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF jsonb_typeof(NEW.job) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'job_payload: job must be a JSON object'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'job_payload',
                  TABLE = TG_TABLE_NAME, SCHEMA = TG_TABLE_SCHEMA;
    END IF;
    IF NEW.state NOT IN ('done', 'failed', 'cancelled') AND octet_length(NEW.job::text) > 1044480 THEN
        RAISE EXCEPTION 'job_payload_size: job is % bytes as JSON text, more than 1044480 (docs/dispatch.md, "Payload size")',
            octet_length(NEW.job::text)
            USING ERRCODE = 'check_violation', CONSTRAINT = 'job_payload_size',
                  TABLE = TG_TABLE_NAME, SCHEMA = TG_TABLE_SCHEMA;
    END IF;
    RETURN NEW;
END $$;

-- first, so that the table's lock keeps out any row the update below
-- would not see; the ACCESS EXCLUSIVE lock of ALTER TABLE taken before
-- the triggers' weaker one: upgrading that lock while a session holding
-- a row lock (cancel(), position()) waits for it would deadlock
ALTER TABLE @schema@.job DROP CONSTRAINT IF EXISTS job_payload;
ALTER TABLE @schema@.job DROP CONSTRAINT IF EXISTS job_payload_size;
DROP TRIGGER IF EXISTS job_payload_size ON @schema@.job;
CREATE TRIGGER job_payload_size BEFORE INSERT OR UPDATE OF job ON @schema@.job
    FOR EACH ROW EXECUTE FUNCTION @schema@.job_payload_size();
DROP TRIGGER IF EXISTS job_payload_size_back ON @schema@.job;
CREATE TRIGGER job_payload_size_back BEFORE UPDATE OF state ON @schema@.job
    FOR EACH ROW
    WHEN (OLD.state IN ('done', 'failed', 'cancelled') AND NEW.state NOT IN ('done', 'failed', 'cancelled'))
    EXECUTE FUNCTION @schema@.job_payload_size();

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
