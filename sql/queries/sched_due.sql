-- sched_due.sql - DQ_SCHED_DUE: the schedules a dispatcher acts on
-- now (docs/dispatch.md, "Periodic jobs"), and when the next one is due.
--
-- Parameters: none.
-- Result:     always one row at least: (now_s, wake_ms, name, cron, tz,
--             next_us, updated_us, updated_s, last_s).  now_s: the
--             database's now() in whole seconds (floor), the "now" of
--             every computation (never the dispatcher's clock); wake_ms:
--             ms until the earliest time ahead at which a row becomes due
--             (its next_run_at, or its retry_at when later; NULL: none);
--             then at most 100 rows not refused (error IS NULL), not
--             backed off (retry_at NULL or past), whose next_run_at is
--             NULL (to compute) or <= now() (due): the rows without
--             failures first (a row that keeps failing never starves the
--             others), then the earliest; name NULL when there is none.
--             next_us, updated_us: the row's next_run_at and updated_at
--             in microseconds since the epoch, the guards of the
--             statements that act on it; updated_s, last_s: updated_at
--             and last_run_at in whole seconds (floor; last_s NULL when
--             nothing was submitted), after which the first occurrence
--             is computed.
-- Guard:      none (it reads); nothing is locked.
-- Index:      schedule_next (a small table: a scan is as good).
-- Sent:       chores lane, every scheduleCheckSec, sooner when the
--             earliest next_run_at comes first, at once after a pass
--             that changed rows.
-- On failure: logged; again after scheduleCheckSec.
SELECT w.now_s, w.wake_ms, s.name, s.cron, s.tz, s.next_us, s.updated_us, s.updated_s, s.last_s
FROM (SELECT floor(extract(epoch FROM now()))::bigint AS now_s,
             ceil(extract(epoch FROM min(greatest(next_run_at, retry_at)) - now()) * 1000)::bigint AS wake_ms
      FROM @schema@.schedule
      WHERE error IS NULL AND greatest(next_run_at, retry_at) > now()) w
LEFT JOIN LATERAL (
    SELECT name, cron, tz,
           (extract(epoch FROM next_run_at) * 1000000)::bigint AS next_us,
           (extract(epoch FROM updated_at) * 1000000)::bigint AS updated_us,
           floor(extract(epoch FROM updated_at))::bigint AS updated_s,
           floor(extract(epoch FROM last_run_at))::bigint AS last_s
    FROM @schema@.schedule
    WHERE error IS NULL AND (next_run_at IS NULL OR next_run_at <= now())
      AND (retry_at IS NULL OR retry_at <= now())
    ORDER BY failures > 0, next_run_at NULLS FIRST, name
    LIMIT 100) s ON true
