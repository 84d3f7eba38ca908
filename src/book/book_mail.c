/*
 * book_mail.c - the handlers' mailboxes.
 *
 * Owns handlers[h].mail_head/tail, the want m_* links, handlers[h].hello,
 * handlers[h].asleep and b->mail_mask.  A mailbox is an intrusive FIFO through the want records
 * themselves, so it can never overflow: the mail IS the want record in a
 * state that says what to send.  When the mail is taken, the record's
 * current state decides:
 *   OFFERED  (BKW_OFFER_MAIL)  -> MAIL_OFFER to the conn's handler
 *   EXPIRED                    -> MAIL_OFFER_EXPIRED, record freed
 *   RUNNING  (BKW_CANCEL_MAIL) -> MAIL_CANCEL to the runner
 *   FINISHED (BKW_DONE_MAIL)   -> MAIL_DONE to the owner conn's handler
 *                                 (the want stays until book_done_delivered)
 * Freeing a want unlinks it, so mail for a freed want is never delivered;
 * an offer that expires before its OFFER was taken turns, in place, into
 * the OFFER_EXPIRED mail (the client learns its want is gone).
 *
 * Exactly once: the pending flag (BKW_OFFER_MAIL / BKW_CANCEL_MAIL /
 * BKW_DONE_MAIL) is primary and is cleared only by book_mail_take, which
 * runs in the handler that then sends the mail (and by the owner's end for
 * DONE: see book_conn.c); repair re-queues from the flags, so a crash never
 * loses nor duplicates a mail, except that the mails a handler had taken
 * are lost with that handler (its conns are purged anyway; a DONE it had
 * taken is re-mailed to the finished job's next owner conn, because that
 * handler never called book_done_delivered).
 * A pending HELLO is one flag per handler (coalesced); repair sets it for
 * every handler with live conns, which is harmless (HELLO is a snapshot).
 *
 * Order of book_mail_take: HELLO first, then the mailbox in FIFO order.
 *
 * Also here, outside the lock: the handlers' asleep marks (which decide
 * whose eventfd a mail needs, book_wake_needed).
 */
#include "autoconfig.h"
#include "book/book.h"

#include <string.h>

#include "book/book_impl.h"

void bk_mail_push(struct book *b, uint32_t h, uint32_t wi)
{
	struct bk_handler *hd = &b->handlers[h];
	bk_mail_unlink(b, wi);
	BK_DL_APPEND(bk_want, b, hd->mail_head, hd->mail_tail, wi, m_prev, m_next);
	bk_want(b, wi)->m_handler = h;
	b->mail_mask |= 1ULL << h;
}

void bk_mail_unlink(struct book *b, uint32_t wi)
{
	struct bk_want *w = bk_want(b, wi);
	if (w->m_handler == BK_NIL8)
		return;
	struct bk_handler *hd = &b->handlers[w->m_handler];
	BK_DL_UNLINK(bk_want, b, hd->mail_head, hd->mail_tail, wi, m_prev, m_next);
	w->m_handler = BK_NIL8;
}

void bk_hello_dirty(struct book *b)
{
	for (uint32_t h = 0; h < b->lim.nhandlers; h++) {
		if (b->handlers[h].nconns == 0)
			continue;
		b->handlers[h].hello = 1;
		b->mail_mask |= 1ULL << h;
	}
}

int book_mail_pending(const struct book *b, uint32_t handler)
{
	if (handler >= b->lim.nhandlers)
		return 0;
	const struct bk_handler *hd = &b->handlers[handler];
	return __atomic_load_n(&hd->mail_head, __ATOMIC_RELAXED) != BK_NIL ||
	       __atomic_load_n(&hd->hello, __ATOMIC_RELAXED) != 0;
}

void book_handler_asleep(struct book *b, uint32_t handler, int asleep)
{
	if (handler >= b->lim.nhandlers)
		return;
	uint32_t *mark = &b->handlers[handler].asleep;
	if (__atomic_load_n(mark, __ATOMIC_RELAXED) != (uint32_t)asleep)
		__atomic_store_n(mark, (uint32_t)asleep, __ATOMIC_RELAXED);
	if (asleep)
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

uint64_t book_wake_needed(const struct book *b, uint64_t mask)
{
	uint64_t need = 0;
	if (!mask)
		return 0;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (uint32_t h = 0; h < b->lim.nhandlers && h < 64; h++)
		if ((mask >> h & 1) && __atomic_load_n(&b->handlers[h].asleep, __ATOMIC_RELAXED))
			need |= 1ull << h;
	return need;
}

static void fill_id(struct book_mail *m, const struct bk_want *w)
{
	memcpy(m->job_id, w->job_id, w->idlen);
	m->job_id[w->idlen] = '\0';
}

size_t book_mail_take(struct book *b, uint32_t handler, struct book_mail *out, size_t max)
{
	if (handler >= b->lim.nhandlers)
		return 0;
	struct bk_handler *hd = &b->handlers[handler];
	size_t n = 0;
	if (hd->hello && n < max) {
		memset(&out[n], 0, sizeof out[n]);
		out[n++].kind = MAIL_HELLO;
		hd->hello = 0;
	}
	while (n < max && hd->mail_head != BK_NIL) {
		uint32_t wi = hd->mail_head;
		struct bk_want *w = bk_want(b, wi);
		struct book_mail *m = &out[n];
		bk_mail_unlink(b, wi);
		bk_fault("mail.mid");
		memset(m, 0, sizeof *m);
		m->want.idx = wi;
		m->want.gen = w->gen;
		m->conn.idx = BK_NIL;
		if (w->state == WANT_OFFERED && (w->flags & BKW_OFFER_MAIL)) {
			w->flags &= (uint8_t)~BKW_OFFER_MAIL;
			m->kind = MAIL_OFFER;
			m->conn.idx = w->conn;
			m->conn.gen = w->conn_gen;
			m->token = w->token;
			fill_id(m, w);
			n++;
		} else if (w->state == BK_WANT_EXPIRED) {
			m->kind = MAIL_OFFER_EXPIRED;
			m->conn.idx = w->conn;
			m->conn.gen = w->conn_gen;
			fill_id(m, w);
			n++;
			bk_want_free(b, wi, NULL);
		} else if (w->state == WANT_RUNNING && (w->flags & BKW_CANCEL_MAIL)) {
			w->flags &= (uint8_t)~BKW_CANCEL_MAIL;
			m->kind = MAIL_CANCEL;
			fill_id(m, w);
			n++;
		} else if (w->state == WANT_FINISHED && (w->flags & BKW_DONE_MAIL)) {
			w->flags &= (uint8_t)~BKW_DONE_MAIL;
			m->kind = MAIL_DONE;
			m->conn.idx = w->conn;
			m->conn.gen = w->conn_gen;
			fill_id(m, w);
			n++;
		}
		/* anything else was queued by mistake: dropped */
	}
	return n;
}
