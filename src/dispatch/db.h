/*
 * db.h - execdispatch's one database connection (libpq): connecting with
 * back-off, statements as unnamed PQexecParams/PQsendQueryParams, and the
 * difference between "the database is away" (the connection is dropped
 * and retried later; the caller keeps what it wanted to write) and "this
 * statement failed" (logged; the connection stays).
 *
 * Two ways to run a statement on the one connection:
 *  - db_send: non-blocking, driven by libevent on PQsocket (PQflush,
 *    PQconsumeInput, PQisBusy); the callback gets the result from the event
 *    loop.  At most one such statement is outstanding (db_busy) from its
 *    send until its callback has run; the hot path of the dispatcher (the
 *    outcomes and claims) goes this way, so jobs are handed on while it is
 *    under way.
 *  - db_exec: blocking, for the tools (--migrate, execctl); the daemon
 *    sends every statement with db_send.  With a db_send statement on the
 *    wire it first waits for that one's result, keeps it, and delivers it
 *    from the loop afterwards (never from inside db_exec).
 * Once db_attach'ed to an event loop, connecting is non-blocking too
 * (PQconnectStartParams/PQconnectPoll, each host at most connect_timeout,
 * 5 s unless the connection string says otherwise, a host that failed
 * logged before the next is tried); before that (the tools) it blocks.  Nothing here keeps session state, so a
 * transaction-mode pooler may sit in between (one statement at a time, no
 * pipeline mode: see docs/dispatch.md).
 *
 * The connection's state is one enum db_state (phases.h: DB_AWAY,
 * DB_CONNECTING, DB_IDLE, DB_BUSY), changed by db_to in db.c alone,
 * checked against DB_TABLE and counted in moves (an illegal one is
 * logged and counted in moves.illegal, which execdispatch adds to
 * execdispatch_illegal_transitions_total).  conn is set in every state
 * but DB_AWAY (outside a call of db.c: abandon takes it from a busy
 * connection just before went_away).  What is not the connection's state stays a fact beside
 * it: fn (a db_send statement outstanding from its send until its
 * callback has run: it outlives DB_BUSY when its result, or the loss of
 * the connection, waits in kept for delivery), late (a statement given
 * up unsettled: the owner is told again once the connection has been up
 * for timeout_ms, whatever the state meanwhile), the abandoned
 * connections (each its own, watched apart), and the log's memory:
 * was_up, warned.
 */
#ifndef ES_DISPATCH_DB_H
#define ES_DISPATCH_DB_H

#include <stdint.h>

#include <event2/event.h>
#include <libpq-fe.h>

#include "dispatch/phases.h"

/* A connection being made without blocking (db_connect_begin/_step):
 * the hosts of a multi-host connection string one at a time, each within
 * connect_timeout (5 s unless the string sets it), so that a host that
 * accepts and never answers is left for the next one as PQconnectdb
 * leaves it. */
struct db_connect {
	const char *name; /* the owner's lane, for the log (struct db's name) */
	const char *conninfo;
	PGconn *conn; /* the attempt under way, or the last one that failed */
	int host;     /* which host of the string it tries */
	int nhosts;
	int64_t deadline_ms; /* monotonic: this host's connect_timeout */
};

/* Starts with the first host; db_connect_step says what follows.  name
 * (kept, not copied) goes into its log lines. */
int db_connect_begin(struct db_connect *c, const char *name, const char *conninfo);
/* Moves the attempt on after its socket was ready, or after its deadline
 * (timed_out).  Returns what to wait for (EV_READ or EV_WRITE, until
 * deadline_ms), 0 when connected (c->conn is the caller's now), or -1 when
 * every host failed (c->conn: the last failed attempt, for
 * PQerrorMessage, or NULL when out of memory; the caller PQfinishes it). */
int db_connect_step(struct db_connect *c, int timed_out);

/* (Re)arms ev on fd for what, with cb(arg), until deadline_ms (monotonic;
 * 0: no deadline). */
void db_watch(struct event *ev, evutil_socket_t fd, short what, event_callback_fn cb, void *arg,
	      int64_t deadline_ms);

/* The result of a db_send statement: res as db_exec's (the callback
 * PQclears it), or NULL with away as db_exec's. */
typedef void (*db_result_fn)(void *arg, PGresult *res, int away);

#define DB_ABANDONED 4 /* statements abandoned at their deadline, watched at once */

/* A connection whose statement was abandoned at its deadline: cancelled
 * at the server, watched until the statement answers or the connection
 * ends, or until the statement's deadline passes once more. */
struct db_abandoned {
	struct db *db;
	PGconn *conn; /* NULL: the place is free */
	struct event *ev;
	int64_t since_ms;
};

#define DB_NAME_MAX 16 /* a lane's name, with its '\0' */

