/*
 * hot.c - the hot path (docs/dispatch.md, "The event loop"): admission's
 * figures for the next claim (the places held, on the wire and in limbo,
 * against the claim share), the turns (one statement on each of the
 * HOT_CONNS connections: the outcomes due and the claims admission
 * allows), their results, the claims lost with their connection kept in
 * limbo; and the local services' claims, a chore each.  Invariants: a
 * turn's claims are reserved from its send until its result is handled
 * (on_turn_result), and a claim lost with its connection stays reserved in
 * limbo until the sweep frees it (liveness.c); a claim sent in an earlier
 * life is not run.  Calls runs.c, outcomes.c, stopping.c and held.c (the
 * file map in dispatch_impl.h).
 */
#include "autoconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <execserver/client.h>

#include "common/log.h"
#include "dispatch/admission.h"
#include "dispatch/dispatch_impl.h"

/* Whether h holds a place of the claim share: its run is at an execserver,
 * or its run ended and its row is still held in the table because its
 * outcome is not written, unless the place is taken in the same statement
 * that writes it (a claiming turn carries it, or it is due now and among
 * the first FINISH_BATCH due (*due counts them, in fin_build's order): the
 * next turn carries it, and claims in that same statement).  Without the
 * second part a claim on the other hot connection could commit before a
 * finish that claims nothing (a turn that claims a row of the "other"
 * class, a stop's or a refused batch's flush, an outcome to be tried
 * again later) and the table would show the share exceeded. */
static int holds_place(const struct held *h, int64_t now, int *due)
{
	if (h->xj)
		return 1;
	if (outcome_due(h, now))
		return ++*due > FINISH_BATCH && !h->local;
	return !h->local && h->state && h->phase != HELD_CARRIED;
}

/* The places of service held (holds_place), and those the turns on the
 * wire and the claims in limbo may claim (NULL: of every service).  A row whose service name did
 * not fit in memory (start_row) has no service: it holds a place only in
 * the count of every service. */
static unsigned held_of(const struct dispatcher *d, const char *service)
{
	int64_t now = now_ms();
	unsigned n = 0;
	int due = 0;

	for (const struct held *h = d->list; h; h = h->next)
		if (holds_place(h, now, &due) &&
		    (!service || (h->service && strcmp(h->service, service) == 0)))
			n++;
	for (int t = 0; t < HOT_CONNS; t++) {
		const struct turn *tn = &d->turns[t];
		if (tn->claims)
			n += admit_reserved(tn->total, tn->k, tn->names, tn->lims, service);
	}
	for (size_t l = 0; l < d->nlimbo; l++) {
		const struct limbo *lb = &d->limbo[l];
		n += admit_reserved(lb->total, lb->k, lb->names, lb->lims, service);
	}
	return n;
}

/* Whether a turn on the wire or a claim in limbo names service (its
 * pointer into d->services) in its reservation. */
static int named_on_wire(const struct dispatcher *d, const char *service)
{
	for (int t = 0; t < HOT_CONNS; t++)
		for (size_t i = 0; d->turns[t].claims && i < d->turns[t].k; i++)
			if (d->turns[t].names[i] == service)
				return 1;
	for (size_t l = 0; l < d->nlimbo; l++)
		for (size_t i = 0; i < d->limbo[l].k; i++)
			if (d->limbo[l].names[i] == service)
				return 1;
	return 0;
}

/* Forgets the services that no reached execserver runs (share 0), with
 * no row held and none a turn on the wire may claim: such a service is
 * in the "other" class whether it is known or not, so admission does not
 * change, and the list stays within the services the execservers run
 * plus those of the rows held: service names an application makes up do
 * not pile up (docs/dispatch.md, "Admission"). */
static void forget_services(struct dispatcher *d)
{
	size_t k = 0;

	for (size_t i = 0; i < d->nservices; i++) {
		char *svc = d->services[i];
		if (exc_claim_share_service(d->client, svc) == 0 && held_of(d, svc) == 0 &&
		    !named_on_wire(d, svc)) {
			free(svc);
			continue;
		}
		d->services[k++] = svc;
	}
	d->nservices = k;
	if (d->rotate >= k)
		d->rotate = 0;
}

