-- register.sql - DQ_REGISTER: register this dispatcher, or take over a
-- stale row of the same instance, or our own row again (the same token:
-- a register whose reply was lost, sent again).
--
-- Parameters: $1 instance, $2 host, $3 pid, $4 staleAfterSec,
--             $5 token (this life's started_at, chosen by the dispatcher).
-- Result:     one row, or none when another live dispatcher holds the
--             instance.
-- Guard:      the DO UPDATE's WHERE: a live row (beat younger than
--             staleAfterSec) is taken only by the same life (same
--             started_at).  A takeover names instance among the columns
--             it sets: ON CONFLICT DO UPDATE then locks the row as for a
--             key update (FOR UPDATE strength), so it waits for a claim of
--             the life before that holds the row FOR KEY SHARE (the "me"
--             CTE of the claims), and that claim, once committed, is seen
--             by the new life's find_own.sql.
-- Index:      dispatcher_pkey (the conflict target).
-- Sent:       hot1 at the start (the first contact); the beat lane to
--             register again after a rescue removed our row.
-- On failure: at the start, an error ends the daemon (the database away:
--             tried again once it is back); no row: it waits for the
--             other dispatcher's beat to go stale, then exits naming the
--             instance.  After a rescue removed our row (beat lane): tried
--             again at the next heartbeat.
INSERT INTO @schema@.dispatcher (instance, host, pid, started_at)
VALUES ($1, $2, $3::int, $5::timestamptz)
ON CONFLICT (instance) DO UPDATE SET
    instance = EXCLUDED.instance,
    host = EXCLUDED.host,
    pid = EXCLUDED.pid,
    started_at = EXCLUDED.started_at,
    heartbeat_at = now()
WHERE @schema@.dispatcher.heartbeat_at < now() - make_interval(secs => $4::int)
   OR @schema@.dispatcher.started_at = EXCLUDED.started_at
RETURNING 1
