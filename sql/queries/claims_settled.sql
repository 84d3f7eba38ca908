-- claims_settled.sql - DQ_CLAIMS_SETTLED: whether every statement of ours
-- that locked our dispatcher row of this life has ended.
--
-- Parameters: $1 instance, $2 token (our row's started_at).
-- Result:     one row if no transaction holds our row locked; none while
--             a claim (ours, on a lost connection too) holds it FOR KEY
--             SHARE (OUR_ROW: until it commits or ends), or our
--             heartbeat's update holds it until its commit (so it is
--             never sent while our beat is out: beat_answered), or it is
--             gone.
-- Guard:      our row of this life (instance, started_at).  FOR UPDATE
--             conflicts with FOR KEY SHARE; SKIP LOCKED: never waits.
-- Index:      dispatcher_pkey.
-- Sent:       chores lane, before each sweep of lost claims while a claim
--             lost with its connection is in limbo (no claim of ours on
--             the wire then): a row answered means the sweep that follows
--             sees whatever such a claim committed.
-- On failure: logged; the claims stay in limbo, probed again at the next
--             heartbeat.
SELECT 1 FROM @schema@.dispatcher
WHERE instance = $1 AND started_at = $2::timestamptz
FOR UPDATE SKIP LOCKED
