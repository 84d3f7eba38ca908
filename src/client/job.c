/*
 * job.c - exc_job: one submitted job from its WANTs to its receipt.
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
 * JOB is sent only from WAITING, and only once per OFFER.
 *
 * on_done is called exactly once per job, always from the event loop:
 * from a message handler, a timer, or done_ev (receipts the library makes
 * itself inside an exc_* call are deferred through it).
 */
#include "autoconfig.h"
#include "client/client_impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

enum jstate { J_WAITING, J_RUNNING, J_SEEKING, J_DONE };
enum copy_state { CP_PARKED, CP_REFUSED };

struct copy {
	struct exc_conn *k;
	enum copy_state state;
};

struct jfile {
	char *name;
	int is_out;
	struct exc_io io;	/* kind, and url (copied) for EXC_IO_URL */
	struct stream *st;
	struct endpoint *ep;
	int finished, ok;
	uint64_t bytes;
	char why[200];
};

struct exc_job {
	exc_client *c;
	struct exc_job *next;
	enum jstate state;
	char id[65];
	char *service;
	int priority;
	struct json_object *payload;	/* the caller's job object */
	struct jfile *files;		/* [0] stdin, [1] stdout, then named files */
	size_t nfiles;
	unsigned connect_timeout_sec;
	uint64_t since_ms;		/* last placement progress (back-pressure) */
	struct copy *copies;
	size_t ncopies, capcopies;
	struct exc_conn *owner;
	char owner_instance[33];
	struct exc_addr *owner_addr;
	uint64_t seek_until_ms;
	int cancel_requested;
	int sent_other;			/* QUERY/CANCEL sent since the JOB */
	struct event *timer;		/* connect timeout */
	struct event *done_ev;		/* deferred local receipt */
	char local_code[32];
	char local_msg[256];
	int local_retryable;
	exc_done_cb on_done;
	exc_position_cb on_position;
	void *arg;
};

static const char *const state_names[] = { "waiting", "running", "seeking", "done" };

/* ---- small helpers ------------------------------------------------------- */

static struct exc_job *find_job(exc_client *c, const char *id)
{
	if (id == NULL)
		return NULL;
	for (struct exc_job *j = c->jobs; j; j = j->next)
		if (j->state != J_DONE && strcmp(j->id, id) == 0)
			return j;
	return NULL;
}

static struct copy *find_copy(struct exc_job *j, const struct exc_conn *k)
{
	for (size_t i = 0; i < j->ncopies; i++)
		if (j->copies[i].k == k)
			return &j->copies[i];
	return NULL;
}

static void drop_copy(struct exc_job *j, struct copy *cp)
{
	size_t i = (size_t)(cp - j->copies);

	j->copies[i] = j->copies[--j->ncopies];
}

static int add_copy(struct exc_job *j, struct exc_conn *k)
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
static void unwant_all(struct exc_job *j)
{
	for (size_t i = 0; i < j->ncopies; i++)
		if (j->copies[i].state == CP_PARKED)
			conn_send(j->copies[i].k, wire_job_msg(PROTO_UNWANT, j->id));
	j->ncopies = 0;
}

static void free_pipes(struct exc_job *j)
{
	for (size_t i = 0; i < j->nfiles; i++) {
		endpoint_free(j->files[i].ep);
		j->files[i].ep = NULL;
	}
}

static void job_unlink_free(struct exc_job *j)
{
	exc_client *c = j->c;

	for (struct exc_job **pp = &c->jobs; *pp; pp = &(*pp)->next)
		if (*pp == j) {
			*pp = j->next;
			break;
		}
	free_pipes(j);
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
	json_object_put(j->payload);
	free(j->service);
	free(j);
}

/* ---- the end of a job ------------------------------------------------------ */

/* The first local stream that failed, or NULL. */
static const struct jfile *failed_stream(const struct exc_job *j)
{
	for (size_t i = 0; i < j->nfiles; i++)
		if (j->files[i].ep && endpoint_used(j->files[i].ep) &&
				(!j->files[i].finished || !j->files[i].ok) &&
				(j->files[i].is_out || j->files[i].why[0]))
			return &j->files[i];
	return NULL;
}

