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
 * This file has the loop, the runs, admission and the hot path; the
 * start's first contact is in contact.c, the statements off the hot path
 * and their results in chore_results.c (shared: dispatch_impl.h).
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
#include <json-c/json.h>

#include <execserver/client.h>

#include "common/clock.h"
#include "common/log.h"
#include "dispatch/admission.h"
#include "dispatch/chores.h"
#include "dispatch/db.h"
#include "dispatch/dispatch_impl.h"
#include "dispatch/listen.h"
#include "dispatch/local_run.h"
#include "dispatch/metrics.h"
#include "dispatch/migrate.h"
#include "dispatch/queries.h"

/* h's outcome is set: it waits to be written from now on. */
static void outcome_pending(struct dispatcher *d, struct held *h)
{
	held_to(h, HELD_DUE);
	d->pending++;
	h->due_ms = now_ms();
}

/* h out of the list and freed, whatever its phase (held_free; the end). */
static void held_discard(struct dispatcher *d, struct held *h)
{
	if (h->prev)
		h->prev->next = h->next;
	else
		d->list = h->next;
	if (h->next)
		h->next->prev = h->prev;
	free(h->service);
	free(h->error);
	free(h->receipt);
	free(h->orig_error);
	free(h->orig_receipt);
	free(h->position);
	free(h);
}

void held_free(struct dispatcher *d, struct held *h)
{
	held_to(h, HELD_GONE);
	held_discard(d, h);
}

/* ---- running a claimed row ---- */

/* The row's job with EXECDISPATCH_JOB_ID and EXECDISPATCH_ATTEMPT set in
 * its env (replacing entries of those names): a program can tell its runs
 * apart.  NULL when the payload is not a JSON object. */
static char *job_payload(const struct held *h, const char *text)
{
	struct json_object *job = json_tokener_parse(text), *env, *nenv;
	char buf[64];
	char *out = NULL;

	if (!job || !json_object_is_type(job, json_type_object))
		goto out;
	nenv = json_object_new_array();
	if (json_object_object_get_ex(job, "env", &env) &&
	    json_object_is_type(env, json_type_array))
		for (size_t i = 0; i < json_object_array_length(env); i++) {
			struct json_object *e = json_object_array_get_idx(env, i);
			const char *s = json_object_get_string(e);
			if (json_object_is_type(e, json_type_string) &&
			    (strncmp(s, "EXECDISPATCH_JOB_ID=", 20) == 0 ||
			     strncmp(s, "EXECDISPATCH_ATTEMPT=", 21) == 0))
				continue;
			json_object_array_add(nenv, json_object_get(e));
		}
	else if (json_object_object_get_ex(job, "env", &env)) {
		/* not an array: left for the execserver to refuse (bad_job) */
		json_object_put(nenv);
		out = strdup(text);
		goto out;
	}
	snprintf(buf, sizeof buf, "EXECDISPATCH_JOB_ID=%lld", (long long)h->id);
	json_object_array_add(nenv, json_object_new_string(buf));
	snprintf(buf, sizeof buf, "EXECDISPATCH_ATTEMPT=%d", h->attempts);
	json_object_array_add(nenv, json_object_new_string(buf));
	json_object_object_add(job, "env", nenv);
	out = strdup(json_object_to_json_string_ext(job, JSON_C_TO_STRING_PLAIN));
out:
	json_object_put(job);
	return out;
}

/* The outcome of a run from its receipt (docs/dispatch.md, "Outcomes"). */
static void set_outcome(struct held *h, const struct exc_receipt *r)
{
	const struct dispatch_config *cfg = h->d->cfg;
	char buf[64];

	if (!r->error_code && r->ok) {
		h->state = "done";
	} else if (r->error_code && strcmp(r->error_code, EXC_E_NO_SLOT) == 0) {
		h->state = "queued";
		h->uncount = 1;
	} else if (r->error_code && r->retryable && h->attempts < cfg->max_attempts) {
		h->state = "queued";
	} else {
		h->state = "failed";
	}
	if (r->error_code && !r->json && r->error_message &&
	    (strcmp(r->error_code, EXC_E_BAD_JOB) == 0 ||
	     strcmp(r->error_code, PROTO_E_UNKNOWN_COMMAND) == 0 ||
	     strcmp(r->error_code, EXC_E_UNKNOWN_SERVICE) == 0 ||
	     strcmp(r->error_code, EXC_E_SERVICE_DISABLED) == 0)) {
		/* the JOB refused, by the library (larger than the
		 * instance's maxFrameBytes, a service no instance offers or
		 * one that disabled it: why) or
		 * by the execserver's ERROR (bad_job, unknown_command): no
		 * receipt, so the reason goes into the row */
		if (asprintf(&h->error, "%s: %s", r->error_code, r->error_message) < 0)
			h->error = NULL;
	} else if (r->error_code) {
		h->error = strdup(r->error_code);
	} else if (!r->ok) {
		if (r->exited)
			snprintf(buf, sizeof buf, "exit_status");
		else if (r->signal)
			snprintf(buf, sizeof buf, "signal");
		else
			snprintf(buf, sizeof buf, "failed");
		h->error = strdup(buf);
	}
	h->receipt = r->json ? strdup(r->json) : NULL;
}

