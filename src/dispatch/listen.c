/*
 * listen.c - see listen.h.  The socket is watched by the event loop;
 * PQconsumeInput reads what arrived and every pending notification is
 * taken (several submissions between two wake-ups make one callback).
 */
#include "autoconfig.h"
#include "dispatch/listen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <libpq-fe.h>

#include "common/log.h"

struct listener {
	struct event_base *base;
	char *conninfo;
	char channel[80];
	PGconn *conn;
	struct event *ev;
	void (*on_submit)(void *arg);
	void *arg;
	int said_down;
};

static void drop(struct listener *l, const char *why)
{
	if (!l->said_down++)
		log_warn("notify: %s; polling only until it is back", why);
	if (l->ev)
		event_free(l->ev);
	l->ev = NULL;
	if (l->conn)
		PQfinish(l->conn);
	l->conn = NULL;
}

static void readable(evutil_socket_t fd, short what, void *arg)
{
	struct listener *l = arg;
	PGnotify *n;
	int got = 0;

	(void)fd;
	(void)what;
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

void listener_keep(struct listener *l)
{
	char sql[128];
	PGresult *r;

	/* as db.c's connection: without connect_timeout a server that
	 * accepts and never answers would hold the event loop for ever */
	const char *keys[] = { "connect_timeout", "keepalives_idle", "dbname", NULL };
	const char *vals[] = { "5", "30", l->conninfo, NULL };

	if (l->conn)
		return;
	l->conn = PQconnectdbParams(keys, vals, 1);
	if (PQstatus(l->conn) != CONNECTION_OK) {
		drop(l, "cannot connect");
		return;
	}
	snprintf(sql, sizeof sql, "LISTEN \"%s\"", l->channel);
	r = PQexec(l->conn, sql);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		PQclear(r);
		drop(l, "LISTEN failed (a transaction-mode pooler?)");
		return;
	}
	PQclear(r);
	PQsetnonblocking(l->conn, 1);
	l->ev = event_new(l->base, PQsocket(l->conn), EV_READ | EV_PERSIST, readable, l);
	if (!l->ev || event_add(l->ev, NULL) < 0) {
		drop(l, "out of memory");
		return;
	}
	if (l->said_down)
		log_info("notify: listening on %s", l->channel);
	l->said_down = 0;
}

struct listener *listener_new(struct event_base *base, const char *conninfo, const char *schema,
			      void (*on_submit)(void *arg), void *arg)
{
	struct listener *l = calloc(1, sizeof *l);

	if (!l || !(l->conninfo = strdup(conninfo))) {
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
	if (l->ev)
		event_free(l->ev);
	if (l->conn)
		PQfinish(l->conn);
	free(l->conninfo);
	free(l);
}