/* Calls on_done with receipt rj (the server's, or NULL for a local one). */
static void finish(struct exc_job *j, struct json_object *rj)
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
	bad = failed_stream(j);
	if (r.error_code == NULL && bad) {
		snprintf(msg, sizeof msg, "%s: %s", bad->name,
			bad->why[0] ? bad->why : "stream incomplete");
		r.error_code = EXC_E_LOCAL_IO;
		r.error_message = msg;
	}
	if (j->nfiles > 1) {
		r.stdin_bytes = j->files[0].bytes;
		r.stdout_bytes = j->files[1].bytes;
	}
	r.ok = r.error_code == NULL && r.exited && r.exit_code == 0 && r.signal == 0;
	j->state = J_DONE;
	free_pipes(j);
	if (j->on_done)
		j->on_done(j, &r, j->arg);
	job_unlink_free(j);
}

static void done_ev_cb(evutil_socket_t fd, short what, void *arg)
{
	finish(arg, NULL);
}

/* A receipt made by the library; delivered from the loop. */
static void finish_local(struct exc_job *j, const char *code, int retryable,
		const char *fmt, ...)
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

/* ---- placement ------------------------------------------------------------- */

static void place_on(struct exc_job *j, struct exc_conn *k)
{
	if (j->state != J_WAITING || j->cancel_requested || j->local_code[0])
		return;
	if (!pool_serves(k->a, j->service) || !conn_has_service(k, j->service) ||
			find_copy(j, k))
		return;
	if (conn_send(k, wire_want(j->id, j->service, j->priority)) == 0 &&
			add_copy(j, k) == 0)
		j->since_ms = client_now_ms();
}

static void place(struct exc_job *j)
{
	exc_client *c = j->c;

	for (unsigned i = 0; i < c->naddrs; i++)
		for (struct exc_conn *k = c->addrs[i]->conns; k; k = k->next)
			place_on(j, k);
}

void job_on_ready(exc_client *c, struct exc_conn *k)
{
	for (struct exc_job *j = c->jobs; j; j = j->next) {
		struct copy *cp = find_copy(j, k);

		if (j->state == J_WAITING && k->draining && cp) {
			/* protocol 6: move wants away from a draining instance */
			if (cp->state == CP_PARKED)
				conn_send(k, wire_job_msg(PROTO_UNWANT, j->id));
			drop_copy(j, cp);
		}
		if (j->state == J_WAITING)
			place_on(j, k);
		else if (j->state == J_SEEKING &&
				strcmp(j->owner_instance, k->instance_id) == 0) {
			/* the server made this connection the owner (same client id) */
			j->owner = k;
			j->owner_addr = k->a;
			j->state = J_RUNNING;
			client_log(c, EXC_LOG_INFO, "job %s: instance %s reached again",
				j->id, k->instance_id);
			if (j->cancel_requested)
				conn_send(k, wire_job_msg(PROTO_CANCEL, j->id));
		}
	}
}

/* Another ready connection to instance id, or NULL. */
static struct exc_conn *conn_to(exc_client *c, const char *id, const struct exc_conn *except)
{
	for (unsigned i = 0; i < c->naddrs; i++)
		for (struct exc_conn *k = c->addrs[i]->conns; k; k = k->next)
			if (k != except && k->state == K_READY &&
					strcmp(k->instance_id, id) == 0)
				return k;
	return NULL;
}

void job_on_conn_gone(exc_client *c, struct exc_conn *k)
{
	for (struct exc_job *j = c->jobs; j; j = j->next) {
		struct copy *cp = find_copy(j, k);

		if (cp)
			drop_copy(j, cp);
		if (j->owner != k)
			continue;
		j->owner = conn_to(c, j->owner_instance, k);
		if (j->owner == NULL && j->state == J_RUNNING && !c->freeing) {
			j->state = J_SEEKING;
			j->seek_until_ms = client_now_ms() + c->opt.owner_grace_sec * 1000ull;
			snprintf(j->owner_addr->seek, sizeof j->owner_addr->seek, "%s",
				j->owner_instance);
			client_log(c, EXC_LOG_INFO, "job %s: connection to its instance lost, seeking %s",
				j->id, j->owner_instance);
		}
	}
}

/* ---- pipes ------------------------------------------------------------------ */

