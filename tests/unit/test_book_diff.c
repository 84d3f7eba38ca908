/*
 * test_book_diff.c - randomized differential test: the want-book against
 * the brute-force model (book_model.c).  Each episode draws limits (the
 * receipt store included) and a topology, then applies random operations
 * (want, unwant, cancel, accept, decline, job finished with a random
 * outcome and receipt text (sometimes delivered in the same critical
 * section), DONE read and delivered, expire with advancing time, conn open/close, handler purge
 * (its running jobs end as lost: their DONEs and outcomes are compared like
 * any other), query, job owner, mail take, set_now, drain, repair, a
 * restored runtime profile, legacy tokens: issue, use, finish, expiry,
 * purge) to both and
 * compares return codes, the mail of every handler (OFFER/OFFER_EXPIRED/
 * DONE in exact order, CANCEL as a set, HELLO), the mail mask, query
 * answers, outcomes and receipt texts, per-waitgroup and book counts
 * (finished wants and receipt slots included), statistics and auto-balance
 * classes; half the episodes run auto-balance (reserve, unknown cap, class
 * thresholds drawn at random, 0 and the whole pool included); book_check runs
 * every few hundred operations.  A DONE mail taken is delivered later (or
 * never: the handler "could not send it"), so taken-but-undelivered DONEs
 * meet conn closes, graces, resumes and purges.
 *
 * Usage: test_book_diff [seed [operations]]  (default: seed 1, 500000
 * operations: make check runs the same operations every time; other seeds
 * are a search, run by hand).  The seed is printed first, so a failure can
 * be replayed.
 */
#include "autoconfig.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <CUnit/Basic.h>

#include "book/book.h"
#include "book_fixture.h"
#include "book_model.h"

static uint64_t g_seed;
static unsigned long g_rc[24][16]; /* [op kind][rc]: coverage report */
enum {
	K_WANT,
	K_ACCEPT,
	K_DECLINE,
	K_FINISH,
	K_EXPIRE,
	K_OPEN,
	K_QUERY,
	K_UNWANT,
	K_PURGE,
	K_MAIL,
	K_CANCEL,
	K_READ,
	K_READ_OK,
	K_DELIVERED,
	K_DONE_MAIL,
	K_CLASS,
	K_PROFILE,
	K_TOKEN_ISSUE,
	K_TOKEN_USE,
	K_TOKEN_FINISH,
	K_NKINDS
};
static unsigned long g_ops = 500000;

struct run {
	struct fx f;
	struct model *m;
	uint64_t rng, now;
	unsigned long op, total;
	int episode;
	int failed;
	const char *opname;
	uint32_t njobs;
	int drains; /* this episode may drain */
	struct book_ref stale[32];
	unsigned nstale;
};

static uint64_t rnd(struct run *r)
{
	uint64_t x = r->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	r->rng = x;
	return x * 0x2545f4914f6cdd1dULL;
}

static uint32_t below(struct run *r, uint32_t n)
{
	return n ? (uint32_t)(rnd(r) % n) : 0;
}

static int chance(struct run *r, unsigned pct)
{
	return below(r, 100) < pct;
}

static int fail(struct run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct run *r, const char *fmt, ...)
{
	if (r->failed)
		return -1;
	va_list ap;
	printf("\n  MISMATCH seed=%" PRIu64 " episode=%d op#%lu (%s): ", g_seed, r->episode, r->op,
	       r->opname);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n  replay: test_book_diff %" PRIu64 " %lu\n", g_seed, g_ops);
	r->failed = 1;
	CU_FAIL("book and model disagree");
	return -1;
}

#define SAME(r, a, b, what)                                                             \
	do {                                                                            \
		if ((uint64_t)(a) != (uint64_t)(b))                                     \
			return fail((r), "%s: book %" PRIu64 " model %" PRIu64, (what), \
				    (uint64_t)(a), (uint64_t)(b));                      \
	} while (0)

static void lock(struct run *r)
{
	fx_lock(&r->f);
	model_begin(r->m);
}

static int unlock(struct run *r)
{
	fx_unlock(&r->f);
	SAME(r, r->f.mask, r->m->mask, "mail mask");
	return 0;
}

static int compare_counts(struct run *r)
{
	for (uint32_t g = 0; g < r->f.topo.nwaitgroups; g++) {
		struct book_wg_status a, b;
		book_wg_status(r->f.b, g, &a);
		model_wg(r->m, g, &b);
		SAME(r, a.running, b.running, "wg running");
		SAME(r, a.offered, b.offered, "wg offered");
		SAME(r, a.waiting, b.waiting, "wg waiting");
		SAME(r, a.processes, b.processes, "wg processes");
		SAME(r, a.tokens, b.tokens, "wg tokens");
	}
	struct book_status st;
	uint32_t conns, clients, wants;
	book_status(r->f.b, &st);
	model_status(r->m, &conns, &clients, &wants);
	SAME(r, st.connections, conns, "connections");
	SAME(r, st.clients, clients, "clients");
	SAME(r, st.wants, wants, "wants");
	SAME(r, st.draining, r->m->draining, "draining");
	uint32_t fin, rcpt;
	model_finished_counts(r->m, &fin, &rcpt);
	SAME(r, st.finished, fin, "finished");
	SAME(r, st.receipts, rcpt, "receipt slots");
	return 0;
}

/* ---- picking things ---- */

