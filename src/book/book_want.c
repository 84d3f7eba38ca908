/*
 * book_want.c - the life of one want: WANT, UNWANT, CANCEL, JOB, DECLINE,
 * the end of a running job (FINISHED), the delivery of its DONE, and the
 * node FIFOs that hold parked wants.
 *
 * Owns the want records (allocation, free list, state transitions), the
 * nodes (one per (conn, service, priority) with parked wants, created and
 * freed here), the receipt store (slots taken at finish, given back when
 * the want is freed) and the per-service statistics.  Invariants:
 *  - a want's state is written last on allocation and on every transition
 *    (after the fields the new state needs: outcome, receipt text and
 *    slot, mail flags) and first on free;
 *  - a PARKED want is in exactly the FIFO of node (conn, service, priority),
 *    FIFO order = seq order; a node exists iff its FIFO is non-empty and is
 *    then in its service's heap, the node index and its conn's node list;
 *  - conn.nwants counts its PARKED + OFFERED wants (the per-connection
 *    limit); b->nwants counts PARKED + OFFERED + RUNNING + FINISHED (the
 *    book limit: every record a client can still name); EXPIRED records
 *    count in neither;
 *  - a FINISHED want holds no slot, is not on its runner's list, stays in
 *    the job index and its client's job list, and owns at most one receipt
 *    slot; BKW_DONE_MAIL <=> it is in its owner conn's handler's mailbox.
 *
 * A request names a job by (conn, job_id); the key is (client, job_id), so
 * job_ids are unique per client.  PARKED and OFFERED wants belong to the
 * conn that placed them: another conn of the same client gets
 * BOOK_E_UNKNOWN_JOB for them.  RUNNING and FINISHED jobs belong to the
 * client.
 *
 * The end of a running job (bk_job_end) is shared by book_job_finished and
 * the purge of its runner (which ends it with the outcome BOOK_ERROR_LOST,
 * see book_conn.c): the same transition, the same DONE rules.
 *
 * Costs: book_want O(1) amortized + the grant; book_unwant/decline
 * O(log n) amortized + the grant; book_accept, book_done_delivered O(1);
 * book_job_finished O(1) + copying the receipt + the grant.
 */
#include "autoconfig.h"
#include "book/book.h"

#include <string.h>

#include "book/book_heap.h"
#include "book/book_impl.h"
#include "book/book_index.h"

static int id_ok(const char *id, size_t *len)
{
	if (!id)
		return 0;
	*len = strnlen(id, BOOK_ID_MAX + 1);
	return *len >= 1 && *len <= BOOK_ID_MAX;
}

uint32_t bk_want_get(const struct book *b, struct book_ref ref)
{
	if (ref.idx >= b->lim.max_wants)
		return BK_NIL;
	const struct bk_want *w = bk_want(b, ref.idx);
	if (w->gen != ref.gen || w->state == WANT_FREE || w->state == BK_WANT_EXPIRED)
		return BK_NIL;
	return ref.idx;
}

static uint32_t lookup(const struct book *b, uint32_t c, const char *id, size_t len)
{
	uint32_t wi = bk_find_want(b, bk_conn(b, c)->client, id, len);
	if (wi == BK_NIL)
		return BK_NIL;
	const struct bk_want *w = bk_want(b, wi);
	if ((w->state == WANT_PARKED || w->state == WANT_OFFERED) && w->conn != c)
		return BK_NIL;
	return wi;
}

/* The common prologue of every request that names a job of the caller:
 * a live conn, a well-formed id, a job visible to that conn. */
static enum book_rc find_job(const struct book *b, struct book_ref conn, const char *job_id,
			     uint32_t *c, uint32_t *wi)
{
	size_t len;
	*c = bk_conn_get(b, conn);
	if (*c == BK_NIL)
		return BOOK_E_STALE;
	if (!id_ok(job_id, &len))
		return BOOK_E_INVALID;
	*wi = lookup(b, *c, job_id, len);
	return *wi == BK_NIL ? BOOK_E_UNKNOWN_JOB : BOOK_OK;
}