/* A turn on the wire or a claim in limbo may claim a row of the "other"
 * class. */
static int other_on_wire(const struct dispatcher *d)
{
	for (int t = 0; t < HOT_CONNS; t++)
		if (d->turns[t].claims && d->turns[t].other)
			return 1;
	for (size_t l = 0; l < d->nlimbo; l++)
		if (d->limbo[l].other)
			return 1;
	return 0;
}

/* Admission for the next exec-bound claim (docs/dispatch.md, "Admission"):
 * each service seen so far up to its own claim share
 * (exc_claim_share_service: the slots of its waitgroup), all together up
 * to the overall claim share (exc_claim_share), handed out from a
 * rotating start so that no service is always served last; the services
 * not seen yet, and those no reached execserver runs (share 0), one row at
 * a time while none of them is at an execserver or may be claimed by a
 * turn on the wire, outside the overall share (such a want takes no slot
 * that another could: no execserver serves it, or its service is learned
 * from it).  The rows the turns on the wire may claim count as held.
 * Looking for those rows walks the queued rows of the known services, so
 * it is done at most once per pollMs (and at a notification), not at
 * every outcome.  a->total is 0 when nothing may be claimed; the arrays
 * are freed by admission_free. */
int admission(struct dispatcher *d, struct admission *a)
{
	size_t n;
	unsigned unshared_held, all = held_of(d, NULL), *shares;

	forget_services(d);
	n = d->nservices;
	memset(a, 0, sizeof *a);
	a->share = exc_claim_share(d->client);
	a->names = calloc(n + 1, sizeof *a->names);
	a->lims = calloc(n + 1, sizeof *a->lims);
	a->limits = malloc(21 * n + 3);
	shares = calloc(2 * n + 1, sizeof *shares); /* then the places held */
	if (!a->names || !a->lims || !a->limits || !shares) {
		free(shares);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		a->names[i] = d->services[(d->rotate + i) % n];
		shares[i] = exc_claim_share_service(d->client, a->names[i]);
		shares[n + i] = held_of(d, a->names[i]);
	}
	a->total = admit_places(a->share, all, CLAIM_MAX, n, shares, shares + n, a->lims,
				&unshared_held);
	free(shares);
	for (size_t i = 0; i < n; i++)
		if (a->lims[i] >= 0) { /* else in the other class */
			a->names[a->k] = a->names[i];
			a->lims[a->k++] = a->lims[i];
		}
	d->rotate = n ? (d->rotate + 1) % n : 0;
	a->bound = a->total;
	int other = admit_other(a->share, unshared_held, other_on_wire(d),
				now_ms() >= d->other_due_ms);
	snprintf(a->other, sizeof a->other, "%d", other);
	a->total += (unsigned)other;
	db_int_array(a->limits, a->lims, (int)a->k);
	a->services = db_text_array(a->names, (int)a->k);
	return a->services ? 0 : -1;
}

/* a's arrays freed (those a turn took are NULL). */
void admission_free(struct admission *a)
{
	free(a->services);
	free(a->limits);
	free(a->names);
	free(a->lims);
}

/* A hot connection with nothing on the wire that is up, or NULL (a
 * connection that is down is started meanwhile: on_db_up follows). */
struct turn *idle_turn(struct dispatcher *d)
{
	for (int t = 0; t < HOT_CONNS; t++)
		if (!db_busy(d->turns[t].db) && db_ready(d->turns[t].db))
			return &d->turns[t];
	return NULL;
}

/* t's reservation ends: its result is handled (its rows are held now). */
void turn_release(struct turn *t)
{
	free(t->names);
	free(t->lims);
	t->names = NULL;
	t->lims = NULL;
	t->k = 0;
	t->claims = t->other = 0;
	t->bound = t->total = 0;
}

/* t's claim was lost with its connection: its reservation goes on in
 * limbo (struct limbo) instead of ending.  Out of memory, it ends. */