static void file_done(void *arg, int ok, uint64_t bytes, const char *why)
{
	struct jfile *f = arg;

	f->finished = 1;
	f->ok = ok;
	f->bytes = bytes;
	if (why)
		snprintf(f->why, sizeof f->why, "%s", why);
}

/* A URL for f: an endpoint on k's local address, or the caller's URL.
 * NULL: nothing to send (EXC_IO_NONE). */
static struct json_object *file_url(struct exc_job *j, struct jfile *f, struct exc_conn *k)
{
	char url[160];

	if (f->io.kind == EXC_IO_NONE)
		return NULL;
	if (f->io.kind == EXC_IO_URL)
		return json_object_new_string(f->io.url);
	f->finished = f->ok = 0;
	f->why[0] = '\0';
	f->ep = endpoint_new(j->c, &k->local, f->is_out, f->st, file_done, f, url, sizeof url);
	if (f->ep == NULL)
		return NULL;
	client_log(j->c, EXC_LOG_DEBUG, "job %s: %s %s at %s", j->id, f->name,
		f->is_out ? "PUT" : "GET", url);
	return json_object_new_string(url);
}

static struct json_object *file_entry(const char *name, struct json_object *url)
{
	struct json_object *e = json_object_new_object();

	json_object_object_add(e, "name", json_object_new_string(name));
	json_object_object_add(e, "url", url);
	return e;
}

/* The JOB's job object for connection k (creates the endpoints). */
static struct json_object *build_job(struct exc_job *j, struct exc_conn *k)
{
	struct json_object *o = json_object_new_object(), *in, *out, *v;

	if (o == NULL)
		return NULL;
	json_object_object_foreach(j->payload, key, val)
		if (strcmp(key, "inputs") != 0 && strcmp(key, "outputs") != 0)
			json_object_object_add(o, key, json_object_get(val));
	in = json_object_object_get_ex(j->payload, "inputs", &v) &&
		json_object_is_type(v, json_type_array) ? json_object_get(v) : json_object_new_array();
	out = json_object_object_get_ex(j->payload, "outputs", &v) &&
		json_object_is_type(v, json_type_array) ? json_object_get(v) : json_object_new_array();
	json_object_object_add(o, "inputs", in);
	json_object_object_add(o, "outputs", out);
	for (size_t i = 0; i < j->nfiles; i++) {
		struct jfile *f = &j->files[i];
		struct json_object *url;

		if (f->io.kind == EXC_IO_NONE)
			continue;
		url = file_url(j, f, k);
		if (url == NULL) {
			json_object_put(o);
			return NULL;
		}
		if (i < 2)
			json_object_object_add(o, i == 0 ? "stdin" : "stdout", url);
		else
			json_object_array_add(f->is_out ? out : in, file_entry(f->name, url));
	}
	return o;
}

/* ---- messages --------------------------------------------------------------- */

void job_on_offer(exc_client *c, struct exc_conn *k, struct json_object *o)
{
	const char *id = wire_str(o, "job_id"), *token = wire_str(o, "token");
	struct exc_job *j = find_job(c, id);
	struct json_object *job;

	if (id == NULL || token == NULL)
		return;
	if (j == NULL || j->state != J_WAITING || j->cancel_requested || j->local_code[0]) {
		/* surplus: the job has a slot elsewhere, or is gone */
		client_log(c, EXC_LOG_DEBUG, "declining offer for %s from %s", id, k->instance_id);
		conn_send(k, wire_decline(id, token));
		return;
	}
	{
		struct copy *cp = find_copy(j, k);

		if (cp)
			drop_copy(j, cp);
	}
	unwant_all(j);
	free_pipes(j);
	job = build_job(j, k);
	if (job == NULL) {
		conn_send(k, wire_decline(id, token));
		finish_local(j, EXC_E_LOCAL_IO, 0, "cannot serve the job's pipes: %s",
			strerror(errno ? errno : ENOMEM));
		return;
	}
	conn_send(k, wire_job(id, token, job));
	json_object_put(job);
	j->state = J_RUNNING;
	j->owner = k;
	j->owner_addr = k->a;
	j->sent_other = 0;
	snprintf(j->owner_instance, sizeof j->owner_instance, "%s", k->instance_id);
	if (j->timer)
		evtimer_del(j->timer);
	client_log(c, EXC_LOG_DEBUG, "job %s runs on %s", id, k->instance_id);
}

