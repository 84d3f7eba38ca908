/*
 * stopping.c - the stop (docs/dispatch.md, "Stopping"): the signals, the
 * bound on runs still going (stopTimeoutSec, stop_cb), the end once
 * nothing is held (maybe_done_stopping: the leave, then the loop ends);
 * and the janitor, the hourly removal of finished rows.  Invariants: our
 * dispatcher row is deleted only at a clean stop with nothing held, on
 * the wire or given up; the stop moves only through stop_to (phases.h).
 * Every file above may ask whether the stop is done (maybe_done_stopping)
 * after it freed a held row or ended a statement; this file calls only
 * held.c (the file map in dispatch_impl.h).
 */
#include "autoconfig.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include <event2/event.h>

#include <execserver/client.h>

#include "common/log.h"
#include "dispatch/dispatch_impl.h"

/* stopTimeoutSec after the stop signal with runs still going (a long
 * job, or a DONE that never comes): they are left for the rescue, as
 * after a crash.  The client is freed first (the library cancels its
 * running jobs at the execservers, best effort, and calls nothing back);
 * their rows stay held under our instance and our dispatcher row stays
 * (gave_up), so that another dispatcher requeues them after
 * staleAfterSec; a local run is killed and its result dropped.  Nothing
 * is requeued here: a run whose end we did not see may still go on, and
 * only the rescue may start a job again then (docs/dispatch.md,
 * "Stopping"). */
void stop_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dispatcher *d = arg;
	struct held *next;

	(void)fd;
	(void)what;
	if (!d->at_exec && !d->local_running)
		return;
	log_error("stopping: %u jobs still running %d s after the signal (stopTimeoutSec): "
		  "cancelling them at the execservers and leaving their rows held for the rescue "
		  "(after staleAfterSec, %d s)",
		  d->at_exec + d->local_running, d->cfg->stop_timeout_sec, d->cfg->stale_after_sec);
	exc_client_free(d->client);
	d->client = NULL;
	for (struct held *h = d->list; h; h = next) {
		next = h->next;
		if (h->lr && h->phase != HELD_LOST) {
			held_to(h, HELD_LOST); /* its end drops it (run_ended) */
			local_cancel(h->lr);
		}
		if (!h->xj)
			continue;
		log_warn("job %lld attempt %d: left held under instance %s for the rescue",
			 (long long)h->id, h->attempts, d->cfg->instance_id);
		h->xj = NULL;
		d->at_exec--;
		if (!h->started)
			d->claimed_unstarted--;
		held_free(d, h);
	}
	d->gave_up = 1;
	maybe_done_stopping(d);
}

/* SIGTERM, SIGINT: the stop begins (a second one: the loop ends at once);
 * SIGHUP: the log file is opened again. */
void signal_cb(evutil_socket_t sig, short what, void *arg)
{
	struct dispatcher *d = arg;

	(void)what;
	if (sig == SIGHUP) {
		log_reopen();
		return;
	}
	if (stopping(d)) {
		log_warn("second signal: exiting now; the rows still held are rescued after %d s",
			 d->cfg->stale_after_sec);
		event_base_loopbreak(d->base);
		return;
	}
	stop_to(d, STOP_STOPPING);
	d->give_up_ms = now_ms() + STOP_GIVE_UP_MS;
	log_info("stopping: giving back claims not started, waiting for %u running jobs (at "
		 "most %d s)",
		 d->at_exec - d->claimed_unstarted, d->cfg->stop_timeout_sec);
	evtimer_del(d->poll_ev);
	arm(d->stop_ev, d->cfg->stop_timeout_sec * 1000LL);
	release_waiting(d);
	maybe_done_stopping(d);
}

static void on_janitor_result(void *arg, PGresult *res, int away, const void *note)
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

/* Every hour (and at the start): finished rows older than retainDoneDays
 * removed, a batch at a time (a chore). */
void janitor_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dispatcher *d = arg;
	char days[16];
	const char *params[1] = { days };

	(void)fd;
	(void)what;
	snprintf(days, sizeof days, "%d", d->cfg->retain_done_days);
	if (chores_add(d->chores, d->sql[Q_JANITOR], 1, params, NULL, 0, on_janitor_result, d) < 0)
		arm(d->janitor_ev, JANITOR_AGAIN_MS);
}

static void on_leave_result(void *arg, PGresult *res, int away, const void *note)
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

static void on_leave_hot_result(void *arg, PGresult *res, int away)
{
	on_leave_result(arg, res, away, NULL);
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
	const char *params[4] = { d->cfg->instance_id, d->token, maxa, d->cfg->retry_limits };

	snprintf(maxa, sizeof maxa, "%d", d->cfg->retry.max_attempts);
	if (!db_up(chores_db(d->beat_lane)))
		for (int t = 0; t < HOT_CONNS; t++)
			if (db_up(d->turns[t].db) && !db_busy(d->turns[t].db))
				return db_send(d->turns[t].db, d->sql[Q_LEAVE], 4, params,
					       on_leave_hot_result, d);
	return chores_add(d->beat_lane, d->sql[Q_LEAVE], 4, params, NULL, 0, on_leave_result, d);
}

/* Stopping and nothing held, on the wire or waiting to be claimed: our
 * dispatcher row is deleted (send_leave), then the loop ends.  A rescue
 * on its lane is not waited for: freed with the lane, it commits or not
 * at the server, either way by a judgment that held when it started. */
void maybe_done_stopping(struct dispatcher *d)
{
	if (!stopping(d) || d->list || turn_busy(d) || d->flush_out || d->local_out ||
	    sweep_is_out(d) || d->stop == STOP_LEAVING)
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
