/*
 * chore_results.c - the dispatcher's chores (chores.h) and the handlers of
 * their results: the heartbeat and registering again (on the beat's lane,
 * statements of the dispatcher table alone), the requeue of what our
 * instance held when registered again, the rescue after each
 * written beat (on a lane of its own: it may wait for a lock on job), the
 * start of runs, the cancel poll, the local services' claims, the sweep of
 * lost claims, the landed check, outcomes written apart (a refused batch,
 * the stop) and how a refused outcome is cut down, the janitor, and the
 * leave at a clean stop.  Invariants: at most one chore of each kind is
 * queued or on the wire (the *_out flags of struct dispatcher); a handler
 * never writes a held row except under its claim, and a result that is
 * not ours drops the run (drop_claim), never the rescuer's outcome.
 */
#include "autoconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "dispatch/dispatch_impl.h"
#include "dispatch/migrate.h"
#include "dispatch/queries.h"

/* What ask_landed asked about (state: one of set_outcome's literals). */
struct landed_note {
	int64_t id;
	int claim, attempts, uncount;
	const char *state;
};

static struct held *find(struct dispatcher *d, int64_t id, int claim);

/* The answer of ask_landed.  The row is kept (marked writing) until it
 * comes; no answer (the database away, the statement failed) is not "not
 * landed": the outcome is due again, written again at the next turn, and
 * asked about again. */
static void landed_cb(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;
	const struct landed_note *n = note;
	struct held *h = find(d, n->id, n->claim);

	if (!h)
		return;
	if (!res) {
		if (!away)
			log_error("job %lld: whether its outcome was written: %s", (long long)n->id,
				  chores_db(d->chores)->last_error);
		held_to(h, HELD_DUE);
		if (stopping(d) && !evtimer_pending(d->flush_ev, NULL))
			arm(d->flush_ev, FLUSH_RETRY_MS);
		else if (!stopping(d))
			event_active(d->poll_ev, EV_TIMEOUT, 0); /* due: the next turn carries it */
		return;
	}
	if (PQntuples(res) == 1) {
		count_outcome(d, n->state, n->uncount);
		log_info("job %lld attempt %d: outcome %s written by a statement whose reply the "
			 "lost connection took",
			 (long long)n->id, n->attempts, n->state);
	} else {
		d->st.dropped++;
		log_info("job %lld attempt %d: claim lost before its outcome (%s) was written "
			 "(cancelled or rescued); dropped",
			 (long long)n->id, n->attempts, n->state);
		attempt_ended(d, n->id, n->claim);
	}
	d->pending--;
	held_free(d, h);
	if (!stopping(d))
		event_active(d->poll_ev, EV_TIMEOUT, 0); /* its place is free now */
	maybe_done_stopping(d);
}

/* h's outcome was found not ours when written again after a statement
 * writing it lost its reply: a chore asks whether that statement's write
 * landed (the row carries h's outcome under h's claim), so that it counts
 * as written, not dropped (landed_cb).  0 when asked. */
int ask_landed(struct dispatcher *d, const struct held *h)
{
	char id[24], claim[16];
	const char *params[6] = { id, claim, h->state, h->error, h->receipt, d->cfg->instance_id };
	struct landed_note n = { h->id, h->claim, h->attempts, h->uncount, h->state };

	snprintf(id, sizeof id, "%lld", (long long)h->id);
	snprintf(claim, sizeof claim, "%d", h->claim);
	return chores_add(d->chores, d->sql[Q_LANDED], 6, params, &n, sizeof n, landed_cb, d);
}

static void local_claimed(void *arg, PGresult *res, int away, const void *note);

/* What a local claim asked for, and in which registration. */
struct local_note {
	int minprio;
	unsigned life;
};

/* Claims up to n rows of the local services of priority minprio or more
 * (a chore: a local service spawns here, off the hot path). */
