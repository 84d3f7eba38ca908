/*
 * book_model.c - see book_model.h.  Deliberately naive: every question is
 * answered by scanning all records.  Owns nothing outside the struct
 * model.
 */
#include "autoconfig.h"
#include "book_model.h"

#include "book/book_class.h"

#include <stdlib.h>
#include <string.h>

#define GROW(arr, n, cap)                                              \
	do {                                                           \
		if ((n) == (cap)) {                                    \
			(cap) = (cap) ? 2 * (cap) : 64;                \
			(arr) = realloc((arr), (cap) * sizeof *(arr)); \
			if (!(arr))                                    \
				abort();                               \
		}                                                      \
	} while (0)

struct model *model_new(const struct book_limits *l, const struct book_topology *t)
{
	struct model *m = calloc(1, sizeof *m);
	m->lim = *l;
	m->topo = *t;
	return m;
}

void model_free(struct model *m)
{
	if (!m)
		return;
	free(m->w);
	free(m->c);
	free(m->k);
	free(m->t);
	for (int h = 0; h < BOOK_MAX_HANDLERS; h++)
		free(m->mail[h]);
	free(m);
}

void model_begin(struct model *m)
{
	m->mask = 0;
	m->now_valid = 0;
}

static void tick(struct model *m, uint64_t now)
{
	if (now > m->clock)
		m->clock = now;
	m->now_valid = 1;
	for (size_t i = 0; i < m->nw; i++)
		if (m->w[i].state == MW_OFFERED && !m->w[i].stamped) {
			m->w[i].stamped = 1;
			m->w[i].deadline = m->clock + m->lim.offer_timeout_ms;
		}
	for (size_t i = 0; i < m->nk; i++)
		if (m->k[i].state == MK_GRACE && !m->k[i].stamped) {
			m->k[i].stamped = 1;
			m->k[i].deadline = m->clock + m->lim.resume_grace_ms;
		}
}

void model_set_now(struct model *m, uint64_t now)
{
	tick(m, now);
}

static uint32_t wg_of(const struct model *m, uint32_t svc)
{
	return m->topo.services[svc].waitgroup;
}

/* ---- mail ---- */

static void mail_push(struct model *m, uint32_t h, enum book_mail_kind kind, int want, int conn,
		      const char *id)
{
	GROW(m->mail[h], m->nmail[h], m->capmail[h]);
	struct m_mail *e = &m->mail[h][m->nmail[h]++];
	memset(e, 0, sizeof *e);
	e->kind = kind;
	e->want = want;
	e->conn = conn;
	if (id)
		strcpy(e->id, id);
	if (kind == MAIL_OFFER_EXPIRED)
		e->exp_seq = ++m->exp_seq;
	m->mask |= 1ULL << h;
}

static void mail_remove_at(struct model *m, uint32_t h, size_t i)
{
	memmove(&m->mail[h][i], &m->mail[h][i + 1], (m->nmail[h] - i - 1) * sizeof m->mail[h][0]);
	m->nmail[h]--;
}

/* Drops the pending OFFER/CANCEL/DONE of want wi, if any (at most one). */
static void mail_drop_want(struct model *m, int wi)
{
	for (uint32_t h = 0; h < BOOK_MAX_HANDLERS; h++)
		for (size_t i = 0; i < m->nmail[h]; i++)
			if (m->mail[h][i].kind != MAIL_OFFER_EXPIRED && m->mail[h][i].want == wi) {
				mail_remove_at(m, h, i);
				return;
			}
}

static size_t count_expired_mail(const struct model *m)
{
	size_t n = 0;
	for (uint32_t h = 0; h < BOOK_MAX_HANDLERS; h++)
		for (size_t i = 0; i < m->nmail[h]; i++)
			n += m->mail[h][i].kind == MAIL_OFFER_EXPIRED;
	return n;
}

static void drop_oldest_expired_mail(struct model *m)
{
	uint32_t bh = 0;
	size_t bi = SIZE_MAX;
	for (uint32_t h = 0; h < BOOK_MAX_HANDLERS; h++)
		for (size_t i = 0; i < m->nmail[h]; i++)
			if (m->mail[h][i].kind == MAIL_OFFER_EXPIRED &&
			    (bi == SIZE_MAX || m->mail[h][i].exp_seq < m->mail[bh][bi].exp_seq)) {
				bh = h;
				bi = i;
			}
	if (bi != SIZE_MAX)
		mail_remove_at(m, bh, bi);
}

static void hello_dirty(struct model *m)
{
	for (size_t i = 0; i < m->nc; i++)
		if (m->c[i].live) {
			m->hello[m->c[i].h] = 1;
			m->mask |= 1ULL << m->c[i].h;
		}
}

