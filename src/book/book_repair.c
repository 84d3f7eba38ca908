/*
 * book_repair.c - rebuilds every derived structure from the primary
 * records (book_layout.h marks which is which).  Runs after a holder of the
 * lock died (book_lock sees EOWNERDEAD) and once in book_init.
 *
 * Owns nothing permanently; it may rewrite any derived field.  Rules:
 *  - records that reference what no longer exists are dropped: a conn of an
 *    unknown handler or of a freed client, a PARKED/OFFERED/EXPIRED want of
 *    a dead conn, a duplicate (client, job_id) (the newer one);
 *  - a RUNNING job whose client is gone (or that had been chosen for
 *    cancel) is an orphan with MAIL_CANCEL pending; one whose conn is gone
 *    reports to its client's newest conn, or waits in the grace;
 *  - a FINISHED job whose client is gone is dropped (nobody to tell); one
 *    whose owner conn is gone gets its client's newest conn as owner and
 *    MAIL_DONE there (the old owner's handler cannot have delivered it:
 *    its conn is gone), or waits in the grace with no DONE pending; its
 *    receipt slot must be in range, hold at most receipt_bytes and be
 *    claimed by no older want, else only the compact outcome stays
 *    (receipt_lost); the receipt free list is every unclaimed slot;
 *  - a want that is not FINISHED owns no receipt slot (a crash inside
 *    book_job_finished before the state write leaves it RUNNING);
 *  - a client is LIVE with conns, GRACE when named with jobs (running or
 *    finished) and no conn (a grace begun here is stamped at the next timed
 *    call), freed otherwise (an anonymous one cancels its running jobs and
 *    forgets its finished ones);
 *  - mail is re-queued from the pending flags, so it is neither lost nor
 *    duplicated (see book_mail.c); HELLO is re-sent to every handler with a
 *    live conn;
 *  - more offers+running than processes (cannot happen: the state write
 *    that holds a slot comes after the check) would be cut back by turning
 *    the newest offers back into parked wants;
 *  - the free records' generations are bumped (a crash may have freed a
 *    record before bumping), then grants run.
 * Idempotent: a crash inside repair is repaired by the next book_lock.
 * Cost O(table sizes + n log n).
 */
#include "autoconfig.h"
#include "book/book.h"

#include "book/book_impl.h"
#include "book/book_index.h"

static int by_seq(const struct book *b, const void *ctx, uint32_t x, uint32_t y)
{
	(void)ctx;
	return bk_want(b, x)->seq < bk_want(b, y)->seq;
}

static int by_offer_no(const struct book *b, const void *ctx, uint32_t x, uint32_t y)
{
	(void)ctx;
	return bk_want(b, x)->offer_no < bk_want(b, y)->offer_no;
}

static int by_open_seq(const struct book *b, const void *ctx, uint32_t x, uint32_t y)
{
	(void)ctx;
	return bk_conn(b, x)->open_seq < bk_conn(b, y)->open_seq;
}

static int by_grace_seq(const struct book *b, const void *ctx, uint32_t x, uint32_t y)
{
	(void)ctx;
	return bk_client(b, x)->grace_seq < bk_client(b, y)->grace_seq;
}

static void drop_want(struct bk_want *w)
{
	bk_set_state(&w->state, WANT_FREE);
	w->flags = 0;
}