static void claim_local_rows(struct dispatcher *d, unsigned n, int minprio)
{
	char limit[16], prio[16];
	const char *params[6] = {
		d->cfg->instance_id, limit, d->local_names, "true", prio, d->token
	};
	struct local_note note = { minprio, d->life };

	snprintf(limit, sizeof limit, "%u", n);
	snprintf(prio, sizeof prio, "%d", minprio);
	if (chores_add(d->chores, d->sql[Q_CLAIM], 6, params, &note, sizeof note, local_claimed,
		       d) == 0) {
		d->local_out = 1;
		d->st.claims++;
	}
}

/* Local services: localSlots in all, a quarter of them only for priority
 * >= 2 (so that interactive work always finds a local slot): the rows of
 * any priority up to the rest first, then (local_claimed) those of
 * priority >= 2 up to all of them.  One local claim at a time. */
void claim_local(struct dispatcher *d)
{
	unsigned slots = (unsigned)d->cfg->local_slots, reserve = slots / 4;

	if (d->local_out || !may_claim_now(d))
		return;
	if (d->local_running + reserve < slots)
		claim_local_rows(d, slots - reserve - d->local_running, -1000);
	else if (d->local_running < slots)
		claim_local_rows(d, slots - d->local_running, 2);
}

static void local_claimed(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;
	const struct local_note *n = note;
	int minprio = n->minprio, rows = res ? PQntuples(res) : 0;
	unsigned slots = (unsigned)d->cfg->local_slots;

	d->local_out = 0;
	if (!res && !away)
		log_error("claim: %s", chores_db(d->chores)->last_error);
	if (!res && away)
		claims_lost(d);
	if (n->life != d->life) {
		if (rows)
			log_info("%d local rows claimed before our dispatcher row was removed; "
				 "not run (requeued by the rescue or when we register again)",
				 rows);
		rows = 0;
	}
	d->st.claimed += (uint64_t)rows;
	for (int i = 0; i < rows; i++) {
		d->st.attempts += (uint64_t)atoi(PQgetvalue(res, i, 1));
		start_row(d, res, i, 0);
	}
	if (res && minprio < 2 && !stopping(d) && may_claim_now(d) && d->local_running < slots)
		claim_local_rows(d, slots - d->local_running, 2);
	if (d->claimed_unstarted && !evtimer_pending(d->start_ev, NULL))
		arm(d->start_ev, START_CHECK_MS);
	maybe_done_stopping(d);
}

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

/* DQ_REQUEUE_CLAIMS's parameters (maxa: a buffer of len for maxAttempts). */
void requeue_params(struct dispatcher *d, const char *ids, const char *claims, char *maxa,
		    size_t len, const char **params)
{
	snprintf(maxa, len, "%d", d->cfg->max_attempts);
	params[0] = d->cfg->instance_id;
	params[1] = ids;
	params[2] = claims;
	params[3] = maxa;
	params[4] = d->token;
}

/* The claims a look (DQ_FIND_OWN, DQ_FIND_LOST) found, in res, requeued
 * under exactly those claims: a chore answered to fn with the same note
 * (the life of the look).  1 when queued, 0 when res found none, -1 when
 * out of memory. */
static int requeue_found(struct dispatcher *d, PGresult *res, const void *note, size_t note_len,
			 chore_fn fn)
{
	char *ids, *claims, maxa[16];
	const char *params[5];
	int rc;

	if (PQntuples(res) == 0)
		return 0;
	if (claim_arrays(res, &ids, &claims) < 0)
		return -1;
	requeue_params(d, ids, claims, maxa, sizeof maxa, params);
	rc = chores_add(d->chores, d->sql[Q_REQUEUE], 5, params, note, note_len, fn, d) == 0 ? 1
											     : -1;
	free(ids);
	free(claims);
	return rc;
}

/* The note of DQ_CLAIMS_SETTLED: the life, the claims in limbo then. */
struct probe_note {
	unsigned life;
	size_t nlimbo;
};

/* The sweep's end: the answer of its requeue, or of its look when that
 * found nothing or failed. */
