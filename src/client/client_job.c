/*
 * client_job.c - exc_job: one submitted job from its WANTs to its receipt (where
 * its wants are parked: placement.c; its files and URLs: job_files.c).
 *
 * States: WAITING (parked as "copies" on every ready connection whose
 * instance offers the service and whose address serves it), RUNNING (an
 * OFFER won: JOB sent on the owner connection), SEEKING (the owner
 * connection dropped and no live connection reaches the owner instance:
 * the pool looks for it until owner_grace_sec runs out), DONE.
 *
 * Placement rules: the first OFFER of a WAITING job wins; every other
 * OFFER (late, for a running or unknown job) gets DECLINE at once, and
 * the other parked copies get UNWANT.  A refused WANT (limit_reached,
 * draining, ...) is retried on the next tick.  A job never runs twice: a
 * JOB is sent only from WAITING, and only once per OFFER; a job goes back
 * to WAITING only when the connection its JOB went on refused that JOB
 * (after a resume, unknown_job ends it lost instead): an ERROR counts as
 * that refusal only when it names the JOB and its token, never when it
 * answers an older message about the job (answers()).  Protocol 2: every
 * DONE read is acknowledged (ACK), a second copy of one included.
 *
 * on_done is called exactly once per job, always from the event loop:
 * from a message handler, a timer, or done_ev (receipts the library makes
 * itself inside an exc_* call are deferred through it).
 */
#include "autoconfig.h"
#include "client/fallback.h"
#include "client/job_impl.h"
#include "common/utf8.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/event.h>

static const char *const state_names[] = { "waiting", "running", "seeking", "done" };

/* ---- small helpers ------------------------------------------------------- */

struct exc_job *job_find(exc_client *c, const char *id)
{
	if (id == NULL)
		return NULL;
	for (struct exc_job *j = c->jobs; j; j = j->next)
		if (j->state != J_DONE && strcmp(j->id, id) == 0)
			return j;
	return NULL;
}

struct copy *job_find_copy(struct exc_job *j, const struct exc_conn *k)
{
	for (size_t i = 0; i < j->ncopies; i++)
		if (j->copies[i].k == k)
			return &j->copies[i];
	return NULL;
}

void job_drop_copy(struct exc_job *j, struct copy *cp)
{
	size_t i = (size_t)(cp - j->copies);

	j->copies[i] = j->copies[--j->ncopies];
}

int job_add_copy(struct exc_job *j, struct exc_conn *k)
{
	if (j->ncopies == j->capcopies) {
		size_t cap = j->capcopies ? j->capcopies * 2 : 4;
		struct copy *n = realloc(j->copies, cap * sizeof *n);

		if (n == NULL)
			return -1;
		j->copies = n;
		j->capcopies = cap;
	}
	j->copies[j->ncopies].k = k;
	j->copies[j->ncopies].state = CP_PARKED;
	j->ncopies++;
	return 0;
}

/* UNWANT on every parked copy; forgets them. */
void job_unwant_all(struct exc_job *j)
{
	for (size_t i = 0; i < j->ncopies; i++)
		if (j->copies[i].state == CP_PARKED)
			conn_send(j->copies[i].k, wire_job_msg(PROTO_UNWANT, j->id));
	j->ncopies = 0;
}

void job_unlink_free(struct exc_job *j)
{
	exc_client *c = j->c;

	for (struct exc_job **pp = &c->jobs; *pp; pp = &(*pp)->next)
		if (*pp == j) {
			*pp = j->next;
			break;
		}
	legacy_job_free(j);
	job_free_pipes(j);
	for (size_t i = 0; i < j->nfiles; i++) {
		stream_free(j->files[i].st);
		free(j->files[i].name);
		free((char *)j->files[i].io.url);
	}
	free(j->files);
	free(j->copies);
	if (j->timer)
		event_free(j->timer);
	if (j->done_ev)
		event_free(j->done_ev);
	if (j->start_ev)
		event_free(j->start_ev);
	json_object_put(j->payload);
	free(j->service);
	free(j);
}

/* ---- the end of a job ------------------------------------------------------ */

