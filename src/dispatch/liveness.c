/*
 * liveness.c - that this dispatcher is alive and known to be: a life's
 * identity (its token, the process's client id at the execservers, the
 * exit of a life another process took over); registering our
 * dispatcher row, finding the rows our instance holds and requeueing
 * them under exactly the claims found (DQ_REGISTER, DQ_FIND_OWN,
 * DQ_REQUEUE_CLAIMS: used at the start by contact.c and after a rescue
 * here); the heartbeat and registering again on the beat's lane
 * (statements of the dispatcher table alone); the rescue after each
 * written beat, on a lane of its own (it may wait for a lock on job);
 * and the sweep of claims lost with their connection (the probe while
 * claims are in limbo, the look, the requeue).  Invariants: at most one
 * chore of each kind is queued or on the wire (own_out, rescue_out; the
 * beat's lane: enum beat_stage; the sweep: enum sweep_stage); nothing is claimed in
 * LIFE_OWNING or unless the sweep is SWEEP_IDLE (may_claim_now); a
 * requeue names the claims its look found, never a claim made after it.  Calls hot.c (limbo_free) and
 * held.c (the file map in dispatch_impl.h).
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

/* ---- a life's identity ---- */

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

/* ---- registering, finding our rows, requeueing them ---- */

/* The (id, claims) pairs a DQ_FIND_OWN or DQ_FIND_LOST answered as the
 * arrays of DQ_REQUEUE_CLAIMS (malloc'd).  0, or -1 when out of memory. */
int claim_arrays(PGresult *res, char **ids, char **claims)
{
	int n = PQntuples(res);
	int64_t *v = calloc((size_t)n + 1, sizeof *v), *c = calloc((size_t)n + 1, sizeof *c);

	*ids = malloc(21 * (size_t)n + 3);
	*claims = malloc(21 * (size_t)n + 3);
	if (!v || !c || !*ids || !*claims) {
		free(*ids);
		free(*claims);
		*ids = *claims = NULL;
	} else {
		for (int i = 0; i < n; i++) {
			v[i] = strtoll(PQgetvalue(res, i, 0), NULL, 10);
			c[i] = strtoll(PQgetvalue(res, i, 1), NULL, 10);
		}
		db_int_array(*ids, v, n);
		db_int_array(*claims, c, n);
	}
	free(v);
	free(c);
	return *ids ? 0 : -1;
}

/* DQ_REQUEUE_CLAIMS's parameters (maxa: a buffer of len for maxAttempts;
 * params: 6). */
void requeue_params(struct dispatcher *d, const char *ids, const char *claims, char *maxa,
		    size_t len, const char **params)
{
	snprintf(maxa, len, "%d", d->cfg->retry.max_attempts);
	params[0] = d->cfg->instance_id;
	params[1] = ids;
	params[2] = claims;
	params[3] = maxa;
	params[4] = d->token;
	params[5] = d->cfg->retry_limits;
}

/* The claims a look (DQ_FIND_OWN, DQ_FIND_LOST) found, in res, requeued
 * under exactly those claims: a chore answered to fn with the same note
 * (the life of the look).  1 when queued, 0 when res found none, -1 when
 * out of memory. */
static int requeue_found(struct dispatcher *d, PGresult *res, const void *note, size_t note_len,
			 chore_fn fn)
{
	char *ids, *claims, maxa[16];
	const char *params[6];
	int rc;

	if (PQntuples(res) == 0)
		return 0;
	if (claim_arrays(res, &ids, &claims) < 0)
		return -1;
	requeue_params(d, ids, claims, maxa, sizeof maxa, params);
	rc = chores_add(d->chores, d->sql[Q_REQUEUE], 6, params, note, note_len, fn, d) == 0 ? 1
											     : -1;
	free(ids);
	free(claims);
	return rc;
}

/* ---- the sweep of claims lost with their connection ---- */

/* The note of DQ_CLAIMS_SETTLED: the life, the claims in limbo then. */
struct probe_note {
	unsigned life;
	size_t nlimbo;
};

/* The sweep's end: the answer of its requeue, or of its look when that
 * found nothing or failed. */