static void swept(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;

	(void)note;
	d->sweep_out = 0;
	if (res) {
		d->sweep_lost = 0;
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
 * requeue of the next registration (owned). */
static void lost_found(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;
	int rc;

	if (*(const unsigned *)note != d->life) {
		d->sweep_out = 0;
		return;
	}
	rc = res ? requeue_found(d, res, note, sizeof d->life, swept) : 0;
	if (rc == 0)
		swept(arg, res, away, note);
	else if (rc < 0)
		d->sweep_out = 0; /* tried again at the next turn (sweep_lost) */
}

/* The sweep's look, with no statement on the wire and every result
 * delivered (so every row this dispatcher claimed and knows is in its
 * list): the rows claimed under its instance by a claim it does not hold
 * (id and claims; an earlier claim of the same row whose outcome is still
 * to be written is not the row's claim) were claimed by a statement whose
 * result the lost connection took (the commit went through, the answer
 * did not).  Nobody else would ever free them while this dispatcher's
 * heartbeat lives: looked for (DQ_FIND_LOST) and requeued under exactly
 * those claims (DQ_REQUEUE_CLAIMS, lost_found) like a rescue; chores, and
 * no claim is sent until the last answer (swept). */
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
		       lost_found, d) == 0)
		d->sweep_out = 1;
	free(ids);
	free(claims);
	free(v);
	free(c);
}

/* The probe before a sweep while claims are in limbo: answered, the sweep
 * looks; the claims in limbo when it was sent are freed by the sweep's
 * answer if no statement held our row (limbo_probed), else they are
 * probed again at the next heartbeat (beat_cb). */
static void on_settled_answer(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;
	const struct probe_note *n = note;

	d->sweep_out = 0;
	if (n->life != d->life)
		return; /* tried again at the next turn (sweep_lost) */
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
	if (chores_add(d->chores, d->sql[Q_SETTLED], 2, params, &n, sizeof n, on_settled_answer,
		       d) == 0)
		d->sweep_out = 1;
}

static void lose_everything(struct dispatcher *d, const char *why)
{
	for (struct held *h = d->list; h; h = h->next)
		drop_claim(d, h, why);
}

static void rescue_done(void *arg, PGresult *res, int away, const void *note)
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
	const char *params[3] = { d->cfg->instance_id, stale, maxa };

	if (d->rescue_out || d->stop == STOP_LEAVING)
		return;
	snprintf(stale, sizeof stale, "%d", d->cfg->stale_after_sec);
	snprintf(maxa, sizeof maxa, "%d", d->cfg->max_attempts);
	if (chores_add(d->rescue_lane, d->sql[Q_RESCUE], 3, params, NULL, 0, rescue_done, d) == 0)
		d->rescue_out = 1;
}

static void beat_done(void *arg, PGresult *res, int away, const void *note)
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

	if (chores_add(d->beat_lane, d->sql[Q_BEAT], 3, params, &sent, sizeof sent, beat_done, d) ==
	    0)
		d->beat_out = 1;
}

/* The requeue of the rows of our earlier registration: its answer, or
 * its look's when that found nothing or failed. */
static void owned(void *arg, PGresult *res, int away, const void *note)
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
	d->sweep_lost = 0; /* every row held under our instance was requeued */
	event_active(d->poll_ev, EV_TIMEOUT, 0);
}

/* The look of send_own answered: what it found is requeued (LIFE_OWNING and
 * own_out stay until that answers too). */
static void own_found(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;
	int rc = res && *(const unsigned *)note == d->life
			 ? requeue_found(d, res, note, sizeof d->life, owned)
			 : 0;

	if (rc == 0)
		owned(arg, res, away, note);
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
		       own_found, d) == 0)
		d->own_out = 1;
}

static void reregistered(void *arg, PGresult *res, int away, const void *note)
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
	if (d->beat_out || d->stop == STOP_LEAVING)
		return;
	if (is_registered(d)) {
		send_beat(d);
		return;
	}
	register_params(d, stale, sizeof stale, params);
	if (chores_add(d->beat_lane, d->sql[Q_REGISTER], 5, params, &sent, sizeof sent,
		       reregistered, d) == 0)
		d->beat_out = 1;
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
	if (!beat_fresh(d) && !d->beat_out)
		event_active(d->beat_ev, EV_TIMEOUT, 0);
	if (stopping(d))
		event_active(d->flush_ev, EV_TIMEOUT, 0);
}

