/*
 * test_book_class.c - the auto-balance classification arithmetic
 * (src/book/book_class.c) from synthetic runtimes: the moving average, the
 * unknown phase, the first classification against the threshold itself,
 * the hysteresis band in both directions, and the consistency predicate
 * that book_check and the repair rely on.
 */
#include "autoconfig.h"

#include <math.h>
#include <stdio.h>

#include <CUnit/Basic.h>

#include "book/book_class.h"
#include "suite.h"

static const struct class_params P = { .heavy_threshold_ms = 10000, .min_samples = 3 };

/* Feeds runtimes one by one as the book does; returns the class after the
 * last one and the EMA in *ema. */
static enum svc_class feed(enum svc_class cls, double *ema, uint64_t *n, const uint32_t *ms,
			   size_t count)
{
	for (size_t i = 0; i < count; i++) {
		*ema = class_ema_next(*ema, *n, ms[i]);
		(*n)++;
		cls = class_next(cls, *ema, *n, &P);
	}
	return cls;
}

static void test_ema(void)
{
	double e = class_ema_next(123.0, 0, 1000); /* the first sample initialises */
	CU_ASSERT_DOUBLE_EQUAL(e, 1000.0, 1e-9);
	e = class_ema_next(e, 1, 2000); /* alpha 0.2 */
	CU_ASSERT_DOUBLE_EQUAL(e, 1200.0, 1e-9);
	e = class_ema_next(e, 2, 0);
	CU_ASSERT_DOUBLE_EQUAL(e, 960.0, 1e-9);
	/* a constant runtime converges on itself */
	double c = 0;
	for (uint64_t i = 0; i < 200; i++)
		c = class_ema_next(c, i, 777);
	CU_ASSERT_DOUBLE_EQUAL(c, 777.0, 1e-6);
}

static void test_unknown_until_min_samples(void)
{
	double ema = 0;
	uint64_t n = 0;
	const uint32_t ms[] = { 60000, 60000 };
	CU_ASSERT_EQUAL(feed(SVC_UNKNOWN, &ema, &n, ms, 2), SVC_UNKNOWN);
	const uint32_t third[] = { 60000 };
	CU_ASSERT_EQUAL(feed(SVC_UNKNOWN, &ema, &n, third, 1), SVC_HEAVY);
	/* light the same way */
	ema = 0;
	n = 0;
	const uint32_t quick[] = { 20, 30, 25 };
	CU_ASSERT_EQUAL(feed(SVC_UNKNOWN, &ema, &n, quick, 2), SVC_UNKNOWN);
	CU_ASSERT_EQUAL(feed(SVC_UNKNOWN, &ema, &n, quick + 2, 1), SVC_LIGHT);
	/* min_samples 1: the first job decides */
	struct class_params one = { .heavy_threshold_ms = 10000, .min_samples = 1 };
	CU_ASSERT_EQUAL(class_next(SVC_UNKNOWN, 10001, 1, &one), SVC_HEAVY);
	CU_ASSERT_EQUAL(class_next(SVC_UNKNOWN, 0, 0, &one), SVC_UNKNOWN);
}

static void test_first_classification_at_threshold(void)
{
	/* above it is heavy, at or below it light */
	CU_ASSERT_EQUAL(class_next(SVC_UNKNOWN, 10000.5, 3, &P), SVC_HEAVY);
	CU_ASSERT_EQUAL(class_next(SVC_UNKNOWN, 10000.0, 3, &P), SVC_LIGHT);
	CU_ASSERT_EQUAL(class_next(SVC_UNKNOWN, 9999.0, 3, &P), SVC_LIGHT);
}

static void test_hysteresis(void)
{
	/* a light service crossing the threshold by less than 20% stays light */
	CU_ASSERT_EQUAL(class_next(SVC_LIGHT, 11000, 5, &P), SVC_LIGHT);
	CU_ASSERT_EQUAL(class_next(SVC_LIGHT, 12000, 5, &P), SVC_LIGHT);
	CU_ASSERT_EQUAL(class_next(SVC_LIGHT, 12000.5, 5, &P), SVC_HEAVY);
	/* a heavy one falling below it by less than 20% stays heavy */
	CU_ASSERT_EQUAL(class_next(SVC_HEAVY, 9000, 5, &P), SVC_HEAVY);
	CU_ASSERT_EQUAL(class_next(SVC_HEAVY, 8000, 5, &P), SVC_HEAVY);
	CU_ASSERT_EQUAL(class_next(SVC_HEAVY, 7999.5, 5, &P), SVC_LIGHT);

	/* runtimes hovering around the threshold (runs of four 8.8 s and four
	 * 11.8 s jobs): the EMA crosses the threshold again and again (a bare
	 * threshold would flip the class each time), the class never changes
	 * after the first decision */
	double ema = 0;
	uint64_t n = 0;
	enum svc_class cls = SVC_UNKNOWN;
	int changes = 0, flips = 0, above = 0;
	enum svc_class first = SVC_UNKNOWN;
	for (int i = 0; i < 100; i++) {
		uint32_t ms = (i / 4) % 2 ? 11800 : 8800;
		ema = class_ema_next(ema, n, ms);
		n++;
		enum svc_class next = class_next(cls, ema, n, &P);
		if (cls != SVC_UNKNOWN && next != cls)
			changes++;
		if (cls == SVC_UNKNOWN && next != SVC_UNKNOWN)
			first = next;
		cls = next;
		if ((ema > 10000) != above)
			flips++;
		above = ema > 10000;
		CU_ASSERT(class_consistent(cls, ema, n, &P));
	}
	CU_ASSERT(flips >= 10);
	CU_ASSERT_EQUAL(changes, 0);
	CU_ASSERT_EQUAL(cls, first);

	/* a real change of runtime does switch, both ways */
	const uint32_t slow[] = { 30000, 30000, 30000, 30000, 30000 };
	cls = feed(SVC_LIGHT, &ema, &n, slow, 5);
	CU_ASSERT_EQUAL(cls, SVC_HEAVY);
	const uint32_t fast[] = { 100, 100, 100, 100, 100, 100, 100, 100 };
	cls = feed(cls, &ema, &n, fast, 8);
	CU_ASSERT_EQUAL(cls, SVC_LIGHT);
}

