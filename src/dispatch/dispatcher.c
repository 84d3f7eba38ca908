/*
 * dispatcher.c - see dispatcher.h.
 *
 * One event loop, one database connection, one libexecclient client.  The
 * rows this dispatcher holds are a list of `struct held`; each is in one
 * of these phases:
 *   at the execserver  (xj set)     its want is parked or its run goes on
 *   outcome pending    (xj NULL)    the run ended; the outcome waits to be
 *                                   written (the database may be away)
 * A held row is freed once its outcome is written or found not to be ours
 * any more.  Invariants:
 *  - admission: when a claim is made, the rows of each service at the
 *    execservers never exceed that service's claim share
 *    (exc_claim_share_service), nor all of them together the overall one
 *    (exc_claim_share); rows of a service no execserver runs (yet) are
 *    claimed one at a time (struct admission);
 *  - nothing is claimed while the heartbeat is older than staleAfterSec/2
 *    or while no execserver is connected;
 *  - every write to a held row carries its claim (runner_instance, claims,
 *    state; claims never repeats for a row, attempts may):
 *    a row that is not ours any more is never written, its run is
 *    cancelled at the execserver and its result dropped;
 *  - our dispatcher row exists as long as we hold rows (it is deleted
 *    only at a clean stop with nothing held), so every held row can be
 *    rescued if we die.
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
#include "dispatch/chores.h"
#include "dispatch/db.h"
#include "dispatch/listen.h"
#include "dispatch/local_run.h"
#include "dispatch/metrics.h"
#include "dispatch/migrate.h"
#include "dispatch/queries.h"

#define CLAIM_MAX 100      /* most rows of one claim */
#define START_CHECK_MS 100 /* how often held rows are looked at for a started run */
#define FLUSH_RETRY_MS 250 /* outcomes waiting for the database: retry */
#define JANITOR_SEC 3600
#define JANITOR_BATCH 1000    /* DQ_JANITOR's LIMIT */
#define JANITOR_AGAIN_MS 1000 /* after a full batch */
#define FINISH_BATCH 100      /* most outcomes written by one statement */
#define OUTCOME_RETRY_MS 5000 /* an outcome refused in every form: next try */
#define HOT_CONNS 2           /* connections carrying the hot path's statements */
#define STOP_GIVE_UP_MS 10000 /* stopping: an outcome refused in every form is given up */
#define CONTACT_CHECK_MS 250  /* start: how often the first contact is looked after */
#define START_GIVE_UP_MS 5000 /* start: no database reached within it, after a failed attempt */

struct held {
	struct held *next, *prev;
	struct dispatcher *d;
	int64_t id;
	int claim; /* the row's claims at our claim: (id, claim) names it */
	int attempts;
	int priority;
	char *service;
	exc_job *xj;          /* NULL once the run ended */
	struct local_run *lr; /* a local service's run, or NULL */
	int started;          /* written as running */
	int lost;             /* not ours any more: cancelled at the execserver, dropped */
	int releasing;        /* given back at a stop */
	/* the outcome, once xj is NULL */
	const char *state; /* "done", "failed", "queued" */
	int uncount;       /* 1: the attempt does not count (no slot) */
	char *error;
	char *receipt; /* JSON text or NULL */
	char job_id[48];
	int writing; /* in the outcome statement on the wire (struct fin) */
	int unsure;  /* a statement writing it lost its reply: it may be written */
	/* an outcome the database refused alone: how far it was cut down
	 * (flush_outcomes), the original kept, and when to try it again */
	int cut;
	const char *orig_state;
	char *orig_error, *orig_receipt;
	int64_t retry_at_ms;
};

/* The outcomes of one finish statement: the rows and their arrays. */
struct fin {
	struct held *rows[FINISH_BATCH];
	int k;
	char ids[21 * FINISH_BATCH + 3], claim[21 * FINISH_BATCH + 3], unc[21 * FINISH_BATCH + 3],
		delay[21 * FINISH_BATCH + 3];
	char *states, *errors, *receipts;
};

/* One statement of the hot path on one of the hot connections (db_send):
 * its outcomes, and the claims it may make.  What it may claim is
 * reserved against admission from its send until its result is handled
 * (turn_done), so that the rows at the execservers plus the claims on the
 * wire never exceed the claim share (docs/dispatch.md, "The event loop"). */
struct turn {
	struct dispatcher *d;
	struct db *db;
	struct fin fin;
	int claims;     /* it claims (its reservation below is held) */
	unsigned bound; /* rows of services with a share it may claim */
	unsigned total; /* all it may claim (bound + the other class) */
	int other;      /* it may claim a row of the "other" class */
	size_t k;       /* per service: names (into d->services), limits */
	const char **names;
	int64_t *lims;
};