static void reset_derived(struct book *b)
{
	for (uint32_t h = 0; h < BOOK_MAX_HANDLERS; h++) {
		struct bk_handler *hd = &b->handlers[h];
		hd->nconns = 0;
		hd->conn_head = hd->conn_tail = hd->mail_head = hd->mail_tail = BK_NIL;
		hd->run_head = hd->run_tail = BK_NIL;
		if (h >= b->lim.nhandlers)
			hd->hello = 0;
	}
	for (uint32_t g = 0; g < BOOK_MAX_WAITGROUPS; g++) {
		struct bk_wg *wg = &b->wgs[g];
		wg->running = wg->offered = wg->waiting = wg->tokens = 0;
		wg->off_head = wg->off_tail = BK_NIL;
	}
	for (uint32_t s = 0; s < BOOK_MAX_SERVICES; s++) {
		b->svcs[s].root = BK_NIL;
		b->svcs[s].waiting = b->svcs[s].running = b->svcs[s].offered = 0;
	}
	b->nconns = b->nclients_live = b->nwants = b->nfinished = 0;
	b->want_free = b->node_free = b->conn_free = b->client_free = BK_NIL;
	b->rc_free = BK_NIL;
	b->rc_used = 0;
	for (uint32_t r = 0; r < b->lim.max_receipts; r++) {
		bk_rslot(b, r)->next = BK_NIL;
		bk_rslot(b, r)->owner = BK_NIL;
	}
	b->exp_head = b->exp_tail = b->grace_head = b->grace_tail = BK_NIL;
	bk_index_clear(b, &b->widx);
	bk_index_clear(b, &b->cidx);
	bk_index_clear(b, &b->nidx);
	for (uint32_t i = b->lim.max_wants; i-- > 0;) {
		struct bk_node *n = bk_node(b, i);
		n->used = 0;
		n->count = 0;
		n->head = n->tail = n->child = n->sibling = n->prev = n->c_prev = BK_NIL;
		n->c_next = b->node_free;
		b->node_free = i;
	}
}

static void repair_clients(struct book *b)
{
	for (uint32_t ci = b->nclient_tab; ci-- > 0;) {
		struct bk_client *k = bk_client(b, ci);
		k->nconns = k->njobs = 0;
		k->conn_head = k->job_head = k->job_tail = BK_NIL;
		k->g_prev = k->g_next = BK_NIL;
		int ok = k->state == BKK_LIVE || k->state == BKK_GRACE;
		if (ok && (k->idlen > BOOK_ID_MAX || (k->named && k->idlen == 0)))
			ok = 0;
		if (ok && k->named && bk_find_client(b, k->id, k->idlen) != BK_NIL)
			ok = 0;
		if (!ok) {
			bk_set_state(&k->state, BKK_FREE);
			k->gen++;
			k->g_next = b->client_free;
			b->client_free = ci;
			continue;
		}
		if (k->named)
			bk_client_index_add(b, ci);
		if (k->grace_seq > b->grace_seq)
			b->grace_seq = k->grace_seq;
	}
}

static int client_ok(const struct book *b, uint32_t ci, uint32_t gen)
{
	if (ci >= b->nclient_tab)
		return 0;
	const struct bk_client *k = bk_client(b, ci);
	return k->state != BKK_FREE && k->gen == gen;
}

static void repair_conns(struct book *b)
{
	for (uint32_t c = b->lim.max_connections; c-- > 0;) {
		struct bk_conn *cn = bk_conn(b, c);
		cn->nwants = 0;
		cn->want_head = cn->want_tail = cn->node_head = BK_NIL;
		cn->h_prev = cn->h_next = cn->k_prev = cn->k_next = BK_NIL;
		int ok = cn->state == BKC_LIVE && cn->handler < b->lim.nhandlers &&
			 client_ok(b, cn->client, cn->client_gen);
		if (ok && !bk_client(b, cn->client)->named && bk_client(b, cn->client)->nconns > 0)
			ok = 0; /* an anonymous client has one conn */
		if (!ok) {
			if (cn->state != BKC_FREE) {
				bk_set_state(&cn->state, BKC_FREE);
				cn->gen++;
			}
			cn->h_next = b->conn_free;
			b->conn_free = c;
			continue;
		}
		struct bk_client *k = bk_client(b, cn->client);
		BK_DL_PUSH(bk_conn, b, k->conn_head, c, k_prev, k_next);
		k->nconns++;
		b->nconns++;
		if (cn->open_seq > b->open_seq)
			b->open_seq = cn->open_seq;
		for (uint32_t g = 0; g < BOOK_MAX_WAITGROUPS; g++)
			if (cn->stamp[g] > b->wgs[g].grant_counter)
				b->wgs[g].grant_counter = cn->stamp[g];
	}
	/* handler conn lists in open order */
	uint32_t *A = bk_scratch(b, 0);
	size_t na = 0;
	for (uint32_t c = 0; c < b->lim.max_connections; c++)
		if (bk_conn(b, c)->state == BKC_LIVE)
			A[na++] = c;
	bk_sort(b, A, na, by_open_seq, NULL);
	for (size_t i = 0; i < na; i++) {
		struct bk_handler *hd = &b->handlers[bk_conn(b, A[i])->handler];
		BK_DL_APPEND(bk_conn, b, hd->conn_head, hd->conn_tail, A[i], h_prev, h_next);
		hd->nconns++;
	}
}

