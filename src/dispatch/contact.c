/*
 * contact.c - the dispatcher's start: the first contact with the database
 * on the main connection, in the loop and without blocking (the schema's
 * version, registering our dispatcher row, requeueing the claims of an
 * earlier life of our instance, looked for first and then requeued under
 * exactly the claims found; docs/dispatch.md, "Starting"), then the
 * loop's timers (begin).  Invariants: one contact statement on the wire
 * at a time; nothing is claimed before LIFE_RUNNING, which comes only
 * after the requeue succeeded (a failed statement is sent again after
 * heartbeatSec, contact_retry); a database not reachable yet is waited
 * for (the connection's back-off, one log line per failed attempt); a
 * schema we do not know or an instance held by a live dispatcher ends
 * the daemon with status 1.  Calls liveness.c (the statements' parameters
 * and answers) and stopping.c (the file map in dispatch_impl.h).
 */
#include "autoconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "dispatch/dispatch_impl.h"
#include "dispatch/migrate.h"

/* The first contact failed for good: the daemon must not start. */
static void contact_fatal(struct dispatcher *d)
{
	d->exit_status = 1;
	event_base_loopbreak(d->base);
}

/* Everything after the first contact: the timers of the loop. */
static void begin(struct dispatcher *d)
{
	life_to(d, LIFE_RUNNING);
	event_del(d->contact_ev);
	log_info("database: schema version %d, registered as %s: claiming", DISPATCH_SCHEMA_VERSION,
		 d->cfg->instance_id);
	/* the first claim at once: rows queued before the start wait for no
	 * poll (and no notification comes for them) */
	event_active(d->poll_ev, EV_TIMEOUT, 0);
	arm(d->beat_ev, d->cfg->heartbeat_sec * 1000LL);
	if (d->cfg->cancel_poll_ms > 0)
		arm(d->cancel_ev, d->cfg->cancel_poll_ms);
	if (d->cfg->retain_done_days > 0)
		event_active(d->janitor_ev, EV_TIMEOUT, 0); /* at the start, then hourly */
}

/* What LIFE_FINDING_OWN found, forgotten. */
void contact_forget(struct dispatcher *d)
{
	free(d->contact_ids);
	free(d->contact_claims);
	d->contact_ids = d->contact_claims = NULL;
}

static void contact_step(struct dispatcher *d, PGresult *res, int away);

static void on_contact_result(void *arg, PGresult *res, int away)
{
	contact_step(arg, res, away);
	PQclear(res);
}

/* The requeue of our earlier life's rows failed (the statement, not the
 * connection: a trigger, a permission, a lock or statement timeout): said,
 * and looked for again after heartbeatSec (contact_cb), nothing claimed
 * meanwhile.  Our row stays registered: should it go
 * stale meanwhile, a rescue requeues the rows and removes it, the look
 * then finds nothing, and the beat after the start registers again. */
static void contact_retry(struct dispatcher *d, const char *why)
{
	log_error("requeueing the rows an earlier run of instance %s still holds: %s; nothing is "
		  "claimed before; trying again in %d s",
		  d->cfg->instance_id, why, d->cfg->heartbeat_sec);
	contact_forget(d);
	life_to(d, LIFE_FINDING_OWN);
	d->contact_retry_ms = now_ms() + d->cfg->heartbeat_sec * 1000LL;
}

/* Our instance's row is fresh at the start: 1 while it may still go
 * stale (registering is tried again every heartbeatSec), 0 once its
 * heartbeat has gone on for staleAfterSec + 2 heartbeatSec (a live
 * dispatcher holds it).  A previous run of this instance leaves its row
 * fresh when its stop left runs or outcomes to the rescue
 * (stopTimeoutSec, an outcome given up): a restart right after it waits
 * for that row instead of exiting (docs/dispatch.md, "Identity"). */
static int held_wait(struct dispatcher *d)
{
	int64_t bound = (d->cfg->stale_after_sec + 2LL * d->cfg->heartbeat_sec) * 1000;

	if (!d->held_since_ms) {
		d->held_since_ms = now_ms();
		log_warn("instance %s is held by a dispatcher whose heartbeat is younger than "
			 "%d s: waiting up to %lld s for it to go stale (a previous run whose "
			 "stop left rows for the rescue)",
			 d->cfg->instance_id, d->cfg->stale_after_sec, (long long)(bound / 1000));
	}
	if (now_ms() - d->held_since_ms >= bound)
		return 0;
	d->contact_retry_ms = now_ms() + d->cfg->heartbeat_sec * 1000LL;
	return 1;
}