/* Calls on_done with receipt rj (the server's, or NULL for a local one). */
void job_finish(struct exc_job *j, struct json_object *rj)
{
	struct exc_receipt r = { 0 };
	struct json_object *err = NULL, *v;
	const struct jfile *bad;
	char msg[300];

	if (j->state == J_DONE)
		return;
	if (j->timer)
		evtimer_del(j->timer);
	r.job_id = j->id;
	r.instance_id = j->owner_instance[0] ? j->owner_instance : NULL;
	r.duration_ms = -1;
	if (rj) {
		r.json = json_object_to_json_string_ext(rj, JSON_C_TO_STRING_PLAIN);
		if (json_object_object_get_ex(rj, "exit_code", &v) &&
		    json_object_is_type(v, json_type_int)) {
			r.exited = 1;
			r.exit_code = json_object_get_int(v);
		}
		r.signal = (int)wire_int(rj, "signal", 0);
		r.duration_ms = wire_int(rj, "duration_ms", -1);
		r.stdout_text = wire_str(rj, "stdout");
		r.stdout_truncated = json_object_object_get_ex(rj, "stdout_truncated", &v) &&
				     json_object_get_boolean(v);
		r.stderr_line = wire_str(rj, "stderr");
		r.receipt_lost = json_object_object_get_ex(rj, "receipt_lost", &v) &&
				 json_object_get_boolean(v);
		if (json_object_object_get_ex(rj, "error", &err) &&
		    json_object_is_type(err, json_type_object)) {
			r.error_code = wire_str(err, "code");
			r.error_message = wire_str(err, "message");
			r.retryable = json_object_object_get_ex(err, "retryable", &v) &&
				      json_object_get_boolean(v);
			if (r.error_code == NULL)
				r.error_code = "internal";
			if (r.error_message == NULL)
				r.error_message = "";
		}
	} else {
		r.error_code = j->local_code;
		r.error_message = j->local_msg;
		r.retryable = j->local_retryable;
	}
	bad = job_failed_stream(j);
	if (r.error_code == NULL && bad) {
		snprintf(msg, sizeof msg, "%s: %s", bad->name,
			 bad->why[0] ? bad->why : "stream incomplete");
		r.error_code = EXC_E_LOCAL_IO;
		r.error_message = msg;
	}
	/* what moved, also through a transfer the end of the job cuts short:
	 * a stdout that got bytes is never the place for the receipt's copy */
	for (size_t i = 0; i < 2 && i < j->nfiles; i++) {
		const struct jfile *f = &j->files[i];
		uint64_t n = f->ep && endpoint_bytes(f->ep) > f->bytes ? endpoint_bytes(f->ep)
								       : f->bytes;

		*(i == 0 ? &r.stdin_bytes : &r.stdout_bytes) = n;
	}
	r.ok = r.error_code == NULL && r.exited && r.exit_code == 0 && r.signal == 0;
	j->state = J_DONE;
	job_free_pipes(j);
	/* local files take the job's output only when it succeeded */
	for (size_t i = 0; i < j->nfiles; i++) {
		struct jfile *f = &j->files[i];

		if (!f->is_out || f->st == NULL)
			continue;
		if (!r.ok) {
			stream_discard(f->st);
		} else if (stream_commit(f->st) != 0) {
			snprintf(msg, sizeof msg, "%s: %s", f->name, stream_error(f->st));
			r.error_code = EXC_E_LOCAL_IO;
			r.error_message = msg;
			r.ok = 0;
		}
	}
	if (j->on_done)
		j->on_done(j, &r, j->arg);
	job_unlink_free(j);
}

static void done_ev_cb(evutil_socket_t fd, short what, void *arg)
{
	job_finish(arg, NULL);
}

void job_outcome_unknown(struct exc_job *j, const char *instance, const char *what)
{
	if (j->cancel_requested)
		job_finish_local(j, EXC_E_CANCELLED, 0, "cancelled; instance %s %s", instance,
				 what);
	else
		job_finish_local(j, EXC_E_LOST, 1, "instance %s %s; it may have run", instance,
				 what);
}

