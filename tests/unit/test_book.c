/*
 * test_book.c - unit tests of the want-book (src/book/): the grant rule,
 * every request in every state, limits, connections and clients, the
 * resume grace, queue positions, mail, drain, stale refs, time, finished
 * jobs (DONE kept in the book and mailed exactly once to the owner conn's
 * handler, through conn closes, graces, resumes and purges; jobs lost with
 * their runner's handler, reported by a DONE with BOOK_ERROR_LOST; the
 * receipt store), and crash repair at every fault point.  Each test ends with
 * book_check.
 */
#include "autoconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "book/book.h"
#include "book/book_layout.h"
#include "book/book_siphash.h"
#include "book_fixture.h"

#define OK(x) CU_ASSERT_EQUAL((x), BOOK_OK)
#define RC(x, rc) CU_ASSERT_EQUAL((x), (rc))
/* a sequence of job ids, printed when it differs */
#define SEQ_EQ(got, want)                                                                       \
	do {                                                                                    \
		const char *g_ = (got);                                                         \
		if (strcmp(g_, (want)) != 0)                                                    \
			printf("\n  line %d: got \"%s\", want \"%s\"\n", __LINE__, g_, (want)); \
		CU_ASSERT_STRING_EQUAL(g_, (want));                                             \
	} while (0)

/* wg0: services 0, 1 (and 3, disabled); wg1: service 2 */
static void mk_lim(struct fx *f, const struct book_limits *l, uint32_t p0, uint32_t p1)
{
	struct book_topology t;
	uint32_t procs[2] = { p0, p1 }, wgs[4] = { 0, 0, 1, 0 };
	fx_topo(&t, 2, procs, 4, wgs);
	t.services[3].enabled = 0;
	CU_ASSERT_FATAL(fx_init(f, l, &t, 12345) == 0);
}

static void mk(struct fx *f, uint32_t p0, uint32_t p1)
{
	struct book_limits l;
	fx_limits(&l);
	mk_lim(f, &l, p0, p1);
}

static void checked(struct fx *f)
{
	char why[256];
	int rc = fx_check(f, why, sizeof why);
	if (rc)
		printf("\n  book_check: %s\n", why);
	CU_ASSERT_EQUAL(rc, 0);
}

static void done(struct fx *f)
{
	checked(f);
	fx_fini(f);
}

/* Job ids of the OFFER mails logged from index `from`, comma separated. */
static const char *offers(struct fx *f, size_t from)
{
	return fx_offers(f, from);
}

static struct book_position pos_of(struct fx *f, struct book_ref c, const char *job)
{
	struct book_position p;
	memset(&p, 0xff, sizeof p);
	OK(fx_query(f, c, job, &p));
	return p;
}

static int mail_handler(struct fx *f, enum book_mail_kind kind, const char *job)
{
	const struct fx_mail *m = fx_find(f, kind, job);
	return m ? (int)m->handler : -1;
}

static uint32_t mail_want_idx(struct fx *f, enum book_mail_kind kind, const char *job)
{
	const struct fx_mail *m = fx_find(f, kind, job);
	return m ? m->m.want.idx : UINT32_MAX;
}

static void is_lost(struct fx *f, struct book_ref r);
static size_t dones(const struct fx *f, const char *job, int h);

/* Runs the job offered as `job` on conn c and finishes it at once. */
static void run_finish(struct fx *f, struct book_ref c, const char *job)
{
	struct book_ref r;
	OK(fx_take_job(f, c, job, &r));
	OK(fx_finish(f, r, 10, 0));
}

/* ---- primitives ---- */

static void test_hist_buckets(void)
{
	/* le: a value on a bound is in that bound's bucket */
	CU_ASSERT_EQUAL(hist_bucket(0), 0);
	CU_ASSERT_EQUAL(hist_bucket(5), 0);
	CU_ASSERT_EQUAL(hist_bucket(6), 1);
	CU_ASSERT_EQUAL(hist_bucket(3600000), HIST_FINITE - 1);
	CU_ASSERT_EQUAL(hist_bucket(3600001), HIST_FINITE);
	CU_ASSERT_EQUAL(hist_bucket(UINT64_MAX), HIST_FINITE);
	for (unsigned i = 1; i < HIST_FINITE; i++)
		CU_ASSERT(hist_bound_ms(i - 1) < hist_bound_ms(i));
}

static void test_siphash_vectors(void)
{
	/* reference vectors of SipHash-2-4: key 00..0f, message 00..(n-1) */
	uint64_t key[2] = { 0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL };
	uint8_t msg[64];
	for (int i = 0; i < 64; i++)
		msg[i] = (uint8_t)i;
	CU_ASSERT_EQUAL(bk_siphash24(key, msg, 0), 0x726fdb47dd0e0e31ULL);
	CU_ASSERT_EQUAL(bk_siphash24(key, msg, 1), 0x74f839c593dc67fdULL);
	CU_ASSERT_EQUAL(bk_siphash24(key, msg, 15), 0xa129ca6149be45e5ULL);
}

/* The lock's figures are kept only by a BOOK_LOCK_STATS build
 * (test_book_lockstats); this one reads no clock in book_lock. */
static void test_no_lock_figures(void)
{
	struct fx f;
	struct book_limits l;
	struct book_topology t;
	uint32_t procs[1] = { 1 }, wgs[1] = { 0 };
	struct book_lock_stats st;
	fx_limits(&l);
	fx_topo(&t, 1, procs, 1, wgs);
	CU_ASSERT_FATAL(fx_init(&f, &l, &t, 1) == 0);
	fx_lock(&f);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(book_lock_stats(f.b, &st), -1);
	fx_fini(&f);
}

/*
 * Hashes prepared before the lock (book_prepare_job, book_prepare_park) are
 * used only for their own key of their own segment.  The memo below holds
 * entries of the same key bytes in another segment (another SipHash key:
 * a re-created segment), of the same id for another client, of another id
 * of the same length and of another priority's node, and more keys than
 * it keeps; the operations then hash keys none of them is for.  Each check
 * empties the memo first, so book_check looks every key up by its true
 * hash: an operation that took a wrong entry's hash left its want or node
 * where no look-up finds it.
 */
static void test_prepared_hashes_own_key(void)
{
	struct fx f, g;
	struct book_limits l;
	struct book_topology t;
	uint32_t procs[1] = { 0 }, wgs[1] = { 0 }; /* no slot: every want parks */
	struct book_ref a, b, ga;
	char id[16];
	fx_limits(&l);
	fx_topo(&t, 1, procs, 1, wgs);
	CU_ASSERT_FATAL(fx_init(&f, &l, &t, 1) == 0);
	CU_ASSERT_FATAL(fx_init(&g, &l, &t, 2) == 0);
	OK(fx_open(&f, 0, "ca", 0, &a));
	OK(fx_open(&f, 1, "cb", 0, &b));
	OK(fx_open(&g, 0, "ca", 0, &ga));
	/* the same connection and client index: the same key bytes in g */
	CU_ASSERT_FATAL(ga.idx == a.idx && f.b->sipkey[0] != g.b->sipkey[0]);
	CU_ASSERT_FATAL(bk_conn(g.b, ga.idx)->client == bk_conn(f.b, a.idx)->client);
	book_prepare_job(g.b, ga, "j1");
	book_prepare_park(g.b, ga, 0, 0);
	book_prepare_job(f.b, b, "j1");
	book_prepare_job(f.b, a, "j2");
	book_prepare_park(f.b, a, 0, 1);
	OK(fx_want(&f, a, "j1", 0, 0, 0));
	book_prepared_clear();
	checked(&f);
	CU_ASSERT_EQUAL(pos_of(&f, a, "j1").state, WANT_PARKED);

	/* entries of the keys themselves, past what the memo keeps, and stale
	 * ones of g left in it: each of f's wants is still found */
	book_prepare_job(g.b, ga, "k0");
	for (int i = 0; i < BOOK_PREPARED_MAX + 8; i++) {
		snprintf(id, sizeof id, "k%d", i);
		book_prepare_job(f.b, a, id);
	}
	for (int i = 0; i < BOOK_PREPARED_MAX + 8; i++) {
		snprintf(id, sizeof id, "k%d", i);
		OK(fx_want(&f, a, id, 0, i % 3, 0));
	}
	OK(fx_unwant(&f, a, "j1"));
	book_prepared_clear();
	checked(&f);
	for (int i = 0; i < BOOK_PREPARED_MAX + 8; i++) {
		snprintf(id, sizeof id, "k%d", i);
		CU_ASSERT_EQUAL(pos_of(&f, a, id).state, WANT_PARKED);
	}
	RC(fx_query(&f, a, "j1", &(struct book_position){ 0 }), BOOK_E_UNKNOWN_JOB);
	done(&g);
	done(&f);
}

static void test_init_limits(void)
{
	struct book_limits l;
	fx_limits(&l);
	CU_ASSERT(book_size(&l) > 0);
	l.nhandlers = 0;
	CU_ASSERT_EQUAL(book_size(&l), 0);
	l.nhandlers = BOOK_MAX_HANDLERS + 1;
	CU_ASSERT_EQUAL(book_size(&l), 0);
	fx_limits(&l);
	l.max_wants = 0;
	CU_ASSERT_EQUAL(book_size(&l), 0);
	/* the receipt store */
	fx_limits(&l);
	l.max_receipts = 0;
	l.receipt_bytes = 0;
	size_t bare = book_size(&l);
	CU_ASSERT(bare > 0);
	l.receipt_bytes = 16384; /* ignored without slots */
	CU_ASSERT_EQUAL(book_size(&l), bare);
	l.max_receipts = 64;
	CU_ASSERT(book_size(&l) >= bare + 64 * 16384);
	CU_ASSERT(book_size(&l) <= bare + 64 * (16384 + 8) + 128);
	l.receipt_bytes = 0;
	CU_ASSERT_EQUAL(book_size(&l), 0);
	l.receipt_bytes = BOOK_RECEIPT_MAX + 1;
	CU_ASSERT_EQUAL(book_size(&l), 0);
	l.receipt_bytes = BOOK_RECEIPT_MAX;
	CU_ASSERT(book_size(&l) > 0);
	l.receipt_bytes = 1;
	l.max_receipts = BOOK_MAX_RECEIPTS + 1;
	CU_ASSERT_EQUAL(book_size(&l), 0);
	fx_limits(&l);
	struct book_topology t;
	uint32_t procs[1] = { 1 }, wgs[1] = { 1 }; /* service in a missing wg */
	fx_topo(&t, 1, procs, 1, wgs);
	size_t sz = book_size(&l);
	void *mem = calloc(1, sz);
	CU_ASSERT_EQUAL(book_init(mem, &l, &t, NULL, 1), -1);
	CU_ASSERT_PTR_NULL(book_from_mem(mem));
	wgs[0] = 0;
	fx_topo(&t, 1, procs, 1, wgs);
	CU_ASSERT_EQUAL(book_init(mem, &l, &t, NULL, 1), 0);
	CU_ASSERT_PTR_NOT_NULL(book_from_mem(mem));
	free(mem);
	CU_ASSERT_STRING_EQUAL(book_rc_name(BOOK_E_DUPLICATE), "duplicate_job");
	CU_ASSERT_STRING_EQUAL(book_rc_name(BOOK_E_BAD_TOKEN), "bad_token");
}

/* ---- the grant rule ---- */

static void test_priority_beats_arrival(void)
{
	struct fx f;
	struct book_ref a, b;
	mk(&f, 1, 1);
	OK(fx_open(&f, 0, NULL, 0, &a));
	OK(fx_open(&f, 1, NULL, 0, &b));
	OK(fx_want(&f, a, "a0", 0, 0, 0));
	SEQ_EQ(offers(&f, 0), "a0"); /* idle: granted at once */
	OK(fx_want(&f, a, "a1", 0, 0, 1));
	OK(fx_want(&f, a, "a2", 1, 3, 2));
	OK(fx_want(&f, b, "b1", 0, 5, 3));
	size_t from = f.nlog;
	run_finish(&f, a, "a0");
	run_finish(&f, b, "b1");
	run_finish(&f, a, "a2");
	run_finish(&f, a, "a1");
	SEQ_EQ(offers(&f, from), "b1,a2,a1");
	/* negative priorities are ordinary priorities */
	OK(fx_want(&f, a, "n1", 0, -5, 4));
	OK(fx_want(&f, b, "n2", 0, -7, 5));
	SEQ_EQ(offers(&f, from), "b1,a2,a1,n1");
	done(&f);
}

static void test_round_robin_fresh_conn(void)
{
	struct fx f;
	struct book_ref a, b, c;
	char id[16];
	mk(&f, 1, 1);
	OK(fx_open(&f, 0, NULL, 0, &a));
	OK(fx_open(&f, 0, NULL, 0, &b));
	OK(fx_open(&f, 1, NULL, 0, &c));
	for (int i = 0; i < 100; i++) {
		snprintf(id, sizeof id, "a%d", i);
		OK(fx_want(&f, a, id, 0, 0, 0));
	}
	OK(fx_want(&f, b, "b0", 0, 0, 1));
	SEQ_EQ(offers(&f, 0), "a0");
	run_finish(&f, a, "a0"); /* a was just served: b's one want goes first */
	SEQ_EQ(offers(&f, 0), "a0,b0");
	OK(fx_want(&f, c, "c0", 0, 0, 2)); /* fresh conn: before a and b */
	run_finish(&f, b, "b0");
	run_finish(&f, c, "c0");
	run_finish(&f, a, "a1");
	SEQ_EQ(offers(&f, 0), "a0,b0,c0,a1,a2");
	done(&f);
}

static void test_tie_by_arrival_and_fifo(void)
{
	struct fx f;
	struct book_ref a, b, x;
	mk(&f, 1, 1);
	OK(fx_open(&f, 0, NULL, 0, &x));
	OK(fx_open(&f, 0, NULL, 0, &a));
	OK(fx_open(&f, 0, NULL, 0, &b));
	OK(fx_want(&f, x, "x", 0, 0, 0)); /* holds the slot */
	/* never-served conns tie on stamp 0: the older want goes first */
	OK(fx_want(&f, b, "b1", 1, 0, 1));
	OK(fx_want(&f, a, "a1", 0, 0, 2));
	/* FIFO within a conn, across the services of the waitgroup */
	OK(fx_want(&f, a, "a2", 1, 0, 3));
	OK(fx_want(&f, a, "a3", 0, 0, 4));
	OK(fx_want(&f, b, "b2", 0, 0, 5));
	fx_pump(&f);
	size_t from = f.nlog;
	run_finish(&f, x, "x");
	run_finish(&f, b, "b1");
	run_finish(&f, a, "a1");
	run_finish(&f, b, "b2");
	run_finish(&f, a, "a2");
	SEQ_EQ(offers(&f, from), "b1,a1,b2,a2,a3");
	done(&f);
}

static void test_lanes_share_the_turn(void)
{
	/* a conn's wants in two services of one waitgroup: once it is served
	 * through one service, its want in the other waits its turn too */
	struct fx f;
	struct book_ref a, b, x;
	mk(&f, 1, 1);
	OK(fx_open(&f, 0, NULL, 0, &x));
	OK(fx_open(&f, 0, NULL, 0, &a));
	OK(fx_open(&f, 1, NULL, 0, &b));
	OK(fx_want(&f, x, "x", 0, 0, 0));
	OK(fx_want(&f, a, "a1", 0, 0, 1));
	OK(fx_want(&f, a, "a2", 1, 0, 2));
	OK(fx_want(&f, b, "b1", 1, 0, 3));
	OK(fx_want(&f, b, "b2", 1, 0, 4));
	fx_pump(&f);
	size_t from = f.nlog;
	run_finish(&f, x, "x");
	run_finish(&f, a, "a1");
	run_finish(&f, b, "b1");
	run_finish(&f, a, "a2");
	SEQ_EQ(offers(&f, from), "a1,b1,a2,b2");
	done(&f);
}

static void test_round_robin_shares(void)
{
	struct fx f;
	struct book_limits l;
	struct book_ref c[3];
	unsigned served[3] = { 0, 0, 0 }, next_id[3] = { 0, 0, 0 };
	char id[32];
	fx_limits(&l);
	l.max_wants = 400;
	mk_lim(&f, &l, 1, 1);
	for (int k = 0; k < 3; k++) {
		OK(fx_open(&f, (uint32_t)k, NULL, 0, &c[k]));
		for (int i = 0; i < 100; i++) {
			snprintf(id, sizeof id, "c%d-%u", k, next_id[k]++);
			OK(fx_want(&f, c[k], id, 0, 0, 0));
		}
	}
	int last = -1, alternated = 1;
	for (int n = 0; n < 9000; n++) {
		struct book_mail m[8];
		size_t got = 0;
		uint32_t h = 0;
		fx_lock(&f);
		for (h = 0; h < 3 && got == 0; h++)
			got = book_mail_take(f.b, h, m, 8);
		fx_unlock(&f);
		h--;
		size_t i = 0;
		while (i < got && m[i].kind != MAIL_OFFER)
			i++;
		CU_ASSERT_FATAL(i < got);
		int k = (int)h;
		CU_ASSERT_EQUAL(m[i].conn.idx, c[k].idx);
		if (last >= 0 && k != (last + 1) % 3)
			alternated = 0;
		last = k;
		served[k]++;
		struct book_ref r;
		OK(fx_accept(&f, c[k], m[i].job_id, m[i].token, h, &r));
		OK(fx_finish(&f, r, 1, 0));
		snprintf(id, sizeof id, "c%d-%u", k, next_id[k]++);
		OK(fx_want(&f, c[k], id, 0, 0, (uint64_t)n));
	}
	for (int k = 0; k < 3; k++)
		CU_ASSERT(served[k] >= 2999 && served[k] <= 3001);
	CU_ASSERT(alternated);
	struct book_status st;
	fx_lock(&f);
	book_status(f.b, &st);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(st.grants, 9001);
	CU_ASSERT_EQUAL(st.wants, 300);
	done(&f);
}

static void test_waitgroups_independent(void)
{
	struct fx f;
	struct book_ref a, b, x;
	mk(&f, 1, 1);
	OK(fx_open(&f, 0, NULL, 0, &x));
	OK(fx_open(&f, 0, NULL, 0, &a));
	OK(fx_open(&f, 1, NULL, 0, &b));
	/* a high priority in wg0 does not hold back wg1 */
	OK(fx_want(&f, a, "a-hi", 0, 9, 0));
	OK(fx_want(&f, b, "b-lo", 2, 0, 1));
	SEQ_EQ(offers(&f, 0), "a-hi,b-lo");
	/* a was served in wg0, never in wg1: in wg1 it ties with b on stamp
	 * 0 and wins by arrival; b was served in wg1 and goes after */
	OK(fx_want(&f, a, "a2", 2, 0, 2));
	OK(fx_want(&f, b, "b2", 2, 0, 3));
	OK(fx_want(&f, x, "x2", 2, 0, 4));
	size_t from = f.nlog;
	run_finish(&f, b, "b-lo");
	run_finish(&f, a, "a2");
	SEQ_EQ(offers(&f, from), "a2,x2");
	struct book_wg_status s0, s1;
	fx_wg(&f, 0, &s0);
	fx_wg(&f, 1, &s1);
	CU_ASSERT_EQUAL(s0.offered, 1);
	CU_ASSERT_EQUAL(s1.offered, 1);
	CU_ASSERT_EQUAL(s1.waiting, 1);
	CU_ASSERT_EQUAL(s1.processes, 1);
	done(&f);
}

/* ---- requests ---- */

/* ---- the console's views (book_list.c) ---- */

static const struct book_want_info *info_of(const struct book_want_info *v, size_t n,
					    const char *job)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].job_id, job) == 0)
			return &v[i];
	return NULL;
}

/* The listing: running jobs with runner, client and command; parked wants
 * with the position book_query gives; the per-waitgroup bound. */
static void test_list_wants(void)
{
	struct fx f;
	struct book_ref a, b, r;
	struct book_want_info v[16];
	mk(&f, 1, 1);
	OK(fx_open(&f, 0, "ca", 0, &a));
	OK(fx_open(&f, 1, NULL, 0, &b));
	OK(fx_want(&f, a, "a0", 0, 0, 0));
	OK(fx_take_job(&f, a, "a0", &r));
	OK(fx_want(&f, a, "a1", 0, 0, 1));
	OK(fx_want(&f, a, "a2", 1, 0, 2));
	OK(fx_want(&f, b, "b1", 0, 0, 3));
	OK(fx_want(&f, b, "b9", 0, 5, 4));
	fx_lock(&f);
	book_job_set_command(f.b, r, 2);
	size_t n = book_list_wants(f.b, v, 16, 100);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(n, 5);
	const struct book_want_info *a0 = info_of(v, n, "a0");
	CU_ASSERT_FATAL(a0 != NULL);
	CU_ASSERT_EQUAL(a0->state, WANT_RUNNING);
	CU_ASSERT_STRING_EQUAL(a0->client_id, "ca");
	CU_ASSERT_EQUAL(a0->handler, 0);
	CU_ASSERT_EQUAL(a0->command, 2);
	CU_ASSERT_EQUAL(a0->ref.idx, r.idx);
	const char *parked[] = { "a1", "a2", "b1", "b9" };
	for (size_t i = 0; i < 4; i++) {
		const struct book_want_info *w = info_of(v, n, parked[i]);
		CU_ASSERT_FATAL(w != NULL);
		CU_ASSERT_EQUAL(w->state, WANT_PARKED);
		struct book_position p = pos_of(&f, w->client_id[0] ? a : b, parked[i]);
		CU_ASSERT_EQUAL(w->position, p.ahead + 1);
	}
	CU_ASSERT_EQUAL(info_of(v, n, "b9")->position, 1);          /* priority first */
	CU_ASSERT_STRING_EQUAL(info_of(v, n, "b1")->client_id, ""); /* anonymous */
	CU_ASSERT_EQUAL(info_of(v, n, "b1")->handler, 1);
	fx_lock(&f);
	n = book_list_wants(f.b, v, 16, 2);                  /* two parked of the four */
	CU_ASSERT_EQUAL(book_list_wants(f.b, v, 2, 100), 2); /* the caller's bound */
	fx_unlock(&f);
	CU_ASSERT_EQUAL(n, 3);
	done(&f);
}