size_t model_mail_take(struct model *m, uint32_t h, struct m_mail *out, size_t max, int *hello)
{
	*hello = m->hello[h];
	m->hello[h] = 0;
	size_t n = m->nmail[h] < max ? m->nmail[h] : max;
	if (n == 0)
		return 0;
	memcpy(out, m->mail[h], n * sizeof *out);
	memmove(m->mail[h], m->mail[h] + n, (m->nmail[h] - n) * sizeof *out);
	m->nmail[h] -= n;
	return n;
}

/* ---- counting ---- */

static size_t live_wants(const struct model *m)
{
	size_t n = 0;
	for (size_t i = 0; i < m->nw; i++)
		n += m->w[i].state != MW_FREE;
	return n;
}

static int client_nconns(const struct model *m, int ci)
{
	int n = 0;
	for (size_t i = 0; i < m->nc; i++)
		n += m->c[i].live && m->c[i].client == ci;
	return n;
}

static int is_job(const struct m_want *w)
{
	return w->state == MW_RUNNING || w->state == MW_FINISHED;
}

/* Running and finished jobs of client ci. */
static int client_njobs(const struct model *m, int ci)
{
	int n = 0;
	for (size_t i = 0; i < m->nw; i++)
		n += is_job(&m->w[i]) && m->w[i].client == ci;
	return n;
}

static int by_jorder(const void *x, const void *y)
{
	const uint64_t *a = x, *b = y;
	return (a[0] > b[0]) - (a[0] < b[0]);
}

/* The jobs of client ci in the order of its job list (acceptance order,
 * renumbered by arrival at a repair); returns how many, indices in *out
 * (malloc'd, to be freed). */
static size_t client_jobs(const struct model *m, int ci, int **out)
{
	uint64_t *pairs = malloc((m->nw + 1) * 2 * sizeof *pairs);
	size_t n = 0;
	if (!pairs)
		abort();
	for (size_t i = 0; i < m->nw; i++)
		if (is_job(&m->w[i]) && m->w[i].client == ci) {
			pairs[2 * n] = m->w[i].jorder;
			pairs[2 * n + 1] = i;
			n++;
		}
	qsort(pairs, n, 2 * sizeof *pairs, by_jorder);
	*out = malloc((n + 1) * sizeof **out);
	if (!*out)
		abort();
	for (size_t i = 0; i < n; i++)
		(*out)[i] = (int)pairs[2 * i + 1];
	free(pairs);
	return n;
}

static uint32_t receipts_used(const struct model *m)
{
	uint32_t n = 0;
	for (size_t i = 0; i < m->nw; i++)
		n += m->w[i].state == MW_FINISHED && m->w[i].kept;
	return n;
}

void model_finished_counts(const struct model *m, uint32_t *finished, uint32_t *receipts)
{
	*finished = 0;
	for (size_t i = 0; i < m->nw; i++)
		*finished += m->w[i].state == MW_FINISHED;
	*receipts = receipts_used(m);
}

/* A finished job got a (new) owner: DONE to its handler, moved if pending. */
static void done_mail(struct model *m, int wi)
{
	mail_drop_want(m, wi);
	mail_push(m, m->c[m->w[wi].conn].h, MAIL_DONE, wi, m->w[wi].conn, m->w[wi].id);
}

static int newest_conn(const struct model *m, int ci)
{
	int best = -1;
	for (size_t i = 0; i < m->nc; i++)
		if (m->c[i].live && m->c[i].client == ci &&
		    (best < 0 || m->c[i].open_seq > m->c[best].open_seq))
			best = (int)i;
	return best;
}

void model_wg(const struct model *m, uint32_t wg, struct book_wg_status *st)
{
	memset(st, 0, sizeof *st);
	st->processes = m->topo.waitgroups[wg].processes;
	for (size_t i = 0; i < m->nw; i++) {
		const struct m_want *w = &m->w[i];
		if (w->state == MW_FREE || wg_of(m, w->svc) != wg)
			continue;
		st->waiting += w->state == MW_PARKED;
		st->offered += w->state == MW_OFFERED;
		st->running += w->state == MW_RUNNING;
	}
	for (size_t i = 0; i < m->nt; i++)
		st->tokens += m->t[i].state != MT_FREE && wg_of(m, m->t[i].svc) == wg;
}

void model_status(const struct model *m, uint32_t *conns, uint32_t *clients, uint32_t *wants)
{
	*conns = 0;
	for (size_t i = 0; i < m->nc; i++)
		*conns += m->c[i].live;
	*clients = 0;
	for (size_t i = 0; i < m->nk; i++)
		*clients += m->k[i].state == MK_LIVE;
	*wants = (uint32_t)live_wants(m);
}

/* ---- the grant rule, by brute force ---- */