/* The heartbeat's lane is (back) up: the heartbeat at once if it is not
 * fresh. */
void on_beat_lane_up(void *arg)
{
	struct dispatcher *d = arg;

	if (!first_contact(d) && !beat_fresh(d) && !d->beat_out)
		event_active(d->beat_ev, EV_TIMEOUT, 0);
}

/* Ids and claims of the held rows at the execserver, for DQ_START/DQ_HELD. */
static int collect(struct dispatcher *d, int only_unstarted_running, int64_t *ids, int64_t *claim,
		   int max)
{
	int n = 0;

	for (struct held *h = d->list; h && n < max; h = h->next) {
		if ((!h->xj && !h->lr) || h->phase == HELD_LOST)
			continue;
		if (only_unstarted_running &&
		    (h->started || (h->xj && strcmp(exc_job_state(h->xj), "running") != 0)))
			continue;
		ids[n] = h->id;
		claim[n] = h->claim;
		n++;
	}
	return n;
}

static struct held *find(struct dispatcher *d, int64_t id, int claim)
{
	for (struct held *h = d->list; h; h = h->next)
		if (h->id == id && h->claim == claim)
			return h;
	return NULL;
}

/* The held rows a chore asks about (DQ_START, DQ_HELD), as its note:
 * n, then the ids, then the claims. */
struct asked {
	int n;
	int64_t v[]; /* ids: v[0 .. n), claims: v[n .. 2n) */
};

/* Collects the rows (as collect) into a new struct asked with their
 * arrays as parameters (aids, aclaim: malloc'd); its size in *len, NULL
 * when there is none or memory is short. */
static struct asked *ask_rows(struct dispatcher *d, int only_unstarted_running, size_t *len,
			      char **aids, char **aclaim)
{
	unsigned cap = d->at_exec + d->local_running; /* what collect() may find */
	struct asked *a = cap ? malloc(sizeof *a + 2 * cap * sizeof(int64_t)) : NULL;
	int64_t *claim = NULL;

	*aids = *aclaim = NULL;
	if (!a || !(claim = calloc(cap, sizeof *claim)))
		goto fail;
	a->n = collect(d, only_unstarted_running, a->v, claim, (int)cap);
	memcpy(a->v + a->n, claim, (size_t)a->n * sizeof *claim);
	free(claim);
	*aids = malloc(21 * (size_t)a->n + 3);
	*aclaim = malloc(21 * (size_t)a->n + 3);
	if (a->n == 0 || !*aids || !*aclaim)
		goto fail;
	db_int_array(*aids, a->v, a->n);
	db_int_array(*aclaim, a->v + a->n, a->n);
	*len = sizeof *a + 2 * (size_t)a->n * sizeof(int64_t);
	return a;
fail:
	free(a);
	free(*aids);
	free(*aclaim);
	*aids = *aclaim = NULL;
	return NULL;
}

static void started(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;
	const struct asked *a = note;

	d->start_out = 0;
	if (!res && !away)
		log_error("start: %s", chores_db(d->chores)->last_error);
	for (int i = 0; res && i < a->n; i++) {
		struct held *h = find(d, a->v[i], (int)a->v[a->n + i]);
		int row = -1;
		for (int r = 0; r < PQntuples(res) && row < 0; r++)
			if (strtoll(PQgetvalue(res, r, 0), NULL, 10) == a->v[i])
				row = r;
		/* a run that ended meanwhile counted itself (run_ended) */
		if (!h || h->started || (!h->xj && !h->lr))
			continue;
		if (row >= 0 && atoi(PQgetvalue(res, row, 1)) == 0) {
			/* locked by another transaction: not waited for; tried
			 * again at the next START_CHECK_MS */
			if (!h->said_locked++)
				log_info("job %lld attempt %d: its row is locked by another "
					 "transaction; written running once the lock is gone",
					 (long long)h->id, h->attempts);
		} else if (row >= 0) {
			h->started = 1;
			d->claimed_unstarted--;
		} else {
			drop_claim(d, h, "its claim was lost before it started");
		}
	}
	if (d->claimed_unstarted && !evtimer_pending(d->start_ev, NULL))
		arm(d->start_ev, START_CHECK_MS);
}