/* Two grants in turn on the one slot r holds, each to the want offered
 * (job ids "w<conn>.<n>" of conns c): r ends holding the second. */
static void grant_twice(struct fx *f, const struct book_ref *c, struct book_ref *r)
{
	for (int g = 0; g < 2; g++) {
		OK(fx_finish(f, *r, 10, 0));
		fx_pump(f);
		const struct fx_mail *m = fx_find(f, MAIL_OFFER, NULL);
		CU_ASSERT_FATAL(m != NULL);
		char took[BOOK_ID_MAX + 1];
		snprintf(took, sizeof took, "%s", m->m.job_id);
		OK(fx_take_job(f, c[atoi(took + 1)], took, r));
		fx_log_clear(f);
	}
}

/* The listing's positions come from one replay of the grant rule for all
 * the parked wants of a waitgroup: each equals what its own client's
 * QUERY says, over several priorities, two services of one waitgroup,
 * conns of different counts and stamps moved by grants. */
static void test_list_positions_batch(void)
{
	struct fx f;
	struct book_ref c[8], r;
	struct book_want_info v[128];
	char job[16];
	mk(&f, 1, 1);
	for (int i = 0; i < 8; i++)
		OK(fx_open(&f, (uint32_t)i % 4, NULL, 0, &c[i]));
	OK(fx_want(&f, c[0], "hold", 0, 0, 0));
	OK(fx_take_job(&f, c[0], "hold", &r));
	for (int i = 0; i < 60; i++) {
		int conn = (i * 5 + i / 7) % 8;
		snprintf(job, sizeof job, "w%d.%d", conn, i);
		OK(fx_want(&f, c[conn], job, (uint32_t)i % 2, (i * 7) % 3, (uint64_t)i + 1));
	}
	grant_twice(&f, c, &r); /* moves the stamps of the conns served */
	fx_lock(&f);
	size_t n = book_list_wants(f.b, v, 128, 100);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(n, 59); /* the running one and 58 parked */
	size_t parked = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i].state != WANT_PARKED)
			continue;
		parked++;
		struct book_position p = pos_of(&f, c[atoi(v[i].job_id + 1)], v[i].job_id);
		if (v[i].position != p.ahead + 1)
			printf("\n  %s: listed %u, query %u\n", v[i].job_id, v[i].position,
			       p.ahead + 1);
		CU_ASSERT_EQUAL(v[i].position, p.ahead + 1);
	}
	CU_ASSERT_EQUAL(parked, 58);
	done(&f);
}

/* The listing is the head of each waitgroup's line: with more parked
 * wants than listed (three priorities, two services of one waitgroup,
 * conns of uneven counts, stamps moved by grants), the wants listed are
 * those of positions 1..K in order, each position what its own client's
 * QUERY says; a shorter bound lists a prefix of the same line; a
 * waitgroup with fewer parked than the bound lists them all.  With nprio
 * priorities: 3 (the head within the first phases), 64 (past the phases
 * bk_query_head looks for one by one). */
static void head_of_line(int nprio)
{
	enum {
		NCONN = 12,
		NWANT = 480,
		K = 100
	};
	struct fx f;
	struct book_ref c[NCONN], r, r1;
	static struct book_want_info v[NWANT + 8], v7[NWANT + 8];
	char job[16];
	mk(&f, 1, 1);
	for (int i = 0; i < NCONN; i++)
		OK(fx_open(&f, (uint32_t)i % 4, NULL, 0, &c[i]));
	OK(fx_want(&f, c[0], "hold", 0, 0, 0));
	OK(fx_take_job(&f, c[0], "hold", &r));
	OK(fx_want(&f, c[1], "hold1", 2, 0, 1));
	OK(fx_take_job(&f, c[1], "hold1", &r1));
	uint32_t parked[2] = { 0, 0 };
	for (int i = 0; i < NWANT; i++) {
		int conn = i < NWANT / 2 ? (i * 7 + i / 11) % NCONN : i % 3; /* 0..2 heavier */
		uint32_t svc = i % 5 == 4 ? 2 : (uint32_t)(i / 3) % 2;
		snprintf(job, sizeof job, "w%d.%d", conn, i);
		OK(fx_want(&f, c[conn], job, svc, (i * 7) % nprio, (uint64_t)i + 2));
		parked[svc == 2]++;
	}
	fx_log_clear(&f);
	grant_twice(&f, c, &r); /* moves the stamps of the conns served */
	parked[0] -= 2;
	CU_ASSERT_FATAL(parked[0] > K && parked[1] < K);
	fx_lock(&f);
	size_t n = book_list_wants(f.b, v, NWANT + 8, K);
	size_t n7 = book_list_wants(f.b, v7, NWANT + 8, 7);
	fx_unlock(&f);
	uint32_t want_n[2] = { K, parked[1] }, seen[2] = { 0, 0 };
	for (size_t i = 0; i < n; i++) {
		if (v[i].state != WANT_PARKED)
			continue;
		uint32_t g = v[i].service == 2;
		seen[g]++;
		CU_ASSERT_EQUAL(v[i].position, seen[g]); /* 1, 2, ... in grant order */
		struct book_position p = pos_of(&f, c[atoi(v[i].job_id + 1)], v[i].job_id);
		CU_ASSERT_EQUAL(v[i].position, p.ahead + 1);
	}
	CU_ASSERT_EQUAL(seen[0], want_n[0]);
	CU_ASSERT_EQUAL(seen[1], want_n[1]);
	CU_ASSERT_EQUAL(n, 2 + want_n[0] + want_n[1]); /* the two running */
	/* the bound 7: the first 7 of each line, the same wants */
	size_t at = 0;
	for (size_t i = 0; i < n7; i++) {
		if (v7[i].state != WANT_PARKED || v7[i].service == 2)
			continue;
		while (at < n && (v[at].state != WANT_PARKED || v[at].service == 2))
			at++;
		CU_ASSERT_FATAL(at < n);
		CU_ASSERT_STRING_EQUAL(v7[i].job_id, v[at].job_id);
		CU_ASSERT_EQUAL(v7[i].position, v[at].position);
		at++;
	}
	CU_ASSERT_EQUAL(n7, 2 + 7 + 7);
	done(&f);
}

static void test_list_head_of_line(void)
{
	head_of_line(3);
	head_of_line(64);
}

/* Clients per handler: a client once on each handler where it has a conn
 * (its conns grouped by handler, as after reconnects), each anonymous conn
 * a client of its own; the same answer on every call. */
static void test_handler_clients(void)
{
	struct fx f;
	struct book_ref x[4], y, anon[2];
	uint32_t n[BOOK_MAX_HANDLERS];
	const uint32_t on[4] = { 0, 0, 1, 2 };
	mk(&f, 1, 1);
	for (int i = 0; i < 4; i++)
		OK(fx_open(&f, on[i], "x", 0, &x[i]));
	OK(fx_open(&f, 1, "y", 0, &y));
	OK(fx_open(&f, 1, NULL, 0, &anon[0]));
	OK(fx_open(&f, 1, NULL, 0, &anon[1]));
	for (int call = 0; call < 2; call++) {
		fx_lock(&f);
		book_handler_clients(f.b, n);
		fx_unlock(&f);
		CU_ASSERT_EQUAL(n[0], 1);
		CU_ASSERT_EQUAL(n[1], 4);
		CU_ASSERT_EQUAL(n[2], 1);
		CU_ASSERT_EQUAL(n[3], 0);
	}
	fx_close(&f, x[0], 0);
	fx_lock(&f);
	book_handler_clients(f.b, n);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(n[0], 1);
	fx_close(&f, x[1], 0);
	fx_lock(&f);
	book_handler_clients(f.b, n);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(n[0], 0);
	CU_ASSERT_EQUAL(n[1], 4);
	done(&f);
}

/* The failure ring keeps the last BOOK_FAILURES failed jobs, newest
 * first; successes stay out; a freed slot granted at once is a hand-over. */
static void test_failures_and_handovers(void)
{
	struct fx f;
	struct book_ref a, r;
	struct book_failure fl[BOOK_FAILURES + 4];
	struct book_status st;
	char job[16];
	mk(&f, 1, 1);
	OK(fx_open(&f, 0, "ca", 0, &a));
	for (int i = 0; i < BOOK_FAILURES + 3; i++) {
		snprintf(job, sizeof job, "f%d", i);
		OK(fx_want(&f, a, job, 0, 0, (uint64_t)i));
		OK(fx_take_job(&f, a, job, &r));
		OK(fx_finished(&f, r, i == 0 ? 0 : 3, 7, NULL));
		OK(fx_delivered(&f, r));
	}
	fx_lock(&f);
	size_t n = book_failures(f.b, fl, BOOK_FAILURES + 4);
	book_status(f.b, &st);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(n, BOOK_FAILURES);
	CU_ASSERT_STRING_EQUAL(fl[0].job_id, "f18");
	CU_ASSERT_STRING_EQUAL(fl[BOOK_FAILURES - 1].job_id, "f3");
	CU_ASSERT_STRING_EQUAL(fl[0].client_id, "ca");
	CU_ASSERT_EQUAL(fl[0].exit_code, 3);
	CU_ASSERT_EQUAL(fl[0].duration_ms, 7);
	CU_ASSERT_EQUAL(st.handovers, 0); /* nobody waited for those slots */
	/* a parked want takes the slot a finished job frees: one hand-over */
	OK(fx_want(&f, a, "h1", 0, 0, 100));
	OK(fx_take_job(&f, a, "h1", &r));
	OK(fx_want(&f, a, "h2", 0, 0, 101));
	OK(fx_finished(&f, r, 0, 5, NULL));
	fx_lock(&f);
	book_status(f.b, &st);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(st.handovers, 1);
	fx_pump(&f);
	CU_ASSERT(fx_find(&f, MAIL_OFFER, "h2") != NULL);
	done(&f);
}

/* The console's cancel: a running job gets its CANCEL mail once; a parked
 * one is refused, a stale ref is gone; handler starts are counted. */
static void test_cancel_ref_and_starts(void)
{
	struct fx f;
	struct book_ref a, r, stale = { 0, 0 };
	struct book_status st;
	mk(&f, 1, 1);
	OK(fx_open(&f, 0, "ca", 0, &a));
	OK(fx_want(&f, a, "run", 0, 0, 0));
	OK(fx_take_job(&f, a, "run", &r));
	OK(fx_want(&f, a, "park", 0, 0, 1));
	struct book_want_info v[4];
	fx_lock(&f);
	size_t n = book_list_wants(f.b, v, 4, 10);
	const struct book_want_info *p = info_of(v, n, "park");
	CU_ASSERT_FATAL(p != NULL);
	RC(book_cancel_ref(f.b, p->ref), BOOK_E_BAD_STATE);
	stale.idx = r.idx;
	stale.gen = r.gen + 1;
	RC(book_cancel_ref(f.b, stale), BOOK_E_STALE);
	OK(book_cancel_ref(f.b, r));
	OK(book_cancel_ref(f.b, r)); /* asked already: no second mail */
	book_handler_started(f.b, 1, 4242);
	book_handler_started(f.b, 1, 4243);
	book_status(f.b, &st);
	fx_unlock(&f);
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_CANCEL, "run"), 1);
	CU_ASSERT_EQUAL(mail_handler(&f, MAIL_CANCEL, "run"), 0);
	CU_ASSERT_EQUAL(st.handler_starts[1], 2);
	CU_ASSERT_EQUAL(st.handler_pids[1], 4243);
	done(&f);
}

static void test_unwant_states(void)
{
	struct fx f;
	struct book_ref a, b, r;
	struct book_wg_status st;
	mk(&f, 1, 1);
	OK(fx_open(&f, 0, NULL, 0, &a));
	OK(fx_open(&f, 1, NULL, 0, &b));
	OK(fx_want(&f, a, "o", 0, 0, 0)); /* offered */
	OK(fx_want(&f, a, "p", 0, 0, 1)); /* parked */
	OK(fx_want(&f, b, "q", 0, 0, 2)); /* parked */
	OK(fx_unwant(&f, a, "p"));
	RC(fx_unwant(&f, a, "p"), BOOK_E_UNKNOWN_JOB);
	RC(fx_unwant(&f, b, "o"), BOOK_E_UNKNOWN_JOB); /* other client's job */
	RC(fx_unwant(&f, a, "nope"), BOOK_E_UNKNOWN_JOB);
	fx_wg(&f, 0, &st);
	CU_ASSERT_EQUAL(st.waiting, 1);
	CU_ASSERT_EQUAL(st.offered, 1);
	uint64_t tok = fx_token(&f, "o");
	OK(fx_unwant(&f, a, "o")); /* frees the slot: q next */
	SEQ_EQ(offers(&f, 0), "o,q");
	RC(fx_accept(&f, a, "o", tok, 0, &r), BOOK_E_UNKNOWN_JOB);
	OK(fx_take_job(&f, b, "q", &r));
	RC(fx_unwant(&f, b, "q"), BOOK_E_BAD_STATE);
	fx_wg(&f, 0, &st);
	CU_ASSERT_EQUAL(st.running, 1);
	CU_ASSERT_EQUAL(st.waiting, 0);
	CU_ASSERT_EQUAL(st.offered, 0);
	RC(fx_unwant(&f, b, ""), BOOK_E_INVALID);
	done(&f);
}

static void test_decline(void)
{
	struct fx f;
	struct book_ref a, b, r;
	struct book_position p;
	mk(&f, 1, 1);
	OK(fx_open(&f, 0, NULL, 0, &a));
	OK(fx_open(&f, 1, NULL, 0, &b));
	OK(fx_want(&f, a, "o", 0, 0, 0));
	OK(fx_want(&f, b, "q", 0, 0, 1));
	uint64_t tok = fx_token(&f, "o");
	CU_ASSERT(tok != 0);
	RC(fx_decline(&f, a, "o", tok ^ 1), BOOK_E_BAD_TOKEN);
	RC(fx_decline(&f, a, "o", 0), BOOK_E_BAD_TOKEN);
	RC(fx_decline(&f, b, "q", tok), BOOK_E_BAD_STATE); /* parked: not offered */
	CU_ASSERT_EQUAL(pos_of(&f, a, "o").state, WANT_OFFERED);
	OK(fx_decline(&f, a, "o", tok));
	RC(fx_query(&f, a, "o", &p), BOOK_E_UNKNOWN_JOB); /* the want is gone */
	RC(fx_decline(&f, a, "o", tok), BOOK_E_UNKNOWN_JOB);
	SEQ_EQ(offers(&f, 0), "o,q");
	uint64_t tq = fx_token(&f, "q");
	OK(fx_accept(&f, b, "q", tq, 1, &r));
	RC(fx_decline(&f, b, "q", tq), BOOK_E_BAD_STATE);       /* running */
	RC(fx_accept(&f, b, "q", tq, 1, &r), BOOK_E_BAD_STATE); /* already running */
	done(&f);
}

static void test_accept_states_and_stale_token(void)
{
	struct fx f;
	struct book_ref a, b, r;
	mk(&f, 1, 1);
	OK(fx_open(&f, 0, NULL, 0, &a));
	OK(fx_open(&f, 1, NULL, 0, &b));
	OK(fx_want(&f, a, "o", 0, 0, 0));
	OK(fx_want(&f, a, "p", 0, 0, 0));
	RC(fx_accept(&f, a, "p", 1, 0, &r), BOOK_E_BAD_STATE); /* not offered */
	RC(fx_accept(&f, a, "o", fx_token(&f, "o"), 99, &r), BOOK_E_INVALID);
	uint64_t old = fx_token(&f, "o");
	CU_ASSERT_EQUAL(fx_expire(&f, 999), 0);
	CU_ASSERT_EQUAL(fx_expire(&f, 1000), 1); /* deadline <= now */
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_OFFER_EXPIRED, "o"), 1);
	CU_ASSERT_EQUAL(mail_handler(&f, MAIL_OFFER_EXPIRED, "o"), 0);
	RC(fx_accept(&f, a, "o", old, 0, &r), BOOK_E_UNKNOWN_JOB); /* the want is gone */
	/* p got the slot; o is wanted again and offered with a new token */
	run_finish(&f, a, "p");
	OK(fx_want(&f, a, "o", 0, 0, 1500));
	uint64_t fresh = fx_token(&f, "o");
	CU_ASSERT(fresh != old && fresh != 0);
	RC(fx_accept(&f, a, "o", old, 0, &r), BOOK_E_BAD_TOKEN);
	OK(fx_accept(&f, a, "o", fresh, 0, &r));
	done(&f);
}

static void test_expiry_regrants(void)
{
	struct fx f;
	struct book_ref a, b, c;
	mk(&f, 2, 1);
	OK(fx_open(&f, 0, NULL, 0, &a));
	OK(fx_open(&f, 1, NULL, 0, &b));
	OK(fx_open(&f, 2, NULL, 0, &c));
	OK(fx_want(&f, a, "a1", 0, 0, 0));   /* deadline 1000 */
	OK(fx_want(&f, b, "b1", 0, 0, 500)); /* deadline 1500 */
	OK(fx_want(&f, c, "c1", 0, 0, 600));
	OK(fx_want(&f, c, "c2", 0, 0, 600));
	fx_lock(&f);
	CU_ASSERT_EQUAL(book_next_deadline(f.b), 1000);
	fx_unlock(&f);
	fx_pump(&f);
	size_t from = f.nlog;
	CU_ASSERT_EQUAL(fx_expire(&f, 1200), 1);
	SEQ_EQ(offers(&f, from), "c1"); /* deadline 2200 */
	fx_lock(&f);
	CU_ASSERT_EQUAL(book_next_deadline(f.b), 1500);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(fx_expire(&f, 1500), 1);
	SEQ_EQ(offers(&f, from), "c1,c2");
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_OFFER_EXPIRED, "a1"), 1);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_OFFER_EXPIRED, "b1"), 1);
	CU_ASSERT_EQUAL(mail_handler(&f, MAIL_OFFER_EXPIRED, "b1"), 1);
	CU_ASSERT_EQUAL(fx_expire(&f, 2199), 0);
	CU_ASSERT_EQUAL(fx_expire(&f, 5000), 2);
	struct book_wg_status st;
	fx_wg(&f, 0, &st);
	CU_ASSERT_EQUAL(st.offered, 0);
	CU_ASSERT_EQUAL(st.waiting, 0);
	fx_lock(&f);
	CU_ASSERT_EQUAL(book_next_deadline(f.b), UINT64_MAX);
	fx_unlock(&f);
	done(&f);
}

static void test_expired_mail_in_place_and_reuse(void)
{
	struct fx f;
	struct book_limits l;
	struct book_ref a;
	fx_limits(&l);
	l.max_wants = 2;
	mk_lim(&f, &l, 1, 1);
	OK(fx_open(&f, 0, NULL, 0, &a));
	/* an OFFER not taken before its expiry turns into the OFFER_EXPIRED */
	OK(fx_want(&f, a, "o1", 0, 0, 0));
	CU_ASSERT_EQUAL(fx_expire(&f, 1000), 1);
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_OFFER, "o1"), 0);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_OFFER_EXPIRED, "o1"), 1);
	/* table full of live wants + undelivered OFFER_EXPIRED: the oldest
	 * such mail gives up its record */
	OK(fx_want(&f, a, "o2", 0, 0, 2000)); /* offered */
	OK(fx_want(&f, a, "p2", 0, 0, 2000)); /* parked: 2 live, table full */
	RC(fx_want(&f, a, "p3", 0, 0, 2000), BOOK_E_LIMIT_WANTS);
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_expire(&f, 3000), 1); /* o2 expired, p2 offered */
	OK(fx_want(&f, a, "p3", 0, 0, 3000));    /* takes o2's record */
	size_t from = f.nlog;
	fx_pump(&f);
	SEQ_EQ(offers(&f, from), "p2");
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_OFFER_EXPIRED, "o2"), 0);
	RC(fx_want(&f, a, "p4", 0, 0, 3000), BOOK_E_LIMIT_WANTS);
	done(&f);
}

