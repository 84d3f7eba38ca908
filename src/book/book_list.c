/*
 * book_list.c - the console's views of the book (book.h, "views for the
 * console"): the wants one by one (the parked ones from the head of each
 * waitgroup's line, book_query.c's bk_query_head), and the ring of the
 * last failed jobs.
 *
 * Listing reads the derived lists (runner lists, offered lists, the
 * services' heaps and their nodes' FIFOs), so it is right after a repair
 * as well; it changes nothing but the scratch arrays (book_query's, and
 * book_handler_clients' marks per client).  The ring
 * of failures is statistics (book_layout.h): written after the state
 * write of the job's end, read by nothing but book_failures, left alone
 * by repair; a holder dying mid-entry leaves that one entry torn (its
 * strings are NUL-terminated on read, so a torn one is wrong, not unsafe).
 */
#include "autoconfig.h"

#include <string.h>

#include "book/book.h"
#include "book/book_impl.h"

static void copy_id(char *dst, const char *src, size_t len)
{
	if (len > BOOK_ID_MAX)
		len = BOOK_ID_MAX;
	memcpy(dst, src, len);
	dst[len] = '\0';
}

static void client_of(const struct book *b, uint32_t ci, char *out)
{
	out[0] = '\0';
	if (ci == BK_NIL || ci >= b->nclient_tab)
		return;
	const struct bk_client *k = bk_client(b, ci);
	if (k->named)
		copy_id(out, k->id, k->idlen);
}

void bk_failure_note(struct book *b, const struct bk_want *w, const struct book_outcome *o)
{
	struct book_failure *f = &b->failures[b->fail_next % BOOK_FAILURES];
	copy_id(f->job_id, w->job_id, w->idlen);
	client_of(b, w->client, f->client_id);
	f->service = w->service;
	f->error = o->error;
	f->signal = o->signal;
	f->exit_code = o->exit_code;
	f->duration_ms = o->duration_ms;
	f->at_ms = b->clock;
	b->fail_next++;
}

size_t book_failures(const struct book *b, struct book_failure *out, size_t max)
{
	uint64_t kept = b->fail_next < BOOK_FAILURES ? b->fail_next : BOOK_FAILURES;
	size_t n = 0;
	for (uint64_t i = 0; i < kept && n < max; i++, n++) {
		out[n] = b->failures[(b->fail_next - 1 - i) % BOOK_FAILURES];
		out[n].job_id[BOOK_ID_MAX] = out[n].client_id[BOOK_ID_MAX] = '\0';
		if (out[n].service >= b->topo.nservices)
			out[n].service = 0;
	}
	return n;
}

static void fill(const struct book *b, uint32_t wi, struct book_want_info *i)
{
	const struct bk_want *w = bk_want(b, wi);
	memset(i, 0, sizeof *i);
	i->ref.idx = wi;
	i->ref.gen = w->gen;
	i->state = (enum want_state)w->state;
	copy_id(i->job_id, w->job_id, w->idlen);
	client_of(b, w->client, i->client_id);
	i->conn = w->conn;
	i->service = w->service;
	i->priority = w->priority;
	i->command = -1;
	i->progress = -1;
	if (w->state == WANT_RUNNING) {
		i->progress = w->progress ? w->progress - 1 : -1;
		i->handler = w->runner;
		i->since_ms = w->started_ms;
		i->command = w->command ? w->command - 1 : -1;
		i->pgid = w->pgid;
	} else {
		i->handler = w->conn != BK_NIL ? bk_conn(b, w->conn)->handler : BK_NIL;
		if (w->state == WANT_PARKED)
			i->since_ms = w->parked_at; /* position: by bk_query_head */
	}
}

struct listing {
	struct book_want_info *out;
	size_t n;
};

static void list_parked(const struct book *b, uint32_t wi, uint32_t position, void *ctx)
{
	struct listing *l = ctx;
	fill(b, wi, &l->out[l->n]);
	l->out[l->n++].position = position;
}

size_t book_list_wants(const struct book *b, struct book_want_info *out, size_t max,
		       uint32_t max_parked)
{
	struct listing l = { out, 0 };
	for (uint32_t h = 0; h < b->lim.nhandlers; h++)
		for (uint32_t x = b->handlers[h].run_head; x != BK_NIL && l.n < max;
		     x = bk_want(b, x)->q_next)
			fill(b, x, &out[l.n++]);
	for (uint32_t g = 0; g < b->topo.nwaitgroups; g++)
		for (uint32_t x = b->wgs[g].off_head; x != BK_NIL && l.n < max;
		     x = bk_want(b, x)->q_next)
			fill(b, x, &out[l.n++]);
	for (uint32_t g = 0; g < b->topo.nwaitgroups && l.n < max; g++)
		bk_query_head(b, g, max - l.n < max_parked ? max - l.n : max_parked, list_parked,
			      &l);
	return l.n;
}

void book_handler_clients(const struct book *b, uint32_t *out)
{
	/* mark[client] = 1 + the last handler that counted it: handlers are
	 * visited in order, so one pass over the conns counts each client
	 * once per handler (a walk of the client's conns per conn would cost
	 * conns x conns per client, seconds for one client of 32,768 conns) */
	uint32_t *mark = bk_scratch(b, 1);
	for (uint32_t h = 0; h < b->lim.nhandlers; h++)
		for (uint32_t c = b->handlers[h].conn_head; c != BK_NIL; c = bk_conn(b, c)->h_next)
			mark[bk_conn(b, c)->client] = 0;
	for (uint32_t h = 0; h < BOOK_MAX_HANDLERS; h++) {
		out[h] = 0;
		if (h >= b->lim.nhandlers)
			continue;
		for (uint32_t c = b->handlers[h].conn_head; c != BK_NIL;
		     c = bk_conn(b, c)->h_next) {
			uint32_t k = bk_conn(b, c)->client;
			if (mark[k] != h + 1) {
				mark[k] = h + 1;
				out[h]++;
			}
		}
	}
}
