/*
 * contact.c - the dispatcher's start: the first contact with the database
 * on the main connection, in the loop and without blocking (the schema's
 * version, registering our dispatcher row, requeueing the claims of an
 * earlier life of our instance, looked for first and then requeued under
 * exactly the claims found; docs/dispatch.md, "Starting"), then the
 * loop's timers (begin); and the identity of a life: its token, the
 * process's client id at the execservers, and the exit of a process
 * whose instance another live process took over.  Invariants: one contact statement on the wire at
 * a time; nothing is claimed before LIFE_RUNNING, which comes only after
 * the requeue succeeded (a failed statement is sent again after
 * heartbeatSec, contact_retry); a database not reachable yet is waited
 * for (the connection's back-off, one log line per failed attempt); a
 * schema we do not know or an instance held by a live dispatcher ends
 * the daemon with status 1.
 */
#include "autoconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "dispatch/dispatch_impl.h"
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
		r = rnd_next(&d->rnd);
	snprintf(d->token, sizeof d->token, "%.20s.%03d%03u+00", day,
		 (int)(tv.tv_usec / 1000 % 1000), r % 1000);
}

/* The client id this process shows the execservers: the instanceId (its
 * first 51 characters) and "@" with 12 random hex digits, drawn once per
 * process.  An execserver gives a client's running jobs to its newest
 * connection (docs/protocol.md section 6): were it the instanceId alone,
 * a process of an earlier life that reconnects after a freeze would take
 * the new life's jobs over, acknowledge their DONEs as unknown and leave
 * their rows running for good.  The lives of one process (registered
 * again after a rescue) share the id: they are one client library, and a
 * life cancels its runs before the next one claims. */
void make_client_id(struct dispatcher *d)
{
	unsigned char r[6];
	char tag[13];

	if (getentropy(r, sizeof r) < 0)
		for (size_t i = 0; i < sizeof r; i++)
			r[i] = (unsigned char)(rnd_next(&d->rnd) >> 16);
	for (size_t i = 0; i < sizeof r; i++)
		snprintf(tag + 2 * i, 3, "%02x", r[i]);
	snprintf(d->client_id, sizeof d->client_id, "%.*s@%s", EXC_CLIENT_ID_MAX - (int)sizeof tag,
		 d->cfg->instance_id, tag);
}

/* Another live process registered our instanceId (a new life started
 * while this one was frozen): its execserver connections are closed
 * first (the library cancels what still runs of ours), then the daemon
 * exits with status 1, writing nothing: the rows held under the instance
 * are that life's now (docs/dispatch.md, "Identity"). */
void taken_over(struct dispatcher *d)
{
	log_error("instance %s was taken over by another live dispatcher (a new process with "
		  "the same instanceId): closing our execserver connections and exiting; the "
		  "rows we held were requeued by it",
		  d->cfg->instance_id);
	exc_client_free(d->client);
	d->client = NULL;
	for (struct held *h = d->list; h; h = h->next)
		h->xj = NULL; /* freed with the client, no callback */
	d->exit_status = 1;
	event_base_loopbreak(d->base);
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
	d->beat_ok_ms = sent_ms;
	return 0;
}

/* The text of each statement the dispatcher sends (enum q). */
static const char *const q_text[Q_COUNT] = {
	[Q_REGISTER] = DQ_REGISTER,
	[Q_BEAT] = DQ_BEAT,
	[Q_RESCUE] = DQ_RESCUE,
	[Q_FIND_OWN] = DQ_FIND_OWN,
	[Q_FIND_LOST] = DQ_FIND_LOST,
	[Q_REQUEUE] = DQ_REQUEUE_CLAIMS,
	[Q_CLAIM] = DQ_CLAIM,
	[Q_START] = DQ_START,
	[Q_FINISH] = DQ_FINISH,
	[Q_HELD] = DQ_HELD,
	[Q_LEAVE] = DQ_LEAVE,
	[Q_JANITOR] = DQ_JANITOR,
	[Q_POSITION] = DQ_POSITION,
	[Q_FINISH_CLAIM] = DQ_FINISH_CLAIM,
	[Q_CLAIM_EXEC] = DQ_CLAIM_EXEC,
	[Q_LANDED] = DQ_LANDED,
	[Q_VERSION] = DQ_SCHEMA_VERSION,
	[Q_SETTLED] = DQ_CLAIMS_SETTLED,
	[Q_PROGRESS] = DQ_PROGRESS_WRITE,
};

int expand_all(struct dispatcher *d)
{
	const char *s = d->cfg->schema;

	int rc = 0;

	for (int q = 0; q < Q_COUNT; q++)
		if (!(d->sql[q] = dq_expand(q_text[q], s)))
			rc = -1;
	return rc;
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

static void contact_done(void *arg, PGresult *res, int away)
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
	const char *params[5] = { d->cfg->instance_id, d->token };
	const char *sql = d->stage == LIFE_CHECKING      ? d->sql[Q_VERSION]
			  : d->stage == LIFE_REGISTERING ? d->sql[Q_REGISTER]
			  : d->stage == LIFE_FINDING_OWN ? d->sql[Q_FIND_OWN]
							 : d->sql[Q_REQUEUE];
	int n = d->stage == LIFE_CHECKING ? 0 : d->stage == LIFE_FINDING_OWN ? 2 : 5;

	if (!first_contact(d) || db_busy(&d->db) || !db_ready(&d->db) ||
	    now_ms() < d->contact_retry_ms)
		return;
	d->contact_retry_ms = 0;
	if (d->stage == LIFE_REGISTERING)
		register_params(d, stale, sizeof stale, params);
	else if (d->stage == LIFE_REQUEUEING)
		requeue_params(d, d->contact_ids, d->contact_claims, maxa, sizeof maxa, params);
	db_send(&d->db, sql, n, params, contact_done, d);
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
	if (d->db.conn || db_busy(&d->db)) {
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