/* Is x before y by (-priority, stamp, seq)? */
static int key_less(const struct model *m, const uint64_t *stamps, uint32_t wg, int x, int y)
{
	const struct m_want *a = &m->w[x], *b = &m->w[y];
	if (a->prio != b->prio)
		return a->prio > b->prio;
	uint64_t sa = stamps ? stamps[a->conn] : m->c[a->conn].stamp[wg];
	uint64_t sb = stamps ? stamps[b->conn] : m->c[b->conn].stamp[wg];
	if (sa != sb)
		return sa < sb;
	return a->seq < b->seq;
}

/* Auto-balance (book.h, struct book_autobalance), by counting: may a want
 * of service svc take a slot of its waitgroup now? */
static int eligible(const struct model *m, uint32_t svc)
{
	const struct book_autobalance *ab = &m->topo.autobalance;
	if (!ab->enabled)
		return 1;
	if (m->svc[svc].klass == SVC_HEAVY) {
		struct book_wg_status st;
		model_wg(m, wg_of(m, svc), &st);
		return st.processes - (st.running + st.offered + st.tokens) > ab->reserve;
	}
	if (m->svc[svc].klass == SVC_UNKNOWN) {
		uint32_t held = 0;
		for (size_t i = 0; i < m->nw; i++)
			if (m->w[i].svc == svc &&
			    (m->w[i].state == MW_OFFERED || m->w[i].state == MW_RUNNING))
				held++;
		return held < ab->unknown_cap;
	}
	return 1;
}

static void grant(struct model *m, uint32_t wg)
{
	if (m->draining)
		return;
	for (;;) {
		struct book_wg_status st;
		model_wg(m, wg, &st);
		if (st.running + st.offered + st.tokens >= st.processes)
			return;
		int best = -1;
		for (size_t i = 0; i < m->nw; i++)
			if (m->w[i].state == MW_PARKED && wg_of(m, m->w[i].svc) == wg &&
			    eligible(m, m->w[i].svc) &&
			    (best < 0 || key_less(m, NULL, wg, (int)i, best)))
				best = (int)i;
		if (best < 0)
			return;
		struct m_want *w = &m->w[best];
		m->c[w->conn].stamp[wg] = ++m->counter[wg];
		w->state = MW_OFFERED;
		w->offer_no = ++m->grants;
		w->token_known = 0;
		w->ref_known = 0;
		w->stamped = m->now_valid;
		w->deadline = m->clock + m->lim.offer_timeout_ms;
		mail_push(m, m->c[w->conn].h, MAIL_OFFER, best, w->conn, NULL);
	}
}

static void grant_all(struct model *m)
{
	for (uint32_t g = 0; g < m->topo.nwaitgroups; g++)
		grant(m, g);
}

/* ---- wants ---- */

static int id_ok(const char *id)
{
	size_t n = id ? strnlen(id, BOOK_ID_MAX + 1) : 0;
	return n >= 1 && n <= BOOK_ID_MAX;
}

static int conn_ok(const struct model *m, int c)
{
	return c >= 0 && (size_t)c < m->nc && m->c[c].live;
}

int model_lookup(const struct model *m, int conn, const char *job)
{
	int ci = m->c[conn].client;
	for (size_t i = 0; i < m->nw; i++) {
		const struct m_want *w = &m->w[i];
		if (w->state == MW_FREE || w->client != ci || strcmp(w->id, job) != 0)
			continue;
		if ((w->state == MW_PARKED || w->state == MW_OFFERED) && w->conn != conn)
			return -1;
		return (int)i;
	}
	return -1;
}

static void client_free(struct model *m, int ci);

static void want_free(struct model *m, int wi)
{
	struct m_want *w = &m->w[wi];
	mail_drop_want(m, wi);
	int was_job = is_job(w), ci = w->client;
	w->state = MW_FREE;
	w->kept = 0;
	if (was_job && ci >= 0 && m->k[ci].state == MK_GRACE && client_njobs(m, ci) == 0)
		client_free(m, ci);
}

static void orphan(struct model *m, int wi)
{
	struct m_want *w = &m->w[wi];
	w->client = -1;
	w->conn = -1;
	mail_drop_want(m, wi); /* an owner's CANCEL still pending moves */
	mail_push(m, w->runner, MAIL_CANCEL, wi, -1, w->id);
}

static void client_free(struct model *m, int ci)
{
	int *jobs;
	size_t n = client_jobs(m, ci, &jobs);
	for (size_t i = 0; i < n; i++) {
		struct m_want *w = &m->w[jobs[i]];
		if (w->state == MW_RUNNING) {
			orphan(m, jobs[i]);
		} else {
			/* finished: nobody to tell */
			w->client = -1;
			w->conn = -1;
			want_free(m, jobs[i]);
		}
	}
	free(jobs);
	m->k[ci].state = MK_FREE;
}