/* The hash indexes at their fullest: a table that is not a power of two
 * (slots for 4/3 of the entries), every want of its own node (distinct
 * priorities: the node index full too), ids found and duplicates refused
 * at every load, then emptied in a scattered order and filled again, with
 * the book consistent throughout. */
static void test_index_full(void)
{
	struct fx f;
	struct book_limits l;
	struct book_ref a;
	char id[16];
	const uint32_t n = 97;
	fx_limits(&l);
	l.max_wants = n;
	l.max_wants_per_connection = n + 1; /* the book is the limit */
	mk_lim(&f, &l, 0, 1);
	OK(fx_open(&f, 0, NULL, 0, &a));
	for (int round = 0; round < 2; round++) {
		for (uint32_t i = 0; i < n; i++) {
			snprintf(id, sizeof id, "j%u", i);
			OK(fx_want(&f, a, id, 0, (int32_t)i - 50, 0));
			RC(fx_want(&f, a, id, 0, 0, 0), BOOK_E_DUPLICATE);
		}
		RC(fx_want(&f, a, "one-more", 0, 0, 0), BOOK_E_LIMIT_WANTS);
		checked(&f);
		for (uint32_t i = 0; i < n; i++) {
			snprintf(id, sizeof id, "j%u", (i * 37) % n); /* 37 and 97 are coprime */
			OK(fx_unwant(&f, a, id));
			RC(fx_unwant(&f, a, id), BOOK_E_UNKNOWN_JOB);
			if (i % 10 == 0)
				checked(&f);
		}
		checked(&f);
	}
	done(&f);
}

static void test_limits(void)
{
	struct fx f;
	struct book_limits l;
	struct book_ref a, b, c, r;
	fx_limits(&l);
	l.max_wants_per_connection = 3;
	l.max_wants = 5;
	l.max_connections = 2;
	mk_lim(&f, &l, 1, 1);
	OK(fx_open(&f, 0, NULL, 0, &a));
	OK(fx_open(&f, 1, "named", 0, &b));
	RC(fx_open(&f, 2, NULL, 0, &c), BOOK_E_LIMIT_CONNS);
	RC(fx_open(&f, 2, "named", 0, &c), BOOK_E_LIMIT_CONNS);
	OK(fx_want(&f, a, "a1", 0, 0, 0)); /* offered */
	OK(fx_want(&f, a, "a2", 0, 0, 0));
	OK(fx_want(&f, a, "a3", 0, 0, 0));
	RC(fx_want(&f, a, "a4", 0, 0, 0), BOOK_E_LIMIT_CONN);
	/* a running job does not count against the connection */
	OK(fx_take_job(&f, a, "a1", &r));
	OK(fx_want(&f, a, "a4", 0, 0, 0));
	OK(fx_want(&f, b, "b1", 0, 0, 0));
	RC(fx_want(&f, b, "b2", 0, 0, 0), BOOK_E_LIMIT_WANTS); /* 5 in the book */
	OK(fx_finish(&f, r, 5, 0));                            /* a2 offered */
	OK(fx_want(&f, b, "b2", 0, 0, 0));
	RC(fx_want(&f, b, "b3", 2, 0, 0), BOOK_E_LIMIT_WANTS);
	/* unknown and disabled services, bad ids */
	RC(fx_want(&f, b, "z", 4, 0, 0), BOOK_E_UNKNOWN_SERVICE);
	RC(fx_want(&f, b, "z", 3, 0, 0), BOOK_E_DISABLED);
	RC(fx_want(&f, b, "", 0, 0, 0), BOOK_E_INVALID);
	char longid[BOOK_ID_MAX + 2];
	memset(longid, 'x', sizeof longid - 1);
	longid[sizeof longid - 1] = '\0';
	RC(fx_want(&f, b, longid, 0, 0, 0), BOOK_E_INVALID);
	longid[BOOK_ID_MAX] = '\0';
	fx_close(&f, a, 0);
	OK(fx_want(&f, b, longid, 0, 0, 0)); /* exactly 64 bytes */
	OK(fx_open(&f, 2, NULL, 0, &c));
	RC(fx_open(&f, 9, NULL, 0, &c), BOOK_E_INVALID);
	done(&f);
}

static void test_duplicates(void)
{
	struct fx f;
	struct book_ref a, a2, b, r;
	mk(&f, 1, 1);
	OK(fx_open(&f, 0, "client-A", 0, &a));
	OK(fx_open(&f, 1, "client-A", 0, &a2)); /* same client, second conn */
	OK(fx_open(&f, 1, NULL, 0, &b));
	OK(fx_want(&f, a, "j", 0, 0, 0));
	RC(fx_want(&f, a, "j", 0, 0, 0), BOOK_E_DUPLICATE);
	RC(fx_want(&f, a, "j", 2, 7, 0), BOOK_E_DUPLICATE);
	RC(fx_want(&f, a2, "j", 0, 0, 0), BOOK_E_DUPLICATE); /* job_ids are per client */
	OK(fx_want(&f, b, "j", 0, 0, 0));                    /* another client */
	OK(fx_want(&f, a2, "k", 0, 0, 0));
	/* parked/offered wants belong to their conn */
	RC(fx_unwant(&f, a2, "j"), BOOK_E_UNKNOWN_JOB);
	struct book_position p;
	RC(fx_query(&f, a, "k", &p), BOOK_E_UNKNOWN_JOB);
	uint64_t tok = fx_token(&f, "j");
	OK(fx_accept(&f, a, "j", tok, 0, &r));
	RC(fx_want(&f, a2, "j", 0, 0, 0), BOOK_E_DUPLICATE); /* running */
	/* a running job belongs to the client: every conn of it sees it */
	CU_ASSERT_EQUAL(pos_of(&f, a2, "j").state, WANT_RUNNING);
	RC(fx_unwant(&f, a2, "j"), BOOK_E_BAD_STATE);
	OK(fx_finish(&f, r, 1, 0));
	OK(fx_want(&f, a2, "j", 0, 0, 0)); /* forgotten */
	done(&f);
}

static void test_conn_close(void)
{
	struct fx f;
	struct book_ref a, b, r;
	struct book_wg_status st;
	mk(&f, 2, 1);
	OK(fx_open(&f, 0, NULL, 0, &a));
	OK(fx_open(&f, 1, NULL, 0, &b));
	OK(fx_want(&f, a, "a1", 0, 0, 0)); /* offered */
	OK(fx_want(&f, a, "a2", 0, 0, 0)); /* offered */
	OK(fx_want(&f, a, "a3", 0, 0, 0));
	OK(fx_want(&f, a, "a4", 2, 0, 0)); /* offered, wg1 */
	OK(fx_want(&f, b, "b1", 0, 0, 0));
	OK(fx_want(&f, b, "b2", 0, 0, 0));
	OK(fx_want(&f, b, "b3", 2, 0, 0));
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_expire(&f, 5000), 3); /* a1 a2 a4 expire */
	/* now b1, a3, b3 were offered: close a with a3 offered and the
	 * OFFER_EXPIRED mails still pending */
	fx_lock(&f);
	struct book_mail m[8];
	CU_ASSERT_EQUAL(book_mail_take(f.b, 1, m, 8), 2); /* b1, b3 */
	fx_unlock(&f);
	fx_log_clear(&f);
	fx_close(&f, a, 6000);
	CU_ASSERT_EQUAL(f.mask & 1, 0); /* nothing left for a's handler */
	SEQ_EQ(offers(&f, 0), "b2");
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_OFFER_EXPIRED, NULL), 0);
	fx_wg(&f, 0, &st);
	CU_ASSERT_EQUAL(st.offered, 2);
	CU_ASSERT_EQUAL(st.waiting, 0);
	fx_wg(&f, 1, &st);
	CU_ASSERT_EQUAL(st.offered, 1);
	RC(fx_want(&f, a, "x", 0, 0, 0), BOOK_E_STALE);
	for (int i = 0; i < 2; i++)
		if (strcmp(m[i].job_id, "b3") == 0)
			OK(fx_accept(&f, b, "b3", m[i].token, 1, &r));
	fx_wg(&f, 1, &st);
	CU_ASSERT_EQUAL(st.running, 1);
	done(&f);
}

static void test_purge_handler(void)
{
	struct fx f;
	struct book_ref a, c, n, w, ra, rc1, rn;
	int32_t pg[8];
	mk(&f, 4, 1);
	OK(fx_open(&f, 0, NULL, 0, &a));
	OK(fx_open(&f, 1, NULL, 0, &c));
	OK(fx_open(&f, 1, "N", 0, &n));
	OK(fx_open(&f, 2, NULL, 0, &w));
	OK(fx_want(&f, a, "a1", 0, 0, 0));
	OK(fx_want(&f, c, "c1", 0, 0, 0));
	OK(fx_want(&f, n, "n1", 0, 0, 0));
	OK(fx_want(&f, c, "c2", 0, 0, 0)); /* offered (4th slot) */
	OK(fx_want(&f, c, "c3", 0, 0, 0)); /* parked */
	OK(fx_want(&f, w, "w1", 0, 0, 0)); /* parked */
	fx_pump(&f);
	OK(fx_accept(&f, a, "a1", fx_token(&f, "a1"), 1, &ra)); /* runs on handler 1 */
	OK(fx_accept(&f, c, "c1", fx_token(&f, "c1"), 1, &rc1));
	OK(fx_accept(&f, n, "n1", fx_token(&f, "n1"), 2, &rn)); /* runs on handler 2 */
	fx_lock(&f);
	book_job_set_pgid(f.b, ra, 777);
	book_job_set_pgid(f.b, rc1, 888);
	book_job_set_pgid(f.b, rn, 999);
	book_handler_started(f.b, 1, 4242);
	fx_unlock(&f);
	OK(fx_want(&f, c, "c4", 0, 0, 0));
	/* a new client: HELLO for handler 1 too, which must vanish with it */
	struct book_ref z;
	OK(fx_open(&f, 3, NULL, 0, &z));
	CU_ASSERT(f.mask & 2);
	fx_log_clear(&f);
	size_t np = fx_purge(&f, 1, pg, 8);
	CU_ASSERT_EQUAL(np, 2);
	CU_ASSERT((pg[0] == 777 && pg[1] == 888) || (pg[0] == 888 && pg[1] == 777));
	CU_ASSERT_EQUAL(f.mask & 2, 0);
	fx_pump(&f);
	for (size_t i = 0; i < f.nlog; i++)
		CU_ASSERT(f.log[i].handler != 1);
	/* a1 and c1 lost: a1's client (conn on h0) is told, c1's (anonymous,
	 * its conn died with h1) is gone; c2 c3 c4 gone; w1 got a slot; n1
	 * keeps running */
	SEQ_EQ(offers(&f, 0), "w1");
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 1);
	CU_ASSERT_EQUAL(dones(&f, "a1", 0), 1);
	is_lost(&f, ra);
	RC(fx_finish(&f, ra, 1, 0), BOOK_E_BAD_STATE); /* ended already */
	struct book_outcome lo;
	size_t ll;
	RC(fx_done_read(&f, rc1, &lo, NULL, 0, &ll), BOOK_E_STALE);
	struct book_wg_status st;
	fx_wg(&f, 0, &st);
	CU_ASSERT_EQUAL(st.running, 1);
	CU_ASSERT_EQUAL(st.offered, 1);
	CU_ASSERT_EQUAL(st.waiting, 0);
	/* N's last conn was on handler 1: its job run elsewhere is in grace */
	fx_lock(&f);
	RC(book_job_owner(f.b, rn, NULL, NULL), BOOK_E_STALE);
	struct book_status bs;
	book_status(f.b, &bs);
	CU_ASSERT_EQUAL(bs.handler_pids[1], 0);
	CU_ASSERT_EQUAL(bs.connections, 3);
	fx_unlock(&f);
	struct book_ref n2, oc;
	uint32_t oh;
	OK(fx_open(&f, 3, "N", 100, &n2));
	fx_lock(&f);
	OK(book_job_owner(f.b, rn, &oc, &oh));
	fx_unlock(&f);
	CU_ASSERT_EQUAL(oc.idx, n2.idx);
	CU_ASSERT_EQUAL(oh, 3);
	RC(fx_want(&f, c, "c9", 0, 0, 0), BOOK_E_STALE);
	CU_ASSERT_EQUAL(fx_purge(&f, 1, pg, 8), 0); /* idempotent */
	OK(fx_finish(&f, rn, 1, 0));
	OK(fx_delivered(&f, ra));
	done(&f);
}

static void test_resume_grace(void)
{
	struct fx f;
	struct book_ref n, n2, n3, r, oc;
	uint32_t oh;
	mk(&f, 2, 1);
	OK(fx_open(&f, 0, "N", 0, &n));
	OK(fx_want(&f, n, "j", 0, 0, 0));
	OK(fx_take_job(&f, n, "j", &r));
	fx_close(&f, n, 100); /* grace until 5100 */
	fx_lock(&f);
	RC(book_job_owner(f.b, r, NULL, NULL), BOOK_E_STALE);
	CU_ASSERT_EQUAL(book_next_deadline(f.b), 5100);
	struct book_status st;
	book_status(f.b, &st);
	CU_ASSERT_EQUAL(st.clients, 0);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(fx_expire(&f, 5099), 0);
	OK(fx_open(&f, 2, "N", 5099, &n2)); /* resume: re-adopts j */
	fx_lock(&f);
	OK(book_job_owner(f.b, r, &oc, &oh));
	CU_ASSERT_EQUAL(book_next_deadline(f.b), UINT64_MAX);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(oc.idx, n2.idx);
	CU_ASSERT_EQUAL(oc.gen, n2.gen);
	CU_ASSERT_EQUAL(oh, 2);
	CU_ASSERT_EQUAL(pos_of(&f, n2, "j").state, WANT_RUNNING);
	RC(fx_want(&f, n2, "j", 0, 0, 5099), BOOK_E_DUPLICATE);
	/* more conns of the client: closing the owner hands the job to the
	 * newest of the others */
	struct book_ref n4;
	OK(fx_open(&f, 3, "N", 5099, &n3));
	OK(fx_open(&f, 1, "N", 5099, &n4));
	fx_close(&f, n2, 5099);
	fx_lock(&f);
	OK(book_job_owner(f.b, r, &oc, &oh));
	fx_unlock(&f);
	CU_ASSERT_EQUAL(oc.idx, n4.idx);
	CU_ASSERT_EQUAL(oh, 1);
	fx_close(&f, n4, 5099);
	fx_lock(&f);
	OK(book_job_owner(f.b, r, &oc, &oh));
	fx_unlock(&f);
	CU_ASSERT_EQUAL(oc.idx, n3.idx);
	CU_ASSERT_EQUAL(oh, 3);
	fx_close(&f, n3, 6000); /* grace until 11000 */
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_CANCEL, NULL), 0);
	CU_ASSERT_EQUAL(fx_expire(&f, 10999), 0);
	CU_ASSERT_EQUAL(fx_expire(&f, 11000), 1);
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_CANCEL, "j"), 1);
	CU_ASSERT_EQUAL(mail_handler(&f, MAIL_CANCEL, "j"), 0); /* its runner */
	CU_ASSERT_EQUAL(mail_want_idx(&f, MAIL_CANCEL, "j"), r.idx);
	fx_lock(&f);
	RC(book_job_owner(f.b, r, NULL, NULL), BOOK_E_STALE);
	fx_unlock(&f);
	/* the job holds its slot until it really ends; the name is free */
	struct book_wg_status ws;
	fx_wg(&f, 0, &ws);
	CU_ASSERT_EQUAL(ws.running, 1);
	OK(fx_open(&f, 0, "N", 12000, &n));
	struct book_position p;
	RC(fx_query(&f, n, "j", &p), BOOK_E_UNKNOWN_JOB);
	OK(fx_want(&f, n, "j", 0, 0, 12000));
	OK(fx_finish(&f, r, 1, 1));
	fx_wg(&f, 0, &ws);
	CU_ASSERT_EQUAL(ws.running, 0);
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_CANCEL, NULL), 1);
	done(&f);
}

static void test_grace_ends_with_its_jobs(void)
{
	struct fx f;
	struct book_ref n, r1, r2;
	struct book_status st;
	mk(&f, 2, 1);
	OK(fx_open(&f, 0, "N", 0, &n));
	OK(fx_want(&f, n, "j1", 0, 0, 0));
	OK(fx_want(&f, n, "j2", 0, 0, 0));
	OK(fx_take_job(&f, n, "j1", &r1));
	OK(fx_take_job(&f, n, "j2", &r2));
	fx_close(&f, n, 10);
	OK(fx_finish(&f, r1, 1, 0));
	fx_lock(&f);
	CU_ASSERT_EQUAL(book_next_deadline(f.b), 5010); /* j2 still kept */
	fx_unlock(&f);
	OK(fx_finish(&f, r2, 1, 0));
	fx_lock(&f);
	CU_ASSERT_EQUAL(book_next_deadline(f.b), UINT64_MAX); /* nothing to keep */
	book_status(f.b, &st);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(st.wants, 0);
	CU_ASSERT_EQUAL(fx_expire(&f, 100000), 0);
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_CANCEL, NULL), 0);
	done(&f);
}

static void test_anonymous_close_cancels(void)
{
	struct fx f;
	struct book_ref a, n, ra, rn;
	mk(&f, 2, 1);
	OK(fx_open(&f, 0, NULL, 0, &a));
	OK(fx_open(&f, 0, "N", 0, &n));
	OK(fx_want(&f, a, "a", 0, 0, 0));
	OK(fx_want(&f, n, "b", 0, 0, 0));
	OK(fx_accept(&f, a, "a", fx_token(&f, "a"), 2, &ra));
	OK(fx_accept(&f, n, "b", fx_token(&f, "b"), 3, &rn));
	fx_close(&f, a, 10);
	fx_close(&f, n, 10);
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_CANCEL, "a"), 1);
	CU_ASSERT_EQUAL(mail_handler(&f, MAIL_CANCEL, "a"), 2);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_CANCEL, "b"), 0); /* named: grace */
	/* finishing before the CANCEL was taken: the mail is dropped */
	struct book_ref n2;
	OK(fx_open(&f, 1, "N", 20, &n2));
	fx_close(&f, n2, 30);
	CU_ASSERT_EQUAL(fx_expire(&f, 10000), 1);
	OK(fx_finish(&f, rn, 5, 0));
	fx_log_clear(&f);
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_CANCEL, NULL), 0);
	OK(fx_finish(&f, ra, 5, 0));
	done(&f);
}

static void test_query_position(void)
{
	struct fx f;
	struct book_ref a, b, c, x;
	mk(&f, 1, 3);
	OK(fx_open(&f, 0, NULL, 0, &x));
	OK(fx_open(&f, 0, NULL, 0, &a));
	OK(fx_open(&f, 1, NULL, 0, &b));
	OK(fx_open(&f, 2, NULL, 0, &c));
	OK(fx_want(&f, x, "x", 0, 0, 0));
	OK(fx_want(&f, a, "a1", 0, 0, 0));
	OK(fx_want(&f, a, "a2", 1, 0, 0));
	OK(fx_want(&f, a, "a3", 0, 0, 0));
	OK(fx_want(&f, b, "b1", 0, 0, 0));
	OK(fx_want(&f, b, "b2", 1, 5, 0));
	OK(fx_want(&f, c, "c1", 0, 0, 0));
	OK(fx_want(&f, c, "other-wg", 2, 9, 0));
	/* b2 first (priority); then turns: a and c never served (a older),
	 * b served by b2: a1 c1 b1, then a2 a3 */
	const char *order[] = { "b2", "a1", "c1", "b1", "a2", "a3" };
	struct book_ref conn[] = { b, a, c, b, a, a };
	for (unsigned i = 0; i < 6; i++) {
		struct book_position p = pos_of(&f, conn[i], order[i]);
		CU_ASSERT_EQUAL(p.state, WANT_PARKED);
		CU_ASSERT_EQUAL(p.ahead, i);
		CU_ASSERT_EQUAL(p.running, 1);
		CU_ASSERT_EQUAL(p.capacity, 1);
	}
	struct book_position p = pos_of(&f, x, "x");
	CU_ASSERT_EQUAL(p.state, WANT_OFFERED);
	CU_ASSERT_EQUAL(p.ahead, 0);
	p = pos_of(&f, c, "other-wg");
	CU_ASSERT_EQUAL(p.state, WANT_OFFERED);
	CU_ASSERT_EQUAL(p.capacity, 3);
	CU_ASSERT_EQUAL(p.service, 2);
	/* and the grants really go that way */
	fx_pump(&f);
	size_t from = f.nlog;
	run_finish(&f, x, "x");
	for (unsigned i = 0; i < 5; i++)
		run_finish(&f, conn[i], order[i]);
	SEQ_EQ(offers(&f, from), "b2,a1,c1,b1,a2,a3");
	p = pos_of(&f, a, "a3");
	CU_ASSERT_EQUAL(p.state, WANT_OFFERED);
	done(&f);
}

/* book_eta of the want job of conn c over `usable` slots. */
static int64_t eta_of(struct fx *f, struct book_ref c, const char *job, uint32_t usable)
{
	struct book_position p = pos_of(f, c, job);
	fx_lock(f);
	int64_t eta = book_eta(f->b, &p, usable);
	fx_unlock(f);
	return eta;
}

