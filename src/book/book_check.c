/*
 * book_check.c - verifies every invariant of the book (see book_layout.h
 * and the head comments of each book file) and names the first violation.
 *
 * Owns nothing; reads only.  Every list walk is bounded by its table size,
 * so a corrupted (cyclic) list is reported, not followed forever.  Cost
 * O(table sizes + index slots).
 */
#include "autoconfig.h"
#include "book/book.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "book/book_heap.h"
#include "book/book_impl.h"
#include "book/book_index.h"

struct ck {
	const struct book *b;
	char *why;
	size_t whylen;
	int failed;
	/* recomputed from the tables */
	uint32_t wg_run[BOOK_MAX_WAITGROUPS], wg_off[BOOK_MAX_WAITGROUPS],
		wg_wait[BOOK_MAX_WAITGROUPS];
	uint32_t svc_wait[BOOK_MAX_SERVICES], svc_run[BOOK_MAX_SERVICES],
		svc_off[BOOK_MAX_SERVICES];
	uint32_t nstate[BK_WANT_EXPIRED + 1], nmailed, nindexed, njobs_owned, nnodes, nnamed;
	uint32_t nreceipts; /* receipt slots owned by finished wants */
	uint32_t nconn_live, nclient_state[3];
};

static int fail(struct ck *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct ck *k, const char *fmt, ...)
{
	if (!k->failed && k->why && k->whylen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(k->why, k->whylen, fmt, ap);
		va_end(ap);
	}
	k->failed = 1;
	return -1;
}

#define CK(k, cond, ...)                               \
	do {                                           \
		if (!(cond))                           \
			return fail((k), __VA_ARGS__); \
	} while (0)

static int conn_live(const struct book *b, uint32_t c, uint32_t gen)
{
	return c < b->lim.max_connections && bk_conn(b, c)->state == BKC_LIVE &&
	       bk_conn(b, c)->gen == gen;
}

static int client_used(const struct book *b, uint32_t ci, uint32_t gen)
{
	return ci < b->nclient_tab && bk_client(b, ci)->state != BKK_FREE &&
	       bk_client(b, ci)->gen == gen;
}

