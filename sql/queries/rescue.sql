-- rescue.sql - DQ_RESCUE: delete the rows of dispatchers silent for
-- staleAfterSec and requeue their held jobs (failed with error
-- dispatcher_lost once attempts >= the service's maxAttempts; the attempt
-- used stays counted), and requeue the orphans: held rows whose instance
-- has no dispatcher row at all.
--
-- maxAttempts is the rescuing dispatcher's policy of the row's service
-- (its services: block, else its top-level key), not the dead owner's:
-- the owner's configuration is not in the database, and a fleet shares
-- one (docs/dispatch.md, "Retries").  Where they differ, the row gets
-- the rescuer's number of attempts; it never runs twice at once.
--
-- Parameters: $1 our instance, $2 staleAfterSec, $3 maxAttempts (top
--             level), $4 per-service maxAttempts (jsonb {"svc": n}).
-- Result:     (requeued, failed, put off): put off counts the silent
--             dispatchers seen and not removed: those left for a locked
--             job, and those whose own row "stale" skipped under a lock
--             weaker than a removal's ("passed": a claim of theirs in
--             flight, a late beat of theirs under way, an application's
--             FOR SHARE); one that another rescue is removing, or a
--             takeover is taking, is not counted.
-- Guard:      a statement and transaction of its own, sent after a
--             written beat, on a lane of its own.  Staleness is judged by
--             its now(), the time its statement started, never by the
--             time it got its locks.  A rescue that waited for a table
--             lock on job (an application's LOCK TABLE, taken while the
--             statement is parsed) runs with a snapshot taken after it,
--             so it sees the beats written meanwhile; and "stale"'s FOR
--             UPDATE rechecks its condition on the newest version of a
--             dispatcher row, skipping one whose beat is under way.  A
--             lock on the dispatcher table itself holds every beat back
--             and is not covered.
--             It takes no row lock it would have to wait for: the stale
--             dispatchers' rows and their held jobs are locked SKIP
--             LOCKED (the jobs FOR NO KEY UPDATE, the lock their UPDATE
--             takes: a foreign key's key-share lock does not stop it),
--             and a stale dispatcher one of whose held jobs another
--             transaction has locked is left whole (its row and every
--             job of it, "ready" leaves it out) for the next heartbeat:
--             a deleted dispatcher row always means every job it held
--             was requeued.
--             Orphans: a claim takes its dispatcher's row FOR KEY SHARE,
--             so a held row without one was claimed by a dispatcher whose
--             row was deleted after the claim committed, by a rescue
--             whose snapshot was taken before that commit.  Nobody would
--             ever free it; each is taken under the claim seen (id,
--             claims).
-- Index:      job_holder (held, orphan), job_pkey (free, ofree, the
--             updates), dispatcher_pkey.
-- Sent:       the rescue lane, after each written beat.
-- On failure: logged; the next written beat sends the next rescue (one at
--             a time: a beat that finds the last rescue still out sends
--             none).
WITH orphan AS MATERIALIZED (
    SELECT j.id, j.claims FROM @schema@.job j
    WHERE j.state IN ('claimed', 'running')
      AND NOT EXISTS (SELECT 1 FROM @schema@.dispatcher d
                      WHERE d.instance = j.runner_instance)),
ofree AS MATERIALIZED (
    SELECT j.id FROM @schema@.job j
    JOIN orphan o ON j.id = o.id AND j.claims = o.claims
    WHERE j.state IN ('claimed', 'running')
    FOR NO KEY UPDATE OF j SKIP LOCKED),
stale AS MATERIALIZED (
    SELECT instance FROM @schema@.dispatcher
    WHERE heartbeat_at < now() - make_interval(secs => $2::int) AND instance <> $1
    FOR UPDATE SKIP LOCKED),
passed AS MATERIALIZED (
    SELECT instance FROM @schema@.dispatcher
    WHERE heartbeat_at < now() - make_interval(secs => $2::int) AND instance <> $1
      AND instance NOT IN (SELECT instance FROM stale)
    FOR KEY SHARE SKIP LOCKED),
held AS MATERIALIZED (
    SELECT id, runner_instance FROM @schema@.job
    WHERE runner_instance IN (SELECT instance FROM stale)
      AND state IN ('claimed', 'running')),
free AS MATERIALIZED (
    SELECT id FROM @schema@.job
    WHERE id IN (SELECT id FROM held)
      AND runner_instance IN (SELECT instance FROM stale)
      AND state IN ('claimed', 'running')
    FOR NO KEY UPDATE SKIP LOCKED),
ready AS MATERIALIZED (
    SELECT instance FROM stale s
    WHERE NOT EXISTS (SELECT 1 FROM held h
                      WHERE h.runner_instance = s.instance
                        AND h.id NOT IN (SELECT id FROM free))),
gone AS (
    DELETE FROM @schema@.dispatcher
    WHERE instance IN (SELECT instance FROM ready)
    RETURNING instance),
moved AS (
    UPDATE @schema@.job j SET
        state = CASE WHEN j.attempts >= coalesce(($4::jsonb ->> j.service)::int, $3::int)
        THEN 'failed' ELSE 'queued' END,
        runner_instance = CASE WHEN j.attempts >= coalesce(($4::jsonb ->> j.service)::int, $3::int)
        THEN j.runner_instance END,
        finished_at = CASE WHEN j.attempts >= coalesce(($4::jsonb ->> j.service)::int, $3::int)
        THEN now() END,
        error = CASE WHEN j.attempts >= coalesce(($4::jsonb ->> j.service)::int, $3::int)
        THEN 'dispatcher_lost' END,
        start_after = now()
    FROM ready
    WHERE j.id IN (SELECT id FROM free) AND j.runner_instance = ready.instance
    RETURNING j.state),
lone AS (
    UPDATE @schema@.job j SET
        state = CASE WHEN j.attempts >= coalesce(($4::jsonb ->> j.service)::int, $3::int)
        THEN 'failed' ELSE 'queued' END,
        runner_instance = CASE WHEN j.attempts >= coalesce(($4::jsonb ->> j.service)::int, $3::int)
        THEN j.runner_instance END,
        finished_at = CASE WHEN j.attempts >= coalesce(($4::jsonb ->> j.service)::int, $3::int)
        THEN now() END,
        error = CASE WHEN j.attempts >= coalesce(($4::jsonb ->> j.service)::int, $3::int)
        THEN 'dispatcher_lost' END,
        start_after = now()
    WHERE j.id IN (SELECT id FROM ofree)
    RETURNING j.state),
all_moved AS (SELECT state FROM moved UNION ALL SELECT state FROM lone)
SELECT (SELECT count(*) FROM all_moved WHERE state = 'queued'),
       (SELECT count(*) FROM all_moved WHERE state = 'failed'),
       (SELECT count(*) FROM stale) - (SELECT count(*) FROM gone)
           + (SELECT count(*) FROM passed)
