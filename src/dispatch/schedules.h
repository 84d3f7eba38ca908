/*
 * schedules.h - periodic jobs in the dispatcher (docs/dispatch.md,
 * "Periodic jobs"): every dispatcher looks at the table schedule on its
 * chores lane and submits each due occurrence; the statements' guards
 * make each occurrence submitted exactly once across the fleet.
 *
 * A pass: DQ_SCHED_DUE reads the rows due or without next_run_at and
 * the database's now(); for each row, in order on the same lane, one of
 * DQ_SCHED_FIRST (a first next_run_at), DQ_SCHED_FIRE (the job and
 * the next next_run_at, one statement) or DQ_SCHED_REFUSE (a spec the
 * C parser refuses); after a fire that failed, DQ_SCHED_FAILED (the
 * row's back-off).  Each locks its row with SKIP LOCKED: the lane never
 * waits for a schedule's lock.  The next pass: at once after a pass that
 * changed rows, else when the earliest row ahead becomes due (its
 * next_run_at or retry_at), at most scheduleCheckSec (jittered) later.  Invariant: at most one pass (its due look and its
 * rows' statements) queued or on the wire.  No pass while the first
 * contact runs or once a stop began.
 */
#ifndef ES_DISPATCH_SCHEDULES_H
#define ES_DISPATCH_SCHEDULES_H

#include <time.h>

struct dispatcher;
struct cron;
struct schedules;

/* Sets up the timer on d's loop (the first pass once the first contact
 * is done); NULL when out of memory. */
struct schedules *schedules_start(struct dispatcher *d);
/* Frees it (after the chores lane: no callback of it runs later). */
void schedules_stop(struct schedules *s);

/* The occurrence a due row's run stands for: the latest occurrence of c
 * in tz in [next, now], found by walking forward with cron_next from a
 * bounded window before now; next itself when none is found (a
 * next_run_at that is no occurrence, set by hand).  Pure but for
 * cron_next's TZ. */
time_t schedules_latest(const struct cron *c, const char *tz, time_t next, time_t now);

#endif