/* Runs job of service svc on conn c to its end after ms (a sample of
 * the service's mean). */
static void sample(struct fx *f, struct book_ref c, const char *job, uint32_t svc, uint64_t ms)
{
	struct book_ref r;
	OK(fx_want(f, c, job, svc, 0, 1));
	fx_pump(f);
	OK(fx_take_job(f, c, job, &r));
	OK(fx_finish(f, r, ms, 0));
}

/* The estimate from what holds the slots (book.h, book_eta): three slots
 * held by a job of service 1 (mean 10 s) and one of service 0 (mean 1 s),
 * both started at T, and an offer of service 0; the parked wants of
 * service 0 take the slots as they free, every mean after. */
static void test_eta_from_holders(void)
{
	struct fx f;
	struct book_ref a, r;
	const uint64_t T = 100000;
	const char *w[] = { "w1", "w2", "w3", "w4" };
	struct book_limits l;
	fx_limits(&l);
	l.offer_timeout_ms = 5000; /* C stays offered throughout */
	mk_lim(&f, &l, 3, 1);
	OK(fx_open(&f, 0, NULL, 0, &a));
	sample(&f, a, "m1", 1, 10000);
	sample(&f, a, "m0", 0, 1000);
	OK(fx_want(&f, a, "A", 1, 0, T));
	OK(fx_want(&f, a, "B", 0, 0, T));
	OK(fx_want(&f, a, "C", 0, 0, T));
	fx_pump(&f);
	OK(fx_take_job(&f, a, "A", &r));
	OK(fx_take_job(&f, a, "B", &r));
	fx_expire(&f, T + 400); /* A has 9600 ms left, B 600, C (offered) 1000 */
	for (int i = 0; i < 4; i++)
		OK(fx_want(&f, a, w[i], 0, 0, T + 400));
	CU_ASSERT_EQUAL(pos_of(&f, a, "w4").state, WANT_PARKED);
	CU_ASSERT_EQUAL(pos_of(&f, a, "w4").ahead, 3);
	/* frees at 600, 1000, then 1600, 2000 (each slot again after 1000) */
	static const int64_t all3[] = { 600, 1000, 1600, 2000 };
	/* two usable: the latest-freeing, 1000 and 9600 */
	static const int64_t two[] = { 1000, 2000, 3000, 4000 };
	for (int i = 0; i < 4; i++) {
		CU_ASSERT_EQUAL(eta_of(&f, a, w[i], 3), all3[i]);
		CU_ASSERT_EQUAL(eta_of(&f, a, w[i], 2), two[i]);
	}
	CU_ASSERT_EQUAL(eta_of(&f, a, "w1", 1), 9600);
	CU_ASSERT_EQUAL(eta_of(&f, a, "w2", 1), 10600);
	CU_ASSERT_EQUAL(eta_of(&f, a, "w1", 0), -1);
	CU_ASSERT_EQUAL(eta_of(&f, a, "C", 3), -1); /* not parked */
	fx_expire(&f, T + 700);
	CU_ASSERT_EQUAL(eta_of(&f, a, "w1", 3), 300);
	/* B ran past its mean: its end is unknown, a slot that never frees */
	fx_expire(&f, T + 1200);
	CU_ASSERT_EQUAL(eta_of(&f, a, "w1", 3), 1000);
	CU_ASSERT_EQUAL(eta_of(&f, a, "w2", 3), 2000);
	CU_ASSERT_EQUAL(eta_of(&f, a, "w1", 1), -1);
	/* wg1: its only slot offered to a service with no mean yet */
	OK(fx_want(&f, a, "x", 2, 0, T + 1200));
	OK(fx_want(&f, a, "y", 2, 0, T + 1200));
	CU_ASSERT_EQUAL(pos_of(&f, a, "y").state, WANT_PARKED);
	CU_ASSERT_EQUAL(eta_of(&f, a, "y", 1), -1);
	done(&f);
}

static void test_mail_and_mask(void)
{
	struct fx f;
	struct book_ref a, b, c, d;
	struct book_mail m[8];
	mk(&f, 1, 1);
	OK(fx_open(&f, 0, NULL, 0, &a));
	CU_ASSERT_EQUAL(f.mask, 1); /* HELLO: 1 client now */
	OK(fx_open(&f, 2, NULL, 0, &b));
	CU_ASSERT_EQUAL(f.mask, 5); /* HELLO to handlers 0 and 2 */
	OK(fx_open(&f, 2, "N", 0, &c));
	OK(fx_open(&f, 3, "N", 0, &d)); /* same client: no HELLO */
	CU_ASSERT_EQUAL(f.mask, 0);
	OK(fx_want(&f, b, "b1", 0, 0, 0));
	CU_ASSERT_EQUAL(f.mask, 4); /* OFFER to handler 2 only */
	OK(fx_want(&f, a, "a1", 0, 0, 0));
	CU_ASSERT_EQUAL(f.mask, 0); /* parked: no mail */
	fx_lock(&f);
	CU_ASSERT_EQUAL(book_mail_take(f.b, 2, m, 1), 1);
	CU_ASSERT_EQUAL(m[0].kind, MAIL_HELLO); /* HELLO first, coalesced */
	CU_ASSERT_EQUAL(book_mail_take(f.b, 2, m, 8), 1);
	CU_ASSERT_EQUAL(m[0].kind, MAIL_OFFER);
	CU_ASSERT_STRING_EQUAL(m[0].job_id, "b1");
	CU_ASSERT_EQUAL(m[0].conn.idx, b.idx);
	CU_ASSERT_EQUAL(m[0].conn.gen, b.gen);
	CU_ASSERT(m[0].token != 0);
	CU_ASSERT_EQUAL(book_mail_take(f.b, 2, m, 8), 0);
	CU_ASSERT_EQUAL(book_mail_take(f.b, 0, m, 8), 1);
	CU_ASSERT_EQUAL(m[0].kind, MAIL_HELLO);
	CU_ASSERT_EQUAL(book_mail_take(f.b, 3, m, 8), 0);
	CU_ASSERT_EQUAL(book_mail_take(f.b, 77, m, 8), 0);
	fx_unlock(&f);
	/* an OFFER for a want freed before the mail was taken is not delivered */
	OK(fx_unwant(&f, b, "b1")); /* a1 offered to handler 0 */
	CU_ASSERT_EQUAL(f.mask, 1);
	OK(fx_unwant(&f, a, "a1"));
	fx_log_clear(&f);
	fx_pump(&f);
	CU_ASSERT_EQUAL(f.nlog, 0);
	/* closing the last conn of a client: HELLO to the handlers left */
	fx_close(&f, a, 0);
	CU_ASSERT_EQUAL(f.mask, 4 | 8);
	fx_close(&f, c, 0); /* N still has d */
	CU_ASSERT_EQUAL(f.mask, 0);
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_HELLO, NULL), 2);
	done(&f);
}

/* book_mail_pending: what a handler's wake-up looks at before it takes the
 * lock (src/handler/mailbox.c): set by a HELLO and by queued mail, clear
 * once everything was taken, per handler, and also clear again when the
 * only mail was withdrawn (the want freed) before it was taken. */
static void test_mail_pending(void)
{
	struct fx f;
	struct book_ref a, b;
	struct book_mail m[8];
	mk(&f, 1, 1);
	for (uint32_t h = 0; h < 4; h++)
		CU_ASSERT_FALSE(book_mail_pending(f.b, h));
	CU_ASSERT_FALSE(book_mail_pending(f.b, 77));
	OK(fx_open(&f, 0, NULL, 0, &a));
	OK(fx_open(&f, 2, NULL, 0, &b));
	CU_ASSERT(book_mail_pending(f.b, 0)); /* HELLO */
	CU_ASSERT(book_mail_pending(f.b, 2));
	CU_ASSERT_FALSE(book_mail_pending(f.b, 1));
	fx_lock(&f);
	CU_ASSERT_EQUAL(book_mail_take(f.b, 0, m, 8), 1);
	CU_ASSERT_EQUAL(book_mail_take(f.b, 2, m, 8), 1);
	fx_unlock(&f);
	CU_ASSERT_FALSE(book_mail_pending(f.b, 0));
	CU_ASSERT_FALSE(book_mail_pending(f.b, 2));
	OK(fx_want(&f, b, "b1", 0, 0, 0)); /* OFFER to handler 2 */
	CU_ASSERT(book_mail_pending(f.b, 2));
	CU_ASSERT_FALSE(book_mail_pending(f.b, 0));
	fx_lock(&f);
	CU_ASSERT_EQUAL(book_mail_take(f.b, 2, m, 8), 1);
	CU_ASSERT_EQUAL(m[0].kind, MAIL_OFFER);
	fx_unlock(&f);
	CU_ASSERT_FALSE(book_mail_pending(f.b, 2));
	OK(fx_want(&f, a, "a1", 0, 0, 0)); /* parked: no mail */
	CU_ASSERT_FALSE(book_mail_pending(f.b, 0));
	OK(fx_unwant(&f, b, "b1")); /* a1 offered to handler 0 */
	CU_ASSERT(book_mail_pending(f.b, 0));
	OK(fx_unwant(&f, a, "a1")); /* its OFFER withdrawn untaken */
	CU_ASSERT_FALSE(book_mail_pending(f.b, 0));
	done(&f);
}

/* The eventfd only for handlers marked asleep; marks survive a repair. */
static void test_wake_needed(void)
{
	struct fx f;
	mk(&f, 1, 1);
	CU_ASSERT_EQUAL(book_wake_needed(f.b, 0xf), 0); /* all awake at start */
	book_handler_asleep(f.b, 1, 1);
	book_handler_asleep(f.b, 3, 1);
	book_handler_asleep(f.b, 77, 1); /* no such handler: ignored */
	CU_ASSERT_EQUAL(book_wake_needed(f.b, 0xf), 0xa);
	CU_ASSERT_EQUAL(book_wake_needed(f.b, 0x3), 0x2);
	CU_ASSERT_EQUAL(book_wake_needed(f.b, 0), 0);
	CU_ASSERT_EQUAL(book_wake_needed(f.b, 1ull << 40), 0);
	book_handler_asleep(f.b, 3, 0);
	CU_ASSERT_EQUAL(book_wake_needed(f.b, 0xf), 0x2);
	fx_lock(&f);
	book_repair(f.b);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(book_wake_needed(f.b, 0xf), 0x2);
	done(&f);
}

static void test_draining(void)
{
	struct fx f;
	struct book_ref a, b, r;
	mk(&f, 1, 1);
	OK(fx_open(&f, 0, NULL, 0, &a));
	OK(fx_open(&f, 1, NULL, 0, &b));
	OK(fx_want(&f, a, "a1", 0, 0, 0));
	OK(fx_want(&f, b, "b1", 0, 0, 0));
	OK(fx_want(&f, b, "b2", 2, 0, 0));
	uint64_t tb2 = fx_token(&f, "b2"), ta1 = fx_token(&f, "a1");
	fx_log_clear(&f);
	fx_lock(&f);
	CU_ASSERT_FALSE(book_is_draining(f.b));
	book_set_draining(f.b);
	CU_ASSERT_TRUE(book_is_draining(f.b));
	fx_unlock(&f);
	CU_ASSERT_EQUAL(f.mask, 3);
	RC(fx_want(&f, a, "a2", 0, 0, 0), BOOK_E_DRAINING);
	OK(fx_accept(&f, a, "a1", ta1, 0, &r)); /* offers still count */
	OK(fx_finish(&f, r, 1, 0));             /* but nothing more is granted */
	SEQ_EQ(offers(&f, 0), "");
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_HELLO, NULL), 2);
	OK(fx_decline(&f, b, "b2", tb2));
	struct book_wg_status st;
	fx_wg(&f, 0, &st);
	CU_ASSERT_EQUAL(st.waiting, 1);
	CU_ASSERT_EQUAL(st.offered + st.running, 0);
	CU_ASSERT_EQUAL(pos_of(&f, b, "b1").ahead, 0);
	OK(fx_unwant(&f, b, "b1"));
	done(&f);
}

static void test_stale_refs(void)
{
	struct fx f;
	struct book_ref a, a2, r, oc;
	struct book_position p;
	mk(&f, 1, 1);
	OK(fx_open(&f, 0, NULL, 0, &a));
	OK(fx_want(&f, a, "j", 0, 0, 0));
	uint64_t tok = fx_token(&f, "j");
	OK(fx_accept(&f, a, "j", tok, 0, &r));
	fx_close(&f, a, 0);
	OK(fx_open(&f, 0, NULL, 0, &a2));
	CU_ASSERT_EQUAL(a2.idx, a.idx); /* the slot is reused ... */
	CU_ASSERT(a2.gen != a.gen);     /* ... under a new generation */
	RC(fx_want(&f, a, "k", 0, 0, 0), BOOK_E_STALE);
	RC(fx_unwant(&f, a, "j"), BOOK_E_STALE);
	RC(fx_accept(&f, a, "j", tok, 0, &oc), BOOK_E_STALE);
	RC(fx_decline(&f, a, "j", tok), BOOK_E_STALE);
	RC(fx_query(&f, a, "j", &p), BOOK_E_STALE);
	fx_close(&f, a, 0); /* ignored */
	OK(fx_finish(&f, r, 3, 0));
	RC(fx_finish(&f, r, 3, 0), BOOK_E_STALE);
	fx_lock(&f);
	RC(book_job_owner(f.b, r, &oc, NULL), BOOK_E_STALE);
	book_job_set_pgid(f.b, r, 5); /* ignored */
	struct book_ref bad = { 1u << 30, 0 };
	struct book_outcome out = { .exit_code = 0 };
	RC(book_job_finished(f.b, bad, &out, NULL, 0), BOOK_E_STALE);
	RC(book_want(f.b, bad, "x", 0, 0, 0), BOOK_E_STALE);
	fx_unlock(&f);
	struct book_status st;
	fx_lock(&f);
	book_status(f.b, &st);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(st.connections, 1);
	CU_ASSERT_EQUAL(st.clients, 1);
	CU_ASSERT_EQUAL(st.wants, 0);
	done(&f);
}

static void test_time_without_now(void)
{
	struct fx f;
	struct book_ref a, b, r, r2;
	mk(&f, 1, 1);
	OK(fx_open(&f, 0, NULL, 0, &a));
	OK(fx_open(&f, 1, NULL, 0, &b));
	OK(fx_want(&f, a, "a1", 0, 0, 0));
	OK(fx_want(&f, b, "b1", 0, 0, 10));
	OK(fx_take_job(&f, a, "a1", &r));
	OK(fx_finish(&f, r, 100, 0)); /* grants b1 with no time known */
	fx_lock(&f);
	CU_ASSERT_EQUAL(book_next_deadline(f.b), 10); /* due: stamp it now */
	fx_unlock(&f);
	CU_ASSERT_EQUAL(fx_expire(&f, 50000), 0); /* its timeout starts here */
	fx_lock(&f);
	CU_ASSERT_EQUAL(book_next_deadline(f.b), 51000);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(fx_expire(&f, 40000), 0); /* time never goes back */
	OK(fx_want(&f, a, "a2", 0, 0, 50500));
	CU_ASSERT_EQUAL(fx_expire(&f, 51000), 1); /* b1 out, a2 offered at 51000 */
	/* with book_set_now, grants inside the section are stamped at once */
	OK(fx_take_job(&f, a, "a2", &r2));
	OK(fx_want(&f, b, "b2", 0, 0, 51000));
	fx_lock(&f);
	book_set_now(f.b, 60000);
	struct book_outcome out = { .exit_code = 1, .failed = 1, .duration_ms = 300 };
	OK(book_job_finished(f.b, r2, &out, NULL, 0));
	OK(book_done_delivered(f.b, r2));
	CU_ASSERT_EQUAL(book_next_deadline(f.b), 61000);
	struct book_service_status ss;
	book_service_status(f.b, 0, &ss);
	CU_ASSERT_EQUAL(ss.started, 2);
	CU_ASSERT_EQUAL(ss.finished, 2);
	CU_ASSERT_EQUAL(ss.failed, 1);
	CU_ASSERT_EQUAL(ss.mean_runtime_ms, 140); /* 100, then +0.2*(300-100) */
	CU_ASSERT_EQUAL(ss.running, 0);
	/* the slot waits: a1 0 ms; b1 from 10 to its stamp at 50000; a2
	 * from 50500 to 51000 (on the bound 0.5 s); b2 from 51000 to 60000;
	 * the run times 100 ms (on the bound 0.1 s) and 300 ms */
	static const uint64_t waits[HIST_BUCKETS] = { [0] = 1, [6] = 1, [10] = 1, [12] = 1 };
	static const uint64_t runs[HIST_BUCKETS] = { [4] = 1, [6] = 1 };
	CU_ASSERT(memcmp(ss.slot_wait.n, waits, sizeof waits) == 0);
	CU_ASSERT_EQUAL(ss.slot_wait.sum_ms, 49990 + 500 + 9000);
	CU_ASSERT(memcmp(ss.runtime.n, runs, sizeof runs) == 0);
	CU_ASSERT_EQUAL(ss.runtime.sum_ms, 400);
	book_service_status(f.b, 2, &ss);
	CU_ASSERT_EQUAL(ss.mean_runtime_ms, 0);
	fx_unlock(&f);
	done(&f);
}

static void test_many_ids_index(void)
{
	/* fill the book completely and empty it in another order: the hash
	 * indexes shift back on every delete */
	struct fx f;
	struct book_limits l;
	struct book_ref c[4];
	char id[32];
	fx_limits(&l);
	l.max_wants = 256;
	l.max_wants_per_connection = 64;
	mk_lim(&f, &l, 0, 0);
	for (int k = 0; k < 4; k++)
		OK(fx_open(&f, (uint32_t)k, k % 2 ? "named" : NULL, 0, &c[k]));
	for (int i = 0; i < 256; i++) {
		snprintf(id, sizeof id, "job-%d", i);
		OK(fx_want(&f, c[i % 4], id, (uint32_t)(i % 3), i % 5, 0));
	}
	RC(fx_want(&f, c[0], "more", 0, 0, 0), BOOK_E_LIMIT_CONN);
	checked(&f);
	for (int i = 0; i < 256; i += 2) {
		snprintf(id, sizeof id, "job-%d", (i * 7) % 256);
		OK(fx_unwant(&f, c[((i * 7) % 256) % 4], id));
	}
	checked(&f);
	for (int i = 1; i < 256; i += 2) {
		snprintf(id, sizeof id, "job-%d", i);
		struct book_position p = pos_of(&f, c[i % 4], id);
		CU_ASSERT_EQUAL(p.state, WANT_PARKED);
	}
	for (int k = 0; k < 4; k++)
		fx_close(&f, c[k], 0);
	done(&f);
}

static void wg0(struct fx *f, uint32_t running, uint32_t offered, uint32_t waiting);

/* ---- finished jobs: DONE kept in the book, delivered exactly once ---- */

/* Accepts job (offered on conn c) to run on `runner`; returns the want. */
static struct book_ref run_on(struct fx *f, struct book_ref c, const char *job, uint32_t runner)
{
	struct book_ref r = { UINT32_MAX, 0 };
	OK(fx_accept(f, c, job, fx_token(f, job), runner, &r));
	return r;
}

/* DONE mails logged for job (NULL: any) at handler h (-1: any). */
static size_t dones(const struct fx *f, const char *job, int h)
{
	size_t n = 0;
	for (size_t i = 0; i < f->nlog; i++)
		if (f->log[i].m.kind == MAIL_DONE &&
		    (!job || strcmp(f->log[i].m.job_id, job) == 0) &&
		    (h < 0 || (int)f->log[i].handler == h))
			n++;
	return n;
}

/* The newest DONE of job went to conn c (ref and handler) and names want r. */
static void done_to(struct fx *f, const char *job, struct book_ref c, uint32_t h, struct book_ref r)
{
	const struct fx_mail *m = fx_find(f, MAIL_DONE, job);
	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	CU_ASSERT_EQUAL(m->handler, h);
	CU_ASSERT_EQUAL(m->m.conn.idx, c.idx);
	CU_ASSERT_EQUAL(m->m.conn.gen, c.gen);
	CU_ASSERT_EQUAL(m->m.want.idx, r.idx);
	CU_ASSERT_EQUAL(m->m.want.gen, r.gen);
}

/* What a handler does with a MAIL_DONE: read, send, delivered. */
static void deliver(struct fx *f, struct book_ref r, const char *text)
{
	char buf[256];
	size_t len = 999;
	struct book_outcome o;
	OK(fx_done_read(f, r, &o, buf, sizeof buf, &len));
	if (text) {
		CU_ASSERT_EQUAL(len, strlen(text));
		CU_ASSERT_STRING_EQUAL(buf, text);
	}
	OK(fx_delivered(f, r));
	RC(fx_done_read(f, r, &o, buf, sizeof buf, &len), BOOK_E_STALE);
}

/* The finished job r was lost with its runner: the lost outcome, no
 * receipt text (and none lost). */
