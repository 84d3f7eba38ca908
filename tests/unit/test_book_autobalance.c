/*
 * test_book_autobalance.c - auto-balance in the want-book (book.h, struct
 * book_autobalance): heavy wants stop at the reserve, light ones take any
 * slot, an unknown service stops at its cap, an ineligible want never
 * blocks an eligible one behind it, a freed slot goes to the best eligible
 * want, classes follow finished jobs, and repair and book_check cover the
 * class state.  In the style of test_book.c, on the same fixture.
 */
#include "autoconfig.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "book/book.h"
#include "book/book_class.h"
#include "book/book_layout.h"
#include "book_fixture.h"
#include "suite.h"

#define OK(x) CU_ASSERT_EQUAL((x), BOOK_OK)
/* Compares a sequence of job ids, printing both where they differ. */
static void seq_eq(const char *got, const char *want, int line)
{
	if (strcmp(got, want) != 0)
		printf("\n  line %d: got \"%s\", want \"%s\"\n", line, got, want);
	CU_ASSERT_STRING_EQUAL(got, want);
}
#define SEQ_EQ(got, want) seq_eq((got), (want), __LINE__)

enum { LIGHT = 0, HEAVY = 1, UNKNOWN = 2 };

/* One pool of `procs` slots, three services; services 0 and 1 are given
 * the classes light and heavy by a restored profile (10 samples of 20 ms
 * and 60 s), service 2 has none (unknown). */
static void mk(struct fx *f, uint32_t procs, uint32_t reserve, uint32_t cap)
{
	struct book_topology t;
	struct book_limits l;
	fx_limits(&l);
	fx_topo(&t, 1, &procs, 3, NULL);
	t.autobalance.enabled = 1;
	t.autobalance.reserve = reserve;
	t.autobalance.unknown_cap = cap;
	t.autobalance.min_samples = 3;
	t.autobalance.heavy_threshold_ms = 10000;
	CU_ASSERT_FATAL(fx_init(f, &l, &t, 777) == 0);
	struct book_profile light = { .ema_ms = 20, .samples = 10, .klass = SVC_LIGHT };
	struct book_profile heavy = { .ema_ms = 60000, .samples = 10, .klass = SVC_HEAVY };
	fx_lock(f);
	OK(book_profile_set(f->b, LIGHT, &light));
	OK(book_profile_set(f->b, HEAVY, &heavy));
	fx_unlock(f);
}

#define done(f) CU_ASSERT_EQUAL(fx_fini_checked(f), 0)
#define offers fx_offers

/* WANTs prefix0..prefix<n-1> of service svc at priority 0 on conn c. */
static void want_n(struct fx *f, struct book_ref c, const char *prefix, uint32_t svc, int n,
		   uint64_t now)
{
	for (int i = 0; i < n; i++) {
		char id[16];
		snprintf(id, sizeof id, "%s%d", prefix, i);
		OK(fx_want(f, c, id, svc, 0, now + (uint64_t)i));
	}
}

static uint32_t klass(struct fx *f, uint32_t svc)
{
	struct book_service_status st;
	fx_lock(f);
	book_service_status(f->b, svc, &st);
	fx_unlock(f);
	return st.klass;
}

static uint32_t in_use(struct fx *f)
{
	struct book_wg_status st;
	fx_wg(f, 0, &st);
	return st.running + st.offered + st.tokens;
}

static void test_heavy_stops_at_reserve(void)
{
	struct fx f;
	struct book_ref c;
	mk(&f, 4, 1, 4);
	OK(fx_open(&f, 0, NULL, 0, &c));
	want_n(&f, c, "h", HEAVY, 6, 0);
	/* 4 slots, 1 reserved: three heavy jobs, the fourth waits */
	SEQ_EQ(offers(&f, 0), "h0,h1,h2");
	CU_ASSERT_EQUAL(in_use(&f), 3);
	/* a light want takes the reserve at once */
	OK(fx_want(&f, c, "l0", LIGHT, 0, 10));
	SEQ_EQ(offers(&f, 0), "h0,h1,h2,l0");
	CU_ASSERT_EQUAL(in_use(&f), 4);
	/* the light job ends: its slot is the reserve again, no heavy takes it */
	struct book_ref r;
	OK(fx_take_job(&f, c, "l0", &r));
	OK(fx_finish(&f, r, 15, 0));
	SEQ_EQ(offers(&f, 0), "h0,h1,h2,l0");
	CU_ASSERT_EQUAL(in_use(&f), 3);
	/* a heavy one ends: the next heavy takes its slot */
	OK(fx_take_job(&f, c, "h0", &r));
	OK(fx_finish(&f, r, 60000, 0));
	SEQ_EQ(offers(&f, 0), "h0,h1,h2,l0,h3");
	done(&f);
}