struct db {
	/* which connection of its owner this is ("hot1", "beat", ...): every
	 * log line says it, "database (NAME): ..." */
	char name[DB_NAME_MAX];
	char *conninfo;
	enum db_state state;       /* changed by db_to alone (phases.h) */
	struct phase_counts moves; /* its transitions, the illegal ones too */
	PGconn *conn;              /* NULL in DB_AWAY */
	int64_t retry_at_ms;       /* monotonic: no attempt before this */
	int backoff_ms;            /* next wait after a failed attempt */
	int was_up;                /* for the "back" log line */
	int warned;                /* "cannot connect" said since the last success */
	uint64_t statements;       /* sent since the start */
	char last_error[256];      /* the last failure, one line */
	char sqlstate[6];          /* the last statement's SQLSTATE if refused, else "" */
	/* monotonic time since which every failure was PgBouncer's refusal
	 * while its server_login_retry runs (0: none since the last answer) */
	int64_t login_retry_ms;
	/* the event loop (db_attach), NULL before */
	struct event_base *base;
	struct event *io_ev;      /* PQsocket: connecting, or a db_send on the wire */
	struct event *deliver_ev; /* a result kept by db_exec's wait, to deliver */
	struct db_connect dc;
	void (*on_up)(void *arg); /* connected (again), from the loop */
	void *up_arg;
	/* the db_send statement outstanding: its callback is set from the
	 * send until it has run */
	db_result_fn fn;
	void *fn_arg;
	int timeout_ms; /* db_send: no answer within it, the connection is dropped */
	int64_t wire_deadline_ms;
	/* the connections of statements abandoned at their deadline (then
	 * on_up again once each has ended); one given up before it ended:
	 * late, and on_up once more when the connection has been up for
	 * timeout_ms (late_ev) */
	struct db_abandoned abandoned[DB_ABANDONED];
	struct event *late_ev;
	int late;
	int64_t up_since_ms;
	PGcancel *cancel; /* the connection's cancel key, taken when it came up */
	PGresult *kept;   /* the result, read, not delivered yet */
	int kept_away;
};

/* Sets up (no connection yet); name (cut to DB_NAME_MAX - 1) is the
 * lane's, for the log. */
int db_init(struct db *db, const char *name, const char *conninfo);
void db_close(struct db *db);
/* From now on connect without blocking, on base; on_up(arg) is called
 * from the loop whenever a connection comes up.  A db_send statement not
 * answered within timeout_ms (0: no limit) counts as the connection lost
 * (a database that stopped answering: SIGSTOP, a frozen host, a
 * half-open connection): it is left and made again with back-off, and
 * the statement's callback gets away.  The database may still commit that
 * statement later (a stopped server resumes and runs what it had read,
 * a statement waiting for a lock gets it): the statement is cancelled at
 * the server (a cancel request, as psql's ^C: it ends a lock wait, and
 * goes through PgBouncer too), the left connection is watched until it
 * answers or ends, and on_up is called once more then, so that the owner
 * looks again for what a lost statement may have done.  One that has not
 * ended timeout_ms after its cancel (the server does not answer at all),
 * or the oldest when DB_ABANDONED are watched, is closed, and on_up is
 * called once more when the connection has been up for timeout_ms.  A
 * connection lost by an error with a statement on the wire is treated
 * alike: the statement is cancelled at the server (through the cancel
 * key taken when the connection came up) and on_up is called once more
 * when the new connection has been up for timeout_ms (the backend may
 * still be running it: a pooler does not cancel a server's statement
 * when its client goes).  0, or -1 (no memory). */
int db_attach(struct db *db, struct event_base *base, int timeout_ms, void (*on_up)(void *),
	      void *arg);
/* 1 when connected.  Otherwise 0, and a (re)connection is attempted once
 * the back-off has passed: before db_attach it blocks and 1 is returned
 * when it succeeds; after, it is started and db_ready answers 0 until it
 * is up (on_up). */
int db_ready(struct db *db);
/* How long (ms) every failure has been PgBouncer's "server login has
 * been failing, try again later (server_login_retry)", with no statement
 * answered since; 0 when the last failure was another one or a statement
 * was answered since. */
int64_t db_login_retry_for(const struct db *db);
/* 1 when connected, as db_ready, but never starting an attempt. */
int db_up(const struct db *db);
/* The connection's state (phases.h). */
enum db_state db_state_of(const struct db *db);
/* A db_send statement is outstanding (no other may be sent). */
int db_busy(const struct db *db);
/* Sends one statement without waiting; fn(arg, ...) is called from the
 * loop with its result (also when the connection is lost meanwhile: NULL,
 * away 1).  The parameters are copied by libpq at once.  0 when sent; -1
 * when not (away, busy, or not attached): fn is not called. */
int db_send(struct db *db, const char *sql, int nparams, const char *const *params, db_result_fn fn,
	    void *arg);
/* Runs one statement, blocking.  Returns the result (PGRES_TUPLES_OK or
 * PGRES_COMMAND_OK; the caller PQclears it), or NULL: then *away is 1 if
 * the connection was lost (it is closed and retried with back-off) and 0
 * if the statement itself failed (last_error says why). */
PGresult *db_exec(struct db *db, const char *sql, int nparams, const char *const *params,
		  int *away);
/* The same for a text of several statements without parameters (the
 * migrations). */
PGresult *db_exec_script(struct db *db, const char *sql, int *away);
/* "{1,2,3}" from n int64 values into buf (size >= 21 * n + 3). */
void db_int_array(char *buf, const int64_t *v, int n);
/* An array literal of n strings ("{\"a\",NULL}": every element quoted,
 * " and \ escaped; NULL pointers are NULL), malloc'd; NULL when out of
 * memory. */
char *db_text_array(const char *const *v, int n);

#endif
