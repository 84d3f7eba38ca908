/*
 * timing.h - the dispatcher's waits, pure (no clock read, no state but
 * what the caller passes): the back-off of a connection that failed
 * (db.c) and the jitter of the poll (dispatch_impl.h's jittered).
 * tests/unit/test_dispatch_timing.c holds them to their bounds.
 */
#ifndef ES_DISPATCH_TIMING_H
#define ES_DISPATCH_TIMING_H

#include <stdint.h>

#define BACKOFF_MIN_MS 250  /* the first wait after a failed attempt */
#define BACKOFF_MAX_MS 8000 /* the longest */

/* The wait after the next failed attempt, given this one's: doubled, up
 * to BACKOFF_MAX_MS. */
static inline int backoff_next(int ms)
{
	return ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : ms * 2;
}

/* The next value of the generator state *rnd (a linear congruential
 * step): the dispatcher's one source of cheap spread, never of secrets
 * (tokens and client ids take getentropy first). */
static inline unsigned rnd_next(unsigned *rnd)
{
	return *rnd = *rnd * 1103515245u + 12345u;
}

/* ms with +-10 % jitter (a span of ms / 5), from the generator state
 * *rnd (advanced), so that dispatchers started together spread. */
static inline int64_t jitter_ms(unsigned *rnd, int ms)
{
	int span = ms / 5;

	unsigned r = rnd_next(rnd);

	return span ? ms - span / 2 + (int64_t)((r >> 8) % (unsigned)(span + 1)) : ms;
}

#endif