static int pick_conn(struct run *r)
{
	size_t live = 0;
	for (size_t i = 0; i < r->m->nc; i++)
		live += r->m->c[i].live;
	if (r->m->nc == 0)
		return -1;
	if (live == 0 || chance(r, 5))
		return (int)below(r, (uint32_t)r->m->nc);
	size_t k = below(r, (uint32_t)live);
	for (size_t i = 0; i < r->m->nc; i++)
		if (r->m->c[i].live && k-- == 0)
			return (int)i;
	return -1;
}

static struct book_ref conn_ref(struct run *r, int c)
{
	struct book_ref bad = { UINT32_MAX - 1, 0 };
	return c < 0 ? bad : r->m->c[c].ref;
}

/* A random want of the model in `state` satisfying need (1: token known,
 * 2: ref known), or -1. */
static int pick_want(struct run *r, int state, int need)
{
	size_t n = 0;
	for (size_t i = 0; i < r->m->nw; i++) {
		const struct m_want *w = &r->m->w[i];
		if (w->state == state && (need != 1 || w->token_known) &&
		    (need != 2 || w->ref_known))
			n++;
	}
	if (n == 0)
		return -1;
	size_t k = below(r, (uint32_t)n);
	for (size_t i = 0; i < r->m->nw; i++) {
		const struct m_want *w = &r->m->w[i];
		if (w->state == state && (need != 1 || w->token_known) &&
		    (need != 2 || w->ref_known) && k-- == 0)
			return (int)i;
	}
	return -1;
}

static void job_name(struct run *r, char *buf, size_t len)
{
	if (chance(r, 1)) {
		buf[0] = '\0';
		return;
	}
	snprintf(buf, len, "j%u", below(r, r->njobs));
}

/* ---- operations ---- */

static int op_want(struct run *r)
{
	char job[16];
	int c = pick_conn(r);
	job_name(r, job, sizeof job);
	uint32_t svc = below(r, r->f.topo.nservices + (chance(r, 3) ? 1 : 0));
	int32_t prio = (int32_t)below(r, 3) - (chance(r, 5) ? 1 : 0);
	r->now += below(r, 20);
	lock(r);
	enum book_rc a = book_want(r->f.b, conn_ref(r, c), job, svc, prio, r->now);
	/* the book takes the time before it looks at the conn: so does the
	 * model, also for a stale one */
	if (c < 0)
		model_set_now(r->m, r->now);
	enum book_rc b = c < 0 ? BOOK_E_STALE : model_want(r->m, c, job, svc, prio, r->now);
	if (unlock(r) < 0)
		return -1;
	SAME(r, a, b, "want rc");
	g_rc[K_WANT][a]++;
	return 0;
}

static int op_unwant(struct run *r)
{
	char job[16];
	int c = pick_conn(r);
	job_name(r, job, sizeof job);
	lock(r);
	enum book_rc a = book_unwant(r->f.b, conn_ref(r, c), job);
	enum book_rc b = c < 0 ? BOOK_E_STALE : model_unwant(r->m, c, job);
	if (unlock(r) < 0)
		return -1;
	SAME(r, a, b, "unwant rc");
	g_rc[K_UNWANT][a]++;
	return 0;
}

/* CANCEL: a random (conn, job), or a job of the model through its placing
 * conn or, for a running/finished one, any conn of its client. */
static int op_cancel(struct run *r)
{
	char job[BOOK_ID_MAX + 1];
	int c = -1, wi = -1;
	unsigned k = below(r, 100);
	if (k < 30)
		wi = pick_want(r, MW_RUNNING, 0);
	else if (k < 50)
		wi = pick_want(r, MW_FINISHED, 0);
	else if (k < 65)
		wi = pick_want(r, MW_PARKED, 0);
	if (wi >= 0 && r->m->w[wi].client >= 0) {
		const struct m_want *w = &r->m->w[wi];
		strcpy(job, w->id);
		c = w->conn;
		if (chance(r, 50) || c < 0) {
			/* another conn of the same client, if any */
			for (size_t i = 0; i < r->m->nc; i++)
				if (r->m->c[i].live && r->m->c[i].client == w->client &&
				    chance(r, 50))
					c = (int)i;
		}
		if (c < 0)
			c = pick_conn(r);
	} else {
		c = pick_conn(r);
		job_name(r, job, sizeof job);
	}
	enum want_state wa = WANT_FREE, wb = WANT_FREE;
	struct book_ref ref = { 0, 0 };
	int mw = -1;
	lock(r);
	enum book_rc a = book_cancel(r->f.b, conn_ref(r, c), job, &wa, &ref);
	enum book_rc b = c < 0 ? BOOK_E_STALE : model_cancel(r->m, c, job, &wb, &mw);
	if (unlock(r) < 0)
		return -1;
	SAME(r, a, b, "cancel rc");
	g_rc[K_CANCEL][a]++;
	if (a == BOOK_OK) {
		SAME(r, wa, wb, "cancel was");
		if (wa == WANT_RUNNING) {
			SAME(r, ref.idx, r->m->w[mw].ref.idx, "cancel want");
			SAME(r, ref.gen, r->m->w[mw].ref.gen, "cancel want gen");
		}
	}
	return 0;
}

