/*
 * db.c - see db.h.  Back-off after a failed connection: 250 ms doubling to
 * 8 s, reset by a success.  The log says once that the database went away
 * and once that it is back, not at every attempt in between.  A db_send
 * statement moves on in progress(): flush what is unsent, read what
 * arrived, collect the results once libpq is no longer busy; the event
 * loop (io_cb) or db_exec's wait (poll) call it whenever the socket is
 * ready.  Its result is always handed over through deliver_ev, so a
 * callback never runs inside another db call.
 */
#include "autoconfig.h"
#include "dispatch/db.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "dispatch/timing.h"

#define CONNECT_TIMEOUT_MS 5000 /* unless the connection string sets connect_timeout */
#define CANCEL_WAIT_SEC 10      /* a cancel request's child waits this long at most */
#define CHILD_FDS 1024          /* without close_range: the descriptors the child closes */

/* The connection moves to state to: checked against DB_TABLE and counted
 * (phases.h); an illegal move is logged and counted, and made anyway. */
static void db_to(struct db *db, enum db_state to)
{
	int at = (int)db->state;

	phase_move_named(&db_states, &db->moves, &at, (int)to, db->name);
	db->state = (enum db_state)at;
}

static void one_line(char *dst, size_t len, const char *msg)
{
	snprintf(dst, len, "%s", msg ? msg : "");
	for (char *p = dst; *p; p++)
		if (*p == '\n' || *p == '\r' || *p == '\t')
			*p = (p[1] ? ' ' : '\0');
}

int db_init(struct db *db, const char *name, const char *conninfo)
{
	memset(db, 0, sizeof *db);
	snprintf(db->name, sizeof db->name, "%s", name);
	db->backoff_ms = BACKOFF_MIN_MS;
	db->conninfo = strdup(conninfo);
	return db->conninfo ? 0 : -1;
}

void db_close(struct db *db)
{
	if (db->io_ev)
		event_free(db->io_ev);
	if (db->deliver_ev)
		event_free(db->deliver_ev);
	for (int i = 0; i < DB_ABANDONED; i++) {
		if (db->abandoned[i].ev)
			event_free(db->abandoned[i].ev);
		if (db->abandoned[i].conn)
			PQfinish(db->abandoned[i].conn);
		db->abandoned[i].ev = NULL;
		db->abandoned[i].conn = NULL;
	}
	if (db->late_ev)
		event_free(db->late_ev);
	db->io_ev = db->deliver_ev = db->late_ev = NULL;
	PQfreeCancel(db->cancel);
	db->cancel = NULL;
	PQclear(db->kept);
	db->kept = NULL;
	db->fn = NULL;
	if (db->conn)
		PQfinish(db->conn);
	db->conn = NULL;
	if (db->state != DB_AWAY)
		db_to(db, DB_AWAY);
	free(db->conninfo);
	db->conninfo = NULL;
}

static void cancel_on_server(const struct db *db, PGcancel *c);
static void look_again_later(struct db *db);

static void went_away(struct db *db, const char *why)
{
	int busy = db->state == DB_BUSY;

	one_line(db->last_error, sizeof db->last_error, why);
	/* PgBouncer refusing while its server_login_retry runs: from when */
	if (!strstr(db->last_error, "(server_login_retry)"))
		db->login_retry_ms = 0;
	else if (!db->login_retry_ms)
		db->login_retry_ms = (int64_t)clock_mono_ms();
	if (busy && db->conn) {
		/* lost by an error, not abandoned at its deadline (abandon took
		 * the connection): the backend may go on with the statement
		 * (a pooler does not cancel it when its client goes, a backend
		 * waiting for a lock does not notice), so it is cancelled, and
		 * the owner looks again later for what it may have committed */
		cancel_on_server(db, db->cancel);
		log_warn("database (%s): a statement was on the wire when the connection was "
			 "lost (%s); cancelled at the server; looking again for what it may "
			 "commit once the database has been up for %d ms",
			 db->name, db->last_error, db->timeout_ms);
		look_again_later(db);
	}
	PQfreeCancel(db->cancel);
	db->cancel = NULL;
	if (db->conn)
		PQfinish(db->conn);
	db->conn = NULL;
	db_to(db, DB_AWAY);
	if (db->io_ev)
		event_del(db->io_ev);
	if (busy) {
		/* the statement on the wire fails with the connection */
		PQclear(db->kept);
		db->kept = NULL;
		db->kept_away = 1;
		event_active(db->deliver_ev, EV_TIMEOUT, 0);
	}
	if (db->was_up)
		log_error("database (%s): connection lost (%s); retrying with back-off", db->name,
			  db->last_error);
	db->was_up = 0;
	db->retry_at_ms = (int64_t)clock_mono_ms() + db->backoff_ms;
	db->backoff_ms = backoff_next(db->backoff_ms);
}

