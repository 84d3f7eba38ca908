/*
 * book_fixture.c - see book_fixture.h.  Owns the mapping of the test book
 * and the mail log.
 */
#include "autoconfig.h"
#include "book_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void fx_topo(struct book_topology *t, uint32_t nwg, const uint32_t *procs, uint32_t nsvc,
	     const uint32_t *svc_wg)
{
	memset(t, 0, sizeof *t);
	t->nwaitgroups = nwg;
	for (uint32_t g = 0; g < nwg; g++) {
		t->waitgroups[g].name[0] = (char)('A' + g % 26);
		t->waitgroups[g].processes = procs[g];
	}
	t->nservices = nsvc;
	for (uint32_t s = 0; s < nsvc; s++) {
		t->services[s].name[0] = (char)('a' + s % 26);
		t->services[s].waitgroup = svc_wg ? svc_wg[s] : 0;
		t->services[s].enabled = 1;
	}
}

void fx_limits(struct book_limits *l)
{
	memset(l, 0, sizeof *l);
	l->max_connections = 16;
	l->max_wants = 512;
	l->max_wants_per_connection = 200;
	l->nhandlers = 4;
	l->offer_timeout_ms = 1000;
	l->resume_grace_ms = 5000;
	l->max_receipts = 4;
	l->receipt_bytes = 64;
}

