-- 007_waiting.sql - why a queued job waits (docs/dispatch.md, "position").
--
-- Each dispatcher writes with its heartbeat why it claims nothing
-- (claiming_nothing; NULL while it claims): no execserver connected (and
-- the last reason a connection failed, e.g. a refused authToken), or a
-- stop under way.  position() of a queued row adds "waiting": why it is
-- not claimed yet.  003's position() keeps its body under the name
-- position_counts; the new position() adds "waiting" to its answer.
-- Applied again over its own result it changes nothing.
--
-- The ALTER takes the dispatcher table's ACCESS EXCLUSIVE lock, which
-- waits for every transaction that touched the table (a pg_dump, an open
-- session that read it) while the beats and claims of the running
-- dispatchers queue behind it: held up past staleAfterSec, the rescues
-- would requeue live dispatchers' rows once it is granted.  The lock is
-- waited for 2 s at most: the migration fails instead ("lock timeout"),
-- to be run again later.

SET LOCAL lock_timeout = '2s';
ALTER TABLE @schema@.dispatcher ADD COLUMN IF NOT EXISTS claiming_nothing text;
SET LOCAL lock_timeout = DEFAULT;

DO $$ BEGIN
    IF to_regprocedure('@schema@.position_counts(bigint)') IS NULL THEN
        ALTER FUNCTION @schema@.position(bigint) RENAME TO position_counts;
    END IF;
END $$;

-- position(id): position_counts(id), and for a queued row "waiting", the
-- first that holds of:
--   "not before <start_after>"           a retry waits for retryDelaySec
--   "no dispatcher is running"           no dispatcher row at all
--   "no dispatcher claims: <i>: <why>"   every dispatcher says why it
--                                        claims nothing ("; " between them)
--   "its turn"                           claimable: "ahead" rows go first
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
    IF j.start_after > now() THEN
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