static void on_sweep_result(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;

	(void)note;
	if (!res)
		sweep_answered(d); /* wanted still: again at the next turn */
	if (res) {
		sweep_done(d);
		d->swept_ms = now_ms();
		if (d->limbo_probed)
			log_debug("%zu claims lost with their connections settled: their places "
				  "are free",
				  d->limbo_probed);
		limbo_free(d, d->limbo_probed);
		if (PQntuples(res) > 0)
			log_warn("requeued %d rows claimed by a statement whose result the lost "
				 "connection took",
				 PQntuples(res));
	} else if (!away) {
		log_error("claims lost with the connection: %s", chores_db(d->chores)->last_error);
	}
	d->limbo_probed = 0;
	if (res && !stopping(d))
		event_active(d->poll_ev, EV_TIMEOUT, 0); /* claims waited for it */
}

/* The sweep's look answered: what it found is requeued (the sweep stays
 * out, so no claim goes, until that answers too), under this life only:
 * a life lost meanwhile has its rows requeued by the rescue or by the
 * requeue of the next registration (on_requeue_own_result). */
static void on_find_lost_result(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;
	int rc;

	if (*(const unsigned *)note != d->life) {
		sweep_answered(d);
		return;
	}
	rc = res ? requeue_found(d, res, note, sizeof d->life, on_sweep_result) : 0;
	if (rc == 0)
		on_sweep_result(arg, res, away, note);
	else if (rc < 0)
		sweep_answered(d); /* tried again at the next turn (SWEEP_WANTED) */
}

/* The sweep's look, with no statement on the wire and every result
 * delivered (so every row this dispatcher claimed and knows is in its
 * list): the rows claimed under its instance by a claim it does not hold
 * (id and claims; an earlier claim of the same row whose outcome is still
 * to be written is not the row's claim) were claimed by a statement whose
 * result the lost connection took (the commit went through, the answer
 * did not).  Nobody else would ever free them while this dispatcher's
 * heartbeat lives: looked for (DQ_FIND_LOST) and requeued under exactly
 * those claims (DQ_REQUEUE_CLAIMS, on_find_lost_result) like a rescue; chores, and
 * no claim is sent until the last answer (on_sweep_result). */
static void find_lost_claims(struct dispatcher *d)
{
	size_t n = 0;

	for (struct held *h = d->list; h; h = h->next)
		n++;
	char *ids = malloc(21 * n + 3), *claims = malloc(21 * n + 3);
	int64_t *v = calloc(n + 1, sizeof *v), *c = calloc(n + 1, sizeof *c);
	if (!ids || !claims || !v || !c) {
		free(ids);
		free(claims);
		free(v);
		free(c);
		return; /* tried again at the next turn */
	}
	n = 0;
	for (struct held *h = d->list; h; h = h->next) {
		v[n] = h->id;
		c[n++] = h->claim;
	}
	db_int_array(ids, v, (int)n);
	db_int_array(claims, c, (int)n);
	const char *params[4] = { d->cfg->instance_id, ids, claims, d->token };
	if (chores_add(d->chores, d->sql[Q_FIND_LOST], 4, params, &d->life, sizeof d->life,
		       on_find_lost_result, d) == 0)
		sweep_sent(d);
	free(ids);
	free(claims);
	free(v);
	free(c);
}

/* The probe before a sweep while claims are in limbo: answered, the sweep
 * looks; the claims in limbo when it was sent are freed by the sweep's
 * answer if no statement held our row (limbo_probed), else they are
 * probed again at the next heartbeat (beat_cb). */
static void on_settled_result(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;
	const struct probe_note *n = note;

	sweep_answered(d);
	if (n->life != d->life)
		return; /* tried again at the next turn (SWEEP_WANTED) */
	if (!res) {
		if (!away)
			log_error("claims lost with the connection: %s",
				  chores_db(d->chores)->last_error);
		return;
	}
	d->limbo_probed = PQntuples(res) == 1 ? n->nlimbo : 0;
	if (!d->limbo_probed)
		log_debug("claims lost with their connections: a statement still holds our "
			  "dispatcher row; their places stay taken");
	find_lost_claims(d);
}