/* What one statement of the first contact answered, and the next step. */
static void contact_step(struct dispatcher *d, PGresult *res, int away)
{
	char msg[600];
	enum life_stage next = LIFE_RUNNING;

	if (stopping(d)) {
		maybe_done_stopping(d);
		return;
	}
	if (!res && away)
		return; /* the same step again once the connection is back */
	if (!res && (d->stage == LIFE_FINDING_OWN || d->stage == LIFE_REQUEUEING)) {
		contact_retry(d, d->db.last_error);
		return;
	}
	switch (d->stage) {
	case LIFE_CHECKING:
		if (migrate_judge(res, d->db.last_error, d->cfg->schema, d->cfg->file, msg,
				  sizeof msg) < 0) {
			log_error("%s", msg);
			contact_fatal(d);
			return;
		}
		next = LIFE_REGISTERING;
		break;
	case LIFE_REGISTERING:
		switch (took_register(d, res, away, now_ms())) {
		case -3:
			if (held_wait(d))
				return;
			log_error("instance %s is held by another live dispatcher (its heartbeat "
				  "went on for %d s): give each dispatcher its own instanceId",
				  d->cfg->instance_id,
				  d->cfg->stale_after_sec + 2 * d->cfg->heartbeat_sec);
			contact_fatal(d);
			return;
		case -1:
			log_error("registering: %s", d->db.last_error);
			contact_fatal(d);
			return;
		}
		next = LIFE_FINDING_OWN;
		break;
	case LIFE_FINDING_OWN:
		if (PQntuples(res) == 0)
			break; /* nothing to requeue */
		if (claim_arrays(res, &d->contact_ids, &d->contact_claims) < 0) {
			contact_retry(d, "out of memory");
			return;
		}
		next = LIFE_REQUEUEING;
		break;
	case LIFE_REQUEUEING:
		if (PQntuples(res) > 0)
			log_warn("requeued %d rows an earlier run of instance %s still held",
				 PQntuples(res), d->cfg->instance_id);
		contact_forget(d);
		break;
	default: return; /* not in the first contact */
	}
	if (next == LIFE_RUNNING) {
		begin(d);
		return;
	}
	life_to(d, next);
	contact_next(d);
}

/* The first contact's next statement on the main connection, without
 * blocking: the schema's version, our row, the rows our previous life
 * left (the look, then their requeue; docs/dispatch.md, "Starting"). */
void contact_next(struct dispatcher *d)
{
	char maxa[16], stale[16];
	const char *params[6] = { d->cfg->instance_id, d->token };
	const char *sql = d->stage == LIFE_CHECKING      ? d->sql[Q_VERSION]
			  : d->stage == LIFE_REGISTERING ? d->sql[Q_REGISTER]
			  : d->stage == LIFE_FINDING_OWN ? d->sql[Q_FIND_OWN]
							 : d->sql[Q_REQUEUE];
	int n = d->stage == LIFE_CHECKING      ? 0
		: d->stage == LIFE_FINDING_OWN ? 2
		: d->stage == LIFE_REGISTERING ? 5
					       : 6;

	if (!first_contact(d) || db_busy(&d->db) || !db_ready(&d->db) ||
	    now_ms() < d->contact_retry_ms)
		return;
	d->contact_retry_ms = 0;
	if (d->stage == LIFE_REGISTERING)
		register_params(d, stale, sizeof stale, params);
	else if (d->stage == LIFE_REQUEUEING)
		requeue_params(d, d->contact_ids, d->contact_claims, maxa, sizeof maxa, params);
	db_send(&d->db, sql, n, params, on_contact_result, d);
}

/* Every CONTACT_CHECK_MS until the first contact is made: a new attempt
 * once the back-off has passed (250 ms doubling to 8 s, db.c).  A
 * database not reachable yet is waited for, never given up: a remote
 * database that comes up after the dispatcher is normal at boot.  Each
 * failed attempt (every host of the connection string tried, each within
 * its connect_timeout) is said once. */
void contact_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dispatcher *d = arg;

	(void)fd;
	(void)what;
	arm(d->contact_ev, CONTACT_CHECK_MS);
	if (db_state_of(&d->db) != DB_AWAY || db_busy(&d->db)) {
		/* connecting, or a statement of it on the wire; or one failed,
		 * to be sent again once contact_retry_ms has come */
		if (d->contact_retry_ms)
			contact_next(d);
		return;
	}
	if (d->db.warned > d->contact_failed) {
		d->contact_failed = d->db.warned;
		log_warn("waiting for the database at the start (for %lld s, attempt %d failed: "
			 "%s); trying again in %lld ms",
			 (long long)((now_ms() - d->contact_t0_ms) / 1000), d->contact_failed,
			 d->db.last_error,
			 (long long)(d->db.retry_at_ms > now_ms() ? d->db.retry_at_ms - now_ms()
								  : 0));
	}
	contact_next(d);
}