static void is_lost(struct fx *f, struct book_ref r)
{
	struct book_outcome o;
	char buf[16] = "junk";
	size_t len = 999;
	memset(&o, 0xff, sizeof o);
	OK(fx_done_read(f, r, &o, buf, sizeof buf, &len));
	CU_ASSERT_EQUAL(len, 0);
	CU_ASSERT_STRING_EQUAL(buf, "");
	CU_ASSERT_EQUAL(o.exit_code, -1);
	CU_ASSERT_EQUAL(o.signal, 0);
	CU_ASSERT_EQUAL(o.error, BOOK_ERROR_LOST);
	CU_ASSERT_EQUAL(o.retryable, 1);
	CU_ASSERT_EQUAL(o.failed, 1);
	CU_ASSERT_EQUAL(o.duration_ms, 0);
	CU_ASSERT_EQUAL(o.receipt_lost, 0);
}

static struct book_status status_of(struct fx *f)
{
	struct book_status st;
	fx_lock(f);
	book_status(f->b, &st);
	fx_unlock(f);
	return st;
}

static void test_done_to_runner_handler(void)
{
	struct fx f;
	struct book_ref a, b, r, oc;
	uint32_t oh;
	struct book_outcome o;
	char buf[64];
	size_t len;
	enum want_state was;
	mk(&f, 1, 1);
	OK(fx_open(&f, 0, NULL, 0, &a));
	OK(fx_open(&f, 1, NULL, 0, &b));
	OK(fx_want(&f, a, "j", 0, 0, 0));
	OK(fx_want(&f, b, "k", 0, 0, 0)); /* parked */
	r = run_on(&f, a, "j", 0);        /* runs on its conn's handler */
	fx_lock(&f);
	book_job_set_pgid(f.b, r, 4711);
	fx_unlock(&f);
	fx_log_clear(&f);
	OK(fx_finished(&f, r, 0, 250, "{\"exit_code\":0}"));
	CU_ASSERT_EQUAL(f.mask, 3); /* DONE to h0, OFFER k to h1 */
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, "j", 0), 1);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 1);
	done_to(&f, "j", a, 0, r);
	SEQ_EQ(offers(&f, 0), "k"); /* the slot was re-granted at once */
	uint64_t tk = fx_token(&f, "k");
	wg0(&f, 0, 1, 0);
	/* the finished job: still known, in no slot, outcome decided */
	struct book_position p = pos_of(&f, a, "j");
	CU_ASSERT_EQUAL(p.state, WANT_FINISHED);
	CU_ASSERT_EQUAL(p.ahead, 0);
	CU_ASSERT_EQUAL(p.running, 1);
	RC(fx_want(&f, a, "j", 0, 0, 0), BOOK_E_DUPLICATE);
	RC(fx_cancel(&f, a, "j", &was), BOOK_E_UNKNOWN_JOB);
	RC(fx_unwant(&f, a, "j"), BOOK_E_BAD_STATE);
	RC(fx_accept(&f, a, "j", 1, 0, &oc), BOOK_E_BAD_STATE);
	RC(fx_decline(&f, a, "j", 1), BOOK_E_BAD_STATE);
	RC(fx_cancel(&f, b, "j", &was), BOOK_E_UNKNOWN_JOB); /* another client's */
	RC(fx_finished(&f, r, 1, 1, NULL), BOOK_E_BAD_STATE);
	RC(fx_finish(&f, r, 1, 1), BOOK_E_BAD_STATE);
	fx_lock(&f);
	RC(book_job_finished(f.b, r, NULL, NULL, 0), BOOK_E_INVALID);
	OK(book_job_owner(f.b, r, &oc, &oh));
	book_job_set_pgid(f.b, r, 1); /* ignored */
	fx_unlock(&f);
	CU_ASSERT_EQUAL(oc.idx, a.idx);
	CU_ASSERT_EQUAL(oh, 0);
	memset(&o, 0xff, sizeof o);
	OK(fx_done_read(&f, r, &o, buf, sizeof buf, &len));
	CU_ASSERT_EQUAL(len, 15);
	CU_ASSERT_STRING_EQUAL(buf, "{\"exit_code\":0}");
	CU_ASSERT_EQUAL(o.exit_code, 0);
	CU_ASSERT_EQUAL(o.signal, 0);
	CU_ASSERT_EQUAL(o.error, 0);
	CU_ASSERT_EQUAL(o.retryable, 0);
	CU_ASSERT_EQUAL(o.failed, 0);
	CU_ASSERT_EQUAL(o.duration_ms, 250);
	CU_ASSERT_EQUAL(o.receipt_lost, 0);
	struct book_service_status ss;
	fx_lock(&f);
	book_service_status(f.b, 0, &ss);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(ss.started, 1);
	CU_ASSERT_EQUAL(ss.finished, 1);
	CU_ASSERT_EQUAL(ss.failed, 0);
	CU_ASSERT_EQUAL(ss.mean_runtime_ms, 250);
	CU_ASSERT_EQUAL(ss.running, 0);
	struct book_status st = status_of(&f);
	CU_ASSERT_EQUAL(st.wants, 2);
	CU_ASSERT_EQUAL(st.finished, 1);
	CU_ASSERT_EQUAL(st.receipts, 1);
	checked(&f);
	/* the DONE went out */
	OK(fx_delivered(&f, r));
	RC(fx_delivered(&f, r), BOOK_E_STALE);
	RC(fx_done_read(&f, r, &o, buf, sizeof buf, &len), BOOK_E_STALE);
	struct book_position q;
	RC(fx_query(&f, a, "j", &q), BOOK_E_UNKNOWN_JOB);
	st = status_of(&f);
	CU_ASSERT_EQUAL(st.wants, 1);
	CU_ASSERT_EQUAL(st.finished, 0);
	CU_ASSERT_EQUAL(st.receipts, 0);
	OK(fx_want(&f, a, "j", 0, 0, 0)); /* the id is free again */
	fx_log_clear(&f);
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 0);
	/* a running job is not finished yet */
	struct book_ref rk;
	OK(fx_accept(&f, b, "k", tk, 1, &rk));
	RC(fx_done_read(&f, rk, &o, buf, sizeof buf, &len), BOOK_E_BAD_STATE);
	RC(fx_delivered(&f, rk), BOOK_E_BAD_STATE);
	/* a failed job counts as failed; the EMA follows */
	OK(fx_finished(&f, rk, 2, 750, NULL));
	fx_lock(&f);
	book_service_status(f.b, 0, &ss);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(ss.finished, 2);
	CU_ASSERT_EQUAL(ss.failed, 1);
	CU_ASSERT_EQUAL(ss.mean_runtime_ms, 350); /* 250 + 0.2 * 500 */
	OK(fx_done_read(&f, rk, &o, NULL, 0, &len));
	CU_ASSERT_EQUAL(len, 0);
	CU_ASSERT_EQUAL(o.exit_code, 2);
	CU_ASSERT_EQUAL(o.failed, 1);
	CU_ASSERT_EQUAL(o.receipt_lost, 0); /* none given: none lost */
	deliver(&f, rk, "");
	done(&f);
}

static void test_done_to_other_handler(void)
{
	struct fx f;
	struct book_ref n, n2, r1, r2;
	mk(&f, 2, 1);
	OK(fx_open(&f, 1, "N", 0, &n));
	OK(fx_want(&f, n, "j1", 0, 0, 0));
	OK(fx_want(&f, n, "j2", 0, 0, 0));
	r1 = run_on(&f, n, "j1", 3); /* runner h3, owner conn on h1 */
	r2 = run_on(&f, n, "j2", 3);
	fx_log_clear(&f);
	OK(fx_finished(&f, r1, 0, 1, "one"));
	CU_ASSERT_EQUAL(f.mask, 2); /* the owner's handler, not the runner's */
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, "j1", 1), 1);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 1);
	done_to(&f, "j1", n, 1, r1);
	deliver(&f, r1, "one");
	/* after a re-adoption the owner is on yet another handler */
	fx_close(&f, n, 10);
	OK(fx_open(&f, 2, "N", 20, &n2));
	fx_log_clear(&f);
	OK(fx_finished(&f, r2, 0, 1, "two"));
	CU_ASSERT_EQUAL(f.mask, 4);
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, "j2", 2), 1);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 1);
	done_to(&f, "j2", n2, 2, r2);
	deliver(&f, r2, "two");
	CU_ASSERT_EQUAL(status_of(&f).wants, 0);
	done(&f);
}

static void test_done_owner_closes_before_delivery(void)
{
	struct fx f;
	struct book_ref c1, c2, c3, r1, r2;
	mk(&f, 2, 1);
	OK(fx_open(&f, 0, "N", 0, &c1));
	OK(fx_open(&f, 1, "N", 0, &c2));
	OK(fx_open(&f, 2, "N", 0, &c3)); /* the newest */
	OK(fx_want(&f, c1, "j1", 0, 0, 0));
	OK(fx_want(&f, c1, "j2", 0, 0, 0));
	r1 = run_on(&f, c1, "j1", 3);
	r2 = run_on(&f, c1, "j2", 3);
	fx_log_clear(&f);
	/* DONE queued for h0 but not taken when c1 closes: it moves to c3 */
	OK(fx_finished(&f, r1, 0, 1, "r1"));
	fx_close(&f, c1, 0);
	CU_ASSERT(f.mask & 4);
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, "j1", -1), 1);
	done_to(&f, "j1", c3, 2, r1);
	/* j2, placed by c1, reports to c3 now */
	OK(fx_finished(&f, r2, 0, 1, "r2"));
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, "j2", -1), 1);
	done_to(&f, "j2", c3, 2, r2);
	/* both DONEs taken by h2, which could not send them: c3 closes; they
	 * are mailed again to the client's newest conn left, in job order */
	fx_log_clear(&f);
	fx_close(&f, c3, 0);
	CU_ASSERT_EQUAL(f.mask, 2);
	fx_pump(&f);
	CU_ASSERT_EQUAL(f.nlog, 2);
	CU_ASSERT_STRING_EQUAL(f.log[0].m.job_id, "j1");
	CU_ASSERT_STRING_EQUAL(f.log[1].m.job_id, "j2");
	done_to(&f, "j1", c2, 1, r1);
	done_to(&f, "j2", c2, 1, r2);
	deliver(&f, r1, "r1");
	deliver(&f, r2, "r2");
	fx_pump(&f);
	CU_ASSERT_EQUAL(f.nlog, 2);
	/* a conn that is not the owner closing changes nothing */
	struct book_ref c4, r3;
	OK(fx_open(&f, 3, "N", 0, &c4));
	OK(fx_want(&f, c2, "j3", 0, 0, 0));
	r3 = run_on(&f, c2, "j3", 0);
	OK(fx_finished(&f, r3, 0, 1, NULL));
	fx_log_clear(&f);
	fx_close(&f, c4, 0);
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 1);
	done_to(&f, "j3", c2, 1, r3);
	deliver(&f, r3, "");
	fx_close(&f, c2, 0);
	struct book_status st = status_of(&f);
	CU_ASSERT_EQUAL(st.clients, 0);
	CU_ASSERT_EQUAL(st.wants, 0);
	fx_lock(&f);
	CU_ASSERT_EQUAL(book_next_deadline(f.b), UINT64_MAX); /* nothing kept */
	fx_unlock(&f);
	done(&f);
}

static void test_done_resume_within_grace(void)
{
	struct fx f;
	struct book_ref n, n2, r1, r2, oc;
	struct book_status st;
	mk(&f, 2, 1);
	OK(fx_open(&f, 0, "N", 0, &n));
	OK(fx_want(&f, n, "j1", 0, 0, 0));
	OK(fx_want(&f, n, "j2", 0, 0, 0));
	r1 = run_on(&f, n, "j1", 0);
	r2 = run_on(&f, n, "j2", 1);
	/* j1 ends, its DONE is taken by h0 and the send fails: n dropped */
	OK(fx_finished(&f, r1, 0, 5, "r1"));
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, "j1", 0), 1);
	fx_close(&f, n, 100); /* grace until 5100 */
	fx_log_clear(&f);
	/* j2 ends during the grace: kept, nobody to mail */
	OK(fx_finished(&f, r2, 0, 7, "r2"));
	CU_ASSERT_EQUAL(f.mask, 0);
	fx_pump(&f);
	CU_ASSERT_EQUAL(f.nlog, 0);
	wg0(&f, 0, 0, 0);
	st = status_of(&f);
	CU_ASSERT_EQUAL(st.clients, 0);
	CU_ASSERT_EQUAL(st.wants, 2);
	CU_ASSERT_EQUAL(st.finished, 2);
	fx_lock(&f);
	CU_ASSERT_EQUAL(book_next_deadline(f.b), 5100);
	RC(book_job_owner(f.b, r2, &oc, NULL), BOOK_E_STALE);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(fx_expire(&f, 5099), 0);
	/* the client is back on another handler: both DONEs go there, once */
	OK(fx_open(&f, 3, "N", 5099, &n2));
	CU_ASSERT(f.mask & 8);
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, "j1", 3), 1);
	CU_ASSERT_EQUAL(dones(&f, "j2", 3), 1);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 2);
	done_to(&f, "j1", n2, 3, r1);
	done_to(&f, "j2", n2, 3, r2);
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 2);
	fx_lock(&f);
	CU_ASSERT_EQUAL(book_next_deadline(f.b), UINT64_MAX);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(pos_of(&f, n2, "j2").state, WANT_FINISHED);
	RC(fx_want(&f, n2, "j1", 0, 0, 5099), BOOK_E_DUPLICATE);
	CU_ASSERT_EQUAL(fx_expire(&f, 100000), 0); /* the grace is over for good */
	deliver(&f, r1, "r1");
	deliver(&f, r2, "r2");
	OK(fx_want(&f, n2, "j1", 0, 0, 100000));
	st = status_of(&f);
	CU_ASSERT_EQUAL(st.finished, 0);
	CU_ASSERT_EQUAL(st.receipts, 0);
	done(&f);
}

static void test_done_grace_ends(void)
{
	struct fx f;
	struct book_ref n, r1, r2;
	struct book_outcome o;
	size_t len;
	mk(&f, 2, 1);
	OK(fx_open(&f, 0, "N", 0, &n));
	OK(fx_want(&f, n, "j1", 0, 0, 0));
	OK(fx_want(&f, n, "j2", 0, 0, 0));
	r1 = run_on(&f, n, "j1", 1);
	r2 = run_on(&f, n, "j2", 1);
	OK(fx_finished(&f, r2, 0, 1, "kept")); /* DONE pending at h0 */
	fx_close(&f, n, 0);                    /* grace until 5000: withdrawn */
	fx_log_clear(&f);
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 0);
	CU_ASSERT_EQUAL(fx_expire(&f, 5000), 1);
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 0);             /* freed silently */
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_CANCEL, "j1"), 1); /* the running one */
	RC(fx_done_read(&f, r2, &o, NULL, 0, &len), BOOK_E_STALE);
	RC(fx_delivered(&f, r2), BOOK_E_STALE);
	struct book_status st = status_of(&f);
	CU_ASSERT_EQUAL(st.wants, 1); /* j1: an orphan, still running */
	CU_ASSERT_EQUAL(st.finished, 0);
	CU_ASSERT_EQUAL(st.receipts, 0);
	/* the ids are free again */
	OK(fx_open(&f, 2, "N", 6000, &n));
	OK(fx_want(&f, n, "j2", 2, 0, 6000));
	OK(fx_want(&f, n, "j1", 2, 0, 6000));
	/* the orphan ends: nobody to tell, freed at once */
	fx_log_clear(&f);
	OK(fx_finished(&f, r1, 0, 1, "lost"));
	RC(fx_done_read(&f, r1, &o, NULL, 0, &len), BOOK_E_STALE);
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 0);
	wg0(&f, 0, 0, 0);
	st = status_of(&f);
	CU_ASSERT_EQUAL(st.receipts, 0);
	CU_ASSERT_EQUAL(st.finished, 0);
	done(&f);
}

static void test_done_anonymous(void)
{
	struct fx f;
	struct book_ref a, r1, r2;
	struct book_outcome o;
	size_t len;
	mk(&f, 2, 1);
	OK(fx_open(&f, 0, NULL, 0, &a));
	OK(fx_want(&f, a, "j1", 0, 0, 0));
	OK(fx_want(&f, a, "j2", 0, 0, 0));
	r1 = run_on(&f, a, "j1", 1);
	r2 = run_on(&f, a, "j2", 1);
	OK(fx_finished(&f, r1, 0, 1, "r1")); /* DONE pending at h0 */
	fx_log_clear(&f);
	fx_close(&f, a, 10);
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 0);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_CANCEL, "j2"), 1);
	RC(fx_done_read(&f, r1, &o, NULL, 0, &len), BOOK_E_STALE);
	OK(fx_finished(&f, r2, 143, 1, "r2")); /* the orphan: freed */
	RC(fx_done_read(&f, r2, &o, NULL, 0, &len), BOOK_E_STALE);
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 0);
	struct book_status st = status_of(&f);
	CU_ASSERT_EQUAL(st.wants, 0);
	CU_ASSERT_EQUAL(st.receipts, 0);
	CU_ASSERT_EQUAL(st.clients, 0);
	done(&f);
}

static void test_receipt_store(void)
{
	struct fx f;
	struct book_limits l;
	struct book_ref a, r[7];
	struct book_outcome o;
	char buf[16], id[8];
	size_t len;
	fx_limits(&l);
	l.max_receipts = 2;
	l.receipt_bytes = 8;
	mk_lim(&f, &l, 7, 1);
	OK(fx_open(&f, 0, NULL, 0, &a));
	for (int i = 0; i < 7; i++) {
		snprintf(id, sizeof id, "r%d", i);
		OK(fx_want(&f, a, id, 0, 0, 0));
		r[i] = run_on(&f, a, id, 1);
	}
	OK(fx_finished(&f, r[0], 0, 1, "AAAA"));
	OK(fx_finished(&f, r[1], 0, 1, "BBBBBBBB")); /* exactly receipt_bytes */
	OK(fx_finished(&f, r[2], 3, 9, "CC"));       /* store full */
	OK(fx_finished(&f, r[3], 0, 1, NULL));       /* nothing to keep */
	CU_ASSERT_EQUAL(status_of(&f).receipts, 2);
	OK(fx_done_read(&f, r[0], &o, buf, sizeof buf, &len));
	CU_ASSERT_EQUAL(len, 4);
	CU_ASSERT_STRING_EQUAL(buf, "AAAA");
	CU_ASSERT_EQUAL(o.receipt_lost, 0);
	OK(fx_done_read(&f, r[1], &o, buf, 4, &len)); /* truncated copy, full length */
	CU_ASSERT_EQUAL(len, 8);
	CU_ASSERT_STRING_EQUAL(buf, "BBB");
	OK(fx_done_read(&f, r[1], &o, NULL, 0, &len)); /* just the length */
	CU_ASSERT_EQUAL(len, 8);
	OK(fx_done_read(&f, r[1], &o, buf, 1, &len));
	CU_ASSERT_STRING_EQUAL(buf, "");
	memset(buf, 'x', sizeof buf);
	OK(fx_done_read(&f, r[2], &o, buf, sizeof buf, &len));
	CU_ASSERT_EQUAL(len, 0);
	CU_ASSERT_STRING_EQUAL(buf, "");
	CU_ASSERT_EQUAL(o.receipt_lost, 1); /* compact only, and flagged */
	CU_ASSERT_EQUAL(o.exit_code, 3);
	CU_ASSERT_EQUAL(o.failed, 1);
	CU_ASSERT_EQUAL(o.duration_ms, 9);
	OK(fx_done_read(&f, r[3], &o, buf, sizeof buf, &len));
	CU_ASSERT_EQUAL(len, 0);
	CU_ASSERT_EQUAL(o.receipt_lost, 0);
	checked(&f);
	/* a slot given back is taken by the next receipt */
	deliver(&f, r[0], "AAAA");
	CU_ASSERT_EQUAL(status_of(&f).receipts, 1);
	OK(fx_finished(&f, r[4], 0, 1, "DDDDDDDDD")); /* longer than a slot: never cut */
	OK(fx_done_read(&f, r[4], &o, buf, sizeof buf, &len));
	CU_ASSERT_EQUAL(len, 0);
	CU_ASSERT_EQUAL(o.receipt_lost, 1);
	CU_ASSERT_EQUAL(status_of(&f).receipts, 1);
	OK(fx_finished(&f, r[5], 0, 1, "EEEE"));
	CU_ASSERT_EQUAL(status_of(&f).receipts, 2);
	OK(fx_finished(&f, r[6], 0, 1, "FFFF"));
	OK(fx_done_read(&f, r[6], &o, buf, sizeof buf, &len));
	CU_ASSERT_EQUAL(o.receipt_lost, 1);
	deliver(&f, r[5], "EEEE");
	deliver(&f, r[1], "BBBBBBBB");
	CU_ASSERT_EQUAL(status_of(&f).receipts, 0);
	fx_close(&f, a, 0); /* the rest freed with the conn */
	struct book_status st = status_of(&f);
	CU_ASSERT_EQUAL(st.wants, 0);
	CU_ASSERT_EQUAL(st.finished, 0);
	done(&f);

	/* no store at all: compact outcomes only */
	fx_limits(&l);
	l.max_receipts = 0;
	l.receipt_bytes = 12345; /* ignored */
	mk_lim(&f, &l, 1, 1);
	OK(fx_open(&f, 0, NULL, 0, &a));
	OK(fx_want(&f, a, "j", 0, 0, 0));
	r[0] = run_on(&f, a, "j", 0);
	OK(fx_finished(&f, r[0], 0, 1, "x"));
	OK(fx_done_read(&f, r[0], &o, buf, sizeof buf, &len));
	CU_ASSERT_EQUAL(len, 0);
	CU_ASSERT_EQUAL(o.receipt_lost, 1);
	deliver(&f, r[0], "");
	done(&f);
}