enum book_rc model_want(struct model *m, int conn, const char *job, uint32_t svc, int32_t prio,
			uint64_t now)
{
	tick(m, now);
	if (!conn_ok(m, conn))
		return BOOK_E_STALE;
	if (!id_ok(job))
		return BOOK_E_INVALID;
	if (m->draining)
		return BOOK_E_DRAINING;
	if (svc >= m->topo.nservices)
		return BOOK_E_UNKNOWN_SERVICE;
	if (!m->topo.services[svc].enabled)
		return BOOK_E_DISABLED;
	int ci = m->c[conn].client;
	for (size_t i = 0; i < m->nw; i++)
		if (m->w[i].state != MW_FREE && m->w[i].client == ci &&
		    strcmp(m->w[i].id, job) == 0)
			return BOOK_E_DUPLICATE;
	uint32_t mine = 0;
	for (size_t i = 0; i < m->nw; i++)
		mine += (m->w[i].state == MW_PARKED || m->w[i].state == MW_OFFERED) &&
			m->w[i].conn == conn;
	if (mine >= m->lim.max_wants_per_connection)
		return BOOK_E_LIMIT_CONN;
	size_t live = live_wants(m);
	if (live >= m->lim.max_wants)
		return BOOK_E_LIMIT_WANTS;
	if (live + count_expired_mail(m) >= m->lim.max_wants)
		drop_oldest_expired_mail(m);
	GROW(m->w, m->nw, m->capw);
	struct m_want *w = &m->w[m->nw++];
	memset(w, 0, sizeof *w);
	w->state = MW_PARKED;
	w->conn = conn;
	w->client = ci;
	strcpy(w->id, job);
	w->svc = svc;
	w->prio = prio;
	w->seq = ++m->seq;
	grant(m, wg_of(m, svc));
	return BOOK_OK;
}

enum book_rc model_unwant(struct model *m, int conn, const char *job)
{
	if (!conn_ok(m, conn))
		return BOOK_E_STALE;
	if (!id_ok(job))
		return BOOK_E_INVALID;
	int wi = model_lookup(m, conn, job);
	if (wi < 0)
		return BOOK_E_UNKNOWN_JOB;
	if (is_job(&m->w[wi]))
		return BOOK_E_BAD_STATE;
	int offered = m->w[wi].state == MW_OFFERED;
	want_free(m, wi);
	if (offered)
		grant(m, wg_of(m, m->w[wi].svc));
	return BOOK_OK;
}

enum book_rc model_accept(struct model *m, int conn, const char *job, uint64_t token,
			  uint32_t runner, int *want)
{
	if (!conn_ok(m, conn))
		return BOOK_E_STALE;
	if (!id_ok(job) || runner >= m->lim.nhandlers)
		return BOOK_E_INVALID;
	int wi = model_lookup(m, conn, job);
	if (wi < 0)
		return BOOK_E_UNKNOWN_JOB;
	struct m_want *w = &m->w[wi];
	if (w->state != MW_OFFERED)
		return BOOK_E_BAD_STATE;
	if (!w->token_known || w->token != token)
		return BOOK_E_BAD_TOKEN;
	mail_drop_want(m, wi);
	w->state = MW_RUNNING;
	w->runner = runner;
	w->pgid = 0;
	w->jorder = ++m->jorder;
	m->svc[w->svc].started++;
	*want = wi;
	return BOOK_OK;
}

enum book_rc model_decline(struct model *m, int conn, const char *job, uint64_t token)
{
	if (!conn_ok(m, conn))
		return BOOK_E_STALE;
	if (!id_ok(job))
		return BOOK_E_INVALID;
	int wi = model_lookup(m, conn, job);
	if (wi < 0)
		return BOOK_E_UNKNOWN_JOB;
	struct m_want *w = &m->w[wi];
	if (w->state != MW_OFFERED)
		return BOOK_E_BAD_STATE;
	if (!w->token_known || w->token != token)
		return BOOK_E_BAD_TOKEN;
	want_free(m, wi);
	grant(m, wg_of(m, w->svc));
	return BOOK_OK;
}

/* The end of running job wi (book_job_finished, or the purge of its
 * runner), without statistics and grant; returns its waitgroup. */
static unsigned classify(const struct model *m, unsigned cur, const struct m_svc *s);

static void sample(struct model *m, uint32_t svc, const struct book_outcome *o)
{
	struct m_svc *s = &m->svc[svc];
	s->finished++;
	if (o->failed)
		s->failed++;
	/* a job cut short by an error is a sample only when it ran longer than
	 * the average so far, and never the first one */
	if (o->error && (s->nsamples == 0 || (double)o->duration_ms <= s->ema))
		return;
	s->ema = class_ema_next(s->ema, s->nsamples, o->duration_ms);
	s->nsamples++;
	s->klass = classify(m, s->klass, s);
}