/* The run of h ended (at an execserver or locally) with receipt r. */
static void run_ended(struct held *h, const struct exc_receipt *r)
{
	struct dispatcher *d = h->d;

	metrics_ms(&d->st.run, r->duration_ms);
	if (!h->started)
		d->claimed_unstarted--;
	if (h->phase == HELD_LOST) {
		d->st.dropped++;
		log_info("job %lld attempt %d: ended (%s) after its claim was lost; result dropped",
			 (long long)h->id, h->attempts, r->error_code ? r->error_code : "ok");
		held_free(d, h);
		maybe_done_stopping(d);
		return;
	}
	if (h->phase == HELD_RELEASING && r->error_code &&
	    strcmp(r->error_code, EXC_E_CANCELLED) == 0) {
		h->state = "queued"; /* given back at a stop: the attempt does not count */
		h->uncount = 1;
	} else {
		set_outcome(h, r);
	}
	log_debug("job %lld attempt %d: %s%s%s", (long long)h->id, h->attempts, h->state,
		  h->error ? " " : "", h->error ? h->error : "");
	outcome_pending(d, h);
	/* written after this loop iteration, with the other outcomes that
	 * arrived in it, in one statement that also claims for the share's
	 * free places (poll_cb); when stopping, only written */
	event_active(stopping(d) ? d->flush_ev : d->poll_ev, EV_TIMEOUT, 0);
}

static void on_done(exc_job *xj, const struct exc_receipt *r, void *arg)
{
	struct held *h = arg;

	(void)xj;
	h->xj = NULL;
	h->d->at_exec--;
	run_ended(h, r);
}

static void on_local_done(struct local_run *lr, const struct exc_receipt *r, void *arg)
{
	struct held *h = arg;

	(void)lr;
	h->lr = NULL;
	h->d->local_running--;
	run_ended(h, r);
}

/* A POSITION for a claimed row someone asked about: into the row, under
 * its claim, for position() on any host. */
static void on_position(exc_job *xj, const struct exc_position *p, void *arg)
{
	struct held *h = arg;
	char json[256];

	(void)xj;
	if (h->phase == HELD_LOST || h->started)
		return;
	snprintf(json, sizeof json,
		 "{\"running\": %lld, \"ahead\": %lld, \"capacity\": %lld, "
		 "\"eta_ms\": %lld, \"instance_id\": \"%.64s\"}",
		 (long long)p->running, (long long)p->ahead, (long long)p->capacity,
		 (long long)p->eta_ms, p->instance_id ? p->instance_id : "");
	free(h->position); /* a newer one replaces one not written yet */
	h->position = strdup(json);
	h->position_gen++;
	write_position(h->d, h);
}

/* The row's claim was lost (cancelled or rescued): stop its run. */
void drop_claim(struct dispatcher *d, struct held *h, const char *why)
{
	if (h->phase == HELD_LOST || (!h->xj && !h->lr))
		return;
	held_to(h, HELD_LOST);
	log_info("job %lld attempt %d: %s; stopping its run", (long long)h->id, h->attempts, why);
	if (h->xj)
		exc_cancel(h->xj);
	else
		local_cancel(h->lr);
}

/* A claimed row of a local service, spawned here. */
static void start_local(struct dispatcher *d, struct held *h,
			const struct dispatch_local_service *ls, const char *payload)
{
	char err[300];

	h->lr = payload ? local_start(d->base, ls, payload, on_local_done, h, err, sizeof err)
			: NULL;
	if (!h->lr) {
		if (!payload)
			snprintf(err, sizeof err, "bad_job: the job is not a JSON object");
		log_warn("job %lld attempt %d: refused: %s", (long long)h->id, h->attempts, err);
		h->state = "failed";
		h->error = strdup(err);
		outcome_pending(d, h);
		return;
	}
	held_to(h, HELD_RUNNING);
	d->local_running++;
	d->claimed_unstarted++;
}