static int op_accept(struct run *r, int decline)
{
	char job[BOOK_ID_MAX + 1];
	int c, wi = chance(r, 88) ? pick_want(r, MW_OFFERED, 1) : -1;
	uint64_t token;
	uint32_t runner;
	if (wi >= 0) {
		c = r->m->w[wi].conn;
		strcpy(job, r->m->w[wi].id);
		token = chance(r, 90) ? r->m->w[wi].token : rnd(r);
		runner = chance(r, 80) ? r->m->c[c].h : below(r, r->f.lim.nhandlers + 1);
	} else {
		if (chance(r, 50))
			return 0;
		c = pick_conn(r);
		job_name(r, job, sizeof job);
		token = rnd(r);
		runner = below(r, r->f.lim.nhandlers);
	}
	struct book_ref ref = { 0, 0 };
	int mw = -1;
	lock(r);
	enum book_rc a, b;
	if (decline) {
		a = book_decline(r->f.b, conn_ref(r, c), job, token);
		b = c < 0 ? BOOK_E_STALE : model_decline(r->m, c, job, token);
	} else {
		a = book_accept(r->f.b, conn_ref(r, c), job, token, runner, &ref);
		b = c < 0 ? BOOK_E_STALE : model_accept(r->m, c, job, token, runner, &mw);
	}
	if (unlock(r) < 0)
		return -1;
	SAME(r, a, b, decline ? "decline rc" : "accept rc");
	g_rc[decline ? K_DECLINE : K_ACCEPT][a]++;
	if (!decline && a == BOOK_OK) {
		struct m_want *w = &r->m->w[mw];
		if (w->ref_known && (w->ref.idx != ref.idx || w->ref.gen != ref.gen))
			return fail(r, "accept: want ref differs from the OFFER's");
		w->ref = ref;
		w->ref_known = 1;
		if (chance(r, 70)) {
			int32_t pgid = (int32_t)(1000 + below(r, 100000));
			lock(r);
			book_job_set_pgid(r->f.b, ref, pgid);
			w->pgid = pgid;
			if (unlock(r) < 0)
				return -1;
		}
	}
	return 0;
}

/* A receipt text for job: NULL, empty, or up to twice a slot (so that
 * some do not fit). */
static const char *receipt_text(struct run *r, const char *job, char *buf, size_t *len)
{
	if (chance(r, 15)) {
		*len = below(r, 3); /* NULL with a length: ignored */
		return NULL;
	}
	size_t cap = 2 * (size_t)r->f.lim.receipt_bytes + 3;
	if (cap > M_RECEIPT_MAX - 1)
		cap = M_RECEIPT_MAX - 1;
	size_t n = below(r, (uint32_t)cap);
	for (size_t i = 0; i < n; i++)
		buf[i] = i < strlen(job) ? job[i] : (char)('a' + below(r, 26));
	*len = n;
	return buf;
}

static int op_finish(struct run *r)
{
	int wi = -1, stale = 0;
	struct book_ref ref;
	unsigned k = below(r, 100);
	if (k < 86)
		wi = pick_want(r, MW_RUNNING, 2);
	else if (k < 90)
		wi = pick_want(r, MW_OFFERED, 2);
	else if (k < 94)
		wi = pick_want(r, MW_FINISHED, 2);
	if (wi >= 0) {
		ref = r->m->w[wi].ref;
	} else if (r->nstale && chance(r, 20)) {
		ref = r->stale[below(r, r->nstale)];
		stale = 1;
	} else {
		return 0;
	}
	struct book_outcome o;
	memset(&o, 0, sizeof o);
	o.exit_code = chance(r, 70) ? (int32_t)below(r, 3) : -1;
	o.signal = o.exit_code < 0 && chance(r, 50) ? (uint8_t)(1 + below(r, 31)) : 0;
	o.error = chance(r, 20) ? (uint8_t)(1 + below(r, 4)) : 0;
	o.retryable = o.error && chance(r, 30);
	o.failed = o.exit_code != 0 || o.signal || o.error;
	/* services differ in their runtimes, so auto-balance sees both classes
	 * and services that cross the threshold */
	uint32_t sv = wi >= 0 ? r->m->w[wi].svc : 0;
	o.duration_ms = below(r, 1000 + 2000 * (sv % 4));
	o.receipt_lost = (uint8_t)chance(r, 50); /* ignored on input */
	char text[M_RECEIPT_MAX];
	size_t len;
	const char *receipt = receipt_text(r, wi >= 0 ? r->m->w[wi].id : "x", text, &len);
	int at_once = chance(r, 12), with_now = chance(r, 15), null_o = chance(r, 1);
	lock(r);
	if (with_now) {
		r->now += below(r, 50);
		book_set_now(r->f.b, r->now);
		model_set_now(r->m, r->now);
	}
	enum book_rc a = book_job_finished(r->f.b, ref, null_o ? NULL : &o, receipt, len);
	enum book_rc b = model_finished(r->m, stale ? -1 : wi, null_o ? NULL : &o, receipt, len);
	enum book_rc da = BOOK_OK, db = BOOK_OK;
	if (at_once && a == BOOK_OK) {
		/* the runner holds the owner conn and sends the DONE right away */
		da = book_done_delivered(r->f.b, ref);
		db = model_done_delivered(r->m, wi);
	}
	if (unlock(r) < 0)
		return -1;
	SAME(r, a, b, "finished rc");
	SAME(r, da, db, "delivered at once rc");
	g_rc[K_FINISH][a]++;
	if (a == BOOK_OK && r->m->w[wi].state == MW_FREE)
		r->stale[r->nstale < 32 ? r->nstale++ : below(r, 32)] = ref;
	return 0;
}

/* What a handler does with MAIL_DONE (book_done_read, then usually
 * book_done_delivered), on a finished job whose DONE was taken, or on any
 * want (pending DONE, running, freed: the rc must match). */
