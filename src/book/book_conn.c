/*
 * book_conn.c - connections, clients, the resume grace and handler purge.
 *
 * Owns the conn and client records, the handlers' conn lists, the clients'
 * conn lists and the grace list.  Invariants:
 *  - a live conn's client is in use; an anonymous client has exactly one
 *    live conn and is freed with it;
 *  - a client is LIVE iff it has live conns; GRACE iff it is named, has no
 *    live conn and has jobs, running or finished (it is then on the grace
 *    list, ordered by grace_seq, which is deadline order); a client with
 *    neither conns nor jobs does not exist;
 *  - every RUNNING or FINISHED want of a LIVE client names one of its live
 *    conns as owner (the one that placed it, else the newest); in GRACE the
 *    owner is BK_NIL until a conn of the client re-adopts the jobs;
 *  - whenever a FINISHED want gets a new owner conn it is mailed (MAIL_DONE
 *    to that conn's handler); when it loses its owner without a new one
 *    its pending DONE mail is withdrawn.
 *
 * The client table has 2 * max_connections records: at most
 * max_connections LIVE clients, the rest for clients in their grace.  When
 * a new client needs a record and all are taken, the client whose grace
 * began first loses the rest of it (its running jobs get MAIL_CANCEL, its
 * finished ones are freed).
 *
 * A purge ends the jobs its handler ran as lost (bk_job_end with the
 * outcome BOOK_ERROR_LOST), then drops its conns oldest first: a lost job
 * owned by one of them is re-homed by the drop like any finished job.
 *
 * book_conn_adopt (protocol 2) moves every job of the client to the new
 * conn; the finished ones are mailed there again, whether or not their
 * DONE went out on the old owner (the client acknowledges, and so
 * recognises, a second copy).  In the same critical section it withdraws
 * every offer made on the client's older conns (as if it had expired):
 * the client gave those conns up, so a JOB still on its way there must
 * not start a job its resume QUERY on the new conn was told is unknown
 * (docs/architecture.md, "What it found").  Their parked wants stay.
 *
 * Costs: book_conn_open O(1) (+ O(r) re-adopted jobs), book_conn_adopt
 * O(r + the client's wants) + the grant of withdrawn slots, book_conn_close
 * O(w + r + nodes), book_purge_handler O(everything of the handler),
 * HELLO-dirty O(handlers).
 */
#include "autoconfig.h"
#include "book/book.h"

#include <string.h>

#include "book/book_impl.h"
#include "book/book_index.h"

uint32_t bk_conn_get(const struct book *b, struct book_ref ref)
{
	if (ref.idx >= b->lim.max_connections)
		return BK_NIL;
	const struct bk_conn *c = bk_conn(b, ref.idx);
	if (c->state != BKC_LIVE || c->gen != ref.gen)
		return BK_NIL;
	return ref.idx;
}

uint32_t bk_client_newest_conn(const struct book *b, uint32_t ci)
{
	uint32_t best = BK_NIL;
	for (uint32_t c = bk_client(b, ci)->conn_head; c != BK_NIL; c = bk_conn(b, c)->k_next)
		if (best == BK_NIL || bk_conn(b, c)->open_seq > bk_conn(b, best)->open_seq)
			best = c;
	return best;
}

void bk_client_free(struct book *b, uint32_t ci)
{
	struct bk_client *k = bk_client(b, ci);
	if (k->state == BKK_FREE)
		return;
	/* its jobs have nobody to report to any more: cancel the running
	 * ones, forget the finished ones */
	while (k->job_head != BK_NIL) {
		uint32_t wi = k->job_head;
		if (bk_want(b, wi)->state == WANT_RUNNING)
			bk_want_orphan(b, wi);
		else
			bk_want_forget(b, wi);
		bk_fault("grace.mid");
	}
	uint8_t old = k->state;
	bk_set_state(&k->state, BKK_FREE);
	k->gen++;
	if (k->named)
		bk_client_index_del(b, ci);
	if (old == BKK_GRACE)
		BK_DL_UNLINK(bk_client, b, b->grace_head, b->grace_tail, ci, g_prev, g_next);
	k->g_prev = BK_NIL;
	k->g_next = b->client_free;
	b->client_free = ci;
}

void bk_client_release_if_idle(struct book *b, uint32_t ci)
{
	const struct bk_client *k = bk_client(b, ci);
	if (k->state != BKK_FREE && k->nconns == 0 && k->njobs == 0)
		bk_client_free(b, ci);
}

static uint32_t client_alloc(struct book *b)
{
	if (b->client_free == BK_NIL) {
		if (b->grace_head == BK_NIL)
			return BK_NIL;
		bk_client_free(b, b->grace_head);
	}
	uint32_t ci = b->client_free;
	b->client_free = bk_client(b, ci)->g_next;
	bk_client(b, ci)->g_next = BK_NIL;
	return ci;
}