/* Remembers an exec-bound service, so that claims bound it by its own
 * share from now on. */
static void learn_service(struct dispatcher *d, const char *service)
{
	char **more;

	if (!service)
		return;
	for (size_t i = 0; i < d->nservices; i++)
		if (strcmp(d->services[i], service) == 0)
			return;
	more = realloc(d->services, (d->nservices + 1) * sizeof *more);
	if (!more)
		return; /* stays in the "other" class: claimed one at a time */
	d->services = more;
	if ((d->services[d->nservices] = strdup(service)))
		d->nservices++;
}

static int outcome_due(const struct held *h, int64_t now);

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
static int admission(struct dispatcher *d, struct admission *a)
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

static void admission_free(struct admission *a)
{
	free(a->services);
	free(a->limits);
	free(a->names);
	free(a->lims);
}

/* A claimed row (columns id, attempts, priority, service, job, claims
 * from col on) handed to libexecclient, or spawned here for a local service. */
void start_row(struct dispatcher *d, PGresult *res, int row, int col)
{
	struct held *h = calloc(1, sizeof *h);
	struct exc_job_spec spec;
	char *payload;

	if (!h) {
		/* out of memory: the row is claimed under us and not held, as
		 * one whose result a lost connection took: swept (requeued) */
		sweep_want(d);
		return;
	}
	h->d = d;
	h->id = strtoll(PQgetvalue(res, row, col), NULL, 10);
	h->attempts = atoi(PQgetvalue(res, row, col + 1));
	h->priority = atoi(PQgetvalue(res, row, col + 2));
	h->service = strdup(PQgetvalue(res, row, col + 3));
	h->claim = atoi(PQgetvalue(res, row, col + 5));
	metrics_ms(&d->st.queue_wait, strtoll(PQgetvalue(res, row, col + 6), NULL, 10));
	snprintf(h->job_id, sizeof h->job_id, "j%lld.%d", (long long)h->id, h->claim);
	h->next = d->list;
	if (d->list)
		d->list->prev = h;
	d->list = h;

	if (!d->client) {
		/* claimed as a stop left its runs to the rescue (stop_cb), by a
		 * claim sent before: given back, as a claim whose want is still
		 * parked; a run started now (a local one too) would hold the stop
		 * past its bound */
		h->state = "queued";
		h->uncount = 1;
		outcome_pending(d, h);
		return;
	}
	payload = job_payload(h, PQgetvalue(res, row, col + 4));
	for (size_t i = 0; i < d->cfg->nlocal; i++)
		if (h->service && strcmp(d->cfg->local[i].name, h->service) == 0) {
			h->local = 1;
			start_local(d, h, &d->cfg->local[i], payload);
			free(payload);
			return;
		}
	learn_service(d, h->service);
	exc_job_spec_init(&spec);
	spec.job_id = h->job_id;
	spec.service = h->service;
	spec.priority = h->priority;
	spec.job_json = payload;
	spec.connect_timeout_sec = (unsigned)d->cfg->connect_timeout_sec;
	spec.on_done = on_done;
	spec.on_position = on_position;
	spec.arg = h;
	h->xj = payload && h->service ? exc_submit(d->client, &spec) : NULL;
	if (h->xj)
		exc_job_on_progress(h->xj, progress_note, h);
	if (!h->xj) {
		char msg[300];
		snprintf(msg, sizeof msg, "bad_job: %s",
			 payload ? exc_client_last_error(d->client)
				 : "the job is not a JSON object");
		log_warn("job %lld attempt %d: refused: %s", (long long)h->id, h->attempts, msg);
		h->state = "failed";
		h->error = strdup(msg);
		outcome_pending(d, h);
	} else {
		held_to(h, HELD_RUNNING);
		d->at_exec++;
		d->claimed_unstarted++;
	}
	free(payload);
}

/* ---- the hot path: outcomes and claims, without blocking ---- */

/* Outcomes wait because the database is away or does not answer (why:
 * its last error): said at once and every WAITING_SAY_MS while it lasts;
 * they stay in memory and go out once it answers (docs/dispatch.md,
 * "Poolers and the database's health"). */