static int op_done(struct run *r)
{
	int wi = -1;
	unsigned k = below(r, 100);
	if (k < 70) {
		size_t n = 0;
		for (size_t i = 0; i < r->m->nw; i++)
			n += r->m->w[i].state == MW_FINISHED && r->m->w[i].done_taken;
		if (n) {
			size_t x = below(r, (uint32_t)n);
			for (size_t i = 0; i < r->m->nw; i++)
				if (r->m->w[i].state == MW_FINISHED && r->m->w[i].done_taken &&
				    x-- == 0)
					wi = (int)i;
		}
	} else if (k < 85) {
		wi = pick_want(r, MW_FINISHED, 2);
	} else if (k < 92) {
		wi = pick_want(r, MW_RUNNING, 2);
	} else {
		wi = pick_want(r, MW_FREE, 2);
	}
	if (wi < 0 || !r->m->w[wi].ref_known)
		return 0;
	struct book_ref ref = r->m->w[wi].ref;
	char ba[M_RECEIPT_MAX + 8], bb[M_RECEIPT_MAX + 8];
	size_t cap = chance(r, 10) ? 0 : 1 + below(r, (uint32_t)r->f.lim.receipt_bytes + 4);
	size_t la = 7777, lb = 8888;
	struct book_outcome oa, ob;
	memset(&oa, 0, sizeof oa);
	memset(&ob, 0, sizeof ob);
	int read = chance(r, 85), deliver = chance(r, 85);
	lock(r);
	enum book_rc a = BOOK_OK, b = BOOK_OK;
	if (read) {
		a = book_done_read(r->f.b, ref, &oa, cap ? ba : NULL, cap, &la);
		b = model_done_read(r->m, wi, &ob, cap ? bb : NULL, cap, &lb);
	}
	enum book_rc da = BOOK_OK, db = BOOK_OK;
	if (deliver) {
		da = book_done_delivered(r->f.b, ref);
		db = model_done_delivered(r->m, wi);
	}
	if (unlock(r) < 0)
		return -1;
	if (read) {
		SAME(r, a, b, "done_read rc");
		g_rc[K_READ][a]++;
		if (a == BOOK_OK) {
			SAME(r, la, lb, "receipt length");
			if (cap && strcmp(ba, bb) != 0)
				return fail(r, "receipt text \"%s\" vs \"%s\"", ba, bb);
			SAME(r, oa.exit_code, ob.exit_code, "exit_code");
			SAME(r, oa.signal, ob.signal, "signal");
			SAME(r, oa.error, ob.error, "error");
			SAME(r, oa.retryable, ob.retryable, "retryable");
			SAME(r, oa.failed, ob.failed, "failed");
			SAME(r, oa.duration_ms, ob.duration_ms, "duration_ms");
			SAME(r, oa.receipt_lost, ob.receipt_lost, "receipt_lost");
			g_rc[K_READ_OK][la > 0]++;
			g_rc[K_READ_OK][2] += oa.receipt_lost;
			g_rc[K_READ_OK][3] += oa.error == BOOK_ERROR_LOST;
		}
	}
	if (deliver) {
		SAME(r, da, db, "delivered rc");
		g_rc[K_DELIVERED][da]++;
		if (da == BOOK_OK)
			r->stale[r->nstale < 32 ? r->nstale++ : below(r, 32)] = ref;
	}
	return 0;
}

static int op_owner(struct run *r)
{
	int wi = pick_want(r, chance(r, 70) ? MW_RUNNING : MW_FINISHED, 2);
	if (wi < 0)
		return 0;
	struct book_ref oc;
	uint32_t oh;
	int mc = -1;
	lock(r);
	enum book_rc a = book_job_owner(r->f.b, r->m->w[wi].ref, &oc, &oh);
	enum book_rc b = model_owner(r->m, wi, &mc);
	if (unlock(r) < 0)
		return -1;
	SAME(r, a, b, "owner rc");
	if (a == BOOK_OK) {
		SAME(r, oc.idx, r->m->c[mc].ref.idx, "owner conn");
		SAME(r, oc.gen, r->m->c[mc].ref.gen, "owner conn gen");
		SAME(r, oh, r->m->c[mc].h, "owner handler");
	}
	return 0;
}

static int op_expire(struct run *r)
{
	uint64_t step = chance(r, 15) ? below(r, 2 * r->f.lim.offer_timeout_ms + 2)
				      : below(r, r->f.lim.offer_timeout_ms / 3 + 2);
	if (chance(r, 5))
		step += r->f.lim.resume_grace_ms;
	uint64_t now = chance(r, 3) && r->now > 100 ? r->now - 100 : (r->now += step);
	lock(r);
	uint32_t a = book_expire(r->f.b, now);
	uint32_t b = model_expire(r->m, now);
	if (unlock(r) < 0)
		return -1;
	SAME(r, a, b, "expired");
	g_rc[K_EXPIRE][a ? 1 : 0]++;
	lock(r);
	uint64_t da = book_next_deadline(r->f.b);
	if (unlock(r) < 0)
		return -1;
	/* the model's earliest deadline */
	uint64_t db = UINT64_MAX;
	for (size_t i = 0; i < r->m->nw; i++) {
		const struct m_want *w = &r->m->w[i];
		if (w->state == MW_OFFERED && w->deadline < db)
			db = w->stamped ? w->deadline : r->m->clock;
	}
	for (size_t i = 0; i < r->m->nk; i++) {
		const struct m_client *k = &r->m->k[i];
		if (k->state == MK_GRACE && k->deadline < db)
			db = k->stamped ? k->deadline : r->m->clock;
	}
	if (model_token_deadline(r->m) < db)
		db = model_token_deadline(r->m);
	SAME(r, da, db, "next deadline");
	return 0;
}

