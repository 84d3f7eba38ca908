/*
 * book_grant.c - the grant rule, the offered lists and offer expiry.
 *
 * Owns wgs[].off_head/off_tail, the conns' stamps and the wgs' grant
 * counters.  Invariants:
 *  - running + offered + tokens <= processes in every waitgroup;
 *  - after every public operation, unless draining, no waitgroup has both a
 *    free slot and an eligible parked want (grants are eager; eligibility
 *    changes only when a slot is taken or freed, or a class changes in
 *    book_job_finished / book_profile_set, and each of those grants);
 *  - each offered list is in offer_no order, which is also deadline order
 *    (the timeout is constant and the clock never goes back), and its
 *    unstamped offers (BKW_STAMPED clear) are a suffix.
 *
 * Grant rule (book.h): the taker is the eligible parked want with the
 * smallest key (-priority, stamp(conn, wg), seq); eligibility is per
 * service (bk_eligible: auto-balance classes), so a grant looks only at
 * the roots of the eligible services' heaps.  Each service keeps a
 * pairing heap of its nodes; a node's key is its head want's key, and a
 * node's FIFO is in seq order, so the service's heap root holds its best
 * want and the waitgroup's best want is the best root among its services.
 *
 * Complexity: one grant is O(S + k log n) amortized, S = services of the
 * waitgroup, k = nodes of the winning conn in the waitgroup (usually 1:
 * one per service and priority it uses), n = nodes in a heap.  A grant
 * loop runs once per free slot.
 */
#include "autoconfig.h"
#include "book/book.h"

#include "book/book_class.h"
#include "book/book_heap.h"
#include "book/book_impl.h"
#include "book/book_index.h"

/* Whether service s may take a free slot now (book.h, struct
 * book_autobalance): O(1), so the grant stays O(S + k log n).  Every
 * service keeps its own lane (heap), so an ineligible one is skipped
 * without blocking the others. */
int bk_eligible(const struct book *b, uint32_t s)
{
	const struct book_autobalance *ab = &b->topo.autobalance;
	if (!ab->enabled)
		return 1;
	const struct bk_service *sv = &b->svcs[s];
	const struct bk_wg *wg = &b->wgs[sv->wg];
	switch (sv->klass) {
	case SVC_HEAVY:
		return (uint64_t)wg->running + wg->offered + wg->tokens + ab->reserve <
		       wg->processes;
	case SVC_UNKNOWN: return (uint64_t)sv->running + sv->offered < ab->unknown_cap;
	default: return 1;
	}
}

void bk_offered_append(struct book *b, uint32_t wi)
{
	struct bk_wg *wg = &b->wgs[bk_want_wg(b, bk_want(b, wi))];
	BK_DL_APPEND(bk_want, b, wg->off_head, wg->off_tail, wi, q_prev, q_next);
}

void bk_offered_unlink(struct book *b, uint32_t wi)
{
	struct bk_wg *wg = &b->wgs[bk_want_wg(b, bk_want(b, wi))];
	BK_DL_UNLINK(bk_want, b, wg->off_head, wg->off_tail, wi, q_prev, q_next);
}

