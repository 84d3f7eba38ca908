/*
 * contact.c - the dispatcher's start: the first contact with the database
 * on the main connection, in the loop and without blocking (the schema's
 * version, registering our dispatcher row, requeueing the claims of an
 * earlier life of our instance; docs/dispatch.md, "Starting"), then the
 * loop's timers (begin).  Invariants: one contact statement on the wire at
 * a time; nothing is claimed before CONTACT_DONE; no database within
 * START_GIVE_UP_MS, a schema we do not know or an instance held by a live
 * dispatcher ends the daemon with status 1.
 */
#include "autoconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "dispatch/dispatcher_impl.h"
#include "dispatch/migrate.h"
#include "dispatch/queries.h"

/* A new life's token (docs/dispatch.md, "Identity"): our clock now to
 * the millisecond, in UTC, with a random number of microseconds below
 * it, as the text of a timestamptz (microseconds, as PostgreSQL keeps
 * it, so that it compares equal to what the row stores).  Two lives of
 * one instance get the same token only when they register in the same
 * millisecond and draw the same of 1000 numbers. */
void new_token(struct dispatcher *d)
{
	struct timeval tv;
	struct tm tm;
	unsigned r = 0;
	char day[32];

	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	strftime(day, sizeof day, "%Y-%m-%d %H:%M:%S", &tm);
	if (getentropy(&r, sizeof r) < 0)
		r = d->rnd = d->rnd * 1103515245u + 12345u;
	snprintf(d->token, sizeof d->token, "%.20s.%03d%03u+00", day,
		 (int)(tv.tv_usec / 1000 % 1000), r % 1000);
}

/* The parameters of DQ_REGISTER into params (stale: its buffer). */
void register_params(struct dispatcher *d, char *stale, size_t len, const char **params)
{
	snprintf(stale, len, "%d", d->cfg->stale_after_sec);
	params[0] = d->cfg->instance_id;
	params[1] = d->host;
	params[2] = d->pid;
	params[3] = stale;
	params[4] = d->token;
}

/* DQ_REGISTER's answer (sent at sent_ms): 0 registered, -1 the statement
 * failed, -2 the database away, -3 a live dispatcher holds the instance. */
int took_register(struct dispatcher *d, PGresult *res, int away, int64_t sent_ms)
{
	if (!res)
		return away ? -2 : -1;
	if (PQntuples(res) != 1)
		return -3;
	d->registered = 1;
	d->beat_ok_ms = sent_ms;
	return 0;
}

int expand_all(struct dispatcher *d)
{
	const char *s = d->cfg->schema;

	d->q_register = dq_expand(DQ_REGISTER, s);
	d->q_beat = dq_expand(DQ_BEAT, s);
	d->q_rescue = dq_expand(DQ_RESCUE, s);
	d->q_rescue_own = dq_expand(DQ_RESCUE_OWN, s);
	d->q_rescue_lost = dq_expand(DQ_RESCUE_LOST, s);
	d->q_claim = dq_expand(DQ_CLAIM, s);
	d->q_start = dq_expand(DQ_START, s);
	d->q_finish = dq_expand(DQ_FINISH, s);
	d->q_held = dq_expand(DQ_HELD, s);
	d->q_leave = dq_expand(DQ_LEAVE, s);
	d->q_janitor = dq_expand(DQ_JANITOR, s);
	d->q_position = dq_expand(DQ_POSITION, s);
	d->q_finish_claim = dq_expand(DQ_FINISH_CLAIM, s);
	d->q_claim_exec = dq_expand(DQ_CLAIM_EXEC, s);
	d->q_landed = dq_expand(DQ_LANDED, s);
	d->q_version = dq_expand(DQ_SCHEMA_VERSION, s);
	return d->q_version && d->q_claim_exec && d->q_landed && d->q_register && d->q_beat &&
			       d->q_rescue && d->q_rescue_own && d->q_rescue_lost && d->q_claim &&
			       d->q_start && d->q_finish && d->q_held && d->q_leave &&
			       d->q_janitor && d->q_position && d->q_finish_claim
		       ? 0
		       : -1;
}

/* The first contact failed for good: the daemon must not start. */
static void contact_fatal(struct dispatcher *d)
{
	d->exit_status = 1;
	event_base_loopbreak(d->base);
}