void job_on_done(exc_client *c, struct exc_conn *k, struct json_object *o)
{
	struct exc_job *j = find_job(c, wire_str(o, "job_id"));
	struct json_object *rj;

	if (j == NULL || !json_object_object_get_ex(o, "receipt", &rj) ||
			!json_object_is_type(rj, json_type_object))
		return;
	if (j->state == J_WAITING && !j->cancel_requested)
		return;		/* a DONE for a parked copy we gave up */
	if (!j->owner_instance[0])
		snprintf(j->owner_instance, sizeof j->owner_instance, "%s", k->instance_id);
	finish(j, rj);
}

void job_on_position(exc_client *c, struct exc_conn *k, struct json_object *o)
{
	struct exc_job *j = find_job(c, wire_str(o, "job_id"));
	struct exc_position p;
	struct json_object *v;

	if (j == NULL || j->on_position == NULL)
		return;
	p.instance_id = k->instance_id;
	p.state = wire_str(o, "state");
	if (p.state == NULL)
		p.state = "unknown";
	p.running = wire_int(o, "running", 0);
	p.ahead = wire_int(o, "ahead", 0);
	p.capacity = wire_int(o, "capacity", 0);
	p.eta_ms = json_object_object_get_ex(o, "eta_ms", &v) &&
		json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : -1;
	j->on_position(j, &p, j->arg);
}

void job_on_error(exc_client *c, struct exc_conn *k, struct json_object *o)
{
	const char *code = wire_str(o, "code"), *msg = wire_str(o, "message");
	struct exc_job *j = find_job(c, wire_str(o, "job_id"));
	struct copy *cp;

	if (code == NULL)
		code = "?";
	if (msg == NULL)
		msg = "";
	client_log(c, EXC_LOG_DEBUG, "%s: ERROR %s (%s)%s%s", k->a->url, code, msg,
		j ? " for job " : "", j ? j->id : "");
	if (j == NULL)
		return;
	if (j->state == J_WAITING && (cp = find_copy(j, k)) != NULL) {
		if (strcmp(code, PROTO_E_OFFER_EXPIRED) == 0)
			drop_copy(j, cp);	/* parked again by the next tick */
		else
			cp->state = CP_REFUSED;
		return;
	}
	if (j->state != J_RUNNING || j->owner != k)
		return;
	if (strcmp(code, PROTO_E_BAD_JOB) == 0 || strcmp(code, PROTO_E_UNKNOWN_COMMAND) == 0) {
		snprintf(j->local_code, sizeof j->local_code, "%s", code);
		snprintf(j->local_msg, sizeof j->local_msg, "%s", msg);
		j->local_retryable = 0;
		finish(j, NULL);
	} else if (!j->sent_other && (strcmp(code, PROTO_E_BAD_TOKEN) == 0 ||
			strcmp(code, PROTO_E_NOT_OFFERED) == 0 ||
			strcmp(code, PROTO_E_UNKNOWN_JOB) == 0 ||
			strcmp(code, PROTO_E_BAD_MESSAGE) == 0)) {
		/* the JOB was not taken: wait for another slot */
		free_pipes(j);
		j->state = J_WAITING;
		j->owner = NULL;
		j->owner_instance[0] = '\0';
		j->since_ms = client_now_ms();
		place(j);
	}
}

/* ---- timers ----------------------------------------------------------------- */

static void connect_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct exc_job *j = arg;
	exc_client *c = j->c;
	const char *why = "";

	if (j->state != J_WAITING)
		return;
	unwant_all(j);
	for (unsigned i = 0; i < c->naddrs; i++)
		if (pool_ready(c->addrs[i]) > 0)
			why = NULL;
	if (why && c->naddrs)
		why = " (no instance reachable)";
	finish_local(j, EXC_E_NO_SLOT, 1, "no slot within %u s%s", j->connect_timeout_sec,
		why ? why : "");
}

/* Every address that serves j's service has been explored to the end
 * (reached and covered or full) and none offers it.  0 while unsure. */