static uint32_t job_end(struct model *m, int wi, const struct book_outcome *o, const char *receipt,
			size_t len)
{
	struct m_want *w = &m->w[wi];
	uint32_t g = wg_of(m, w->svc);
	if (w->client < 0) { /* an orphan: nobody to tell */
		want_free(m, wi);
		return g;
	}
	mail_drop_want(m, wi); /* a CANCEL not taken yet */
	w->out = *o;
	w->out.receipt_lost = 0;
	w->kept = 0;
	w->rlen = 0;
	if (receipt && len > 0) {
		if (len <= m->lim.receipt_bytes && receipts_used(m) < m->lim.max_receipts &&
		    len <= sizeof w->rtext) {
			w->kept = 1;
			w->rlen = len;
			memcpy(w->rtext, receipt, len);
		} else {
			w->out.receipt_lost = 1;
		}
	}
	w->state = MW_FINISHED;
	w->done_taken = 0;
	if (w->conn >= 0)
		done_mail(m, wi);
	return g;
}

static unsigned classify(const struct model *m, unsigned cur, const struct m_svc *s)
{
	const struct book_autobalance *ab = &m->topo.autobalance;
	if (!ab->enabled)
		return SVC_UNKNOWN;
	struct class_params p = { ab->heavy_threshold_ms, ab->min_samples };
	return class_next((enum svc_class)cur, s->ema, s->nsamples, &p);
}

enum book_rc model_profile_set(struct model *m, uint32_t svc, const struct book_profile *p)
{
	if (svc >= m->topo.nservices || !p || !(p->ema_ms >= 0) || p->ema_ms > 4294967295.0)
		return BOOK_E_INVALID;
	struct m_svc *s = &m->svc[svc];
	s->ema = p->samples ? p->ema_ms : 0;
	s->nsamples = p->samples;
	const struct book_autobalance *ab = &m->topo.autobalance;
	struct class_params cp = { ab->heavy_threshold_ms, ab->min_samples };
	if (!ab->enabled)
		s->klass = SVC_UNKNOWN;
	else if (class_consistent(p->klass, s->ema, s->nsamples, &cp))
		s->klass = p->klass;
	else
		s->klass = classify(m, SVC_UNKNOWN, s);
	grant(m, wg_of(m, svc));
	return BOOK_OK;
}

enum book_rc model_finished(struct model *m, int wi, const struct book_outcome *o,
			    const char *receipt, size_t len)
{
	if (!o)
		return BOOK_E_INVALID;
	if (wi < 0 || m->w[wi].state == MW_FREE)
		return BOOK_E_STALE;
	struct m_want *w = &m->w[wi];
	if (w->state != MW_RUNNING)
		return BOOK_E_BAD_STATE;
	sample(m, w->svc, o);
	grant(m, job_end(m, wi, o, receipt, len));
	return BOOK_OK;
}

/* ---- legacy tokens ---- */

static size_t live_tokens(const struct model *m)
{
	size_t n = 0;
	for (size_t i = 0; i < m->nt; i++)
		n += m->t[i].state != MT_FREE;
	return n;
}

enum book_rc model_token_issue(struct model *m, uint32_t svc, uint64_t now, uint32_t valid_ms,
			       int *tok)
{
	tick(m, now);
	if (svc >= m->topo.nservices)
		return BOOK_E_UNKNOWN_SERVICE;
	if (!m->topo.services[svc].enabled)
		return BOOK_E_DISABLED;
	if (m->draining)
		return BOOK_E_DRAINING;
	struct book_wg_status st;
	model_wg(m, wg_of(m, svc), &st);
	/* as a new want of svc would be offered at once; a parked want that
	 * could take the slot would have it already (grants are eager) */
	if (st.running + st.offered + st.tokens >= st.processes || !eligible(m, svc) ||
	    live_tokens(m) >= m->lim.max_tokens)
		return BOOK_E_BUSY;
	if (m->nt == m->capt) {
		m->capt = m->capt ? 2 * m->capt : 16;
		m->t = realloc(m->t, m->capt * sizeof *m->t);
		if (!m->t)
			abort();
	}
	struct m_token *t = &m->t[m->nt];
	memset(t, 0, sizeof *t);
	t->state = MT_ISSUED;
	t->svc = svc;
	t->deadline = m->clock + valid_ms;
	*tok = (int)m->nt++;
	return BOOK_OK;
}

enum book_rc model_token_use(struct model *m, int tok, int secret_ok, uint32_t svc, uint32_t runner,
			     uint64_t now)
{
	tick(m, now);
	if (tok < 0 || m->t[tok].state != MT_ISSUED || !secret_ok || m->t[tok].deadline <= m->clock)
		return BOOK_E_UNKNOWN_JOB;
	struct m_token *t = &m->t[tok];
	if (t->svc != svc)
		return BOOK_E_BAD_TOKEN;
	if (runner >= m->lim.nhandlers)
		return BOOK_E_INVALID;
	t->state = MT_RUNNING;
	t->runner = runner;
	t->pgid = 0;
	m->svc[svc].started++;
	return BOOK_OK;
}

