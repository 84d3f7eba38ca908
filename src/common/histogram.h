/*
 * histogram.h - the one bucket layout of every duration histogram on the
 * /metrics pages of both daemons (docs/protocol.md and docs/dispatch.md
 * say it), and the counts of one histogram.
 *
 * Header only and plain data: the want-book keeps struct hist in its
 * shared segment (no pointers, no allocation, no clock), the dispatcher
 * in its own memory.  The counts are per bucket, not cumulative, with the
 * +Inf bucket last; the count of observations is their sum, so a process
 * that dies between two of hist_add's stores leaves the buckets and the
 * count agreeing (only _sum may lack that one observation).  Durations are
 * whole milliseconds; the page says seconds (prom_text.h).
 */
#ifndef ES_HISTOGRAM_H
#define ES_HISTOGRAM_H

#include <stdint.h>

/* Upper bounds in ms: 5 ms to 1 h, roughly 1-2.5-5 per decade (the
 * default layout of Prometheus' client libraries, extended to the hours
 * a long job takes). */
#define HIST_BOUNDS \
	5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 900000, 3600000
#define HIST_FINITE 16                 /* the bounds above */
#define HIST_BUCKETS (HIST_FINITE + 1) /* and +Inf */

struct hist {
	uint64_t n[HIST_BUCKETS]; /* observations per bucket (not cumulative); +Inf last */
	uint64_t sum_ms;
};

static inline uint32_t hist_bound_ms(unsigned i)
{
	static const uint32_t b[HIST_FINITE] = { HIST_BOUNDS };
	return b[i];
}

/* The bucket of ms: the first whose bound is >= ms (le: less or equal). */
static inline unsigned hist_bucket(uint64_t ms)
{
	unsigned i = 0;
	while (i < HIST_FINITE && ms > hist_bound_ms(i))
		i++;
	return i;
}

static inline void hist_add(struct hist *h, uint64_t ms)
{
	h->n[hist_bucket(ms)]++;
	h->sum_ms += ms;
}

#endif
