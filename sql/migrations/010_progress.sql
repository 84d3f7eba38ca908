-- 010_progress.sql - the latest progress of a running job
-- (docs/dispatch.md, "Progress of running jobs").
--
-- job.progress: {"fraction": 0..1, "text": "..."} as the job's program
-- last reported it (docs/progress.md), written by its dispatcher for all
-- its running jobs in one statement at most every progressWriteSec; NULL
-- until the first report, kept after the job ended.  position() of a
-- running row adds "progress".  Applied again over its own result it
-- changes nothing.
--
-- The ALTER takes the job table's ACCESS EXCLUSIVE lock, which waits for
-- every transaction that touched the table while the claims and finishes
-- of the running dispatchers queue behind it.  The lock is waited for 2 s
-- at most: the migration fails instead ("lock timeout"), to be run again
-- later.  Adding a nullable column without a default rewrites nothing.

SET LOCAL lock_timeout = '2s';
ALTER TABLE @schema@.job ADD COLUMN IF NOT EXISTS progress jsonb;
SET LOCAL lock_timeout = DEFAULT;

-- position(id): as 009's (position_counts(id), "waiting" for a queued
-- row, "paused" first), and for a running row with a progress its
-- "progress".  CREATE OR
-- REPLACE keeps the function's owner and grants.
CREATE OR REPLACE FUNCTION @schema@.position(p_id bigint) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    answer jsonb := @schema@.position_counts(p_id);
    j @schema@.job%ROWTYPE;
    waiting text;
BEGIN
    SELECT * INTO j FROM @schema@.job WHERE id = p_id;
    IF answer IS NULL THEN
        RETURN answer;
    END IF;
    IF answer->>'state' = 'running' AND j.progress IS NOT NULL THEN
        RETURN answer || jsonb_build_object('progress', j.progress);
    END IF;
    IF answer->>'state' <> 'queued' THEN
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