static int check_want(struct ck *k, uint32_t wi)
{
	const struct book *b = k->b;
	const struct bk_want *w = bk_want(b, wi);
	CK(k, w->state <= BK_WANT_EXPIRED, "want %u: bad state %u", wi, w->state);
	k->nstate[w->state]++;
	if (w->m_handler != BK_NIL8)
		k->nmailed++;
	if (w->state == WANT_FREE) {
		CK(k, w->m_handler == BK_NIL8, "free want %u in a mailbox", wi);
		return 0;
	}
	CK(k, w->service < b->topo.nservices, "want %u: bad service", wi);
	CK(k, w->idlen >= 1 && w->idlen <= BOOK_ID_MAX, "want %u: bad id length", wi);
	uint32_t g = bk_want_wg(b, w);
	int indexed = 0;
	CK(k, w->state == WANT_FINISHED || w->receipt == BK_NIL,
	   "want %u (state %u) owns a receipt slot", wi, w->state);
	if (w->state != WANT_RUNNING && w->state != WANT_FINISHED) {
		CK(k, conn_live(b, w->conn, w->conn_gen), "want %u: holder conn %u not live", wi,
		   w->conn);
		CK(k,
		   bk_conn(b, w->conn)->client == w->client &&
			   client_used(b, w->client, w->client_gen),
		   "want %u: client mismatch", wi);
	}
	switch (w->state) {
	case WANT_PARKED:
		k->wg_wait[g]++;
		k->svc_wait[w->service]++;
		indexed = 1;
		CK(k, w->node < b->lim.max_wants && bk_node(b, w->node)->used,
		   "parked want %u: no node", wi);
		{
			const struct bk_node *n = bk_node(b, w->node);
			CK(k,
			   n->conn == w->conn && n->service == w->service &&
				   n->priority == w->priority,
			   "parked want %u: in the wrong node", wi);
		}
		CK(k, w->m_handler == BK_NIL8, "parked want %u in a mailbox", wi);
		break;
	case WANT_OFFERED:
		k->wg_off[g]++;
		k->svc_off[w->service]++;
		indexed = 1;
		CK(k, w->token != 0, "offered want %u: token 0", wi);
		CK(k,
		   (w->flags & BKW_OFFER_MAIL) ? w->m_handler == bk_conn(b, w->conn)->handler
					       : w->m_handler == BK_NIL8,
		   "offered want %u: OFFER mail flag and mailbox disagree", wi);
		break;
	case WANT_RUNNING:
		k->wg_run[g]++;
		k->svc_run[w->service]++;
		CK(k, w->runner < b->lim.nhandlers, "running want %u: bad runner", wi);
		CK(k,
		   (w->flags & BKW_CANCEL_MAIL) ? w->m_handler == w->runner
						: w->m_handler == BK_NIL8,
		   "running want %u: CANCEL mail flag and mailbox disagree", wi);
		if (w->client == BK_NIL) {
			CK(k, w->conn == BK_NIL, "orphan job %u has an owner conn", wi);
			break;
		}
		indexed = 1;
		k->njobs_owned++;
		CK(k, client_used(b, w->client, w->client_gen), "running want %u: client gone", wi);
		if (bk_client(b, w->client)->state == BKK_LIVE) {
			CK(k,
			   w->conn != BK_NIL && conn_live(b, w->conn, w->conn_gen) &&
				   bk_conn(b, w->conn)->client == w->client,
			   "running want %u: live client but no live owner conn", wi);
		} else {
			CK(k, w->conn == BK_NIL,
			   "running want %u: client in grace but owner conn set", wi);
		}
		break;
	case WANT_FINISHED:
		CK(k, w->client != BK_NIL && client_used(b, w->client, w->client_gen),
		   "finished want %u: client gone", wi);
		indexed = 1;
		k->njobs_owned++;
		CK(k, (w->flags & ~(BKW_DONE_MAIL | BKW_RECEIPT_LOST)) == 0,
		   "finished want %u: flags %#x", wi, w->flags);
		CK(k, w->q_prev == BK_NIL && w->q_next == BK_NIL && w->node == BK_NIL,
		   "finished want %u still linked as parked/offered/running", wi);
		if (bk_client(b, w->client)->state == BKK_LIVE) {
			CK(k,
			   w->conn != BK_NIL && conn_live(b, w->conn, w->conn_gen) &&
				   bk_conn(b, w->conn)->client == w->client,
			   "finished want %u: live client but no live owner conn", wi);
			CK(k,
			   (w->flags & BKW_DONE_MAIL) ? w->m_handler == bk_conn(b, w->conn)->handler
						      : w->m_handler == BK_NIL8,
			   "finished want %u: DONE mail flag and mailbox disagree", wi);
		} else {
			CK(k, w->conn == BK_NIL,
			   "finished want %u: client in grace but owner conn set", wi);
			CK(k, !(w->flags & BKW_DONE_MAIL) && w->m_handler == BK_NIL8,
			   "finished want %u: DONE mailed while its client is away", wi);
		}
		if (w->receipt != BK_NIL) {
			CK(k,
			   w->receipt < b->lim.max_receipts && bk_rslot(b, w->receipt)->owner == wi,
			   "finished want %u: receipt slot %u not its own", wi, w->receipt);
			CK(k, w->receipt_len >= 1 && w->receipt_len <= b->lim.receipt_bytes,
			   "finished want %u: receipt length %u", wi, w->receipt_len);
			k->nreceipts++;
		}
		break;
	case BK_WANT_EXPIRED:
		CK(k, w->m_handler == bk_conn(b, w->conn)->handler,
		   "expired want %u not in its mailbox", wi);
		break;
	}
	if (indexed) {
		k->nindexed++;
		CK(k, bk_find_want(b, w->client, w->job_id, w->idlen) == wi,
		   "want %u not found through the job index", wi);
	}
	return 0;
}

