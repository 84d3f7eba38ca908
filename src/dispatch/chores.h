/*
 * chores.h - the dispatcher's statements off the hot path: heartbeat and
 * rescue, registering, the cancel poll, the start of runs, position
 * writes, the local services' claims, the sweep of lost claims, outcomes
 * written apart (a refused batch, the stop), the janitor and the leave.
 * They go on a database connection of their own, one statement at a time
 * (no pipeline: a transaction-mode pooler), in the order they were asked
 * for, sent and read without blocking the event loop (db_send), each
 * answered within the connection's statement deadline or the connection
 * counts as lost.  So a database that is slow or stops answering delays
 * these statements only: the hot path's connections, the execservers'
 * traffic and /metrics go on.
 *
 * A chore is a statement, its parameters (copied), a callback and a note
 * (bytes copied with it and handed back: what the caller asked about).
 * The callback runs from the loop, never inside chores_add: with the
 * result (PQclear'ed after the callback), or NULL with away 1 (the
 * connection is down or was lost meanwhile) or 0 (the statement failed:
 * chores_db's last_error).  A chore reaching the head while the
 * connection is being made waits for it; while it is down (an attempt
 * failed, the next one waits for its back-off) the chore fails at once
 * (away): callers retry on their own schedule, nothing piles up.
 */
#ifndef ES_DISPATCH_CHORES_H
#define ES_DISPATCH_CHORES_H

#include <stddef.h>

#include "dispatch/db.h"

struct chores;

typedef void (*chore_fn)(void *arg, PGresult *res, int away, const void *note);

/* The queue and its connection (not connected yet, named name in the
 * log: db_init), on base; on_up(arg) when the connection comes up.  NULL
 * when out of memory. */
struct chores *chores_new(struct event_base *base, const char *name, const char *conninfo,
			  int timeout_ms, void (*on_up)(void *), void *arg);
/* Drops what is queued (callbacks not called) and closes the connection. */
void chores_free(struct chores *c);
/* Queues a statement (sql must outlive it; params and note are copied).
 * fn may be NULL: nobody waits for the answer.  0, or -1 (no memory: not
 * queued, fn not called). */
int chores_add(struct chores *c, const char *sql, int nparams, const char *const *params,
	       const void *note, size_t note_len, chore_fn fn, void *arg);
/* The connection (statements counted, last_error, up or not). */
struct db *chores_db(struct chores *c);

#endif
