/*
 * test_book.c - unit tests of the want-book (src/book/): the grant rule,
 * every request in every state, limits, connections and clients, the
 * resume grace, queue positions, mail, drain, stale refs, time, and crash
 * repair at every fault point.  Each test ends with book_check.
 */
#include "autoconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "book/book.h"
#include "book/book_siphash.h"
#include "book_fixture.h"

#define OK(x) CU_ASSERT_EQUAL((x), BOOK_OK)
#define RC(x, rc) CU_ASSERT_EQUAL((x), (rc))
/* a sequence of job ids, printed when it differs */
#define SEQ_EQ(got, want) do { \
	const char *g_ = (got); \
	if (strcmp(g_, (want)) != 0) \
		printf("\n  line %d: got \"%s\", want \"%s\"\n", __LINE__, g_, (want)); \
	CU_ASSERT_STRING_EQUAL(g_, (want)); \
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
	static char buf[4096];
	buf[0] = '\0';
	fx_pump(f);
	for (size_t i = from; i < f->nlog; i++) {
		if (f->log[i].m.kind != MAIL_OFFER)
			continue;
		if (buf[0])
			strcat(buf, ",");
		strcat(buf, f->log[i].m.job_id);
	}
	return buf;
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

/* Runs the job offered as `job` on conn c and finishes it at once. */
static void run_finish(struct fx *f, struct book_ref c, const char *job)
{
	struct book_ref r;
	OK(fx_take_job(f, c, job, &r));
	OK(fx_finish(f, r, 10, 0));
}

/* ---- primitives ---- */

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
	fx_limits(&l);
	struct book_topology t;
	uint32_t procs[1] = { 1 }, wgs[1] = { 1 };   /* service in a missing wg */
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
	SEQ_EQ(offers(&f, 0), "a0");   /* idle: granted at once */
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
	run_finish(&f, a, "a0");   /* a was just served: b's one want goes first */
	SEQ_EQ(offers(&f, 0), "a0,b0");
	OK(fx_want(&f, c, "c0", 0, 0, 2));   /* fresh conn: before a and b */
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
	OK(fx_want(&f, x, "x", 0, 0, 0));   /* holds the slot */
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