static int grant_one(struct book *b, uint32_t g)
{
	struct bk_wg *wg = &b->wgs[g];
	uint32_t best = BK_NIL;
	for (uint32_t s = wg->svc_head; s != BK_NIL; s = b->svcs[s].wg_next) {
		uint32_t r = b->svcs[s].root;
		if (r == BK_NIL || !bk_eligible(b, s))
			continue;
		if (best == BK_NIL || bk_node_less(b, r, best))
			best = r;
	}
	if (best == BK_NIL)
		return 0;
	struct bk_node *n = bk_node(b, best);
	uint32_t wi = n->head, c = n->conn;
	struct bk_want *w = bk_want(b, wi);

	/* primary: the conn's stamp, then the want (state last); the
	 * deadline only after the state, as an offer granted without the
	 * time gets it: until the state says OFFERED its bytes are the
	 * PARKED want's parked_at, which a crash must leave intact */
	bk_conn(b, c)->stamp[g] = ++wg->grant_counter;
	w->token = bk_token(b);
	w->offer_no = ++b->grants;
	w->flags = BKW_OFFER_MAIL;
	bk_fault("grant.state");
	bk_set_state(&w->state, WANT_OFFERED);
	if (b->now_valid)
		bk_offer_stamp(b, w);
	bk_fault("grant.mid");

	/* derived: leave the FIFO, then re-key every node of the conn in this
	 * waitgroup (their stamp grew; the winner's head changed too: its key
	 * is written between leaving the heap and coming back) */
	BK_DL_UNLINK(bk_want, b, n->head, n->tail, wi, q_prev, q_next);
	n->count--;
	w->node = BK_NIL;
	if (n->count == 0) {
		bk_heap_remove(b, n->service, best);
		bk_node_index_del(b, best);
		struct bk_conn *cn = bk_conn(b, c);
		BK_DL_UNLINK_H(bk_node, b, cn->node_head, best, c_prev, c_next);
		n->used = 0;
		n->head = n->tail = BK_NIL;
		n->c_next = b->node_free;
		b->node_free = best;
	}
	uint64_t stamp = bk_conn(b, c)->stamp[g];
	for (uint32_t m = bk_conn(b, c)->node_head; m != BK_NIL; m = bk_node(b, m)->c_next) {
		struct bk_node *nm = bk_node(b, m);
		if (b->svcs[nm->service].wg != g)
			continue;
		bk_heap_remove(b, nm->service, m);
		nm->stamp = stamp;
		if (m == best)
			nm->seq = bk_want(b, nm->head)->seq;
		bk_heap_insert(b, nm->service, m);
	}
	wg->waiting--;
	b->svcs[w->service].waiting--;
	wg->offered++;
	b->svcs[w->service].offered++;
	bk_offered_append(b, wi);
	bk_mail_push(b, bk_conn(b, c)->handler, wi);
	return 1;
}

void bk_offer_stamp(struct book *b, struct bk_want *w)
{
	uint64_t parked_at = w->parked_at; /* the deadline takes its place */
	w->deadline = b->clock + b->lim.offer_timeout_ms;
	w->flags |= BKW_STAMPED;
	hist_add(&b->svcs[w->service].slot_wait, b->clock > parked_at ? b->clock - parked_at : 0);
}

void bk_grant(struct book *b, uint32_t g)
{
	if (b->draining)
		return;
	struct bk_wg *wg = &b->wgs[g];
	while ((uint64_t)wg->running + wg->offered + wg->tokens < wg->processes && grant_one(b, g))
		;
}

void bk_grant_all(struct book *b)
{
	for (uint32_t g = 0; g < b->topo.nwaitgroups; g++)
		bk_grant(b, g);
}

/* An offer ran out or was superseded (book_conn_adopt): the want is gone
 * (the client must WANT again), the record stays as EXPIRED until its
 * OFFER_EXPIRED mail is taken. */
void bk_offer_expire(struct book *b, uint32_t wi)
{
	struct bk_want *w = bk_want(b, wi);
	int queued = w->m_handler != BK_NIL8;
	bk_set_state(&w->state, BK_WANT_EXPIRED);
	bk_fault("expire.mid");
	w->flags = 0;
	bk_offered_unlink(b, wi);
	bk_want_index_del(b, wi);
	b->wgs[bk_want_wg(b, w)].offered--;
	b->svcs[w->service].offered--;
	bk_conn(b, w->conn)->nwants--;
	b->nwants--;
	BK_DL_APPEND(bk_want, b, b->exp_head, b->exp_tail, wi, q_prev, q_next);
	/* an OFFER not taken yet becomes the OFFER_EXPIRED in place */
	if (!queued)
		bk_mail_push(b, bk_conn(b, w->conn)->handler, wi);
}

uint32_t book_expire(struct book *b, uint64_t now_ms)
{
	uint32_t n = 0;
	bk_tick(b, now_ms);
	for (uint32_t g = 0; g < b->topo.nwaitgroups; g++) {
		uint32_t before = n;
		for (;;) {
			uint32_t wi = b->wgs[g].off_head;
			if (wi == BK_NIL)
				break;
			const struct bk_want *w = bk_want(b, wi);
			if (!(w->flags & BKW_STAMPED) || w->deadline > b->clock)
				break;
			bk_offer_expire(b, wi);
			n++;
		}
		if (n != before)
			bk_grant(b, g);
	}
	n += bk_token_expire(b);
	for (;;) {
		uint32_t ci = b->grace_head;
		if (ci == BK_NIL)
			break;
		const struct bk_client *k = bk_client(b, ci);
		if (!k->stamped || k->grace_deadline > b->clock)
			break;
		bk_client_free(b, ci);
		n++;
	}
	return n;
}