static int op_open(struct run *r)
{
	static const char *names[] = { "n0", "n1", "n2" };
	const char *client = chance(r, 40) ? NULL : names[below(r, 3)];
	uint32_t h = below(r, r->f.lim.nhandlers + (chance(r, 2) ? 1 : 0));
	struct book_ref ref;
	int mc = -1;
	r->now += below(r, 20);
	lock(r);
	enum book_rc a = book_conn_open(r->f.b, h, client, r->now, &ref);
	enum book_rc b = model_conn_open(r->m, h, client, r->now, &mc);
	if (unlock(r) < 0)
		return -1;
	SAME(r, a, b, "open rc");
	g_rc[K_OPEN][a]++;
	if (a == BOOK_OK)
		r->m->c[mc].ref = ref;
	return 0;
}

static int op_close(struct run *r)
{
	int c = pick_conn(r);
	if (c < 0)
		return 0;
	r->now += below(r, 20);
	lock(r);
	book_conn_close(r->f.b, conn_ref(r, c), r->now);
	model_conn_close(r->m, c, r->now);
	return unlock(r);
}

static int cmp_i32(const void *x, const void *y)
{
	int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
	return (a > b) - (a < b);
}

static int op_purge(struct run *r)
{
	uint32_t h = below(r, r->f.lim.nhandlers);
	int32_t pa[64], pb[64];
	size_t max = below(r, 6);
	lock(r);
	size_t na = book_purge_handler(r->f.b, h, pa, max);
	size_t nb = model_purge(r->m, h, pb, max);
	if (unlock(r) < 0)
		return -1;
	SAME(r, na, nb, "purge pgids");
	g_rc[K_PURGE][na ? 1 : 0]++;
	if (na == max) {
		/* truncated: which ones is the book's choice; the count must match */
	} else {
		qsort(pa, na, sizeof pa[0], cmp_i32);
		qsort(pb, nb, sizeof pb[0], cmp_i32);
		for (size_t i = 0; i < na; i++)
			SAME(r, pa[i], pb[i], "purge pgid");
	}
	lock(r);
	book_handler_started(r->f.b, h, (int32_t)(100 + below(r, 1000)));
	return unlock(r);
}

/* ---- legacy tokens ---- */

static int pick_token(struct run *r, int state)
{
	size_t n = 0;
	for (size_t i = 0; i < r->m->nt; i++)
		n += r->m->t[i].state == state;
	if (n == 0)
		return -1;
	size_t k = below(r, (uint32_t)n);
	for (size_t i = 0; i < r->m->nt; i++)
		if (r->m->t[i].state == state && k-- == 0)
			return (int)i;
	return -1;
}

static int op_token_issue(struct run *r)
{
	uint32_t svc = below(r, r->f.topo.nservices + (chance(r, 5) ? 1 : 0));
	uint32_t valid = 1 + below(r, 2 * r->f.lim.offer_timeout_ms + 2);
	struct book_ref ref;
	uint64_t sec = 0;
	int tok = -1;
	lock(r);
	enum book_rc a = book_token_issue(r->f.b, svc, r->now, valid, &ref, &sec);
	enum book_rc b = model_token_issue(r->m, svc, r->now, valid, &tok);
	if (unlock(r) < 0)
		return -1;
	SAME(r, a, b, "token issue");
	if (a == BOOK_OK) {
		r->m->t[tok].ref = ref;
		r->m->t[tok].secret = sec;
	}
	g_rc[K_TOKEN_ISSUE][a]++;
	return 0;
}

static int op_token_use(struct run *r)
{
	int tok = chance(r, 75)               ? pick_token(r, MT_ISSUED)
		  : r->m->nt && chance(r, 80) ? (int)below(r, (uint32_t)r->m->nt)
					      : -1;
	struct book_ref ref = { below(r, r->f.lim.max_tokens + 1), 1000000 + below(r, 9) };
	uint64_t sec = rnd(r);
	uint32_t svc = below(r, r->f.topo.nservices);
	int secret_ok = !chance(r, 8);
	if (tok >= 0) {
		ref = r->m->t[tok].ref;
		sec = r->m->t[tok].secret + (secret_ok ? 0 : 1);
		if (chance(r, 90))
			svc = r->m->t[tok].svc;
	}
	uint32_t runner = chance(r, 3) ? r->f.lim.nhandlers : below(r, r->f.lim.nhandlers);
	lock(r);
	enum book_rc a = book_token_use(r->f.b, ref, sec, svc, runner, r->now);
	enum book_rc b = model_token_use(r->m, tok, secret_ok, svc, runner, r->now);
	if (a == BOOK_OK && b == BOOK_OK && chance(r, 70)) {
		int32_t pgid = (int32_t)(1000 + below(r, 50000));
		book_token_set_pgid(r->f.b, ref, pgid);
		r->m->t[tok].pgid = pgid;
	}
	if (unlock(r) < 0)
		return -1;
	SAME(r, a, b, "token use");
	g_rc[K_TOKEN_USE][a]++;
	return 0;
}

static int op_token_finish(struct run *r)
{
	int tok = chance(r, 85) ? pick_token(r, MT_RUNNING)
		  : r->m->nt    ? (int)below(r, (uint32_t)r->m->nt)
				: -1;
	struct book_ref ref = { below(r, r->f.lim.max_tokens + 1), 1000000 + below(r, 9) };
	if (tok >= 0)
		ref = r->m->t[tok].ref;
	struct book_outcome o = { .exit_code = (int32_t)below(r, 3),
				  .duration_ms = below(r, 5000) };
	o.failed = o.exit_code != 0;
	lock(r);
	enum book_rc a = book_token_finished(r->f.b, ref, &o);
	enum book_rc b = model_token_finished(r->m, tok, &o);
	if (unlock(r) < 0)
		return -1;
	SAME(r, a, b, "token finished");
	g_rc[K_TOKEN_FINISH][a]++;
	return 0;
}