static int conn_ok(const struct book *b, uint32_t c, uint32_t gen)
{
	if (c >= b->lim.max_connections)
		return 0;
	const struct bk_conn *cn = bk_conn(b, c);
	return cn->state == BKC_LIVE && cn->gen == gen;
}

/* Validates the primary fields of every want; returns how many are in use,
 * their indices in scratch 0. */
static size_t repair_want_records(struct book *b)
{
	uint32_t *A = bk_scratch(b, 0);
	size_t na = 0;
	for (uint32_t wi = 0; wi < b->lim.max_wants; wi++) {
		struct bk_want *w = bk_want(b, wi);
		w->node = BK_NIL;
		w->q_prev = w->q_next = w->o_prev = w->o_next = BK_NIL;
		w->m_prev = w->m_next = BK_NIL;
		w->m_handler = BK_NIL8;
		if (w->state == WANT_FREE)
			continue;
		int ok = w->service < b->topo.nservices && w->idlen >= 1 && w->idlen <= BOOK_ID_MAX;
		if (w->state != WANT_FINISHED) {
			w->receipt = BK_NIL;
			w->receipt_len = 0;
		}
		switch (w->state) {
		case WANT_PARKED:
		case WANT_OFFERED:
		case BK_WANT_EXPIRED:
			ok = ok && conn_ok(b, w->conn, w->conn_gen) &&
			     bk_conn(b, w->conn)->client == w->client &&
			     client_ok(b, w->client, w->client_gen);
			if (w->state == WANT_PARKED)
				w->flags = 0;
			else
				w->flags &= (uint8_t)~BKW_CANCEL_MAIL;
			break;
		case WANT_RUNNING:
			ok = ok && w->runner < b->lim.nhandlers;
			if (!ok)
				break;
			w->flags &= BKW_CANCEL_MAIL | BKW_OWNER_CANCEL;
			if (w->client != BK_NIL && !client_ok(b, w->client, w->client_gen))
				w->flags |= BKW_CANCEL_MAIL; /* its client vanished */
			if ((w->flags & BKW_CANCEL_MAIL) && !(w->flags & BKW_OWNER_CANCEL))
				w->client = BK_NIL; /* cancel decided: an orphan */
			if (w->client == BK_NIL || !conn_ok(b, w->conn, w->conn_gen) ||
			    bk_conn(b, w->conn)->client != w->client)
				w->conn = BK_NIL;
			break;
		case WANT_FINISHED:
			/* nobody to tell without its client */
			ok = ok && w->client != BK_NIL && client_ok(b, w->client, w->client_gen);
			if (!ok)
				break;
			w->flags &= BKW_DONE_MAIL | BKW_RECEIPT_LOST;
			if (!conn_ok(b, w->conn, w->conn_gen) ||
			    bk_conn(b, w->conn)->client != w->client)
				w->conn = BK_NIL;
			if (w->receipt != BK_NIL &&
			    (w->receipt >= b->lim.max_receipts || w->receipt_len == 0 ||
			     w->receipt_len > b->lim.receipt_bytes)) {
				w->receipt = BK_NIL;
				w->receipt_len = 0;
				w->flags |= BKW_RECEIPT_LOST;
			}
			break;
		default: ok = 0;
		}
		if (!ok) {
			drop_want(w);
			continue;
		}
		if (w->seq > b->seq)
			b->seq = w->seq;
		if (w->state == WANT_OFFERED && w->offer_no > b->grants)
			b->grants = w->offer_no;
		A[na++] = wi;
	}
	return na;
}