static int service_unknown(const struct exc_job *j)
{
	exc_client *c = j->c;

	for (unsigned i = 0; i < c->naddrs; i++) {
		struct exc_addr *a = c->addrs[i];

		if (!pool_serves(a, j->service))
			continue;
		if (!a->reached || pool_connecting(a) ||
				!(a->covered || pool_ready(a) >= c->opt.pool_cap))
			return 0;
		for (struct exc_conn *k = a->conns; k; k = k->next)
			if (k->state == K_READY && (conn_has_service(k, j->service) || k->draining))
				return 0;
	}
	return c->naddrs > 0;	/* no address at all: wait for one */
}

static int all_unauthorized(const struct exc_job *j)
{
	exc_client *c = j->c;
	int any = 0;

	for (unsigned i = 0; i < c->naddrs; i++) {
		struct exc_addr *a = c->addrs[i];

		if (!pool_serves(a, j->service))
			continue;
		if (a->last_status != 401 || pool_ready(a) > 0)
			return 0;
		any = 1;
	}
	return any;
}

void job_tick(exc_client *c)
{
	uint64_t now = client_now_ms();

	for (unsigned i = 0; i < c->naddrs; i++)
		c->addrs[i]->seek[0] = '\0';
	for (struct exc_job *j = c->jobs; j; j = j->next) {
		if (j->local_code[0])
			continue;
		if (j->state == J_SEEKING) {
			if (now >= j->seek_until_ms) {
				j->state = J_RUNNING;	/* for finish: it may have run */
				finish_local(j, EXC_E_LOST, 1,
					"instance %s not reached again within %u s",
					j->owner_instance, c->opt.owner_grace_sec);
			} else {
				snprintf(j->owner_addr->seek, sizeof j->owner_addr->seek,
					"%s", j->owner_instance);
			}
			continue;
		}
		if (j->state != J_WAITING)
			continue;
		for (size_t n = 0; n < j->ncopies;) {
			if (j->copies[n].state == CP_REFUSED)
				drop_copy(j, &j->copies[n]);
			else
				n++;
		}
		place(j);
		if (j->ncopies == 0 && all_unauthorized(j)) {
			finish_local(j, EXC_E_UNAUTHORIZED, 0,
				"every address refused the token (HTTP 401)");
			continue;
		}
		if (j->ncopies == 0 && service_unknown(j)) {
			finish_local(j, EXC_E_UNKNOWN_SERVICE, 0,
				"no reached instance offers service \"%s\"", j->service);
			continue;
		}
		if (now - j->since_ms >= c->opt.retry_tick_ms) {
			for (unsigned i = 0; i < c->naddrs; i++)
				if (pool_serves(c->addrs[i], j->service))
					c->addrs[i]->pressure = 1;
			j->since_ms = now;
		}
	}
	for (unsigned i = 0; i < c->naddrs; i++)
		pool_kick(c->addrs[i]);
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

static int id_ok(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n > max)
		return 0;
	for (; *s; s++)
		if (*s < 0x21 || *s > 0x7e)
			return 0;
	return 1;
}

static int name_ok(const char *s)
{
	return s && *s && strchr(s, '/') == NULL && strcmp(s, ".") != 0 &&
		strcmp(s, "..") != 0;
}

/* Sets up files[i] from io; -1 with the client's error set. */
static int file_init(exc_client *c, struct jfile *f, const char *name, int is_out,
		const struct exc_io *io)
{
	f->is_out = is_out;
	f->io.kind = io->kind;
	f->name = strdup(name);
	if (f->name == NULL)
		return -1;
	switch (io->kind) {
	case EXC_IO_NONE:
		return 0;
	case EXC_IO_URL:
		if (io->url == NULL || (strncmp(io->url, "http://", 7) != 0 &&
				strncmp(io->url, "https://", 8) != 0)) {
			client_fail(c, EINVAL, "%s: not an http(s) URL", name);
			return -1;
		}
		f->io.url = strdup(io->url);
		return f->io.url ? 0 : -1;
	case EXC_IO_BUFFER:
		if (is_out || (io->data == NULL && io->len)) {
			client_fail(c, EINVAL, "%s: a buffer is a source only", name);
			return -1;
		}
		break;
	case EXC_IO_DISCARD:
		if (!is_out) {
			client_fail(c, EINVAL, "%s: discard is a sink only", name);
			return -1;
		}
		break;
	case EXC_IO_FD:
	case EXC_IO_FILE:
		if (io->kind == EXC_IO_FILE && io->path == NULL) {
			client_fail(c, EINVAL, "%s: no path", name);
			return -1;
		}
		break;
	default:
		client_fail(c, EINVAL, "%s: unknown source/sink kind", name);
		return -1;
	}
	f->st = is_out ? stream_sink(c->base, io) : stream_source(c->base, io);
	if (f->st == NULL) {
		client_fail(c, errno, "%s: %s%s%s", name, io->path ? io->path : "",
			io->path ? ": " : "", strerror(errno));
		return -1;
	}
	return 0;
}