static void test_unwant_states(void)
{
	struct fx f;
	struct book_ref a, b, r;
	struct book_wg_status st;
	mk(&f, 1, 1);
	OK(fx_open(&f, 0, NULL, 0, &a));
	OK(fx_open(&f, 1, NULL, 0, &b));
	OK(fx_want(&f, a, "o", 0, 0, 0));      /* offered */
	OK(fx_want(&f, a, "p", 0, 0, 1));      /* parked */
	OK(fx_want(&f, b, "q", 0, 0, 2));      /* parked */
	OK(fx_unwant(&f, a, "p"));
	RC(fx_unwant(&f, a, "p"), BOOK_E_UNKNOWN_JOB);
	RC(fx_unwant(&f, b, "o"), BOOK_E_UNKNOWN_JOB);   /* other client's job */
	RC(fx_unwant(&f, a, "nope"), BOOK_E_UNKNOWN_JOB);
	fx_wg(&f, 0, &st);
	CU_ASSERT_EQUAL(st.waiting, 1);
	CU_ASSERT_EQUAL(st.offered, 1);
	uint64_t tok = fx_token(&f, "o");
	OK(fx_unwant(&f, a, "o"));             /* frees the slot: q next */
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
	RC(fx_decline(&f, b, "q", tok), BOOK_E_BAD_STATE);   /* parked: not offered */
	CU_ASSERT_EQUAL(pos_of(&f, a, "o").state, WANT_OFFERED);
	OK(fx_decline(&f, a, "o", tok));
	RC(fx_query(&f, a, "o", &p), BOOK_E_UNKNOWN_JOB);     /* the want is gone */
	RC(fx_decline(&f, a, "o", tok), BOOK_E_UNKNOWN_JOB);
	SEQ_EQ(offers(&f, 0), "o,q");
	uint64_t tq = fx_token(&f, "q");
	OK(fx_accept(&f, b, "q", tq, 1, &r));
	RC(fx_decline(&f, b, "q", tq), BOOK_E_BAD_STATE);     /* running */
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
	RC(fx_accept(&f, a, "p", 1, 0, &r), BOOK_E_BAD_STATE);   /* not offered */
	RC(fx_accept(&f, a, "o", fx_token(&f, "o"), 99, &r), BOOK_E_INVALID);
	uint64_t old = fx_token(&f, "o");
	CU_ASSERT_EQUAL(fx_expire(&f, 999), 0);
	CU_ASSERT_EQUAL(fx_expire(&f, 1000), 1);                 /* deadline <= now */
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_OFFER_EXPIRED, "o"), 1);
	CU_ASSERT_EQUAL(mail_handler(&f, MAIL_OFFER_EXPIRED, "o"), 0);
	RC(fx_accept(&f, a, "o", old, 0, &r), BOOK_E_UNKNOWN_JOB);   /* the want is gone */
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
	OK(fx_want(&f, a, "a1", 0, 0, 0));      /* deadline 1000 */
	OK(fx_want(&f, b, "b1", 0, 0, 500));    /* deadline 1500 */
	OK(fx_want(&f, c, "c1", 0, 0, 600));
	OK(fx_want(&f, c, "c2", 0, 0, 600));
	fx_lock(&f);
	CU_ASSERT_EQUAL(book_next_deadline(f.b), 1000);
	fx_unlock(&f);
	fx_pump(&f);
	size_t from = f.nlog;
	CU_ASSERT_EQUAL(fx_expire(&f, 1200), 1);
	SEQ_EQ(offers(&f, from), "c1");   /* deadline 2200 */
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
	OK(fx_want(&f, a, "o2", 0, 0, 2000));   /* offered */
	OK(fx_want(&f, a, "p2", 0, 0, 2000));   /* parked: 2 live, table full */
	RC(fx_want(&f, a, "p3", 0, 0, 2000), BOOK_E_LIMIT_WANTS);
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_expire(&f, 3000), 1); /* o2 expired, p2 offered */
	OK(fx_want(&f, a, "p3", 0, 0, 3000));   /* takes o2's record */
	size_t from = f.nlog;
	fx_pump(&f);
	SEQ_EQ(offers(&f, from), "p2");
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_OFFER_EXPIRED, "o2"), 0);
	RC(fx_want(&f, a, "p4", 0, 0, 3000), BOOK_E_LIMIT_WANTS);
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
	OK(fx_want(&f, a, "a1", 0, 0, 0));   /* offered */
	OK(fx_want(&f, a, "a2", 0, 0, 0));
	OK(fx_want(&f, a, "a3", 0, 0, 0));
	RC(fx_want(&f, a, "a4", 0, 0, 0), BOOK_E_LIMIT_CONN);
	/* a running job does not count against the connection */
	OK(fx_take_job(&f, a, "a1", &r));
	OK(fx_want(&f, a, "a4", 0, 0, 0));
	OK(fx_want(&f, b, "b1", 0, 0, 0));
	RC(fx_want(&f, b, "b2", 0, 0, 0), BOOK_E_LIMIT_WANTS);   /* 5 in the book */
	OK(fx_finish(&f, r, 5, 0));                              /* a2 offered */
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
	OK(fx_want(&f, b, longid, 0, 0, 0));   /* exactly 64 bytes */
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
	OK(fx_open(&f, 1, "client-A", 0, &a2));   /* same client, second conn */
	OK(fx_open(&f, 1, NULL, 0, &b));
	OK(fx_want(&f, a, "j", 0, 0, 0));
	RC(fx_want(&f, a, "j", 0, 0, 0), BOOK_E_DUPLICATE);
	RC(fx_want(&f, a, "j", 2, 7, 0), BOOK_E_DUPLICATE);
	RC(fx_want(&f, a2, "j", 0, 0, 0), BOOK_E_DUPLICATE);   /* job_ids are per client */
	OK(fx_want(&f, b, "j", 0, 0, 0));                      /* another client */
	OK(fx_want(&f, a2, "k", 0, 0, 0));
	/* parked/offered wants belong to their conn */
	RC(fx_unwant(&f, a2, "j"), BOOK_E_UNKNOWN_JOB);
	struct book_position p;
	RC(fx_query(&f, a, "k", &p), BOOK_E_UNKNOWN_JOB);
	uint64_t tok = fx_token(&f, "j");
	OK(fx_accept(&f, a, "j", tok, 0, &r));
	RC(fx_want(&f, a2, "j", 0, 0, 0), BOOK_E_DUPLICATE);   /* running */
	/* a running job belongs to the client: every conn of it sees it */
	CU_ASSERT_EQUAL(pos_of(&f, a2, "j").state, WANT_RUNNING);
	RC(fx_unwant(&f, a2, "j"), BOOK_E_BAD_STATE);
	OK(fx_finish(&f, r, 1, 0));
	OK(fx_want(&f, a2, "j", 0, 0, 0));                     /* forgotten */
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
	OK(fx_want(&f, a, "a1", 0, 0, 0));   /* offered */
	OK(fx_want(&f, a, "a2", 0, 0, 0));   /* offered */
	OK(fx_want(&f, a, "a3", 0, 0, 0));
	OK(fx_want(&f, a, "a4", 2, 0, 0));   /* offered, wg1 */
	OK(fx_want(&f, b, "b1", 0, 0, 0));
	OK(fx_want(&f, b, "b2", 0, 0, 0));
	OK(fx_want(&f, b, "b3", 2, 0, 0));
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_expire(&f, 5000), 3);   /* a1 a2 a4 expire */
	/* now b1, a3, b3 were offered: close a with a3 offered and the
	 * OFFER_EXPIRED mails still pending */
	fx_lock(&f);
	struct book_mail m[8];
	CU_ASSERT_EQUAL(book_mail_take(f.b, 1, m, 8), 2);   /* b1, b3 */
	fx_unlock(&f);
	fx_log_clear(&f);
	fx_close(&f, a, 6000);
	CU_ASSERT_EQUAL(f.mask & 1, 0);     /* nothing left for a's handler */
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
	OK(fx_want(&f, c, "c2", 0, 0, 0));   /* offered (4th slot) */
	OK(fx_want(&f, c, "c3", 0, 0, 0));   /* parked */
	OK(fx_want(&f, w, "w1", 0, 0, 0));   /* parked */
	fx_pump(&f);
	OK(fx_accept(&f, a, "a1", fx_token(&f, "a1"), 1, &ra));   /* runs on handler 1 */
	OK(fx_accept(&f, c, "c1", fx_token(&f, "c1"), 1, &rc1));
	OK(fx_accept(&f, n, "n1", fx_token(&f, "n1"), 2, &rn));   /* runs on handler 2 */
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
	/* a1 and c1 freed, c2 c3 c4 gone; w1 got a slot; n1 keeps running */
	SEQ_EQ(offers(&f, 0), "w1");
	RC(fx_finish(&f, ra, 1, 0), BOOK_E_STALE);
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
	CU_ASSERT_EQUAL(fx_purge(&f, 1, pg, 8), 0);   /* idempotent */
	OK(fx_finish(&f, rn, 1, 0));
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
	fx_close(&f, n, 100);                    /* grace until 5100 */
	fx_lock(&f);
	RC(book_job_owner(f.b, r, NULL, NULL), BOOK_E_STALE);
	CU_ASSERT_EQUAL(book_next_deadline(f.b), 5100);
	struct book_status st;
	book_status(f.b, &st);
	CU_ASSERT_EQUAL(st.clients, 0);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(fx_expire(&f, 5099), 0);
	OK(fx_open(&f, 2, "N", 5099, &n2));      /* resume: re-adopts j */
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
	fx_close(&f, n3, 6000);                  /* grace until 11000 */
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_CANCEL, NULL), 0);
	CU_ASSERT_EQUAL(fx_expire(&f, 10999), 0);
	CU_ASSERT_EQUAL(fx_expire(&f, 11000), 1);
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_CANCEL, "j"), 1);
	CU_ASSERT_EQUAL(mail_handler(&f, MAIL_CANCEL, "j"), 0);   /* its runner */
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
	CU_ASSERT_EQUAL(book_next_deadline(f.b), 5010);   /* j2 still kept */
	fx_unlock(&f);
	OK(fx_finish(&f, r2, 1, 0));
	fx_lock(&f);
	CU_ASSERT_EQUAL(book_next_deadline(f.b), UINT64_MAX);   /* nothing to keep */
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
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_CANCEL, "b"), 0);   /* named: grace */
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