void outcomes_waiting(struct dispatcher *d, const char *why)
{
	int64_t now = now_ms();

	if (!d->pending)
		return;
	if (!d->waiting_since_ms)
		d->waiting_since_ms = now;
	if (d->waiting_said_ms && now - d->waiting_said_ms < WAITING_SAY_MS)
		return;
	d->waiting_said_ms = now;
	log_warn("%u outcomes wait for the database (for %lld s; %s): kept, written once it "
		 "answers; a stop gives them up %d s after the signal, to be rerun by the "
		 "rescue",
		 d->pending, (long long)((now - d->waiting_since_ms) / 1000), why,
		 STOP_GIVE_UP_MS / 1000);
}

/* Outcomes were written: the wait said by outcomes_waiting is over. */
void outcomes_flowing(struct dispatcher *d)
{
	if (!d->waiting_since_ms)
		return;
	log_info("outcomes written again after %lld s of waiting for the database",
		 (long long)((now_ms() - d->waiting_since_ms) / 1000));
	d->waiting_since_ms = d->waiting_said_ms = 0;
}

/* Whether h's outcome waits to be written now. */
static int outcome_due(const struct held *h, int64_t now)
{
	return h->phase == HELD_DUE && now >= h->retry_at_ms;
}

void fin_free_arrays(struct fin *f)
{
	free(f->states);
	free(f->errors);
	free(f->receipts);
	f->states = f->errors = f->receipts = NULL;
}

/* Up to n outcomes due now into f, marked writing: their number, 0 when
 * none is due, -1 when memory is short (they wait for the next turn). */
int fin_build(struct dispatcher *d, struct fin *f, int n)
{
	int64_t ids[FINISH_BATCH], claim[FINISH_BATCH], unc[FINISH_BATCH], delay[FINISH_BATCH];
	const char *states[FINISH_BATCH], *errors[FINISH_BATCH], *receipts[FINISH_BATCH];
	int64_t now = now_ms();
	int k = 0;

	for (struct held *h = d->list; h && k < n; h = h->next) {
		if (!outcome_due(h, now))
			continue;
		f->rows[k] = h;
		ids[k] = h->id;
		claim[k] = h->claim;
		unc[k] = h->uncount;
		delay[k] = h->given_back ? 0 : d->cfg->retry_delay_sec;
		states[k] = h->state;
		errors[k] = h->error;
		receipts[k] = h->receipt;
		k++;
	}
	f->k = 0;
	if (k == 0)
		return 0;
	db_int_array(f->ids, ids, k);
	db_int_array(f->claim, claim, k);
	db_int_array(f->unc, unc, k);
	db_int_array(f->delay, delay, k);
	f->states = db_text_array(states, k);
	f->errors = db_text_array(errors, k);
	f->receipts = db_text_array(receipts, k);
	if (!f->states || !f->errors || !f->receipts) {
		fin_free_arrays(f);
		return -1;
	}
	f->k = k;
	for (int i = 0; i < k; i++)
		held_to(f->rows[i], HELD_WRITING);
	return k;
}

/* DQ_FINISH's parameters $1..$8 of f. */
void fin_params(const struct dispatcher *d, const struct fin *f, const char **params)
{
	params[0] = d->cfg->instance_id;
	params[1] = f->ids;
	params[2] = f->claim;
	params[3] = f->states;
	params[4] = f->unc;
	params[5] = f->delay;
	params[6] = f->errors;
	params[7] = f->receipts;
}

/* f was not written, or (away: the connection was lost with it on the
 * wire) maybe written with its reply lost: its rows wait again. */
void fin_abort(struct fin *f, int away)
{
	for (int i = 0; i < f->k; i++) {
		held_to(f->rows[i], HELD_DUE);
		f->rows[i]->unsure |= away;
	}
	f->k = 0;
}

void count_outcome(struct dispatcher *d, const char *state, int uncount)
{
	if (strcmp(state, "done") == 0)
		d->st.done++;
	else if (strcmp(state, "failed") == 0)
		d->st.failed++;
	else if (uncount)
		d->st.no_slot++;
	else
		d->st.requeued++;
}

/* f was written: res lists the rows whose claim was still ours (column 0,
 * or with tagged the rows tagged 'f', id in column 1); the others were
 * cancelled or rescued meanwhile and are dropped, but for those an
 * earlier statement wrote before its reply was lost (ask_landed).  Every row
 * of f is freed. */
