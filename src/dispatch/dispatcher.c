/*
 * dispatcher.c - see dispatcher.h.
 *
 * One event loop, its database connections (docs/dispatch.md, "The event
 * loop"), one libexecclient client.  The rows this dispatcher holds are a
 * list of `struct held`, each in one phase of enum held_phase (phases.h:
 * at the execserver, then its outcome waiting, on the wire, asked about);
 * a phase changes only through held_to, which checks it against the table
 * of legal transitions.  A held row is freed once its outcome is written
 * or found not to be ours any more.  Invariants:
 *  - admission: when a claim is made, the rows of each service at the
 *    execservers never exceed that service's claim share
 *    (exc_claim_share_service), nor all of them together the overall one
 *    (exc_claim_share); rows of a service no execserver runs (yet) are
 *    claimed one at a time (struct admission).  The places a claim may
 *    take count from its send until its rows are held, and a claim lost
 *    with its connection keeps them (struct limbo) until a probe finds no
 *    statement of ours holding our row and the sweep after it requeued
 *    what the claim committed; so the table never shows more rows held
 *    than the share, as long as the share does not shrink (an execserver
 *    lost) and no lost claim reaches the server only after that probe (a
 *    statement still in the network then): such rows are requeued by the
 *    sweep every staleAfterSec;
 *  - nothing is claimed while the heartbeat is older than staleAfterSec/2
 *    or while no execserver is connected;
 *  - every write to a held row carries its claim (runner_instance, claims,
 *    state; claims never repeats for a row, attempts may):
 *    a row that is not ours any more is never written, its run is
 *    cancelled at the execserver and its result dropped;
 *  - our dispatcher row exists as long as we hold rows (it is deleted
 *    only at a clean stop with nothing held), so every held row can be
 *    rescued if we die;
 *  - every statement about our own row or the rows of "me" names our
 *    row of this life (instance and token), and a claim holds that row
 *    FOR KEY SHARE while it runs, so no rescue deletes it under a claim
 *    in flight and no other life of the instance takes it over; nothing
 *    is claimed or swept unless registered, with the requeue of the rows
 *    the instance left done (not LIFE_OWNING) and no sweep of lost claims
 *    waiting.
 * This file is the top of the files (the map in dispatch_impl.h): the
 * setup, the turn (poll_cb: the sweep, the local claims, the hot path's
 * next statement), and the wiring of every timer, signal and connection
 * callback to the file that handles it; the files below never call up.
 */
#include "autoconfig.h"
#include "dispatch/dispatcher.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include <execserver/client.h>

#include "common/clock.h"
#include "common/log.h"
#include "dispatch/chores.h"
#include "dispatch/db.h"
#include "dispatch/dispatch_impl.h"
#include "dispatch/listen.h"
#include "dispatch/local_run.h"
#include "dispatch/metrics.h"
#include "dispatch/queries.h"
#include "dispatch/schedules.h"

/* ---- the loop's callbacks: the turn, the database, the execservers ---- */

/* How often "no execserver connected" is said again while it lasts: 10
 * polls, between 1 s and a minute. */
static int64_t no_exec_say_ms(const struct dispatcher *d)
{
	int64_t ms = 10LL * d->cfg->poll_ms;

	return ms < 1000 ? 1000 : ms > 60000 ? 60000 : ms;
}

/* A turn of the hot path: at pollMs, at an outcome, at a notification,
 * when the database is back.  It goes on a hot connection with nothing on
 * the wire; while both have a turn on the wire it only notes that it was
 * called (on_turn_result then runs it again). */
