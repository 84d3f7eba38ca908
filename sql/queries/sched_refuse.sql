-- sched_refuse.sql - DQ_SCHED_REFUSE: a schedule the dispatcher
-- cannot run (its spec refused by cron_parse, its zone missing from the
-- system's zone database, no occurrence, its job refused by the table
-- job): the reason written to error, which takes the row out of every
-- pass until schedule() replaces it.
--
-- Parameters: $1 name, $2 updated_us (as DQ_SCHED_DUE read it), $3
--             the reason.
-- Result:     (name) when this statement wrote it: only that dispatcher
--             logs it, so the fleet says it once.
-- Guard:      updated_at as read (a replace meanwhile is not marked) and
--             error still NULL.  Locked with SKIP LOCKED first: a row
--             another session holds is left for the next pass.
-- Index:      schedule_pkey.
-- Sent:       chores lane, after DQ_SCHED_DUE or DQ_SCHED_FIRE.
-- On failure: logged; the row is looked at again at the next pass.
WITH held AS (
    SELECT name
    FROM @schema@.schedule
    WHERE name = $1
      AND error IS NULL
      AND (extract(epoch FROM updated_at) * 1000000)::bigint = $2::bigint
    FOR UPDATE SKIP LOCKED)
UPDATE @schema@.schedule s
SET error = $3
FROM held h
WHERE s.name = h.name
RETURNING s.name
