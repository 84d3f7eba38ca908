-- position.sql - DQ_POSITION: the execserver's POSITION of a claimed row,
-- written under its claim (position() answers it).
--
-- Parameters: $1 id, $2 instance, $3 claims, $4 position (jsonb).
-- Result:     (written 0|1, ours 0|1).
-- Guard:      the claim (id, runner_instance, claims, state claimed).  A
--             row another transaction has locked is skipped, not waited
--             for: (written 0, ours 1) says to write it again later.
-- Index:      job_pkey.
-- Sent:       chores lane.
-- On failure: the database away or the row locked: kept, written again at
--             the next cancel poll; refused: logged and dropped.
WITH mine AS (
    SELECT id FROM @schema@.job
    WHERE id = $1::bigint AND runner_instance = $2
      AND claims = $3::int AND state = 'claimed'),
free AS MATERIALIZED (
    SELECT id FROM @schema@.job
    WHERE id = $1::bigint
      AND runner_instance = $2 AND claims = $3::int AND state = 'claimed'
    FOR NO KEY UPDATE SKIP LOCKED),
pos AS (
    UPDATE @schema@.job SET exec_position = $4::jsonb
    WHERE id IN (SELECT id FROM free)
    RETURNING 1)
SELECT (SELECT count(*) FROM pos), (SELECT count(*) FROM mine)
