/*
 * test_admission.c - unit tests of the claim share's arithmetic
 * (src/dispatch/admission.c), without a database: the places each service
 * may claim within its own share and the overall one, in the rotating
 * order given, the services of share 0 left to the "other" class, the
 * cap of one claim, when a row of the "other" class may go, and the
 * places a reservation takes (a claim on the wire, or one in limbo).
 */
#include "autoconfig.h"

#include <stdint.h>

#include <CUnit/Basic.h>

#include "dispatch/admission.h"
#include "suite.h"

/* One service: share 5, nothing held: all 5; 3 held: 2; 6 held (the
 * share shrank): none, never a negative count. */
static void test_one_service(void)
{
	unsigned shares[1] = { 5 }, helds[1] = { 0 }, unshared;
	int64_t lims[1];

	CU_ASSERT_EQUAL(admit_places(5, 0, 100, 1, shares, helds, lims, &unshared), 5);
	CU_ASSERT_EQUAL(lims[0], 5);
	CU_ASSERT_EQUAL(unshared, 0);
	helds[0] = 3;
	CU_ASSERT_EQUAL(admit_places(5, 3, 100, 1, shares, helds, lims, &unshared), 2);
	CU_ASSERT_EQUAL(lims[0], 2);
	helds[0] = 6;
	CU_ASSERT_EQUAL(admit_places(5, 6, 100, 1, shares, helds, lims, &unshared), 0);
	CU_ASSERT_EQUAL(lims[0], 0);
}

/* Two services whose own shares (4 and 4) add up to more than the
 * overall one (5): the first in the order takes its own share's rest,
 * the second what the overall share has left; the order decides. */
static void test_overall_share_bounds_the_sum(void)
{
	unsigned shares[2] = { 4, 4 }, helds[2] = { 1, 0 }, unshared;
	int64_t lims[2];

	CU_ASSERT_EQUAL(admit_places(5, 1, 100, 2, shares, helds, lims, &unshared), 4);
	CU_ASSERT_EQUAL(lims[0], 3);
	CU_ASSERT_EQUAL(lims[1], 1);
	unsigned shares_r[2] = { 4, 4 }, helds_r[2] = { 0, 1 };
	CU_ASSERT_EQUAL(admit_places(5, 1, 100, 2, shares_r, helds_r, lims, &unshared), 4);
	CU_ASSERT_EQUAL(lims[0], 4);
	CU_ASSERT_EQUAL(lims[1], 0);
}

/* The places held in all count whatever service holds them: a
 * reservation counted in held (a claim in limbo) leaves less for all. */
static void test_reservation_counts(void)
{
	unsigned shares[1] = { 5 }, helds[1] = { 1 }, unshared;
	int64_t lims[1];

	/* 1 row held, 4 places in limbo: held 5 in all and for the service */
	helds[0] = 5;
	CU_ASSERT_EQUAL(admit_places(5, 5, 100, 1, shares, helds, lims, &unshared), 0);
	CU_ASSERT_EQUAL(lims[0], 0);
}

/* A service of share 0 (no reached execserver runs it) is left to the
 * "other" class (-1) and its places are counted apart; the cap of one
 * claim bounds the sum. */
static void test_other_class_and_cap(void)
{
	unsigned shares[3] = { 0, 300, 300 }, helds[3] = { 2, 0, 0 }, unshared;
	int64_t lims[3];

	CU_ASSERT_EQUAL(admit_places(600, 2, 100, 3, shares, helds, lims, &unshared), 100);
	CU_ASSERT_EQUAL(lims[0], -1);
	CU_ASSERT_EQUAL(lims[1], 100);
	CU_ASSERT_EQUAL(lims[2], 0);
	CU_ASSERT_EQUAL(unshared, 2);
}

/* One row of the "other" class: only with an execserver reached, none
 * held or reserved, and its time come. */
static void test_other_row(void)
{
	CU_ASSERT_TRUE(admit_other(5, 0, 0, 1));
	CU_ASSERT_FALSE(admit_other(0, 0, 0, 1));
	CU_ASSERT_FALSE(admit_other(5, 1, 0, 1));
	CU_ASSERT_FALSE(admit_other(5, 0, 1, 1));
	CU_ASSERT_FALSE(admit_other(5, 0, 0, 0));
}

/* A reservation's places: all of them for every service, its named
 * places for one service, none for a service it does not name. */
static void test_reserved(void)
{
	const char *names[2] = { "a", "b" };
	int64_t lims[2] = { 3, 1 };

	CU_ASSERT_EQUAL(admit_reserved(5, 2, names, lims, NULL), 5);
	CU_ASSERT_EQUAL(admit_reserved(5, 2, names, lims, "a"), 3);
	CU_ASSERT_EQUAL(admit_reserved(5, 2, names, lims, "b"), 1);
	CU_ASSERT_EQUAL(admit_reserved(5, 2, names, lims, "c"), 0);
	CU_ASSERT_EQUAL(admit_reserved(0, 0, NULL, NULL, "a"), 0);
}

/* The case found under load: share 5, 3 runs at the execservers, a probe
 * of the other class reserving 1, two finished rows due.  Admission gives
 * one place; the finish-and-claim carries both rows: its reservation must
 * cover the two (held in the table until it commits), not one, so that a
 * claim on the other connection finds no place (3 + 1 + 2 = 6 > 5 held
 * otherwise once both commit in the wrong order).  Per service likewise;
 * a service of the other class (lims -1) is left alone, and a reservation
 * already larger is kept. */
static void test_cover_carried(void)
{
	const char *names[2] = { "a", "b" }, *carried[3] = { "a", "a", "b" };
	int64_t lims[2] = { 1, -1 };
	unsigned total = 1;

	admit_cover_carried(&total, 2, names, lims, 2, carried);
	CU_ASSERT_EQUAL(total, 2);
	CU_ASSERT_EQUAL(lims[0], 2);
	CU_ASSERT_EQUAL(lims[1], -1);
	CU_ASSERT_EQUAL(admit_reserved(total, 2, names, lims, "a"), 2);
	/* held: 3 at the execservers + the probe's 1 + this turn's 2: no place */
	CU_ASSERT_EQUAL(admit_places(5, 3 + 1 + total, 10, 0, NULL, NULL, NULL, &(unsigned){ 0 }),
			0);
	total = 7;
	lims[0] = 5;
	admit_cover_carried(&total, 2, names, lims, 3, carried);
	CU_ASSERT_EQUAL(total, 7);
	CU_ASSERT_EQUAL(lims[0], 5);
	/* a carried row without a known service counts in the total only */
	const char *unknown[1] = { NULL };
	total = 0;
	lims[0] = 0;
	admit_cover_carried(&total, 2, names, lims, 1, unknown);
	CU_ASSERT_EQUAL(total, 1);
	CU_ASSERT_EQUAL(lims[0], 0);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "one service: its share's rest, never negative", test_one_service },
		{ "the overall share bounds the sum, in the order given",
		  test_overall_share_bounds_the_sum },
		{ "places reserved (a claim in limbo) count as held", test_reservation_counts },
		{ "share 0: the other class; the cap of one claim", test_other_class_and_cap },
		{ "a row of the other class: when it may go", test_other_row },
		{ "a reservation's places, in all and per service", test_reserved },
		{ "a finish-and-claim reserves the rows it carries", test_cover_carried },
		{ NULL, NULL },
	};
	return run_suite("admission", cases);
}