/* A receipt made by the library; delivered from the loop. */
void job_finish_local(struct exc_job *j, const char *code, int retryable, const char *fmt, ...)
{
	va_list ap;

	if (j->state == J_DONE || j->local_code[0])
		return;
	snprintf(j->local_code, sizeof j->local_code, "%s", code);
	va_start(ap, fmt);
	vsnprintf(j->local_msg, sizeof j->local_msg, fmt, ap);
	va_end(ap);
	j->local_retryable = retryable;
	event_active(j->done_ev, EV_TIMEOUT, 1);
}

/* ---- messages --------------------------------------------------------------- */

void job_on_offer(exc_client *c, struct exc_conn *k, struct json_object *o)
{
	const char *id = wire_str(o, "job_id"), *token = wire_str(o, "token");
	struct exc_job *j = job_find(c, id);
	struct json_object *job, *msg;
	size_t len;

	if (id == NULL || token == NULL)
		return;
	if (j == NULL || j->state != J_WAITING || j->cancel_requested || j->local_code[0]) {
		/* surplus: the job has a slot elsewhere, or is gone */
		client_log(c, EXC_LOG_DEBUG, "declining offer for %s from %s", id, k->instance_id);
		conn_send(k, wire_decline(id, token));
		return;
	}
	{
		struct copy *cp = job_find_copy(j, k);

		if (cp)
			job_drop_copy(j, cp);
	}
	job_unwant_all(j);
	job_free_pipes(j);
	job = job_build(j, &k->local, 0);
	if (job == NULL) {
		conn_send(k, wire_decline(id, token));
		job_finish_local(j, EXC_E_LOCAL_IO, 0, "cannot serve the job's pipes: %s",
				 strerror(errno ? errno : ENOMEM));
		return;
	}
	msg = wire_job(id, token, job);
	json_object_put(job);
	len = msg ? strlen(json_object_to_json_string_ext(msg, WIRE_TEXT)) : 0;
	if (len > k->max_frame) {
		/* the execserver would close the whole connection (1009),
		 * every other job on it with it: refused here, not sent */
		json_object_put(msg);
		conn_send(k, wire_decline(id, token));
		job_finish_local(j, EXC_E_BAD_JOB, 0,
				 "the JOB message is %zu bytes, more than the %zu bytes instance "
				 "%s takes (its maxFrameBytes)",
				 len, k->max_frame, k->instance_id);
		return;
	}
	conn_send(k, msg);
	snprintf(j->token, sizeof j->token, "%s", token);
	j->state = J_RUNNING;
	job_started(j);
	j->owner = k;
	j->owner_addr = k->a;
	j->owner_pending = 0;
	j->stale_n = 0;
	j->resumed = 0;
	j->resume_queries = 0;
	snprintf(j->owner_instance, sizeof j->owner_instance, "%s", k->instance_id);
	if (j->timer)
		evtimer_del(j->timer);
	client_log(c, EXC_LOG_DEBUG, "job %s runs on %s", id, k->instance_id);
}

void job_on_done(exc_client *c, struct exc_conn *k, struct json_object *o)
{
	const char *id = wire_str(o, "job_id");
	struct exc_job *j = job_find(c, id);
	struct json_object *rj;

	/* Protocol 2: every DONE read is acknowledged, before it is handed
	 * on: the server keeps the receipt until then and sends it again on
	 * the next connection if the ACK does not arrive.  A second copy
	 * (its job is done here already) is acknowledged and dropped. */
	if (id && k->protocol >= PROTO_VERSION_ACK)
		conn_send(k, wire_job_msg(PROTO_ACK, id));
	if (j == NULL) {
		client_log(c, EXC_LOG_DEBUG, "%s: DONE of %s, a job done already: dropped",
			   k->a->url, id ? id : "?");
		return;
	}
	if (j->state == J_WAITING && !j->cancel_requested)
		return; /* a DONE for a parked copy we gave up */
	if (j->state != J_WAITING && strcmp(j->owner_instance, k->instance_id) != 0)
		return; /* another instance's job of the same id */
	if (!j->owner_instance[0])
		snprintf(j->owner_instance, sizeof j->owner_instance, "%s", k->instance_id);
	if (!json_object_object_get_ex(o, "receipt", &rj) ||
	    !json_object_is_type(rj, json_type_object)) {
		/* acknowledged, so never handed on: the job ends here, not
		 * left running for ever (cancelled if the caller cancelled it) */
		client_log(c, EXC_LOG_WARN, "%s: DONE of %s without a receipt object", k->a->url,
			   j->id);
		job_outcome_unknown(j, k->instance_id, "ended the job without a readable receipt");
		return;
	}
	job_finish(j, rj);
}

