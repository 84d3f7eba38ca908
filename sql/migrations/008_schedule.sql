-- 008_schedule.sql - periodic jobs (docs/dispatch.md, "Periodic jobs";
-- the cron syntax: docs/cron.md).
--
-- A row of the table schedule names a job to submit at every occurrence
-- of a crontab(5) spec in a time zone.  next_run_at is the next
-- occurrence, NULL until a dispatcher has computed it (a new row, or one
-- replaced with another cron or tz): the first occurrence after both
-- updated_at and last_run_at.  A dispatcher that finds a row due
-- (next_run_at <= now()) moves next_run_at on and inserts the job in ONE
-- statement guarded by the next_run_at it read (sql/queries/sched_fire.sql):
-- each occurrence is submitted once across the fleet, and one at or
-- before last_run_at never again.  error holds why the dispatchers
-- refuse a row (a spec the C parser refuses, a zone the system lacks, a
-- job the table job refuses); such a row is skipped until replaced.
-- failures and retry_at: the back-off of a row whose fire failed
-- otherwise (sql/queries/sched_failed.sql); reset by a fire or a replace.
--
-- SQL cannot run the C parser: schedule() checks the spec's shape only
-- (five fields of the cron characters, or a known @macro) and that the
-- zone is one of pg_timezone_names; execctl checks with the C parser
-- before it calls schedule().  The job is checked as submit() checks it.
--
-- Locks: CREATE TABLE and CREATE INDEX on a new table, the functions
-- replaced (no lock on job or dispatcher): nothing the running
-- dispatchers wait for.  Applied again over its own result it changes
-- nothing (IF NOT EXISTS, CREATE OR REPLACE).

CREATE TABLE IF NOT EXISTS @schema@.schedule (
    name        text PRIMARY KEY,
    cron        text NOT NULL,
    tz          text NOT NULL DEFAULT 'UTC',
    service     text NOT NULL,
    job         jsonb NOT NULL,
    priority    integer NOT NULL DEFAULT 0,
    next_run_at timestamptz,
    last_run_at timestamptz,
    last_job_id bigint,
    error       text,
    failures    integer NOT NULL DEFAULT 0,
    retry_at    timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT schedule_name CHECK (name ~ '^[A-Za-z0-9_.:-]{1,64}$'),
    CONSTRAINT schedule_service CHECK (service ~ '^[A-Za-z0-9_.-]{1,64}$'),
    CONSTRAINT schedule_priority CHECK (priority BETWEEN -1000 AND 1000),
    CONSTRAINT schedule_payload CHECK (jsonb_typeof(job) = 'object')
);

-- The dispatchers' look for due rows: the earliest first.
CREATE INDEX IF NOT EXISTS schedule_next ON @schema@.schedule (next_run_at);

-- schedule(name, cron, service, job, priority, tz): creates the schedule
-- or replaces it whole.  A replace with the same cron and tz (as text)
-- keeps next_run_at, so that an occurrence due and not yet submitted
-- (all dispatchers down across it) is not lost; with another cron or tz
-- next_run_at is reset to NULL (the next dispatcher pass computes the
-- first occurrence after updated_at and last_run_at).  error, failures
-- and retry_at are cleared; last_run_at and last_job_id stay.
-- updated_at is clock_timestamp(), taken once the row is locked: a
-- fire that committed while the call waited is before it.  Answers
-- 'created' or 'replaced'.  Refusals (22023) name the argument.
CREATE OR REPLACE FUNCTION @schema@.schedule(p_name text, p_cron text, p_service text, p_job jsonb,
                                             p_priority integer DEFAULT 0, p_tz text DEFAULT 'UTC')
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    spec text := btrim(p_cron, E' \t');
    inserted boolean;
BEGIN
    IF p_name IS NULL OR p_name !~ '^[A-Za-z0-9_.:-]{1,64}$' THEN
        RAISE EXCEPTION 'schedule: name must be 1 to 64 of A-Z a-z 0-9 _ . : - (got %)', quote_nullable(p_name)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF spec IS NULL OR octet_length(p_cron) > 256
       OR NOT (spec ~* '^@(hourly|daily|midnight|weekly|monthly|yearly|annually)$'
               OR spec ~ '^[0-9A-Za-z*,/-]+([ \t]+[0-9A-Za-z*,/-]+){4}$') THEN
        RAISE EXCEPTION 'schedule: cron must be five fields of crontab(5) or one of @hourly @daily @midnight @weekly @monthly @yearly @annually, at most 256 bytes (got %; docs/cron.md)', quote_nullable(p_cron)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_tz IS NULL OR NOT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = p_tz) THEN
        RAISE EXCEPTION 'schedule: tz must be a time zone name of pg_timezone_names, e.g. UTC or Europe/Berlin (got %)', quote_nullable(p_tz)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_service IS NULL OR p_service !~ '^[A-Za-z0-9_.-]{1,64}$' THEN
        RAISE EXCEPTION 'schedule: service must be 1 to 64 of A-Z a-z 0-9 _ . - (got %)', quote_nullable(p_service)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_job IS NULL OR jsonb_typeof(p_job) <> 'object' OR jsonb_typeof(p_job -> 'command') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION 'schedule: job must be a JSON object with a string "command" (docs/job-payload.md)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(p_job::text) > 1044480 THEN
        RAISE EXCEPTION 'schedule: job is % bytes as JSON text, more than 1044480 (docs/dispatch.md, "Payload size")',
            octet_length(p_job::text)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_priority IS NULL OR p_priority NOT BETWEEN -1000 AND 1000 THEN
        RAISE EXCEPTION 'schedule: priority must be between -1000 and 1000 (got %)', quote_nullable(p_priority)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO @schema@.schedule AS s (name, cron, tz, service, job, priority, created_at, updated_at)
    VALUES (p_name, spec, p_tz, p_service, p_job, p_priority, clock_timestamp(), clock_timestamp())
    ON CONFLICT (name) DO UPDATE
    SET cron = EXCLUDED.cron, tz = EXCLUDED.tz, service = EXCLUDED.service, job = EXCLUDED.job,
        priority = EXCLUDED.priority,
        next_run_at = CASE WHEN s.cron = EXCLUDED.cron AND s.tz = EXCLUDED.tz THEN s.next_run_at END,
        error = NULL, failures = 0, retry_at = NULL, updated_at = clock_timestamp()
    RETURNING (s.xmax = 0) INTO inserted;
    RETURN CASE WHEN inserted THEN 'created' ELSE 'replaced' END;
END $$;

-- unschedule(name): removes the schedule; true if there was one.  Jobs it
-- submitted stay.
CREATE OR REPLACE FUNCTION @schema@.unschedule(p_name text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM @schema@.schedule WHERE name = p_name;
    RETURN FOUND;
END $$;