/* A chore about the held rows (as collect): sql with the first nparams of
 * ($1 instance, $2 ids[], $3 claims[]); fn gets the rows asked as its
 * note.  1 when queued (0: nothing held, or no memory). */
static int ask_chore(struct dispatcher *d, int only_unstarted_running, const char *sql, int nparams,
		     chore_fn fn)
{
	size_t len;
	char *aids, *aclaim;
	struct asked *a = ask_rows(d, only_unstarted_running, &len, &aids, &aclaim);
	int queued;

	if (!a)
		return 0;
	const char *params[3] = { d->cfg->instance_id, aids, aclaim };
	queued = chores_add(d->chores, sql, nparams, params, a, len, fn, d) == 0;
	free(a);
	free(aids);
	free(aclaim);
	return queued;
}

/* Every START_CHECK_MS while some held row is not written running: the
 * rows whose run started, in one statement (a chore). */
void start_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dispatcher *d = arg;

	(void)fd;
	(void)what;
	if (!d->start_out && ask_chore(d, 1, d->sql[Q_START], 3, started))
		d->start_out = 1;
	else if (d->claimed_unstarted)
		arm(d->start_ev, START_CHECK_MS);
}

static void polled(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;
	const struct asked *a = note;

	d->cancel_out = 0;
	if (!res) {
		if (!away)
			log_error("cancel poll: %s", chores_db(d->chores)->last_error);
		return;
	}
	for (int i = 0; i < a->n; i++) {
		int64_t id = a->v[i], claim = a->v[a->n + i];
		struct held *h = find(d, id, (int)claim);
		int ours = 0, row = -1;
		for (int r = 0; r < PQntuples(res) && row < 0; r++)
			if (strtoll(PQgetvalue(res, r, 0), NULL, 10) == id)
				row = r;
		if (row >= 0)
			ours = atoi(PQgetvalue(res, row, 1)) == claim &&
			       atoi(PQgetvalue(res, row, 2)) == 1;
		if (h && ours && !PQgetisnull(res, row, 4) && atoi(PQgetvalue(res, row, 4)) == 1 &&
		    h->xj && strcmp(exc_job_state(h->xj), "waiting") == 0)
			exc_query(h->xj); /* someone asked for its position */
		if (!h || ours)
			continue;
		if (row >= 0 && !PQgetisnull(res, row, 3)) {
			metrics_ms(&d->st.cancel_latency,
				   strtoll(PQgetvalue(res, row, 3), NULL, 10));
			drop_claim(d, h, "cancelled");
		} else {
			drop_claim(d, h, "its claim was rescued by another dispatcher");
		}
	}
}

/* What write_position asked about. */
struct position_note {
	int64_t id;
	int claim;
	unsigned gen; /* h->position_gen when sent */
};

static void position_written(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;
	const struct position_note *n = note;
	struct held *h = find(d, n->id, n->claim);

	if (!h)
		return; /* its run ended meanwhile */
	h->position_out = 0;
	if (n->gen != h->position_gen) {
		write_position(d, h); /* a newer one came meanwhile: it goes now */
		return;
	}
	if (!res && !away)
		log_error("job %lld: position %s not written, dropped: %s", (long long)h->id,
			  h->position, chores_db(d->chores)->last_error);
	if (away || (res && atoi(PQgetvalue(res, 0, 0)) == 0 && atoi(PQgetvalue(res, 0, 1)) == 1))
		return; /* kept: written again at the next cancel poll */
	/* written, the row not ours any more, or refused (it would be again) */
	free(h->position);
	h->position = NULL;
}

