/*
 * mailbox.h - reading this handler's mailbox in the want-book.
 *
 * Another process (a handler that granted a slot to one of our
 * connections, the master expiring an offer) leaves mail in the segment and
 * writes our eventfd; the eventfd only says "look".  We drain the mailbox
 * in batches, outside the lock act on each mail (send OFFER, ERROR
 * offer_expired, cancel a job, schedule a HELLO).  A wake-up takes the
 * lock only while book_mail_pending (read without the lock) shows mail:
 * one take often empties the mailbox for several eventfd writes.
 */
#ifndef ES_MAILBOX_H
#define ES_MAILBOX_H

#include <event2/event.h>

void mailbox_on_wake(evutil_socket_t fd, short what, void *arg);

#endif
