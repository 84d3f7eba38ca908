/*
 * test_dispatch_timing.c - unit tests of the dispatcher's waits
 * (src/dispatch/timing.h), without a database: the back-off of a failed
 * connection doubles from BACKOFF_MIN_MS up to BACKOFF_MAX_MS and stays
 * there; the poll's jitter stays within +-10 % of pollMs, takes both
 * ends of that span over a fixed seed's draws, and leaves a wait too
 * short to jitter as it is.
 */
#include "autoconfig.h"

#include <stdint.h>

#include <CUnit/Basic.h>

#include "dispatch/timing.h"
#include "suite.h"

static void test_backoff(void)
{
	static const int want[] = { 500, 1000, 2000, 4000, 8000, 8000 };
	int ms = BACKOFF_MIN_MS;

	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		ms = backoff_next(ms);
		CU_ASSERT_EQUAL(ms, want[i]);
	}
	CU_ASSERT_EQUAL(backoff_next(5000), BACKOFF_MAX_MS);
}

/* 1000 draws from seed 1 for pollMs 1000: each within [900, 1100], the
 * lowest and the highest both seen. */
static void test_jitter_bounds(void)
{
	unsigned rnd = 1;
	int64_t lo = INT64_MAX, hi = 0;

	for (int i = 0; i < 1000; i++) {
		int64_t ms = jitter_ms(&rnd, 1000);
		CU_ASSERT(ms >= 900 && ms <= 1100);
		lo = ms < lo ? ms : lo;
		hi = ms > hi ? ms : hi;
	}
	CU_ASSERT_EQUAL(lo, 900);
	CU_ASSERT_EQUAL(hi, 1100);
}

/* Below 5 ms there is no span: the wait is as asked; the state still
 * advances, so two dispatchers seeded apart stay apart. */
static void test_jitter_short(void)
{
	unsigned rnd = 7, before = rnd;

	CU_ASSERT_EQUAL(jitter_ms(&rnd, 4), 4);
	CU_ASSERT_NOT_EQUAL(rnd, before);
	CU_ASSERT_EQUAL(jitter_ms(&rnd, 0), 0);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "back-off: doubled up to its most, then kept", test_backoff },
		{ "poll jitter: within +-10 %, both ends reached", test_jitter_bounds },
		{ "poll jitter: a wait too short is kept as it is", test_jitter_short },
		{ NULL, NULL },
	};
	return run_suite("dispatch_timing", cases);
}