void fin_apply(struct dispatcher *d, struct fin *f, PGresult *res, int tagged)
{
	for (int i = 0; i < f->k; i++) {
		struct held *h = f->rows[i];
		int ours = 0;
		for (int r = 0; r < PQntuples(res) && !ours; r++)
			ours = (!tagged || PQgetvalue(res, r, 0)[0] == 'f') &&
			       strtoll(PQgetvalue(res, r, tagged), NULL, 10) == h->id;
		if (ours) {
			count_outcome(d, h->state, h->uncount);
		} else if (h->unsure && ask_landed(d, h) == 0) {
			held_to(h, HELD_ASKING); /* kept until the answer comes (landed_cb) */
			continue;
		} else {
			d->st.dropped++;
			log_info("job %lld attempt %d: claim lost before its outcome (%s) was "
				 "written (cancelled or rescued); dropped",
				 (long long)h->id, h->attempts, h->state);
		}
		d->pending--;
		held_free(d, h);
	}
	if (f->k)
		outcomes_flowing(d);
	f->k = 0;
}

/* Stop: the claims whose want is still parked are given back. */
static void release_waiting(struct dispatcher *d)
{
	for (struct held *h = d->list; h; h = h->next)
		if (h->xj && h->phase == HELD_RUNNING &&
		    strcmp(exc_job_state(h->xj), "waiting") == 0) {
			held_to(h, HELD_RELEASING);
			h->given_back = 1;
			exc_cancel(h->xj);
		}
}

static void turn_done(void *arg, PGresult *res, int away);

int turn_busy(const struct dispatcher *d)
{
	for (int t = 0; t < HOT_CONNS; t++)
		if (db_busy(d->turns[t].db))
			return 1;
	return 0;
}

/* A hot connection with nothing on the wire that is up, or NULL (a
 * connection that is down is started meanwhile: on_db_up follows). */
static struct turn *idle_turn(struct dispatcher *d)
{
	for (int t = 0; t < HOT_CONNS; t++)
		if (!db_busy(d->turns[t].db) && db_ready(d->turns[t].db))
			return &d->turns[t];
	return NULL;
}

/* t's reservation ends: its result is handled (its rows are held now). */
static void turn_release(struct turn *t)
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

/* Sends the hot path's next statement on t, if there is one
 * (docs/dispatch.md, "The event loop"): the outcomes due, with the claim
 * within a in the same statement (DQ_FINISH_CLAIM) unless a carries a row
 * of the "other" class, which is claimed by a later turn; or, with no
 * outcome due, the claim within a alone (DQ_CLAIM_EXEC).  a is NULL when
 * nothing may be claimed; a claim takes a's arrays as t's reservation.
 * 1 when sent (turn_done follows), 0 when there was nothing to send or
 * the database is away. */
static int send_turn(struct dispatcher *d, struct turn *t, struct admission *a)
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
			     claims ? 11 : 8, params, turn_done, t);
		fin_free_arrays(&t->fin);
	} else if (claims) {
		params[0] = d->cfg->instance_id;
		params[1] = a->services;
		params[2] = a->limits;
		params[3] = a->other;
		params[4] = d->local_names;
		params[5] = d->token;
		other = strcmp(a->other, "0") != 0;
		rc = db_send(t->db, d->sql[Q_CLAIM_EXEC], 6, params, turn_done, t);
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
		d->st.claims++;
	}
	return 1;
}

/* The result of send_turn's statement on t, from the loop. */
static void turn_done(void *arg, PGresult *res, int away)
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
		arm(d->poll_ev, (!res && (claims || d->pending)) || d->sweep_lost
					? FLUSH_RETRY_MS
					: jittered(d, d->cfg->poll_ms));
}

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
 * called (turn_done then runs it again). */
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
	if (d->sweep_lost && is_registered(d) && d->stage != LIFE_OWNING && !turn_busy(d) &&
	    !d->local_out && !d->sweep_out && !(d->nlimbo && d->beat_out))
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
static void stop_cb(evutil_socket_t fd, short what, void *arg)
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

static void signal_cb(evutil_socket_t sig, short what, void *arg)
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

/* ---- setup ---- */

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
	    !d.janitor_ev || !d.sig_term || !d.sig_int || !d.sig_hup || !d.contact_ev) {
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