static void test_ineligible_never_blocks(void)
{
	struct fx f;
	struct book_ref a, b;
	mk(&f, 3, 1, 3);
	OK(fx_open(&f, 0, NULL, 0, &a));
	OK(fx_open(&f, 1, NULL, 0, &b));
	OK(fx_want(&f, a, "h0", HEAVY, 0, 0));
	OK(fx_want(&f, a, "h1", HEAVY, 0, 1));
	SEQ_EQ(offers(&f, 0), "h0,h1");
	/* a heavy want of the highest priority and the oldest arrival cannot
	 * take the reserve; the light want behind it can, at once */
	OK(fx_want(&f, b, "h2", HEAVY, 9, 2));
	OK(fx_want(&f, a, "l1", LIGHT, 0, 3));
	SEQ_EQ(offers(&f, 0), "h0,h1,l1");
	OK(fx_want(&f, b, "l2", LIGHT, 0, 4));
	struct book_position p;
	OK(fx_query(&f, b, "h2", &p));
	CU_ASSERT_EQUAL(p.state, WANT_PARKED);
	/* h0 ends: the one free slot is the reserve: the light l2 takes it,
	 * not the priority-9 heavy that parked first */
	struct book_ref r, r1;
	OK(fx_take_job(&f, a, "h0", &r));
	OK(fx_finish(&f, r, 60000, 0));
	SEQ_EQ(offers(&f, 0), "h0,h1,l1,l2");
	/* l2 ends: one free, still the reserve; l1 ends too: two free, more
	 * than the reserve: h2 goes */
	OK(fx_take_job(&f, b, "l2", &r));
	OK(fx_take_job(&f, a, "l1", &r1));
	OK(fx_finish(&f, r, 10, 0));
	SEQ_EQ(offers(&f, 0), "h0,h1,l1,l2");
	OK(fx_finish(&f, r1, 10, 0));
	SEQ_EQ(offers(&f, 0), "h0,h1,l1,l2,h2");
	done(&f);
}

static void test_priority_among_eligible(void)
{
	struct fx f;
	struct book_ref a;
	mk(&f, 2, 1, 2);
	OK(fx_open(&f, 0, NULL, 0, &a));
	OK(fx_want(&f, a, "x", LIGHT, 0, 0));
	OK(fx_want(&f, a, "y", LIGHT, 0, 1));
	SEQ_EQ(offers(&f, 0), "x,y");
	OK(fx_want(&f, a, "h", HEAVY, 5, 2));
	OK(fx_want(&f, a, "l-low", LIGHT, 0, 3));
	OK(fx_want(&f, a, "l-high", LIGHT, 3, 4));
	/* two slots free one after the other: the first is the only free one
	 * (the reserve): best eligible is l-high; then again one free: l-low */
	struct book_ref r;
	OK(fx_take_job(&f, a, "x", &r));
	OK(fx_finish(&f, r, 10, 0));
	OK(fx_take_job(&f, a, "y", &r));
	OK(fx_finish(&f, r, 10, 0));
	SEQ_EQ(offers(&f, 0), "x,y,l-high,l-low");
	done(&f);
}

static void test_unknown_cap(void)
{
	struct fx f;
	struct book_ref c;
	mk(&f, 4, 1, 2);
	OK(fx_open(&f, 0, NULL, 0, &c));
	want_n(&f, c, "u", UNKNOWN, 4, 0);
	SEQ_EQ(offers(&f, 0), "u0,u1");        /* cap 2: offered count too */
	OK(fx_want(&f, c, "l0", LIGHT, 0, 5));
	OK(fx_want(&f, c, "l1", LIGHT, 0, 6));
	SEQ_EQ(offers(&f, 0), "u0,u1,l0,l1");  /* the rest of the pool is free for others */
	/* running jobs count against the cap as offered ones do */
	struct book_ref r0, r1;
	OK(fx_take_job(&f, c, "u0", &r0));
	OK(fx_take_job(&f, c, "u1", &r1));
	OK(fx_take_job(&f, c, "l0", &r0));
	OK(fx_finish(&f, r0, 10, 0));
	SEQ_EQ(offers(&f, 0), "u0,u1,l0,l1");
	CU_ASSERT_EQUAL(in_use(&f), 3);
	/* u1 ends: u2 may take a slot (one unknown running again) */
	OK(fx_finish(&f, r1, 20, 0));
	SEQ_EQ(offers(&f, 0), "u0,u1,l0,l1,u2");
	done(&f);
}