static void test_mail_and_mask(void)
{
	struct fx f;
	struct book_ref a, b, c, d;
	struct book_mail m[8];
	mk(&f, 1, 1);
	OK(fx_open(&f, 0, NULL, 0, &a));
	CU_ASSERT_EQUAL(f.mask, 1);              /* HELLO: 1 client now */
	OK(fx_open(&f, 2, NULL, 0, &b));
	CU_ASSERT_EQUAL(f.mask, 5);              /* HELLO to handlers 0 and 2 */
	OK(fx_open(&f, 2, "N", 0, &c));
	OK(fx_open(&f, 3, "N", 0, &d));          /* same client: no HELLO */
	CU_ASSERT_EQUAL(f.mask, 0);
	OK(fx_want(&f, b, "b1", 0, 0, 0));
	CU_ASSERT_EQUAL(f.mask, 4);              /* OFFER to handler 2 only */
	OK(fx_want(&f, a, "a1", 0, 0, 0));
	CU_ASSERT_EQUAL(f.mask, 0);              /* parked: no mail */
	fx_lock(&f);
	CU_ASSERT_EQUAL(book_mail_take(f.b, 2, m, 1), 1);
	CU_ASSERT_EQUAL(m[0].kind, MAIL_HELLO);  /* HELLO first, coalesced */
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
	OK(fx_unwant(&f, b, "b1"));              /* a1 offered to handler 0 */
	CU_ASSERT_EQUAL(f.mask, 1);
	OK(fx_unwant(&f, a, "a1"));
	fx_log_clear(&f);
	fx_pump(&f);
	CU_ASSERT_EQUAL(f.nlog, 0);
	/* closing the last conn of a client: HELLO to the handlers left */
	fx_close(&f, a, 0);
	CU_ASSERT_EQUAL(f.mask, 4 | 8);
	fx_close(&f, c, 0);                      /* N still has d */
	CU_ASSERT_EQUAL(f.mask, 0);
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_HELLO, NULL), 2);
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
	OK(fx_accept(&f, a, "a1", ta1, 0, &r));  /* offers still count */
	OK(fx_finish(&f, r, 1, 0));               /* but nothing more is granted */
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
	CU_ASSERT_EQUAL(a2.idx, a.idx);           /* the slot is reused ... */
	CU_ASSERT(a2.gen != a.gen);               /* ... under a new generation */
	RC(fx_want(&f, a, "k", 0, 0, 0), BOOK_E_STALE);
	RC(fx_unwant(&f, a, "j"), BOOK_E_STALE);
	RC(fx_accept(&f, a, "j", tok, 0, &oc), BOOK_E_STALE);
	RC(fx_decline(&f, a, "j", tok), BOOK_E_STALE);
	RC(fx_query(&f, a, "j", &p), BOOK_E_STALE);
	fx_close(&f, a, 0);                       /* ignored */
	OK(fx_finish(&f, r, 3, 0));
	RC(fx_finish(&f, r, 3, 0), BOOK_E_STALE);
	fx_lock(&f);
	RC(book_job_owner(f.b, r, &oc, NULL), BOOK_E_STALE);
	book_job_set_pgid(f.b, r, 5);             /* ignored */
	struct book_ref bad = { 1u << 30, 0 };
	RC(book_job_finish(f.b, bad, 1, 0), BOOK_E_STALE);
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
	OK(fx_finish(&f, r, 100, 0));            /* grants b1 with no time known */
	fx_lock(&f);
	CU_ASSERT_EQUAL(book_next_deadline(f.b), 10);   /* due: stamp it now */
	fx_unlock(&f);
	CU_ASSERT_EQUAL(fx_expire(&f, 50000), 0);        /* its timeout starts here */
	fx_lock(&f);
	CU_ASSERT_EQUAL(book_next_deadline(f.b), 51000);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(fx_expire(&f, 40000), 0);        /* time never goes back */
	OK(fx_want(&f, a, "a2", 0, 0, 50500));
	CU_ASSERT_EQUAL(fx_expire(&f, 51000), 1);        /* b1 out, a2 offered at 51000 */
	/* with book_set_now, grants inside the section are stamped at once */
	OK(fx_take_job(&f, a, "a2", &r2));
	OK(fx_want(&f, b, "b2", 0, 0, 51000));
	fx_lock(&f);
	book_set_now(f.b, 60000);
	OK(book_job_finish(f.b, r2, 300, 1));
	CU_ASSERT_EQUAL(book_next_deadline(f.b), 61000);
	struct book_service_status ss;
	book_service_status(f.b, 0, &ss);
	CU_ASSERT_EQUAL(ss.started, 2);
	CU_ASSERT_EQUAL(ss.finished, 2);
	CU_ASSERT_EQUAL(ss.failed, 1);
	CU_ASSERT_EQUAL(ss.mean_runtime_ms, 140);   /* 100, then +0.2*(300-100) */
	CU_ASSERT_EQUAL(ss.running, 0);
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
		_exit(3);   /* the point was not reached */
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
	CU_ASSERT_EQUAL(f->last_lock, 0);   /* consistent again */
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
	book_job_finish(f->b, cx->r, 10, 0);
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
	_exit(0);   /* crash holding the lock, between operations */
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
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_HELLO, NULL), 2);   /* repair re-sends HELLO */
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_OFFER, NULL), 0);   /* o's OFFER was taken */
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
	SEQ_EQ(offers(&f, 0), "q");   /* a's wants gone, q granted */
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
	RC(fx_want(&f, cx.b, "w", 0, 0, 0), BOOK_E_DUPLICATE);   /* w is indexed */
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
	crash_at(&f, "grant.mid", op_finish_r, &cx);   /* finish frees, grant crashes */
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