static void test_duplicate_and_limits_while_finished(void)
{
	struct fx f;
	struct book_limits l;
	struct book_ref a, a2, r, r2;
	fx_limits(&l);
	l.max_wants = 2;
	l.max_wants_per_connection = 1;
	mk_lim(&f, &l, 1, 1);
	OK(fx_open(&f, 0, "C", 0, &a));
	OK(fx_open(&f, 1, "C", 0, &a2));
	OK(fx_want(&f, a, "j", 0, 0, 0));
	r = run_on(&f, a, "j", 0);
	OK(fx_finished(&f, r, 0, 1, NULL));
	/* every conn of the client sees it; the id stays taken */
	CU_ASSERT_EQUAL(pos_of(&f, a2, "j").state, WANT_FINISHED);
	RC(fx_want(&f, a2, "j", 0, 0, 0), BOOK_E_DUPLICATE);
	RC(fx_cancel(&f, a2, "j", NULL), BOOK_E_UNKNOWN_JOB);
	/* it holds no slot and does not count per connection, but is a want
	 * of the book (max_wants) */
	OK(fx_want(&f, a, "k", 0, 0, 0));
	CU_ASSERT_EQUAL(pos_of(&f, a, "k").state, WANT_OFFERED);
	RC(fx_want(&f, a2, "m", 0, 0, 0), BOOK_E_LIMIT_WANTS);
	deliver(&f, r, "");
	OK(fx_want(&f, a2, "m", 0, 0, 0));
	/* cancel of a running job: the DONE that follows is the one DONE */
	r2 = run_on(&f, a, "k", 0);
	enum want_state was;
	OK(fx_cancel(&f, a2, "k", &was));
	CU_ASSERT_EQUAL(was, WANT_RUNNING);
	OK(fx_finished(&f, r2, -1, 3, "{\"error\":\"cancelled\"}"));
	fx_log_clear(&f);
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_CANCEL, "k"), 0); /* moot: it ended */
	CU_ASSERT_EQUAL(dones(&f, "k", 0), 1);
	RC(fx_cancel(&f, a2, "k", &was), BOOK_E_UNKNOWN_JOB);
	deliver(&f, r2, "{\"error\":\"cancelled\"}");
	done(&f);
}

static void test_purge_runner_keeps_finished(void)
{
	struct fx f;
	struct book_ref a, r1, r2;
	int32_t pg[4];
	mk(&f, 3, 1);
	OK(fx_open(&f, 0, "N", 0, &a));
	OK(fx_want(&f, a, "j1", 0, 0, 0));
	OK(fx_want(&f, a, "j2", 0, 0, 0));
	r1 = run_on(&f, a, "j1", 1);
	r2 = run_on(&f, a, "j2", 1);
	fx_lock(&f);
	book_job_set_pgid(f.b, r1, 101);
	book_job_set_pgid(f.b, r2, 102);
	fx_unlock(&f);
	OK(fx_finished(&f, r2, 0, 1, "r2")); /* DONE pending at h0 */
	fx_log_clear(&f);
	CU_ASSERT_EQUAL(fx_purge(&f, 1, pg, 4), 1); /* the running one only */
	CU_ASSERT_EQUAL(pg[0], 101);
	fx_pump(&f); /* h0's DONE still there, */
	CU_ASSERT_EQUAL(dones(&f, "j2", 0), 1);
	done_to(&f, "j2", a, 0, r2);
	CU_ASSERT_EQUAL(dones(&f, "j1", 0), 1); /* then j1's: lost */
	done_to(&f, "j1", a, 0, r1);
	CU_ASSERT_EQUAL(f.nlog, 2);
	CU_ASSERT_STRING_EQUAL(f.log[0].m.job_id, "j2");
	is_lost(&f, r1);
	struct book_service_status ss;
	fx_lock(&f);
	book_service_status(f.b, 0, &ss);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(ss.finished, 2);
	CU_ASSERT_EQUAL(ss.failed, 1);
	deliver(&f, r2, "r2");
	deliver(&f, r1, "");
	done(&f);
}

/* ---- protocol 2: DONE kept until ACK, taken over by a new conn ---- */

static enum book_rc ack(struct fx *f, struct book_ref c, const char *job)
{
	fx_lock(f);
	enum book_rc rc = book_done_ack(f->b, c, job);
	fx_unlock(f);
	return rc;
}

static uint32_t adopt(struct fx *f, struct book_ref c)
{
	fx_lock(f);
	uint32_t n = book_conn_adopt(f->b, c);
	fx_unlock(f);
	return n;
}

/* A DONE sent on a conn that went half-open (the mail was taken, no ACK
 * came): the client's new conn takes the job over and gets the DONE again;
 * the ACK frees it; a second ACK, or one of a running job, changes
 * nothing. */
static void test_ack_and_adopt(void)
{
	struct fx f;
	struct book_ref c1, c2, c3, m, r1, r2, r3;
	struct book_position p;
	enum want_state was = WANT_FREE;
	mk(&f, 4, 1);
	OK(fx_open(&f, 0, "N", 0, &c1));
	OK(fx_open(&f, 0, "M", 0, &m));
	OK(fx_want(&f, c1, "j1", 0, 0, 0));
	OK(fx_want(&f, c1, "j2", 0, 0, 0));
	OK(fx_want(&f, c1, "j3", 0, 0, 0));
	r1 = run_on(&f, c1, "j1", 0);
	r2 = run_on(&f, c1, "j2", 0);
	r3 = run_on(&f, c1, "j3", 0);
	OK(fx_finished(&f, r1, 0, 1, "r1"));
	fx_log_clear(&f);
	fx_pump(&f); /* the DONE went out on c1 ... */
	done_to(&f, "j1", c1, 0, r1);
	OK(fx_finished(&f, r2, 3, 1, "r2"));      /* ... j2's is still queued there */
	RC(ack(&f, c1, "j3"), BOOK_E_BAD_STATE);  /* running: nothing happens */
	RC(ack(&f, m, "j1"), BOOK_E_UNKNOWN_JOB); /* another client's */
	/* still known, finished, until acknowledged */
	OK(fx_query(&f, c1, "j1", &p));
	CU_ASSERT_EQUAL(p.state, WANT_FINISHED);
	RC(fx_cancel(&f, c1, "j1", &was), BOOK_E_UNKNOWN_JOB);
	CU_ASSERT_EQUAL(was, WANT_FINISHED);
	RC(fx_want(&f, c1, "j1", 0, 0, 0), BOOK_E_DUPLICATE);
	checked(&f);
	/* the client comes back on h2 while c1 still looks alive */
	OK(fx_open(&f, 2, "N", 10, &c2));
	CU_ASSERT_EQUAL(adopt(&f, c2), 3);
	CU_ASSERT_EQUAL(adopt(&f, c2), 0); /* all its jobs are here already */
	CU_ASSERT_EQUAL(adopt(&f, m), 0);  /* nothing of another client */
	fx_log_clear(&f);
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 2); /* j1 again, j2 moved: both at h2 */
	done_to(&f, "j1", c2, 2, r1);
	done_to(&f, "j2", c2, 2, r2);
	CU_ASSERT_EQUAL(dones(&f, NULL, 0), 0);
	struct book_ref oc;
	uint32_t oh;
	fx_lock(&f);
	OK(book_job_owner(f.b, r3, &oc, &oh)); /* the running one reports here too */
	fx_unlock(&f);
	CU_ASSERT_EQUAL(oc.idx, c2.idx);
	CU_ASSERT_EQUAL(oh, 2);
	checked(&f);
	/* acknowledged on the old conn (its ACK was under way): freed */
	OK(ack(&f, c1, "j1"));
	RC(ack(&f, c2, "j1"), BOOK_E_UNKNOWN_JOB); /* the second copy's ACK */
	RC(fx_query(&f, c2, "j1", &p), BOOK_E_UNKNOWN_JOB);
	OK(fx_want(&f, c2, "j1", 0, 0, 0)); /* the id is free again */
	OK(ack(&f, c2, "j2"));
	/* the old conn's late close re-homes nothing: it owns nothing */
	fx_close(&f, c1, 20);
	fx_log_clear(&f);
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 0);
	/* c2 goes half-open too; the grace keeps j3's DONE for c3 */
	OK(fx_finished(&f, r3, 0, 1, "r3"));
	fx_pump(&f);
	done_to(&f, "j3", c2, 2, r3);
	fx_close(&f, c2, 30); /* its ping deadline */
	OK(fx_open(&f, 1, "N", 40, &c3));
	CU_ASSERT_EQUAL(adopt(&f, c3), 0); /* book_conn_open re-homed it */
	fx_log_clear(&f);
	fx_pump(&f);
	done_to(&f, "j3", c3, 1, r3);
	OK(ack(&f, c3, "j3"));
	struct book_status st = status_of(&f);
	CU_ASSERT_EQUAL(st.finished, 0);
	CU_ASSERT_EQUAL(st.receipts, 0);
	done(&f);
}

/* The late JOB the model found (docs/architecture.md, "What it found"):
 * the client answered an OFFER with JOB on conn A, gave A up before the
 * server read it and resumed on B; B's QUERY answers unknown_job (the
 * library ends the job lost), so the JOB arriving on A afterwards must not
 * start it.  The adoption withdraws A's offer and grants its slot again,
 * and leaves A's parked wants and the other clients' offers alone. */
static void test_adopt_withdraws_older_offers(void)
{
	struct fx f;
	struct book_ref a, b, m, r;
	struct book_position p;
	mk(&f, 1, 1);
	OK(fx_open(&f, 0, "N", 0, &a));
	OK(fx_open(&f, 1, "M", 0, &m));
	OK(fx_want(&f, a, "j0", 0, 0, 0)); /* wg 0's slot: offered on A */
	OK(fx_want(&f, a, "j1", 0, 0, 0)); /* parked on A */
	OK(fx_want(&f, m, "k0", 2, 0, 0)); /* wg 1's slot: offered to M */
	uint64_t tok = fx_token(&f, "j0"); /* the OFFER reached the client */
	uint64_t mtok = fx_token(&f, "k0");
	CU_ASSERT_NOT_EQUAL(tok, 0);
	wg0(&f, 0, 1, 1);
	/* JOB j0 sent on A, A given up, B opened: protocol 2 adopts */
	OK(fx_open(&f, 1, "N", 10, &b));
	fx_log_clear(&f);
	CU_ASSERT_EQUAL(adopt(&f, b), 0); /* no job to take over ... */
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_OFFER_EXPIRED, "j0"), 1); /* ... the offer is withdrawn */
	CU_ASSERT_EQUAL(mail_handler(&f, MAIL_OFFER_EXPIRED, "j0"), 0);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_OFFER, "j1"), 1); /* the slot went on: A's parked want */
	CU_ASSERT_EQUAL(mail_handler(&f, MAIL_OFFER, "j1"), 0);
	wg0(&f, 0, 1, 0);
	checked(&f);
	/* the resume QUERY on B, then the late JOB on A: both unknown */
	RC(fx_query(&f, b, "j0", &p), BOOK_E_UNKNOWN_JOB);
	RC(fx_accept(&f, a, "j0", tok, 0, &r), BOOK_E_UNKNOWN_JOB);
	wg0(&f, 0, 1, 0);
	/* another client's offer is untouched */
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_OFFER_EXPIRED, "k0"), 0);
	OK(fx_accept(&f, m, "k0", mtok, 1, &r));
	OK(fx_finish(&f, r, 20, 0));
	/* A's late close frees j1's slot; nothing is left over */
	fx_close(&f, a, 30);
	wg0(&f, 0, 0, 0);
	struct book_status st = status_of(&f);
	CU_ASSERT_EQUAL(st.wants, 0);
	OK(fx_want(&f, b, "j0", 0, 0, 40)); /* the id is free again */
	done(&f);
}

/* maxJobsPerClient counts finished jobs whose DONE is not acknowledged:
 * a client that never acknowledges is stopped there, visibly. */
static void test_unacked_count_against_job_limit(void)
{
	struct fx f;
	struct book_limits l;
	struct book_ref c, r1, r2, rx;
	fx_limits(&l);
	l.max_jobs_per_client = 2;
	mk_lim(&f, &l, 4, 1);
	OK(fx_open(&f, 0, "N", 0, &c));
	OK(fx_want(&f, c, "a", 0, 0, 0));
	OK(fx_want(&f, c, "b", 0, 0, 0));
	OK(fx_want(&f, c, "x", 0, 0, 0));
	r1 = run_on(&f, c, "a", 0);
	r2 = run_on(&f, c, "b", 0);
	OK(fx_finished(&f, r1, 0, 1, "a"));
	OK(fx_finished(&f, r2, 0, 1, "b"));
	fx_pump(&f);
	RC(fx_accept(&f, c, "x", fx_token(&f, "x"), 0, &rx), BOOK_E_LIMIT_JOBS);
	OK(ack(&f, c, "a"));
	OK(fx_accept(&f, c, "x", fx_token(&f, "x"), 0, &rx));
	done(&f);
}

static void test_purge_owner_handler_rehomes(void)
{
	struct fx f;
	struct book_ref c1, c2, m1, m2, r1, r2, r3, k1;
	int32_t pg[4];
	mk(&f, 4, 1);
	OK(fx_open(&f, 0, "N", 0, &c1));
	OK(fx_open(&f, 1, "N", 0, &c2));
	OK(fx_open(&f, 0, "M", 0, &m1));
	OK(fx_want(&f, c1, "j1", 0, 0, 0));
	OK(fx_want(&f, c1, "j2", 0, 0, 0));
	OK(fx_want(&f, c1, "j3", 0, 0, 0));
	OK(fx_want(&f, m1, "k1", 0, 0, 0));
	r1 = run_on(&f, c1, "j1", 2);
	r2 = run_on(&f, c1, "j2", 2);
	r3 = run_on(&f, c1, "j3", 2);
	k1 = run_on(&f, m1, "k1", 2);
	OK(fx_finished(&f, r2, 0, 1, "r2"));
	fx_pump(&f);                         /* h0 took j2's DONE ... */
	OK(fx_finished(&f, r1, 0, 1, "r1")); /* ... not j1's yet */
	OK(fx_finished(&f, k1, 0, 1, "k1"));
	fx_log_clear(&f);
	CU_ASSERT_EQUAL(fx_purge(&f, 0, pg, 4), 0); /* it ran nothing */
	fx_pump(&f);
	/* N's jobs: to its conn on h1; M had only h0: grace */
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 2);
	done_to(&f, "j1", c2, 1, r1);
	done_to(&f, "j2", c2, 1, r2);
	CU_ASSERT_EQUAL(dones(&f, "k1", -1), 0);
	struct book_ref oc;
	uint32_t oh;
	fx_lock(&f);
	OK(book_job_owner(f.b, r3, &oc, &oh)); /* the running one too */
	fx_unlock(&f);
	CU_ASSERT_EQUAL(oc.idx, c2.idx);
	CU_ASSERT_EQUAL(oh, 1);
	OK(fx_finished(&f, r3, 0, 1, "r3"));
	fx_pump(&f);
	done_to(&f, "j3", c2, 1, r3);
	OK(fx_open(&f, 3, "M", 100, &m2));
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, "k1", 3), 1);
	done_to(&f, "k1", m2, 3, k1);
	deliver(&f, r1, "r1");
	deliver(&f, r2, "r2");
	deliver(&f, r3, "r3");
	deliver(&f, k1, "k1");
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 4);
	done(&f);
}

/* ---- jobs lost with their runner: a DONE saying so ---- */

static struct book_service_status svc_of(struct fx *f, uint32_t svc)
{
	struct book_service_status ss;
	fx_lock(f);
	book_service_status(f->b, svc, &ss);
	fx_unlock(f);
	return ss;
}

static void test_purge_lost_owner_elsewhere(void)
{
	/* the runner dies, the owner conn lives on another handler: it gets
	 * the DONE of the lost job, once; the slot is re-granted */
	struct fx f;
	struct book_ref a, b, r;
	int32_t pg[4];
	enum want_state was;
	mk(&f, 1, 1);
	OK(fx_open(&f, 0, "N", 0, &a)); /* the owner conn, on h0 */
	OK(fx_open(&f, 2, NULL, 0, &b));
	OK(fx_want(&f, a, "j", 0, 0, 0));
	OK(fx_want(&f, b, "k", 0, 0, 0)); /* parked: one slot */
	r = run_on(&f, a, "j", 1);        /* runs on h1 */
	fx_lock(&f);
	book_job_set_pgid(f.b, r, 4711);
	book_handler_started(f.b, 1, 99);
	fx_unlock(&f);
	OK(fx_cancel(&f, a, "j", &was)); /* a CANCEL pending at h1: moot */
	CU_ASSERT_EQUAL(was, WANT_RUNNING);
	fx_log_clear(&f);
	CU_ASSERT_EQUAL(fx_purge(&f, 1, pg, 4), 1);
	CU_ASSERT_EQUAL(pg[0], 4711);
	CU_ASSERT_EQUAL(f.mask, 1 | 4); /* DONE to h0, OFFER k to h2 */
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, "j", 0), 1);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 1);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_CANCEL, NULL), 0);
	done_to(&f, "j", a, 0, r);
	SEQ_EQ(offers(&f, 0), "k"); /* the slot was re-granted */
	wg0(&f, 0, 1, 0);
	is_lost(&f, r);
	/* a finished job like any other: known until its DONE is delivered */
	CU_ASSERT_EQUAL(pos_of(&f, a, "j").state, WANT_FINISHED);
	RC(fx_want(&f, a, "j", 0, 0, 0), BOOK_E_DUPLICATE);
	RC(fx_cancel(&f, a, "j", &was), BOOK_E_UNKNOWN_JOB);
	RC(fx_finished(&f, r, 0, 5, "late"), BOOK_E_BAD_STATE); /* ended already */
	struct book_service_status ss = svc_of(&f, 0);
	CU_ASSERT_EQUAL(ss.started, 1);
	CU_ASSERT_EQUAL(ss.finished, 1);
	CU_ASSERT_EQUAL(ss.failed, 1);
	CU_ASSERT_EQUAL(ss.mean_runtime_ms, 0); /* no runtime sample */
	CU_ASSERT_EQUAL(ss.running, 0);
	struct book_status st = status_of(&f);
	CU_ASSERT_EQUAL(st.finished, 1);
	CU_ASSERT_EQUAL(st.receipts, 0);
	CU_ASSERT_EQUAL(st.handler_pids[1], 0);
	/* purging it again changes nothing: no second DONE */
	fx_log_clear(&f);
	CU_ASSERT_EQUAL(fx_purge(&f, 1, pg, 4), 0);
	fx_pump(&f);
	CU_ASSERT_EQUAL(f.nlog, 0);
	checked(&f);
	deliver(&f, r, "");
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 0);
	OK(fx_want(&f, a, "j", 0, 0, 0)); /* the client requeues it */
	done(&f);
}

static void test_purge_lost_owner_on_purged_handler(void)
{
	/* the owner conn died with the runner; the client's other conn adopts
	 * the lost job and gets its DONE, once, even through a newer conn on
	 * the same dead handler */
	struct fx f;
	struct book_ref c1, c2, c3, r1, r2, r3, oc;
	uint32_t oh;
	int32_t pg[4];
	mk(&f, 4, 1);
	OK(fx_open(&f, 1, "N", 0, &c1));
	OK(fx_open(&f, 2, "N", 0, &c2));
	OK(fx_open(&f, 1, "N", 0, &c3)); /* the newest, on h1 too */
	OK(fx_want(&f, c1, "j1", 0, 0, 0));
	OK(fx_want(&f, c1, "j2", 0, 0, 0));
	OK(fx_want(&f, c2, "j3", 0, 0, 0));
	r1 = run_on(&f, c1, "j1", 1); /* lost, owner on h1 */
	r2 = run_on(&f, c1, "j2", 0); /* survives, owner on h1 */
	r3 = run_on(&f, c2, "j3", 1); /* lost, owner on h2 */
	fx_lock(&f);
	book_job_set_pgid(f.b, r1, 11);
	book_job_set_pgid(f.b, r3, 33);
	fx_unlock(&f);
	fx_log_clear(&f);
	CU_ASSERT_EQUAL(fx_purge(&f, 1, pg, 4), 2);
	CU_ASSERT_EQUAL(pg[0], 11);
	CU_ASSERT_EQUAL(pg[1], 33);
	CU_ASSERT_EQUAL(f.mask & 2, 0);
	CU_ASSERT(f.mask & 4);
	fx_pump(&f);
	for (size_t i = 0; i < f.nlog; i++)
		CU_ASSERT(f.log[i].handler != 1);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 2);
	CU_ASSERT_EQUAL(dones(&f, "j1", 2), 1);
	CU_ASSERT_EQUAL(dones(&f, "j3", 2), 1);
	done_to(&f, "j1", c2, 2, r1);
	done_to(&f, "j3", c2, 2, r3);
	is_lost(&f, r1);
	is_lost(&f, r3);
	fx_lock(&f);
	OK(book_job_owner(f.b, r2, &oc, &oh)); /* the survivor reports to c2 */
	fx_unlock(&f);
	CU_ASSERT_EQUAL(oc.idx, c2.idx);
	CU_ASSERT_EQUAL(oh, 2);
	wg0(&f, 1, 0, 0);
	struct book_status st = status_of(&f);
	CU_ASSERT_EQUAL(st.connections, 1);
	CU_ASSERT_EQUAL(st.clients, 1);
	CU_ASSERT_EQUAL(st.finished, 2);
	checked(&f);
	fx_log_clear(&f);
	fx_pump(&f);
	CU_ASSERT_EQUAL(f.nlog, 0); /* once */
	deliver(&f, r1, "");
	deliver(&f, r3, "");
	OK(fx_finished(&f, r2, 0, 1, "r2"));
	fx_pump(&f);
	done_to(&f, "j2", c2, 2, r2);
	deliver(&f, r2, "r2");
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 1);
	done(&f);
}