struct dispatcher {
	const struct dispatch_config *cfg;
	struct event_base *base;
	exc_client *client;
	struct db db;
	char *q_register, *q_heartbeat, *q_rescue_own, *q_rescue_lost, *q_claim, *q_start,
		*q_finish, *q_held, *q_leave, *q_janitor, *q_position, *q_finish_claim,
		*q_claim_exec, *q_landed, *q_version;
	char host[65];
	char pid[16];
	struct held *list;
	unsigned at_exec;           /* held rows whose xj is set */
	unsigned claimed_unstarted; /* at the execserver, not yet written running */
	unsigned pending;           /* outcomes waiting to be written */
	struct event *poll_ev, *beat_ev, *cancel_ev, *start_ev, *flush_ev, *janitor_ev;
	struct event *sig_term, *sig_int, *sig_hup;
	int64_t beat_ok_ms; /* monotonic time of the last written heartbeat */
	int registered;
	int stopping;
	int64_t give_up_ms; /* stopping: outcomes refused in every form are given up then */
	int gave_up;        /* outcomes were given up: our row stays for the rescue */
	int exit_status;
	int said_stale, said_no_exec;
	unsigned rnd;
	struct dispatch_stats st;
	struct metrics *metrics;
	struct listener *listener; /* notify: true */
	char *local_names;         /* the local services as a text[] literal */
	char **services;           /* exec-bound services seen in claims */
	size_t nservices;
	size_t rotate;          /* which service goes first in the next claim */
	int64_t other_due_ms;   /* the "other" class is looked for from then on */
	unsigned local_running; /* held rows of local services running */
	struct event *sig_chld;
	/* the hot path's statements on the wire, one per hot connection
	 * (db, db2); poll_again: poll_cb ran while both were busy */
	struct db db2;
	struct turn turns[HOT_CONNS];
	int poll_again;
	int sweep_lost; /* reconnected: look for claims whose result was lost */
	/* the statements off the hot path (chores.h); each flag: a chore of
	 * that kind is queued or on the wire, so that no kind piles up */
	struct chores *chores;
	int beat_out, start_out, cancel_out, local_out, sweep_out, flush_out, leaving;
	int flush_per;        /* flush_outcomes: rows per statement (1 after a refusal) */
	struct fin flush_fin; /* flush_outcomes' statement */
	/* start: the first contact on the main connection (contact_cb) */
	struct event *contact_ev;
	int contact; /* its step: CONTACT_VERSION ... CONTACT_DONE */
	int64_t contact_t0_ms;
};

enum {
	CONTACT_VERSION,  /* the schema's version */
	CONTACT_REGISTER, /* our dispatcher row */
	CONTACT_RESCUE,   /* the claims of our previous life */
	CONTACT_DONE
};

/* What the next exec-bound claim may take (DQ_CLAIM_EXEC's parameters). */
struct admission {
	unsigned total; /* rows in all; 0: no claim */
	unsigned bound; /* of them, rows of services with a share */
	unsigned share; /* exc_claim_share, for /metrics */
	char *services; /* text[] of the services seen, each with its limit in */
	char *limits;   /* int[] */
	char other[16]; /* rows of other services: 0 or 1 */
	size_t k;       /* the same as arrays (handed to the turn that claims) */
	const char **names;
	int64_t *lims;
};

/* ---- small helpers ---- */

static int64_t now_ms(void)
{
	return (int64_t)clock_mono_ms();
}

static void arm(struct event *ev, int64_t ms)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000) };

	evtimer_add(ev, &tv);
}

/* pollMs with +-10 % jitter, so that dispatchers started together spread. */
static int64_t jittered(struct dispatcher *d, int ms)
{
	int span = ms / 5;

	d->rnd = d->rnd * 1103515245u + 12345u;
	return span ? ms - span / 2 + (int64_t)((d->rnd >> 8) % (unsigned)(span + 1)) : ms;
}

static int beat_fresh(const struct dispatcher *d)
{
	return d->registered && now_ms() - d->beat_ok_ms < d->cfg->stale_after_sec * 1000LL / 2;
}

static void held_free(struct dispatcher *d, struct held *h)
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
	free(h);
}

static void maybe_done_stopping(struct dispatcher *d);
static void flush_outcomes(struct dispatcher *d);

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
	if (r->error_code) {
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

	if (!h->started)
		d->claimed_unstarted--;
	if (h->lost) {
		d->st.dropped++;
		log_info("job %lld attempt %d: ended (%s) after its claim was lost; result dropped",
			 (long long)h->id, h->attempts, r->error_code ? r->error_code : "ok");
		held_free(d, h);
		maybe_done_stopping(d);
		return;
	}
	if (h->releasing && r->error_code && strcmp(r->error_code, EXC_E_CANCELLED) == 0) {
		h->state = "queued"; /* given back at a stop: the attempt does not count */
		h->uncount = 1;
	} else {
		set_outcome(h, r);
	}
	log_debug("job %lld attempt %d: %s%s%s", (long long)h->id, h->attempts, h->state,
		  h->error ? " " : "", h->error ? h->error : "");
	d->pending++;
	/* written after this loop iteration, with the other outcomes that
	 * arrived in it, in one statement that also claims for the share's
	 * free places (poll_cb); when stopping, only written */
	event_active(d->stopping ? d->flush_ev : d->poll_ev, EV_TIMEOUT, 0);
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
	struct dispatcher *d = h->d;
	char id[24], att[16], json[256];
	const char *params[4] = { id, d->cfg->instance_id, att, json };

	(void)xj;
	if (h->lost || h->started)
		return;
	snprintf(id, sizeof id, "%lld", (long long)h->id);
	snprintf(att, sizeof att, "%d", h->claim);
	snprintf(json, sizeof json,
		 "{\"running\": %lld, \"ahead\": %lld, \"capacity\": %lld, "
		 "\"eta_ms\": %lld, \"instance_id\": \"%.64s\"}",
		 (long long)p->running, (long long)p->ahead, (long long)p->capacity,
		 (long long)p->eta_ms, p->instance_id ? p->instance_id : "");
	chores_add(d->chores, d->q_position, 4, params, NULL, 0, NULL, NULL);
}

