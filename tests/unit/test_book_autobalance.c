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
#include <sys/wait.h>
#include <unistd.h>

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

enum {
	LIGHT = 0,
	HEAVY = 1,
	UNKNOWN = 2
};

/* One pool of `procs` slots, three services; services 0 and 1 are given
 * the classes light and heavy by a restored profile (10 samples of 20 ms
 * and 60 s), service 2 has none (unknown). */
static void mk(struct fx *f, uint32_t procs, uint32_t reserve, uint32_t cap)
{
	struct book_topology t;
	struct book_limits l;
	fx_limits(&l);
	l.max_tokens = procs;
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
	SEQ_EQ(offers(&f, 0), "u0,u1"); /* cap 2: offered count too */
	OK(fx_want(&f, c, "l0", LIGHT, 0, 5));
	OK(fx_want(&f, c, "l1", LIGHT, 0, 6));
	SEQ_EQ(offers(&f, 0), "u0,u1,l0,l1"); /* the rest of the pool is free for others */
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
	OK(fx_want(&f, c, "u0", UNKNOWN, 0, 0)); /* heavy now */
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

/* Ends running job r with an error code (a job cut short: cancelled, timed
 * out ...) after ms. */
static void finish_err(struct fx *f, struct book_ref r, uint32_t ms, uint8_t error)
{
	struct book_outcome o;
	memset(&o, 0, sizeof o);
	o.exit_code = -1;
	o.error = error;
	o.failed = 1;
	o.duration_ms = ms;
	fx_lock(f);
	OK(book_job_finished(f->b, r, &o, NULL, 0));
	OK(book_done_delivered(f->b, r));
	fx_unlock(f);
}

static struct book_service_status svc_status(struct fx *f, uint32_t svc)
{
	struct book_service_status st;
	fx_lock(f);
	book_service_status(f->b, svc, &st);
	fx_unlock(f);
	return st;
}

/* Runs one job of svc on conn c and ends it with `error` after ms. */
static void run_err(struct fx *f, struct book_ref c, uint32_t svc, uint32_t ms, uint8_t error)
{
	static int n;
	char id[16];
	struct book_ref r;
	snprintf(id, sizeof id, "x%d", n++);
	OK(fx_want(f, c, id, svc, 0, 0));
	OK(fx_take_job(f, c, id, &r));
	if (error)
		finish_err(f, r, ms, error);
	else
		OK(fx_finish(f, r, ms, 1));
}

static void test_cut_short_jobs(void)
{
	struct fx f;
	struct book_ref c;
	mk(&f, 4, 1, 4);
	OK(fx_open(&f, 0, NULL, 0, &c));
	/* many quick cancels of a heavy service: counted as finished and
	 * failed, but no sample: it stays heavy with its average */
	for (int i = 0; i < 30; i++)
		run_err(&f, c, HEAVY, 30, 1);
	struct book_service_status st = svc_status(&f, HEAVY);
	CU_ASSERT_EQUAL(st.klass, SVC_HEAVY);
	CU_ASSERT_EQUAL(st.samples, 10);
	CU_ASSERT_EQUAL(st.mean_runtime_ms, 60000);
	CU_ASSERT_EQUAL(st.finished, 30);
	CU_ASSERT_EQUAL(st.failed, 30);
	/* ... so the reserve holds: 3 of the 4 slots for heavy wants */
	want_n(&f, c, "h", HEAVY, 4, 100);
	CU_ASSERT_EQUAL(in_use(&f), 3);
	/* one cut short after longer than the average is a sample (heavier) */
	OK(fx_unwant(&f, c, "h3"));
	struct book_ref r;
	OK(fx_take_job(&f, c, "h0", &r));
	finish_err(&f, r, 90000, 2);
	st = svc_status(&f, HEAVY);
	CU_ASSERT_EQUAL(st.samples, 11);
	CU_ASSERT_EQUAL(st.mean_runtime_ms, 66000);
	/* exactly the average: no sample either */
	OK(fx_take_job(&f, c, "h1", &r));
	finish_err(&f, r, 66000, 2);
	CU_ASSERT_EQUAL(svc_status(&f, HEAVY).samples, 11);
	/* a job that failed on its own (exit code 1, no error) is a sample
	 * whatever its runtime: a light service learns from it */
	run_err(&f, c, LIGHT, 5, 0);
	CU_ASSERT_EQUAL(svc_status(&f, LIGHT).samples, 11);
	/* an error is never the first sample, however long it ran */
	run_err(&f, c, UNKNOWN, 50000, 3);
	st = svc_status(&f, UNKNOWN);
	CU_ASSERT_EQUAL(st.samples, 0);
	CU_ASSERT_EQUAL(st.mean_runtime_ms, 0);
	CU_ASSERT_EQUAL(st.finished, 1);
	done(&f);
}

static void test_cut_short_tokens(void)
{
	struct fx f;
	mk(&f, 4, 1, 4);
	struct book_outcome o;
	memset(&o, 0, sizeof o);
	o.exit_code = -1;
	o.error = 1;
	o.failed = 1;
	for (int i = 0; i < 20; i++) {
		struct book_ref tok;
		uint64_t secret;
		fx_lock(&f);
		OK(book_token_issue(f.b, HEAVY, 0, 1000, &tok, &secret));
		OK(book_token_use(f.b, tok, secret, HEAVY, 0, 0));
		o.duration_ms = i == 19 ? 120000 : 30;
		OK(book_token_finished(f.b, tok, &o));
		fx_unlock(&f);
	}
	struct book_service_status st = svc_status(&f, HEAVY);
	CU_ASSERT_EQUAL(st.klass, SVC_HEAVY);
	CU_ASSERT_EQUAL(st.samples, 11); /* only the long one */
	CU_ASSERT_EQUAL(st.mean_runtime_ms, 72000);
	CU_ASSERT_EQUAL(st.finished, 20);
	done(&f);
}

/* A snapshot mean above UINT32_MAX ms is refused (durations are uint32_t,
 * no average of them is larger); the largest one is shown rounded, in
 * range. */
static void test_mean_range(void)
{
	struct fx f;
	mk(&f, 4, 1, 2);
	struct book_profile p = { .ema_ms = 1e300, .samples = 5, .klass = SVC_HEAVY };
	fx_lock(&f);
	CU_ASSERT_EQUAL(book_profile_set(f.b, UNKNOWN, &p), BOOK_E_INVALID);
	p.ema_ms = 4294967296.0;
	CU_ASSERT_EQUAL(book_profile_set(f.b, UNKNOWN, &p), BOOK_E_INVALID);
	p.ema_ms = HUGE_VAL;
	CU_ASSERT_EQUAL(book_profile_set(f.b, UNKNOWN, &p), BOOK_E_INVALID);
	p.ema_ms = NAN;
	CU_ASSERT_EQUAL(book_profile_set(f.b, UNKNOWN, &p), BOOK_E_INVALID);
	p.ema_ms = 4294967295.0;
	OK(book_profile_set(f.b, UNKNOWN, &p));
	fx_unlock(&f);
	struct book_service_status st = svc_status(&f, UNKNOWN);
	CU_ASSERT_EQUAL(st.mean_runtime_ms, UINT32_MAX);
	CU_ASSERT_EQUAL(st.klass, SVC_HEAVY);
	/* an average that went out of range in the segment (a bad write):
	 * shown saturated, never converted out of range; repair forgets it */
	fx_lock(&f);
	f.b->svcs[UNKNOWN].ema_ms = 1e30;
	fx_unlock(&f);
	CU_ASSERT_EQUAL(svc_status(&f, UNKNOWN).mean_runtime_ms, UINT32_MAX);
	fx_lock(&f);
	book_repair(f.b);
	fx_unlock(&f);
	st = svc_status(&f, UNKNOWN);
	CU_ASSERT_EQUAL(st.samples, 0);
	CU_ASSERT_EQUAL(st.klass, SVC_UNKNOWN);
	done(&f);
}

/* The repair counts the classes it changes, so the snapshot writer (which
 * watches book_profile_changes) saves a repaired class promptly. */
static void test_repair_counts_class_change(void)
{
	struct fx f;
	mk(&f, 4, 1, 2);
	uint64_t before, after;
	fx_lock(&f);
	book_profile_changes(f.b, NULL, &before);
	f.b->svcs[UNKNOWN].ema_ms = 50000;
	f.b->svcs[UNKNOWN].nsamples = 3; /* died before writing the class */
	book_repair(f.b);
	book_profile_changes(f.b, NULL, &after);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(klass(&f, UNKNOWN), SVC_HEAVY);
	CU_ASSERT_EQUAL(after, before + 1);
	done(&f);
}

static const char *g_fault_target;
static void fault_exit(const char *point)
{
	if (strcmp(point, g_fault_target) == 0)
		_exit(0);
}

/* A handler dies right after a job's sample was added: the job's end was
 * written before it, so after the repair and the handler's purge the job is
 * finished with its own outcome (not lost) and counted once. */
static void test_sample_after_end(void)
{
	struct fx f;
	struct book_ref c, r;
	mk(&f, 4, 1, 4);
	OK(fx_open(&f, 0, "app", 0, &c)); /* named: its jobs outlive the purge */
	OK(fx_want(&f, c, "j", LIGHT, 0, 0));
	OK(fx_take_job(&f, c, "j", &r));
	fflush(stdout);
	pid_t pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		g_fault_target = "sample.mid";
		book_set_fault_hook(fault_exit);
		fx_finished(&f, r, 0, 40, NULL);
		_exit(3); /* the point was not reached */
	}
	int status = 0;
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	fx_lock(&f); /* repairs */
	book_purge_handler(f.b, 0, NULL, 0);
	fx_unlock(&f);
	struct book_outcome o;
	OK(fx_done_read(&f, r, &o, NULL, 0, NULL));
	CU_ASSERT_EQUAL(o.error, 0); /* its own outcome, not lost */
	CU_ASSERT_EQUAL(o.duration_ms, 40);
	struct book_service_status st = svc_status(&f, LIGHT);
	CU_ASSERT_EQUAL(st.finished, 1);
	CU_ASSERT_EQUAL(st.failed, 0);
	CU_ASSERT_EQUAL(st.samples, 11);
	done(&f);
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
		{ "jobs cut short never make a service lighter", test_cut_short_jobs },
		{ "token jobs cut short, the same rule", test_cut_short_tokens },
		{ "mean runtime range", test_mean_range },
		{ "repair counts a class change", test_repair_counts_class_change },
		{ "the sample follows the job's end", test_sample_after_end },
		{ NULL, NULL },
	};
	return run_suite("book auto-balance", cases);
}
