/*
 * metrics.h - execdispatch's counters and its /metrics endpoint (the
 * Prometheus text format over libevent's evhttp, on the configured local
 * address).  The dispatcher owns the numbers and updates them in place;
 * this file only renders them.  Nothing here blocks or allocates per
 * counter update.
 */
#ifndef ES_DISPATCH_METRICS_H
#define ES_DISPATCH_METRICS_H

#include <stddef.h>
#include <stdint.h>

struct event_base;

struct dispatch_stats {
	uint64_t claims;                           /* claim statements sent */
	uint64_t claimed;                          /* rows claimed */
	uint64_t done, failed, requeued, no_slot;  /* outcomes written */
	uint64_t dropped;                          /* results dropped: the claim was lost */
	uint64_t rescued_requeued, rescued_failed; /* by our rescue */
	uint64_t rescue_put_off;      /* silent dispatchers our rescues put off, summed */
	unsigned rescue_put_off_last; /* ... by the last one */
	uint64_t attempts;            /* sum of the attempt numbers of the rows claimed */
	uint64_t cancels;             /* cancels of held rows noticed by the poll */
	uint64_t cancel_latency_ms;   /* sum over them: cancel commit -> noticed */
	uint64_t statements;          /* statements sent (db.c counts) */
	unsigned share;               /* claim share now */
	unsigned at_exec;             /* rows at the execservers now */
	unsigned services;            /* exec-bound services admission knows now */
	int db_up;                    /* 1 while connected */
};

struct metrics;

/* Listens on addr ("host:port"); NULL with a message in err on failure. */
struct metrics *metrics_start(struct event_base *base, const char *addr,
			      const struct dispatch_stats *st, const char *instance, char *err,
			      size_t errlen);
void metrics_stop(struct metrics *m);

#endif