void bk_conn_drop(struct book *b, uint32_t c)
{
	struct bk_conn *cn = bk_conn(b, c);
	uint32_t ci = cn->client, h = cn->handler;
	struct bk_client *k = bk_client(b, ci);
	bk_set_state(&cn->state, BKC_FREE);
	cn->gen++;
	bk_fault("close.mid");
	BK_DL_UNLINK(bk_conn, b, b->handlers[h].conn_head, b->handlers[h].conn_tail, c, h_prev,
		     h_next);
	b->handlers[h].nconns--;
	b->nconns--;
	BK_DL_UNLINK_H(bk_conn, b, k->conn_head, c, k_prev, k_next);
	k->nconns--;
	/* parked wants dropped, offered slots freed, pending mail dropped */
	while (cn->want_head != BK_NIL)
		bk_want_free(b, cn->want_head, NULL);
	if (k->nconns > 0) {
		/* the client lives on: its jobs owned here report to its newest
		 * conn; the finished ones are (re-)mailed there */
		uint32_t nc = bk_client_newest_conn(b, ci);
		for (uint32_t wi = k->job_head; wi != BK_NIL; wi = bk_want(b, wi)->o_next) {
			struct bk_want *w = bk_want(b, wi);
			if (w->conn == c) {
				w->conn = nc;
				w->conn_gen = bk_conn(b, nc)->gen;
				if (w->state == WANT_FINISHED)
					bk_done_mail(b, wi);
			}
		}
	} else {
		b->nclients_live--;
		if (k->named && k->njobs > 0) {
			/* kept for the grace, with nobody to tell yet */
			for (uint32_t wi = k->job_head; wi != BK_NIL; wi = bk_want(b, wi)->o_next) {
				struct bk_want *w = bk_want(b, wi);
				w->conn = BK_NIL;
				if (w->flags & BKW_DONE_MAIL) {
					w->flags &= (uint8_t)~BKW_DONE_MAIL;
					bk_mail_unlink(b, wi);
				}
			}
			k->stamped = b->now_valid != 0;
			k->grace_deadline = b->clock + b->lim.resume_grace_ms;
			k->grace_seq = ++b->grace_seq;
			bk_set_state(&k->state, BKK_GRACE);
			BK_DL_APPEND(bk_client, b, b->grace_head, b->grace_tail, ci, g_prev,
				     g_next);
		} else {
			bk_client_free(b, ci);
		}
		bk_hello_dirty(b);
	}
	cn->h_prev = BK_NIL;
	cn->h_next = b->conn_free;
	b->conn_free = c;
}

enum book_rc book_conn_open(struct book *b, uint32_t handler, const char *client_id,
			    uint64_t now_ms, struct book_ref *conn)
{
	bk_tick(b, now_ms);
	size_t len = client_id ? strnlen(client_id, BOOK_ID_MAX + 1) : 0;
	if (handler >= b->lim.nhandlers || len > BOOK_ID_MAX)
		return BOOK_E_INVALID;
	if (b->nconns >= b->lim.max_connections)
		return BOOK_E_LIMIT_CONNS;
	uint32_t ci = len ? bk_find_client(b, client_id, len) : BK_NIL;
	if (ci == BK_NIL) {
		ci = client_alloc(b);
		if (ci == BK_NIL)
			return BOOK_E_LIMIT_CONNS;
		struct bk_client *k = bk_client(b, ci);
		k->named = len > 0;
		k->idlen = (uint8_t)len;
		memcpy(k->id, client_id ? client_id : "", len);
		k->stamped = 0;
		k->grace_deadline = 0;
		k->grace_seq = 0;
		k->nconns = k->njobs = 0;
		k->conn_head = k->job_head = k->job_tail = BK_NIL;
		k->g_prev = k->g_next = BK_NIL;
		bk_set_state(&k->state, BKK_LIVE);
		if (k->named)
			bk_client_index_add(b, ci);
	}
	bk_fault("open.mid");
	struct bk_client *k = bk_client(b, ci);
	uint32_t c = b->conn_free;
	struct bk_conn *cn = bk_conn(b, c);
	b->conn_free = cn->h_next;
	cn->handler = handler;
	cn->client = ci;
	cn->client_gen = k->gen;
	cn->open_seq = ++b->open_seq;
	memset(cn->stamp, 0, sizeof cn->stamp);
	cn->nwants = 0;
	cn->want_head = cn->want_tail = cn->node_head = BK_NIL;
	bk_set_state(&cn->state, BKC_LIVE);
	BK_DL_APPEND(bk_conn, b, b->handlers[handler].conn_head, b->handlers[handler].conn_tail, c,
		     h_prev, h_next);
	b->handlers[handler].nconns++;
	b->nconns++;
	BK_DL_PUSH(bk_conn, b, k->conn_head, c, k_prev, k_next);
	k->nconns++;
	if (k->state == BKK_GRACE) {
		/* resume: the jobs kept through the grace report here now; the
		 * finished ones get their DONE mailed to this handler */
		for (uint32_t wi = k->job_head; wi != BK_NIL; wi = bk_want(b, wi)->o_next) {
			bk_want(b, wi)->conn = c;
			bk_want(b, wi)->conn_gen = cn->gen;
			if (bk_want(b, wi)->state == WANT_FINISHED)
				bk_done_mail(b, wi);
		}
		bk_set_state(&k->state, BKK_LIVE);
		BK_DL_UNLINK(bk_client, b, b->grace_head, b->grace_tail, ci, g_prev, g_next);
	}
	if (k->nconns == 1) {
		b->nclients_live++;
		bk_hello_dirty(b);
	}
	if (conn) {
		conn->idx = c;
		conn->gen = cn->gen;
	}
	return BOOK_OK;
}