static void link_want(struct book *b, uint32_t wi)
{
	struct bk_want *w = bk_want(b, wi);
	uint32_t g = bk_want_wg(b, w);
	struct bk_service *s = &b->svcs[w->service];
	int indexed = w->state != BK_WANT_EXPIRED && w->client != BK_NIL;
	if (indexed && bk_find_want(b, w->client, w->job_id, w->idlen) != BK_NIL) {
		/* duplicate (client, job_id): the newer record goes */
		if (w->state != WANT_RUNNING) {
			drop_want(w);
			return;
		}
		w->client = BK_NIL;
		w->conn = BK_NIL;
		w->flags |= BKW_CANCEL_MAIL;
		indexed = 0;
	}
	if (indexed)
		bk_want_index_add(b, wi);
	if (w->state != WANT_RUNNING && w->state != WANT_FINISHED) {
		struct bk_conn *cn = bk_conn(b, w->conn);
		BK_DL_APPEND(bk_want, b, cn->want_head, cn->want_tail, wi, o_prev, o_next);
		if (w->state != BK_WANT_EXPIRED)
			cn->nwants++;
	}
	switch (w->state) {
	case WANT_PARKED:
		bk_park(b, wi);
		b->wgs[g].waiting++;
		s->waiting++;
		b->nwants++;
		break;
	case WANT_OFFERED:
		b->wgs[g].offered++;
		s->offered++;
		b->nwants++;
		if (w->flags & BKW_OFFER_MAIL)
			bk_mail_push(b, bk_conn(b, w->conn)->handler, wi);
		break;
	case BK_WANT_EXPIRED:
		BK_DL_APPEND(bk_want, b, b->exp_head, b->exp_tail, wi, q_prev, q_next);
		bk_mail_push(b, bk_conn(b, w->conn)->handler, wi);
		break;
	case WANT_RUNNING: {
		struct bk_handler *hd = &b->handlers[w->runner];
		BK_DL_APPEND(bk_want, b, hd->run_head, hd->run_tail, wi, q_prev, q_next);
		b->wgs[g].running++;
		s->running++;
		b->nwants++;
		if (w->client != BK_NIL) {
			struct bk_client *k = bk_client(b, w->client);
			BK_DL_APPEND(bk_want, b, k->job_head, k->job_tail, wi, o_prev, o_next);
			k->njobs++;
			if (w->conn == BK_NIL && k->nconns > 0) {
				w->conn = bk_client_newest_conn(b, w->client);
				w->conn_gen = bk_conn(b, w->conn)->gen;
			}
		}
		if (w->flags & BKW_CANCEL_MAIL)
			bk_mail_push(b, w->runner, wi);
		break;
	}
	case WANT_FINISHED: {
		struct bk_client *k = bk_client(b, w->client);
		BK_DL_APPEND(bk_want, b, k->job_head, k->job_tail, wi, o_prev, o_next);
		k->njobs++;
		b->nwants++;
		b->nfinished++;
		if (w->conn == BK_NIL && k->nconns > 0) {
			/* its owner is gone: a new owner, which must be told */
			w->conn = bk_client_newest_conn(b, w->client);
			w->conn_gen = bk_conn(b, w->conn)->gen;
			w->flags |= BKW_DONE_MAIL;
		}
		if (w->conn == BK_NIL)
			w->flags &= (uint8_t)~BKW_DONE_MAIL;
		if (w->receipt != BK_NIL) {
			struct bk_rslot *rs = bk_rslot(b, w->receipt);
			if (rs->owner == BK_NIL) {
				rs->owner = wi;
				b->rc_used++;
			} else {
				/* claimed by an older want: impossible by construction */
				w->receipt = BK_NIL;
				w->receipt_len = 0;
				w->flags |= BKW_RECEIPT_LOST;
			}
		}
		if (w->flags & BKW_DONE_MAIL)
			bk_mail_push(b, bk_conn(b, w->conn)->handler, wi);
		break;
	}
	}
}

static void repair_receipts(struct book *b)
{
	for (uint32_t r = b->lim.max_receipts; r-- > 0;) {
		struct bk_rslot *rs = bk_rslot(b, r);
		if (rs->owner != BK_NIL)
			continue;
		rs->next = b->rc_free;
		b->rc_free = r;
	}
}

