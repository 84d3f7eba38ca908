/*
 * mailbox.h - reading this handler's mailbox in the want-book.
 *
 * Another process (a handler that granted a slot to one of our
 * connections, the master expiring an offer) leaves mail in the segment and
 * writes our eventfd; the eventfd only says "look".  We drain the mailbox
 * in batches, outside the lock act on each mail (send OFFER, ERROR
 * offer_expired, cancel a job, schedule a HELLO).  A wake-up takes the
 * lock only while book_mail_pending (read without the lock) shows mail:
 * one take often empties the mailbox for several eventfd writes.  A
 * section taken for other work (the book operations of one read,
 * broker.c) takes the mail too, mailbox_take, and delivers it right after
 * the unlock, before any other event of the handler runs.
 */
#ifndef ES_MAILBOX_H
#define ES_MAILBOX_H

#include <stddef.h>

#include <event2/event.h>

#include "book/book.h"

#define MAILBOX_BATCH 64

void mailbox_on_wake(evutil_socket_t fd, short what, void *arg);
/* With the book locked: takes up to max mails of this handler (none, and no
 * write to the segment, when book_mail_pending shows none).  What it
 * leaves is taken at the wake-up that is still to come for it. */
size_t mailbox_take(struct book *b, struct book_mail *mail, size_t max);
/* Without the lock: acts on each mail taken, in order. */
void mailbox_deliver(const struct book_mail *mail, size_t n);

#endif
