/*
 * metrics.h - execdispatch's counters and its /metrics endpoint (the
 * Prometheus text format over libevent's evhttp, on the configured local
 * address; the families are listed in docs/dispatch.md, "Metrics").  The
 * dispatcher owns the numbers and updates them in place; this file
 * renders them, and asks on its own for what only the database and the
 * client library know: the queue's depth (one statement on the chores
 * lane every METRICS_QUEUE_MS) and the execservers connected per
 * address.  Nothing here blocks or allocates per counter update.
 */
#ifndef ES_DISPATCH_METRICS_H
#define ES_DISPATCH_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include <execserver/client.h>

#include "common/histogram.h"

struct event_base;
struct chores;
struct dispatch_config;

#define METRICS_QUEUE_MS \
	10000 /* the queue's figures: asked again so long after each
				* answer, or 10 times the statement's time when longer */

struct dispatch_stats {
	uint64_t claims;                           /* claim statements sent */
	uint64_t claimed;                          /* rows claimed */
	uint64_t done, failed, requeued, no_slot;  /* outcomes written */
	uint64_t dropped;                          /* results dropped: the claim was lost */
	uint64_t rescued_requeued, rescued_failed; /* by our rescue */
	uint64_t rescue_put_off;      /* silent dispatchers our rescues put off, summed */
	unsigned rescue_put_off_last; /* ... by the last one */
	uint64_t attempts;            /* sum of the attempt numbers of the rows claimed */
	struct hist queue_wait;       /* rows claimed: from due (start_after) to the claim */
	struct hist run;              /* runs whose receipt has a duration_ms */
	struct hist cancel_latency;   /* cancels of held rows: commit -> noticed by the poll */
	uint64_t statements;          /* statements sent (db.c counts) */
	uint64_t illegal_transitions; /* of the phases.h tables, connections too */
	unsigned share;               /* claim share now */
	unsigned at_exec;             /* rows at the execservers now */
	unsigned services;            /* exec-bound services admission knows now */
	int db_up;                    /* 1 while connected */
};

/* One duration into h; a negative one (not known) is left out. */
static inline void metrics_ms(struct hist *h, int64_t ms)
{
	if (ms >= 0)
		hist_add(h, (uint64_t)ms);
}

struct metrics;

/* Listens on cfg->metrics ("host:port"); the page shows st, the
 * execservers connected per address of cfg (*client, read at each
 * request: the dispatcher frees it and sets it NULL at a stop's
 * stopTimeoutSec or a takeover, and then there are none), and the queue's
 * figures, asked for on chores (at once, then METRICS_QUEUE_MS after
 * each answer).  NULL with a message in err on failure. */
struct metrics *metrics_start(struct event_base *base, const struct dispatch_config *cfg,
			      const struct dispatch_stats *st, exc_client *const *client,
			      struct chores *chores, char *err, size_t errlen);
void metrics_stop(struct metrics *m);

#endif