static int check_nodes(struct ck *k)
{
	const struct book *b = k->b;
	uint32_t nparked = 0;
	for (uint32_t ni = 0; ni < b->lim.max_wants; ni++) {
		const struct bk_node *n = bk_node(b, ni);
		if (!n->used)
			continue;
		k->nnodes++;
		CK(k,
		   n->service < b->topo.nservices && n->conn < b->lim.max_connections &&
			   bk_conn(b, n->conn)->state == BKC_LIVE,
		   "node %u: bad conn/service", ni);
		CK(k, bk_find_node(b, n->conn, n->service, n->priority) == ni,
		   "node %u not indexed", ni);
		CK(k, n->stamp == bk_conn(b, n->conn)->stamp[b->svcs[n->service].wg],
		   "node %u: key's stamp is not its conn's", ni);
		CK(k, n->head != BK_NIL && n->seq == bk_want(b, n->head)->seq,
		   "node %u: key's seq is not its head want's", ni);
		uint32_t cnt = 0, prev = BK_NIL;
		uint64_t last = 0;
		for (uint32_t wi = n->head; wi != BK_NIL; wi = bk_want(b, wi)->q_next) {
			const struct bk_want *w = bk_want(b, wi);
			CK(k, cnt++ < b->lim.max_wants, "node %u: FIFO cycle", ni);
			CK(k, w->state == WANT_PARKED && w->node == ni,
			   "node %u: FIFO holds want %u of another node", ni, wi);
			CK(k, w->q_prev == prev, "node %u: FIFO back link", ni);
			CK(k, cnt == 1 || w->seq > last, "node %u: FIFO not in arrival order", ni);
			last = w->seq;
			prev = wi;
		}
		CK(k, prev == n->tail && cnt == n->count && cnt > 0, "node %u: count/tail wrong",
		   ni);
		nparked += cnt;
	}
	CK(k, nparked == k->nstate[WANT_PARKED], "parked wants %u but %u in node FIFOs",
	   k->nstate[WANT_PARKED], nparked);
	/* heaps */
	uint32_t inheap = 0;
	for (uint32_t s = 0; s < b->topo.nservices; s++) {
		uint32_t r = b->svcs[s].root, cnt = 0;
		CK(k,
		   r == BK_NIL ||
			   (bk_node(b, r)->prev == BK_NIL && bk_node(b, r)->sibling == BK_NIL),
		   "service %u: root has links", s);
		for (uint32_t x = r; x != BK_NIL; x = bk_heap_next(b, x)) {
			const struct bk_node *n = bk_node(b, x);
			CK(k, cnt++ < b->lim.max_wants, "service %u: heap cycle", s);
			CK(k, n->used && n->service == s,
			   "service %u: heap holds node %u of another service", s, x);
			uint32_t prev = x;
			for (uint32_t y = n->child; y != BK_NIL; y = bk_node(b, y)->sibling) {
				CK(k, bk_node(b, y)->prev == prev,
				   "service %u: heap back link at %u", s, y);
				CK(k, !bk_node_less(b, y, x), "service %u: heap order broken at %u",
				   s, y);
				prev = y;
			}
		}
		inheap += cnt;
	}
	CK(k, inheap == k->nnodes, "%u nodes but %u in heaps", k->nnodes, inheap);
	return 0;
}

