-- find_lost.sql - DQ_FIND_LOST: after a reconnection, the rows claimed by
-- this instance under a claim it does not hold (a claim whose result was
-- lost with the connection), if our row of this life is there.  Followed
-- by requeue_claims.sql of exactly what it found (find_own.sql says why
-- two statements).  Also the attempts of this life cancelled while
-- their claim was not held (a claim whose reply was lost, then
-- cancelled): nobody runs them, and requeue_claims.sql marks them
-- finished (retry() no longer answers stopping).  A cancel of a lost
-- claim after the sweep stays unfinished until this life ends.
--
-- Parameters: $1 instance, $2 ids held (bigint[]), $3 their claims
--             (int[]), $4 token.
-- Result:     (id, claims) per row claimed by us and not held, and per
--             unfinished attempt of this life not held.
-- Guard:      our dispatcher row of this life is there (EXISTS, not
--             locked: the look changes nothing).
-- Index:      job_holder; job_attempt read whole (a sweep follows a lost
--             connection only).
-- Sent:       chores lane, after a connection was lost with claims on it.
-- On failure: logged; the sweep stays due and goes again at the next
--             chance (claims wait for it).
SELECT j.id, j.claims FROM @schema@.job j
WHERE j.runner_instance = $1
  AND j.state = 'claimed'
  AND NOT EXISTS (SELECT 1 FROM unnest($2::bigint[], $3::int[]) AS h(id, claims)
                  WHERE h.id = j.id AND h.claims = j.claims)
  AND EXISTS (SELECT 1 FROM @schema@.dispatcher
              WHERE instance = $1 AND started_at = $4::timestamptz)
UNION ALL
SELECT a.job, a.claim FROM @schema@.job_attempt a
WHERE a.runner = $1 AND a.life = $4::timestamptz AND a.finished IS NULL
  AND NOT EXISTS (SELECT 1 FROM unnest($2::bigint[], $3::int[]) AS h(id, claims)
                  WHERE h.id = a.job AND h.claims = a.claim)
  AND EXISTS (SELECT 1 FROM @schema@.dispatcher
              WHERE instance = $1 AND started_at = $4::timestamptz)
