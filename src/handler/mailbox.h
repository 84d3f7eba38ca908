/*
 * mailbox.h - reading this handler's mailbox in the want-book.
 *
 * Another process (a handler that granted a slot to one of our
 * connections, the master expiring an offer) leaves mail in the segment and
 * writes our eventfd; the eventfd only says "look".  We drain the mailbox
 * in batches, outside the lock act on each mail (send OFFER, ERROR
 * offer_expired, cancel a job, schedule a HELLO).
 *
 * Every critical section of this handler takes its pending mail before it
 * unlocks (handler_book_unlock calls mailbox_take_locked), so mail that a
 * grant of ours queued for ourselves, or that another process queued while
 * we were busy, costs no section of its own (issue 18: sections per grant);
 * the wake-up then only delivers, and locks only if mail is still pending
 * (book_mail_pending, read without the lock).
 */
#ifndef ES_MAILBOX_H
#define ES_MAILBOX_H

#include <event2/event.h>

#include "book/book.h"

void mailbox_on_wake(evutil_socket_t fd, short what, void *arg);
/* With the book locked: takes this handler's pending mail (as much as the
 * queue of mail not yet delivered holds); returns the mail waiting to be
 * delivered by mailbox_on_wake. */
size_t mailbox_take_locked(struct book *b);

#endif