/* h's POSITION (h->position) into its row under its claim, a chore; a
 * row locked by another transaction is not waited for: the position
 * stays and is written again at the next cancel poll (cancel_cb). */
void write_position(struct dispatcher *d, struct held *h)
{
	char id[24], claim[16];
	const char *params[4] = { id, d->cfg->instance_id, claim, h->position };
	struct position_note n = { h->id, h->claim, h->position_gen };

	if (h->position_out || !h->position)
		return;
	snprintf(id, sizeof id, "%lld", (long long)h->id);
	snprintf(claim, sizeof claim, "%d", h->claim);
	if (chores_add(d->chores, d->sql[Q_POSITION], 4, params, &n, sizeof n, position_written,
		       d) == 0)
		h->position_out = 1;
}

/* Every cancelPollMs while rows are held: which are still ours (a
 * chore; none while nothing is held); a tick with the last poll still
 * out is let pass.  Positions not written yet go again. */
void cancel_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dispatcher *d = arg;

	(void)fd;
	(void)what;
	arm(d->cancel_ev, d->cfg->cancel_poll_ms);
	for (struct held *h = d->list; h; h = h->next)
		if (h->position && !h->started && h->phase != HELD_LOST)
			write_position(d, h);
	if (!d->cancel_out && ask_chore(d, 0, d->sql[Q_HELD], 2, polled))
		d->cancel_out = 1;
}

/* Replaces the bytes of s outside printable ASCII by '?'; 1 if any was. */
static int scrub_to_ascii(char *s)
{
	int changed = 0;

	for (; s && *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e) {
			*s = '?';
			changed = 1;
		}
	return changed;
}

/* Stopping, and h's outcome was refused in every form until give_up_ms:
 * logged whole and dropped.  The row stays held under our instance, and
 * our dispatcher row stays too (maybe_done_stopping), so that the rescue
 * requeues it after staleAfterSec and it runs again (docs/dispatch.md,
 * "Stopping"). */
static void give_up(struct dispatcher *d, struct held *h, const char *how)
{
	log_error("job %lld attempt %d: stopping: outcome %s (error %s, receipt %s) not written "
		  "%s within %d s (%s); given up: the row stays held by %s and is "
		  "rerun by the rescue after staleAfterSec (%d s)",
		  (long long)h->id, h->attempts, h->state, h->error ? h->error : "none",
		  h->receipt ? h->receipt : "none", how, STOP_GIVE_UP_MS / 1000,
		  chores_db(d->chores)->last_error, d->cfg->instance_id, d->cfg->stale_after_sec);
	d->pending--;
	d->gave_up = 1;
	held_free(d, h);
}

/* The database refused h's outcome alone: the next, smaller form of it
 * (docs/dispatch.md, "Outcomes the database refuses"): 1. without the
 * receipt, 2. with the error text in ASCII, 3. failed with error
 * outcome_not_stored; refused in every form (a trigger, a permission, a
 * statement timeout: not the outcome's fault), the original outcome is
 * kept and tried again after OUTCOME_RETRY_MS.  The row stays held by this
 * dispatcher meanwhile: never dropped (its run would be lost with the
 * claim still ours, so nobody would rescue it) and never requeued (it ran
 * already). */