static int op_query(struct run *r, int c, const char *job)
{
	struct book_position a, b;
	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	lock(r);
	enum book_rc ra = book_query(r->f.b, conn_ref(r, c), job, &a);
	enum book_rc rb = c < 0 ? BOOK_E_STALE : model_query(r->m, c, job, &b);
	if (unlock(r) < 0)
		return -1;
	SAME(r, ra, rb, "query rc");
	g_rc[K_QUERY][ra]++;
	if (ra != BOOK_OK)
		return 0;
	SAME(r, a.state, b.state, "query state");
	SAME(r, a.ahead, b.ahead, "query ahead");
	SAME(r, a.running, b.running, "query running");
	SAME(r, a.capacity, b.capacity, "query capacity");
	SAME(r, a.service, b.service, "query service");
	return 0;
}

static int op_random_query(struct run *r)
{
	char job[BOOK_ID_MAX + 1];
	int c, wi = chance(r, 70) ? pick_want(r, MW_PARKED, 0) : -1;
	if (wi >= 0) {
		c = r->m->w[wi].conn;
		strcpy(job, r->m->w[wi].id);
	} else {
		c = pick_conn(r);
		job_name(r, job, sizeof job);
	}
	return op_query(r, c, job);
}

static int cmp_mail(const void *x, const void *y)
{
	const struct book_mail *a = x, *b = y;
	int d = strcmp(a->job_id, b->job_id);
	if (d)
		return d;
	return (a->want.idx > b->want.idx) - (a->want.idx < b->want.idx);
}

static int take_mail(struct run *r, uint32_t h)
{
	static struct book_mail bm[4096], bc[4096], mc[4096];
	static struct m_mail mm[4096];
	size_t nb = 0, n;
	lock(r);
	while (nb < 4000 && (n = book_mail_take(r->f.b, h, bm + nb, 1 + below(r, 16))) > 0)
		nb += n;
	int hello = 0;
	size_t nm = model_mail_take(r->m, h, mm, 4096, &hello);
	if (unlock(r) < 0)
		return -1;
	size_t i = 0, j = 0, ncb = 0, ncm = 0;
	if (nb > 0 && bm[0].kind == MAIL_HELLO)
		i = 1;
	SAME(r, i, hello, "HELLO");
	for (; i < nb; i++) {
		SAME(r, bm[i].kind != MAIL_HELLO, 1, "second HELLO");
		if (bm[i].kind == MAIL_CANCEL) {
			bc[ncb++] = bm[i];
			continue;
		}
		while (j < nm && mm[j].kind == MAIL_CANCEL) {
			struct m_want *w = &r->m->w[mm[j].want];
			memset(&mc[ncm], 0, sizeof mc[ncm]);
			strcpy(mc[ncm].job_id, mm[j].id);
			mc[ncm++].want = w->ref;
			j++;
		}
		if (j >= nm)
			return fail(r, "handler %u: book mails %s %d, model has no more", h,
				    bm[i].job_id, bm[i].kind);
		SAME(r, bm[i].kind, mm[j].kind, "mail kind");
		if (bm[i].kind == MAIL_DONE) {
			struct m_want *w = &r->m->w[mm[j].want];
			if (strcmp(bm[i].job_id, w->id) != 0)
				return fail(r, "handler %u: book DONE %s, model %s", h,
					    bm[i].job_id, w->id);
			SAME(r, w->state, MW_FINISHED, "DONE of a finished job");
			SAME(r, bm[i].conn.idx, r->m->c[w->conn].ref.idx, "DONE conn");
			SAME(r, bm[i].conn.gen, r->m->c[w->conn].ref.gen, "DONE conn gen");
			SAME(r, mm[j].conn, w->conn, "model DONE to its owner");
			SAME(r, r->m->c[w->conn].h, h, "DONE handler");
			SAME(r, bm[i].want.idx, w->ref.idx, "DONE want");
			SAME(r, bm[i].want.gen, w->ref.gen, "DONE want gen");
			w->done_taken = 1;
			g_rc[K_DONE_MAIL][0]++;
			g_rc[K_DONE_MAIL][1] += w->out.error == BOOK_ERROR_LOST;
		} else if (bm[i].kind == MAIL_OFFER) {
			struct m_want *w = &r->m->w[mm[j].want];
			if (strcmp(bm[i].job_id, w->id) != 0)
				return fail(r, "handler %u: book offers %s, model %s", h,
					    bm[i].job_id, w->id);
			SAME(r, bm[i].conn.idx, r->m->c[w->conn].ref.idx, "offer conn");
			SAME(r, bm[i].conn.gen, r->m->c[w->conn].ref.gen, "offer conn gen");
			if (bm[i].token == 0)
				return fail(r, "token 0");
			w->token = bm[i].token;
			w->token_known = 1;
			w->ref = bm[i].want;
			w->ref_known = 1;
		} else {
			if (strcmp(bm[i].job_id, mm[j].id) != 0)
				return fail(r, "handler %u: book expires %s, model %s", h,
					    bm[i].job_id, mm[j].id);
			SAME(r, bm[i].conn.idx, r->m->c[mm[j].conn].ref.idx, "expired conn");
			SAME(r, bm[i].conn.gen, r->m->c[mm[j].conn].ref.gen, "expired conn gen");
		}
		j++;
	}
	for (; j < nm; j++) {
		if (mm[j].kind != MAIL_CANCEL)
			return fail(r, "handler %u: model has mail %d %s the book has not", h,
				    mm[j].kind,
				    mm[j].kind == MAIL_OFFER ? r->m->w[mm[j].want].id : mm[j].id);
		memset(&mc[ncm], 0, sizeof mc[ncm]);
		strcpy(mc[ncm].job_id, mm[j].id);
		mc[ncm++].want = r->m->w[mm[j].want].ref;
	}
	SAME(r, ncb, ncm, "CANCEL mails");
	g_rc[K_MAIL][0] += nb;
	g_rc[K_MAIL][1] += ncb;
	g_rc[K_MAIL][2] += hello;
	qsort(bc, ncb, sizeof bc[0], cmp_mail);
	qsort(mc, ncm, sizeof mc[0], cmp_mail);
	for (size_t k = 0; k < ncb; k++) {
		if (strcmp(bc[k].job_id, mc[k].job_id) != 0)
			return fail(r, "CANCEL %s vs %s", bc[k].job_id, mc[k].job_id);
		SAME(r, bc[k].want.idx, mc[k].want.idx, "CANCEL want");
		SAME(r, bc[k].want.gen, mc[k].want.gen, "CANCEL want gen");
	}
	return 0;
}

