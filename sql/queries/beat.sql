-- beat.sql - DQ_BEAT: the heartbeat, refreshing our dispatcher row.
--
-- Parameters: $1 instance, $2 token, $3 why we claim nothing, or NULL
--             (position() of a queued row says it: migration 007).
-- Result:     one row, or none when our row is gone (a rescue removed it,
--             or another life of the instance took it over).
-- Guard:      instance and token: only our row of this life.  It touches
--             the dispatcher table alone (no trigger, no foreign key
--             reaches job from it), so no lock on job, however long an
--             application holds it, ever holds a beat back.  It changes
--             no key column: a claim's FOR KEY SHARE on the row does not
--             hold it back either.
-- Index:      dispatcher_pkey.
-- Sent:       the beat lane, every heartbeatSec.
-- On failure: logged; the next beat comes at heartbeatSec.  No row: every
--             claim held is dropped (the rescuer requeued them), and the
--             dispatcher registers again as a new life.  A written beat
--             is followed by rescue.sql.
UPDATE @schema@.dispatcher
SET heartbeat_at = now(), claiming_nothing = $3
WHERE instance = $1 AND started_at = $2::timestamptz
RETURNING 1