static void test_consistent(void)
{
	CU_ASSERT(class_consistent(SVC_UNKNOWN, 50000, 2, &P));
	CU_ASSERT(!class_consistent(SVC_LIGHT, 5, 2, &P));
	CU_ASSERT(!class_consistent(SVC_UNKNOWN, 5, 3, &P));
	CU_ASSERT(class_consistent(SVC_LIGHT, 12000, 3, &P));
	CU_ASSERT(!class_consistent(SVC_LIGHT, 12001, 3, &P));
	CU_ASSERT(class_consistent(SVC_HEAVY, 8000, 3, &P));
	CU_ASSERT(!class_consistent(SVC_HEAVY, 7999, 3, &P));
	CU_ASSERT(!class_consistent(7, 9000, 3, &P));
	CU_ASSERT_EQUAL(class_usable_slots(SVC_LIGHT, 8, 2, 4), 8);
	CU_ASSERT_EQUAL(class_usable_slots(SVC_HEAVY, 8, 2, 4), 6);
	CU_ASSERT_EQUAL(class_usable_slots(SVC_HEAVY, 2, 2, 4), 0);
	CU_ASSERT_EQUAL(class_usable_slots(SVC_UNKNOWN, 8, 2, 4), 4);
	CU_ASSERT_EQUAL(class_usable_slots(SVC_UNKNOWN, 3, 2, 4), 3);
	CU_ASSERT_STRING_EQUAL(class_name(SVC_HEAVY), "heavy");
	CU_ASSERT_STRING_EQUAL(class_name(SVC_LIGHT), "light");
	CU_ASSERT_STRING_EQUAL(class_name(SVC_UNKNOWN), "unknown");
	CU_ASSERT_PTR_NULL(class_name(3));
	CU_ASSERT_EQUAL(class_parse("heavy"), SVC_HEAVY);
	CU_ASSERT_EQUAL(class_parse("light"), SVC_LIGHT);
	CU_ASSERT_EQUAL(class_parse("unknown"), SVC_UNKNOWN);
	CU_ASSERT_EQUAL(class_parse("Heavy"), -1);
}

static void test_which_jobs_are_samples(void)
{
	/* no error: always, whatever the runtime or the exit code */
	CU_ASSERT_TRUE(class_takes_sample(0, 5, 60000, 10));
	CU_ASSERT_TRUE(class_takes_sample(0, 0, 0, 0));
	/* an error: only longer than the average, never the first */
	CU_ASSERT_FALSE(class_takes_sample(2, 30, 60000, 10));
	CU_ASSERT_FALSE(class_takes_sample(2, 60000, 60000, 10));
	CU_ASSERT_TRUE(class_takes_sample(2, 60001, 60000, 10));
	CU_ASSERT_FALSE(class_takes_sample(2, 90000, 0, 0));
	CU_ASSERT_FALSE(class_takes_sample(255, 0, 0, 3)); /* lost: 0 ms */
}

static void test_ema_range(void)
{
	CU_ASSERT_TRUE(class_ema_valid(0));
	CU_ASSERT_TRUE(class_ema_valid(4294967295.0));
	CU_ASSERT_FALSE(class_ema_valid(4294967295.5));
	CU_ASSERT_FALSE(class_ema_valid(-0.001));
	CU_ASSERT_FALSE(class_ema_valid(NAN));
	CU_ASSERT_FALSE(class_ema_valid(HUGE_VAL));
	CU_ASSERT_EQUAL(class_ema_round(12.5), 13);
	CU_ASSERT_EQUAL(class_ema_round(4294967294.6), 4294967295u);
	CU_ASSERT_EQUAL(class_ema_round(4294967295.0), 4294967295u);
	CU_ASSERT_EQUAL(class_ema_round(1e300), 4294967295u);
	CU_ASSERT_EQUAL(class_ema_round(HUGE_VAL), 4294967295u);
	CU_ASSERT_EQUAL(class_ema_round(-5), 0);
	CU_ASSERT_EQUAL(class_ema_round(NAN), 0);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "moving average", test_ema },
		{ "unknown until minSamples", test_unknown_until_min_samples },
		{ "first classification against the threshold",
		  test_first_classification_at_threshold },
		{ "hysteresis", test_hysteresis },
		{ "consistency predicate, usable slots, names", test_consistent },
		{ "which finished jobs are samples", test_which_jobs_are_samples },
		{ "the range of an average", test_ema_range },
		{ NULL, NULL },
	};
	return run_suite("auto-balance classification", cases);
}
