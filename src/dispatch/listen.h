/*
 * listen.h - notify: true.  A second database connection of its own that
 * LISTENs on "<schema>_submit" (migration 002's trigger) and calls back
 * when a submission was committed, so that the dispatcher claims at once
 * instead of at its next poll; it calls back once too each time LISTEN
 * is (again) in place, for what was submitted while nobody listened.
 * The poll stays the safety net: a lost
 * notification, or a connection that is down, costs at most pollMs.
 *
 * Connecting and LISTEN do not block the event loop (db_connect: each
 * host of the connection string within connect_timeout).
 *
 * This connection holds session state (LISTEN), so it must reach
 * PostgreSQL directly, not through a transaction-mode pooler.
 */
#ifndef ES_DISPATCH_LISTEN_H
#define ES_DISPATCH_LISTEN_H

struct event_base;
struct listener;

/* Creates the listener and starts connecting (a failure is logged and
 * retried by listener_keep).  NULL only when out of memory. */
struct listener *listener_new(struct event_base *base, const char *conninfo, const char *schema,
			      void (*on_submit)(void *arg), void *arg);
/* Starts connecting again when the connection is down (call it now and
 * then). */
void listener_keep(struct listener *l);
void listener_free(struct listener *l);

#endif
