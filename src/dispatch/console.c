/*
 * console.c - see console.h.
 *
 * Requests: GET /console (the page), GET /console/NAME (its files), GET
 * /console/api/overview | jobs | job (JSON), POST /console/api/cancel |
 * retry | pause | resume.  The page and its files hold no data and are
 * served to anyone; /console/api/ needs the bearer token (authToken, the
 * fleet's token) when one is set, and without one a Host that is an
 * address or localhost (a DNS name rebound to this address is refused).
 * An action also needs POST, no Content-Type (it takes no body, and a
 * cross-site HTML form always has one) and, from a browser, Sec-Fetch-Site
 * same-origin and an Origin naming this Host.
 *
 * Each request waiting for the database is a struct op: its statements
 * are queued on the console's lane in order, their JSON texts collected,
 * and the answer sent when the last one is in.  A client that goes away
 * meanwhile (the connection's close callback) leaves the op to finish
 * without a request.  Every statement answers JSON text made by
 * PostgreSQL, passed on as it came (no parse, no copy but one).
 */
#include "autoconfig.h"
#include "dispatch/console.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <json-c/json.h>

#include "common/embedded.h"
#include "common/log.h"
#include "dispatch/chores.h"
#include "dispatch/dispatch_config.h"
#include "dispatch/queries.h"

#define PAGE "execdispatch.html"
#define LIMIT_MAX 500
#define PARTS 4
/* answer and leave the (void) function */
#define FAIL(...)                  \
	do {                       \
		text(__VA_ARGS__); \
		return;            \
	} while (0)

enum q {
	Q_JOBS,
	Q_QUEUED,
	Q_HELD,
	Q_FINISHED,
	Q_STATS,
	Q_STATES,
	Q_DISP,
	Q_JOB,
	Q_FEAT,
	NQ
};
static const char *const texts[NQ] = {
	DQ_LIST_JOBS,    DQ_LIST_QUEUED,         DQ_LIST_HELD,   DQ_LIST_FINISHED,   DQ_STATS,
	DQ_STATE_COUNTS, DQ_CONSOLE_DISPATCHERS, DQ_CONSOLE_JOB, DQ_CONSOLE_FEATURES
};
static const char *const files[] = { "common.css", "console.js", "execdispatch.js" };
static const char *const actions[] = { "cancel", "retry", "pause", "resume" };

struct dconsole {
	const struct dispatch_config *cfg;
	exc_client *const *client;
	struct chores *lane;
	char *sql[NQ];
	char *act[4]; /* SELECT schema.cancel($1)::text ... */
	int pending;
};

struct op {
	struct dconsole *c;
	struct evhttp_request *req; /* NULL: the client went away */
	char *parts[PARTS];         /* the JSON texts, in the order asked */
	int want, got, failed;      /* statements asked, answered; one failed */
	int status;                 /* the answer's status when failed */
	char why[256];
	int overview, job;
};

/* ---- answers ---- */

static void headers(struct evhttp_request *req, const char *type)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	evhttp_add_header(h, "Content-Type", type);
	for (const struct embedded_header *e = embedded_header_list; e->name; e++)
		evhttp_add_header(h, e->name, e->value);
}

static void text(struct evhttp_request *req, int status, const char *msg)
{
	struct evbuffer *b = evbuffer_new();
	headers(req, "text/plain; charset=utf-8");
	if (status == 401)
		evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
				  "Bearer realm=\"execdispatch\"");
	if (b)
		evbuffer_add_printf(b, "%s\n", msg);
	evhttp_send_reply(req, status, NULL, b);
	if (b)
		evbuffer_free(b);
}

static void json(struct evhttp_request *req, struct evbuffer *b)
{
	headers(req, "application/json");
	evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control", "no-store");
	evhttp_send_reply(req, 200, "OK", b);
}

static void serve_file(struct evhttp_request *req, const char *name)
{
	const struct embedded_file *f = embedded_find(name);
	struct evbuffer *b = f ? evbuffer_new() : NULL;
	if (!b) {
		text(req, 404, "not found");
		return;
	}
	evbuffer_add_reference(b, f->data, f->len, NULL, NULL);
	headers(req, embedded_type(name));
	evhttp_send_reply(req, 200, "OK", b);
	evbuffer_free(b);
}