uint32_t bk_want_alloc(struct book *b)
{
	if (b->want_free == BK_NIL) {
		/* table full of live wants plus pending OFFER_EXPIRED mails:
		 * the oldest of those mails gives up its record */
		if (b->exp_head == BK_NIL)
			return BK_NIL;
		bk_want_free(b, b->exp_head, NULL);
	}
	uint32_t wi = b->want_free;
	struct bk_want *w = bk_want(b, wi);
	b->want_free = w->q_next;
	w->q_next = BK_NIL;
	return wi;
}

/* ---- nodes ---- */

static uint32_t node_alloc(struct book *b)
{
	uint32_t ni = b->node_free;
	struct bk_node *n = bk_node(b, ni);
	b->node_free = n->c_next;
	n->c_next = BK_NIL;
	return ni;
}

static void node_free(struct book *b, uint32_t ni)
{
	struct bk_node *n = bk_node(b, ni);
	struct bk_conn *c = bk_conn(b, n->conn);
	bk_heap_remove(b, n->service, ni);
	bk_node_index_del(b, ni);
	BK_DL_UNLINK_H(bk_node, b, c->node_head, ni, c_prev, c_next);
	n->used = 0;
	n->head = n->tail = BK_NIL;
	n->count = 0;
	n->c_next = b->node_free;
	b->node_free = ni;
}

void bk_park(struct book *b, uint32_t wi)
{
	struct bk_want *w = bk_want(b, wi);
	uint32_t h = bk_hash_node(b, w->conn, w->service, w->priority);
	uint32_t ni = bk_find_node_hashed(b, h, w->conn, w->service, w->priority);
	if (ni == BK_NIL) {
		ni = node_alloc(b);
		struct bk_node *n = bk_node(b, ni);
		n->used = 1;
		n->conn = w->conn;
		n->service = w->service;
		n->priority = w->priority;
		n->count = 0;
		n->head = n->tail = BK_NIL;
		BK_DL_APPEND(bk_want, b, n->head, n->tail, wi, q_prev, q_next);
		n->count = 1;
		n->stamp = bk_conn(b, w->conn)->stamp[bk_want_wg(b, w)];
		n->seq = w->seq;
		w->node = ni;
		bk_node_index_add_hashed(b, ni, h);
		struct bk_conn *c = bk_conn(b, w->conn);
		BK_DL_PUSH(bk_node, b, c->node_head, ni, c_prev, c_next);
		bk_heap_insert(b, w->service, ni);
	} else {
		/* the head stays: the node's key does not change */
		struct bk_node *n = bk_node(b, ni);
		BK_DL_APPEND(bk_want, b, n->head, n->tail, wi, q_prev, q_next);
		n->count++;
		w->node = ni;
	}
}

void bk_unpark(struct book *b, uint32_t wi)
{
	struct bk_want *w = bk_want(b, wi);
	uint32_t ni = w->node;
	struct bk_node *n = bk_node(b, ni);
	int was_head = n->head == wi;
	BK_DL_UNLINK(bk_want, b, n->head, n->tail, wi, q_prev, q_next);
	n->count--;
	w->node = BK_NIL;
	if (n->count == 0) {
		node_free(b, ni);
	} else if (was_head) {
		bk_heap_remove(b, n->service, ni);
		n->seq = bk_want(b, n->head)->seq;
		bk_heap_insert(b, n->service, ni);
	}
}

/* ---- receipts ---- */

static uint32_t receipt_alloc(struct book *b, uint32_t wi)
{
	uint32_t r = b->rc_free;
	if (r == BK_NIL)
		return BK_NIL;
	struct bk_rslot *rs = bk_rslot(b, r);
	b->rc_free = rs->next;
	rs->next = BK_NIL;
	rs->owner = wi;
	b->rc_used++;
	return r;
}

static void receipt_release(struct book *b, struct bk_want *w)
{
	if (w->receipt != BK_NIL) {
		struct bk_rslot *rs = bk_rslot(b, w->receipt);
		rs->owner = BK_NIL;
		rs->next = b->rc_free;
		b->rc_free = w->receipt;
		b->rc_used--;
	}
	w->receipt = BK_NIL;
	w->receipt_len = 0;
}