/* After a reconnection, with no statement on the wire and every result
 * delivered: the sweep (find_lost_claims), after a probe of our row
 * (DQ_CLAIMS_SETTLED) while claims are in limbo (struct limbo). */
void sweep_lost_claims(struct dispatcher *d)
{
	struct probe_note n = { d->life, d->nlimbo };
	const char *params[2] = { d->cfg->instance_id, d->token };

	d->limbo_probed = 0;
	if (!d->nlimbo) {
		find_lost_claims(d);
		return;
	}
	if (chores_add(d->chores, d->sql[Q_SETTLED], 2, params, &n, sizeof n, on_settled_result,
		       d) == 0)
		sweep_sent(d);
}

/* ---- the heartbeat, the rescue, registering again ---- */

/* The rescue's answer: what it requeued, failed and put off, counted and
 * said. */
static void on_rescue_result(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;
	long long requeued, failed, put_off;

	(void)note;
	d->rescue_out = 0;
	if (!res) {
		if (!away)
			log_error("rescue: %s", chores_db(d->rescue_lane)->last_error);
		return;
	}
	requeued = atoll(PQgetvalue(res, 0, 0));
	failed = atoll(PQgetvalue(res, 0, 1));
	put_off = atoll(PQgetvalue(res, 0, 2));
	d->st.rescued_requeued += (uint64_t)requeued;
	d->st.rescued_failed += (uint64_t)failed;
	d->st.rescue_put_off += (uint64_t)put_off;
	d->st.rescue_put_off_last = (unsigned)put_off;
	if (requeued || failed)
		log_warn("rescue: requeued %lld and failed %lld rows of silent dispatchers",
			 requeued, failed);
	if (put_off && !d->said_put_off++)
		log_warn(
			"rescue: %lld silent dispatchers put off: another transaction holds a lock "
			"on one of their rows; tried again at each heartbeat",
			put_off);
	else if (!put_off)
		d->said_put_off = 0;
}

/* The rescue of silent dispatchers, after a written beat, on a lane of
 * its own: it may wait for a lock on job (an application's LOCK TABLE),
 * and the next beat must not wait with it.  One at a time: a beat that
 * finds the last rescue still out sends none (docs/dispatch.md, "Heartbeat
 * and rescue"). */
static void send_rescue(struct dispatcher *d)
{
	char stale[16], maxa[16];
	const char *params[4] = { d->cfg->instance_id, stale, maxa, d->cfg->retry_limits };

	if (d->rescue_out || d->stop == STOP_LEAVING)
		return;
	snprintf(stale, sizeof stale, "%d", d->cfg->stale_after_sec);
	snprintf(maxa, sizeof maxa, "%d", d->cfg->retry.max_attempts);
	if (chores_add(d->rescue_lane, d->sql[Q_RESCUE], 4, params, NULL, 0, on_rescue_result, d) ==
	    0)
		d->rescue_out = 1;
}

/* The heartbeat's answer: written (the rescue follows), or our row is
 * gone (a rescue removed it): every run dropped, registering again. */
static void on_beat_result(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;

	beat_answered(d);
	if (d->stop == STOP_LEAVING)
		return; /* our row is being deleted: not news */
	if (!res) {
		if (!away)
			log_error("heartbeat: %s", chores_db(d->beat_lane)->last_error);
		return;
	}
	if (PQntuples(res) == 1) {
		/* the row carries the statement's time, which is after its send:
		 * our own view of the heartbeat's age is never the younger one */
		d->beat_ok_ms = *(const int64_t *)note;
		if (d->said_stale)
			log_info("heartbeat written again: claiming");
		d->said_stale = 0;
		send_rescue(d);
	} else {
		/* Another dispatcher found us silent for staleAfterSec and
		 * requeued everything we held. */
		log_warn("our dispatcher row was removed by a rescue (or taken over by another "
			 "life of instance %s): every claim we held was requeued; dropping their "
			 "runs and registering again",
			 d->cfg->instance_id);
		life_to(d, LIFE_RESCUED);
		d->life++;
		new_token(d);
		lose_everything(d, "its claim was rescued by another dispatcher");
		event_active(d->beat_ev, EV_TIMEOUT, 0);
	}
	if (d->pending)
		event_active(d->poll_ev, EV_TIMEOUT, 0); /* outcomes held back while away */
}