static void test_fault_unwant(void)
{
	struct fx f;
	struct fctx cx;
	fault_setup(&f, &cx);
	crash_at(&f, "unwant.mid", op_unwant_o, &cx);
	struct book_position p;
	RC(fx_query(&f, cx.a, "o", &p), BOOK_E_UNKNOWN_JOB);
	SEQ_EQ(offers(&f, 0), "q");   /* b never served: q first */
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

static void test_fault_finish(void)
{
	struct fx f;
	struct fctx cx;
	fault_setup(&f, &cx);
	OK(fx_accept(&f, cx.a, "o", cx.tok, 0, &cx.r));
	crash_at(&f, "finish.mid", op_finish_r, &cx);
	RC(fx_finish(&f, cx.r, 1, 0), BOOK_E_STALE);
	SEQ_EQ(offers(&f, 0), "q");
	wg0(&f, 0, 1, 1);
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
	OK(fx_unwant(&f, cx.a, "o"));            /* q offered */
	OK(fx_accept(&f, cx.b, "q", fx_token(&f, "q"), 1, &cx.r));
	OK(fx_want(&f, cx.n, "j", 2, 0, 0));     /* wg1: offered */
	OK(fx_take_job(&f, cx.n, "j", &cx.r));
	fx_close(&f, cx.n, 0);                   /* grace until 5000 */
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
	OK(fx_unwant(&f, cx.a, "o"));            /* q (h1) offered */
	OK(fx_accept(&f, cx.b, "q", fx_token(&f, "q"), 1, &cx.r));
	fx_log_clear(&f);
	crash_at(&f, "purge.mid", op_purge1, &cx);
	wg0(&f, 0, 1, 0);                        /* q freed, p granted by repair */
	CU_ASSERT_EQUAL(fx_purge(&f, 1, pg, 4), 0);   /* finish the purge */
	struct book_status st;
	fx_lock(&f);
	book_status(f.b, &st);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(st.connections, 1);
	SEQ_EQ(offers(&f, 0), "p");
	done(&f);
}

static void test_fault_mail(void)
{
	struct fx f;
	struct fctx cx;
	fault_setup(&f, &cx);
	OK(fx_unwant(&f, cx.a, "o"));            /* q offered (h1) */
	OK(fx_decline(&f, cx.b, "q", fx_token(&f, "q")));   /* p offered to h0 */
	fx_log_clear(&f);
	crash_at(&f, "mail.mid", op_take_mail0, &cx);
	SEQ_EQ(offers(&f, 0), "p");   /* not lost, not doubled */
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
	CU_ASSERT_EQUAL(st.repairs, 1);   /* the crashed repair did not count */
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
	fx_pump(&f);
	fx_lock(&f);
	book_repair(f.b);
	book_repair(f.b);
	fx_unlock(&f);
	checked(&f);
	wg0(&f, 0, 1, 2);
	fx_log_clear(&f);
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_OFFER, NULL), 0);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_HELLO, NULL), 3);
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
		{ "init limits", test_init_limits },
		{ "priority beats arrival", test_priority_beats_arrival },
		{ "round robin: fresh conn first", test_round_robin_fresh_conn },
		{ "ties by arrival, FIFO per conn", test_tie_by_arrival_and_fifo },
		{ "one conn's lanes share its turn", test_lanes_share_the_turn },
		{ "round robin shares over 9000 grants", test_round_robin_shares },
		{ "waitgroups independent", test_waitgroups_independent },
		{ "unwant in every state", test_unwant_states },
		{ "decline", test_decline },
		{ "accept states, stale token", test_accept_states_and_stale_token },
		{ "expiry re-grants", test_expiry_regrants },
		{ "expired mail in place, record reuse", test_expired_mail_in_place_and_reuse },
		{ "limits", test_limits },
		{ "duplicates", test_duplicates },
		{ "conn close", test_conn_close },
		{ "purge handler", test_purge_handler },
		{ "resume grace", test_resume_grace },
		{ "grace ends with its jobs", test_grace_ends_with_its_jobs },
		{ "anonymous close cancels", test_anonymous_close_cancels },
		{ "query position", test_query_position },
		{ "mail and mask", test_mail_and_mask },
		{ "draining", test_draining },
		{ "stale refs", test_stale_refs },
		{ "time without now, stats", test_time_without_now },
		{ "many ids through the index", test_many_ids_index },
		{ "fault open.mid", test_fault_open },
		{ "fault close.mid", test_fault_close },
		{ "fault want.mid", test_fault_want },
		{ "fault grant.mid", test_fault_grant },
		{ "fault unwant.mid", test_fault_unwant },
		{ "fault accept.mid", test_fault_accept },
		{ "fault decline.mid", test_fault_decline },
		{ "fault finish.mid", test_fault_finish },
		{ "fault expire.mid", test_fault_expire },
		{ "fault grace.mid", test_fault_grace },
		{ "fault purge.mid", test_fault_purge },
		{ "fault mail.mid", test_fault_mail },
		{ "fault repair.mid", test_fault_repair },
		{ "crash between operations", test_fault_between_ops },
		{ "repair idempotent", test_repair_idempotent },
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