/* ---- free ---- */

/* Takes a RUNNING or FINISHED want off its client (job index, job list);
 * returns the client, or BK_NIL if it had none. */
static uint32_t unlink_from_client(struct book *b, uint32_t wi)
{
	struct bk_want *w = bk_want(b, wi);
	uint32_t ci = w->client;
	if (ci == BK_NIL)
		return BK_NIL;
	struct bk_client *k = bk_client(b, ci);
	bk_want_index_del(b, wi);
	BK_DL_UNLINK(bk_want, b, k->job_head, k->job_tail, wi, o_prev, o_next);
	k->njobs--;
	return ci;
}

void bk_want_free(struct book *b, uint32_t wi, const char *point)
{
	struct bk_want *w = bk_want(b, wi);
	uint8_t old = w->state;
	if (old == WANT_FREE)
		return;
	bk_set_state(&w->state, WANT_FREE);
	w->gen++;
	if (point)
		bk_fault(point);
	bk_mail_unlink(b, wi);
	uint32_t g = bk_want_wg(b, w);
	struct bk_service *s = &b->svcs[w->service];
	if (old == WANT_PARKED || old == WANT_OFFERED || old == BK_WANT_EXPIRED) {
		struct bk_conn *c = bk_conn(b, w->conn);
		BK_DL_UNLINK(bk_want, b, c->want_head, c->want_tail, wi, o_prev, o_next);
		if (old != BK_WANT_EXPIRED)
			c->nwants--;
	}
	switch (old) {
	case WANT_PARKED:
		bk_unpark(b, wi);
		b->wgs[g].waiting--;
		s->waiting--;
		bk_want_index_del(b, wi);
		b->nwants--;
		break;
	case WANT_OFFERED:
		bk_offered_unlink(b, wi);
		b->wgs[g].offered--;
		s->offered--;
		bk_want_index_del(b, wi);
		b->nwants--;
		break;
	case WANT_RUNNING: {
		struct bk_handler *hd = &b->handlers[w->runner];
		BK_DL_UNLINK(bk_want, b, hd->run_head, hd->run_tail, wi, q_prev, q_next);
		b->wgs[g].running--;
		s->running--;
		b->nwants--;
		uint32_t ci = unlink_from_client(b, wi);
		if (ci != BK_NIL)
			bk_client_release_if_idle(b, ci);
		break;
	}
	case WANT_FINISHED: {
		b->nwants--;
		b->nfinished--;
		receipt_release(b, w);
		uint32_t ci = unlink_from_client(b, wi);
		if (ci != BK_NIL)
			bk_client_release_if_idle(b, ci);
		break;
	}
	case BK_WANT_EXPIRED:
		BK_DL_UNLINK(bk_want, b, b->exp_head, b->exp_tail, wi, q_prev, q_next);
		break;
	}
	w->flags = 0;
	w->receipt = BK_NIL;
	w->receipt_len = 0;
	w->node = BK_NIL;
	w->q_prev = BK_NIL;
	w->q_next = b->want_free;
	b->want_free = wi;
}

void bk_want_orphan(struct book *b, uint32_t wi)
{
	struct bk_want *w = bk_want(b, wi);
	w->flags |= BKW_CANCEL_MAIL;
	unlink_from_client(b, wi);
	w->client = BK_NIL;
	w->conn = BK_NIL;
	bk_mail_push(b, w->runner, wi);
}

void bk_want_forget(struct book *b, uint32_t wi)
{
	struct bk_want *w = bk_want(b, wi);
	unlink_from_client(b, wi);
	w->client = BK_NIL;
	w->conn = BK_NIL;
	bk_want_free(b, wi, NULL);
}

void bk_done_mail(struct book *b, uint32_t wi)
{
	struct bk_want *w = bk_want(b, wi);
	w->flags |= BKW_DONE_MAIL;
	bk_mail_push(b, bk_conn(b, w->conn)->handler, wi);
}

/* ---- requests ---- */