void job_on_position(exc_client *c, struct exc_conn *k, struct json_object *o)
{
	struct exc_job *j = job_find(c, wire_str(o, "job_id"));
	struct exc_position p;
	struct json_object *v;

	if (j == NULL)
		return;
	if (j->state == J_RUNNING && j->owner == k && j->resume_queries) {
		j->resume_queries--; /* asked by the library, not the caller */
		return;
	}
	if (j->state == J_RUNNING && j->owner == k && j->owner_pending)
		j->owner_pending--;
	if (j->on_position == NULL)
		return;
	p.instance_id = k->instance_id;
	p.state = wire_str(o, "state");
	if (p.state == NULL)
		p.state = "unknown";
	p.running = wire_int(o, "running", 0);
	p.ahead = wire_int(o, "ahead", 0);
	p.capacity = wire_int(o, "capacity", 0);
	p.eta_ms = json_object_object_get_ex(o, "eta_ms", &v) &&
				   json_object_is_type(v, json_type_int)
			   ? json_object_get_int64(v)
			   : -1;
	j->on_position(j, &p, j->arg);
}

void job_on_progress(exc_client *c, struct exc_conn *k, struct json_object *o)
{
	struct exc_job *j = job_find(c, wire_str(o, "job_id"));
	struct json_object *v;

	/* none after a resume: whether the new connection gets them depends
	 * on which handler holds it (docs/protocol.md, PROGRESS) */
	if (j == NULL || j->on_progress == NULL || j->state != J_RUNNING || j->owner != k ||
	    j->resumed || !json_object_object_get_ex(o, "fraction", &v) ||
	    !(json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int)))
		return;
	double f = json_object_get_double(v);
	if (!(f >= 0) || f > 1)
		return;
	/* the promise of client.h, whatever the server sent: UTF-8 without
	 * control characters (a terminal draws it), at most 200 bytes; a text
	 * that breaks it is dropped, the fraction kept */
	const char *text = wire_str(o, "text");
	char cut[201];
	size_t tlen = text ? strlen(text) : 0;
	if (!text || !utf8_valid((const unsigned char *)text, tlen) || utf8_has_control(text, tlen))
		tlen = 0;
	tlen = tlen ? utf8_cut(text, tlen < sizeof cut - 1 ? tlen : sizeof cut - 1) : 0;
	memcpy(cut, text ? text : "", tlen);
	cut[tlen] = '\0';
	j->on_progress(j, f, cut, j->progress_arg);
}

/* The connect timeout again for the time left since exc_submit (a job
 * that goes back to waiting ends no_slot at the latest then). */
static void job_rearm_connect_timeout(struct exc_job *j)
{
	uint64_t limit = (uint64_t)j->connect_timeout_sec * 1000, spent;
	struct timeval tv = { 0, 0 };

	if (j->connect_timeout_sec == 0)
		return;
	spent = client_now_ms() - j->submit_ms;
	if (spent < limit) {
		tv.tv_sec = (time_t)((limit - spent) / 1000);
		tv.tv_usec = (suseconds_t)((limit - spent) % 1000 * 1000);
	}
	evtimer_add(j->timer, &tv);
}

/* The owner k does not run j (its JOB was refused): wait for another slot,
 * or end as cancelled when the caller asked for that meanwhile.  The
 * QUERY/CANCEL sent to k since the JOB will be answered unknown_job: those
 * answers are swallowed (they are not about a parked copy). */