exc_job *exc_submit(exc_client *c, const struct exc_job_spec *s)
{
	struct exc_job *j;
	struct json_object *cmd;

	if (s == NULL || s->service == NULL || !id_ok(s->service, 128) || s->on_done == NULL ||
			s->job_json == NULL) {
		client_fail(c, EINVAL, "a job needs service, job_json and on_done");
		return NULL;
	}
	if (s->job_id && !id_ok(s->job_id, 64)) {
		client_fail(c, EINVAL, "job_id: 1-64 printable ASCII characters");
		return NULL;
	}
	if (s->job_id && find_job(c, s->job_id)) {
		client_fail(c, EEXIST, "job_id %s is in use", s->job_id);
		return NULL;
	}
	if (s->in.kind == EXC_IO_DISCARD || s->out.kind == EXC_IO_BUFFER) {
		client_fail(c, EINVAL, "stdin/stdout: source and sink kinds swapped");
		return NULL;
	}
	for (size_t i = 0; i < s->ninputs + s->noutputs; i++) {
		const struct exc_file *f = i < s->ninputs ? &s->inputs[i] :
			&s->outputs[i - s->ninputs];

		if (!name_ok(f->name) || f->io.kind == EXC_IO_NONE) {
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
	j->timer = evtimer_new(c->base, connect_timeout, j);
	j->done_ev = event_new(c->base, -1, 0, done_ev_cb, j);
	if (!j->service || !j->files || !j->timer || !j->done_ev) {
		client_fail(c, ENOMEM, "out of memory");
		goto fail;
	}
	if (file_init(c, &j->files[0], "stdin", 0, &s->in) != 0 ||
			file_init(c, &j->files[1], "stdout", 1, &s->out) != 0)
		goto fail;
	for (size_t i = 0; i < s->ninputs + s->noutputs; i++) {
		int out = i >= s->ninputs;
		const struct exc_file *f = out ? &s->outputs[i - s->ninputs] : &s->inputs[i];

		if (file_init(c, &j->files[2 + i], f->name, out, &f->io) != 0)
			goto fail;
	}
	j->on_done = s->on_done;
	j->on_position = s->on_position;
	j->arg = s->arg;
	j->connect_timeout_sec = s->connect_timeout_sec ? s->connect_timeout_sec :
		c->opt.connect_timeout_sec;
	if (j->connect_timeout_sec) {
		struct timeval tv = { (time_t)j->connect_timeout_sec, 0 };

		evtimer_add(j->timer, &tv);
	}
	j->since_ms = client_now_ms();
	j->next = c->jobs;
	c->jobs = j;
	place(j);
	return j;
fail:
	{
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
		unwant_all(j);
		finish_local(j, EXC_E_CANCELLED, 0, "cancelled before it started");
	} else if (j->owner) {
		j->sent_other = 1;
		conn_send(j->owner, wire_job_msg(PROTO_CANCEL, j->id));
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
		j->sent_other = 1;
		n = conn_send(j->owner, wire_job_msg(PROTO_QUERY, j->id)) == 0;
	}
	return n;
}

void job_free_all(exc_client *c)
{
	while (c->jobs) {
		struct exc_job *j = c->jobs;

		if (j->state == J_WAITING)
			unwant_all(j);
		else if (j->state == J_RUNNING && j->owner)
			conn_send(j->owner, wire_job_msg(PROTO_CANCEL, j->id));
		job_unlink_free(j);
	}
}