/* NOTICEs ("already exists, skipping") are not news. */
static void quiet_notice(void *arg, const char *message)
{
	const struct db *db = arg;

	log_debug("database (%s): %s", db->name, message);
}

static void connected(struct db *db)
{
	db_to(db, DB_IDLE);
	PQsetNoticeProcessor(db->conn, quiet_notice, db);
	PQsetnonblocking(db->conn, 1);
	/* taken now: libpq gives none once the connection broke */
	PQfreeCancel(db->cancel);
	db->cancel = PQgetCancel(db->conn);
	if (db->warned || db->statements)
		log_info("database (%s): connected", db->name);
	db->warned = 0;
	db->was_up = 1;
	db->up_since_ms = (int64_t)clock_mono_ms();
	if (db->on_up && db->base)
		db->on_up(db->up_arg);
}

static void failed_attempt(struct db *db)
{
	went_away(db, db->conn ? PQerrorMessage(db->conn) : "out of memory");
	if (!db->warned++)
		log_error("database (%s): cannot connect: %s", db->name, db->last_error);
}

static void timed_out(struct db *db)
{
	went_away(db, "timeout expired while connecting");
	if (!db->warned++)
		log_error("database (%s): cannot connect: %s", db->name, db->last_error);
}

/* connect_timeout of the connection string in ms, else CONNECT_TIMEOUT_MS
 * (PQconnectPoll leaves that timeout to its caller). */
static int64_t connect_timeout_ms(PGconn *conn)
{
	PQconninfoOption *opts = PQconninfo(conn);
	int64_t ms = CONNECT_TIMEOUT_MS;

	for (PQconninfoOption *o = opts; o && o->keyword; o++)
		if (strcmp(o->keyword, "connect_timeout") == 0 && o->val && atoi(o->val) > 0)
			ms = atoi(o->val) * 1000LL;
	PQconninfoFree(opts);
	return ms;
}

/* The i-th element of a comma-separated list into out (a list of one
 * element: that one for every i); "" when there is none. */
static void nth(const char *list, int i, char *out, size_t len)
{
	const char *p = list ? list : "", *comma;

	if (!strchr(p, ','))
		i = 0;
	for (; i > 0 && (comma = strchr(p, ',')); i--)
		p = comma + 1;
	comma = strchr(p, ',');
	snprintf(out, len, "%.*s", i > 0 ? 0 : (int)(comma ? (size_t)(comma - p) : strlen(p)), p);
}

static int count_of(const char *list)
{
	int n = list && *list ? 1 : 0;

	for (const char *p = list; p && (p = strchr(p, ',')); p++)
		n++;
	return n;
}

/* One host's attempt; what to wait for, as db_connect_step. */
static int connect_host(struct db_connect *c)
{
	PQconninfoOption *opts = PQconninfoParse(c->conninfo, NULL);
	const char *hosts = NULL, *addrs = NULL, *ports = NULL;
	char host[256], addr[256], port[64];

	for (PQconninfoOption *o = opts; o && o->keyword; o++) {
		if (strcmp(o->keyword, "host") == 0)
			hosts = o->val;
		else if (strcmp(o->keyword, "hostaddr") == 0)
			addrs = o->val;
		else if (strcmp(o->keyword, "port") == 0)
			ports = o->val;
	}
	c->nhosts = count_of(hosts) > count_of(addrs) ? count_of(hosts) : count_of(addrs);
	nth(hosts, c->host, host, sizeof host);
	nth(addrs, c->host, addr, sizeof addr);
	nth(ports, c->host, port, sizeof port);
	PQconninfoFree(opts);
	/* connect_timeout first: a value in the connection string wins; the
	 * host last: this attempt's only ("" leaves the string's) */
	const char *keys[] = { "connect_timeout",
			       "keepalives_idle",
			       "dbname",
			       "fallback_application_name",
			       "host",
			       "hostaddr",
			       "port",
			       NULL };
	const char *vals[] = { "5", "30", c->conninfo, "execdispatch", host, addr, port, NULL };
	c->conn = PQconnectStartParams(keys, vals, 1);
	if (!c->conn || PQstatus(c->conn) == CONNECTION_BAD)
		return -1;
	c->deadline_ms = (int64_t)clock_mono_ms() + connect_timeout_ms(c->conn);
	return EV_WRITE; /* as if PQconnectPoll had answered PGRES_POLLING_WRITING */
}