static void poll_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dispatcher *d = arg;
	struct admission a;
	struct turn *t = NULL;
	int may_claim = 0;

	(void)fd;
	(void)what;
	if (!stopping(d) && turn_busy(d) && !(t = idle_turn(d))) {
		d->poll_again = 1;
		return;
	}
	if (stopping(d)) {
		/* an outcome that arrived before the stop began */
		if (d->pending)
			flush_outcomes(d);
		return;
	}
	evtimer_del(d->poll_ev);
	/* only with no result outstanding: every claim that came back is held;
	 * and only as a registered dispatcher of this life (its statement
	 * names our row: another life of the instance is left alone); while
	 * claims are in limbo, not beside our own heartbeat, whose update
	 * holds our row and would make the probe miss it (beat_answered) */
	if (d->sweep == SWEEP_WANTED && is_registered(d) && d->stage != LIFE_OWNING &&
	    !turn_busy(d) && !d->local_out && !(d->nlimbo && d->beat != BEAT_IDLE))
		sweep_lost_claims(d);
	if (admission(d, &a) < 0) {
		admission_free(&a);
		log_error("out of memory");
		arm(d->poll_ev, jittered(d, d->cfg->poll_ms));
		return;
	}
	d->st.share = a.share;
	d->st.at_exec = d->at_exec;
	d->st.services = (unsigned)d->nservices;
	d->st.statements = d->db.statements + d->db2.statements + chores_db(d->chores)->statements +
			   chores_db(d->beat_lane)->statements +
			   chores_db(d->rescue_lane)->statements;
	d->st.illegal_transitions = d->illegal + d->db.moves.illegal + d->db2.moves.illegal +
				    chores_db(d->chores)->moves.illegal +
				    chores_db(d->beat_lane)->moves.illegal +
				    chores_db(d->rescue_lane)->moves.illegal;
	d->st.db_up = db_up(&d->db);
	if (!beat_fresh(d)) {
		if (!d->said_stale++)
			log_warn("heartbeat not written for %d s or more: starting nothing new",
				 d->cfg->stale_after_sec / 2);
	} else if (a.share == 0) {
		/* said once a connection failed or closed (not while the
		 * first ones are still being made), and again now and then */
		if (d->exec_why[0] && now_ms() >= d->no_exec_said_ms + no_exec_say_ms(d)) {
			log_warn("no execserver connected: claiming nothing (%s)", d->exec_why);
			d->no_exec_said_ms = now_ms();
		}
	} else {
		d->no_exec_said_ms = 0;
		/* no claim while a sweep of lost claims waits or is out (it
		 * would requeue the rows of a claim it did not know of, and
		 * claims going on would put it off for good) */
		may_claim = a.total > 0 && may_claim_now(d);
	}
	if (d->cfg->nlocal && may_claim_now(d))
		claim_local(d);
	if (!t)
		t = idle_turn(d);
	if (d->pending && !t)
		outcomes_waiting(d, d->db.last_error);
	if (!t || !send_turn(d, t, may_claim ? &a : NULL))
		arm(d->poll_ev, d->pending && !t ? FLUSH_RETRY_MS : jittered(d, d->cfg->poll_ms));
	admission_free(&a);
}

/* The database is (back) up: outcomes held back and claims go on. */

static void on_db_up(void *arg)
{
	struct dispatcher *d = arg;

	if (first_contact(d)) {
		contact_next(d);
		return;
	}
	if (d->lost_claims)
		sweep_want(d); /* a claim lost with it may have committed since */
	event_active(stopping(d) ? d->flush_ev : d->poll_ev, EV_TIMEOUT, 0);
}

/* notify: a submission was committed: claim now (poll_cb decides whether
 * admission allows a query at all). */
static void on_submit(void *arg)
{
	struct dispatcher *d = arg;

	if (!stopping(d) && !first_contact(d)) {
		d->other_due_ms = 0; /* it may be of a service not seen yet */
		event_active(d->poll_ev, EV_TIMEOUT, 0);
	}
}

/* An execserver connection came up: claim at once (its share is new),
 * not at the next poll.  One that failed or closed: its reason is kept,
 * for the line that says why nothing is claimed (poll_cb). */
static void on_exec_conn(void *arg, enum exc_conn_event ev, const struct exc_conn_info *info)
{
	struct dispatcher *d = arg;

	if (ev == EXC_CONN_UP) {
		on_submit(d);
		return;
	}
	if (ev != EXC_CONN_FAILED && ev != EXC_CONN_DOWN)
		return;
	if (ev == EXC_CONN_FAILED && info->code == 401)
		snprintf(d->exec_why, sizeof d->exec_why, "%s: 401, the authToken was refused",
			 info->address);
	else
		snprintf(d->exec_why, sizeof d->exec_why, "%s: %s%s (%d)", info->address,
			 ev == EXC_CONN_DOWN ? "closed: " : "", info->message ? info->message : "",
			 info->code);
}