static void cut_outcome(struct dispatcher *d, struct held *h)
{
	if (h->cut == 0) {
		h->orig_state = h->state;
		h->orig_error = h->error ? strdup(h->error) : NULL;
		h->orig_receipt = h->receipt ? strdup(h->receipt) : NULL;
	}
	switch (++h->cut) {
	case 1:
		if (h->receipt)
			log_warn("job %lld: receipt not storable (%s); writing the outcome "
				 "without it",
				 (long long)h->id, d->db.last_error);
		free(h->receipt);
		h->receipt = NULL;
		break;
	case 2:
		/* e.g. a name cut to a length in the middle of a character: not
		 * UTF-8, refused as text */
		if (scrub_to_ascii(h->error))
			log_warn("job %lld: error text not storable (%s); writing it with '?' "
				 "for its non-ASCII bytes",
				 (long long)h->id, d->db.last_error);
		break;
	case 3:
		log_warn("job %lld attempt %d: outcome %s not storable (%s); writing it as "
			 "failed, error outcome_not_stored",
			 (long long)h->id, h->attempts, h->orig_state, d->db.last_error);
		h->state = "failed";
		free(h->error);
		h->error = strdup("outcome_not_stored");
		break;
	default:
		free(h->error);
		free(h->receipt);
		h->state = h->orig_state;
		h->error = h->orig_error;
		h->receipt = h->orig_receipt;
		h->orig_error = h->orig_receipt = NULL;
		h->cut = 0;
		h->refused = 1;
		if (stopping(d) && now_ms() >= d->give_up_ms) {
			give_up(d, h, "in any form");
			break;
		}
		log_error("job %lld attempt %d: outcome %s not written in any form (%s); kept, "
			  "trying again in %d s (the row stays held by this dispatcher)",
			  (long long)h->id, h->attempts, h->state, d->db.last_error,
			  OUTCOME_RETRY_MS / 1000);
		h->retry_at_ms = now_ms() + OUTCOME_RETRY_MS;
		if (stopping(d) && h->retry_at_ms > d->give_up_ms)
			h->retry_at_ms = d->give_up_ms;
		break;
	}
}

static void flushed(void *arg, PGresult *res, int away, const void *note);

/* Stopping: the outcomes that could not be written because the database
 * is away or does not answer in time, STOP_GIVE_UP_MS after the signal
 * (or after their run ended, if later), are given up as a refused one is
 * (give_up): the stop ends in bounded time, and the rescue reruns them, as
 * after a crash (docs/dispatch.md, "Stopping"). */
static void give_up_unwritten(struct dispatcher *d)
{
	int64_t now = now_ms();
	struct held *next;

	for (struct held *h = d->list; h; h = next) {
		next = h->next;
		if (h->phase == HELD_DUE && h->cut == 0 && now >= d->give_up_ms &&
		    now >= h->due_ms + STOP_GIVE_UP_MS)
			give_up(d, h,
				h->refused ? "in any form" : "because the database did not answer");
	}
}

/* Writes every outcome due, FINISH_BATCH per statement, one statement at
 * a time on the chores' connection (the stop, and a batch the database
 * refused).  The database away: the rest waits for FLUSH_RETRY_MS.  A
 * batch the database refuses is written one row at a time, and a row
 * refused alone is cut down (cut_outcome). */
void flush_outcomes(struct dispatcher *d)
{
	struct fin *f = &d->flush_fin;
	const char *params[8];
	int64_t next = 0;

	if (d->flush_out)
		return;
	if (stopping(d))
		give_up_unwritten(d);
	if (fin_build(d, f, d->flush_per) > 0) {
		fin_params(d, f, params);
		if (chores_add(d->chores, d->sql[Q_FINISH], 8, params, NULL, 0, flushed, d) == 0)
			d->flush_out = 1;
		fin_free_arrays(f);
		if (d->flush_out)
			return;
		fin_abort(f, 0);
		if (!evtimer_pending(d->flush_ev, NULL))
			arm(d->flush_ev, FLUSH_RETRY_MS);
		return;
	}
	d->flush_per = FINISH_BATCH;
	for (struct held *h = d->list; h; h = h->next)
		if (h->phase == HELD_DUE && (!next || h->retry_at_ms < next))
			next = h->retry_at_ms;
	if (next && !evtimer_pending(d->flush_ev, NULL))
		arm(d->flush_ev, next > now_ms() ? next - now_ms() : 0);
	maybe_done_stopping(d);
}