/* The row's claim was lost (cancelled or rescued): stop its run. */
static void drop_claim(struct dispatcher *d, struct held *h, const char *why)
{
	if (h->lost || (!h->xj && !h->lr))
		return;
	h->lost = 1;
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
		d->pending++;
		return;
	}
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

/* The rows of service at the execservers, and those the turns on the
 * wire may claim (NULL: of every service). */
static unsigned held_of(const struct dispatcher *d, const char *service)
{
	unsigned n = 0;

	for (const struct held *h = d->list; h; h = h->next)
		if (h->xj && (!service || strcmp(h->service, service) == 0))
			n++;
	for (int t = 0; t < HOT_CONNS; t++) {
		const struct turn *tn = &d->turns[t];
		if (!tn->claims)
			continue;
		if (!service)
			n += tn->total;
		for (size_t i = 0; service && i < tn->k; i++)
			if (strcmp(tn->names[i], service) == 0)
				n += (unsigned)tn->lims[i];
	}
	return n;
}

/* Whether a turn on the wire names service (its pointer into
 * d->services) in its reservation. */
static int named_on_wire(const struct dispatcher *d, const char *service)
{
	for (int t = 0; t < HOT_CONNS; t++)
		for (size_t i = 0; d->turns[t].claims && i < d->turns[t].k; i++)
			if (d->turns[t].names[i] == service)
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

/* A turn on the wire may claim a row of the "other" class. */
static int other_on_wire(const struct dispatcher *d)
{
	for (int t = 0; t < HOT_CONNS; t++)
		if (d->turns[t].claims && d->turns[t].other)
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
	unsigned left, unshared_held = 0, all = held_of(d, NULL);

	forget_services(d);
	n = d->nservices;
	memset(a, 0, sizeof *a);
	a->share = exc_claim_share(d->client);
	a->names = calloc(n + 1, sizeof *a->names);
	a->lims = calloc(n + 1, sizeof *a->lims);
	a->limits = malloc(21 * n + 3);
	if (!a->names || !a->lims || !a->limits)
		return -1;
	left = a->share > all ? a->share - all : 0;
	if (left > CLAIM_MAX)
		left = CLAIM_MAX;
	for (size_t i = 0; i < n; i++) {
		const char *svc = d->services[(d->rotate + i) % n];
		unsigned share = exc_claim_share_service(d->client, svc);
		unsigned held = held_of(d, svc), lim;
		if (share == 0) {
			unshared_held += held;
			continue; /* in the other class */
		}
		lim = share > held ? share - held : 0;
		if (lim > left)
			lim = left;
		left -= lim;
		a->total += lim;
		a->names[a->k] = svc;
		a->lims[a->k++] = lim;
	}
	d->rotate = n ? (d->rotate + 1) % n : 0;
	a->bound = a->total;
	int other = a->share > 0 && unshared_held == 0 && !other_on_wire(d) &&
		    now_ms() >= d->other_due_ms;
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
static void start_row(struct dispatcher *d, PGresult *res, int row, int col)
{
	struct held *h = calloc(1, sizeof *h);
	struct exc_job_spec spec;
	char *payload;

	if (!h)
		return; /* out of memory: the claim goes stale and is rescued */
	h->d = d;
	h->id = strtoll(PQgetvalue(res, row, col), NULL, 10);
	h->attempts = atoi(PQgetvalue(res, row, col + 1));
	h->priority = atoi(PQgetvalue(res, row, col + 2));
	h->service = strdup(PQgetvalue(res, row, col + 3));
	h->claim = atoi(PQgetvalue(res, row, col + 5));
	snprintf(h->job_id, sizeof h->job_id, "j%lld.%d", (long long)h->id, h->claim);
	h->next = d->list;
	if (d->list)
		d->list->prev = h;
	d->list = h;

	payload = job_payload(h, PQgetvalue(res, row, col + 4));
	for (size_t i = 0; i < d->cfg->nlocal; i++)
		if (h->service && strcmp(d->cfg->local[i].name, h->service) == 0) {
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
	if (!h->xj) {
		char msg[300];
		snprintf(msg, sizeof msg, "bad_job: %s",
			 payload ? exc_client_last_error(d->client)
				 : "the job is not a JSON object");
		log_warn("job %lld attempt %d: refused: %s", (long long)h->id, h->attempts, msg);
		h->state = "failed";
		h->error = strdup(msg);
		d->pending++;
	} else {
		d->at_exec++;
		d->claimed_unstarted++;
	}
	free(payload);
}

/* ---- the hot path: outcomes and claims, without blocking ---- */

/* Whether h's outcome waits to be written now. */
static int outcome_due(const struct held *h, int64_t now)
{
	return !h->xj && !h->lr && h->state && !h->writing && now >= h->retry_at_ms;
}

static void fin_free_arrays(struct fin *f)
{
	free(f->states);
	free(f->errors);
	free(f->receipts);
	f->states = f->errors = f->receipts = NULL;
}

/* Up to n outcomes due now into f, marked writing: their number, 0 when
 * none is due or memory is short (they wait for the next turn). */
static int fin_build(struct dispatcher *d, struct fin *f, int n)
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
		delay[k] = h->releasing ? 0 : d->cfg->retry_delay_sec;
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
		return 0;
	}
	f->k = k;
	for (int i = 0; i < k; i++)
		f->rows[i]->writing = 1;
	return k;
}

/* DQ_FINISH's parameters $1..$8 of f. */
static void fin_params(const struct dispatcher *d, const struct fin *f, const char **params)
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
static void fin_abort(struct fin *f, int away)
{
	for (int i = 0; i < f->k; i++) {
		f->rows[i]->writing = 0;
		f->rows[i]->unsure |= away;
	}
	f->k = 0;
}

static void count_outcome(struct dispatcher *d, const char *state, int uncount)
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

/* What ask_landed asked about (state: one of set_outcome's literals). */
struct landed_note {
	int64_t id;
	int attempts, uncount;
	const char *state;
};

static void landed_cb(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;
	const struct landed_note *n = note;

	(void)away;
	if (res && PQntuples(res) == 1) {
		count_outcome(d, n->state, n->uncount);
		log_info("job %lld attempt %d: outcome %s written by a statement whose reply the "
			 "lost connection took",
			 (long long)n->id, n->attempts, n->state);
	} else {
		d->st.dropped++;
		log_info("job %lld attempt %d: claim lost before its outcome (%s) was written "
			 "(cancelled or rescued); dropped",
			 (long long)n->id, n->attempts, n->state);
	}
}

/* h's outcome was found not ours when written again after a statement
 * writing it lost its reply: a chore asks whether that statement's write
 * landed (the row carries h's outcome under h's claim), so that it counts
 * as written, not dropped (landed_cb).  0 when asked. */
static int ask_landed(struct dispatcher *d, const struct held *h)
{
	char id[24], claim[16];
	const char *params[6] = { id, claim, h->state, h->error, h->receipt, d->cfg->instance_id };
	struct landed_note n = { h->id, h->attempts, h->uncount, h->state };

	snprintf(id, sizeof id, "%lld", (long long)h->id);
	snprintf(claim, sizeof claim, "%d", h->claim);
	return chores_add(d->chores, d->q_landed, 6, params, &n, sizeof n, landed_cb, d);
}

/* f was written: res lists the rows whose claim was still ours (column 0,
 * or with tagged the rows tagged 'f', id in column 1); the others were
 * cancelled or rescued meanwhile and are dropped, but for those an
 * earlier statement wrote before its reply was lost (ask_landed).  Every row
 * of f is freed. */
static void fin_apply(struct dispatcher *d, struct fin *f, PGresult *res, int tagged)
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
			/* counted when the answer comes */
		} else {
			d->st.dropped++;
			log_info("job %lld attempt %d: claim lost before its outcome (%s) was "
				 "written (cancelled or rescued); dropped",
				 (long long)h->id, h->attempts, h->state);
		}
		d->pending--;
		held_free(d, h);
	}
	f->k = 0;
}

