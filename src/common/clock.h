/*
 * clock.h - monotonic and wall time in the units the execserver uses.
 * Monotonic milliseconds/microseconds drive every deadline (offers, grace,
 * drain); they are comparable across processes on one host, which is what
 * the shared segment needs.
 */
#ifndef ES_CLOCK_H
#define ES_CLOCK_H

#include <stdint.h>

uint64_t clock_mono_ms(void);
uint64_t clock_mono_us(void);
uint64_t clock_wall_ms(void);

#endif