static int take_all_mail(struct run *r)
{
	for (uint32_t h = 0; h < r->f.lim.nhandlers; h++)
		if (take_mail(r, h) < 0)
			return -1;
	return 0;
}

static int full_check(struct run *r)
{
	char why[256];
	lock(r);
	int rc = book_check(r->f.b, why, sizeof why);
	if (unlock(r) < 0)
		return -1;
	if (rc != 0)
		return fail(r, "book_check: %s", why);
	/* every want the model knows, queried through its conn */
	for (size_t i = 0; i < r->m->nw; i++) {
		const struct m_want *w = &r->m->w[i];
		if (w->state == MW_FREE || w->conn < 0)
			continue;
		char job[BOOK_ID_MAX + 1];
		strcpy(job, w->id);
		if (op_query(r, w->conn, job) < 0)
			return -1;
	}
	for (uint32_t s = 0; s < r->f.topo.nservices; s++) {
		struct book_service_status st;
		book_service_status(r->f.b, s, &st);
		const struct m_svc *ms = &r->m->svc[s];
		SAME(r, st.started, ms->started, "started");
		SAME(r, st.finished, ms->finished, "finished");
		SAME(r, st.failed, ms->failed, "failed");
		SAME(r, st.mean_runtime_ms, ms->nsamples ? (uint64_t)(ms->ema + 0.5) : 0,
		     "mean runtime");
		SAME(r, st.samples, ms->nsamples, "samples");
		SAME(r, st.klass, ms->klass, "class");
		g_rc[K_CLASS][st.klass]++;
	}
	return 0;
}

static int op_repair(struct run *r)
{
	if (take_all_mail(r) < 0)
		return -1;
	lock(r);
	book_repair(r->f.b);
	model_repaired(r->m);
	if (unlock(r) < 0)
		return -1;
	return full_check(r);
}

/* A snapshot restored (the master does it at start; here at any time, to
 * meet every state): a random EMA, count and class, sometimes one that does
 * not fit and must be re-classified, sometimes invalid. */
static int op_profile_set(struct run *r)
{
	struct book_profile p;
	uint32_t svc = below(r, r->f.topo.nservices + (chance(r, 5) ? 1 : 0));
	p.ema_ms = chance(r, 3) ? -1.0 : (double)below(r, 8000) + 0.25;
	p.samples = below(r, 6);
	p.klass = below(r, chance(r, 5) ? 9 : 3);
	lock(r);
	enum book_rc a = book_profile_set(r->f.b, svc, &p);
	enum book_rc b = model_profile_set(r->m, svc, &p);
	if (unlock(r) < 0)
		return -1;
	SAME(r, a, b, "profile_set rc");
	g_rc[K_PROFILE][a == BOOK_OK ? 0 : 1]++;
	return 0;
}

/* ---- episodes ---- */

static void random_config(struct run *r, struct book_limits *l, struct book_topology *t)
{
	memset(l, 0, sizeof *l);
	l->nhandlers = 1 + below(r, 4);
	l->max_connections = 2 + below(r, 6);
	l->max_wants = 3 + below(r, 40);
	l->max_wants_per_connection = 1 + below(r, 12);
	l->offer_timeout_ms = 1 + below(r, 300);
	l->resume_grace_ms = below(r, 1000);
	l->max_receipts = chance(r, 15) ? 0 : below(r, 6);
	l->receipt_bytes = l->max_receipts || chance(r, 30) ? 1 + below(r, 48) : 0;
	uint32_t procs[BOOK_MAX_WAITGROUPS], wgs[BOOK_MAX_SERVICES];
	uint32_t nwg = 1 + below(r, 3), nsvc = 1 + below(r, 5);
	for (uint32_t g = 0; g < nwg; g++)
		procs[g] = below(r, 4);
	for (uint32_t s = 0; s < nsvc; s++)
		wgs[s] = below(r, nwg);
	fx_topo(t, nwg, procs, nsvc, wgs);
	for (uint32_t s = 0; s < nsvc; s++)
		t->services[s].enabled = !chance(r, 10);
	if (chance(r, 50)) {
		/* auto-balance: reserve and unknown cap around the pool sizes
		 * (0 and "all of it" included), thresholds inside the runtimes */
		t->autobalance.enabled = 1;
		t->autobalance.reserve = below(r, 4);
		t->autobalance.unknown_cap = below(r, 5);
		t->autobalance.min_samples = 1 + below(r, 4);
		t->autobalance.heavy_threshold_ms = 200 + below(r, 5000);
	}
	l->max_tokens = below(r, 3);
	for (uint32_t g = 0; g < nwg && !chance(r, 20); g++)
		l->max_tokens += procs[g];
	r->njobs = 3 + below(r, 20);
	r->drains = chance(r, 25);
	if (chance(r, 10)) {
		/* a big episode: deep heaps, long probe runs, many conns */
		l->max_connections = 8 + below(r, 24);
		l->max_wants = 64 + below(r, 256);
		l->max_wants_per_connection = 8 + below(r, 64);
		r->njobs = 40 + below(r, 200);
	}
}