/* This host failed (timed_out: no answer within its connect_timeout):
 * said once per attempt, then the next one, if any. */
static int next_host(struct db_connect *c, int timed_out)
{
	if (c->host + 1 >= c->nhosts)
		return -1;
	if (c->conn) {
		char why[256];
		one_line(why, sizeof why,
			 timed_out ? "no answer within connect_timeout" : PQerrorMessage(c->conn));
		log_warn("database (%s): host %s port %s: %s; trying the next host", c->name,
			 PQhost(c->conn), PQport(c->conn), why);
	}
	PQfinish(c->conn);
	c->conn = NULL;
	c->host++;
	return connect_host(c) < 0 ? next_host(c, 0) : EV_WRITE;
}

int db_connect_begin(struct db_connect *c, const char *name, const char *conninfo)
{
	memset(c, 0, sizeof *c);
	c->name = name;
	c->conninfo = conninfo;
	return connect_host(c) < 0 ? next_host(c, 0) : EV_WRITE;
}

int db_connect_step(struct db_connect *c, int timed_out)
{
	if (timed_out && (int64_t)clock_mono_ms() >= c->deadline_ms)
		return next_host(c, 1);
	switch (PQconnectPoll(c->conn)) {
	case PGRES_POLLING_READING: return EV_READ;
	case PGRES_POLLING_WRITING: return EV_WRITE;
	case PGRES_POLLING_OK: return 0;
	default: return next_host(c, 0);
	}
}

static void io_cb(evutil_socket_t fd, short what, void *arg);

/* Asks the server to cancel the statement of the connection c was taken
 * from, from a child process: libpq 15's PQcancel blocks until the server
 * has read the request (no PQcancelConn before libpq 17), and a server
 * that does not answer must not hold the loop.  The child gives up after
 * CANCEL_WAIT_SEC; the daemon reaps its children (SIGCHLD). */
static void cancel_on_server(const struct db *db, PGcancel *c)
{
	pid_t pid;

	if (!c)
		return;
	pid = fork();
	if (pid == 0) {
		char err[256];
		sigset_t alrm;
		/* nothing of the daemon's (the execservers' sockets, /metrics)
		 * is held open by the child, however high its descriptors */
		if (syscall(SYS_close_range, 3, ~0u, 0) < 0)
			for (int fd = 3; fd < CHILD_FDS; fd++)
				close(fd);
		/* the alarm ends the child whatever the daemon inherited */
		signal(SIGALRM, SIG_DFL);
		sigemptyset(&alrm);
		sigaddset(&alrm, SIGALRM);
		sigprocmask(SIG_UNBLOCK, &alrm, NULL);
		alarm(CANCEL_WAIT_SEC);
		_exit(PQcancel(c, err, sizeof err) ? 0 : 1);
	}
	if (pid < 0)
		log_warn("database (%s): cannot cancel the statement lost with its connection: %s",
			 db->name, strerror(errno));
}

/* A statement whose end is not known was given up: the owner is told
 * once more when the connection has been up for timeout_ms (late_cb). */
static void look_again_later(struct db *db)
{
	db->late = 1;
	if (db->late_ev && !evtimer_pending(db->late_ev, NULL)) {
		struct timeval tv = { (time_t)(db->timeout_ms / 1000),
				      (suseconds_t)(db->timeout_ms % 1000 * 1000) };
		evtimer_add(db->late_ev, &tv);
	}
}

/* a is settled: closed, its place free.  ended: its statement answered or
 * its connection ended (whatever it did is done); else it is given up
 * unsettled, and the owner is told again later (late_cb). */