enum book_rc model_token_finished(struct model *m, int tok, const struct book_outcome *o)
{
	if (!o)
		return BOOK_E_INVALID;
	if (tok < 0 || m->t[tok].state == MT_FREE)
		return BOOK_E_STALE;
	if (m->t[tok].state != MT_RUNNING)
		return BOOK_E_BAD_STATE;
	sample(m, m->t[tok].svc, o);
	m->t[tok].state = MT_FREE;
	grant(m, wg_of(m, m->t[tok].svc));
	return BOOK_OK;
}

uint64_t model_token_deadline(const struct model *m)
{
	uint64_t best = UINT64_MAX;
	for (size_t i = 0; i < m->nt; i++)
		if (m->t[i].state == MT_ISSUED && m->t[i].deadline < best)
			best = m->t[i].deadline;
	return best;
}

enum book_rc model_done_read(const struct model *m, int wi, struct book_outcome *o, char *buf,
			     size_t cap, size_t *len)
{
	if (wi < 0 || m->w[wi].state == MW_FREE)
		return BOOK_E_STALE;
	const struct m_want *w = &m->w[wi];
	if (w->state != MW_FINISHED)
		return BOOK_E_BAD_STATE;
	*o = w->out;
	size_t n = w->kept ? w->rlen : 0;
	if (buf && cap > 0) {
		size_t c = n < cap - 1 ? n : cap - 1;
		memcpy(buf, w->rtext, c);
		buf[c] = '\0';
	}
	*len = n;
	return BOOK_OK;
}

enum book_rc model_done_delivered(struct model *m, int wi)
{
	if (wi < 0 || m->w[wi].state == MW_FREE)
		return BOOK_E_STALE;
	if (m->w[wi].state != MW_FINISHED)
		return BOOK_E_BAD_STATE;
	want_free(m, wi);
	return BOOK_OK;
}

enum book_rc model_cancel(struct model *m, int conn, const char *job, enum want_state *was,
			  int *want)
{
	if (!conn_ok(m, conn))
		return BOOK_E_STALE;
	if (!id_ok(job))
		return BOOK_E_INVALID;
	int wi = model_lookup(m, conn, job);
	if (wi < 0 || m->w[wi].state == MW_FINISHED)
		return BOOK_E_UNKNOWN_JOB;
	struct m_want *w = &m->w[wi];
	*was = (enum want_state)w->state;
	if (w->state != MW_RUNNING)
		return model_unwant(m, conn, job);
	*want = wi;
	for (size_t i = 0; i < m->nmail[w->runner]; i++)
		if (m->mail[w->runner][i].kind == MAIL_CANCEL && m->mail[w->runner][i].want == wi)
			return BOOK_OK; /* asked already, not taken yet */
	mail_push(m, w->runner, MAIL_CANCEL, wi, -1, w->id);
	return BOOK_OK;
}

enum book_rc model_owner(const struct model *m, int wi, int *conn)
{
	if (wi < 0 || m->w[wi].state == MW_FREE || m->w[wi].conn < 0)
		return BOOK_E_STALE;
	*conn = m->w[wi].conn;
	return BOOK_OK;
}

/* ---- conns and clients ---- */

static int new_client(struct model *m)
{
	size_t used = 0;
	for (size_t i = 0; i < m->nk; i++)
		used += m->k[i].state != MK_FREE;
	if (used >= 2 * (size_t)m->lim.max_connections) {
		int oldest = -1;
		for (size_t i = 0; i < m->nk; i++)
			if (m->k[i].state == MK_GRACE &&
			    (oldest < 0 || m->k[i].grace_seq < m->k[oldest].grace_seq))
				oldest = (int)i;
		if (oldest < 0)
			return -1;
		client_free(m, oldest);
	}
	GROW(m->k, m->nk, m->capk);
	memset(&m->k[m->nk], 0, sizeof m->k[0]);
	return (int)m->nk++;
}

enum book_rc model_conn_open(struct model *m, uint32_t h, const char *client, uint64_t now,
			     int *conn)
{
	tick(m, now);
	size_t len = client ? strnlen(client, BOOK_ID_MAX + 1) : 0;
	if (h >= m->lim.nhandlers || len > BOOK_ID_MAX)
		return BOOK_E_INVALID;
	uint32_t conns, clients, wants;
	model_status(m, &conns, &clients, &wants);
	if (conns >= m->lim.max_connections)
		return BOOK_E_LIMIT_CONNS;
	int ci = -1;
	if (len)
		for (size_t i = 0; i < m->nk; i++)
			if (m->k[i].state != MK_FREE && m->k[i].named &&
			    strcmp(m->k[i].id, client) == 0)
				ci = (int)i;
	if (ci < 0) {
		ci = new_client(m);
		if (ci < 0)
			return BOOK_E_LIMIT_CONNS;
		m->k[ci].state = MK_LIVE;
		m->k[ci].named = len > 0;
		if (len)
			strcpy(m->k[ci].id, client);
	}
	GROW(m->c, m->nc, m->capc);
	int c = (int)m->nc++;
	memset(&m->c[c], 0, sizeof m->c[c]);
	m->c[c].live = 1;
	m->c[c].h = h;
	m->c[c].client = ci;
	m->c[c].open_seq = ++m->open_seq;
	if (m->k[ci].state == MK_GRACE) {
		m->k[ci].state = MK_LIVE;
		int *jobs;
		size_t n = client_jobs(m, ci, &jobs);
		for (size_t i = 0; i < n; i++) {
			m->w[jobs[i]].conn = c;
			if (m->w[jobs[i]].state == MW_FINISHED)
				done_mail(m, jobs[i]);
		}
		free(jobs);
	}
	if (client_nconns(m, ci) == 1)
		hello_dirty(m);
	*conn = c;
	return BOOK_OK;
}