static void job_back_to_waiting(struct exc_job *j, struct exc_conn *k)
{
	job_free_pipes(j);
	j->state = J_WAITING;
	j->owner = NULL;
	j->owner_instance[0] = '\0';
	j->stale_conn = k;
	j->stale_n = j->owner_pending;
	j->owner_pending = 0;
	j->since_ms = client_now_ms();
	if (j->cancel_requested) {
		job_finish_local(j, EXC_E_CANCELLED, 0, "cancelled before it started");
		return;
	}
	job_rearm_connect_timeout(j);
	job_place(j);
}

static int code_is(const char *code, const char *a)
{
	return strcmp(code, a) == 0;
}

/*
 * Whether an ERROR about j on a connection may answer a message of the
 * given type (PROTO_JOB: the JOB of j's current offer).  The server
 * answers a connection's messages in order, but a success of WANT,
 * UNWANT, DECLINE or JOB is silent, so an ERROR read after a JOB may
 * still answer an older message about the job on that connection: the
 * UNWANT sent when another instance's offer was taken, the JOB of an
 * offer that has been superseded since.  The server names what it
 * refuses (`refused`, and the `token` of a JOB or DECLINE); with an older
 * execserver, which does not, the codes alone decide (and may mislead).
 */
static int answers(struct json_object *o, const struct exc_job *j, const char *type)
{
	const char *refused = wire_str(o, "refused"), *token = wire_str(o, "token");

	if (refused == NULL)
		return 1;
	if (strcmp(refused, type) != 0)
		return 0;
	return strcmp(type, PROTO_JOB) != 0 || token == NULL || strcasecmp(token, j->token) == 0;
}

/* ... a QUERY or a CANCEL (the library's, or the caller's). */
static int answers_ask(struct json_object *o, const struct exc_job *j)
{
	return answers(o, j, PROTO_QUERY) || answers(o, j, PROTO_CANCEL);
}

void job_on_error(exc_client *c, struct exc_conn *k, struct json_object *o)
{
	const char *code = wire_str(o, "code"), *msg = wire_str(o, "message"), *refused;
	struct exc_job *j = job_find(c, wire_str(o, "job_id"));
	struct copy *cp;

	if (code == NULL)
		code = "?";
	if (msg == NULL)
		msg = "";
	refused = wire_str(o, "refused");
	client_log(c, EXC_LOG_DEBUG, "%s: ERROR %s (%s)%s%s%s%s", k->a->url, code, msg,
		   j ? " for job " : "", j ? j->id : "", refused ? ", answering " : "",
		   refused ? refused : "");
	if (j == NULL)
		return;
	if (j->stale_n && j->stale_conn == k && code_is(code, PROTO_E_UNKNOWN_JOB) &&
	    answers_ask(o, j)) {
		j->stale_n--; /* a QUERY/CANCEL sent before the JOB's refusal came */
		return;
	}
	if (j->state == J_WAITING && (cp = job_find_copy(j, k)) != NULL) {
		if (code_is(code, PROTO_E_OFFER_EXPIRED))
			job_drop_copy(j, cp); /* parked again by the next tick */
		else if (answers(o, j, PROTO_WANT))
			cp->state = CP_REFUSED;
		return;
	}
	if (j->state != J_RUNNING || j->owner != k)
		return;
	/* After a resume only a QUERY/CANCEL can be answered here: the JOB
	 * went on another connection.  unknown_job then means the instance
	 * no longer has the job; it is never sent again on its own. */
	if (j->resumed) {
		if (code_is(code, PROTO_E_UNKNOWN_JOB) && answers_ask(o, j))
			job_outcome_unknown(j, j->owner_instance,
					    "no longer knows the job (its receipt was dropped, or "
					    "its JOB never arrived)");
		return;
	}
	/*
	 * Running on k: the server answers in order, so a refusal of the JOB
	 * comes before any answer to a later QUERY/CANCEL.  bad_job and
	 * unknown_command end the job; limit_reached, bad_token, not_offered
	 * and bad_message can only refuse the JOB (the offer is withdrawn or
	 * stale); unknown_job refuses the JOB, or answers a QUERY/CANCEL of a
	 * job the server does not run (had it run, its DONE came first).
	 * Only the refusal of this JOB counts (answers()).
	 */
	if (!answers(o, j, PROTO_JOB))
		return;
	if (code_is(code, PROTO_E_BAD_JOB) || code_is(code, PROTO_E_UNKNOWN_COMMAND)) {
		snprintf(j->local_code, sizeof j->local_code, "%s", code);
		snprintf(j->local_msg, sizeof j->local_msg, "%s", msg);
		j->local_retryable = 0;
		job_finish(j, NULL);
	} else if (code_is(code, PROTO_E_LIMIT_REACHED) || code_is(code, PROTO_E_BAD_TOKEN) ||
		   code_is(code, PROTO_E_NOT_OFFERED) || code_is(code, PROTO_E_BAD_MESSAGE) ||
		   code_is(code, PROTO_E_UNKNOWN_JOB)) {
		job_back_to_waiting(j, k);
	}
}

