/*
 * chores.c - see chores.h.  A FIFO of chores; the head goes on the wire
 * once the connection has nothing there (pump, run from the loop through
 * pump_ev whenever a chore is queued or an answer came), and leaves the
 * queue when its callback has run.  Invariant: at most one chore on the
 * wire (c->wire), and only while db_busy.
 */
#include "autoconfig.h"
#include "dispatch/chores.h"

#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

struct chore {
	struct chore *next;
	const char *sql;
	int nparams;
	char **params;
	void *note;
	chore_fn fn;
	void *arg;
};

#define CONNECTING_CHECK_MS 50 /* a connection attempt under way: looked at again */

struct chores {
	struct db db;
	struct event *pump_ev;
	struct chore *head, *tail;
	struct chore *wire; /* the head, sent, its answer not delivered */
};

static void chore_free(struct chore *ch)
{
	for (int i = 0; i < ch->nparams; i++)
		free(ch->params[i]);
	free(ch->params);
	free(ch->note);
	free(ch);
}

static struct chore *pop(struct chores *c)
{
	struct chore *ch = c->head;

	c->head = ch->next;
	if (!c->head)
		c->tail = NULL;
	return ch;
}

static void answered(void *arg, PGresult *res, int away)
{
	struct chores *c = arg;
	struct chore *ch = c->wire;

	c->wire = NULL;
	pop(c);
	if (ch->fn)
		ch->fn(ch->arg, res, away, ch->note);
	PQclear(res);
	chore_free(ch);
	if (c->head)
		event_active(c->pump_ev, EV_TIMEOUT, 0);
}

static void pump_cb(evutil_socket_t fd, short what, void *arg)
{
	struct chores *c = arg;
	struct chore *ch = c->head;

	(void)fd;
	(void)what;
	if (!ch || c->wire)
		return;
	if (!db_ready(&c->db) && db_state_of(&c->db) == DB_CONNECTING) {
		/* an attempt under way: the chores wait for it (on_up, or this
		 * check once it has failed) */
		struct timeval tv = { 0, CONNECTING_CHECK_MS * 1000 };
		evtimer_add(c->pump_ev, &tv);
		return;
	}
	if (db_send(&c->db, ch->sql, ch->nparams, (const char *const *)ch->params, answered, c) ==
	    0) {
		c->wire = ch;
		return;
	}
	/* away (an attempt is under way now), or refused at the send */
	pop(c);
	if (ch->fn)
		ch->fn(ch->arg, NULL, !db_up(&c->db), ch->note);
	chore_free(ch);
	if (c->head)
		event_active(c->pump_ev, EV_TIMEOUT, 0);
}

struct chores *chores_new(struct event_base *base, const char *name, const char *conninfo,
			  int timeout_ms, void (*on_up)(void *), void *arg)
{
	struct chores *c = calloc(1, sizeof *c);

	if (!c)
		return NULL;
	if (db_init(&c->db, name, conninfo) < 0 ||
	    db_attach(&c->db, base, timeout_ms, on_up, arg) < 0 ||
	    !(c->pump_ev = event_new(base, -1, 0, pump_cb, c))) {
		chores_free(c);
		return NULL;
	}
	return c;
}

void chores_free(struct chores *c)
{
	if (!c)
		return;
	while (c->head)
		chore_free(pop(c));
	if (c->pump_ev)
		event_free(c->pump_ev);
	db_close(&c->db);
	free(c);
}

int chores_add(struct chores *c, const char *sql, int nparams, const char *const *params,
	       const void *note, size_t note_len, chore_fn fn, void *arg)
{
	struct chore *ch = calloc(1, sizeof *ch);

	if (!ch)
		return -1;
	ch->sql = sql;
	ch->fn = fn;
	ch->arg = arg;
	ch->params = calloc((size_t)nparams + 1, sizeof *ch->params);
	ch->note = note_len ? malloc(note_len) : NULL;
	if (!ch->params || (note_len && !ch->note)) {
		chore_free(ch);
		return -1;
	}
	if (note_len)
		memcpy(ch->note, note, note_len);
	for (; ch->nparams < nparams; ch->nparams++)
		if (params[ch->nparams] &&
		    !(ch->params[ch->nparams] = strdup(params[ch->nparams]))) {
			chore_free(ch);
			return -1;
		}
	if (c->tail)
		c->tail->next = ch;
	else
		c->head = ch;
	c->tail = ch;
	if (!evtimer_pending(c->pump_ev, NULL))
		event_active(c->pump_ev, EV_TIMEOUT, 0);
	return 0;
}

struct db *chores_db(struct chores *c)
{
	return &c->db;
}