static int step(struct run *r, unsigned long len)
{
	unsigned k = below(r, 1000);
	if (k < 210) {
		r->opname = "want";
		return op_want(r);
	} else if (k < 260) {
		r->opname = "unwant";
		return op_unwant(r);
	} else if (k < 280) {
		r->opname = "cancel";
		return op_cancel(r);
	} else if (k < 400) {
		r->opname = "accept";
		return op_accept(r, 0);
	} else if (k < 440) {
		r->opname = "decline";
		return op_accept(r, 1);
	} else if (k < 540) {
		r->opname = "finish";
		return op_finish(r);
	} else if (k < 600) {
		r->opname = "done";
		return op_done(r);
	} else if (k < 670) {
		r->opname = "expire";
		return op_expire(r);
	} else if (k < 715) {
		r->opname = "open";
		return op_open(r);
	} else if (k < 750) {
		r->opname = "close";
		return op_close(r);
	} else if (k < 760) {
		r->opname = "purge";
		return op_purge(r);
	} else if (k < 825) {
		r->opname = "query";
		return op_random_query(r);
	} else if (k < 845) {
		r->opname = "owner";
		return op_owner(r);
	} else if (k < 850) {
		r->opname = "profile set";
		return op_profile_set(r);
	} else if (k < 960) {
		r->opname = "take mail";
		return take_mail(r, below(r, r->f.lim.nhandlers));
	} else if (k < 975) {
		r->opname = "token issue";
		return op_token_issue(r);
	} else if (k < 990) {
		r->opname = "token use";
		return op_token_use(r);
	} else if (k < 998) {
		r->opname = "token finish";
		return op_token_finish(r);
	} else if (r->drains && r->op > len / 2 && !r->m->draining && chance(r, 20)) {
		r->opname = "drain";
		lock(r);
		book_set_draining(r->f.b);
		model_set_draining(r->m);
		return unlock(r);
	}
	return 0;
}

static void run_episode(struct run *r, unsigned long len)
{
	struct book_limits l;
	struct book_topology t;
	random_config(r, &l, &t);
	if (fx_init(&r->f, &l, &t, rnd(r)) != 0) {
		fail(r, "fx_init");
		return;
	}
	r->m = model_new(&l, &t);
	r->now = below(r, 1000);
	r->nstale = 0;
	for (r->op = 0; r->op < len && !r->failed; r->op++) {
		if (step(r, len) < 0)
			break;
		r->opname = "counts";
		lock(r);
		int rc = compare_counts(r);
		if (rc < 0 || unlock(r) < 0)
			break;
		if (r->op % 400 == 399) {
			r->opname = "check";
			if (full_check(r) < 0)
				break;
		}
		if (r->op % 1500 == 1499) {
			r->opname = "repair";
			if (op_repair(r) < 0)
				break;
		}
	}
	r->total += r->op;
	if (!r->failed) {
		r->opname = "end";
		if (take_all_mail(r) == 0)
			full_check(r);
	}
	model_free(r->m);
	fx_fini(&r->f);
}

static void test_differential(void)
{
	struct run r;
	memset(&r, 0, sizeof r);
	r.rng = g_seed * 2654435761u + 0x9e3779b97f4a7c15ULL;
	if (r.rng == 0)
		r.rng = 1;
	while (r.total < g_ops && !r.failed) {
		unsigned long len = 500 + below(&r, 3500);
		if (len > g_ops - r.total)
			len = g_ops - r.total;
		run_episode(&r, len);
		r.episode++;
	}
	printf("\n  %lu operations in %d episodes, seed %" PRIu64 "\n", r.total, r.episode, g_seed);
	static const char *names[K_NKINDS] = { "want",
					       "accept",
					       "decline",
					       "finish(ed)",
					       "expire(0/>0)",
					       "open",
					       "query",
					       "unwant",
					       "purge(0/>0)",
					       "mail(all/cancel/hello)",
					       "cancel",
					       "done_read",
					       "read(empty/text/rlost/exec_lost)",
					       "done_delivered",
					       "DONE mails(all/lost)",
					       "class(unknown/light/heavy)",
					       "profile_set(ok/invalid)",
					       "token issue(rc)",
					       "token use(rc)",
					       "token finish(rc)" };
	for (int i = 0; i < K_NKINDS; i++) {
		printf("  %-22s", names[i]);
		for (int j = 0; j < 15; j++)
			printf(" %lu", g_rc[i][j]);
		printf("\n");
	}
	CU_ASSERT_FALSE(r.failed);
	CU_ASSERT(r.total >= g_ops);
}

int main(int argc, char **argv)
{
	g_seed = argc > 1 ? strtoull(argv[1], NULL, 0) : 1;
	if (argc > 2)
		g_ops = strtoul(argv[2], NULL, 0);
	printf("test_book_diff: seed %" PRIu64 ", %lu operations\n", g_seed, g_ops);
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	CU_pSuite s = CU_add_suite("book differential", NULL, NULL);
	CU_add_test(s, "book vs model", test_differential);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	if (failed)
		printf("FAILED with seed %" PRIu64 "\n", g_seed);
	return failed ? 1 : 0;
}
