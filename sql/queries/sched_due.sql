-- sched_due.sql - DQ_SCHED_DUE: the schedules a dispatcher acts on
-- now (docs/dispatch.md, "Periodic jobs"), and when the next one is due.
--
-- Parameters: none.
-- Result:     always one row at least: (now_s, wake_ms, name, cron, tz,
--             next_us, updated_us, updated_s).  now_s: the database's
--             now() in whole seconds (floor), the "now" of every
--             computation (never the dispatcher's clock); wake_ms: ms
--             until the earliest next_run_at still ahead (NULL: none);
--             then at most 100 rows not refused (error IS NULL) whose
--             next_run_at is NULL (to compute) or <= now() (due), the
--             earliest first; name NULL when there is none.  next_us,
--             updated_us: the row's next_run_at and updated_at in
--             microseconds since the epoch, the guards of the statements
--             that act on it; updated_s: updated_at in whole seconds.
-- Guard:      none (it reads); nothing is locked.
-- Index:      schedule_next (a small table: a scan is as good).
-- Sent:       chores lane, every scheduleCheckSec, sooner when the
--             earliest next_run_at comes first, at once after a pass
--             that changed rows.
-- On failure: logged; again after scheduleCheckSec.
SELECT w.now_s, w.wake_ms, s.name, s.cron, s.tz, s.next_us, s.updated_us, s.updated_s
FROM (SELECT floor(extract(epoch FROM now()))::bigint AS now_s,
             ceil(extract(epoch FROM min(next_run_at) - now()) * 1000)::bigint AS wake_ms
      FROM @schema@.schedule
      WHERE error IS NULL AND next_run_at > now()) w
LEFT JOIN LATERAL (
    SELECT name, cron, tz,
           (extract(epoch FROM next_run_at) * 1000000)::bigint AS next_us,
           (extract(epoch FROM updated_at) * 1000000)::bigint AS updated_us,
           floor(extract(epoch FROM updated_at))::bigint AS updated_s
    FROM @schema@.schedule
    WHERE error IS NULL AND (next_run_at IS NULL OR next_run_at <= now())
    ORDER BY next_run_at NULLS FIRST, name
    LIMIT 100) s ON true