static void conn_drop(struct model *m, int c)
{
	int ci = m->c[c].client;
	m->c[c].live = 0;
	for (size_t i = 0; i < m->nw; i++)
		if ((m->w[i].state == MW_PARKED || m->w[i].state == MW_OFFERED) &&
		    m->w[i].conn == c)
			want_free(m, (int)i);
	for (uint32_t h = 0; h < BOOK_MAX_HANDLERS; h++)
		for (size_t i = m->nmail[h]; i-- > 0;)
			if (m->mail[h][i].kind == MAIL_OFFER_EXPIRED && m->mail[h][i].conn == c)
				mail_remove_at(m, h, i);
	if (client_nconns(m, ci) > 0) {
		int nc = newest_conn(m, ci), *jobs;
		size_t n = client_jobs(m, ci, &jobs);
		for (size_t i = 0; i < n; i++) {
			struct m_want *w = &m->w[jobs[i]];
			if (w->conn != c)
				continue;
			w->conn = nc;
			if (w->state == MW_FINISHED)
				done_mail(m, jobs[i]);
		}
		free(jobs);
		return;
	}
	if (m->k[ci].named && client_njobs(m, ci) > 0) {
		for (size_t i = 0; i < m->nw; i++)
			if (is_job(&m->w[i]) && m->w[i].client == ci) {
				m->w[i].conn = -1;
				if (m->w[i].state == MW_FINISHED)
					mail_drop_want(m, (int)i);
			}
		m->k[ci].state = MK_GRACE;
		m->k[ci].stamped = m->now_valid;
		m->k[ci].deadline = m->clock + m->lim.resume_grace_ms;
		m->k[ci].grace_seq = ++m->grace_seq;
	} else {
		client_free(m, ci);
	}
	hello_dirty(m);
}

void model_conn_close(struct model *m, int conn, uint64_t now)
{
	tick(m, now);
	if (!conn_ok(m, conn))
		return;
	conn_drop(m, conn);
	grant_all(m);
}

size_t model_purge(struct model *m, uint32_t h, int32_t *pgids, size_t max)
{
	if (h >= m->lim.nhandlers)
		return 0;
	/* its running jobs, in the order of its run list (acceptance order,
	 * arrival order after a repair: that is jorder), end as lost: like
	 * book_job_finished with the lost outcome, no runtime sample, no
	 * grant until the end */
	static const struct book_outcome lost = {
		.exit_code = -1,
		.error = BOOK_ERROR_LOST,
		.retryable = 1,
		.failed = 1,
	};
	size_t n = 0, nrun = 0;
	uint64_t *pairs = malloc((m->nw + 1) * 2 * sizeof *pairs);
	if (!pairs)
		abort();
	for (size_t i = 0; i < m->nw; i++)
		if (m->w[i].state == MW_RUNNING && m->w[i].runner == h) {
			pairs[2 * nrun] = m->w[i].jorder;
			pairs[2 * nrun + 1] = i;
			nrun++;
		}
	qsort(pairs, nrun, 2 * sizeof *pairs, by_jorder);
	for (size_t j = 0; j < nrun; j++) {
		int wi = (int)pairs[2 * j + 1];
		struct m_want *w = &m->w[wi];
		if (w->pgid > 0 && n < max)
			pgids[n++] = w->pgid;
		m->svc[w->svc].finished++;
		m->svc[w->svc].failed++;
		job_end(m, wi, &lost, NULL, 0);
	}
	free(pairs);
	for (size_t i = 0; i < m->nt; i++) { /* its running tokens, by book index */
		struct m_token *t = &m->t[i];
		if (t->state != MT_RUNNING || t->runner != h)
			continue;
		if (t->pgid > 0 && n < max)
			pgids[n++] = t->pgid;
		m->svc[t->svc].finished++;
		m->svc[t->svc].failed++;
		t->state = MT_FREE;
	}
	for (;;) { /* oldest conn first */
		int oldest = -1;
		for (size_t i = 0; i < m->nc; i++)
			if (m->c[i].live && m->c[i].h == h &&
			    (oldest < 0 || m->c[i].open_seq < m->c[oldest].open_seq))
				oldest = (int)i;
		if (oldest < 0)
			break;
		conn_drop(m, oldest);
	}
	m->nmail[h] = 0;
	m->hello[h] = 0;
	m->mask &= ~(1ULL << h);
	grant_all(m);
	return n;
}

