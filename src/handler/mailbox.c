/* mailbox.c - see mailbox.h. */
#include "autoconfig.h"

#include <stdint.h>
#include <unistd.h>

#include "common/log.h"
#include "handler/broker.h"
#include "handler/handler.h"
#include "handler/mailbox.h"
#include "job/job.h"

#define MAIL_BATCH 64

/* Mail taken from the book, not yet acted on: [head, tail) in order.
 * Appended only at tail (mailbox_take_locked, also while the loop below
 * delivers: a delivery may take the lock), emptied by mailbox_on_wake. */
static struct book_mail taken[MAIL_BATCH];
static size_t head, tail;

static void deliver(const struct book_mail *m)
{
	switch (m->kind) {
	case MAIL_OFFER: broker_deliver_offer(m->conn, m->job_id, m->token); break;
	case MAIL_OFFER_EXPIRED: broker_deliver_offer_expired(m->conn, m->job_id); break;
	case MAIL_CANCEL: job_cancel(m->want, JOB_CANCEL_REQUESTED); break;
	case MAIL_HELLO: broker_schedule_hello(); break;
	case MAIL_DONE: broker_deliver_done(m->conn, m->want, m->job_id); break;
	}
}

size_t mailbox_take_locked(struct book *b)
{
	if (tail < MAIL_BATCH)
		tail += book_mail_take(b, (uint32_t)handler.slot, taken + tail, MAIL_BATCH - tail);
	return tail - head;
}

void mailbox_on_wake(evutil_socket_t fd, short what, void *arg)
{
	struct book *b = handler.inst->book;

	if (fd >= 0) {
		uint64_t count;
		ssize_t r = read(fd, &count, sizeof count); /* reset the eventfd */
		(void)r;
	}
	for (;;) {
		while (head < tail) {
			struct book_mail m = taken[head++];
			deliver(&m);
		}
		head = tail = 0;
		/* a section of its own only for mail that none of ours took */
		if (!book_mail_pending(b, (uint32_t)handler.slot))
			return;
		handler_book_lock();
		handler_book_unlock(); /* takes it (mailbox_take_locked) */
	}
}