static void settle(struct db_abandoned *a, int ended)
{
	struct db *db = a->db;

	event_del(a->ev);
	PQfinish(a->conn);
	a->conn = NULL;
	if (ended) {
		log_info("database (%s): the statement abandoned at its deadline has ended",
			 db->name);
		if (db->on_up)
			db->on_up(db->up_arg);
		return;
	}
	log_warn("database (%s): a statement abandoned at its deadline has not ended %d ms after "
		 "its cancel; closed; looking again for what it may commit once the database "
		 "has been up for %d ms",
		 db->name, db->timeout_ms, db->timeout_ms);
	look_again_later(db);
}

/* An abandoned connection answered, or ended (its statement will not
 * commit any more; if it did, it has), or its second deadline passed. */
static void zombie_cb(evutil_socket_t fd, short what, void *arg)
{
	struct db_abandoned *a = arg;
	int ended;

	(void)fd;
	if (what & EV_TIMEOUT) {
		settle(a, 0);
		return;
	}
	ended = !PQconsumeInput(a->conn);
	while (!ended && !PQisBusy(a->conn)) {
		PGresult *r = PQgetResult(a->conn);
		if (!r)
			ended = 1;
		PQclear(r);
	}
	if (ended)
		settle(a, 1);
}

/* After a statement was given up unsettled: the owner is told once more
 * when the connection has been up for timeout_ms (a stopped server runs
 * what it had read as soon as it resumes). */
static void late_cb(evutil_socket_t fd, short what, void *arg)
{
	struct db *db = arg;
	int64_t up_for = (int64_t)clock_mono_ms() - db->up_since_ms;
	struct timeval tv = { 0, 250 * 1000 };

	(void)fd;
	(void)what;
	if (!db->late)
		return;
	if (!db_up(db) || up_for < db->timeout_ms) {
		if (db_up(db)) {
			tv.tv_sec = (time_t)((db->timeout_ms - up_for) / 1000);
			tv.tv_usec = (suseconds_t)((db->timeout_ms - up_for) % 1000 * 1000);
		}
		evtimer_add(db->late_ev, &tv);
		return;
	}
	db->late = 0;
	log_info("database (%s): looking again for what a statement given up may have committed",
		 db->name);
	if (db->on_up)
		db->on_up(db->up_arg);
}

/* A statement past its deadline: cancelled at the server, and its
 * connection not closed but kept aside and watched until the statement's
 * result or the connection's end arrives, since the database may still
 * commit it (a stopped server resumes and runs what it had read); on_up
 * then lets the owner look for what it did (a claim's rows).  At most
 * DB_ABANDONED at a time: the oldest is given up for a new one. */
static void abandon(struct db *db)
{
	struct db_abandoned *a = &db->abandoned[0];

	for (int i = 0; i < DB_ABANDONED; i++) {
		if (!db->abandoned[i].conn) {
			a = &db->abandoned[i];
			break;
		}
		if (db->abandoned[i].since_ms < a->since_ms)
			a = &db->abandoned[i];
	}
	if (a->conn)
		settle(a, 0);
	cancel_on_server(db, db->cancel);
	a->conn = db->conn;
	a->since_ms = (int64_t)clock_mono_ms();
	db->conn = NULL;
	db_watch(a->ev, PQsocket(a->conn), EV_READ | EV_PERSIST, zombie_cb, a,
		 a->since_ms + db->timeout_ms);
}

void db_watch(struct event *ev, evutil_socket_t fd, short what, event_callback_fn cb, void *arg,
	      int64_t deadline_ms)
{
	int64_t left = deadline_ms - (int64_t)clock_mono_ms();
	struct timeval tv = { 0, 0 };

	if (left > 0) {
		tv.tv_sec = (time_t)(left / 1000);
		tv.tv_usec = (suseconds_t)(left % 1000 * 1000);
	}
	event_del(ev);
	event_assign(ev, event_get_base(ev), fd, what, cb, arg);
	event_add(ev, deadline_ms ? &tv : NULL);
}

/* Waits for the socket to be ready for what (EV_READ, EV_WRITE or both);
 * with a deadline (monotonic ms, 0: none) also for that. */
static void watch(struct db *db, short what, int64_t deadline_ms)
{
	db_watch(db->io_ev, PQsocket(db->conn), what, io_cb, db, deadline_ms);
}

/* The db_connect's next step: wait, connected, or failed. */
static void connect_next(struct db *db, int next)
{
	db->conn = db->dc.conn;
	if (next > 0)
		watch(db, (short)next, db->dc.deadline_ms);
	else if (next == 0)
		connected(db);
	else if (db->conn && PQstatus(db->conn) != CONNECTION_BAD)
		timed_out(db);
	else
		failed_attempt(db);
}