/* Everything after the first contact: the timers of the loop. */
static void begin(struct dispatcher *d)
{
	d->contact = CONTACT_DONE;
	event_del(d->contact_ev);
	log_info("database: schema version %d, registered as %s: claiming", DISPATCH_SCHEMA_VERSION,
		 d->cfg->instance_id);
	arm(d->poll_ev, jittered(d, d->cfg->poll_ms));
	arm(d->beat_ev, d->cfg->heartbeat_sec * 1000LL);
	if (d->cfg->cancel_poll_ms > 0)
		arm(d->cancel_ev, d->cfg->cancel_poll_ms);
	if (d->cfg->retain_done_days > 0)
		event_active(d->janitor_ev, EV_TIMEOUT, 0); /* at the start, then hourly */
}

static void contact_step(struct dispatcher *d, PGresult *res, int away);

static void contact_done(void *arg, PGresult *res, int away)
{
	contact_step(arg, res, away);
	PQclear(res);
}

/* What one statement of the first contact answered, and the next step. */
static void contact_step(struct dispatcher *d, PGresult *res, int away)
{
	char msg[600];

	if (d->stopping) {
		maybe_done_stopping(d);
		return;
	}
	if (!res && away)
		return; /* the same step again once the connection is back */
	switch (d->contact) {
	case CONTACT_VERSION:
		if (migrate_judge(res, d->db.last_error, d->cfg->schema, d->cfg->file, msg,
				  sizeof msg) < 0) {
			log_error("%s", msg);
			contact_fatal(d);
			return;
		}
		break;
	case CONTACT_REGISTER:
		switch (took_register(d, res, away, now_ms())) {
		case -3:
			log_error("instance %s is held by another live dispatcher (heartbeat "
				  "younger than %d s): give each dispatcher its own instanceId",
				  d->cfg->instance_id, d->cfg->stale_after_sec);
			contact_fatal(d);
			return;
		case -1:
			log_error("registering: %s", d->db.last_error);
			contact_fatal(d);
			return;
		}
		break;
	case CONTACT_RESCUE:
		if (res && PQntuples(res) > 0)
			log_warn("requeued %d rows an earlier run of instance %s still held",
				 PQntuples(res), d->cfg->instance_id);
		break;
	}
	if (++d->contact == CONTACT_DONE)
		begin(d);
	else
		contact_next(d);
}

/* The first contact's next statement on the main connection, without
 * blocking: the schema's version, our row, our previous life's claims
 * (docs/dispatch.md, "Starting"). */
void contact_next(struct dispatcher *d)
{
	char maxa[16], stale[16];
	const char *params[5] = { d->cfg->instance_id, maxa, d->token };
	const char *sql = d->contact == CONTACT_VERSION    ? d->q_version
			  : d->contact == CONTACT_REGISTER ? d->q_register
							   : d->q_rescue_own;
	int n = d->contact == CONTACT_VERSION ? 0 : d->contact == CONTACT_REGISTER ? 5 : 3;

	if (d->contact >= CONTACT_DONE || db_busy(&d->db) || !db_ready(&d->db))
		return;
	snprintf(maxa, sizeof maxa, "%d", d->cfg->max_attempts);
	if (d->contact == CONTACT_REGISTER)
		register_params(d, stale, sizeof stale, params);
	db_send(&d->db, sql, n, params, contact_done, d);
}

/* Every CONTACT_CHECK_MS until the first contact is made: a new attempt
 * once the back-off has passed; given up once START_GIVE_UP_MS have
 * passed and the last attempt failed (every host of the connection
 * string tried, each within its connect_timeout). */
void contact_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dispatcher *d = arg;

	(void)fd;
	(void)what;
	arm(d->contact_ev, CONTACT_CHECK_MS);
	if (d->db.conn || db_busy(&d->db))
		return; /* connecting, or a statement of it on the wire */
	if (now_ms() - d->contact_t0_ms >= START_GIVE_UP_MS) {
		log_error("cannot reach the database within %d s at the start: %s",
			  START_GIVE_UP_MS / 1000, d->db.last_error);
		contact_fatal(d);
		return;
	}
	contact_next(d);
}