/* ---- API ------------------------------------------------------------------- */

void exc_job_spec_init(struct exc_job_spec *s)
{
	memset(s, 0, sizeof *s);
	s->in.fd = s->out.fd = -1;
}

const char *exc_job_id(const exc_job *j)
{
	return j->id;
}

const char *exc_job_state(const exc_job *j)
{
	return state_names[j->state];
}

static void start_ev_cb(evutil_socket_t fd, short what, void *arg)
{
	struct exc_job *j = arg;

	if (j->on_start && j->state != J_DONE)
		j->on_start(j, j->arg);
}

void job_started(struct exc_job *j)
{
	if (j->start_told)
		return;
	j->start_told = 1;
	if (j->on_start && j->start_ev)
		event_active(j->start_ev, 0, 0);
}

void exc_job_on_start(exc_job *j, exc_start_cb cb)
{
	if (j->start_ev == NULL)
		j->start_ev = event_new(j->c->base, -1, 0, start_ev_cb, j);
	j->on_start = j->start_ev ? cb : NULL;
}

void exc_job_on_progress(exc_job *j, exc_progress_cb cb, void *arg)
{
	j->on_progress = cb;
	j->progress_arg = arg;
}

exc_job *exc_submit(exc_client *c, const struct exc_job_spec *s)
{
	struct exc_job *j;
	struct json_object *cmd;

	if (s == NULL || s->service == NULL || !job_id_ok(s->service, 128) || s->on_done == NULL ||
	    s->job_json == NULL) {
		client_fail(c, EINVAL, "a job needs service, job_json and on_done");
		return NULL;
	}
	if (s->job_id && !job_id_ok(s->job_id, 64)) {
		client_fail(c, EINVAL, "job_id: 1-64 printable ASCII characters");
		return NULL;
	}
	if (s->job_id && job_find(c, s->job_id)) {
		client_fail(c, EEXIST, "job_id %s is in use", s->job_id);
		return NULL;
	}
	if (s->in.kind == EXC_IO_DISCARD || s->out.kind == EXC_IO_BUFFER) {
		client_fail(c, EINVAL, "stdin/stdout: source and sink kinds swapped");
		return NULL;
	}
	for (size_t i = 0; i < s->ninputs + s->noutputs; i++) {
		const struct exc_file *f = i < s->ninputs ? &s->inputs[i]
							  : &s->outputs[i - s->ninputs];

		if (!job_name_ok(f->name) || f->io.kind == EXC_IO_NONE) {
			client_fail(c, EINVAL, "file %zu: a name without '/' and a source/sink", i);
			return NULL;
		}
	}
	j = calloc(1, sizeof *j);
	if (j == NULL) {
		client_fail(c, ENOMEM, "out of memory");
		return NULL;
	}
	j->c = c;
	j->payload = json_tokener_parse(s->job_json);
	if (j->payload == NULL || !json_object_is_type(j->payload, json_type_object) ||
	    !json_object_object_get_ex(j->payload, "command", &cmd) ||
	    !json_object_is_type(cmd, json_type_string)) {
		client_fail(c, EINVAL, "job_json: a JSON object with a string \"command\"");
		goto fail;
	}
	if (s->job_id)
		snprintf(j->id, sizeof j->id, "%s", s->job_id);
	else {
		char rnd[9];

		if (client_random_hex(rnd, 4) != 0) {
			client_fail(c, EIO, "no random bytes");
			goto fail;
		}
		snprintf(j->id, sizeof j->id, "j%u-%s", ++c->job_seq, rnd);
	}
	j->service = strdup(s->service);
	j->priority = s->priority;
	j->nfiles = 2 + s->ninputs + s->noutputs;
	j->files = calloc(j->nfiles, sizeof *j->files);
	j->timer = evtimer_new(c->base, job_connect_timeout, j);
	j->done_ev = event_new(c->base, -1, 0, done_ev_cb, j);
	if (!j->service || !j->files || !j->timer || !j->done_ev) {
		client_fail(c, ENOMEM, "out of memory");
		goto fail;
	}
	if (job_file_init(c, &j->files[0], "stdin", 0, &s->in) != 0 ||
	    job_file_init(c, &j->files[1], "stdout", 1, &s->out) != 0)
		goto fail;
	for (size_t i = 0; i < s->ninputs + s->noutputs; i++) {
		int out = i >= s->ninputs;
		const struct exc_file *f = out ? &s->outputs[i - s->ninputs] : &s->inputs[i];

		if (job_file_init(c, &j->files[2 + i], f->name, out, &f->io) != 0)
			goto fail;
	}
	j->on_done = s->on_done;
	j->on_position = s->on_position;
	j->arg = s->arg;
	j->connect_timeout_sec = s->connect_timeout_sec ? s->connect_timeout_sec
							: c->opt.connect_timeout_sec;
	if (j->connect_timeout_sec) {
		struct timeval tv = { (time_t)j->connect_timeout_sec, 0 };

		evtimer_add(j->timer, &tv);
	}
	j->since_ms = j->submit_ms = client_now_ms();
	j->next = c->jobs;
	c->jobs = j;
	job_place(j);
	return j;
fail : {
	int e = errno;

	job_unlink_free(j);
	errno = e;
}
	return NULL;
}