static void test_purge_lost_named_grace(void)
{
	/* a named client whose only conn was on the dead handler keeps the
	 * lost job for its grace: no DONE until it is back, then one */
	struct fx f;
	struct book_ref n, n2, m, r, rm, oc;
	int32_t pg[4];
	mk(&f, 2, 1);
	OK(fx_open(&f, 1, "N", 0, &n));
	OK(fx_open(&f, 1, "M", 0, &m));
	OK(fx_want(&f, n, "j", 0, 0, 0));
	OK(fx_want(&f, m, "k", 0, 0, 0));
	r = run_on(&f, n, "j", 1);
	rm = run_on(&f, m, "k", 1);
	fx_log_clear(&f);
	CU_ASSERT_EQUAL(fx_purge(&f, 1, pg, 4), 0); /* no pgids known */
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 0);
	wg0(&f, 0, 0, 0);
	struct book_status st = status_of(&f);
	CU_ASSERT_EQUAL(st.clients, 0);
	CU_ASSERT_EQUAL(st.wants, 2);
	CU_ASSERT_EQUAL(st.finished, 2);
	fx_lock(&f);
	RC(book_job_owner(f.b, r, &oc, NULL), BOOK_E_STALE);
	CU_ASSERT_EQUAL(book_next_deadline(f.b), 0); /* graces begun without time */
	fx_unlock(&f);
	CU_ASSERT_EQUAL(fx_expire(&f, 1000), 0); /* ... start now: until 6000 */
	fx_lock(&f);
	CU_ASSERT_EQUAL(book_next_deadline(f.b), 6000);
	fx_unlock(&f);
	is_lost(&f, r);
	checked(&f);
	/* N is back within the grace, on another handler */
	OK(fx_open(&f, 3, "N", 5999, &n2));
	CU_ASSERT(f.mask & 8);
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 1);
	done_to(&f, "j", n2, 3, r);
	is_lost(&f, r);
	RC(fx_want(&f, n2, "j", 0, 0, 5999), BOOK_E_DUPLICATE);
	deliver(&f, r, "");
	OK(fx_want(&f, n2, "j", 0, 0, 5999)); /* requeued */
	/* M is not: its grace ends, the lost job goes without DONE */
	fx_log_clear(&f);
	CU_ASSERT_EQUAL(fx_expire(&f, 6000), 1);
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 0);
	struct book_outcome o;
	size_t len;
	RC(fx_done_read(&f, rm, &o, NULL, 0, &len), BOOK_E_STALE);
	st = status_of(&f);
	CU_ASSERT_EQUAL(st.finished, 0);
	CU_ASSERT_EQUAL(st.wants, 1);
	struct book_service_status ss = svc_of(&f, 0);
	CU_ASSERT_EQUAL(ss.finished, 2);
	CU_ASSERT_EQUAL(ss.failed, 2);
	done(&f);
}

static void test_purge_lost_anonymous(void)
{
	/* an anonymous client whose conn died with the runner, and an orphan
	 * (its client closed before): both freed, no DONE; the slots are
	 * re-granted */
	struct fx f;
	struct book_ref a, b, z, ra, rb;
	int32_t pg[4];
	mk(&f, 2, 1);
	OK(fx_open(&f, 1, NULL, 0, &a));
	OK(fx_open(&f, 0, NULL, 0, &b));
	OK(fx_open(&f, 2, NULL, 0, &z));
	OK(fx_want(&f, a, "x", 0, 0, 0));
	OK(fx_want(&f, b, "y", 0, 0, 0));
	OK(fx_want(&f, z, "z1", 0, 0, 0));
	OK(fx_want(&f, z, "z2", 0, 0, 0));
	ra = run_on(&f, a, "x", 1);
	rb = run_on(&f, b, "y", 1);
	fx_lock(&f);
	book_job_set_pgid(f.b, ra, 21);
	book_job_set_pgid(f.b, rb, 22);
	fx_unlock(&f);
	fx_close(&f, b, 10); /* y: an orphan, CANCEL to h1 */
	fx_log_clear(&f);
	CU_ASSERT_EQUAL(fx_purge(&f, 1, pg, 4), 2);
	CU_ASSERT_EQUAL(pg[0], 21);
	CU_ASSERT_EQUAL(pg[1], 22);
	CU_ASSERT_EQUAL(f.mask & 2, 0);
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 0);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_CANCEL, NULL), 0);
	SEQ_EQ(offers(&f, 0), "z1,z2");
	wg0(&f, 0, 2, 0);
	struct book_outcome o;
	size_t len;
	RC(fx_done_read(&f, ra, &o, NULL, 0, &len), BOOK_E_STALE);
	RC(fx_done_read(&f, rb, &o, NULL, 0, &len), BOOK_E_STALE);
	RC(fx_finished(&f, ra, 0, 1, NULL), BOOK_E_STALE);
	struct book_status st = status_of(&f);
	CU_ASSERT_EQUAL(st.wants, 2);
	CU_ASSERT_EQUAL(st.finished, 0);
	CU_ASSERT_EQUAL(st.clients, 1);
	struct book_service_status ss = svc_of(&f, 0);
	CU_ASSERT_EQUAL(ss.finished, 2);
	CU_ASSERT_EQUAL(ss.failed, 2);
	done(&f);
}

/* Repair after impossible corruption of receipt ownership: every slot ends
 * with one owner, the loser keeps its compact outcome, flagged. */
static void test_repair_receipt_claims(void)
{
	struct fx f;
	struct book_ref a, r[4];
	char id[8], buf[32];
	size_t len;
	struct book_outcome o;
	mk(&f, 4, 1);
	OK(fx_open(&f, 0, NULL, 0, &a));
	for (int i = 0; i < 4; i++) {
		snprintf(id, sizeof id, "j%d", i);
		OK(fx_want(&f, a, id, 0, 0, 0));
		r[i] = run_on(&f, a, id, 1);
	}
	OK(fx_finished(&f, r[0], 0, 1, "zero"));
	OK(fx_finished(&f, r[1], 0, 1, "one"));
	OK(fx_finished(&f, r[2], 0, 1, "two"));
	fx_lock(&f);
	struct bk_want *w0 = bk_want(f.b, r[0].idx), *w1 = bk_want(f.b, r[1].idx);
	struct bk_want *w2 = bk_want(f.b, r[2].idx), *w3 = bk_want(f.b, r[3].idx);
	w1->receipt = w0->receipt;            /* a second claim (j1 is newer) */
	w2->receipt = f.lim.max_receipts + 3; /* out of range */
	w3->receipt = 1;                      /* RUNNING with a slot */
	char why[256];
	CU_ASSERT_EQUAL(book_check(f.b, why, sizeof why), -1);
	book_repair(f.b);
	int rc = book_check(f.b, why, sizeof why);
	if (rc)
		printf("\n  %s\n", why);
	CU_ASSERT_EQUAL(rc, 0);
	struct book_status st;
	book_status(f.b, &st);
	CU_ASSERT_EQUAL(st.receipts, 1);
	fx_unlock(&f);
	OK(fx_done_read(&f, r[0], &o, buf, sizeof buf, &len));
	CU_ASSERT_STRING_EQUAL(buf, "zero");
	CU_ASSERT_EQUAL(o.receipt_lost, 0);
	OK(fx_done_read(&f, r[1], &o, buf, sizeof buf, &len));
	CU_ASSERT_EQUAL(len, 0);
	CU_ASSERT_EQUAL(o.receipt_lost, 1);
	OK(fx_done_read(&f, r[2], &o, buf, sizeof buf, &len));
	CU_ASSERT_EQUAL(len, 0);
	CU_ASSERT_EQUAL(o.receipt_lost, 1);
	OK(fx_finished(&f, r[3], 0, 1, "three"));
	OK(fx_done_read(&f, r[3], &o, buf, sizeof buf, &len));
	CU_ASSERT_STRING_EQUAL(buf, "three");
	/* the DONEs pending before the repair are still pending, once each */
	fx_log_clear(&f);
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 4);
	for (int i = 0; i < 4; i++) {
		snprintf(id, sizeof id, "j%d", i);
		CU_ASSERT_EQUAL(dones(&f, id, 0), 1);
	}
	for (int i = 0; i < 4; i++)
		OK(fx_delivered(&f, r[i]));
	CU_ASSERT_EQUAL(status_of(&f).receipts, 0);
	done(&f);
}

/* ---- crash repair at every fault point ---- */

static const char *fault_target;

static void fault_hook(const char *point)
{
	if (fault_target && strcmp(point, fault_target) == 0)
		_exit(0);
}

struct fctx {
	struct book_ref a, b, n, r, wref;
	uint64_t tok;
};

/* Runs op in a child that crashes at `point` holding the lock; the parent
 * then must get 1 from book_lock and a consistent book. */
static void crash_at(struct fx *f, const char *point, void (*op)(struct fx *, struct fctx *),
		     struct fctx *cx)
{
	fflush(stdout);
	pid_t pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		fault_target = point;
		book_set_fault_hook(fault_hook);
		if (book_lock(f->b) < 0)
			_exit(2);
		op(f, cx);
		_exit(3); /* the point was not reached */
	}
	int status = 0;
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
	CU_ASSERT(WIFEXITED(status));
	if (WEXITSTATUS(status) != 0)
		printf("\n  %s: child exited %d\n", point, WEXITSTATUS(status));
	CU_ASSERT_EQUAL(WEXITSTATUS(status), 0);
	fx_lock(f);
	CU_ASSERT_EQUAL(f->last_lock, 1);
	char why[256];
	int rc = book_check(f->b, why, sizeof why);
	if (rc)
		printf("\n  after %s: %s\n", point, why);
	CU_ASSERT_EQUAL(rc, 0);
	struct book_status st;
	book_status(f->b, &st);
	CU_ASSERT(st.repairs >= 1);
	fx_unlock(f);
	fx_lock(f);
	CU_ASSERT_EQUAL(f->last_lock, 0); /* consistent again */
	fx_unlock(f);
}

/* common start: a (h0) has o offered (1 slot) and p parked; b (h1) has q
 * parked.  The OFFER of o was taken. */
static void fault_setup(struct fx *f, struct fctx *cx)
{
	mk(f, 1, 1);
	memset(cx, 0, sizeof *cx);
	OK(fx_open(f, 0, NULL, 0, &cx->a));
	OK(fx_open(f, 1, NULL, 0, &cx->b));
	OK(fx_want(f, cx->a, "o", 0, 0, 0));
	OK(fx_want(f, cx->a, "p", 0, 0, 0));
	OK(fx_want(f, cx->b, "q", 0, 0, 0));
	cx->tok = fx_token(f, "o");
	cx->wref = fx_find(f, MAIL_OFFER, "o")->m.want;
	fx_log_clear(f);
}

static void wg0(struct fx *f, uint32_t running, uint32_t offered, uint32_t waiting)
{
	struct book_wg_status st;
	fx_wg(f, 0, &st);
	CU_ASSERT_EQUAL(st.running, running);
	CU_ASSERT_EQUAL(st.offered, offered);
	CU_ASSERT_EQUAL(st.waiting, waiting);
}

static void run_finish_o(struct fx *f, struct fctx *cx)
{
	struct book_ref r;
	OK(fx_accept(f, cx->a, "o", cx->tok, 0, &r));
	OK(fx_finish(f, r, 10, 0));
}

static void op_open(struct fx *f, struct fctx *cx)
{
	book_conn_open(f->b, 2, "newcomer", 0, &cx->n);
}

static void op_close_a(struct fx *f, struct fctx *cx)
{
	book_conn_close(f->b, cx->a, 10);
}

static void op_want(struct fx *f, struct fctx *cx)
{
	book_want(f->b, cx->b, "w", 0, 0, 10);
}

static void op_unwant_o(struct fx *f, struct fctx *cx)
{
	book_unwant(f->b, cx->a, "o");
}

static void op_accept_o(struct fx *f, struct fctx *cx)
{
	book_accept(f->b, cx->a, "o", cx->tok, 0, &cx->r);
}

static void op_decline_o(struct fx *f, struct fctx *cx)
{
	book_decline(f->b, cx->a, "o", cx->tok);
}

static void op_finish_r(struct fx *f, struct fctx *cx)
{
	struct book_outcome o = { .exit_code = 0, .duration_ms = 10 };
	book_job_finished(f->b, cx->r, &o, NULL, 0);
}

static void op_finished_r(struct fx *f, struct fctx *cx)
{
	struct book_outcome o = { .exit_code = 0, .duration_ms = 10 };
	book_job_finished(f->b, cx->r, &o, "receipt-o", 9);
}

static void op_delivered_r(struct fx *f, struct fctx *cx)
{
	book_done_delivered(f->b, cx->r);
}

static void op_close_n(struct fx *f, struct fctx *cx)
{
	book_conn_close(f->b, cx->n, 10);
}

static void op_expire(struct fx *f, struct fctx *cx)
{
	book_expire(f->b, 100000);
}

static void op_purge1(struct fx *f, struct fctx *cx)
{
	int32_t pg[4];
	book_purge_handler(f->b, 1, pg, 4);
}

static void op_take_mail0(struct fx *f, struct fctx *cx)
{
	struct book_mail m[4];
	book_mail_take(f->b, 0, m, 4);
}

static void op_nothing(struct fx *f, struct fctx *cx)
{
	_exit(0); /* crash holding the lock, between operations */
}

static void test_fault_open(void)
{
	struct fx f;
	struct fctx cx;
	fault_setup(&f, &cx);
	crash_at(&f, "open.mid", op_open, &cx);
	struct book_status st;
	fx_lock(&f);
	book_status(f.b, &st);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(st.connections, 2);
	CU_ASSERT_EQUAL(st.clients, 2);
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_HELLO, NULL), 2); /* repair re-sends HELLO */
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_OFFER, NULL), 0); /* o's OFFER was taken */
	OK(fx_open(&f, 2, "newcomer", 0, &cx.n));
	OK(fx_want(&f, cx.n, "n1", 0, 0, 0));
	wg0(&f, 0, 1, 3);
	done(&f);
}

static void test_fault_close(void)
{
	struct fx f;
	struct fctx cx;
	fault_setup(&f, &cx);
	crash_at(&f, "close.mid", op_close_a, &cx);
	SEQ_EQ(offers(&f, 0), "q"); /* a's wants gone, q granted */
	wg0(&f, 0, 1, 0);
	RC(fx_want(&f, cx.a, "x", 0, 0, 0), BOOK_E_STALE);
	run_finish(&f, cx.b, "q");
	wg0(&f, 0, 0, 0);
	done(&f);
}

static void test_fault_want(void)
{
	struct fx f;
	struct fctx cx;
	fault_setup(&f, &cx);
	crash_at(&f, "want.mid", op_want, &cx);
	wg0(&f, 0, 1, 3);
	RC(fx_want(&f, cx.b, "w", 0, 0, 0), BOOK_E_DUPLICATE); /* w is indexed */
	run_finish_o(&f, &cx);
	run_finish(&f, cx.b, "q");
	run_finish(&f, cx.a, "p");
	run_finish(&f, cx.b, "w");
	SEQ_EQ(offers(&f, 0), "q,p,w");
	wg0(&f, 0, 0, 0);
	done(&f);
}

static void test_fault_grant(void)
{
	struct fx f;
	struct fctx cx;
	fault_setup(&f, &cx);
	OK(fx_accept(&f, cx.a, "o", cx.tok, 0, &cx.r));
	crash_at(&f, "grant.mid", op_finish_r, &cx); /* finish frees, grant crashes */
	/* q was being offered: its OFFER is delivered exactly once */
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_OFFER, "q"), 1);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_OFFER, NULL), 1);
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_OFFER, "q"), 1);
	wg0(&f, 0, 1, 1);
	run_finish(&f, cx.b, "q");
	SEQ_EQ(offers(&f, 0), "q,p");
	done(&f);
}

/* A crash in a grant before the offer's state write: the parked want
 * keeps its parked_at, whose bytes the deadline takes only once it is
 * OFFERED, so its slot wait at the repaired book's grant runs from its
 * WANT (before, the deadline written ahead of the state was read as the
 * arrival: 1000 ms instead of 6900). */
static void op_close_a_5000(struct fx *f, struct fctx *cx)
{
	book_conn_close(f->b, cx->a, 5000);
}

static void test_fault_grant_state(void)
{
	struct fx f;
	struct fctx cx;
	struct book_service_status sv;

	mk(&f, 1, 1);
	memset(&cx, 0, sizeof cx);
	OK(fx_open(&f, 0, NULL, 0, &cx.a));
	OK(fx_open(&f, 1, NULL, 0, &cx.b));
	OK(fx_want(&f, cx.a, "o", 0, 0, 0));               /* offered at once: waited 0 */
	OK(fx_want(&f, cx.b, "q", 0, 0, 100));             /* parked at 100 */
	crash_at(&f, "grant.state", op_close_a_5000, &cx); /* a's close grants q */
	fx_expire(&f, 7000); /* the repair offered q again: stamped now */
	wg0(&f, 0, 1, 0);
	fx_lock(&f);
	book_service_status(f.b, 0, &sv);
	fx_unlock(&f);
	uint64_t n = 0;
	for (unsigned i = 0; i < HIST_BUCKETS; i++)
		n += sv.slot_wait.n[i];
	CU_ASSERT_EQUAL(n, 2);
	CU_ASSERT_EQUAL(sv.slot_wait.sum_ms, 6900);
	done(&f);
}

static void test_fault_unwant(void)
{
	struct fx f;
	struct fctx cx;
	fault_setup(&f, &cx);
	crash_at(&f, "unwant.mid", op_unwant_o, &cx);
	struct book_position p;
	RC(fx_query(&f, cx.a, "o", &p), BOOK_E_UNKNOWN_JOB);
	SEQ_EQ(offers(&f, 0), "q"); /* b never served: q first */
	wg0(&f, 0, 1, 1);
	done(&f);
}

static void test_fault_accept(void)
{
	struct fx f;
	struct fctx cx;
	fault_setup(&f, &cx);
	crash_at(&f, "accept.mid", op_accept_o, &cx);
	wg0(&f, 1, 0, 2);
	CU_ASSERT_EQUAL(pos_of(&f, cx.a, "o").state, WANT_RUNNING);
	/* the want ref of the OFFER still names the job */
	struct book_ref oc;
	uint32_t oh;
	fx_lock(&f);
	OK(book_job_owner(f.b, cx.wref, &oc, &oh));
	fx_unlock(&f);
	CU_ASSERT_EQUAL(oc.idx, cx.a.idx);
	CU_ASSERT_EQUAL(oh, 0);
	OK(fx_finish(&f, cx.wref, 1, 0));
	SEQ_EQ(offers(&f, 0), "q");
	done(&f);
}

static void test_fault_decline(void)
{
	struct fx f;
	struct fctx cx;
	fault_setup(&f, &cx);
	crash_at(&f, "decline.mid", op_decline_o, &cx);
	SEQ_EQ(offers(&f, 0), "q");
	wg0(&f, 0, 1, 1);
	done(&f);
}

static void test_fault_finished(void)
{
	struct fx f;
	struct fctx cx;
	fault_setup(&f, &cx);
	OK(fx_accept(&f, cx.a, "o", cx.tok, 0, &cx.r));
	crash_at(&f, "finished.mid", op_finished_r, &cx);
	/* o is finished with its receipt; its DONE goes out exactly once; its
	 * slot went to q */
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, "o", 0), 1);
	done_to(&f, "o", cx.a, 0, cx.r);
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, "o", -1), 1);
	SEQ_EQ(offers(&f, 0), "q");
	wg0(&f, 0, 1, 1);
	CU_ASSERT_EQUAL(pos_of(&f, cx.a, "o").state, WANT_FINISHED);
	struct book_service_status ss;
	fx_lock(&f);
	book_service_status(f.b, 0, &ss);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(ss.finished, 1);
	CU_ASSERT_EQUAL(ss.running, 0);
	deliver(&f, cx.r, "receipt-o");
	done(&f);
}