int db_ready(struct db *db)
{
	/* connect_timeout first: a value in the connection string wins */
	const char *keys[] = { "connect_timeout", "keepalives_idle", "dbname",
			       "fallback_application_name", NULL };
	const char *vals[] = { "5", "30", db->conninfo, "execdispatch", NULL };

	if (db->state != DB_AWAY)
		return db->state != DB_CONNECTING;
	if ((int64_t)clock_mono_ms() < db->retry_at_ms)
		return 0;
	db_to(db, DB_CONNECTING);
	if (!db->base) {
		db->conn = PQconnectdbParams(keys, vals, 1);
		if (!db->conn || PQstatus(db->conn) != CONNECTION_OK) {
			failed_attempt(db);
			return 0;
		}
		connected(db);
		return 1;
	}
	connect_next(db, db_connect_begin(&db->dc, db->name, db->conninfo));
	return 0;
}

int64_t db_login_retry_for(const struct db *db)
{
	return db->login_retry_ms ? (int64_t)clock_mono_ms() - db->login_retry_ms : 0;
}

static PGresult *checked(struct db *db, PGresult *res, int *away)
{
	ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;

	*away = 0;
	db->statements++;
	db->sqlstate[0] = '\0';
	if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
		/* the back-off ends with an answer, not with a connection: a
		 * database that takes connections and never answers a statement
		 * is retried ever more slowly */
		db->backoff_ms = BACKOFF_MIN_MS;
		db->login_retry_ms = 0;
		return res;
	}
	if (!res || PQstatus(db->conn) != CONNECTION_OK) {
		*away = 1;
		went_away(db, res ? PQresultErrorMessage(res) : PQerrorMessage(db->conn));
	} else {
		const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

		one_line(db->last_error, sizeof db->last_error, PQresultErrorMessage(res));
		snprintf(db->sqlstate, sizeof db->sqlstate, "%s", state ? state : "");
	}
	PQclear(res);
	return NULL;
}

/* Moves the db_send statement on: flushes, reads, and once its result is
 * complete keeps it and schedules its delivery.  Returns what it waits
 * for next: 0 nothing (done, or the connection was lost), else EV_READ,
 * with EV_WRITE while some of the statement is unsent. */
static short progress(struct db *db)
{
	int unsent = PQflush(db->conn);

	if (unsent < 0 || !PQconsumeInput(db->conn)) {
		went_away(db, PQerrorMessage(db->conn));
		return 0;
	}
	while (!PQisBusy(db->conn)) {
		PGresult *r = PQgetResult(db->conn);
		if (r) {
			/* one statement, one result; a second (never seen) is dropped */
			if (db->kept)
				PQclear(r);
			else
				db->kept = r;
			continue;
		}
		r = db->kept;
		db->kept = NULL;
		db_to(db, DB_IDLE);
		if (db->io_ev)
			event_del(db->io_ev);
		db->kept = checked(db, r, &db->kept_away);
		event_active(db->deliver_ev, EV_TIMEOUT, 0);
		return 0;
	}
	return (short)(EV_READ | (unsent ? EV_WRITE : 0));
}

static void io_cb(evutil_socket_t fd, short what, void *arg)
{
	struct db *db = arg;
	short next;

	(void)fd;
	if (db->state == DB_CONNECTING) {
		connect_next(db, db_connect_step(&db->dc, what & EV_TIMEOUT));
	} else if (db->state == DB_BUSY && (what & EV_TIMEOUT) && db->wire_deadline_ms &&
		   (int64_t)clock_mono_ms() >= db->wire_deadline_ms) {
		char why[96];
		snprintf(why, sizeof why, "no answer to a statement within %d ms", db->timeout_ms);
		abandon(db);
		went_away(db, why);
	} else if (db->state == DB_BUSY && (next = progress(db)) != 0) {
		watch(db, next, db->wire_deadline_ms);
	}
}

static void deliver_cb(evutil_socket_t fd, short what, void *arg)
{
	struct db *db = arg;
	db_result_fn fn = db->fn;
	PGresult *res = db->kept;

	(void)fd;
	(void)what;
	if (db->state == DB_BUSY || !fn)
		return;
	db->fn = NULL;
	db->kept = NULL;
	fn(db->fn_arg, res, db->kept_away);
}