/* Impossible by construction; kept so that a repaired book always passes
 * book_check. */
static void unoffer_newest(struct book *b, uint32_t g)
{
	uint32_t wi = b->wgs[g].off_tail;
	struct bk_want *w = bk_want(b, wi);
	bk_offered_unlink(b, wi);
	bk_mail_unlink(b, wi);
	if (w->flags & BKW_STAMPED)
		w->parked_at = b->clock; /* its bytes held the deadline: it waits from now */
	w->flags = 0;
	w->token = 0;
	bk_set_state(&w->state, WANT_PARKED);
	b->wgs[g].offered--;
	b->wgs[g].waiting++;
	b->svcs[w->service].offered--;
	b->svcs[w->service].waiting++;
	bk_park(b, wi);
}

static void repair_offers(struct book *b)
{
	uint32_t *A = bk_scratch(b, 0);
	size_t na = 0;
	for (uint32_t wi = 0; wi < b->lim.max_wants; wi++)
		if (bk_want(b, wi)->state == WANT_OFFERED)
			A[na++] = wi;
	bk_sort(b, A, na, by_offer_no, NULL);
	for (size_t i = 0; i < na; i++)
		bk_offered_append(b, A[i]);
	for (uint32_t g = 0; g < b->topo.nwaitgroups; g++) {
		struct bk_wg *wg = &b->wgs[g];
		while ((uint64_t)wg->running + wg->offered + wg->tokens > wg->processes &&
		       wg->off_tail != BK_NIL)
			unoffer_newest(b, g);
	}
}

static void repair_client_states(struct book *b)
{
	uint32_t *A = bk_scratch(b, 0);
	size_t na = 0;
	for (uint32_t ci = 0; ci < b->nclient_tab; ci++) {
		struct bk_client *k = bk_client(b, ci);
		if (k->state == BKK_FREE)
			continue;
		if (k->nconns > 0) {
			bk_set_state(&k->state, BKK_LIVE);
			b->nclients_live++;
		} else if (k->named && k->njobs > 0) {
			if (k->state != BKK_GRACE) {
				k->stamped = 0;
				k->grace_seq = ++b->grace_seq;
				bk_set_state(&k->state, BKK_GRACE);
			}
			A[na++] = ci;
		} else {
			/* not on the grace list yet: free it as a LIVE one */
			k->state = BKK_LIVE;
			bk_client_free(b, ci);
		}
	}
	bk_sort(b, A, na, by_grace_seq, NULL);
	for (size_t i = 0; i < na; i++)
		BK_DL_APPEND(bk_client, b, b->grace_head, b->grace_tail, A[i], g_prev, g_next);
}

void book_repair(struct book *b)
{
	b->now_valid = 0;
	reset_derived(b);
	bk_fault("repair.mid");
	bk_class_repair(b);
	repair_clients(b);
	repair_conns(b);
	size_t na = repair_want_records(b);
	bk_sort(b, bk_scratch(b, 0), na, by_seq, NULL);
	for (size_t i = 0; i < na; i++)
		link_want(b, bk_scratch(b, 0)[i]);
	repair_receipts(b);
	bk_token_repair(b);
	repair_offers(b);
	repair_client_states(b);
	for (uint32_t wi = b->lim.max_wants; wi-- > 0;) {
		struct bk_want *w = bk_want(b, wi);
		if (w->state != WANT_FREE)
			continue;
		w->gen++;
		w->flags = 0;
		w->receipt = BK_NIL;
		w->receipt_len = 0;
		w->q_next = b->want_free;
		b->want_free = wi;
	}
	for (uint32_t h = 0; h < b->lim.nhandlers; h++) {
		struct bk_handler *hd = &b->handlers[h];
		if (hd->nconns > 0)
			hd->hello = 1;
		else
			hd->hello = 0;
		if (hd->hello || hd->mail_head != BK_NIL)
			b->mail_mask |= 1ULL << h;
	}
	bk_grant_all(b);
}