enum book_rc book_want(struct book *b, struct book_ref conn, const char *job_id, uint32_t service,
		       int32_t priority, uint64_t now_ms)
{
	size_t len;
	bk_tick(b, now_ms);
	uint32_t c = bk_conn_get(b, conn);
	if (c == BK_NIL)
		return BOOK_E_STALE;
	if (!id_ok(job_id, &len))
		return BOOK_E_INVALID;
	if (b->draining)
		return BOOK_E_DRAINING;
	if (service >= b->topo.nservices)
		return BOOK_E_UNKNOWN_SERVICE;
	if (!b->svcs[service].enabled)
		return BOOK_E_DISABLED;
	struct bk_conn *cn = bk_conn(b, c);
	uint32_t h = bk_hash_want(b, cn->client, job_id, len);
	if (bk_find_want_hashed(b, h, cn->client, job_id, len) != BK_NIL)
		return BOOK_E_DUPLICATE;
	if (cn->nwants >= b->lim.max_wants_per_connection)
		return BOOK_E_LIMIT_CONN;
	if (b->nwants >= b->lim.max_wants)
		return BOOK_E_LIMIT_WANTS;
	uint32_t wi = bk_want_alloc(b);
	if (wi == BK_NIL)
		return BOOK_E_LIMIT_WANTS;
	struct bk_want *w = bk_want(b, wi);
	w->flags = 0;
	w->idlen = (uint8_t)len;
	memcpy(w->job_id, job_id, len);
	w->service = service;
	w->priority = priority;
	w->conn = c;
	w->conn_gen = cn->gen;
	w->client = cn->client;
	w->client_gen = bk_client(b, cn->client)->gen;
	w->runner = BK_NIL8;
	w->command = 0;
	w->pgid = 0;
	w->seq = ++b->seq;
	w->token = 0;
	w->deadline = 0;
	w->offer_no = 0;
	w->exit_code = 0;
	w->signal = w->error = w->retryable = w->failed = 0;
	w->duration_ms = 0;
	w->parked_at = b->clock; /* after the outcome's zeroes: they share its bytes */
	w->receipt = BK_NIL;
	w->receipt_len = 0;
	w->m_handler = BK_NIL8;
	w->m_prev = w->m_next = w->o_prev = w->o_next = BK_NIL;
	bk_set_state(&w->state, WANT_PARKED);
	bk_fault("want.mid");
	bk_want_index_add_hashed(b, wi, h);
	BK_DL_APPEND(bk_want, b, cn->want_head, cn->want_tail, wi, o_prev, o_next);
	cn->nwants++;
	b->nwants++;
	bk_park(b, wi);
	uint32_t g = b->svcs[service].wg;
	b->wgs[g].waiting++;
	b->svcs[service].waiting++;
	bk_grant(b, g);
	return BOOK_OK;
}

enum book_rc book_unwant(struct book *b, struct book_ref conn, const char *job_id)
{
	uint32_t c, wi;
	enum book_rc rc = find_job(b, conn, job_id, &c, &wi);
	if (rc != BOOK_OK)
		return rc;
	struct bk_want *w = bk_want(b, wi);
	if (w->state == WANT_RUNNING || w->state == WANT_FINISHED)
		return BOOK_E_BAD_STATE;
	int offered = w->state == WANT_OFFERED;
	uint32_t g = bk_want_wg(b, w);
	bk_want_free(b, wi, "unwant.mid");
	if (offered)
		bk_grant(b, g);
	return BOOK_OK;
}

/* A RUNNING want's cancel on behalf of its client (not an orphan's):
 * one CANCEL mail to its runner; already asked, one is enough. */
static void mail_cancel(struct book *b, uint32_t wi)
{
	struct bk_want *w = bk_want(b, wi);
	if (!(w->flags & BKW_CANCEL_MAIL)) {
		w->flags |= BKW_OWNER_CANCEL;
		w->flags |= BKW_CANCEL_MAIL;
		bk_fault("cancel.mid");
		bk_mail_push(b, w->runner, wi);
	}
}

