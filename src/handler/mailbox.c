/* mailbox.c - see mailbox.h. */
#include "autoconfig.h"

#include <stdint.h>
#include <unistd.h>

#include "common/log.h"
#include "handler/broker.h"
#include "handler/handler.h"
#include "handler/mailbox.h"
#include "job/job.h"

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

size_t mailbox_take(struct book *b, struct book_mail *mail, size_t max)
{
	if (!book_mail_pending(b, (uint32_t)handler.slot))
		return 0;
	return book_mail_take(b, (uint32_t)handler.slot, mail, max);
}

void mailbox_deliver(const struct book_mail *mail, size_t n)
{
	for (size_t i = 0; i < n; i++)
		deliver(&mail[i]);
}

void mailbox_on_wake(evutil_socket_t fd, short what, void *arg)
{
	struct book_mail mail[MAILBOX_BATCH];
	size_t n;

	if (fd >= 0) {
		uint64_t count;
		ssize_t r = read(fd, &count, sizeof count); /* reset the eventfd */
		(void)r;
	}
	do {
		/* a wake-up whose mail an earlier one took costs no section */
		if (!book_mail_pending(handler.inst->book, (uint32_t)handler.slot))
			return;
		struct book *b = handler_book_lock();
		n = book_mail_take(b, (uint32_t)handler.slot, mail, MAILBOX_BATCH);
		handler_book_unlock();
		mailbox_deliver(mail, n);
	} while (n == MAILBOX_BATCH);
}