static void test_classes_follow_runtimes(void)
{
	struct fx f;
	struct book_ref c, r;
	mk(&f, 4, 1, 1);
	OK(fx_open(&f, 0, NULL, 0, &c));
	CU_ASSERT_EQUAL(klass(&f, UNKNOWN), SVC_UNKNOWN);
	/* three slow jobs, one at a time (cap 1): heavy after the third */
	for (int i = 0; i < 3; i++) {
		char id[8];
		snprintf(id, sizeof id, "s%d", i);
		OK(fx_want(&f, c, id, UNKNOWN, 0, (uint64_t)i));
		OK(fx_take_job(&f, c, id, &r));
		CU_ASSERT_EQUAL(klass(&f, UNKNOWN), SVC_UNKNOWN);
		OK(fx_finish(&f, r, 30000, 0));
	}
	CU_ASSERT_EQUAL(klass(&f, UNKNOWN), SVC_HEAVY);
	/* now heavy: no cap of one, the reserve instead (3 of 4 slots) */
	want_n(&f, c, "t", UNKNOWN, 5, 10);
	SEQ_EQ(offers(&f, 0), "s0,s1,s2,t0,t1,t2");
	/* a light service whose jobs turn slow becomes heavy (past the band) */
	for (int i = 0; i < 12; i++) {
		char id[8];
		snprintf(id, sizeof id, "l%d", i);
		OK(fx_want(&f, c, id, LIGHT, 5, (uint64_t)(20 + i)));
		OK(fx_take_job(&f, c, id, &r));
		OK(fx_finish(&f, r, 40000, 0));
		if (klass(&f, LIGHT) == SVC_HEAVY)
			break;
	}
	CU_ASSERT_EQUAL(klass(&f, LIGHT), SVC_HEAVY);
	struct book_service_status st;
	fx_lock(&f);
	book_service_status(f.b, LIGHT, &st);
	uint64_t samples, changes;
	book_profile_changes(f.b, &samples, &changes);
	fx_unlock(&f);
	CU_ASSERT(st.mean_runtime_ms > 12000);
	CU_ASSERT(st.samples > 10);
	CU_ASSERT(samples >= 3 + 1);
	CU_ASSERT(changes >= 2);
	done(&f);
}

static void test_profile_set(void)
{
	struct fx f;
	mk(&f, 4, 1, 2);
	struct book_profile p = { .ema_ms = 500, .samples = 2, .klass = SVC_HEAVY };
	fx_lock(&f);
	/* too few samples: unknown whatever the snapshot said */
	OK(book_profile_set(f.b, UNKNOWN, &p));
	fx_unlock(&f);
	CU_ASSERT_EQUAL(klass(&f, UNKNOWN), SVC_UNKNOWN);
	/* a class inside the band is kept (hysteresis state survives) */
	p.samples = 5;
	p.ema_ms = 9000;
	fx_lock(&f);
	OK(book_profile_set(f.b, UNKNOWN, &p));
	fx_unlock(&f);
	CU_ASSERT_EQUAL(klass(&f, UNKNOWN), SVC_HEAVY);
	/* one that does not fit (threshold changed since) is re-classified */
	p.ema_ms = 100;
	fx_lock(&f);
	OK(book_profile_set(f.b, UNKNOWN, &p));
	p.ema_ms = -1;
	CU_ASSERT_EQUAL(book_profile_set(f.b, UNKNOWN, &p), BOOK_E_INVALID);
	CU_ASSERT_EQUAL(book_profile_set(f.b, 3, &p), BOOK_E_INVALID);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(klass(&f, UNKNOWN), SVC_LIGHT);
	done(&f);
}