enum book_rc book_cancel(struct book *b, struct book_ref conn, const char *job_id,
			 enum want_state *was, struct book_ref *want)
{
	uint32_t c, wi;
	enum book_rc rc = find_job(b, conn, job_id, &c, &wi);
	if (rc != BOOK_OK)
		return rc;
	struct bk_want *w = bk_want(b, wi);
	*was = (enum want_state)w->state;
	if (w->state == WANT_FINISHED)
		return BOOK_E_UNKNOWN_JOB; /* ended: its outcome stands */
	if (w->state != WANT_RUNNING)
		return book_unwant(b, conn, job_id);
	if (want) {
		want->idx = wi;
		want->gen = w->gen;
	}
	mail_cancel(b, wi);
	return BOOK_OK;
}

enum book_rc book_cancel_ref(struct book *b, struct book_ref want)
{
	uint32_t wi = bk_want_get(b, want);
	if (wi == BK_NIL)
		return BOOK_E_STALE;
	if (bk_want(b, wi)->state != WANT_RUNNING)
		return BOOK_E_BAD_STATE;
	mail_cancel(b, wi);
	return BOOK_OK;
}

enum book_rc book_accept(struct book *b, struct book_ref conn, const char *job_id, uint64_t token,
			 uint32_t runner, struct book_ref *want)
{
	uint32_t c, wi;
	if (runner >= b->lim.nhandlers)
		return BOOK_E_INVALID;
	enum book_rc rc = find_job(b, conn, job_id, &c, &wi);
	if (rc != BOOK_OK)
		return rc;
	struct bk_want *w = bk_want(b, wi);
	if (w->state != WANT_OFFERED)
		return BOOK_E_BAD_STATE;
	if (w->token != token)
		return BOOK_E_BAD_TOKEN;
	/* the limit counts the client's jobs that are not done with: running,
	 * or finished with their DONE still to be delivered (acknowledged) */
	if (b->lim.max_jobs_per_client &&
	    bk_client(b, w->client)->njobs >= b->lim.max_jobs_per_client)
		return BOOK_E_LIMIT_JOBS;
	w->runner = runner;
	w->pgid = 0;
	w->command = 0;
	w->flags &= (uint8_t) ~(BKW_OFFER_MAIL | BKW_CANCEL_MAIL);
	bk_set_state(&w->state, WANT_RUNNING);
	w->started_ms = b->clock; /* after the state: the deadline is not read any more */
	w->progress = 0;
	bk_fault("accept.mid");
	bk_mail_unlink(b, wi);
	bk_offered_unlink(b, wi);
	struct bk_conn *cn = bk_conn(b, c);
	BK_DL_UNLINK(bk_want, b, cn->want_head, cn->want_tail, wi, o_prev, o_next);
	cn->nwants--;
	struct bk_client *k = bk_client(b, w->client);
	BK_DL_APPEND(bk_want, b, k->job_head, k->job_tail, wi, o_prev, o_next);
	k->njobs++;
	struct bk_handler *hd = &b->handlers[runner];
	BK_DL_APPEND(bk_want, b, hd->run_head, hd->run_tail, wi, q_prev, q_next);
	uint32_t g = bk_want_wg(b, w);
	b->wgs[g].offered--;
	b->wgs[g].running++;
	b->svcs[w->service].offered--;
	b->svcs[w->service].running++;
	b->svcs[w->service].started++;
	if (want) {
		want->idx = wi;
		want->gen = w->gen;
	}
	return BOOK_OK;
}

enum book_rc book_decline(struct book *b, struct book_ref conn, const char *job_id, uint64_t token)
{
	uint32_t c, wi;
	enum book_rc rc = find_job(b, conn, job_id, &c, &wi);
	if (rc != BOOK_OK)
		return rc;
	struct bk_want *w = bk_want(b, wi);
	if (w->state != WANT_OFFERED)
		return BOOK_E_BAD_STATE;
	if (w->token != token)
		return BOOK_E_BAD_TOKEN;
	uint32_t g = bk_want_wg(b, w);
	bk_want_free(b, wi, "decline.mid");
	bk_grant(b, g);
	return BOOK_OK;
}

void book_job_set_pgid(struct book *b, struct book_ref want, int32_t pgid)
{
	uint32_t wi = bk_want_get(b, want);
	if (wi != BK_NIL && bk_want(b, wi)->state == WANT_RUNNING)
		bk_want(b, wi)->pgid = pgid;
}