static int check_conns(struct ck *k)
{
	const struct book *b = k->b;
	uint32_t inlists = 0, nodes = 0, hconns = 0;
	for (uint32_t c = 0; c < b->lim.max_connections; c++) {
		const struct bk_conn *cn = bk_conn(b, c);
		if (cn->state == BKC_FREE)
			continue;
		CK(k, cn->state == BKC_LIVE, "conn %u: bad state", c);
		k->nconn_live++;
		CK(k, cn->handler < b->lim.nhandlers, "conn %u: bad handler", c);
		CK(k, client_used(b, cn->client, cn->client_gen), "conn %u: client gone", c);
		for (uint32_t g = 0; g < BOOK_MAX_WAITGROUPS; g++)
			CK(k, cn->stamp[g] <= b->wgs[g].grant_counter,
			   "conn %u: stamp ahead of counter", c);
		uint32_t cnt = 0, nw = 0, prev = BK_NIL;
		for (uint32_t wi = cn->want_head; wi != BK_NIL; wi = bk_want(b, wi)->o_next) {
			const struct bk_want *w = bk_want(b, wi);
			CK(k, cnt++ < b->lim.max_wants, "conn %u: want list cycle", c);
			CK(k,
			   (w->state == WANT_PARKED || w->state == WANT_OFFERED ||
			    w->state == BK_WANT_EXPIRED) &&
				   w->conn == c,
			   "conn %u: want list holds want %u", c, wi);
			CK(k, w->o_prev == prev, "conn %u: want list back link", c);
			nw += w->state != BK_WANT_EXPIRED;
			prev = wi;
		}
		CK(k, prev == cn->want_tail, "conn %u: want list tail", c);
		CK(k, nw == cn->nwants, "conn %u: nwants %u but %u listed", c, cn->nwants, nw);
		inlists += cnt;
		prev = BK_NIL;
		cnt = 0;
		for (uint32_t ni = cn->node_head; ni != BK_NIL; ni = bk_node(b, ni)->c_next) {
			CK(k, cnt++ < b->lim.max_wants, "conn %u: node list cycle", c);
			CK(k,
			   bk_node(b, ni)->used && bk_node(b, ni)->conn == c &&
				   bk_node(b, ni)->c_prev == prev,
			   "conn %u: node list holds node %u", c, ni);
			prev = ni;
		}
		nodes += cnt;
	}
	CK(k,
	   inlists == k->nstate[WANT_PARKED] + k->nstate[WANT_OFFERED] + k->nstate[BK_WANT_EXPIRED],
	   "conn want lists hold %u wants", inlists);
	CK(k, nodes == k->nnodes, "conn node lists hold %u of %u nodes", nodes, k->nnodes);
	CK(k, k->nconn_live == b->nconns, "connections %u but %u live", b->nconns, k->nconn_live);
	for (uint32_t h = 0; h < BOOK_MAX_HANDLERS; h++) {
		const struct bk_handler *hd = &b->handlers[h];
		uint32_t cnt = 0, prev = BK_NIL;
		for (uint32_t c = hd->conn_head; c != BK_NIL; c = bk_conn(b, c)->h_next) {
			CK(k, cnt++ < b->lim.max_connections, "handler %u: conn list cycle", h);
			CK(k,
			   bk_conn(b, c)->state == BKC_LIVE && bk_conn(b, c)->handler == h &&
				   bk_conn(b, c)->h_prev == prev,
			   "handler %u: conn list holds conn %u", h, c);
			CK(k,
			   prev == BK_NIL || bk_conn(b, prev)->open_seq < bk_conn(b, c)->open_seq,
			   "handler %u: conn list not in open order", h);
			prev = c;
		}
		CK(k, cnt == hd->nconns && prev == hd->conn_tail, "handler %u: nconns/tail", h);
		hconns += cnt;
	}
	CK(k, hconns == b->nconns, "handler conn lists hold %u conns", hconns);
	return 0;
}

static int check_clients(struct ck *k)
{
	const struct book *b = k->b;
	uint32_t conns = 0, running = 0, live = 0;
	for (uint32_t ci = 0; ci < b->nclient_tab; ci++) {
		const struct bk_client *kl = bk_client(b, ci);
		CK(k, kl->state <= BKK_GRACE, "client %u: bad state", ci);
		k->nclient_state[kl->state]++;
		if (kl->state == BKK_FREE)
			continue;
		if (kl->named) {
			k->nnamed++;
			CK(k, bk_find_client(b, kl->id, kl->idlen) == ci, "client %u not indexed",
			   ci);
		}
		uint32_t cnt = 0, prev = BK_NIL;
		for (uint32_t c = kl->conn_head; c != BK_NIL; c = bk_conn(b, c)->k_next) {
			CK(k, cnt++ < b->lim.max_connections, "client %u: conn list cycle", ci);
			CK(k,
			   bk_conn(b, c)->state == BKC_LIVE && bk_conn(b, c)->client == ci &&
				   bk_conn(b, c)->k_prev == prev,
			   "client %u: conn list holds conn %u", ci, c);
			prev = c;
		}
		CK(k, cnt == kl->nconns, "client %u: nconns", ci);
		CK(k, kl->named || cnt == 1, "anonymous client %u with %u conns", ci, cnt);
		conns += cnt;
		cnt = 0;
		prev = BK_NIL;
		for (uint32_t wi = kl->job_head; wi != BK_NIL; wi = bk_want(b, wi)->o_next) {
			const struct bk_want *w = bk_want(b, wi);
			CK(k, cnt++ < b->lim.max_wants, "client %u: job list cycle", ci);
			CK(k,
			   (w->state == WANT_RUNNING || w->state == WANT_FINISHED) &&
				   w->client == ci && w->o_prev == prev,
			   "client %u: job list holds want %u", ci, wi);
			prev = wi;
		}
		CK(k, cnt == kl->njobs && prev == kl->job_tail, "client %u: njobs", ci);
		running += cnt;
		if (kl->state == BKK_LIVE) {
			CK(k, kl->nconns > 0, "live client %u without conns", ci);
			live++;
		} else {
			CK(k, kl->named && kl->nconns == 0 && kl->njobs > 0,
			   "client %u in grace wrongly", ci);
		}
	}
	CK(k, conns == b->nconns, "client conn lists hold %u conns", conns);
	CK(k, running == k->njobs_owned, "client job lists hold %u of %u jobs", running,
	   k->njobs_owned);
	CK(k, live == b->nclients_live, "clients %u but %u live", b->nclients_live, live);
	/* grace list */
	uint32_t cnt = 0, prev = BK_NIL, unstamped = 0;
	uint64_t lastseq = 0, lastdl = 0;
	for (uint32_t ci = b->grace_head; ci != BK_NIL; ci = bk_client(b, ci)->g_next) {
		const struct bk_client *kl = bk_client(b, ci);
		CK(k, cnt++ < b->nclient_tab, "grace list cycle");
		CK(k, kl->state == BKK_GRACE && kl->g_prev == prev, "grace list holds client %u",
		   ci);
		CK(k, cnt == 1 || kl->grace_seq > lastseq, "grace list out of order");
		if (!kl->stamped)
			unstamped = 1;
		else
			CK(k, !unstamped && kl->grace_deadline >= lastdl,
			   "grace deadlines out of order");
		lastseq = kl->grace_seq;
		if (kl->stamped)
			lastdl = kl->grace_deadline;
		prev = ci;
	}
	CK(k, prev == b->grace_tail && cnt == k->nclient_state[BKK_GRACE],
	   "grace list holds %u clients", cnt);
	return 0;
}