/* ---- who may ask ---- */

static const char *header(struct evhttp_request *req, const char *name)
{
	return evhttp_find_header(evhttp_request_get_input_headers(req), name);
}

/* token and the Authorization header: the same length and bytes, compared
 * without an early exit (the length alone may show). */
static int bearer_ok(const char *auth, const char *token)
{
	size_t n = strlen(token), m;
	unsigned char d = 0;

	if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
		return 0;
	auth += 7;
	while (*auth == ' ')
		auth++;
	m = strlen(auth);
	while (m && auth[m - 1] == ' ')
		m--;
	if (m != n || n == 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		d |= (unsigned char)(auth[i] ^ token[i]);
	return d == 0;
}

/* Host is an IPv4 or IPv6 address or localhost (with or without a port). */
static int host_is_address(const char *host)
{
	char name[64];
	size_t n;

	if (!host)
		return 1;
	if (host[0] == '[')
		return strchr(host, ']') != NULL; /* an IPv6 literal */
	n = strcspn(host, ":");
	if (n >= sizeof name)
		return 0;
	memcpy(name, host, n);
	name[n] = '\0';
	if (strcasecmp(name, "localhost") == 0)
		return 1;
	return n > 0 && strspn(name, "0123456789.") == n;
}

/* 0 when the request may read the data; otherwise answered. */
static int refuse_reader(struct dconsole *c, struct evhttp_request *req)
{
	if (c->cfg->auth_token) {
		if (bearer_ok(header(req, "Authorization"), c->cfg->auth_token))
			return 0;
		text(req, 401, "a valid Authorization: Bearer token is required (authToken)");
		return 1;
	}
	if (host_is_address(header(req, "Host")))
		return 0;
	text(req, 403, "refused: without authToken, Host must be an address or localhost");
	return 1;
}

/* 0 when the request may act; otherwise answered. */
static int refuse_actor(struct dconsole *c, struct evhttp_request *req)
{
	const char *site = header(req, "Sec-Fetch-Site"), *origin = header(req, "Origin");
	const char *host = header(req, "Host"), *rest = NULL;

	if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "POST");
		text(req, 405, "POST only");
		return 1;
	}
	if (refuse_reader(c, req))
		return 1;
	if (origin && strncmp(origin, "http://", 7) == 0)
		rest = origin + 7;
	else if (origin && strncmp(origin, "https://", 8) == 0)
		rest = origin + 8;
	if ((site && strcmp(site, "same-origin") != 0) ||
	    (origin && !(rest && host && strcmp(rest, host) == 0))) {
		text(req, 403, "a cross-site request: refused");
		return 1;
	}
	if (header(req, "Content-Type")) {
		text(req, 415, "refused: the action takes no body (no Content-Type)");
		return 1;
	}
	return 0;
}

/* ---- the ops ---- */

static void op_closed(struct evhttp_connection *conn, void *arg)
{
	struct op *op = arg;
	(void)conn;
	op->req = NULL;
}

static void op_free(struct op *op)
{
	for (int i = 0; i < PARTS; i++)
		free(op->parts[i]);
	op->c->pending--;
	free(op);
}

static void op_forget_conn(struct op *op)
{
	if (op->req)
		evhttp_connection_set_closecb(evhttp_request_get_connection(op->req), NULL, NULL);
}

static void add_string(struct evbuffer *b, const char *s)
{
	struct json_object *j = json_object_new_string(s ? s : "");
	evbuffer_add_printf(b, "%s", j ? json_object_to_json_string(j) : "\"\"");
	json_object_put(j);
}