/* Children of local runs: each reaped one goes to its run. */
static void chld_cb(evutil_socket_t sig, short what, void *arg)
{
	struct dispatcher *d = arg;
	pid_t pid;
	int status;

	(void)sig;
	(void)what;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		for (struct held *h = d->list; h; h = h->next)
			if (h->lr && local_reaped(h->lr, pid, status))
				break;
}

/* ---- setup ---- */

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
	[Q_ENDED] = DQ_ATTEMPT_ENDED,
	[Q_PROGRESS] = DQ_PROGRESS_WRITE,
};

/* d->sql: each statement in the configured schema.  -1 when memory is
 * short. */
static int expand_all(struct dispatcher *d)
{
	const char *s = d->cfg->schema;

	int rc = 0;

	for (int q = 0; q < Q_COUNT; q++)
		if (!(d->sql[q] = dq_expand(q_text[q], s)))
			rc = -1;
	return rc;
}

static void client_log(void *arg, enum exc_log_level level, const char *line)
{
	(void)arg;
	log_msg(level == EXC_LOG_ERROR  ? LOG_LVL_ERROR
		: level == EXC_LOG_WARN ? LOG_LVL_WARN
		: level == EXC_LOG_INFO ? LOG_LVL_INFO
					: LOG_LVL_DEBUG,
		"client: %s", line);
}

