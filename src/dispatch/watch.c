/*
 * watch.c - what the dispatcher writes and reads about its held rows
 * while they run: the start of a run written (running, DQ_START, every
 * START_CHECK_MS while a row is not), the cancel poll (DQ_HELD, every
 * cancelPollMs: which rows are still ours; a cancelled or rescued one has
 * its run stopped) and a POSITION written into its row (DQ_POSITION).
 * Each is a chore (chores.h); at most one start write and one cancel poll
 * are out at a time (start_out, cancel_out).  Invariants: every write
 * names the row's claim; a row found not ours has its run stopped
 * (drop_claim), its row never written.  Calls held.c only (the file map
 * in dispatch_impl.h).
 */
#include "autoconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <execserver/client.h>

#include "common/log.h"
#include "dispatch/dispatch_impl.h"

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

static void on_start_result(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;
	const struct asked *a = note;

	d->start_out = 0;
	if (!res && !away)
		log_error("start: %s", chores_db(d->chores)->last_error);
	for (int i = 0; res && i < a->n; i++) {
		struct held *h = held_find(d, a->v[i], (int)a->v[a->n + i]);
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
	if (!d->start_out && ask_chore(d, 1, d->sql[Q_START], 3, on_start_result))
		d->start_out = 1;
	else if (d->claimed_unstarted)
		arm(d->start_ev, START_CHECK_MS);
}

static void on_cancel_poll_result(void *arg, PGresult *res, int away, const void *note)
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
		struct held *h = held_find(d, id, (int)claim);
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

static void on_position_write_result(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;
	const struct position_note *n = note;
	struct held *h = held_find(d, n->id, n->claim);

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
	if (chores_add(d->chores, d->sql[Q_POSITION], 4, params, &n, sizeof n,
		       on_position_write_result, d) == 0)
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
	if (!d->cancel_out && ask_chore(d, 0, d->sql[Q_HELD], 2, on_cancel_poll_result))
		d->cancel_out = 1;
}