static void flushed(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;
	struct fin *f = &d->flush_fin;
	struct held *first = f->rows[0];

	(void)note;
	d->flush_out = 0;
	if (res) {
		fin_apply(d, f, res, 0);
	} else if (away) {
		fin_abort(f, 1);
		outcomes_waiting(d, chores_db(d->chores)->last_error);
		if (!evtimer_pending(d->flush_ev, NULL))
			arm(d->flush_ev, FLUSH_RETRY_MS);
		return;
	} else {
		fin_abort(f, 0);
		if (d->flush_per > 1)
			d->flush_per = 1;
		else
			cut_outcome(d, first); /* the row written alone */
	}
	flush_outcomes(d);
}

void flush_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	flush_outcomes(arg);
}

static void janitor_done(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;

	(void)note;
	/* a full batch: more may be due; the next one in a second, so that
	 * more than a batch an hour of finished rows does not pile up; the
	 * database away: again in a second too */
	arm(d->janitor_ev, (res && atoi(PQcmdTuples(res)) >= JANITOR_BATCH) || (!res && away)
				   ? JANITOR_AGAIN_MS
				   : JANITOR_SEC * 1000LL);
	if (res && atoi(PQcmdTuples(res)) > 0)
		log_info("janitor: removed %s finished rows older than %d days", PQcmdTuples(res),
			 d->cfg->retain_done_days);
	else if (!res && !away)
		log_error("janitor: %s", chores_db(d->chores)->last_error);
}

void janitor_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dispatcher *d = arg;
	char days[16];
	const char *params[1] = { days };

	(void)fd;
	(void)what;
	snprintf(days, sizeof days, "%d", d->cfg->retain_done_days);
	if (chores_add(d->chores, d->sql[Q_JANITOR], 1, params, NULL, 0, janitor_done, d) < 0)
		arm(d->janitor_ev, JANITOR_AGAIN_MS);
}

/* ---- stopping ---- */

static void left(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;

	(void)away;
	(void)note;
	if (res && PQntuples(res) > 0)
		log_warn("leaving: requeued %d rows held under instance %s by claims whose result "
			 "a lost connection took",
			 PQntuples(res), d->cfg->instance_id);
	event_base_loopbreak(d->base);
}

static void left_hot(void *arg, PGresult *res, int away)
{
	left(arg, res, away, NULL);
	PQclear(res);
}

/* The leave goes on a connection that is up: the heartbeat's lane, else
 * a hot connection (idle: nothing is held), so that the stop never waits
 * for a connection attempt under way (the heartbeat's lane connects at
 * the first beat, each host of the connection string within its
 * connect_timeout).  With none up, on the heartbeat's lane: it waits for
 * an attempt under way, or fails at once while the database is away.  0
 * when sent or queued. */
static int send_leave(struct dispatcher *d)
{
	char maxa[16];
	const char *params[3] = { d->cfg->instance_id, d->token, maxa };

	snprintf(maxa, sizeof maxa, "%d", d->cfg->max_attempts);
	if (!db_up(chores_db(d->beat_lane)))
		for (int t = 0; t < HOT_CONNS; t++)
			if (db_up(d->turns[t].db) && !db_busy(d->turns[t].db))
				return db_send(d->turns[t].db, d->sql[Q_LEAVE], 3, params, left_hot,
					       d);
	return chores_add(d->beat_lane, d->sql[Q_LEAVE], 3, params, NULL, 0, left, d);
}

/* Stopping and nothing held, on the wire or waiting to be claimed: our
 * dispatcher row is deleted (send_leave), then the loop ends.  A rescue
 * on its lane is not waited for: freed with the lane, it commits or not
 * at the server, either way by a judgment that held when it started. */
void maybe_done_stopping(struct dispatcher *d)
{
	if (!stopping(d) || d->list || turn_busy(d) || d->flush_out || d->local_out ||
	    d->sweep_out || d->stop == STOP_LEAVING)
		return;
	if (d->gave_up)
		log_warn("stopping: outcomes or runs were given up; our dispatcher row stays, so "
			 "that the rescue reruns their rows");
	else if (is_registered(d) && send_leave(d) == 0) {
		stop_to(d, STOP_LEAVING);
		return;
	}
	event_base_loopbreak(d->base);
}
