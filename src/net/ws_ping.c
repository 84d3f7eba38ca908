/*
 * ws_ping.c - the ping sweep of websocket sessions (ws_ping.h): one timer
 * for many sessions.  Owns the pinger (its timer and queues); a session
 * owns its ws_ping_entry, which sits in at most one queue.
 *
 * One timer for many sessions: the pinger keeps a queue of sessions per
 * tick period (sessions made under an older configuration keep theirs),
 * each ordered by the time of the next tick (due_ms) simply by appending:
 * a session is queued at "now + its period", and now only grows.  The
 * timer fires for the earliest head.  A sweep ticks every session whose
 * tick is due within its slack (an eighth of its period, at most a second)
 * and queues it again one period after the sweep, so the sessions of one
 * sweep stay in one batch and batches closer than the slack merge: the
 * timer fires at most about period / slack + 1 times per period and queue
 * however many sessions there are.  A handler with 10,000 idle
 * connections wakes up a few times per ping interval, not 10,000 times,
 * sends the pings in bursts and reads the pongs with few epoll_wait calls.
 * Between two pings of a session: at least its period minus the slack.
 * More distinct periods than queues (reload after reload) share the last
 * queue, where a session then walks back from the tail to its place.
 */
#include "autoconfig.h"
#include "net/ws_ping.h"

#include <stdlib.h>
#include <sys/time.h>

#include <event2/event.h>

#include "common/clock.h"

#define PINGER_QUEUES 4

struct ws_ping_queue {
	unsigned period_ms; /* 0: unused */
	struct ws_ping_entry *head, *tail;
};

struct ws_pinger {
	struct event *ev;
	struct ws_ping_queue q[PINGER_QUEUES];
	unsigned refs;
	uint64_t sweeps;
};

static unsigned tick_slack(const struct ws_ping_entry *e)
{
	unsigned slack = e->period_ms / 8;

	return slack < 1000 ? slack : 1000;
}

/* The entry whose tick comes first, or NULL. */
static struct ws_ping_entry *pinger_first(const struct ws_pinger *p)
{
	struct ws_ping_entry *first = NULL;

	for (int i = 0; i < PINGER_QUEUES; i++)
		if (p->q[i].head && (!first || p->q[i].head->due_ms < first->due_ms))
			first = p->q[i].head;
	return first;
}

/* Arms the timer for the first tick (or disarms it). */
static void pinger_arm(struct ws_pinger *p)
{
	struct ws_ping_entry *first = pinger_first(p);

	if (!first) {
		evtimer_del(p->ev);
		return;
	}
	uint64_t now = clock_mono_ms(), due = first->due_ms;
	uint64_t in = due > now ? due - now : 0;
	struct timeval tv = { .tv_sec = (time_t)(in / 1000),
			      .tv_usec = (suseconds_t)(in % 1000) * 1000 };

	evtimer_add(p->ev, &tv);
}

/* The queue of a period: the one that has it, else a free one, else the
 * last. */
static struct ws_ping_queue *queue_of(struct ws_pinger *p, unsigned period_ms)
{
	for (int i = 0; i < PINGER_QUEUES; i++)
		if (p->q[i].period_ms == period_ms)
			return &p->q[i];
	for (int i = 0; i < PINGER_QUEUES; i++)
		if (!p->q[i].head) {
			p->q[i].period_ms = period_ms;
			return &p->q[i];
		}
	return &p->q[PINGER_QUEUES - 1];
}

/* Puts e (due_ms set) at its place in its queue, from the tail. */
static void enqueue(struct ws_ping_entry *e)
{
	struct ws_pinger *p = e->pinger;
	struct ws_ping_queue *q = queue_of(p, e->period_ms);
	struct ws_ping_entry *after = q->tail, *first = pinger_first(p);

	e->q = q;

	while (after && after->due_ms > e->due_ms)
		after = after->prev;
	e->prev = after;
	e->next = after ? after->next : q->head;
	if (e->next)
		e->next->prev = e;
	else
		q->tail = e;
	if (after)
		after->next = e;
	else
		q->head = e;
	if (!first || e->due_ms < first->due_ms)
		pinger_arm(p);
}

void ws_ping_stop(struct ws_ping_entry *e)
{
	struct ws_ping_queue *q = e->q;

	if (!q)
		return;
	if (e->prev)
		e->prev->next = e->next;
	else
		q->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		q->tail = e->prev;
	e->prev = e->next = NULL;
	e->q = NULL;
}

void ws_ping_start(struct ws_ping_entry *e, unsigned period_ms,
		   void (*tick)(struct ws_ping_entry *))
{
	e->period_ms = period_ms;
	e->tick = tick;
	if (period_ms) {
		e->due_ms = clock_mono_ms() + period_ms;
		enqueue(e);
	}
}

static void sweep_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ws_pinger *p = arg;
	uint64_t now = clock_mono_ms();
	struct ws_ping_entry *e;

	p->refs++; /* a tick may free the last session, and the owner
			 * may have let go of p already */
	p->sweeps++;
	while ((e = pinger_first(p)) && e->due_ms <= now + tick_slack(e)) {
		/* one period from this sweep, not from the due time: the
		 * sessions of one sweep stay together, and a stalled loop
		 * pings once, not once per missed period */
		ws_ping_stop(e);
		e->due_ms = now + e->period_ms;
		enqueue(e);
		e->tick(e); /* may take e out again, or free its session */
	}
	pinger_arm(p);
	ws_pinger_release(p);
}

struct ws_pinger *ws_pinger_new(struct event_base *base)
{
	struct ws_pinger *p = calloc(1, sizeof *p);

	if (!p)
		return NULL;
	p->ev = evtimer_new(base, sweep_cb, p);
	if (!p->ev) {
		free(p);
		return NULL;
	}
	p->refs = 1;
	return p;
}

void ws_pinger_hold(struct ws_pinger *p)
{
	p->refs++;
}

void ws_pinger_release(struct ws_pinger *p)
{
	if (p && --p->refs == 0) {
		event_free(p->ev);
		free(p);
	}
}

uint64_t ws_pinger_sweeps(const struct ws_pinger *p)
{
	return p->sweeps;
}