/* The overview's parts: states, services, dispatchers, features. */
static void overview_body(struct op *op, struct evbuffer *b)
{
	struct dconsole *c = op->c;

	evbuffer_add_printf(b, "{\"instance\":");
	add_string(b, c->cfg->instance_id);
	evbuffer_add_printf(b,
			    ",\"states\":%s,\"services\":%s,\"dispatchers\":%s,"
			    "\"features\":%s,\"execservers\":[",
			    op->parts[0], op->parts[1], op->parts[2], op->parts[3]);
	for (size_t i = 0; *c->client && i < c->cfg->execservers.count; i++) {
		struct exc_address_stats as;
		if (exc_address_stats(*c->client, (unsigned)i, &as) != 0)
			continue;
		evbuffer_add_printf(b, "%s{\"address\":", i ? "," : "");
		add_string(b, c->cfg->execservers.items[i]);
		evbuffer_add_printf(b, ",\"connections\":%u,\"instances\":%u}", as.connections,
				    as.instances);
	}
	evbuffer_add_printf(b, "]}");
}

static void op_answer(struct op *op)
{
	struct evbuffer *b;

	if (!op->req)
		return;
	op_forget_conn(op);
	if (op->failed) {
		text(op->req, op->status, op->why);
		return;
	}
	if (!(b = evbuffer_new())) {
		text(op->req, 500, "out of memory");
		return;
	}
	if (op->overview)
		overview_body(op, b);
	else if (op->job)
		evbuffer_add_printf(b, "{\"row\":%s,\"features\":%s}", op->parts[1], op->parts[0]);
	else
		evbuffer_add_printf(b, "%s", op->parts[0]);
	json(op->req, b);
	evbuffer_free(b);
}

static void answered(void *arg, PGresult *res, int away, const void *note);

static int ask(struct op *op, const char *sql, int n, const char *const *params)
{
	int idx = op->want;
	if (chores_add(op->c->lane, sql, n, params, &idx, sizeof idx, answered, op) != 0)
		return -1;
	op->want++;
	return 0;
}

/* The features row as JSON.  A job's attempts come with its row
 * (console_job.sql). */
static char *features(struct op *op, PGresult *res)
{
	const char *col = PQgetisnull(res, 0, 0) ? NULL : PQgetvalue(res, 0, 0);
	char *out = malloc(128);

	if (out)
		snprintf(out, 128, "{\"attempts\":%s,\"retry\":%s,\"pause\":%s,\"resume\":%s}",
			 col ? "true" : "false", *PQgetvalue(res, 0, 1) == 't' ? "true" : "false",
			 *PQgetvalue(res, 0, 2) == 't' ? "true" : "false",
			 *PQgetvalue(res, 0, 3) == 't' ? "true" : "false");
	return out;
}

static void answered(void *arg, PGresult *res, int away, const void *note)
{
	struct op *op = arg;
	int idx;

	memcpy(&idx, note, sizeof idx);
	op->got++;
	if (!res && !op->failed) {
		const char *e = chores_db(op->c->lane)->last_error;
		op->failed = 1;
		op->status = away                                                             ? 503
			     : strstr(e, "invalid input syntax") || strstr(e, "out of range") ? 400
			     : strstr(e, "does not exist")                                    ? 404
											      : 503;
		snprintf(op->why, sizeof op->why, "%s", away ? "the database is not reachable" : e);
	} else if (res && !op->failed && idx < PARTS) {
		if (PQntuples(res) == 0) {
			op->failed = 1;
			op->status = 404;
			snprintf(op->why, sizeof op->why, "no such job");
		} else if ((op->job && idx == 0) || (op->overview && idx == 3)) {
			op->parts[idx] = features(op, res);
		} else {
			op->parts[idx] = strdup(PQgetisnull(res, 0, 0) ? "null"
								       : PQgetvalue(res, 0, 0));
		}
		if (op->job && idx == 0 && !op->failed) { /* then the row */
			const char *id = op->why;         /* kept there by api_job */
			if (ask(op, op->c->sql[Q_JOB], 1, &id) != 0) {
				op->failed = 1;
				op->status = 500;
				snprintf(op->why, sizeof op->why, "out of memory");
			}
		}
	}
	if (op->got < op->want)
		return;
	op_answer(op);
	op_free(op);
}

static struct op *op_new(struct dconsole *c, struct evhttp_request *req)
{
	struct op *op;

	if (c->pending >= CONSOLE_PENDING_MAX) {
		text(req, 503, "busy: too many console requests wait for the database");
		return NULL;
	}
	if (!(op = calloc(1, sizeof *op))) {
		text(req, 500, "out of memory");
		return NULL;
	}
	op->c = c;
	op->req = req;
	c->pending++;
	evhttp_connection_set_closecb(evhttp_request_get_connection(req), op_closed, op);
	return op;
}