void book_job_set_command(struct book *b, struct book_ref want, unsigned command)
{
	uint32_t wi = bk_want_get(b, want);
	if (wi != BK_NIL && bk_want(b, wi)->state == WANT_RUNNING && command < UINT8_MAX)
		bk_want(b, wi)->command = (uint8_t)(command + 1);
}

void book_job_set_progress(struct book *b, struct book_ref want, double fraction)
{
	uint32_t wi = bk_want_get(b, want);
	if (wi == BK_NIL || bk_want(b, wi)->state != WANT_RUNNING || !(fraction >= 0))
		return;
	if (fraction > 1)
		fraction = 1;
	bk_want(b, wi)->progress = (uint16_t)(1 + (unsigned)(fraction * 10000 + 0.5));
}

uint32_t bk_job_end(struct book *b, uint32_t wi, const struct book_outcome *o, const char *receipt,
		    size_t len, const char *point)
{
	struct bk_want *w = bk_want(b, wi);
	struct bk_service *s = &b->svcs[w->service];
	uint32_t g = bk_want_wg(b, w), svc = w->service;
	if (w->client == BK_NIL) {
		/* an orphan (its client ended): nobody to tell; its failure is
		 * noted while the record still names it */
		if (o->failed)
			bk_failure_note(b, w, o);
		bk_want_free(b, wi, point);
		bk_service_sample(b, svc, o);
		return g;
	}

	/* primary: receipt text and slot, outcome, flags, then the state */
	uint8_t flags = w->flags & (BKW_CANCEL_MAIL | BKW_OWNER_CANCEL);
	uint32_t slot = BK_NIL;
	if (receipt && len > 0) {
		if (len <= b->lim.receipt_bytes)
			slot = receipt_alloc(b, wi);
		if (slot == BK_NIL)
			flags |= BKW_RECEIPT_LOST;
		else
			memcpy(bk_rbytes(b, slot), receipt, len);
	}
	w->exit_code = o->exit_code;
	w->signal = o->signal;
	w->error = o->error;
	w->retryable = o->retryable;
	w->failed = o->failed;
	w->duration_ms = o->duration_ms;
	w->receipt = slot;
	w->receipt_len = slot != BK_NIL ? (uint32_t)len : 0;
	/* the outcome shares its bytes with the offer's deadline and number:
	 * a crash here leaves a RUNNING want with them overwritten */
	if (point)
		bk_fault("finish.outcome");
	if (w->conn != BK_NIL)
		flags |= BKW_DONE_MAIL;
	w->flags = flags;
	bk_set_state(&w->state, WANT_FINISHED);
	/* statistics after the state write: a process dying in between loses
	 * a sample, never counts one for a job that repair ends otherwise */
	bk_service_sample(b, svc, o);
	if (o->failed)
		bk_failure_note(b, w, o);
	if (point)
		bk_fault(point);

	/* derived: a CANCEL not taken yet is moot; the slot is free */
	w->flags &= (uint8_t) ~(BKW_CANCEL_MAIL | BKW_OWNER_CANCEL);
	bk_mail_unlink(b, wi);
	struct bk_handler *hd = &b->handlers[w->runner];
	BK_DL_UNLINK(bk_want, b, hd->run_head, hd->run_tail, wi, q_prev, q_next);
	b->wgs[g].running--;
	s->running--;
	b->nfinished++;
	if (w->flags & BKW_DONE_MAIL)
		bk_mail_push(b, bk_conn(b, w->conn)->handler, wi);
	return g;
}

void bk_service_sample(struct book *b, uint32_t svc, const struct book_outcome *o)
{
	struct bk_service *s = &b->svcs[svc];
	s->finished++;
	if (o->failed)
		s->failed++;
	if (o->error != BOOK_ERROR_LOST) /* a lost job's run time is not known */
		hist_add(&s->runtime, o->duration_ms);
	bk_profile_sample(b, svc, o);
	bk_fault("sample.mid");
}