static void test_fixed_pools_unchanged(void)
{
	/* without auto-balance a slow service stays unknown and is never held
	 * back: every slot goes */
	struct fx f;
	struct book_topology t;
	struct book_limits l;
	uint32_t procs = 3;
	struct book_ref c, r;
	fx_limits(&l);
	fx_topo(&t, 1, &procs, 1, NULL);
	CU_ASSERT_FATAL(fx_init(&f, &l, &t, 1) == 0);
	OK(fx_open(&f, 0, NULL, 0, &c));
	for (int i = 0; i < 5; i++) {
		OK(fx_want(&f, c, "j", 0, 0, 0));
		OK(fx_take_job(&f, c, "j", &r));
		OK(fx_finish(&f, r, 90000, 0));
	}
	CU_ASSERT_EQUAL(klass(&f, 0), SVC_UNKNOWN);
	OK(fx_want(&f, c, "a", 0, 0, 0));
	OK(fx_want(&f, c, "b", 0, 0, 0));
	OK(fx_want(&f, c, "d", 0, 0, 0));
	CU_ASSERT_EQUAL(in_use(&f), 3);
	done(&f);
}

static void test_check_and_repair_classes(void)
{
	struct fx f;
	char why[256];
	mk(&f, 4, 1, 2);
	/* a process died between writing the sample count and the class:
	 * the check sees it, the repair re-classifies */
	fx_lock(&f);
	f.b->svcs[UNKNOWN].ema_ms = 50000;
	f.b->svcs[UNKNOWN].nsamples = 3;
	fx_unlock(&f);
	CU_ASSERT_EQUAL(fx_check(&f, why, sizeof why), -1);
	CU_ASSERT(strstr(why, "class") != NULL);
	fx_lock(&f);
	book_repair(f.b);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(klass(&f, UNKNOWN), SVC_HEAVY);
	CU_ASSERT_EQUAL(fx_check(&f, why, sizeof why), 0);
	/* a garbage class value */
	fx_lock(&f);
	f.b->svcs[LIGHT].klass = 9;
	fx_unlock(&f);
	CU_ASSERT_EQUAL(fx_check(&f, why, sizeof why), -1);
	fx_lock(&f);
	book_repair(f.b);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(klass(&f, LIGHT), SVC_LIGHT);
	/* an average that is no number any more is forgotten */
	fx_lock(&f);
	f.b->svcs[LIGHT].ema_ms = -HUGE_VAL;
	book_repair(f.b);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(klass(&f, LIGHT), SVC_UNKNOWN);
	CU_ASSERT_EQUAL(fx_check(&f, why, sizeof why), 0);
	/* the held-slot counts of a service are rebuilt by repair too */
	struct book_ref c;
	OK(fx_open(&f, 0, NULL, 0, &c));
	OK(fx_want(&f, c, "u0", UNKNOWN, 0, 0));   /* heavy now */
	OK(fx_want(&f, c, "u1", UNKNOWN, 0, 0));
	fx_lock(&f);
	f.b->svcs[UNKNOWN].offered = 0;
	fx_unlock(&f);
	CU_ASSERT_EQUAL(fx_check(&f, why, sizeof why), -1);
	fx_lock(&f);
	book_repair(f.b);
	fx_unlock(&f);
	struct book_service_status st;
	fx_lock(&f);
	book_service_status(f.b, UNKNOWN, &st);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(st.offered, 2);
	done(&f);
}

static void test_init_refuses_bad_parameters(void)
{
	struct book_topology t;
	struct book_limits l;
	uint32_t procs = 2;
	fx_limits(&l);
	fx_topo(&t, 1, &procs, 1, NULL);
	t.autobalance.enabled = 1;
	t.autobalance.heavy_threshold_ms = 1000;
	t.autobalance.min_samples = 0;
	struct fx f;
	CU_ASSERT_NOT_EQUAL(fx_init(&f, &l, &t, 1), 0);
	t.autobalance.min_samples = 1;
	t.autobalance.heavy_threshold_ms = 0;
	CU_ASSERT_NOT_EQUAL(fx_init(&f, &l, &t, 1), 0);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "heavy stops at the reserve", test_heavy_stops_at_reserve },
		{ "an ineligible want never blocks", test_ineligible_never_blocks },
		{ "priority among the eligible", test_priority_among_eligible },
		{ "unknown share cap", test_unknown_cap },
		{ "classes follow runtimes", test_classes_follow_runtimes },
		{ "profile restore", test_profile_set },
		{ "fixed pools unchanged", test_fixed_pools_unchanged },
		{ "check and repair cover classes", test_check_and_repair_classes },
		{ "init refuses bad parameters", test_init_refuses_bad_parameters },
		{ NULL, NULL },
	};
	return run_suite("book auto-balance", cases);
}