static void limbo_keep(struct dispatcher *d, struct turn *t)
{
	struct limbo *more = realloc(d->limbo, (d->nlimbo + 1) * sizeof *more);

	if (!more) {
		turn_release(t);
		return;
	}
	d->limbo = more;
	more[d->nlimbo++] = (struct limbo){ t->total, t->other, t->k, t->names, t->lims };
	t->names = NULL;
	t->lims = NULL;
	turn_release(t);
}

/* The n oldest claims in limbo end: their places are free. */
void limbo_free(struct dispatcher *d, size_t n)
{
	if (n > d->nlimbo)
		n = d->nlimbo;
	if (n == 0)
		return; /* d->limbo may be NULL: no memmove of it, even of 0 bytes */
	for (size_t l = 0; l < n; l++) {
		free(d->limbo[l].names);
		free(d->limbo[l].lims);
	}
	memmove(d->limbo, d->limbo + n, (d->nlimbo - n) * sizeof *d->limbo);
	d->nlimbo -= n;
}

static void on_turn_result(void *arg, PGresult *res, int away);

/* The carried rows of t's finish-and-claim keep their places until its
 * answer: its reservation covers them (admit_cover_carried).  Without
 * this, a turn carrying more finished rows than it may claim freed the
 * rest as it was sent, and a claim on the other hot connection could take
 * those places and commit first: one row over the share in the table
 * (seen under load in test_dispatch, "admission counts the claims on the
 * wire"; the arithmetic: test_admission). */
static void cover_carried(struct turn *t)
{
	const char *carried[FINISH_BATCH];
	size_t n = 0;

	for (int i = 0; i < t->fin.k && n < FINISH_BATCH; i++)
		carried[n++] = t->fin.rows[i]->service;
	admit_cover_carried(&t->total, t->k, t->names, t->lims, n, carried);
}

/* Sends the hot path's next statement on t, if there is one
 * (docs/dispatch.md, "The event loop"): the outcomes due, with the claim
 * within a in the same statement (DQ_FINISH_CLAIM) unless a carries a row
 * of the "other" class, which is claimed by a later turn; or, with no
 * outcome due, the claim within a alone (DQ_CLAIM_EXEC).  a is NULL when
 * nothing may be claimed; a claim takes a's arrays as t's reservation.
 * 1 when sent (on_turn_result follows), 0 when there was nothing to send or
 * the database is away. */
int send_turn(struct dispatcher *d, struct turn *t, struct admission *a)
{
	const char *params[11];
	int claims = a && a->total > 0, other = 0, rc, k = fin_build(d, &t->fin, FINISH_BATCH);

	if (k < 0)
		return 0; /* not a claim alone either: a's places count the due rows free */
	if (k > 0) {
		claims = claims && a->bound > 0 && strcmp(a->other, "0") == 0;
		fin_params(d, &t->fin, params);
		params[8] = claims ? a->services : NULL;
		params[9] = claims ? a->limits : NULL;
		params[10] = d->token;
		rc = db_send(t->db, claims ? d->sql[Q_FINISH_CLAIM] : d->sql[Q_FINISH],
			     claims ? 11 : 8, params, on_turn_result, t);
		fin_free_arrays(&t->fin);
	} else if (claims) {
		params[0] = d->cfg->instance_id;
		params[1] = a->services;
		params[2] = a->limits;
		params[3] = a->other;
		params[4] = d->local_names;
		params[5] = d->token;
		other = strcmp(a->other, "0") != 0;
		rc = db_send(t->db, d->sql[Q_CLAIM_EXEC], 6, params, on_turn_result, t);
		if (rc == 0 && other)
			d->other_due_ms = now_ms() + d->cfg->poll_ms;
	} else {
		return 0;
	}
	if (rc < 0) {
		fin_abort(&t->fin, 0);
		return 0;
	}
	if (claims) {
		for (int i = 0; i < t->fin.k; i++)
			held_to(t->fin.rows[i], HELD_CARRIED);
		t->claims = 1;
		t->other = other;
		t->bound = a->bound;
		t->total = a->bound + (unsigned)other;
		t->life = d->life;
		t->names = a->names;
		t->lims = a->lims;
		t->k = a->k;
		a->names = NULL;
		a->lims = NULL;
		cover_carried(t);
		d->st.claims++;
	}
	return 1;
}