enum book_rc book_job_finished(struct book *b, struct book_ref want, const struct book_outcome *o,
			       const char *receipt, size_t len)
{
	if (!o)
		return BOOK_E_INVALID;
	uint32_t wi = bk_want_get(b, want);
	if (wi == BK_NIL)
		return BOOK_E_STALE;
	struct bk_want *w = bk_want(b, wi);
	if (w->state != WANT_RUNNING)
		return BOOK_E_BAD_STATE;
	/* the grant after the sample (bk_job_end): a class change changes who
	 * may take the slot */
	uint64_t grants = b->grants;
	bk_grant(b, bk_job_end(b, wi, o, receipt, len, "finished.mid"));
	b->handovers += b->grants - grants;
	return BOOK_OK;
}

enum book_rc book_done_read(const struct book *b, struct book_ref want, struct book_outcome *o,
			    char *buf, size_t cap, size_t *len)
{
	uint32_t wi = bk_want_get(b, want);
	if (wi == BK_NIL)
		return BOOK_E_STALE;
	const struct bk_want *w = bk_want(b, wi);
	if (w->state != WANT_FINISHED)
		return BOOK_E_BAD_STATE;
	if (o) {
		memset(o, 0, sizeof *o);
		o->exit_code = w->exit_code;
		o->signal = w->signal;
		o->error = w->error;
		o->retryable = w->retryable;
		o->failed = w->failed;
		o->duration_ms = w->duration_ms;
		o->receipt_lost = (w->flags & BKW_RECEIPT_LOST) != 0;
	}
	size_t n = w->receipt != BK_NIL ? w->receipt_len : 0;
	if (buf && cap > 0) {
		size_t c = n < cap - 1 ? n : cap - 1;
		if (c)
			memcpy(buf, bk_rbytes(b, w->receipt), c);
		buf[c] = '\0';
	}
	if (len)
		*len = n;
	return BOOK_OK;
}

enum book_rc book_done_delivered(struct book *b, struct book_ref want)
{
	uint32_t wi = bk_want_get(b, want);
	if (wi == BK_NIL)
		return BOOK_E_STALE;
	if (bk_want(b, wi)->state != WANT_FINISHED)
		return BOOK_E_BAD_STATE;
	bk_want_free(b, wi, "delivered.mid");
	return BOOK_OK;
}

enum book_rc book_done_ack(struct book *b, struct book_ref conn, const char *job_id)
{
	uint32_t c, wi;
	enum book_rc rc = find_job(b, conn, job_id, &c, &wi);
	if (rc != BOOK_OK)
		return rc;
	if (bk_want(b, wi)->state != WANT_FINISHED)
		return BOOK_E_BAD_STATE;
	bk_want_free(b, wi, "delivered.mid");
	return BOOK_OK;
}

enum book_rc book_job_owner(const struct book *b, struct book_ref want, struct book_ref *conn,
			    uint32_t *handler)
{
	uint32_t wi = bk_want_get(b, want);
	if (wi == BK_NIL)
		return BOOK_E_STALE;
	const struct bk_want *w = bk_want(b, wi);
	if (w->conn == BK_NIL)
		return BOOK_E_STALE;
	if (conn) {
		conn->idx = w->conn;
		conn->gen = w->conn_gen;
	}
	if (handler)
		*handler = bk_conn(b, w->conn)->handler;
	return BOOK_OK;
}

enum book_rc book_query(const struct book *b, struct book_ref conn, const char *job_id,
			struct book_position *pos)
{
	uint32_t c, wi;
	enum book_rc rc = find_job(b, conn, job_id, &c, &wi);
	if (rc != BOOK_OK)
		return rc;
	const struct bk_want *w = bk_want(b, wi);
	const struct bk_wg *wg = &b->wgs[bk_want_wg(b, w)];
	memset(pos, 0, sizeof *pos);
	pos->state = (enum want_state)w->state;
	pos->running = wg->running + wg->offered + wg->tokens;
	pos->capacity = wg->processes;
	pos->service = w->service;
	pos->ahead = w->state == WANT_PARKED ? bk_query_ahead(b, wi) : 0;
	return BOOK_OK;
}
