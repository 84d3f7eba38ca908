/* clock.c - see clock.h. */
#include "autoconfig.h"
#include "common/clock.h"

#include <time.h>

static uint64_t read_clock_us(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t clock_mono_us(void)
{
	return read_clock_us(CLOCK_MONOTONIC);
}
uint64_t clock_mono_ms(void)
{
	return read_clock_us(CLOCK_MONOTONIC) / 1000u;
}
uint64_t clock_wall_ms(void)
{
	return read_clock_us(CLOCK_REALTIME) / 1000u;
}