static int check_lists(struct ck *k)
{
	const struct book *b = k->b;
	uint32_t cnt, prev, total = 0;
	/* offered lists */
	for (uint32_t g = 0; g < BOOK_MAX_WAITGROUPS; g++) {
		const struct bk_wg *wg = &b->wgs[g];
		uint64_t last = 0, lastdl = 0;
		int unstamped = 0;
		cnt = 0;
		prev = BK_NIL;
		for (uint32_t wi = wg->off_head; wi != BK_NIL; wi = bk_want(b, wi)->q_next) {
			const struct bk_want *w = bk_want(b, wi);
			CK(k, cnt++ < b->lim.max_wants, "wg %u: offered list cycle", g);
			CK(k,
			   w->state == WANT_OFFERED && bk_want_wg(b, w) == g && w->q_prev == prev,
			   "wg %u: offered list holds want %u", g, wi);
			CK(k, cnt == 1 || w->offer_no > last, "wg %u: offered list out of order",
			   g);
			if (!(w->flags & BKW_STAMPED))
				unstamped = 1;
			else
				CK(k, !unstamped && w->deadline >= lastdl,
				   "wg %u: offer deadlines out of order", g);
			last = w->offer_no;
			if (w->flags & BKW_STAMPED)
				lastdl = w->deadline;
			prev = wi;
		}
		CK(k, prev == wg->off_tail && cnt == k->wg_off[g], "wg %u: offered list holds %u",
		   g, cnt);
		CK(k,
		   wg->running == k->wg_run[g] && wg->offered == k->wg_off[g] &&
			   wg->waiting == k->wg_wait[g],
		   "wg %u: counts %u/%u/%u but tables say %u/%u/%u", g, wg->running, wg->offered,
		   wg->waiting, k->wg_run[g], k->wg_off[g], k->wg_wait[g]);
		CK(k, (uint64_t)wg->running + wg->offered + wg->tokens <= wg->processes,
		   "wg %u: %u running + %u offered + %u tokens > %u processes", g, wg->running,
		   wg->offered, wg->tokens, wg->processes);
	}
	for (uint32_t s = 0; s < BOOK_MAX_SERVICES; s++)
		CK(k,
		   b->svcs[s].waiting == k->svc_wait[s] && b->svcs[s].running == k->svc_run[s] &&
			   b->svcs[s].offered == k->svc_off[s],
		   "service %u: counts", s);
	/* grants are eager: no free slot while an eligible service waits */
	for (uint32_t s = 0; s < b->topo.nservices && !b->draining; s++) {
		const struct bk_wg *wg = &b->wgs[b->svcs[s].wg];
		CK(k,
		   b->svcs[s].waiting == 0 || !bk_eligible(b, s) ||
			   (uint64_t)wg->running + wg->offered + wg->tokens == wg->processes,
		   "wg %u: a slot is free while %u wants of eligible service %u wait",
		   b->svcs[s].wg, b->svcs[s].waiting, s);
	}
	/* auto-balance classes */
	for (uint32_t s = 0; s < BOOK_MAX_SERVICES; s++)
		CK(k, s < b->topo.nservices ? bk_class_ok(b, s) : b->svcs[s].klass == 0,
		   "service %u: class %u does not match its %" PRIu64 " samples", s,
		   b->svcs[s].klass, b->svcs[s].nsamples);
	/* runner lists */
	for (uint32_t h = 0; h < BOOK_MAX_HANDLERS; h++) {
		const struct bk_handler *hd = &b->handlers[h];
		cnt = 0;
		prev = BK_NIL;
		for (uint32_t wi = hd->run_head; wi != BK_NIL; wi = bk_want(b, wi)->q_next) {
			CK(k, cnt++ < b->lim.max_wants, "handler %u: run list cycle", h);
			CK(k,
			   bk_want(b, wi)->state == WANT_RUNNING && bk_want(b, wi)->runner == h &&
				   bk_want(b, wi)->q_prev == prev,
			   "handler %u: run list holds want %u", h, wi);
			prev = wi;
		}
		CK(k, prev == hd->run_tail, "handler %u: run list tail", h);
		total += cnt;
	}
	CK(k, total == k->nstate[WANT_RUNNING], "run lists hold %u of %u jobs", total,
	   k->nstate[WANT_RUNNING]);
	/* mailboxes */
	total = 0;
	for (uint32_t h = 0; h < BOOK_MAX_HANDLERS; h++) {
		const struct bk_handler *hd = &b->handlers[h];
		CK(k, h < b->lim.nhandlers || (!hd->hello && hd->mail_head == BK_NIL),
		   "handler %u out of range has mail", h);
		cnt = 0;
		prev = BK_NIL;
		for (uint32_t wi = hd->mail_head; wi != BK_NIL; wi = bk_want(b, wi)->m_next) {
			CK(k, cnt++ < b->lim.max_wants, "handler %u: mailbox cycle", h);
			CK(k, bk_want(b, wi)->m_handler == h && bk_want(b, wi)->m_prev == prev,
			   "handler %u: mailbox holds want %u", h, wi);
			prev = wi;
		}
		CK(k, prev == hd->mail_tail, "handler %u: mailbox tail", h);
		total += cnt;
	}
	CK(k, total == k->nmailed, "mailboxes hold %u of %u mails", total, k->nmailed);
	/* expired list */
	cnt = 0;
	prev = BK_NIL;
	for (uint32_t wi = b->exp_head; wi != BK_NIL; wi = bk_want(b, wi)->q_next) {
		CK(k, cnt++ < b->lim.max_wants, "expired list cycle");
		CK(k, bk_want(b, wi)->state == BK_WANT_EXPIRED && bk_want(b, wi)->q_prev == prev,
		   "expired list holds want %u", wi);
		prev = wi;
	}
	CK(k, prev == b->exp_tail && cnt == k->nstate[BK_WANT_EXPIRED], "expired list holds %u",
	   cnt);
	return 0;
}

