/*
 * handler.h - one connection handler process: its event loop, its
 * listener, its connections and its running jobs.  Entered right after
 * fork and never returns.
 *
 * A handler is single-threaded; everything it owns hangs off the one
 * `handler` object below (one per process, like nginx's cycle).  The only
 * state it shares is the want-book, always touched between
 * handler_book_lock() and handler_book_unlock(), but for its mailbox's
 * look and its asleep mark (book.h), read and written without the lock.
 */
#ifndef ES_HANDLER_H
#define ES_HANDLER_H

#include <event2/event.h>
#include <event2/listener.h>

#include "handler/instance.h"

struct broker_conn;
struct ws_pinger;

struct handler {
	struct instance *inst;
	int slot;
	char name[32]; /* "handler N" */
	struct event_base *base;
	struct evconnlistener *listener;
	struct event *wake_ev;            /* our eventfd: another process mailed us */
	struct event *mail_ev;            /* activated when we mailed ourselves */
	struct event *hello_ev;           /* coalesced HELLO re-send */
	struct event *drain_ev;           /* drain deadline */
	struct event *sig_ev;             /* signalfd: TERM, INT, HUP, CHLD */
	struct ws_pinger *pinger;         /* the one ping timer of all our websockets */
	struct broker_conn **by_book_idx; /* local broker conns by book conn index */
	unsigned nbroker;                 /* live broker connections here */
	unsigned nhttp;                   /* connections still in their HTTP phase */
	int draining;
};

extern struct handler handler;

/* Runs handler `slot` of the instance; exits the process. */
void handler_main(struct instance *inst, int slot) __attribute__((noreturn));

/* Book access from a handler: lock (logging a repair), and unlock (waking
 * every handler that got mail, ourselves included). */
struct book *handler_book_lock(void);
void handler_book_unlock(void);

struct http_head;
/* Whether request h may read or act without a token's say: the daemon
 * has an authToken (which then decides), or serves TLS (a page whose DNS
 * name was rebound to this address fails the certificate's name check
 * before it sends a request), or Host names an address or localhost
 * (docs/security.md, "DNS rebinding"). */
int handler_host_trusted(const struct http_head *h);

/* Exits the process once draining and nothing is left to finish. */
void handler_maybe_exit(void);

/* EXECSERVER_FAULT (the test suite's fault switch, execserver(8)): whether
 * the value arms every generation of handlers (book:random[:n]) rather
 * than the first only. */
int fault_spec_every_generation(const char *env);

#endif
