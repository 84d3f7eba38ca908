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
 * conn's wants at priority p.  Many wants of one waitgroup share one replay
 * (bk_query_ahead_many): O(N log N) once, plus per want its conn's wants at
 * its priority and that phase's conns.
 *
 * The head of the line (bk_query_head, the console's list, book_list.c)
 * walks the same replay forwards: phase by phase, round after round, each
 * conn still holding wants in turn order gives its oldest (a cursor per
 * node, the conn's nodes merged by seq).  The k-th want met is the k-th
 * granted, so its position is k, the same number bk_query_ahead gives.
 * Cost: a walk of the nodes per phase reached (to find the lowest one),
 * O(N log N) for the nodes of those phases, plus per want listed the
 * conn's nodes in its phase; it stops after the max-th want.
 *
 * book_eta turns a position into a time from what holds the slots (book.h
 * says the model); the k-th free time of slots that free at e_i and every
 * m after is found by a binary search on t over the count of frees by t,
 * so a long queue costs no more than a short one.
 */
#include "autoconfig.h"

#include "book/book.h"
#include "book/book_class.h"
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

/* The k (1-based) of parked want wi among its conn's wants of the phase
 * A[i..j) (its priority): 1 + its conn's older wants there. */
static uint32_t kth_of_conn(const struct book *b, const uint32_t *A, size_t i, size_t j,
			    uint32_t wi)
{
	const struct bk_want *w = bk_want(b, wi);
	uint32_t k = 1;
	for (size_t m = i; m < j; m++) {
		const struct bk_node *n = bk_node(b, A[m]);
		if (n->conn != w->conn)
			continue;
		for (uint32_t x = n->head; x != BK_NIL; x = bk_want(b, x)->q_next)
			if (bk_want(b, x)->seq < w->seq)
				k++;
	}
	return k;
}

/* The replay's start: the nodes of waitgroup g at priorities >= p into A,
 * by (priority descending, conn), each conn's virtual stamp its real one;
 * returns how many. */
static size_t replay_start(const struct book *b, uint32_t g, int32_t p, uint32_t *A)
{
	size_t na = 0;
	for (uint32_t s = b->wgs[g].svc_head; s != BK_NIL; s = b->svcs[s].wg_next)
		for (uint32_t x = b->svcs[s].root; x != BK_NIL; x = bk_heap_next(b, x))
			if (bk_node(b, x)->priority >= p)
				A[na++] = x;
	bk_sort(b, A, na, by_prio_conn, NULL);
	for (size_t i = 0; i < na; i++) {
		uint32_t c = bk_node(b, A[i])->conn;
		bk_qconn(b, c)->vs = bk_conn(b, c)->stamp[g];
	}
	return na;
}

/* The phase (one priority) whose nodes start at A[i]: its conns into P in
 * turn order, each with its want count n and its nodes A[first..end);
 * *np conns, *count wants; returns where the phase's nodes end. */
static size_t phase_open(const struct book *b, const uint32_t *A, size_t na, size_t i, uint32_t *P,
			 size_t *np, uint32_t *count)
{
	int32_t q = bk_node(b, A[i])->priority;
	size_t j = i;
	*np = 0;
	*count = 0;
	for (; j < na && bk_node(b, A[j])->priority == q; j++) {
		const struct bk_node *n = bk_node(b, A[j]);
		struct bk_qconn *qc = bk_qconn(b, n->conn);
		if (*np == 0 || P[*np - 1] != n->conn) {
			P[(*np)++] = n->conn;
			qc->n = 0;
			qc->head = UINT64_MAX;
			qc->first = (uint32_t)j;
		}
		qc->end = (uint32_t)j + 1;
		qc->n += n->count;
		*count += n->count;
		uint64_t hs = bk_want(b, n->head)->seq;
		if (hs < qc->head)
			qc->head = hs;
	}
	bk_sort(b, P, *np, by_turn, NULL);
	return j;
}

/* The phase's end: its conns get new stamps, larger than all, by last
 * served. */
static void phase_close(const struct book *b, uint32_t *P, size_t np, uint64_t *counter)
{
	for (size_t k = 0; k < np; k++)
		bk_qconn(b, P[k])->pos = (uint32_t)k;
	bk_sort(b, P, np, by_last_served, NULL);
	for (size_t k = 0; k < np; k++)
		bk_qconn(b, P[k])->vs = *counter + 1 + k;
	*counter += np;
}

void bk_query_ahead_many(const struct book *b, const uint32_t *ws, size_t nw, uint32_t *ahead)
{
	if (nw == 0)
		return;
	uint32_t g = bk_want_wg(b, bk_want(b, ws[0]));
	int32_t p = bk_want(b, ws[0])->priority; /* the lowest phase replayed */
	for (size_t t = 1; t < nw; t++)
		if (bk_want(b, ws[t])->priority < p)
			p = bk_want(b, ws[t])->priority;
	uint32_t *A = bk_scratch(b, 0), *P = bk_scratch(b, 1);
	size_t na = replay_start(b, g, p, A);
	uint64_t counter = b->wgs[g].grant_counter;
	uint32_t above = 0; /* wants of the phases replayed so far */

	for (size_t i = 0; i < na;) {
		int32_t q = bk_node(b, A[i])->priority;
		size_t np;
		uint32_t count;
		size_t j = phase_open(b, A, na, i, P, &np, &count);
		/* the wants of this priority: each the k-th oldest of its conn */
		for (size_t t = 0; t < nw; t++) {
			const struct bk_want *w = bk_want(b, ws[t]);
			if (w->priority != q)
				continue;
			uint32_t k = kth_of_conn(b, A, i, j, ws[t]), sum = above;
			int before = 1;
			for (size_t m = 0; m < np; m++) {
				uint32_t nc = bk_qconn(b, P[m])->n;
				if (P[m] == w->conn) {
					before = 0;
					continue;
				}
				sum += nc < k - 1 ? nc : k - 1;
				if (before && nc >= k)
					sum++;
			}
			ahead[t] = sum + k - 1; /* with its own conn's older wants */
		}
		if (q == p)
			break;
		phase_close(b, P, np, &counter);
		above += count;
		i = j;
	}
}

/* The oldest want not yet listed of a conn of the phase: the smallest seq
 * among its nodes' cursors in A[first..end), that cursor moved on. */
static uint32_t next_of_conn(const struct book *b, uint32_t *A, const struct bk_qconn *qc)
{
	uint32_t best = qc->first;
	for (uint32_t m = qc->first + 1; m < qc->end; m++)
		if (A[m] != BK_NIL &&
		    (A[best] == BK_NIL || bk_want(b, A[m])->seq < bk_want(b, A[best])->seq))
			best = m;
	uint32_t wi = A[best];
	A[best] = bk_want(b, wi)->q_next;
	return wi;
}

/* The lowest priority the first max wants of waitgroup g reach: one walk
 * of the nodes per phase reached, so the replay sorts no phase below;
 * past HEAD_WALKS phases (many priorities of few wants) all of them. */
static int32_t head_cut(const struct book *b, uint32_t g, size_t max)
{
	enum {
		HEAD_WALKS = 8
	};
	int32_t cut = INT32_MIN;
	int have = 0; /* a phase above: cut is its priority */
	for (uint64_t wants = 0, walks = 0; wants < max; walks++) {
		if (walks == HEAD_WALKS)
			return INT32_MIN;
		int32_t q = INT32_MIN;
		int found = 0;
		for (uint32_t s = b->wgs[g].svc_head; s != BK_NIL; s = b->svcs[s].wg_next)
			for (uint32_t x = b->svcs[s].root; x != BK_NIL; x = bk_heap_next(b, x)) {
				int32_t px = bk_node(b, x)->priority;
				if ((!have || px < cut) && (!found || px > q)) {
					q = px;
					found = 1;
				}
			}
		if (!found)
			break;
		for (uint32_t s = b->wgs[g].svc_head; s != BK_NIL; s = b->svcs[s].wg_next)
			for (uint32_t x = b->svcs[s].root; x != BK_NIL; x = bk_heap_next(b, x))
				if (bk_node(b, x)->priority == q)
					wants += bk_node(b, x)->count;
		cut = q;
		have = 1;
	}
	return cut;
}

size_t bk_query_head(const struct book *b, uint32_t g, size_t max,
		     void (*emit)(const struct book *b, uint32_t wi, uint32_t position, void *ctx),
		     void *ctx)
{
	uint32_t *A = bk_scratch(b, 0), *P = bk_scratch(b, 1);
	uint32_t *Q = P + b->lim.max_connections; /* the conns still in the rounds */
	size_t na = replay_start(b, g, head_cut(b, g, max), A), listed = 0;
	uint64_t counter = b->wgs[g].grant_counter;

	for (size_t i = 0; i < na && listed < max;) {
		size_t np;
		uint32_t count;
		size_t j = phase_open(b, A, na, i, P, &np, &count);
		for (size_t m = i; m < j; m++) /* a node becomes its cursor */
			A[m] = bk_node(b, A[m])->head;
		size_t nq = np;
		for (size_t m = 0; m < np; m++) {
			Q[m] = P[m];
			bk_qconn(b, P[m])->left = bk_qconn(b, P[m])->n;
		}
		/* round after round, each conn left in turn order takes its oldest */
		while (nq > 0 && listed < max) {
			size_t kept = 0;
			for (size_t m = 0; m < nq && listed < max; m++) {
				struct bk_qconn *qc = bk_qconn(b, Q[m]);
				emit(b, next_of_conn(b, A, qc), (uint32_t)++listed, ctx);
				if (--qc->left > 0)
					Q[kept++] = Q[m];
			}
			nq = kept;
		}
		phase_close(b, P, np, &counter);
		i = j;
	}
	return listed;
}

uint32_t bk_query_ahead(const struct book *b, uint32_t wi)
{
	uint32_t ahead = 0;
	bk_query_ahead_many(b, &wi, 1, &ahead);
	return ahead;
}

/* Free times (ms from now) of slots that free in the model: how many are
 * free by time t, each slot freeing at e and again every m after. */
static uint64_t frees_by(const uint32_t *e, size_t n, uint64_t m, uint64_t t)
{
	uint64_t count = 0;
	for (size_t i = 0; i < n; i++)
		if (e[i] <= t)
			count += m ? (t - e[i]) / m + 1 : 1;
	return count;
}

/* The remaining time of a slot held by a want of service svc that began
 * at start (ms on the book's clock); UINT32_MAX: unknown. */
static uint32_t remaining(const struct book *b, uint32_t svc, uint64_t start)
{
	const struct bk_service *s = &b->svcs[svc];
	uint64_t mean = s->nsamples ? class_ema_round(s->ema_ms) : 0;
	uint64_t ran = b->clock > start ? b->clock - start : 0;
	if (mean == 0 || mean >= UINT32_MAX || ran > mean)
		return UINT32_MAX;
	return (uint32_t)(mean - ran);
}

static int ascending(const struct book *b, const void *ctx, uint32_t x, uint32_t y)
{
	(void)b;
	(void)ctx;
	return x < y;
}

int64_t book_eta(const struct book *b, const struct book_position *pos, uint32_t usable)
{
	uint32_t g = b->svcs[pos->service].wg, *e = bk_scratch(b, 0);
	const struct bk_wg *wg = &b->wgs[g];
	size_t n = 0, unknown = wg->tokens;

	if (pos->state != WANT_PARKED)
		return -1;
	for (uint32_t h = 0; h < b->lim.nhandlers; h++)
		for (uint32_t x = b->handlers[h].run_head; x != BK_NIL; x = bk_want(b, x)->q_next) {
			const struct bk_want *w = bk_want(b, x);
			if (bk_want_wg(b, w) == g && n < b->scratch_len)
				e[n++] = remaining(b, w->service, w->started_ms);
		}
	for (uint32_t x = wg->off_head; x != BK_NIL && n < b->scratch_len;
	     x = bk_want(b, x)->q_next)
		e[n++] = remaining(b, bk_want(b, x)->service, b->clock);
	/* free slots free now; unknown ends sort last */
	for (size_t used = n + unknown; used < wg->processes && n < b->scratch_len; used++)
		e[n++] = 0;
	bk_sort(b, e, n, ascending, NULL);
	while (n > 0 && e[n - 1] == UINT32_MAX)
		n--, unknown++;
	/* the want's slots are the ones that free last */
	size_t all = n + unknown, skip = usable < all ? all - usable : 0;
	if (skip >= n)
		return -1;
	e += skip;
	n -= skip;
	const struct bk_service *s = &b->svcs[pos->service];
	uint64_t m = s->nsamples ? class_ema_round(s->ema_ms) : 0, k = (uint64_t)pos->ahead + 1;
	if (pos->ahead > 0 && m == 0)
		return -1;
	/* the k-th free time: the least t by which k slots have freed */
	uint64_t lo = 0, hi = (uint64_t)e[n - 1] + (uint64_t)pos->ahead * m;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (frees_by(e, n, m, mid) >= k)
			hi = mid;
		else
			lo = mid + 1;
	}
	return (int64_t)lo;
}