int fx_init(struct fx *f, const struct book_limits *l, const struct book_topology *t, uint64_t seed)
{
	static const uint8_t id[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
	memset(f, 0, sizeof *f);
	f->lim = *l;
	f->topo = *t;
	f->size = book_size(l);
	if (f->size == 0)
		return -1;
	f->mem = mmap(NULL, f->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (f->mem == MAP_FAILED)
		return -1;
	if (book_init(f->mem, l, t, id, seed) < 0)
		return -1;
	f->b = book_from_mem(f->mem);
	f->log = calloc(FX_LOG_MAX, sizeof *f->log);
	return f->b && f->log ? 0 : -1;
}

void fx_fini(struct fx *f)
{
	if (f->mem && f->mem != MAP_FAILED)
		munmap(f->mem, f->size);
	free(f->log);
	memset(f, 0, sizeof *f);
}

void fx_lock(struct fx *f)
{
	f->last_lock = book_lock(f->b);
}

void fx_unlock(struct fx *f)
{
	f->mask = book_unlock(f->b);
}

int fx_check(struct fx *f, char *why, size_t whylen)
{
	fx_lock(f);
	int rc = book_check(f->b, why, whylen);
	fx_unlock(f);
	return rc;
}

enum book_rc fx_open(struct fx *f, uint32_t handler, const char *client, uint64_t now,
		     struct book_ref *conn)
{
	fx_lock(f);
	enum book_rc rc = book_conn_open(f->b, handler, client, now, conn);
	fx_unlock(f);
	return rc;
}

void fx_close(struct fx *f, struct book_ref conn, uint64_t now)
{
	fx_lock(f);
	book_conn_close(f->b, conn, now);
	fx_unlock(f);
}

enum book_rc fx_want(struct fx *f, struct book_ref conn, const char *job, uint32_t svc,
		     int32_t prio, uint64_t now)
{
	fx_lock(f);
	enum book_rc rc = book_want(f->b, conn, job, svc, prio, now);
	fx_unlock(f);
	return rc;
}

enum book_rc fx_unwant(struct fx *f, struct book_ref conn, const char *job)
{
	fx_lock(f);
	enum book_rc rc = book_unwant(f->b, conn, job);
	fx_unlock(f);
	return rc;
}

enum book_rc fx_accept(struct fx *f, struct book_ref conn, const char *job, uint64_t token,
		       uint32_t runner, struct book_ref *want)
{
	fx_lock(f);
	enum book_rc rc = book_accept(f->b, conn, job, token, runner, want);
	fx_unlock(f);
	return rc;
}

enum book_rc fx_decline(struct fx *f, struct book_ref conn, const char *job, uint64_t token)
{
	fx_lock(f);
	enum book_rc rc = book_decline(f->b, conn, job, token);
	fx_unlock(f);
	return rc;
}

enum book_rc fx_finish(struct fx *f, struct book_ref want, uint64_t ms, int failed)
{
	struct book_outcome o;
	memset(&o, 0, sizeof o);
	o.exit_code = failed ? 1 : 0;
	o.failed = failed != 0;
	o.duration_ms = (uint32_t)ms;
	fx_lock(f);
	enum book_rc rc = book_job_finished(f->b, want, &o, NULL, 0);
	if (rc == BOOK_OK && book_done_read(f->b, want, NULL, NULL, 0, NULL) == BOOK_OK)
		rc = book_done_delivered(f->b, want);
	fx_unlock(f);
	return rc;
}

enum book_rc fx_finished(struct fx *f, struct book_ref want, int32_t exit_code, uint32_t ms,
			 const char *receipt)
{
	struct book_outcome o;
	memset(&o, 0, sizeof o);
	o.exit_code = exit_code;
	o.failed = exit_code != 0;
	o.duration_ms = ms;
	fx_lock(f);
	enum book_rc rc = book_job_finished(f->b, want, &o, receipt, receipt ? strlen(receipt) : 0);
	fx_unlock(f);
	return rc;
}

enum book_rc fx_done_read(struct fx *f, struct book_ref want, struct book_outcome *o, char *buf,
			  size_t cap, size_t *len)
{
	fx_lock(f);
	enum book_rc rc = book_done_read(f->b, want, o, buf, cap, len);
	fx_unlock(f);
	return rc;
}

enum book_rc fx_delivered(struct fx *f, struct book_ref want)
{
	fx_lock(f);
	enum book_rc rc = book_done_delivered(f->b, want);
	fx_unlock(f);
	return rc;
}

enum book_rc fx_cancel(struct fx *f, struct book_ref conn, const char *job, enum want_state *was)
{
	enum want_state w = WANT_FREE;
	fx_lock(f);
	enum book_rc rc = book_cancel(f->b, conn, job, &w, NULL);
	fx_unlock(f);
	if (was)
		*was = w;
	return rc;
}

uint32_t fx_expire(struct fx *f, uint64_t now)
{
	fx_lock(f);
	uint32_t n = book_expire(f->b, now);
	fx_unlock(f);
	return n;
}

size_t fx_purge(struct fx *f, uint32_t handler, int32_t *pgids, size_t max)
{
	fx_lock(f);
	size_t n = book_purge_handler(f->b, handler, pgids, max);
	fx_unlock(f);
	return n;
}

enum book_rc fx_query(struct fx *f, struct book_ref conn, const char *job, struct book_position *p)
{
	fx_lock(f);
	enum book_rc rc = book_query(f->b, conn, job, p);
	fx_unlock(f);
	return rc;
}

void fx_wg(struct fx *f, uint32_t wg, struct book_wg_status *st)
{
	fx_lock(f);
	book_wg_status(f->b, wg, st);
	fx_unlock(f);
}

size_t fx_pump(struct fx *f)
{
	struct book_mail m[64];
	size_t total = 0;
	fx_lock(f);
	for (uint32_t h = 0; h < f->lim.nhandlers; h++) {
		size_t n;
		while ((n = book_mail_take(f->b, h, m, 64)) > 0) {
			for (size_t i = 0; i < n; i++) {
				if (f->nlog < FX_LOG_MAX) {
					f->log[f->nlog].handler = h;
					f->log[f->nlog].m = m[i];
					f->nlog++;
				}
			}
			total += n;
		}
	}
	fx_unlock(f);
	return total;
}

void fx_log_clear(struct fx *f)
{
	f->nlog = 0;
}

const struct fx_mail *fx_find(const struct fx *f, enum book_mail_kind kind, const char *job)
{
	for (size_t i = f->nlog; i-- > 0;)
		if (f->log[i].m.kind == kind && (!job || strcmp(f->log[i].m.job_id, job) == 0))
			return &f->log[i];
	return NULL;
}

size_t fx_count(const struct fx *f, enum book_mail_kind kind, const char *job)
{
	size_t n = 0;
	for (size_t i = 0; i < f->nlog; i++)
		if (f->log[i].m.kind == kind && (!job || strcmp(f->log[i].m.job_id, job) == 0))
			n++;
	return n;
}

uint64_t fx_token(struct fx *f, const char *job)
{
	fx_pump(f);
	const struct fx_mail *m = fx_find(f, MAIL_OFFER, job);
	return m ? m->m.token : 0;
}

enum book_rc fx_take_job(struct fx *f, struct book_ref conn, const char *job, struct book_ref *want)
{
	uint64_t t = fx_token(f, job);
	const struct fx_mail *m = fx_find(f, MAIL_OFFER, job);
	return fx_accept(f, conn, job, t, m ? m->handler : 0, want);
}

const char *fx_offers(struct fx *f, size_t from)
{
	static char buf[4096];
	size_t len = 0;
	buf[0] = '\0';
	fx_pump(f);
	for (size_t i = from; i < f->nlog; i++) {
		if (f->log[i].m.kind != MAIL_OFFER)
			continue;
		int n = snprintf(buf + len, sizeof buf - len, "%s%s", len ? "," : "",
				 f->log[i].m.job_id);
		if (n < 0 || (size_t)n >= sizeof buf - len)
			break;
		len += (size_t)n;
	}
	return buf;
}

int fx_fini_checked(struct fx *f)
{
	char why[256];
	int rc = fx_check(f, why, sizeof why);
	if (rc)
		printf("\n  book_check: %s\n", why);
	fx_fini(f);
	return rc;
}