int exc_cancel(exc_job *j)
{
	if (j->state == J_DONE || j->local_code[0] || j->cancel_requested)
		return j->state == J_DONE || j->local_code[0] ? -1 : 0;
	j->cancel_requested = 1;
	if (j->state == J_WAITING) {
		job_unwant_all(j);
		job_finish_local(j, EXC_E_CANCELLED, 0, "cancelled before it started");
	} else if (j->owner) {
		/* if the connection is closing, the CANCEL goes out again when
		 * the instance is reached (job_resume_on) */
		j->owner_pending++;
		conn_send(j->owner, wire_job_msg(PROTO_CANCEL, j->id));
	} else if (j->state == J_SEEKING) {
		client_log(j->c, EXC_LOG_INFO,
			   "job %s: cancel held until instance %s is "
			   "reached",
			   j->id, j->owner_instance);
	} else {
		legacy_cancel(j);
	}
	return 0;
}

int exc_query(exc_job *j)
{
	int n = 0;

	if (j->state == J_WAITING) {
		for (size_t i = 0; i < j->ncopies; i++)
			if (j->copies[i].state == CP_PARKED &&
			    conn_send(j->copies[i].k, wire_job_msg(PROTO_QUERY, j->id)) == 0)
				n++;
	} else if (j->state == J_RUNNING && j->owner) {
		j->owner_pending++;
		n = conn_send(j->owner, wire_job_msg(PROTO_QUERY, j->id)) == 0;
	}
	return n;
}

void job_free_all(exc_client *c)
{
	owed_cancels_free(c);
	while (c->jobs) {
		struct exc_job *j = c->jobs;

		if (j->state == J_WAITING)
			job_unwant_all(j);
		else if (j->state == J_RUNNING && j->owner)
			conn_send(j->owner, wire_job_msg(PROTO_CANCEL, j->id));
		job_unlink_free(j);
	}
}