/* Why this dispatcher claims nothing now, into buf, or NULL while it
 * claims: written with each beat into its dispatcher row, where
 * position() of a queued row reads it (migration 007). */
static const char *claiming_nothing(const struct dispatcher *d, char *buf, size_t len)
{
	if (stopping(d))
		return "stopping";
	if (!d->client || exc_claim_share(d->client) > 0)
		return NULL;
	snprintf(buf, len, "no execserver connected%s%s%s", d->exec_why[0] ? " (" : "", d->exec_why,
		 d->exec_why[0] ? ")" : "");
	return buf;
}

/* The heartbeat, a chore on its lane (the rescue follows its answer). */
static void send_beat(struct dispatcher *d)
{
	char why[sizeof d->exec_why + 40];
	const char *params[3] = { d->cfg->instance_id, d->token,
				  claiming_nothing(d, why, sizeof why) };
	int64_t sent = now_ms();

	if (chores_add(d->beat_lane, d->sql[Q_BEAT], 3, params, &sent, sizeof sent, on_beat_result,
		       d) == 0)
		beat_to(d, BEAT_BEATING);
}

/* The requeue of the rows of our earlier registration: its answer, or
 * its look's when that found nothing or failed. */
static void on_requeue_own_result(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;

	d->own_out = 0;
	if (*(const unsigned *)note != d->life)
		return; /* our row was lost again meanwhile */
	if (!res) {
		if (!away)
			log_error("requeueing the rows of our earlier registration: %s",
				  chores_db(d->chores)->last_error);
		return; /* again at the next heartbeat (beat_cb) */
	}
	if (PQntuples(res) > 0)
		log_warn("requeued %d rows still held under instance %s from before our row was "
			 "removed",
			 PQntuples(res), d->cfg->instance_id);
	life_to(d, LIFE_RUNNING);
	sweep_moot(d); /* every row held under our instance was requeued */
	event_active(d->poll_ev, EV_TIMEOUT, 0);
}

/* The look of send_own answered: what it found is requeued (LIFE_OWNING and
 * own_out stay until that answers too). */
static void on_find_own_result(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;
	int rc = res && *(const unsigned *)note == d->life
			 ? requeue_found(d, res, note, sizeof d->life, on_requeue_own_result)
			 : 0;

	if (rc == 0)
		on_requeue_own_result(arg, res, away, note);
	else if (rc < 0)
		d->own_out = 0; /* again at the next heartbeat (beat_cb) */
}

/* Registered again after our row was removed: the rows still held under
 * our instance are requeued before anything is claimed (DQ_FIND_OWN, then
 * DQ_REQUEUE_CLAIMS of what it found, as at the start; chores: the
 * requeue may wait for a lock on job).  Those are the runs we dropped,
 * and claims of ours that committed after the snapshot of the rescue
 * that removed our row, which it did not see; nothing of this life is
 * claimed before (LIFE_OWNING), and every claim of the lives before has
 * committed or claims nothing (our row of this life is a new one). */
static void send_own(struct dispatcher *d)
{
	const char *params[2] = { d->cfg->instance_id, d->token };

	if (chores_add(d->chores, d->sql[Q_FIND_OWN], 2, params, &d->life, sizeof d->life,
		       on_find_own_result, d) == 0)
		d->own_out = 1;
}

static void on_reregister_result(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;
	int rc = took_register(d, res, away, *(const int64_t *)note);

	beat_answered(d);
	if (rc == -3) {
		taken_over(d);
		return;
	}
	if (rc == -1)
		log_error("heartbeat: %s", chores_db(d->beat_lane)->last_error);
	if (rc < 0)
		return;
	log_info("registered again as %s", d->cfg->instance_id);
	life_to(d, LIFE_OWNING);
	send_own(d);
	send_beat(d);
}