uint32_t model_expire(struct model *m, uint64_t now)
{
	uint32_t n = 0;
	tick(m, now);
	for (uint32_t g = 0; g < m->topo.nwaitgroups; g++) {
		uint32_t before = n;
		for (;;) {
			int best = -1;
			for (size_t i = 0; i < m->nw; i++) {
				const struct m_want *w = &m->w[i];
				if (w->state == MW_OFFERED && wg_of(m, w->svc) == g && w->stamped &&
				    w->deadline <= m->clock &&
				    (best < 0 || w->offer_no < m->w[best].offer_no))
					best = (int)i;
			}
			if (best < 0)
				break;
			struct m_want *w = &m->w[best];
			uint32_t hh = m->c[w->conn].h;
			/* a pending OFFER becomes the OFFER_EXPIRED in place */
			int converted = 0;
			for (size_t i = 0; i < m->nmail[hh]; i++) {
				struct m_mail *e = &m->mail[hh][i];
				if (e->kind == MAIL_OFFER && e->want == best) {
					e->kind = MAIL_OFFER_EXPIRED;
					e->conn = w->conn;
					strcpy(e->id, w->id);
					e->exp_seq = ++m->exp_seq;
					converted = 1;
				}
			}
			if (!converted)
				mail_push(m, hh, MAIL_OFFER_EXPIRED, best, w->conn, w->id);
			w->state = MW_FREE;
			n++;
		}
		if (n != before)
			grant(m, g);
	}
	int freed[BOOK_MAX_WAITGROUPS] = { 0 };
	for (size_t i = 0; i < m->nt; i++)
		if (m->t[i].state == MT_ISSUED && m->t[i].deadline <= m->clock) {
			m->t[i].state = MT_FREE;
			freed[wg_of(m, m->t[i].svc)] = 1;
			n++;
		}
	for (uint32_t g = 0; g < m->topo.nwaitgroups; g++)
		if (freed[g])
			grant(m, g);
	for (;;) {
		int best = -1;
		for (size_t i = 0; i < m->nk; i++)
			if (m->k[i].state == MK_GRACE && m->k[i].stamped &&
			    m->k[i].deadline <= m->clock &&
			    (best < 0 || m->k[i].grace_seq < m->k[best].grace_seq))
				best = (int)i;
		if (best < 0)
			break;
		client_free(m, best);
		n++;
	}
	return n;
}

void model_set_draining(struct model *m)
{
	m->draining = 1;
	hello_dirty(m);
}

void model_repaired(struct model *m)
{
	/* the clients' job lists are rebuilt in arrival order */
	for (size_t i = 0; i < m->nw; i++)
		if (is_job(&m->w[i]))
			m->w[i].jorder = ++m->jorder;
	hello_dirty(m);
	grant_all(m);
}

/* ---- query: simulate the grant rule on a copy of the stamps ---- */

enum book_rc model_query(const struct model *m, int conn, const char *job, struct book_position *p)
{
	if (!conn_ok(m, conn))
		return BOOK_E_STALE;
	if (!id_ok(job))
		return BOOK_E_INVALID;
	int wi = model_lookup(m, conn, job);
	if (wi < 0)
		return BOOK_E_UNKNOWN_JOB;
	const struct m_want *w = &m->w[wi];
	uint32_t g = wg_of(m, w->svc);
	struct book_wg_status st;
	model_wg(m, g, &st);
	memset(p, 0, sizeof *p);
	p->state = (enum want_state)w->state;
	p->running = st.running + st.offered + st.tokens;
	p->capacity = st.processes;
	p->service = w->svc;
	if (w->state != MW_PARKED)
		return BOOK_OK;
	uint64_t *stamps = calloc(m->nc ? m->nc : 1, sizeof *stamps);
	char *taken = calloc(m->nw, 1);
	uint64_t counter = m->counter[g];
	for (size_t i = 0; i < m->nc; i++)
		stamps[i] = m->c[i].stamp[g];
	for (;;) {
		int best = -1;
		for (size_t i = 0; i < m->nw; i++)
			if (!taken[i] && m->w[i].state == MW_PARKED && wg_of(m, m->w[i].svc) == g &&
			    (best < 0 || key_less(m, stamps, g, (int)i, best)))
				best = (int)i;
		if (best == wi)
			break;
		taken[best] = 1;
		stamps[m->w[best].conn] = ++counter;
		p->ahead++;
	}
	free(stamps);
	free(taken);
	return BOOK_OK;
}
