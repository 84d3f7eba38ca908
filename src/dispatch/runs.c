/*
 * runs.c - a claimed row's run: handed to libexecclient (its job with
 * EXECDISPATCH_JOB_ID and EXECDISPATCH_ATTEMPT in its env) or spawned
 * here for a local service (start_row), its end and the outcome its
 * receipt makes (docs/dispatch.md, "Outcomes"), its POSITIONs, and the
 * exec-bound services learned from the rows claimed (admission bounds
 * each by its own share).  Invariants: at_exec, local_running and
 * claimed_unstarted count the runs as they start and end; a run whose
 * claim was lost (HELD_LOST) ends with its result dropped.  Calls
 * watch.c, stopping.c and held.c (the file map in dispatch_impl.h).
 */
#include "autoconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include <execserver/client.h>

#include "common/log.h"
#include "dispatch/dispatch_impl.h"

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
	} else if (retry_again(dispatch_retry_policy(cfg, h->service), h->attempts, r)) {
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
		attempt_ended(d, h->id, h->claim);
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