/* Nothing could be queued: answered now. */
static void op_fail_now(struct op *op)
{
	op_forget_conn(op);
	if (op->req)
		text(op->req, 500, "out of memory");
	op_free(op);
}

/* ---- the API ---- */

static int service_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	return n >= 1 && n <= 64 &&
	       strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

static int id_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	return n >= 1 && n <= 19 && strspn(s, "0123456789") == n && s[0] != '0';
}

static void api_overview(struct dconsole *c, struct evhttp_request *req)
{
	struct op *op = op_new(c, req);
	if (!op)
		return;
	op->overview = 1;
	if (ask(op, c->sql[Q_STATES], 0, NULL) || ask(op, c->sql[Q_STATS], 0, NULL) ||
	    ask(op, c->sql[Q_DISP], 0, NULL) || ask(op, c->sql[Q_FEAT], 0, NULL)) {
		if (!op->want) {
			op_fail_now(op);
			return;
		}
		op->failed = 1; /* answered when those queued are */
		op->status = 500;
		snprintf(op->why, sizeof op->why, "out of memory");
	}
}

static void api_jobs(struct dconsole *c, struct evhttp_request *req, struct evkeyvalq *q)
{
	const char *state = evhttp_find_header(q, "state"),
		   *service = evhttp_find_header(q, "service");
	const char *since = evhttp_find_header(q, "since"), *after = evhttp_find_header(q, "after");
	const char *limit = evhttp_find_header(q, "limit"), *params[5];
	int n = 0, lim = limit ? atoi(limit) : 50;
	enum q which = Q_JOBS;

	if (state && *state == '\0')
		state = NULL;
	if (service && *service == '\0')
		service = NULL;
	if (since && *since == '\0')
		since = NULL;
	if (after && *after == '\0')
		after = NULL;
	if (state && strcmp(state, "queued") == 0)
		which = Q_QUEUED;
	else if (state && (strcmp(state, "claimed") == 0 || strcmp(state, "running") == 0))
		which = Q_HELD;
	else if (state && (strcmp(state, "done") == 0 || strcmp(state, "failed") == 0 ||
			   strcmp(state, "cancelled") == 0))
		which = Q_FINISHED;
	else if (state)
		FAIL(req, 400, "state: queued, claimed, running, done, failed or cancelled");
	if (service && !service_ok(service))
		FAIL(req, 400, "service: 1 to 64 of A-Z a-z 0-9 _ . -");
	if (service && !state) /* list_jobs.sql walks job_pkey */
		FAIL(req, 400, "service: with a state (one service's jobs are listed per state)");
	if (after && !id_ok(after))
		FAIL(req, 400, "after: a job id");
	if (lim < 1 || lim > LIMIT_MAX)
		FAIL(req, 400, "limit: 1 to 500");
	char lbuf[16];
	snprintf(lbuf, sizeof lbuf, "%d", lim);
	if (which == Q_HELD || which == Q_FINISHED)
		params[n++] = state;
	params[n++] = service;
	params[n++] = since;
	params[n++] = after;
	params[n++] = lbuf;
	struct op *op = op_new(c, req);
	if (op && ask(op, c->sql[which], n, params) != 0)
		op_fail_now(op);
}

static void api_job(struct dconsole *c, struct evhttp_request *req, struct evkeyvalq *q)
{
	const char *id = evhttp_find_header(q, "id");
	struct op *op;

	if (!id_ok(id))
		FAIL(req, 400, "id: a job id");
	if (!(op = op_new(c, req)))
		return;
	op->job = 1;
	snprintf(op->why, sizeof op->why, "%s", id); /* for the statements after the features */
	if (ask(op, c->sql[Q_FEAT], 0, NULL) != 0)
		op_fail_now(op);
}