static int check_free(struct ck *k)
{
	const struct book *b = k->b;
	uint32_t cnt = 0;
	for (uint32_t i = b->want_free; i != BK_NIL; i = bk_want(b, i)->q_next) {
		CK(k, cnt++ < b->lim.max_wants, "want free list cycle");
		CK(k, bk_want(b, i)->state == WANT_FREE, "want free list holds used want %u", i);
	}
	CK(k, cnt == k->nstate[WANT_FREE], "want free list holds %u of %u free", cnt,
	   k->nstate[WANT_FREE]);
	cnt = 0;
	for (uint32_t i = b->node_free; i != BK_NIL; i = bk_node(b, i)->c_next) {
		CK(k, cnt++ < b->lim.max_wants, "node free list cycle");
		CK(k, !bk_node(b, i)->used, "node free list holds used node %u", i);
	}
	CK(k, cnt + k->nnodes == b->lim.max_wants, "node free list holds %u", cnt);
	cnt = 0;
	for (uint32_t i = b->conn_free; i != BK_NIL; i = bk_conn(b, i)->h_next) {
		CK(k, cnt++ < b->lim.max_connections, "conn free list cycle");
		CK(k, bk_conn(b, i)->state == BKC_FREE, "conn free list holds live conn %u", i);
	}
	CK(k, cnt + k->nconn_live == b->lim.max_connections, "conn free list holds %u", cnt);
	cnt = 0;
	for (uint32_t i = b->client_free; i != BK_NIL; i = bk_client(b, i)->g_next) {
		CK(k, cnt++ < b->nclient_tab, "client free list cycle");
		CK(k, bk_client(b, i)->state == BKK_FREE, "client free list holds client %u", i);
	}
	CK(k, cnt == k->nclient_state[BKK_FREE], "client free list holds %u", cnt);
	return 0;
}

