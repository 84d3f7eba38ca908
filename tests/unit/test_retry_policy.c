/*
 * test_retry_policy.c - unit tests of the retry policy
 * (src/dispatch/retry_policy.c), without a database: the exponential
 * delay doubles from retryDelaySec per attempt up to retryMaxDelaySec,
 * its jitter stays within +-10 % and reaches both ends, fixed is
 * retryDelaySec always; a receipt is retried when its error is
 * retryable or its exit code is listed, never past maxAttempts; a
 * service's own policy is found by name; the limits for SQL are JSON.
 */
#include "autoconfig.h"

#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "dispatch/retry_policy.h"
#include "suite.h"

static struct retry_policy policy(int max, int delay, int cap, enum retry_backoff b)
{
	struct retry_policy p;

	memset(&p, 0, sizeof p);
	p.max_attempts = max;
	p.delay_sec = delay;
	p.max_delay_sec = cap;
	p.backoff = b;
	retry_exit_code_set(&p, RETRY_EXIT_TEMPFAIL);
	return p;
}

/* Below 5 s there is no jitter (whole seconds): base 1 s, cap 4 s gives
 * 1, 2, 4, then 4 for every later attempt, exactly. */
static void test_exponential_exact(void)
{
	struct retry_policy p = policy(10, 1, 4, RETRY_EXPONENTIAL);
	unsigned rnd = 1;

	CU_ASSERT_EQUAL(retry_delay_sec(&p, 1, &rnd), 1);
	CU_ASSERT_EQUAL(retry_delay_sec(&p, 2, &rnd), 2);
	CU_ASSERT_EQUAL(retry_delay_sec(&p, 3, &rnd), 4);
	CU_ASSERT_EQUAL(retry_delay_sec(&p, 4, &rnd), 4); /* capped */
	CU_ASSERT_EQUAL(retry_delay_sec(&p, 1000, &rnd), 4);
	p.delay_sec = 0;
	CU_ASSERT_EQUAL(retry_delay_sec(&p, 7, &rnd), 0);
}

/* Base 60 s, cap 3600 s: attempt n within +-10 % of min(60 * 2^(n-1),
 * 3600) over 20000 draws each, both ends of the span reached. */
static void test_exponential_jitter(void)
{
	struct retry_policy p = policy(100, 60, 3600, RETRY_EXPONENTIAL);
	unsigned rnd = 42;

	for (int n = 1; n <= 9; n++) {
		long d = 60L << (n - 1);
		if (d > 3600)
			d = 3600;
		long lo = d, hi = d, span = d / 5;
		for (int i = 0; i < 20000; i++) {
			long s = retry_delay_sec(&p, n, &rnd);
			CU_ASSERT(s >= d - span / 2 && s <= d - span / 2 + span);
			lo = s < lo ? s : lo;
			hi = s > hi ? s : hi;
		}
		CU_ASSERT_EQUAL(lo, d - span / 2);
		CU_ASSERT_EQUAL(hi, d - span / 2 + span);
	}
}

static void test_fixed(void)
{
	struct retry_policy p = policy(5, 60, 3600, RETRY_FIXED);
	unsigned rnd = 3;

	for (int n = 1; n < 6; n++)
		CU_ASSERT_EQUAL(retry_delay_sec(&p, n, &rnd), 60);
}

/* Retried: a retryable error, or an exit with a listed code, while
 * attempts < maxAttempts; not: a non-retryable error, another exit
 * code, a signal, success. */
static void test_again(void)
{
	struct retry_policy p = policy(3, 1, 10, RETRY_EXPONENTIAL);
	struct exc_receipt lost = { .error_code = "exec_lost", .retryable = 1 };
	struct exc_receipt bad = { .error_code = "bad_job", .retryable = 0 };
	struct exc_receipt tempfail = { .exited = 1, .exit_code = 75 };
	struct exc_receipt one = { .exited = 1, .exit_code = 1 };
	struct exc_receipt sig = { .signal = 9 };
	struct exc_receipt ok = { .ok = 1, .exited = 1 };

	CU_ASSERT_TRUE(retry_again(&p, 1, &lost));
	CU_ASSERT_TRUE(retry_again(&p, 2, &tempfail));
	CU_ASSERT_FALSE(retry_again(&p, 3, &lost));
	CU_ASSERT_FALSE(retry_again(&p, 3, &tempfail));
	CU_ASSERT_FALSE(retry_again(&p, 1, &bad));
	CU_ASSERT_FALSE(retry_again(&p, 1, &one));
	CU_ASSERT_FALSE(retry_again(&p, 1, &sig));
	CU_ASSERT_FALSE(retry_again(&p, 1, &ok));
	/* retryExitCodes [1, 255]: 75 no longer listed */
	memset(p.exit_codes, 0, sizeof p.exit_codes);
	retry_exit_code_set(&p, 1);
	retry_exit_code_set(&p, 255);
	CU_ASSERT_TRUE(retry_again(&p, 1, &one));
	CU_ASSERT_FALSE(retry_again(&p, 1, &tempfail));
	CU_ASSERT_TRUE(retry_exit_code_has(&p, 255));
	CU_ASSERT_FALSE(retry_exit_code_has(&p, 256));
	CU_ASSERT_FALSE(retry_exit_code_has(&p, -1));
	/* maxAttempts 1: never again */
	p.max_attempts = 1;
	CU_ASSERT_FALSE(retry_again(&p, 1, &one));
	CU_ASSERT_FALSE(retry_again(&p, 1, &lost));
}

static void test_lookup_and_json(void)
{
	struct retry_policy dflt = policy(3, 60, 3600, RETRY_EXPONENTIAL);
	struct retry_service svcs[2] = {
		{ .name = "thumb", .p = policy(1, 5, 50, RETRY_FIXED) },
		{ .name = "video.x-2", .p = policy(7, 5, 50, RETRY_FIXED) },
	};
	char *j;

	CU_ASSERT_PTR_EQUAL(retry_policy_for(&dflt, svcs, 2, "thumb"), &svcs[0].p);
	CU_ASSERT_PTR_EQUAL(retry_policy_for(&dflt, svcs, 2, "video.x-2"), &svcs[1].p);
	CU_ASSERT_PTR_EQUAL(retry_policy_for(&dflt, svcs, 2, "other"), &dflt);
	CU_ASSERT_PTR_EQUAL(retry_policy_for(&dflt, svcs, 2, NULL), &dflt);
	j = retry_limits_json(svcs, 2);
	CU_ASSERT_STRING_EQUAL(j, "{\"thumb\": 1, \"video.x-2\": 7}");
	free(j);
	j = retry_limits_json(NULL, 0);
	CU_ASSERT_STRING_EQUAL(j, "{}");
	free(j);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "exponential: doubled per attempt, capped, exact below 5 s",
		  test_exponential_exact },
		{ "exponential: +-10 % jitter, both ends reached", test_exponential_jitter },
		{ "fixed: retryDelaySec at every attempt", test_fixed },
		{ "again: retryable errors and listed exit codes, up to maxAttempts", test_again },
		{ "a service's policy by name; the limits as JSON", test_lookup_and_json },
		{ NULL, NULL },
	};
	return run_suite("retry_policy", cases);
}