/* Stop: the claims whose want is still parked are given back. */
static void release_waiting(struct dispatcher *d)
{
	for (struct held *h = d->list; h; h = h->next)
		if (h->xj && !h->releasing && strcmp(exc_job_state(h->xj), "waiting") == 0) {
			h->releasing = 1;
			exc_cancel(h->xj);
		}
}

static void turn_done(void *arg, PGresult *res, int away);
static void sweep_lost_claims(struct dispatcher *d);

static int turn_busy(const struct dispatcher *d)
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
	const char *params[10];
	int claims = a && a->total > 0, other = 0, rc;

	if (fin_build(d, &t->fin, FINISH_BATCH) > 0) {
		claims = claims && a->bound > 0 && strcmp(a->other, "0") == 0;
		fin_params(d, &t->fin, params);
		params[8] = claims ? a->services : NULL;
		params[9] = claims ? a->limits : NULL;
		rc = db_send(t->db, claims ? d->q_finish_claim : d->q_finish, claims ? 10 : 8,
			     params, turn_done, t);
		fin_free_arrays(&t->fin);
	} else if (claims) {
		params[0] = d->cfg->instance_id;
		params[1] = a->services;
		params[2] = a->limits;
		params[3] = a->other;
		params[4] = d->local_names;
		other = strcmp(a->other, "0") != 0;
		rc = db_send(t->db, d->q_claim_exec, 5, params, turn_done, t);
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
		t->claims = 1;
		t->other = other;
		t->bound = a->bound;
		t->total = a->bound + (unsigned)other;
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
	unsigned bound = t->bound;

	/* the reservation ends here; the rows claimed are held from here on */
	turn_release(t);
	if (!res) {
		fin_abort(&t->fin, away);
		/* a claim whose reply the lost connection took may have been
		 * committed: swept at the next turn with no result outstanding,
		 * on whichever connection is up (not only once this one is back,
		 * which it may never be while the other one suffices) */
		if (away && claims)
			d->sweep_lost = 1;
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
	if (d->stopping) {
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

static void local_claimed(void *arg, PGresult *res, int away, const void *note);

/* Claims up to n rows of the local services of priority minprio or more
 * (a chore: a local service spawns here, off the hot path). */
static void claim_local_rows(struct dispatcher *d, unsigned n, int minprio)
{
	char limit[16], prio[16];
	const char *params[5] = { d->cfg->instance_id, limit, d->local_names, "true", prio };

	snprintf(limit, sizeof limit, "%u", n);
	snprintf(prio, sizeof prio, "%d", minprio);
	if (chores_add(d->chores, d->q_claim, 5, params, &minprio, sizeof minprio, local_claimed,
		       d) == 0) {
		d->local_out = 1;
		d->st.claims++;
	}
}

/* Local services: localSlots in all, a quarter of them only for priority
 * >= 2 (so that interactive work always finds a local slot): the rows of
 * any priority up to the rest first, then (local_claimed) those of
 * priority >= 2 up to all of them.  One local claim at a time. */
static void claim_local(struct dispatcher *d)
{
	unsigned slots = (unsigned)d->cfg->local_slots, reserve = slots / 4;

	if (d->local_out || d->sweep_out)
		return;
	if (d->local_running + reserve < slots)
		claim_local_rows(d, slots - reserve - d->local_running, -1000);
	else if (d->local_running < slots)
		claim_local_rows(d, slots - d->local_running, 2);
}

static void local_claimed(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;
	int minprio = *(const int *)note, rows = res ? PQntuples(res) : 0;
	unsigned slots = (unsigned)d->cfg->local_slots;

	d->local_out = 0;
	if (!res && !away)
		log_error("claim: %s", chores_db(d->chores)->last_error);
	d->st.claimed += (uint64_t)rows;
	for (int i = 0; i < rows; i++) {
		d->st.attempts += (uint64_t)atoi(PQgetvalue(res, i, 1));
		start_row(d, res, i, 0);
	}
	if (res && minprio < 2 && !d->stopping && !d->sweep_out && d->local_running < slots)
		claim_local_rows(d, slots - d->local_running, 2);
	if (d->claimed_unstarted && !evtimer_pending(d->start_ev, NULL))
		arm(d->start_ev, START_CHECK_MS);
	maybe_done_stopping(d);
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
	if (!d->stopping && turn_busy(d) && !(t = idle_turn(d))) {
		d->poll_again = 1;
		return;
	}
	if (d->stopping) {
		/* an outcome that arrived before the stop began */
		if (d->pending)
			flush_outcomes(d);
		return;
	}
	evtimer_del(d->poll_ev);
	/* only with no result outstanding: every claim that came back is held */
	if (d->sweep_lost && !turn_busy(d) && !d->local_out && !d->sweep_out)
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
	d->st.statements = d->db.statements + d->db2.statements + chores_db(d->chores)->statements;
	d->st.db_up = d->db.conn != NULL && !d->db.connecting;
	if (!beat_fresh(d)) {
		if (!d->said_stale++)
			log_warn("heartbeat not written for %d s or more: starting nothing new",
				 d->cfg->stale_after_sec / 2);
	} else if (a.share == 0) {
		if (!d->said_no_exec++)
			log_warn("no execserver connected: claiming nothing");
	} else {
		d->said_no_exec = 0;
		/* no claim while a sweep of lost claims is out (it would requeue
		 * the rows of a claim it did not know of) */
		may_claim = a.total > 0 && !d->sweep_out;
	}
	if (d->cfg->nlocal && beat_fresh(d))
		claim_local(d);
	if (!t)
		t = idle_turn(d);
	if (!t || !send_turn(d, t, may_claim ? &a : NULL))
		arm(d->poll_ev, d->pending && !t ? FLUSH_RETRY_MS : jittered(d, d->cfg->poll_ms));
	admission_free(&a);
}

/* The database is (back) up: outcomes held back and claims go on. */
static void contact_next(struct dispatcher *d);

static void on_db_up(void *arg)
{
	struct dispatcher *d = arg;

	if (d->contact < CONTACT_DONE) {
		contact_next(d);
		return;
	}
	d->sweep_lost = 1;
	event_active(d->stopping ? d->flush_ev : d->poll_ev, EV_TIMEOUT, 0);
}

static void swept(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;

	(void)note;
	d->sweep_out = 0;
	if (res) {
		d->sweep_lost = 0;
		if (PQntuples(res) > 0)
			log_warn("requeued %d rows claimed by a statement whose result the lost "
				 "connection took",
				 PQntuples(res));
	} else if (!away) {
		log_error("claims lost with the connection: %s", chores_db(d->chores)->last_error);
	}
	if (res && !d->stopping)
		event_active(d->poll_ev, EV_TIMEOUT, 0); /* claims waited for it */
}

/* After a reconnection, with no statement on the wire and every result
 * delivered (so every row this dispatcher claimed and knows is in its
 * list): the rows claimed under its instance by a claim it does not hold
 * (id and claims; an earlier claim of the same row whose outcome is still
 * to be written is not the row's claim) were claimed by a statement whose
 * result the lost connection took (the commit went through, the answer
 * did not).  Nobody else would ever free them while this dispatcher's
 * heartbeat lives: requeued like a rescue (a chore; no claim is sent
 * until its answer, swept). */
static void sweep_lost_claims(struct dispatcher *d)
{
	size_t n = 0;
	char maxa[16];

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
	snprintf(maxa, sizeof maxa, "%d", d->cfg->max_attempts);
	const char *params[4] = { d->cfg->instance_id, ids, maxa, claims };
	if (chores_add(d->chores, d->q_rescue_lost, 4, params, NULL, 0, swept, d) == 0)
		d->sweep_out = 1;
	free(ids);
	free(claims);
	free(v);
	free(c);
}

static void lose_everything(struct dispatcher *d, const char *why)
{
	for (struct held *h = d->list; h; h = h->next)
		drop_claim(d, h, why);
}

/* The parameters of DQ_REGISTER into params (stale: its buffer). */
static void register_params(struct dispatcher *d, char *stale, size_t len, const char **params)
{
	snprintf(stale, len, "%d", d->cfg->stale_after_sec);
	params[0] = d->cfg->instance_id;
	params[1] = d->host;
	params[2] = d->pid;
	params[3] = stale;
}

/* DQ_REGISTER's answer (sent at sent_ms): 0 registered, -1 the statement
 * failed, -2 the database away, -3 a live dispatcher holds the instance. */
static int took_register(struct dispatcher *d, PGresult *res, int away, int64_t sent_ms)
{
	if (!res)
		return away ? -2 : -1;
	if (PQntuples(res) != 1)
		return -3;
	d->registered = 1;
	d->beat_ok_ms = sent_ms;
	return 0;
}

/* notify: a submission was committed: claim now (poll_cb decides whether
 * admission allows a query at all). */
static void on_submit(void *arg)
{
	struct dispatcher *d = arg;

	if (!d->stopping) {
		d->other_due_ms = 0; /* it may be of a service not seen yet */
		event_active(d->poll_ev, EV_TIMEOUT, 0);
	}
}

static void beat_done(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;

	d->beat_out = 0;
	if (!res) {
		if (!away)
			log_error("heartbeat: %s", chores_db(d->chores)->last_error);
		return;
	}
	if (atoi(PQgetvalue(res, 0, 0)) == 1) {
		/* the row carries the statement's time, which is after its send:
		 * our own view of the heartbeat's age is never the younger one */
		d->beat_ok_ms = *(const int64_t *)note;
		if (d->said_stale)
			log_info("heartbeat written again: claiming");
		d->said_stale = 0;
	} else {
		/* Another dispatcher found us silent for staleAfterSec and
		 * requeued everything we held. */
		log_warn("our dispatcher row was removed by a rescue: every claim we held was "
			 "requeued; dropping their runs and registering again");
		d->registered = 0;
		lose_everything(d, "its claim was rescued by another dispatcher");
		event_active(d->beat_ev, EV_TIMEOUT, 0);
	}
	d->st.rescued_requeued += (uint64_t)atoi(PQgetvalue(res, 0, 1));
	d->st.rescued_failed += (uint64_t)atoi(PQgetvalue(res, 0, 2));
	if (atoi(PQgetvalue(res, 0, 1)) || atoi(PQgetvalue(res, 0, 2)))
		log_warn("rescue: requeued %s and failed %s rows of silent dispatchers",
			 PQgetvalue(res, 0, 1), PQgetvalue(res, 0, 2));
	if (d->pending)
		event_active(d->poll_ev, EV_TIMEOUT, 0); /* outcomes held back while away */
}

/* The heartbeat with the rescue of silent dispatchers, a chore. */
static void send_beat(struct dispatcher *d)
{
	char stale[16], maxa[16];
	const char *params[5] = { d->cfg->instance_id, d->host, d->pid, stale, maxa };
	int64_t sent = now_ms();

	snprintf(stale, sizeof stale, "%d", d->cfg->stale_after_sec);
	snprintf(maxa, sizeof maxa, "%d", d->cfg->max_attempts);
	if (chores_add(d->chores, d->q_heartbeat, 5, params, &sent, sizeof sent, beat_done, d) == 0)
		d->beat_out = 1;
}

static void reregistered(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;
	int rc = took_register(d, res, away, *(const int64_t *)note);

	d->beat_out = 0;
	if (rc == -3)
		log_error("instance %s is held by another live dispatcher: starting nothing "
			  "until its heartbeat is older than %d s",
			  d->cfg->instance_id, d->cfg->stale_after_sec);
	else if (rc == -1)
		log_error("heartbeat: %s", chores_db(d->chores)->last_error);
	if (rc < 0)
		return;
	log_info("registered again as %s", d->cfg->instance_id);
	send_beat(d);
}

/* Every heartbeatSec: the heartbeat (registering again first when a
 * rescue removed our row); a tick with the last one still out is let
 * pass (its deadline bounds it). */
static void beat_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dispatcher *d = arg;
	char stale[16];
	const char *params[4];
	int64_t sent = now_ms();

	(void)fd;
	(void)what;
	arm(d->beat_ev, d->cfg->heartbeat_sec * 1000LL);
	if (d->listener)
		listener_keep(d->listener);
	if (d->beat_out)
		return;
	if (d->registered) {
		send_beat(d);
		return;
	}
	register_params(d, stale, sizeof stale, params);
	if (chores_add(d->chores, d->q_register, 4, params, &sent, sizeof sent, reregistered, d) ==
	    0)
		d->beat_out = 1;
}

/* The database (the chores' connection) is back, or a statement it
 * abandoned ended: claims lost with it are swept, the heartbeat goes at
 * once if it is not fresh, outcomes of a stop go on. */
static void on_chores_up(void *arg)
{
	struct dispatcher *d = arg;

	if (d->contact < CONTACT_DONE)
		return;
	d->sweep_lost = 1; /* a local claim may have been lost with it */
	if (!beat_fresh(d) && !d->beat_out)
		event_active(d->beat_ev, EV_TIMEOUT, 0);
	if (d->stopping)
		event_active(d->flush_ev, EV_TIMEOUT, 0);
}

/* Ids and claims of the held rows at the execserver, for DQ_START/DQ_HELD. */
static int collect(struct dispatcher *d, int only_unstarted_running, int64_t *ids, int64_t *claim,
		   int max)
{
	int n = 0;

	for (struct held *h = d->list; h && n < max; h = h->next) {
		if ((!h->xj && !h->lr) || h->lost)
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
		int found = 0;
		for (int r = 0; r < PQntuples(res) && !found; r++)
			found = strtoll(PQgetvalue(res, r, 0), NULL, 10) == a->v[i];
		/* a run that ended meanwhile counted itself (run_ended) */
		if (!h || h->started || (!h->xj && !h->lr))
			continue;
		if (found) {
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
static void start_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dispatcher *d = arg;

	(void)fd;
	(void)what;
	if (!d->start_out && ask_chore(d, 1, d->q_start, 3, started))
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
			d->st.cancels++;
			d->st.cancel_latency_ms += strtoull(PQgetvalue(res, row, 3), NULL, 10);
			drop_claim(d, h, "cancelled");
		} else {
			drop_claim(d, h, "its claim was rescued by another dispatcher");
		}
	}
}

/* Every cancelPollMs while rows are held: which are still ours (a
 * chore; none while nothing is held); a tick with the last poll still
 * out is let pass. */
static void cancel_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dispatcher *d = arg;

	(void)fd;
	(void)what;
	arm(d->cancel_ev, d->cfg->cancel_poll_ms);
	if (!d->cancel_out && ask_chore(d, 0, d->q_held, 2, polled))
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
static void give_up(struct dispatcher *d, struct held *h)
{
	log_error("job %lld attempt %d: stopping: outcome %s (error %s, receipt %s) not written "
		  "in any form within %d s (%s); given up: the row stays held by %s and is "
		  "rerun by the rescue after staleAfterSec (%d s)",
		  (long long)h->id, h->attempts, h->state, h->error ? h->error : "none",
		  h->receipt ? h->receipt : "none", STOP_GIVE_UP_MS / 1000, d->db.last_error,
		  d->cfg->instance_id, d->cfg->stale_after_sec);
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
		if (d->stopping && now_ms() >= d->give_up_ms) {
			give_up(d, h);
			break;
		}
		log_error("job %lld attempt %d: outcome %s not written in any form (%s); kept, "
			  "trying again in %d s (the row stays held by this dispatcher)",
			  (long long)h->id, h->attempts, h->state, d->db.last_error,
			  OUTCOME_RETRY_MS / 1000);
		h->retry_at_ms = now_ms() + OUTCOME_RETRY_MS;
		if (d->stopping && h->retry_at_ms > d->give_up_ms)
			h->retry_at_ms = d->give_up_ms;
		break;
	}
}

static void flushed(void *arg, PGresult *res, int away, const void *note);

/* Writes every outcome due, FINISH_BATCH per statement, one statement at
 * a time on the chores' connection (the stop, and a batch the database
 * refused).  The database away: the rest waits for FLUSH_RETRY_MS.  A
 * batch the database refuses is written one row at a time, and a row
 * refused alone is cut down (cut_outcome). */
static void flush_outcomes(struct dispatcher *d)
{
	struct fin *f = &d->flush_fin;
	const char *params[8];
	int64_t next = 0;

	if (d->flush_out)
		return;
	if (fin_build(d, f, d->flush_per) > 0) {
		fin_params(d, f, params);
		if (chores_add(d->chores, d->q_finish, 8, params, NULL, 0, flushed, d) == 0)
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
		if (!h->xj && !h->lr && h->state && !h->writing && (!next || h->retry_at_ms < next))
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

static void flush_cb(evutil_socket_t fd, short what, void *arg)
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

static void janitor_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dispatcher *d = arg;
	char days[16];
	const char *params[1] = { days };

	(void)fd;
	(void)what;
	snprintf(days, sizeof days, "%d", d->cfg->retain_done_days);
	if (chores_add(d->chores, d->q_janitor, 1, params, NULL, 0, janitor_done, d) < 0)
		arm(d->janitor_ev, JANITOR_AGAIN_MS);
}

/* ---- stopping ---- */

static void left(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;

	(void)res;
	(void)away;
	(void)note;
	event_base_loopbreak(d->base);
}

/* Stopping and nothing held, on the wire or waiting to be claimed: our
 * dispatcher row is deleted (a chore), then the loop ends. */
static void maybe_done_stopping(struct dispatcher *d)
{
	const char *params[3] = { d->cfg->instance_id, d->host, d->pid };

	if (!d->stopping || d->list || turn_busy(d) || d->flush_out || d->local_out ||
	    d->sweep_out || d->leaving)
		return;
	if (d->gave_up)
		log_warn("stopping: outcomes were given up; our dispatcher row stays, so that the "
			 "rescue reruns their rows");
	else if (d->registered &&
		 chores_add(d->chores, d->q_leave, 3, params, NULL, 0, left, d) == 0) {
		d->leaving = 1;
		return;
	}
	event_base_loopbreak(d->base);
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

static void signal_cb(evutil_socket_t sig, short what, void *arg)
{
	struct dispatcher *d = arg;

	(void)what;
	if (sig == SIGHUP) {
		log_reopen();
		return;
	}
	if (d->stopping) {
		log_warn("second signal: exiting now; the rows still held are rescued after %d s",
			 d->cfg->stale_after_sec);
		event_base_loopbreak(d->base);
		return;
	}
	d->stopping = 1;
	d->give_up_ms = now_ms() + STOP_GIVE_UP_MS;
	log_info("stopping: giving back claims not started, waiting for %u running jobs",
		 d->at_exec - d->claimed_unstarted);
	evtimer_del(d->poll_ev);
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

static int expand_all(struct dispatcher *d)
{
	const char *s = d->cfg->schema;

	d->q_register = dq_expand(DQ_REGISTER, s);
	d->q_heartbeat = dq_expand(DQ_HEARTBEAT, s);
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
	return d->q_version && d->q_claim_exec && d->q_landed && d->q_register && d->q_heartbeat &&
			       d->q_rescue_own && d->q_rescue_lost && d->q_claim && d->q_start &&
			       d->q_finish && d->q_held && d->q_leave && d->q_janitor &&
			       d->q_position && d->q_finish_claim
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
static void contact_next(struct dispatcher *d)
{
	char maxa[16], stale[16];
	const char *params[4] = { d->cfg->instance_id, maxa };
	const char *sql = d->contact == CONTACT_VERSION    ? d->q_version
			  : d->contact == CONTACT_REGISTER ? d->q_register
							   : d->q_rescue_own;
	int n = d->contact == CONTACT_VERSION ? 0 : d->contact == CONTACT_REGISTER ? 4 : 2;

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
static void contact_cb(evutil_socket_t fd, short what, void *arg)
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
	const char **names = calloc(cfg->nlocal + 1, sizeof *names);
	for (size_t i = 0; names && i < cfg->nlocal; i++)
		names[i] = cfg->local[i].name;
	d.local_names = names ? db_text_array(names, (int)cfg->nlocal) : NULL;
	free(names);
	for (int t = 0; t < HOT_CONNS; t++) {
		d.turns[t].d = &d;
		d.turns[t].db = t ? &d.db2 : &d.db;
	}
	if (!d.local_names || expand_all(&d) < 0 || db_init(&d.db, cfg->database) < 0 ||
	    db_init(&d.db2, cfg->database) < 0) {
		log_error("out of memory");
		goto out;
	}
	d.base = event_base_new();
	/* a statement not answered within staleAfterSec: the connection is
	 * taken for lost (by then our heartbeat is stale anyway) */
	if (!d.base || db_attach(&d.db, d.base, timeout_ms, on_db_up, &d) < 0 ||
	    db_attach(&d.db2, d.base, timeout_ms, on_db_up, &d) < 0 ||
	    !(d.chores = chores_new(d.base, cfg->database, timeout_ms, on_chores_up, &d))) {
		log_error("out of memory");
		goto out;
	}
	exc_options_init(&o);
	o.auth_token = cfg->auth_token;
	o.connect_timeout_sec = (unsigned)cfg->connect_timeout_sec;
	o.log = client_log;
	o.log_level = (enum exc_log_level)cfg->log_level;
	o.client_id = cfg->instance_id;
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
	if (!d.poll_ev || !d.beat_ev || !d.cancel_ev || !d.start_ev || !d.flush_ev ||
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
		d.metrics = metrics_start(d.base, cfg->metrics, &d.st, cfg->instance_id, err,
					  sizeof err);
		if (!d.metrics) {
			log_error("%s", err);
			goto out;
		}
	}
	log_info("execdispatch %s: instance %s, schema %s, %zu execserver address%s; connecting "
		 "to the database",
		 PACKAGE_VERSION, cfg->instance_id, cfg->schema, cfg->execservers.count,
		 cfg->execservers.count == 1 ? "" : "es");
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
	struct event *evs[] = { d.poll_ev,  d.beat_ev,    d.cancel_ev, d.start_ev,
				d.flush_ev, d.janitor_ev, d.sig_term,  d.sig_int,
				d.sig_hup,  d.sig_chld,   d.contact_ev };
	for (struct held *h = d.list; h; h = h->next)
		if (h->lr)
			local_cancel(h->lr); /* a forced exit: no local job outlives us */
	for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
		if (evs[i])
			event_free(evs[i]);
	while (d.list)
		held_free(&d, d.list);
	db_close(&d.db); /* their events first */
	db_close(&d.db2);
	chores_free(d.chores);
	for (int t = 0; t < HOT_CONNS; t++)
		turn_release(&d.turns[t]);
	if (d.base)
		event_base_free(d.base);
	free(d.local_names);
	for (size_t i = 0; i < d.nservices; i++)
		free(d.services[i]);
	free(d.services);
	char **qs[] = { &d.q_register,   &d.q_heartbeat, &d.q_rescue_own, &d.q_rescue_lost,
			&d.q_claim,      &d.q_start,     &d.q_finish,     &d.q_held,
			&d.q_leave,      &d.q_janitor,   &d.q_position,   &d.q_finish_claim,
			&d.q_claim_exec, &d.q_landed,    &d.q_version };
	for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++)
		free(*qs[i]);
	return rc;
}