/* Each slot owned by exactly one finished want (checked from the wants'
 * side in check_want) or on the free list, never both. */
static int check_receipts(struct ck *k)
{
	const struct book *b = k->b;
	uint32_t owned = 0, cnt = 0;
	for (uint32_t r = 0; r < b->lim.max_receipts; r++) {
		uint32_t o = bk_rslot(b, r)->owner;
		if (o == BK_NIL)
			continue;
		CK(k,
		   o < b->lim.max_wants && bk_want(b, o)->state == WANT_FINISHED &&
			   bk_want(b, o)->receipt == r,
		   "receipt slot %u: owner %u does not hold it", r, o);
		owned++;
	}
	CK(k, owned == k->nreceipts && owned == b->rc_used,
	   "receipt slots: %u owned, %u held, rc_used %u", owned, k->nreceipts, b->rc_used);
	for (uint32_t r = b->rc_free; r != BK_NIL; r = bk_rslot(b, r)->next) {
		CK(k, r < b->lim.max_receipts && cnt++ < b->lim.max_receipts,
		   "receipt free list broken");
		CK(k, bk_rslot(b, r)->owner == BK_NIL, "receipt free list holds owned slot %u", r);
	}
	CK(k, cnt + owned == b->lim.max_receipts, "receipt free list holds %u, %u owned, of %u",
	   cnt, owned, b->lim.max_receipts);
	return 0;
}

int book_check(const struct book *b, char *why, size_t whylen)
{
	struct ck k = { .b = b, .why = why, .whylen = whylen };
	if (why && whylen)
		why[0] = '\0';
	CK(&k, b->magic == BK_MAGIC && b->version == BK_VERSION, "bad magic/version");
	for (uint32_t wi = 0; wi < b->lim.max_wants; wi++)
		if (check_want(&k, wi) < 0)
			return -1;
	if (check_nodes(&k) < 0 || check_conns(&k) < 0 || check_clients(&k) < 0 ||
	    check_lists(&k) < 0 || check_free(&k) < 0 || check_receipts(&k) < 0 ||
	    bk_token_check(b, why, whylen) < 0)
		return -1;
	uint32_t live = k.nstate[WANT_PARKED] + k.nstate[WANT_OFFERED] + k.nstate[WANT_RUNNING] +
			k.nstate[WANT_FINISHED];
	CK(&k, live == b->nwants, "wants %u but %u in use", b->nwants, live);
	CK(&k, k.nstate[WANT_FINISHED] == b->nfinished, "finished %u but %u in the table",
	   b->nfinished, k.nstate[WANT_FINISHED]);
	CK(&k, live <= b->lim.max_wants, "more wants than max_wants");
	CK(&k, b->widx.count == k.nindexed && bk_index_used(b, &b->widx) == k.nindexed,
	   "job index holds %u/%u entries, tables %u", b->widx.count, bk_index_used(b, &b->widx),
	   k.nindexed);
	CK(&k, b->cidx.count == k.nnamed && bk_index_used(b, &b->cidx) == k.nnamed,
	   "client index holds %u entries, tables %u", b->cidx.count, k.nnamed);
	CK(&k, b->nidx.count == k.nnodes && bk_index_used(b, &b->nidx) == k.nnodes,
	   "node index holds %u entries, tables %u", b->nidx.count, k.nnodes);
	return 0;
}