static void test_fault_finished_orphan(void)
{
	/* an orphan's end: freed, nobody told */
	struct fx f;
	struct fctx cx;
	fault_setup(&f, &cx);
	OK(fx_accept(&f, cx.a, "o", cx.tok, 2, &cx.r));
	fx_close(&f, cx.a, 0); /* anonymous: o orphaned; q offered */
	fx_pump(&f);
	fx_log_clear(&f);
	crash_at(&f, "finished.mid", op_finished_r, &cx);
	struct book_outcome o;
	size_t len;
	RC(fx_done_read(&f, cx.r, &o, NULL, 0, &len), BOOK_E_STALE);
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 0);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_CANCEL, NULL), 0);
	wg0(&f, 0, 1, 0);
	CU_ASSERT_EQUAL(status_of(&f).receipts, 0);
	done(&f);
}

static void test_fault_delivered(void)
{
	struct fx f;
	struct fctx cx;
	fault_setup(&f, &cx);
	OK(fx_accept(&f, cx.a, "o", cx.tok, 0, &cx.r));
	OK(fx_finished(&f, cx.r, 0, 1, "receipt-o"));
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, "o", 0), 1);
	crash_at(&f, "delivered.mid", op_delivered_r, &cx);
	struct book_outcome o;
	size_t len;
	RC(fx_done_read(&f, cx.r, &o, NULL, 0, &len), BOOK_E_STALE);
	RC(fx_delivered(&f, cx.r), BOOK_E_STALE);
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, "o", -1), 1); /* not again */
	struct book_status st = status_of(&f);
	CU_ASSERT_EQUAL(st.receipts, 0);
	CU_ASSERT_EQUAL(st.finished, 0);
	OK(fx_want(&f, cx.a, "o", 0, 0, 0)); /* the id is free */
	done(&f);
}

static void test_fault_mail_done(void)
{
	struct fx f;
	struct fctx cx;
	fault_setup(&f, &cx);
	OK(fx_accept(&f, cx.a, "o", cx.tok, 0, &cx.r));
	OK(fx_finished(&f, cx.r, 0, 1, "receipt-o")); /* DONE for h0 (and OFFER q for h1) */
	crash_at(&f, "mail.mid", op_take_mail0, &cx);
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, "o", 0), 1); /* not lost, not doubled */
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, "o", -1), 1);
	deliver(&f, cx.r, "receipt-o");
	done(&f);
}

static void test_fault_close_rehomes_done(void)
{
	/* the owner conn closes with a DONE taken but not delivered; the close
	 * crashes after freeing the conn: repair gives the job to the client's
	 * other conn and mails it there, once */
	struct fx f;
	struct fctx cx;
	struct book_ref n2;
	fault_setup(&f, &cx);
	OK(fx_open(&f, 2, "N", 0, &cx.n));
	OK(fx_open(&f, 3, "N", 0, &n2));
	OK(fx_unwant(&f, cx.a, "o"));                     /* q offered to h1 */
	OK(fx_decline(&f, cx.b, "q", fx_token(&f, "q"))); /* p offered to h0 */
	OK(fx_unwant(&f, cx.a, "p"));
	OK(fx_want(&f, cx.n, "j", 0, 0, 0));
	cx.r = run_on(&f, cx.n, "j", 1);
	OK(fx_finished(&f, cx.r, 0, 1, "rj"));
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, "j", 2), 1);
	fx_log_clear(&f);
	crash_at(&f, "close.mid", op_close_n, &cx);
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, "j", 3), 1);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 1);
	done_to(&f, "j", n2, 3, cx.r);
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 1);
	deliver(&f, cx.r, "rj");
	done(&f);
}

static void test_fault_grace_finished(void)
{
	/* the grace ends while a job of the client is finished and another
	 * runs; crash in the middle of ending the client */
	struct fx f;
	struct fctx cx;
	struct book_ref r2;
	fault_setup(&f, &cx);
	OK(fx_open(&f, 2, "N", 0, &cx.n));
	OK(fx_want(&f, cx.n, "j", 2, 0, 0)); /* wg1 */
	cx.r = run_on(&f, cx.n, "j", 2);
	OK(fx_finished(&f, cx.r, 0, 1, "rj")); /* finished first: first on its list */
	OK(fx_want(&f, cx.n, "k", 2, 0, 0));
	r2 = run_on(&f, cx.n, "k", 3);
	fx_close(&f, cx.n, 0); /* grace until 5000 */
	fx_log_clear(&f);
	crash_at(&f, "grace.mid", op_expire, &cx);
	/* j was forgotten when the crash came; the client is still in its
	 * (overdue) grace with k: the next expiry ends it */
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_CANCEL, "k"), 0);
	fx_lock(&f);
	CU_ASSERT_EQUAL(book_next_deadline(f.b), 5000);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(fx_expire(&f, 100000), 1);
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 0);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_CANCEL, "k"), 1);
	struct book_outcome o;
	size_t len;
	RC(fx_done_read(&f, cx.r, &o, NULL, 0, &len), BOOK_E_STALE);
	struct book_status st = status_of(&f);
	CU_ASSERT_EQUAL(st.finished, 0);
	CU_ASSERT_EQUAL(st.receipts, 0);
	OK(fx_finished(&f, r2, 0, 1, NULL)); /* the orphan ends */
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 0);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_CANCEL, "k"), 1);
	done(&f);
}

static void test_fault_purge_finished(void)
{
	/* purge of a handler that ran one job (finished) and held the owner
	 * conn of another (finished, DONE taken): crash in the middle */
	struct fx f;
	struct fctx cx;
	struct book_ref n2, r2;
	int32_t pg[4];
	fault_setup(&f, &cx);
	OK(fx_open(&f, 1, "N", 0, &cx.n));
	OK(fx_open(&f, 2, "N", 0, &n2));
	OK(fx_want(&f, cx.n, "j", 2, 0, 0));
	cx.r = run_on(&f, cx.n, "j", 1); /* runs on h1 */
	OK(fx_finished(&f, cx.r, 0, 1, "rj"));
	fx_pump(&f); /* h1 took the DONE */
	OK(fx_want(&f, n2, "k", 2, 0, 0));
	r2 = run_on(&f, n2, "k", 1);
	OK(fx_finished(&f, r2, 0, 1, "rk")); /* DONE pending at h2 */
	fx_log_clear(&f);
	crash_at(&f, "purge.mid", op_purge1, &cx);
	CU_ASSERT_EQUAL(fx_purge(&f, 1, pg, 4), 0); /* finish the purge */
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, "j", 2), 1); /* re-homed to n2 */
	CU_ASSERT_EQUAL(dones(&f, "k", 2), 1);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 2);
	done_to(&f, "j", n2, 2, cx.r);
	deliver(&f, cx.r, "rj");
	deliver(&f, r2, "rk");
	done(&f);
}

static void test_fault_expire(void)
{
	struct fx f;
	struct fctx cx;
	fault_setup(&f, &cx);
	crash_at(&f, "expire.mid", op_expire, &cx);
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_OFFER_EXPIRED, "o"), 1);
	CU_ASSERT_EQUAL(mail_handler(&f, MAIL_OFFER_EXPIRED, "o"), 0);
	SEQ_EQ(offers(&f, 0), "q");
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_OFFER_EXPIRED, "o"), 1);
	wg0(&f, 0, 1, 1);
	/* q's offer was granted in repair without time: stamped by expire */
	CU_ASSERT_EQUAL(fx_expire(&f, 100000), 0);
	CU_ASSERT_EQUAL(fx_expire(&f, 101000), 1);
	SEQ_EQ(offers(&f, 0), "q,p");
	done(&f);
}

static void test_fault_grace(void)
{
	struct fx f;
	struct fctx cx;
	fault_setup(&f, &cx);
	OK(fx_open(&f, 2, "N", 0, &cx.n));
	OK(fx_unwant(&f, cx.a, "o")); /* q offered */
	OK(fx_accept(&f, cx.b, "q", fx_token(&f, "q"), 1, &cx.r));
	OK(fx_want(&f, cx.n, "j", 2, 0, 0)); /* wg1: offered */
	OK(fx_take_job(&f, cx.n, "j", &cx.r));
	fx_close(&f, cx.n, 0); /* grace until 5000 */
	fx_log_clear(&f);
	crash_at(&f, "grace.mid", op_expire, &cx);
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_CANCEL, "j"), 1);
	fx_lock(&f);
	struct book_status st;
	book_status(f.b, &st);
	CU_ASSERT_EQUAL(book_next_deadline(f.b), UINT64_MAX);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(st.clients, 2);
	OK(fx_finish(&f, cx.r, 1, 0));
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_CANCEL, "j"), 1);
	done(&f);
}

static void test_fault_purge(void)
{
	struct fx f;
	struct fctx cx;
	int32_t pg[4];
	fault_setup(&f, &cx);
	OK(fx_unwant(&f, cx.a, "o")); /* q (h1) offered */
	OK(fx_accept(&f, cx.b, "q", fx_token(&f, "q"), 1, &cx.r));
	fx_log_clear(&f);
	crash_at(&f, "purge.mid", op_purge1, &cx);
	wg0(&f, 0, 1, 0);                           /* q freed, p granted by repair */
	CU_ASSERT_EQUAL(fx_purge(&f, 1, pg, 4), 0); /* finish the purge */
	struct book_status st;
	fx_lock(&f);
	book_status(f.b, &st);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(st.connections, 1);
	CU_ASSERT_EQUAL(st.finished, 0); /* q was lost, its client gone */
	SEQ_EQ(offers(&f, 0), "p");
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 0);
	done(&f);
}

static void test_fault_purge_lost(void)
{
	/* crash after the runner's jobs ended as lost, before its conns were
	 * dropped: the repaired book holds their outcomes and no slot, and
	 * finishing the purge sends each DONE once, to the conn that lives */
	struct fx f;
	struct fctx cx;
	struct book_ref a, c2, r1, r2, rm;
	int32_t pg[4];
	struct book_wg_status ws;
	mk(&f, 1, 3);
	memset(&cx, 0, sizeof cx);
	OK(fx_open(&f, 0, NULL, 0, &a));
	OK(fx_open(&f, 1, "N", 0, &cx.n)); /* owner of j1, dies with h1 */
	OK(fx_open(&f, 2, "N", 0, &c2));
	OK(fx_want(&f, cx.n, "j1", 2, 0, 0));
	OK(fx_want(&f, c2, "j2", 2, 0, 0));
	OK(fx_want(&f, c2, "m", 2, 0, 0));
	OK(fx_want(&f, a, "x", 2, 0, 0)); /* parked: wg1 is full */
	r1 = run_on(&f, cx.n, "j1", 1);
	r2 = run_on(&f, c2, "j2", 1);
	rm = run_on(&f, c2, "m", 2); /* survives */
	fx_lock(&f);
	book_job_set_pgid(f.b, r1, 41);
	book_job_set_pgid(f.b, r2, 42);
	fx_unlock(&f);
	fx_log_clear(&f);
	crash_at(&f, "purge.mid", op_purge1, &cx);
	/* no slot leaked: the lost jobs hold none, x got one in the repair */
	fx_wg(&f, 1, &ws);
	CU_ASSERT_EQUAL(ws.running, 1);
	CU_ASSERT_EQUAL(ws.offered, 1);
	CU_ASSERT_EQUAL(ws.waiting, 0);
	CU_ASSERT_EQUAL(status_of(&f).finished, 2);
	is_lost(&f, r1);
	is_lost(&f, r2);
	CU_ASSERT_EQUAL(fx_purge(&f, 1, pg, 4), 0); /* finish the purge */
	fx_pump(&f);
	for (size_t i = 0; i < f.nlog; i++)
		CU_ASSERT(f.log[i].handler != 1);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 2);
	CU_ASSERT_EQUAL(dones(&f, "j1", 2), 1);
	CU_ASSERT_EQUAL(dones(&f, "j2", 2), 1);
	done_to(&f, "j1", c2, 2, r1);
	done_to(&f, "j2", c2, 2, r2);
	SEQ_EQ(offers(&f, 0), "x");
	struct book_service_status ss = svc_of(&f, 2);
	CU_ASSERT_EQUAL(ss.finished, 2);
	CU_ASSERT_EQUAL(ss.failed, 2);
	checked(&f);
	fx_log_clear(&f);
	fx_pump(&f);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 0);
	deliver(&f, r1, "");
	deliver(&f, r2, "");
	OK(fx_finish(&f, rm, 1, 0));
	done(&f);
}

static void test_fault_mail(void)
{
	struct fx f;
	struct fctx cx;
	fault_setup(&f, &cx);
	OK(fx_unwant(&f, cx.a, "o"));                     /* q offered (h1) */
	OK(fx_decline(&f, cx.b, "q", fx_token(&f, "q"))); /* p offered to h0 */
	fx_log_clear(&f);
	crash_at(&f, "mail.mid", op_take_mail0, &cx);
	SEQ_EQ(offers(&f, 0), "p"); /* not lost, not doubled */
	SEQ_EQ(offers(&f, 0), "p");
	done(&f);
}

static void test_fault_repair(void)
{
	struct fx f;
	struct fctx cx;
	fault_setup(&f, &cx);
	/* a first crash, then a crash inside the repair, then a good repair */
	pid_t pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		book_lock(f.b);
		fault_target = "want.mid";
		book_set_fault_hook(fault_hook);
		book_want(f.b, cx.b, "w", 0, 0, 10);
		_exit(3);
	}
	int status;
	waitpid(pid, &status, 0);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	crash_at(&f, "repair.mid", op_nothing, &cx);
	wg0(&f, 0, 1, 3);
	struct book_status st;
	fx_lock(&f);
	book_status(f.b, &st);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(st.repairs, 1); /* the crashed repair did not count */
	run_finish_o(&f, &cx);
	SEQ_EQ(offers(&f, 0), "q");
	done(&f);
}

static void test_fault_between_ops(void)
{
	struct fx f;
	struct fctx cx;
	fault_setup(&f, &cx);
	crash_at(&f, "none", op_nothing, &cx);
	wg0(&f, 0, 1, 2);
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_OFFER, NULL), 0);
	done(&f);
}

/* Repair is a no-op on a healthy book apart from HELLO. */
static void test_repair_idempotent(void)
{
	struct fx f;
	struct fctx cx;
	fault_setup(&f, &cx);
	OK(fx_open(&f, 2, "N", 0, &cx.n));
	OK(fx_want(&f, cx.n, "j", 2, 3, 0));
	OK(fx_want(&f, cx.n, "k", 2, 3, 0));
	/* a finished job whose DONE was taken, one whose DONE is pending */
	struct book_ref rj, rk;
	rj = run_on(&f, cx.n, "j", 3);
	OK(fx_finished(&f, rj, 0, 1, "rj"));
	rk = run_on(&f, cx.n, "k", 3);
	OK(fx_finished(&f, rk, 0, 1, "rk"));
	fx_log_clear(&f);
	fx_lock(&f);
	book_repair(f.b);
	book_repair(f.b);
	fx_unlock(&f);
	checked(&f);
	wg0(&f, 0, 1, 2);
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_OFFER, NULL), 0);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_HELLO, NULL), 3);
	CU_ASSERT_EQUAL(dones(&f, NULL, -1), 1);
	CU_ASSERT_EQUAL(dones(&f, "k", 2), 1);
	deliver(&f, rj, "rj");
	deliver(&f, rk, "rk");
	run_finish_o(&f, &cx);
	run_finish(&f, cx.b, "q");
	SEQ_EQ(offers(&f, 0), "q,p");
	done(&f);
}

int main(void)
{
	struct {
		const char *name;
		CU_TestFunc fn;
	} tests[] = {
		{ "siphash reference vectors", test_siphash_vectors },
		{ "histogram buckets: le, +Inf", test_hist_buckets },
		{ "init limits", test_init_limits },
		{ "no lock figures in a normal build", test_no_lock_figures },
		{ "prepared hashes: only their own key", test_prepared_hashes_own_key },
		{ "priority beats arrival", test_priority_beats_arrival },
		{ "round robin: fresh conn first", test_round_robin_fresh_conn },
		{ "ties by arrival, FIFO per conn", test_tie_by_arrival_and_fifo },
		{ "one conn's lanes share its turn", test_lanes_share_the_turn },
		{ "round robin shares over 9000 grants", test_round_robin_shares },
		{ "waitgroups independent", test_waitgroups_independent },
		{ "console: list wants", test_list_wants },
		{ "console: positions of a listing, one replay", test_list_positions_batch },
		{ "console: the listing is the head of the line", test_list_head_of_line },
		{ "console: clients per handler", test_handler_clients },
		{ "console: failures ring, hand-overs", test_failures_and_handovers },
		{ "console: cancel by ref, handler starts", test_cancel_ref_and_starts },
		{ "unwant in every state", test_unwant_states },
		{ "decline", test_decline },
		{ "accept states, stale token", test_accept_states_and_stale_token },
		{ "expiry re-grants", test_expiry_regrants },
		{ "expired mail in place, record reuse", test_expired_mail_in_place_and_reuse },
		{ "limits", test_limits },
		{ "hash indexes full (4/3 slots per entry)", test_index_full },
		{ "duplicates", test_duplicates },
		{ "conn close", test_conn_close },
		{ "purge handler", test_purge_handler },
		{ "resume grace", test_resume_grace },
		{ "grace ends with its jobs", test_grace_ends_with_its_jobs },
		{ "anonymous close cancels", test_anonymous_close_cancels },
		{ "query position", test_query_position },
		{ "eta from what holds the slots", test_eta_from_holders },
		{ "mail and mask", test_mail_and_mask },
		{ "mail pending: the look before the lock", test_mail_pending },
		{ "wake needed: only handlers marked asleep", test_wake_needed },
		{ "draining", test_draining },
		{ "stale refs", test_stale_refs },
		{ "time without now, stats", test_time_without_now },
		{ "many ids through the index", test_many_ids_index },
		{ "DONE to the runner's own handler", test_done_to_runner_handler },
		{ "DONE to another handler", test_done_to_other_handler },
		{ "owner closes before delivery", test_done_owner_closes_before_delivery },
		{ "resume within the grace gets the DONEs", test_done_resume_within_grace },
		{ "grace ends: finished jobs freed", test_done_grace_ends },
		{ "anonymous: finished jobs freed", test_done_anonymous },
		{ "receipt store", test_receipt_store },
		{ "duplicate, cancel, limits while finished",
		  test_duplicate_and_limits_while_finished },
		{ "purge of the runner keeps finished jobs", test_purge_runner_keeps_finished },
		{ "purge of the owner's handler re-homes", test_purge_owner_handler_rehomes },
		{ "protocol 2: ACK frees, a new conn adopts", test_ack_and_adopt },
		{ "protocol 2: adoption withdraws older conns' offers",
		  test_adopt_withdraws_older_offers },
		{ "protocol 2: unacknowledged DONEs count as jobs",
		  test_unacked_count_against_job_limit },
		{ "purge: lost job's DONE to the owner elsewhere",
		  test_purge_lost_owner_elsewhere },
		{ "purge: lost job adopted by another conn",
		  test_purge_lost_owner_on_purged_handler },
		{ "purge: lost job kept for the grace", test_purge_lost_named_grace },
		{ "purge: lost job of an anonymous client freed", test_purge_lost_anonymous },
		{ "fault open.mid", test_fault_open },
		{ "fault close.mid", test_fault_close },
		{ "fault want.mid", test_fault_want },
		{ "fault grant.mid", test_fault_grant },
		{ "fault grant.state: a parked want keeps its arrival", test_fault_grant_state },
		{ "fault unwant.mid", test_fault_unwant },
		{ "fault accept.mid", test_fault_accept },
		{ "fault decline.mid", test_fault_decline },
		{ "fault finished.mid", test_fault_finished },
		{ "fault finished.mid, orphan", test_fault_finished_orphan },
		{ "fault delivered.mid", test_fault_delivered },
		{ "fault mail.mid with a DONE", test_fault_mail_done },
		{ "fault close.mid re-homes a DONE", test_fault_close_rehomes_done },
		{ "fault grace.mid with a finished job", test_fault_grace_finished },
		{ "fault purge.mid with finished jobs", test_fault_purge_finished },
		{ "fault expire.mid", test_fault_expire },
		{ "fault grace.mid", test_fault_grace },
		{ "fault purge.mid", test_fault_purge },
		{ "fault purge.mid with lost jobs", test_fault_purge_lost },
		{ "fault mail.mid", test_fault_mail },
		{ "fault repair.mid", test_fault_repair },
		{ "crash between operations", test_fault_between_ops },
		{ "repair idempotent", test_repair_idempotent },
		{ "repair: receipt claims", test_repair_receipt_claims },
	};
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	CU_pSuite s = CU_add_suite("book", NULL, NULL);
	for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
		CU_add_test(s, tests[i].name, tests[i].fn);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