/* The result of send_turn's statement on t, from the loop. */
static void on_turn_result(void *arg, PGresult *res, int away)
{
	struct turn *t = arg;
	struct dispatcher *d = t->d;
	int wrote = t->fin.k, claims = t->claims, claimed = 0, again;
	unsigned bound = t->bound, life = t->life;

	/* the reservation ends here, the rows claimed are held from here on;
	 * or, the claim lost with its connection, it goes on in limbo until
	 * the backend is known to have ended and the sweep has looked */
	if (!res && away && claims)
		limbo_keep(d, t);
	else
		turn_release(t);
	if (!res) {
		fin_abort(&t->fin, away);
		/* a claim whose reply the lost connection took may have been
		 * committed: swept at the next turn with no result outstanding,
		 * on whichever connection is up (not only once this one is back,
		 * which it may never be while the other one suffices) */
		if (away && claims)
			claims_lost(d);
		if (away && wrote)
			outcomes_waiting(d, t->db->last_error);
		if (!away && wrote)
			log_warn("finish: %s (writing the outcomes again, one at a time)",
				 t->db->last_error);
		else if (!away)
			log_error("claim: %s", t->db->last_error);
		if (!away && wrote)
			flush_outcomes(d);
	} else {
		for (int r = 0; claims && r < PQntuples(res); r++) {
			int col = wrote ? 1 : 0;
			if (wrote && PQgetvalue(res, r, 0)[0] != 'c')
				continue;
			if (life != d->life) {
				/* claimed under a registration lost since: a rescue
				 * requeued it, or our requeue of the rows our
				 * instance left (send_own) does */
				log_info("job %s: claimed before our dispatcher row was removed; "
					 "not run (requeued by the rescue or when we register "
					 "again)",
					 PQgetvalue(res, r, col));
				continue;
			}
			d->st.claimed++;
			d->st.attempts += (uint64_t)atoi(PQgetvalue(res, r, col + 1));
			start_row(d, res, r, col);
			claimed++;
		}
		if (claimed)
			log_debug("claimed %d (share %u, at the execservers %u)", claimed,
				  d->st.share, d->at_exec);
		if (wrote)
			fin_apply(d, &t->fin, res, claims);
		PQclear(res);
	}
	if (d->claimed_unstarted && !evtimer_pending(d->start_ev, NULL))
		arm(d->start_ev, START_CHECK_MS);
	if (stopping(d)) {
		release_waiting(d); /* rows claimed while the stop began */
		d->poll_again = 0;
		if (d->pending)
			flush_outcomes(d);
		maybe_done_stopping(d);
		return;
	}
	/* at once again: poll_cb ran meanwhile (also when this statement
	 * failed), a full batch (a new service is then bounded by its own
	 * share), outcomes written without a claim; a claim that failed is
	 * tried again after FLUSH_RETRY_MS (the database away: also when it is
	 * back, on_db_up), and so is a sweep of lost claims that waited for
	 * this result; else the next poll */
	again = d->poll_again ||
		(res && ((claims && (unsigned)claimed >= bound) || (wrote && !claims)));
	d->poll_again = 0;
	if (again)
		event_active(d->poll_ev, EV_TIMEOUT, 0);
	else
		arm(d->poll_ev, (!res && (claims || d->pending)) || sweep_wanted(d)
					? FLUSH_RETRY_MS
					: jittered(d, d->cfg->poll_ms));
}

static void on_local_claim_result(void *arg, PGresult *res, int away, const void *note);

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
	if (chores_add(d->chores, d->sql[Q_CLAIM], 6, params, &note, sizeof note,
		       on_local_claim_result, d) == 0) {
		d->local_out = 1;
		d->st.claims++;
	}
}

/* Local services: localSlots in all, a quarter of them only for priority
 * >= 2 (so that interactive work always finds a local slot): the rows of
 * any priority up to the rest first, then (on_local_claim_result) those of
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

/* The answer of a local claim: its rows run, and (the first claim of
 * any priority answered) the claim for priority >= 2 follows. */
static void on_local_claim_result(void *arg, PGresult *res, int away, const void *note)
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
