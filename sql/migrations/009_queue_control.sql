-- 009_queue_control.sql - pause and resume a service, retry a finished
-- job, a job's attempts, unique jobs, bulk submit and cancel
-- (docs/dispatch.md, "Pause and resume", "Retry", "Attempts", "Unique
-- jobs", "Bulk").
--
-- Nothing here alters the table job: every new fact lives in a table of
-- its own, so no ACCESS EXCLUSIVE lock on job is taken and no index is
-- built over its rows.  Locks taken on job: SHARE ROW EXCLUSIVE for the
-- moment of CREATE TRIGGER (it waits for the writes in flight and holds
-- off new ones until the migration commits, which follows at once), and
-- the REFERENCES of the new tables take SHARE ROW EXCLUSIVE as well.
-- Each lock is waited for 2 s at most (lock_timeout): the running
-- dispatchers' statements queue behind a waiting lock, so the migration
-- fails ("lock timeout") rather than hold them up; run it again later.
--
--  * paused_service: one row per paused service; the claims drop those
--    services from their list before the per-service index scan;
--  * job_attempt: one row per attempt that did not end its job (the row
--    went back to queued, or was cancelled while held), written by the
--    trigger job_attempt_record, and the final attempt of a failed job
--    that retry() requeues; removed with its job (ON DELETE CASCADE: the
--    janitor's DELETE removes them).  A job's latest attempt that ended
--    it done or failed stays in the row alone: a finish to done or
--    failed calls no trigger function and writes no attempt row;
--  * function attempts(id): every attempt of a job, job_attempt's rows
--    and the row's own latest one;
--  * job_key: the unique_key of a job submitted with one; removed with
--    its job likewise;
--  * functions pause, resume, retry, retry_failed, submit_many,
--    cancel_many, payload_key; submit gains unique_key and unique_for
--    (the old signature is dropped, its grants copied to the new one);
--    position says "paused".
--
-- 001's invariant "done, failed and cancelled are final" gets one
-- exception: retry() brings a failed or cancelled row back to queued,
-- only once the run of its last claim ended (for a cancel of a held row:
-- its dispatcher wrote that end, or its dispatcher's life is over), so
-- that two runs of one job never overlap.  A cancelled row keeps
-- runner_instance, as every finished row does.
--
-- Applied again over its own result it changes nothing (IF NOT EXISTS,
-- CREATE OR REPLACE, triggers dropped and created again).

SET LOCAL lock_timeout = '2s';

CREATE TABLE IF NOT EXISTS @schema@.paused_service (
    service   text PRIMARY KEY CHECK (service ~ '^[A-Za-z0-9_.-]{1,64}$'),
    paused_at timestamptz NOT NULL DEFAULT now()
);

-- job_attempt: (job, claim) names one claim for good (005); attempt is
-- the row's attempts at that claim (retry() starts it again at 1).
-- finished is NULL for a cancel of a held row until its dispatcher
-- reports that the run ended (attempt_ended.sql); life is then the
-- token of the dispatcher's life that ran it.
CREATE TABLE IF NOT EXISTS @schema@.job_attempt (
    job      bigint NOT NULL REFERENCES @schema@.job (id) ON DELETE CASCADE,
    claim    integer NOT NULL,
    attempt  integer NOT NULL,
    runner   text,
    life     timestamptz,
    state    text NOT NULL,
    started  timestamptz,
    ended    timestamptz NOT NULL DEFAULT now(),
    finished timestamptz,
    error    text,
    receipt  jsonb,
    PRIMARY KEY (job, claim)
);

CREATE TABLE IF NOT EXISTS @schema@.job_key (
    job        bigint PRIMARY KEY REFERENCES @schema@.job (id) ON DELETE CASCADE,
    service    text NOT NULL,
    unique_key text NOT NULL
);
CREATE INDEX IF NOT EXISTS job_key_lookup ON @schema@.job_key (service, unique_key, job);

-- job_attempt_record(): a held row left its claim without ending the
-- job for good: back to queued (a retryable failure, a rescue's or a
-- requeue's, a leave) or cancelled.  The trigger's WHEN leaves out the
-- rest, so the executor makes no call for them: done and failed (the row
-- holds that attempt) and an attempt given back (no slot, a stop's give
-- back: attempts went down; it ran nothing).  A cancel of a held row is
-- recorded with finished NULL: its run may still go on.
CREATE OR REPLACE FUNCTION @schema@.job_attempt_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO @schema@.job_attempt (job, claim, attempt, runner, life, state, started,
                                      finished, error, receipt)
    VALUES (NEW.id, OLD.claims, OLD.attempts, OLD.runner_instance,
            CASE WHEN NEW.state = 'cancelled' THEN
                (SELECT started_at FROM @schema@.dispatcher WHERE instance = OLD.runner_instance) END,
            NEW.state, NEW.started_at,
            CASE WHEN NEW.state <> 'cancelled' THEN now() END, NEW.error, NEW.receipt)
    ON CONFLICT (job, claim) DO NOTHING;
    RETURN NULL;
END $$;

SET LOCAL lock_timeout = '2s';
DROP TRIGGER IF EXISTS job_attempt_record ON @schema@.job;
CREATE TRIGGER job_attempt_record AFTER UPDATE OF state ON @schema@.job
    FOR EACH ROW
    WHEN (OLD.state IN ('claimed', 'running') AND NEW.state IN ('queued', 'cancelled')
          AND NEW.attempts >= OLD.attempts)
    EXECUTE FUNCTION @schema@.job_attempt_record();
SET LOCAL lock_timeout = DEFAULT;

-- attempts(id): every attempt of the job that ended, oldest first, in
-- job_attempt's columns: the rows of job_attempt, and the row's own
-- latest attempt while the row is done or failed after a claim (claims
-- > 0) and that claim is not in job_attempt already (life NULL, ended
-- and finished its finished_at).  A function rather than a view, so
-- that it holds no dependency on job's columns (a later migration may
-- alter them) and is always asked about one job (job_attempt_pkey,
-- job_pkey).  No such id: no rows.
CREATE OR REPLACE FUNCTION @schema@.attempts(p_id bigint)
RETURNS TABLE (job bigint, claim integer, attempt integer, runner text, life timestamptz,
               state text, started timestamptz, ended timestamptz, finished timestamptz,
               error text, receipt jsonb)
LANGUAGE sql STABLE AS $$
    SELECT * FROM (
        SELECT a.job, a.claim, a.attempt, a.runner, a.life, a.state, a.started, a.ended,
               a.finished, a.error, a.receipt
        FROM @schema@.job_attempt a
        WHERE a.job = p_id
        UNION ALL
        SELECT j.id, j.claims, j.attempts, j.runner_instance, NULL::timestamptz, j.state,
               j.started_at, j.finished_at, j.finished_at, j.error, j.receipt
        FROM @schema@.job j
        WHERE j.id = p_id AND j.state IN ('done', 'failed') AND j.claims > 0
          AND NOT EXISTS (SELECT 1 FROM @schema@.job_attempt x
                          WHERE x.job = j.id AND x.claim = j.claims)) t
    ORDER BY t.claim
$$;

-- pause(service): 'paused', or 'already_paused'.
CREATE OR REPLACE FUNCTION @schema@.pause(p_service text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    IF p_service IS NULL OR p_service !~ '^[A-Za-z0-9_.-]{1,64}$' THEN
        RAISE EXCEPTION 'pause: service must be 1 to 64 of A-Z a-z 0-9 _ . - (got %)', quote_nullable(p_service)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO @schema@.paused_service (service) VALUES (p_service) ON CONFLICT DO NOTHING;
    RETURN CASE WHEN FOUND THEN 'paused' ELSE 'already_paused' END;
END $$;

-- resume(service): 'resumed', or 'not_paused'.
CREATE OR REPLACE FUNCTION @schema@.resume(p_service text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM @schema@.paused_service WHERE service = p_service;
    RETURN CASE WHEN FOUND THEN 'resumed' ELSE 'not_paused' END;
END $$;

-- payload_key(job): a stable key of a payload: the SHA-256 of its
-- canonical jsonb text (keys sorted, blanks normalised), hex.
CREATE OR REPLACE FUNCTION @schema@.payload_key(p_job jsonb) RETURNS text
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT encode(sha256(convert_to(p_job::text, 'UTF8')), 'hex')
$$;

-- unique_lock(service, key): the advisory lock that serialises the
-- submits (and retries) of one key until their transaction ends.  Under
-- REPEATABLE READ or SERIALIZABLE the lookup after the lock would read
-- the transaction's older snapshot and miss a job committed meanwhile:
-- refused.
CREATE OR REPLACE FUNCTION @schema@.unique_lock(p_fn text, p_service text, p_key text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION '%: a unique_key needs READ COMMITTED (this transaction is %)', p_fn,
            upper(current_setting('transaction_isolation'))
            USING ERRCODE = 'invalid_transaction_state';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended(p_service || E'\n' || p_key, 8008));
END $$;

-- unique_holder(service, key, for): the job that holds the key: the
-- newest unfinished job of the service with it, else (with p_for) the
-- newest done within p_for; NULL when none.
CREATE OR REPLACE FUNCTION @schema@.unique_holder(p_service text, p_key text, p_for interval,
                                                  p_not bigint DEFAULT NULL)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT j.id FROM @schema@.job_key k JOIN @schema@.job j ON j.id = k.job
    WHERE k.service = p_service AND k.unique_key = p_key AND j.id IS DISTINCT FROM p_not
      AND (j.state IN ('queued', 'claimed', 'running')
           OR (p_for IS NOT NULL AND j.state = 'done' AND j.finished_at > now() - p_for))
    ORDER BY (j.state IN ('queued', 'claimed', 'running')) DESC, j.id DESC
    LIMIT 1
$$;

-- submit(service, job, priority, start_after, unique_key, unique_for):
-- as in 006; with a unique_key, the job holding it (unique_holder) is
-- answered and nothing is inserted.  Its checks, in order, as in 006,
-- then the key's length (1 to 200 characters) and READ COMMITTED.
DO $$
DECLARE
    acl aclitem[];
    e record;
BEGIN
    IF to_regprocedure('@schema@.submit(text,jsonb,integer,timestamptz)') IS NULL THEN
        RETURN;
    END IF;
    SELECT proacl INTO acl FROM pg_proc
    WHERE oid = to_regprocedure('@schema@.submit(text,jsonb,integer,timestamptz)');
    DROP FUNCTION @schema@.submit(text, jsonb, integer, timestamptz);
    CREATE TEMP TABLE IF NOT EXISTS submit_acl_009 (acl aclitem[]) ON COMMIT DROP;
    DELETE FROM submit_acl_009;
    INSERT INTO submit_acl_009 VALUES (acl);
END $$;

CREATE OR REPLACE FUNCTION @schema@.submit(p_service text, p_job jsonb, p_priority integer DEFAULT 0,
                                           p_start_after timestamptz DEFAULT now(),
                                           unique_key text DEFAULT NULL,
                                           unique_for interval DEFAULT NULL)
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
    IF unique_key IS NOT NULL THEN
        IF length(unique_key) NOT BETWEEN 1 AND 200 THEN
            RAISE EXCEPTION 'submit: unique_key must be 1 to 200 characters (got %)', length(unique_key)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF unique_for < interval '0' THEN
            RAISE EXCEPTION 'submit: unique_for must not be negative (got %)', unique_for
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        PERFORM @schema@.unique_lock('submit', p_service, unique_key);
        new_id := @schema@.unique_holder(p_service, unique_key, unique_for);
        IF new_id IS NOT NULL THEN
            RETURN new_id;
        END IF;
    END IF;
    INSERT INTO @schema@.job (service, job, priority, start_after)
    VALUES (p_service, p_job, p_priority, coalesce(p_start_after, now()))
    RETURNING id INTO new_id;
    IF unique_key IS NOT NULL THEN
        INSERT INTO @schema@.job_key (job, service, unique_key) VALUES (new_id, p_service, unique_key);
    END IF;
    RETURN new_id;
END $$;

-- the grants of the submit dropped above, given to the new one (a
-- default ACL, NULL, needs nothing: the new function has it too)
DO $$
DECLARE
    acl aclitem[];
    e record;
    fn text := '@schema@.submit(text,jsonb,integer,timestamptz,text,interval)';
BEGIN
    IF to_regclass('pg_temp.submit_acl_009') IS NULL THEN
        RETURN;
    END IF;
    SELECT s.acl INTO acl FROM submit_acl_009 s;
    IF acl IS NULL THEN
        RETURN;
    END IF;
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', fn);
    FOR e IN SELECT grantee, privilege_type, is_grantable FROM aclexplode(acl) LOOP
        EXECUTE format('GRANT %s ON FUNCTION %s TO %s%s', e.privilege_type, fn,
                       CASE WHEN e.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(e.grantee::regrole::text) END,
                       CASE WHEN e.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
END $$;

-- retry(id): a failed or cancelled job back in the queue, as a new job
-- would be (attempts from 0, start_after now, error and receipt
-- cleared).  The final attempt of a failed row, which only the row held,
-- is written to job_attempt first; a cancelled row's is there already
-- (the trigger).  Answers:
--   requeued                   done
--   not_found_or_not_finished  no such id, or queued, claimed, running, done
--   stopping                   cancelled while held, and the run of that
--                              claim has not been reported ended by its
--                              dispatcher's life, which is still there
--   unique_key_taken           its unique_key is held by another
--                              unfinished job of its service
-- The row is locked first (as cancel()).
CREATE OR REPLACE FUNCTION @schema@.retry(p_id bigint) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    j @schema@.job%ROWTYPE;
    k @schema@.job_key%ROWTYPE;
BEGIN
    SELECT * INTO j FROM @schema@.job WHERE id = p_id FOR UPDATE;
    IF NOT FOUND OR j.state NOT IN ('failed', 'cancelled') THEN
        RETURN 'not_found_or_not_finished';
    END IF;
    IF j.state = 'cancelled' AND EXISTS (
        SELECT 1 FROM @schema@.job_attempt a JOIN @schema@.dispatcher d
            ON d.instance = a.runner AND d.started_at = a.life
        WHERE a.job = p_id AND a.claim = j.claims AND a.state = 'cancelled'
          AND a.finished IS NULL) THEN
        RETURN 'stopping';
    END IF;
    SELECT * INTO k FROM @schema@.job_key WHERE job = p_id;
    IF FOUND THEN
        PERFORM @schema@.unique_lock('retry', k.service, k.unique_key);
        IF @schema@.unique_holder(k.service, k.unique_key, NULL, p_id) IS NOT NULL THEN
            RETURN 'unique_key_taken';
        END IF;
    END IF;
    IF j.state = 'failed' AND j.claims > 0 THEN
        INSERT INTO @schema@.job_attempt (job, claim, attempt, runner, state, started, ended,
                                          finished, error, receipt)
        VALUES (j.id, j.claims, j.attempts, j.runner_instance, j.state, j.started_at,
                coalesce(j.finished_at, now()), j.finished_at, j.error, j.receipt)
        ON CONFLICT (job, claim) DO NOTHING;
    END IF;
    UPDATE @schema@.job SET state = 'queued', runner_instance = NULL, attempts = 0,
        start_after = now(), started_at = NULL, finished_at = NULL, error = NULL,
        receipt = NULL, exec_position = NULL, position_wanted_at = NULL
    WHERE id = p_id;
    RETURN 'requeued';
END $$;

-- retry_failed(service, since, max): retry() of the failed (not
-- cancelled) jobs of the service that finished at or after since, the
-- oldest first, at most max (default 1000); how many were requeued.
-- Reads the finished rows through job_finished from since on: call it
-- again while it answers max.  A row whose payload is over the cap
-- (006, "Payload size") is left failed: retry() of it would be refused
-- (23514), and one such row would refuse every call that reaches it.
CREATE OR REPLACE FUNCTION @schema@.retry_failed(p_service text, p_since timestamptz,
                                                 p_max integer DEFAULT 1000)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    n integer := 0;
    r record;
BEGIN
    IF p_max IS NULL OR p_max NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'retry_failed: max must be between 1 and 100000 (got %)', quote_nullable(p_max)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR r IN SELECT id FROM @schema@.job
             WHERE state = 'failed' AND service = p_service AND finished_at >= p_since
               AND octet_length(job::text) <= 1044480
             ORDER BY finished_at, id LIMIT p_max LOOP
        IF @schema@.retry(r.id) = 'requeued' THEN
            n := n + 1;
        END IF;
    END LOOP;
    RETURN n;
END $$;

-- submit_many(service, jobs, priority): submit() of each job in one
-- statement; the ids in the order of jobs (the ids are taken in that
-- order: they increase along the array).  At most 10000 jobs; any bad
-- one refuses the whole call (its index named), nothing inserted.
CREATE OR REPLACE FUNCTION @schema@.submit_many(p_service text, p_jobs jsonb[], p_priority integer DEFAULT 0)
RETURNS bigint[] LANGUAGE plpgsql AS $$
DECLARE
    bad integer;
    ids bigint[];
BEGIN
    IF p_service IS NULL OR p_service !~ '^[A-Za-z0-9_.-]{1,64}$' THEN
        RAISE EXCEPTION 'submit_many: service must be 1 to 64 of A-Z a-z 0-9 _ . - (got %)', quote_nullable(p_service)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_priority IS NULL OR p_priority NOT BETWEEN -1000 AND 1000 THEN
        RAISE EXCEPTION 'submit_many: priority must be between -1000 and 1000 (got %)', quote_nullable(p_priority)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_jobs IS NULL OR cardinality(p_jobs) > 10000 THEN
        RAISE EXCEPTION 'submit_many: jobs must be an array of at most 10000 (got %)',
            coalesce(cardinality(p_jobs)::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT min(o) INTO bad FROM unnest(p_jobs) WITH ORDINALITY AS u(job, o)
    WHERE job IS NULL OR jsonb_typeof(job) <> 'object'
       OR jsonb_typeof(job -> 'command') IS DISTINCT FROM 'string'
       OR octet_length(job::text) > 1044480;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'submit_many: jobs[%] must be a JSON object with a string "command", at most 1044480 bytes as JSON text', bad
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    WITH ins AS (
        INSERT INTO @schema@.job (service, job, priority)
        SELECT p_service, u.job, p_priority
        FROM unnest(p_jobs) WITH ORDINALITY AS u(job, o) ORDER BY u.o
        RETURNING id)
    SELECT coalesce(array_agg(id ORDER BY id), '{}') INTO ids FROM ins;
    RETURN ids;
END $$;

-- cancel_many(ids): cancel() of each id that is not locked by another
-- transaction, as rows (id, answer) in id order.  It never waits for a
-- row lock, so no finish batch of the dispatchers (whatever order its
-- plan locks its rows in) and no other cancel_many can deadlock with it,
-- and its work is one pass over the ids: one statement locks the free
-- rows (FOR UPDATE SKIP LOCKED), cancel() answers for each of them; an
-- id skipped is answered
--   busy                   its row is unfinished and locked by another
--                          transaction (a dispatcher writing its start,
--                          progress or outcome): call again for those
--   not_found_or_finished  no such row, or it is finished
-- A running row is written often by its dispatcher; busy asks the caller
-- to try again (a second later, say) rather than hold the call.
CREATE OR REPLACE FUNCTION @schema@.cancel_many(p_ids bigint[])
RETURNS TABLE (id bigint, answer text) LANGUAGE plpgsql AS $$
DECLARE
    ids bigint[];
    free bigint[];
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) > 10000 THEN
        RAISE EXCEPTION 'cancel_many: ids must be an array of at most 10000 (got %)',
            coalesce(cardinality(p_ids)::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT coalesce(array_agg(DISTINCT x ORDER BY x), '{}') INTO ids
    FROM unnest(p_ids) AS x WHERE x IS NOT NULL;
    SELECT coalesce(array_agg(l.id), '{}') INTO free FROM (
        SELECT j.id FROM @schema@.job j WHERE j.id = ANY(ids)
        ORDER BY j.id FOR UPDATE SKIP LOCKED) l;
    RETURN QUERY
        SELECT u.i,
               CASE WHEN u.i = ANY(free) THEN @schema@.cancel(u.i)
                    WHEN EXISTS (SELECT 1 FROM @schema@.job j WHERE j.id = u.i
                                 AND j.state IN ('queued', 'claimed', 'running')) THEN 'busy'
                    ELSE 'not_found_or_finished' END
        FROM unnest(ids) AS u(i) ORDER BY u.i;
END $$;

-- position(id): 007's, and "waiting": "paused" first for a queued row of
-- a paused service.
CREATE OR REPLACE FUNCTION @schema@.position(p_id bigint) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    answer jsonb := @schema@.position_counts(p_id);
    j @schema@.job%ROWTYPE;
    waiting text;
BEGIN
    SELECT * INTO j FROM @schema@.job WHERE id = p_id;
    IF answer IS NULL OR answer->>'state' <> 'queued' THEN
        RETURN answer;
    END IF;
    IF EXISTS (SELECT 1 FROM @schema@.paused_service WHERE service = j.service) THEN
        waiting := 'paused';
    ELSIF j.start_after > now() THEN
        waiting := 'not before ' || j.start_after;
    ELSIF NOT EXISTS (SELECT 1 FROM @schema@.dispatcher) THEN
        waiting := 'no dispatcher is running';
    ELSIF NOT EXISTS (SELECT 1 FROM @schema@.dispatcher WHERE claiming_nothing IS NULL) THEN
        SELECT 'no dispatcher claims: ' || string_agg(instance || ': ' || claiming_nothing,
                                                      '; ' ORDER BY instance)
        INTO waiting FROM @schema@.dispatcher;
    ELSE
        waiting := 'its turn';
    END IF;
    RETURN answer || jsonb_build_object('waiting', waiting);
END $$;