/* db_exec's wait for a db_send statement on the wire (its result is kept
 * for deliver_cb). */
static void wait_wire(struct db *db)
{
	short next;

	while (db->state == DB_BUSY && (next = progress(db)) != 0) {
		struct pollfd p = { PQsocket(db->conn),
				    (short)(POLLIN | (next & EV_WRITE ? POLLOUT : 0)), 0 };
		if (poll(&p, 1, -1) < 0 && errno != EINTR) {
			went_away(db, strerror(errno));
			return;
		}
	}
}

int db_attach(struct db *db, struct event_base *base, int timeout_ms, void (*on_up)(void *),
	      void *arg)
{
	db->timeout_ms = timeout_ms;
	db->io_ev = event_new(base, -1, 0, io_cb, db);
	db->deliver_ev = event_new(base, -1, 0, deliver_cb, db);
	db->late_ev = evtimer_new(base, late_cb, db);
	if (!db->io_ev || !db->deliver_ev || !db->late_ev)
		return -1;
	for (int i = 0; i < DB_ABANDONED; i++) {
		db->abandoned[i].db = db;
		if (!(db->abandoned[i].ev = event_new(base, -1, 0, zombie_cb, &db->abandoned[i])))
			return -1;
	}
	db->base = base;
	db->on_up = on_up;
	db->up_arg = arg;
	return 0;
}

int db_up(const struct db *db)
{
	return db->state == DB_IDLE || db->state == DB_BUSY;
}

enum db_state db_state_of(const struct db *db)
{
	return db->state;
}

int db_busy(const struct db *db)
{
	return db->fn != NULL;
}

int db_send(struct db *db, const char *sql, int nparams, const char *const *params, db_result_fn fn,
	    void *arg)
{
	if (!db->base || db->fn || !db_ready(db))
		return -1;
	if (!PQsendQueryParams(db->conn, sql, nparams, NULL, params, NULL, NULL, 0)) {
		if (PQstatus(db->conn) != CONNECTION_OK)
			went_away(db, PQerrorMessage(db->conn));
		else
			one_line(db->last_error, sizeof db->last_error, PQerrorMessage(db->conn));
		return -1;
	}
	db->fn = fn;
	db->fn_arg = arg;
	db_to(db, DB_BUSY);
	db->kept_away = 0;
	db->wire_deadline_ms = db->timeout_ms ? (int64_t)clock_mono_ms() + db->timeout_ms : 0;
	watch(db, (short)(EV_READ | EV_WRITE), db->wire_deadline_ms);
	return 0;
}

PGresult *db_exec(struct db *db, const char *sql, int nparams, const char *const *params, int *away)
{
	*away = 1;
	if (!db_ready(db))
		return NULL;
	wait_wire(db);
	if (db->state == DB_AWAY)
		return NULL;
	return checked(db, PQexecParams(db->conn, sql, nparams, NULL, params, NULL, NULL, 0), away);
}

PGresult *db_exec_script(struct db *db, const char *sql, int *away)
{
	*away = 1;
	if (!db_ready(db))
		return NULL;
	wait_wire(db);
	if (db->state == DB_AWAY)
		return NULL;
	return checked(db, PQexec(db->conn, sql), away);
}

void db_int_array(char *buf, const int64_t *v, int n)
{
	char *p = buf;

	*p++ = '{';
	for (int i = 0; i < n; i++)
		p += sprintf(p, "%s%lld", i ? "," : "", (long long)v[i]);
	*p++ = '}';
	*p = '\0';
}

char *db_text_array(const char *const *v, int n)
{
	size_t len = 3;
	char *out, *p;

	for (int i = 0; i < n; i++)
		len += v[i] ? 2 * strlen(v[i]) + 3 : 5;
	out = malloc(len);
	if (!out)
		return NULL;
	p = out;
	*p++ = '{';
	for (int i = 0; i < n; i++) {
		if (i)
			*p++ = ',';
		if (!v[i]) {
			memcpy(p, "NULL", 4);
			p += 4;
			continue;
		}
		*p++ = '"';
		for (const char *c = v[i]; *c; c++) {
			if (*c == '"' || *c == '\\')
				*p++ = '\\';
			*p++ = *c;
		}
		*p++ = '"';
	}
	*p++ = '}';
	*p = '\0';
	return out;
}