static void api_action(struct dconsole *c, struct evhttp_request *req, int a, struct evkeyvalq *q)
{
	const char *arg = evhttp_find_header(q, a < 2 ? "id" : "service");
	struct op *op;

	if (refuse_actor(c, req))
		return;
	if (a < 2 ? !id_ok(arg) : !service_ok(arg))
		FAIL(req, 400, a < 2 ? "id: a job id" : "service: a service name");
	if (!(op = op_new(c, req)))
		return;
	if (ask(op, c->act[a], 1, &arg) != 0) {
		op_fail_now(op);
		return;
	}
	log_info("console: %s %s asked", actions[a], arg);
}

static void api(struct evhttp_request *req, void *arg)
{
	struct dconsole *c = arg;
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	struct evkeyvalq q;
	const char *name = path + strlen("/console/api/");

	TAILQ_INIT(&q);
	if (query && evhttp_parse_query_str(query, &q) != 0)
		FAIL(req, 400, "a query string that does not parse");
	for (int a = 0; a < 4; a++)
		if (strcmp(name, actions[a]) == 0) {
			api_action(c, req, a, &q);
			evhttp_clear_headers(&q);
			return;
		}
	if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET");
		text(req, 405, "GET only");
	} else if (!refuse_reader(c, req)) {
		if (strcmp(name, "overview") == 0)
			api_overview(c, req);
		else if (strcmp(name, "jobs") == 0)
			api_jobs(c, req, &q);
		else if (strcmp(name, "job") == 0)
			api_job(c, req, &q);
		else
			text(req, 404, "not found");
	}
	evhttp_clear_headers(&q);
}

static void page(struct evhttp_request *req, void *arg)
{
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);

	(void)arg;
	if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
		FAIL(req, 405, "GET or HEAD only");
	}
	if (strcmp(path, "/console") == 0 || strcmp(path, "/console/") == 0) {
		serve_file(req, PAGE);
		return;
	}
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
		if (strcmp(path + strlen("/console/"), files[i]) == 0) {
			serve_file(req, files[i]);
			return;
		}
	text(req, 404, "not found");
}

/* evhttp calls one callback per exact path: the console's are few. */
static void route(struct evhttp_request *req, void *arg)
{
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	if (path && strncmp(path, "/console/api/", 13) == 0)
		api(req, arg);
	else
		page(req, arg);
}

struct dconsole *dconsole_start(struct event_base *base, struct evhttp *http,
				const struct dispatch_config *cfg, exc_client *const *client,
				char *err, size_t errlen)
{
	static const char *const paths[] = { "/console", "/console/", "/console/common.css",
					     "/console/console.js", "/console/execdispatch.js" };
	struct dconsole *c;

	if (!cfg->console_enabled)
		return NULL;
	if (!(c = calloc(1, sizeof *c)))
		goto oom;
	c->cfg = cfg;
	c->client = client;
	for (int i = 0; i < NQ; i++)
		if (!(c->sql[i] = dq_expand(texts[i], cfg->schema)))
			goto oom;
	for (int a = 0; a < 4; a++) {
		char t[96];
		snprintf(t, sizeof t, "SELECT @schema@.%s($1::%s)::text", actions[a],
			 a < 2 ? "bigint" : "text");
		if (!(c->act[a] = dq_expand(t, cfg->schema)))
			goto oom;
	}
	if (!(c->lane = chores_new(base, "console", cfg->database, CONSOLE_TIMEOUT_MS, NULL, NULL)))
		goto oom;
	for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
		evhttp_set_cb(http, paths[i], route, c);
	static const char *const api_paths[] = { "overview", "jobs",  "job",   "cancel",
						 "retry",    "pause", "resume" };
	for (size_t i = 0; i < sizeof api_paths / sizeof api_paths[0]; i++) {
		char p[64];
		snprintf(p, sizeof p, "/console/api/%s", api_paths[i]);
		evhttp_set_cb(http, p, route, c);
	}
	return c;
oom:
	snprintf(err, errlen, "console: out of memory");
	dconsole_stop(c);
	return NULL;
}

void dconsole_stop(struct dconsole *c)
{
	if (!c)
		return;
	chores_free(c->lane);
	for (int i = 0; i < NQ; i++)
		free(c->sql[i]);
	for (int a = 0; a < 4; a++)
		free(c->act[a]);
	free(c);
}