int dispatcher_run(const struct dispatch_config *cfg)
{
	struct dispatcher d;
	struct exc_options o;
	int rc = 1, timeout_ms = cfg->stale_after_sec * 1000;

	memset(&d, 0, sizeof d);
	d.cfg = cfg;
	d.flush_per = FINISH_BATCH;
	d.rnd = (unsigned)getpid() ^ (unsigned)clock_mono_us();
	if (gethostname(d.host, sizeof d.host - 1) < 0)
		strcpy(d.host, "unknown");
	snprintf(d.pid, sizeof d.pid, "%ld", (long)getpid());
	new_token(&d);
	make_client_id(&d);
	const char **names = calloc(cfg->nlocal + 1, sizeof *names);
	for (size_t i = 0; names && i < cfg->nlocal; i++)
		names[i] = cfg->local[i].name;
	d.local_names = names ? db_text_array(names, (int)cfg->nlocal) : NULL;
	free(names);
	for (int t = 0; t < HOT_CONNS; t++) {
		d.turns[t].d = &d;
		d.turns[t].db = t ? &d.db2 : &d.db;
	}
	if (!d.local_names || expand_all(&d) < 0 || db_init(&d.db, "hot1", cfg->database) < 0 ||
	    db_init(&d.db2, "hot2", cfg->database) < 0) {
		log_error("out of memory");
		goto out;
	}
	d.base = event_base_new();
	/* a statement not answered within staleAfterSec: the connection is
	 * taken for lost (by then our heartbeat is stale anyway) */
	if (!d.base || db_attach(&d.db, d.base, timeout_ms, on_db_up, &d) < 0 ||
	    db_attach(&d.db2, d.base, timeout_ms, on_db_up, &d) < 0 ||
	    !(d.chores = chores_new(d.base, "chores", cfg->database, timeout_ms, on_chores_up,
				    &d)) ||
	    !(d.beat_lane = chores_new(d.base, "beat", cfg->database, timeout_ms, on_beat_lane_up,
				       &d)) ||
	    !(d.rescue_lane = chores_new(d.base, "rescue", cfg->database, timeout_ms, NULL,
					 NULL))) {
		log_error("out of memory");
		goto out;
	}
	exc_options_init(&o);
	o.auth_token = cfg->auth_token;
	o.connect_timeout_sec = (unsigned)cfg->connect_timeout_sec;
	o.log = client_log;
	o.log_level = (enum exc_log_level)cfg->log_level;
	o.client_id = d.client_id;
	o.on_conn = on_exec_conn;
	o.arg = &d;
	d.client = d.base ? exc_client_new(d.base, &o) : NULL;
	if (!d.client) {
		log_error("cannot create the client: %s", strerror(errno));
		goto out;
	}
	for (size_t i = 0; i < cfg->execservers.count; i++)
		if (exc_client_add_address(d.client, cfg->execservers.items[i]) < 0) {
			log_error("execservers[%zu]: %s", i, exc_client_last_error(d.client));
			goto out;
		}
	d.poll_ev = evtimer_new(d.base, poll_cb, &d);
	d.beat_ev = evtimer_new(d.base, beat_cb, &d);
	d.cancel_ev = evtimer_new(d.base, cancel_cb, &d);
	d.start_ev = evtimer_new(d.base, start_cb, &d);
	d.flush_ev = evtimer_new(d.base, flush_cb, &d);
	d.janitor_ev = evtimer_new(d.base, janitor_cb, &d);
	d.sig_term = evsignal_new(d.base, SIGTERM, signal_cb, &d);
	d.sig_int = evsignal_new(d.base, SIGINT, signal_cb, &d);
	d.sig_hup = evsignal_new(d.base, SIGHUP, signal_cb, &d);
	d.sig_chld = evsignal_new(d.base, SIGCHLD, chld_cb, &d);
	d.contact_ev = evtimer_new(d.base, contact_cb, &d);
	d.stop_ev = evtimer_new(d.base, stop_cb, &d);
	if (!d.stop_ev || !d.poll_ev || !d.beat_ev || !d.cancel_ev || !d.start_ev || !d.flush_ev ||
	    !d.janitor_ev || !d.sig_term || !d.sig_int || !d.sig_hup || !d.contact_ev ||
	    !(d.schedules = schedules_start(&d))) {
		log_error("out of memory");
		goto out;
	}
	evsignal_add(d.sig_term, NULL);
	evsignal_add(d.sig_int, NULL);
	evsignal_add(d.sig_hup, NULL);
	if (d.sig_chld)
		evsignal_add(d.sig_chld, NULL);
	if (cfg->notify &&
	    !(d.listener = listener_new(d.base, cfg->database, cfg->schema, on_submit, &d))) {
		log_error("out of memory");
		goto out;
	}
	if (cfg->metrics) {
		char err[300];
		d.metrics = metrics_start(d.base, cfg, &d.st, &d.client, d.chores, err, sizeof err);
		if (!d.metrics) {
			log_error("%s", err);
			goto out;
		}
	}
	log_info("execdispatch %s: instance %s (execserver client id %s), schema %s, %zu "
		 "execserver address%s; connecting to the database",
		 PACKAGE_VERSION, cfg->instance_id, d.client_id, cfg->schema,
		 cfg->execservers.count, cfg->execservers.count == 1 ? "" : "es");
	/* the first contact, in the loop (contact_next, then begin) */
	d.contact_t0_ms = now_ms();
	arm(d.contact_ev, CONTACT_CHECK_MS);
	contact_next(&d);
	event_base_dispatch(d.base);
	rc = d.exit_status;
out:
	metrics_stop(d.metrics);
	listener_free(d.listener);
	if (d.client)
		exc_client_free(d.client);
	struct event *evs[] = { d.poll_ev,  d.beat_ev,    d.cancel_ev,  d.start_ev,
				d.flush_ev, d.janitor_ev, d.sig_term,   d.sig_int,
				d.sig_hup,  d.sig_chld,   d.contact_ev, d.stop_ev };
	for (struct held *h = d.list; h; h = h->next)
		if (h->lr)
			local_cancel(h->lr); /* a forced exit: no local job outlives us */
	for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
		if (evs[i])
			event_free(evs[i]);
	progress_write_stop(&d);
	while (d.list)
		held_discard(&d, d.list);
	db_close(&d.db); /* their events first */
	db_close(&d.db2);
	chores_free(d.chores);
	chores_free(d.beat_lane);
	chores_free(d.rescue_lane);
	schedules_stop(d.schedules); /* after the chores: none of its callbacks runs later */
	for (int t = 0; t < HOT_CONNS; t++)
		turn_release(&d.turns[t]);
	limbo_free(&d, d.nlimbo);
	free(d.limbo);
	if (d.base)
		event_base_free(d.base);
	free(d.local_names);
	for (size_t i = 0; i < d.nservices; i++)
		free(d.services[i]);
	free(d.services);
	contact_forget(&d);
	for (int q = 0; q < Q_COUNT; q++)
		free(d.sql[q]);
	return rc;
}
