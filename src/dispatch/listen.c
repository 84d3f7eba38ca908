/*
 * listen.c - see listen.h.  The connection goes through three states,
 * each driven by the event loop on its socket, none blocking: connecting
 * (db_connect, each host within connect_timeout), LISTEN sent (its answer
 * awaited within LISTEN_WAIT_MS), listening (PQconsumeInput reads what
 * arrived and every pending notification is taken: several submissions
 * between two wake-ups make one callback).  Down, it waits for the next
 * listener_keep.
 */
#include "autoconfig.h"
#include "dispatch/listen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <libpq-fe.h>

#include "common/clock.h"
#include "common/log.h"
#include "dispatch/db.h"

#define LISTEN_WAIT_MS 5000 /* for the answer to LISTEN */

enum l_state {
	L_DOWN,
	L_CONNECTING,
	L_LISTEN_SENT,
	L_LISTENING
};

struct listener {
	struct event_base *base;
	char *conninfo;
	char channel[80];
	enum l_state state;
	struct db_connect dc;
	PGconn *conn;
	struct event *ev; /* the socket, in each state but L_DOWN */
	int64_t deadline_ms;
	int listen_ok; /* LISTEN answered COMMAND_OK */
	void (*on_submit)(void *arg);
	void *arg;
	int said_down;
};

static void io_cb(evutil_socket_t fd, short what, void *arg);

static void drop(struct listener *l, const char *why)
{
	if (!l->said_down++)
		log_warn("notify: %s; polling only until it is back", why);
	event_del(l->ev);
	if (l->conn)
		PQfinish(l->conn);
	l->conn = NULL;
	l->state = L_DOWN;
}

/* Waits for what on the socket, until deadline_ms (monotonic, 0: none). */
static void watch(struct listener *l, short what, int64_t deadline_ms)
{
	db_watch(l->ev, PQsocket(l->conn), what, io_cb, l, deadline_ms);
}

/* The connection is up: LISTEN goes out, its answer comes to io_cb. */
static void send_listen(struct listener *l)
{
	char sql[128];

	snprintf(sql, sizeof sql, "LISTEN \"%s\"", l->channel);
	PQsetnonblocking(l->conn, 1);
	if (!PQsendQuery(l->conn, sql)) {
		drop(l, PQerrorMessage(l->conn));
		return;
	}
	l->state = L_LISTEN_SENT;
	l->listen_ok = 0;
	l->deadline_ms = (int64_t)clock_mono_ms() + LISTEN_WAIT_MS;
	watch(l, EV_READ | EV_WRITE, l->deadline_ms);
}

static void connect_next(struct listener *l, int next)
{
	l->conn = l->dc.conn;
	if (next > 0)
		watch(l, (short)next, l->dc.deadline_ms);
	else if (next == 0)
		send_listen(l);
	else
		drop(l, l->conn && PQstatus(l->conn) != CONNECTION_BAD
				? "cannot connect: timeout expired while connecting"
				: "cannot connect");
}

/* LISTEN's answer, read as it arrives. */
static void listen_answer(struct listener *l, short what)
{
	int unsent = PQflush(l->conn);

	if (unsent < 0 || !PQconsumeInput(l->conn)) {
		drop(l, PQerrorMessage(l->conn));
		return;
	}
	while (!PQisBusy(l->conn)) {
		PGresult *r = PQgetResult(l->conn);
		if (r) {
			l->listen_ok = PQresultStatus(r) == PGRES_COMMAND_OK;
			PQclear(r);
			continue;
		}
		if (!l->listen_ok) {
			drop(l, "LISTEN failed (a transaction-mode pooler?)");
			return;
		}
		l->state = L_LISTENING;
		watch(l, EV_READ | EV_PERSIST, 0);
		if (l->said_down)
			log_info("notify: listening on %s", l->channel);
		l->said_down = 0;
		/* the submissions committed while nobody listened sent no
		 * notification to us: claim once now, not at the next poll */
		l->on_submit(l->arg);
		return;
	}
	if ((what & EV_TIMEOUT) && (int64_t)clock_mono_ms() >= l->deadline_ms)
		drop(l, "no answer to LISTEN");
	else
		watch(l, (short)(EV_READ | (unsent ? EV_WRITE : 0)), l->deadline_ms);
}

static void readable(struct listener *l)
{
	PGnotify *n;
	int got = 0;

	if (!PQconsumeInput(l->conn)) {
		drop(l, PQerrorMessage(l->conn));
		return;
	}
	while ((n = PQnotifies(l->conn))) {
		got = 1;
		PQfreemem(n);
	}
	if (got)
		l->on_submit(l->arg);
}

static void io_cb(evutil_socket_t fd, short what, void *arg)
{
	struct listener *l = arg;

	(void)fd;
	switch (l->state) {
	case L_CONNECTING: connect_next(l, db_connect_step(&l->dc, what & EV_TIMEOUT)); break;
	case L_LISTEN_SENT: listen_answer(l, what); break;
	case L_LISTENING: readable(l); break;
	case L_DOWN: break;
	}
}

void listener_keep(struct listener *l)
{
	if (l->state != L_DOWN)
		return;
	l->state = L_CONNECTING;
	connect_next(l, db_connect_begin(&l->dc, "listen", l->conninfo));
}

struct listener *listener_new(struct event_base *base, const char *conninfo, const char *schema,
			      void (*on_submit)(void *arg), void *arg)
{
	struct listener *l = calloc(1, sizeof *l);

	if (!l || !(l->conninfo = strdup(conninfo)) ||
	    !(l->ev = event_new(base, -1, 0, io_cb, l))) {
		if (l)
			free(l->conninfo);
		free(l);
		return NULL;
	}
	l->base = base;
	snprintf(l->channel, sizeof l->channel, "%s_submit", schema);
	l->on_submit = on_submit;
	l->arg = arg;
	l->said_down = 1; /* the first success is logged */
	listener_keep(l);
	return l;
}

void listener_free(struct listener *l)
{
	if (!l)
		return;
	event_free(l->ev);
	if (l->conn)
		PQfinish(l->conn);
	free(l->conninfo);
	free(l);
}