/* The client's offers on its conns other than keep are withdrawn as if they
 * had expired (book_conn_adopt); returns how many (the caller grants). */
static uint32_t withdraw_offers_elsewhere(struct book *b, uint32_t ci, uint32_t keep)
{
	uint32_t n = 0;
	for (uint32_t o = bk_client(b, ci)->conn_head; o != BK_NIL; o = bk_conn(b, o)->k_next) {
		if (o == keep)
			continue;
		/* an EXPIRED record stays on the conn's list: o_next holds */
		for (uint32_t wi = bk_conn(b, o)->want_head; wi != BK_NIL;
		     wi = bk_want(b, wi)->o_next)
			if (bk_want(b, wi)->state == WANT_OFFERED) {
				bk_offer_expire(b, wi);
				n++;
			}
	}
	return n;
}

uint32_t book_conn_adopt(struct book *b, struct book_ref conn)
{
	uint32_t c = bk_conn_get(b, conn), n = 0;
	if (c == BK_NIL)
		return 0;
	struct bk_conn *cn = bk_conn(b, c);
	for (uint32_t wi = bk_client(b, cn->client)->job_head; wi != BK_NIL;
	     wi = bk_want(b, wi)->o_next) {
		struct bk_want *w = bk_want(b, wi);
		if (w->conn == c)
			continue;
		w->conn = c;
		w->conn_gen = cn->gen;
		n++;
		if (w->state == WANT_FINISHED)
			bk_done_mail(b, wi); /* moves a pending DONE mail here */
	}
	if (withdraw_offers_elsewhere(b, cn->client, c))
		bk_grant_all(b);
	return n;
}

void book_conn_close(struct book *b, struct book_ref conn, uint64_t now_ms)
{
	bk_tick(b, now_ms);
	uint32_t c = bk_conn_get(b, conn);
	if (c == BK_NIL)
		return;
	bk_conn_drop(b, c);
	bk_grant_all(b);
}

size_t book_purge_handler(struct book *b, uint32_t handler, int32_t *pgids, size_t max)
{
	if (handler >= b->lim.nhandlers)
		return 0;
	struct bk_handler *hd = &b->handlers[handler];
	size_t n = 0;
	/* the jobs it ran died with it: each ends as lost, as if its runner
	 * had reported it (slot freed, DONE to its owner conn's handler; an
	 * orphan freed); the finished ones are not on its list: they no
	 * longer depend on it.  The grant waits for the end of the purge, when
	 * the wants of its conns are gone. */
	static const struct book_outcome lost = {
		.exit_code = -1,
		.error = BOOK_ERROR_LOST,
		.retryable = 1,
		.failed = 1,
	};
	while (hd->run_head != BK_NIL) {
		uint32_t wi = hd->run_head;
		struct bk_want *w = bk_want(b, wi);
		if (w->pgid > 0 && n < max && pgids)
			pgids[n++] = w->pgid;
		/* it ended, and failed; no runtime sample: a lost job ran 0 ms
		 * by its outcome, never longer than the average
		 * (class_takes_sample) */
		bk_job_end(b, wi, &lost, NULL, 0, NULL);
	}
	n += bk_token_purge(b, handler, pgids ? pgids + n : NULL, pgids ? max - n : 0);
	bk_fault("purge.mid");
	while (hd->conn_head != BK_NIL) /* oldest first */
		bk_conn_drop(b, hd->conn_head);
	/* nothing it should still say: empty its mailbox */
	while (hd->mail_head != BK_NIL) {
		uint32_t wi = hd->mail_head;
		bk_mail_unlink(b, wi);
		struct bk_want *w = bk_want(b, wi);
		if (w->state == BK_WANT_EXPIRED)
			bk_want_free(b, wi, NULL);
		else
			w->flags &= (uint8_t) ~(BKW_OFFER_MAIL | BKW_CANCEL_MAIL);
	}
	hd->hello = 0;
	hd->pid = 0;
	b->mail_mask &= ~(1ULL << handler);
	bk_grant_all(b);
	return n;
}
