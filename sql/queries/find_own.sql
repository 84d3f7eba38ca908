-- find_own.sql - DQ_FIND_OWN: the held rows an earlier life of this
-- instance left, (id, claims) per row, if our row of this life is there.
--
-- The requeue of claims nobody will run is two statements: this look,
-- which changes nothing, then requeue_claims.sql of exactly the claims it
-- found.  One UPDATE of "every held row of the instance" would, run late
-- by the backend of a connection given up (the cancel lost), requeue the
-- claims this dispatcher made since under the same row and token while
-- their jobs run: they would run twice.  A late look changes nothing, and
-- a late requeue touches only the claims it names, which a new claim of
-- the row (claims + 1) is not.  Also the unfinished attempts of this life:
-- a cancel of an earlier life's held row after our registration records
-- this life (job_attempt_record), which never ran it; nothing of this
-- life is claimed before the requeue, and requeue_claims.sql marks them
-- finished (retry() no longer answers stopping).
--
-- Parameters: $1 instance, $2 token.
-- Result:     (id, claims) per row held under the instance, and per
--             unfinished attempt of this life.
-- Guard:      our dispatcher row of this life is there (EXISTS, read and
--             not locked: the look changes nothing; the requeue locks it).
-- Index:      job_holder; job_attempt read whole (once per registration).
-- Sent:       after each registration: hot1 at the start (the first
--             contact), the chores lane after a rescue removed our row.
-- On failure: at the start, tried again after a back-off (the database
--             away: once it is back); after a re-registration, again at
--             the next heartbeat.  Nothing is claimed meanwhile.
SELECT j.id, j.claims FROM @schema@.job j
WHERE j.runner_instance = $1
  AND j.state IN ('claimed', 'running')
  AND EXISTS (SELECT 1 FROM @schema@.dispatcher
              WHERE instance = $1 AND started_at = $2::timestamptz)
UNION ALL
SELECT a.job, a.claim FROM @schema@.job_attempt a
WHERE a.runner = $1 AND a.life = $2::timestamptz AND a.finished IS NULL
  AND EXISTS (SELECT 1 FROM @schema@.dispatcher
              WHERE instance = $1 AND started_at = $2::timestamptz)
