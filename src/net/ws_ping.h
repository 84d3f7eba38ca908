/*
 * ws_ping.h - the ping sweep shared by the websocket sessions of one event
 * loop (ws_ping.c; the public side, ws_pinger_new and ws_pinger_release,
 * is declared in ws.h).  A session embeds a ws_ping_entry; the pinger
 * calls the entry's tick once per period from its one timer.
 * Invariants: an entry is in at most one queue; ws_ping_stop takes it out
 * (harmless when it is not in), and must be called before the entry's
 * memory goes; a tick may stop its entry and free the session.
 */
#ifndef ES_WS_PING_H
#define ES_WS_PING_H

#include <stdint.h>

#include "net/ws.h"

struct ws_ping_queue;

struct ws_ping_entry {
	struct ws_pinger *pinger; /* the pinger it holds a reference on */
	struct ws_ping_queue *q;  /* the queue it is in; NULL: none */
	struct ws_ping_entry *prev, *next;
	uint64_t due_ms;    /* the next tick */
	unsigned period_ms; /* between ticks; 0: no ticks */
	void (*tick)(struct ws_ping_entry *e);
};

/* Sets e's period and tick, and queues e (e->pinger set) for its first
 * tick one period from now; a period of 0 queues nothing. */
void ws_ping_start(struct ws_ping_entry *e, unsigned period_ms,
		   void (*tick)(struct ws_ping_entry *e));
/* Takes e out of its queue: no more ticks. */
void ws_ping_stop(struct ws_ping_entry *e);
/* One more reference on p (dropped by ws_pinger_release). */
void ws_pinger_hold(struct ws_pinger *p);

#endif
