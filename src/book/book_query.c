/*
 * book_query.c - queue position: how many parked wants of the same
 * waitgroup the grant rule would take before a given parked want, if slots
 * kept freeing and nothing else changed.
 *
 * Owns only the scratch arrays while it runs (the book is locked).
 * Replaying the rule without simulating every grant:
 *  - every want of a higher priority goes first;
 *  - within one priority, conns take turns in rounds: round r serves, in
 *    turn order, each conn with at least r wants of that priority, each
 *    taking its oldest (FIFO by seq across the waitgroup's services);
 *    the turn order is (stamp, seq of the conn's oldest want) at the start
 *    of the priority's phase, because every grant gives the conn a stamp
 *    larger than all others;
 *  - a phase changes the stamps: the conns that took part get new stamps,
 *    larger than everyone's, ordered by when they were served last, i.e.
 *    by (their want count, their turn); the others keep theirs.
 * So for the k-th oldest want of conn c at priority p:
 *   ahead = wants above p + sum over conns c' of min(n(c'), k - 1)
 *           + conns before c in turn order with n(c') >= k.
 * Auto-balance eligibility is not part of the replay, on purpose: it
 * depends on how many slots will be free at each future grant, which the
 * book cannot know (jobs end when they end).  So with auto-balance `ahead`
 * is the plain rule's count: a light want may start sooner (it overtakes
 * heavy wants when only the reserve is free), a heavy one later
 * (docs/protocol.md says so).
 *
 * Cost: O(N log N), N = nodes of the waitgroup at priorities >= p, plus the
 * conn's wants at priority p.
 */
#include "autoconfig.h"

#include "book/book_heap.h"
#include "book/book_impl.h"

static int by_prio_conn(const struct book *b, const void *ctx, uint32_t x, uint32_t y)
{
	(void)ctx;
	const struct bk_node *nx = bk_node(b, x), *ny = bk_node(b, y);
	if (nx->priority != ny->priority)
		return nx->priority > ny->priority;
	if (nx->conn != ny->conn)
		return nx->conn < ny->conn;
	return x < y;
}

static int by_turn(const struct book *b, const void *ctx, uint32_t x, uint32_t y)
{
	(void)ctx;
	const struct bk_qconn *qx = bk_qconn(b, x), *qy = bk_qconn(b, y);
	if (qx->vs != qy->vs)
		return qx->vs < qy->vs;
	return qx->head < qy->head;
}

static int by_last_served(const struct book *b, const void *ctx, uint32_t x, uint32_t y)
{
	(void)ctx;
	const struct bk_qconn *qx = bk_qconn(b, x), *qy = bk_qconn(b, y);
	if (qx->n != qy->n)
		return qx->n < qy->n;
	return qx->pos < qy->pos;
}

uint32_t bk_query_ahead(const struct book *b, uint32_t wi)
{
	const struct bk_want *w = bk_want(b, wi);
	uint32_t g = bk_want_wg(b, w), c0 = w->conn;
	int32_t p = w->priority;
	uint32_t *A = bk_scratch(b, 0), *P = bk_scratch(b, 1);
	size_t na = 0;
	uint32_t ahead = 0;

	for (uint32_t s = b->wgs[g].svc_head; s != BK_NIL; s = b->svcs[s].wg_next)
		for (uint32_t x = b->svcs[s].root; x != BK_NIL; x = bk_heap_next(b, x)) {
			const struct bk_node *n = bk_node(b, x);
			if (n->priority < p)
				continue;
			A[na++] = x;
			if (n->priority > p)
				ahead += n->count;
		}
	bk_sort(b, A, na, by_prio_conn, NULL);
	for (size_t i = 0; i < na; i++) {
		uint32_t c = bk_node(b, A[i])->conn;
		bk_qconn(b, c)->vs = bk_conn(b, c)->stamp[g];
	}
	uint64_t counter = b->wgs[g].grant_counter;

	for (size_t i = 0; i < na;) {
		int32_t q = bk_node(b, A[i])->priority;
		size_t np = 0, j = i;
		for (; j < na && bk_node(b, A[j])->priority == q; j++) {
			const struct bk_node *n = bk_node(b, A[j]);
			struct bk_qconn *qc = bk_qconn(b, n->conn);
			if (np == 0 || P[np - 1] != n->conn) {
				P[np++] = n->conn;
				qc->n = 0;
				qc->head = UINT64_MAX;
			}
			qc->n += n->count;
			uint64_t hs = bk_want(b, n->head)->seq;
			if (hs < qc->head)
				qc->head = hs;
		}
		bk_sort(b, P, np, by_turn, NULL);
		if (q > p) {
			for (size_t k = 0; k < np; k++)
				bk_qconn(b, P[k])->pos = (uint32_t)k;
			bk_sort(b, P, np, by_last_served, NULL);
			for (size_t k = 0; k < np; k++)
				bk_qconn(b, P[k])->vs = counter + 1 + k;
			counter += np;
			i = j;
			continue;
		}
		/* the want's own priority: it is the k-th oldest of its conn */
		uint32_t k = 1;
		for (size_t m = i; m < j; m++) {
			const struct bk_node *n = bk_node(b, A[m]);
			if (n->conn != c0)
				continue;
			for (uint32_t x = n->head; x != BK_NIL; x = bk_want(b, x)->q_next)
				if (bk_want(b, x)->seq < w->seq)
					k++;
		}
		int before = 1;
		for (size_t m = 0; m < np; m++) {
			uint32_t nc = bk_qconn(b, P[m])->n;
			if (P[m] == c0) {
				before = 0;
				continue;
			}
			ahead += nc < k - 1 ? nc : k - 1;
			if (before && nc >= k)
				ahead++;
		}
		ahead += k - 1; /* its own conn's older wants */
		break;
	}
	return ahead;
}