/* PgBouncer has refused our connections with its server_login_retry
 * (a PostgreSQL restart seen through it) for longer than half of
 * staleAfterSec: the other dispatchers may be refused as long, and the
 * first one back rescues the others' running jobs, which then run twice.
 * Said once per spell (docs/dispatch.md, "Poolers and the database's
 * health": set server_login_retry well below staleAfterSec / 2). */
static void say_login_retry(struct dispatcher *d)
{
	struct db *dbs[] = { &d->db, &d->db2, chores_db(d->chores), chores_db(d->beat_lane),
			     chores_db(d->rescue_lane) };
	int64_t longest = 0;

	for (size_t i = 0; i < sizeof dbs / sizeof dbs[0]; i++)
		if (db_login_retry_for(dbs[i]) > longest)
			longest = db_login_retry_for(dbs[i]);
	if (longest <= d->cfg->stale_after_sec * 1000LL / 2) {
		if (!longest)
			d->said_login_retry = 0;
		return;
	}
	if (d->said_login_retry++)
		return;
	log_warn("database: PgBouncer has refused our connections for %lld s (server login has "
		 "been failing, server_login_retry), longer than half of staleAfterSec (%d s): "
		 "other dispatchers are likely refused as long, and the first one back rescues "
		 "the others' running jobs, which then run again; set PgBouncer's "
		 "server_login_retry well below %d s (docs/dispatch.md, \"Poolers\")",
		 (long long)(longest / 1000), d->cfg->stale_after_sec, d->cfg->stale_after_sec / 2);
}

/* Every heartbeatSec: the heartbeat (registering again first when a
 * rescue removed our row); a tick with the last one still out is let
 * pass (its deadline bounds it). */
void beat_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dispatcher *d = arg;
	char stale[16];
	const char *params[5];
	int64_t sent = now_ms();

	(void)fd;
	(void)what;
	arm(d->beat_ev, d->cfg->heartbeat_sec * 1000LL);
	say_login_retry(d);
	if (d->listener)
		listener_keep(d->listener);
	if (d->stage == LIFE_OWNING && !d->own_out)
		send_own(d);
	/* a claim lost with its connection may be committed by its backend
	 * at any later time: swept every staleAfterSec from then on, and at
	 * every heartbeat while its places are in limbo (struct limbo) */
	if (d->lost_claims && is_registered(d) &&
	    (d->nlimbo || now_ms() - d->swept_ms >= d->cfg->stale_after_sec * 1000LL)) {
		sweep_want(d);
		event_active(d->poll_ev, EV_TIMEOUT, 0);
	}
	if (d->beat != BEAT_IDLE || d->stop == STOP_LEAVING)
		return;
	if (is_registered(d)) {
		send_beat(d);
		return;
	}
	register_params(d, stale, sizeof stale, params);
	if (chores_add(d->beat_lane, d->sql[Q_REGISTER], 5, params, &sent, sizeof sent,
		       on_reregister_result, d) == 0)
		beat_to(d, BEAT_REGISTERING);
}

/* The database (the chores' connection) is back, or a statement it
 * abandoned ended: claims lost with it are swept, the heartbeat goes at
 * once if it is not fresh, outcomes of a stop go on. */
void on_chores_up(void *arg)
{
	struct dispatcher *d = arg;

	if (first_contact(d))
		return;
	if (d->lost_claims)
		sweep_want(d); /* a local claim may have been lost with it */
	if (!beat_fresh(d) && d->beat == BEAT_IDLE)
		event_active(d->beat_ev, EV_TIMEOUT, 0);
	if (stopping(d))
		event_active(d->flush_ev, EV_TIMEOUT, 0);
}

/* The heartbeat's lane is (back) up: the heartbeat at once if it is not
 * fresh. */
void on_beat_lane_up(void *arg)
{
	struct dispatcher *d = arg;

	if (!first_contact(d) && !beat_fresh(d) && d->beat == BEAT_IDLE)
		event_active(d->beat_ev, EV_TIMEOUT, 0);
}
