/* proto.c - see proto.h. */
#include "autoconfig.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "proto.h"

struct tclient *tc_connect(int port, const char *client_id)
{
	return tc_connect_within(port, client_id, 5000);
}

struct tclient *tc_connect_within(int port, const char *client_id, int timeout_ms)
{
	return tc_connect_at("127.0.0.1", port, client_id, timeout_ms);
}

struct tclient *tc_connect_at(const char *host, int port, const char *client_id, int timeout_ms)
{
	char path[128];
	int status = 0;
	struct wsc *ws;

	if (client_id)
		snprintf(path, sizeof path, "/broker?client=%s", client_id);
	else
		snprintf(path, sizeof path, "/broker");
	ws = wsc_connect(host, port, path, NULL, timeout_ms, &status);
	return ws ? tc_from_wsc(ws, client_id, timeout_ms) : NULL;
}

struct tclient *tc_connect_query(int port, const char *query, const char *name)
{
	char path[256];
	int status = 0;

	snprintf(path, sizeof path, "/broker?%s", query);
	struct wsc *ws = wsc_connect("127.0.0.1", port, path, NULL, 5000, &status);
	return ws ? tc_from_wsc(ws, name, 5000) : NULL;
}

struct tclient *tc_from_wsc(struct wsc *ws, const char *name, int timeout_ms)
{
	struct tclient *c = calloc(1, sizeof *c);

	if (!c) {
		wsc_free(ws);
		return NULL;
	}
	c->ws = ws;
	snprintf(c->name, sizeof c->name, "%s", name ? name : "anon");
	struct json_object *h = tc_expect(c, "HELLO", timeout_ms);
	if (!h) {
		tc_close(c);
		return NULL;
	}
	json_object_put(h);
	return c;
}

/* Connection counts per handler slot from /status (-1 where unknown). */
static void handler_conns(const struct es_daemon *d, int *counts, int n)
{
	struct json_object *st = harness_status(d), *hs;
	for (int i = 0; i < n; i++)
		counts[i] = -1;
	if (st && json_object_object_get_ex(st, "handlers", &hs))
		for (int i = 0; i < n && i < (int)json_object_array_length(hs); i++)
			counts[i] = (int)tc_int(json_object_array_get_idx(hs, (size_t)i),
						"connections");
	if (st)
		json_object_put(st);
}

struct tclient *tc_connect_on_handler(const struct es_daemon *d, int handlers, int slot,
				      const char *client_id)
{
	/* the kernel spreads connections by hash: a few tries do */
	for (int attempt = 0; attempt < 60; attempt++) {
		int before[64], after[64];
		handler_conns(d, before, handlers);
		struct tclient *c = tc_connect(d->port, client_id);
		if (!c)
			return NULL;
		handler_conns(d, after, handlers);
		if (after[slot] == before[slot] + 1)
			return c;
		tc_close(c);
		harness_sleep_ms(30); /* let the close reach the book */
	}
	return NULL;
}

void tc_close(struct tclient *c)
{
	if (!c)
		return;
	if (c->ws)
		wsc_free(c->ws);
	if (c->hello)
		json_object_put(c->hello);
	free(c);
}

int tc_send(struct tclient *c, const char *fmt, ...)
{
	char buf[8192];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n < 0 || n >= (int)sizeof buf)
		return -1;
	return wsc_send_text(c->ws, buf, (size_t)n);
}

int tc_send_together(struct tclient *c, const char *const *msgs, size_t n)
{
	unsigned char buf[8192];
	size_t len = 0;

	for (size_t i = 0; i < n; i++) {
		struct wsc_frame f = { .fin = 1,
				       .opcode = WSC_TEXT,
				       .masked = 1,
				       .payload = msgs[i],
				       .len = strlen(msgs[i]) };
		if (f.len + 14 > sizeof buf - len)
			return -1;
		len += wsc_build_frame(&f, buf + len, sizeof buf - len);
	}
	return wsc_send_bytes(c->ws, buf, len);
}

const char *tc_str(struct json_object *o, const char *key)
{
	struct json_object *v;
	if (!o || !json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

long long tc_int(struct json_object *o, const char *key)
{
	struct json_object *v;
	if (!o || !json_object_object_get_ex(o, key, &v))
		return -1;
	return json_object_get_int64(v);
}

struct json_object *tc_expect(struct tclient *c, const char *type, int timeout_ms)
{
	long long end = harness_now_ms() + timeout_ms;

	for (;;) {
		long long left = end - harness_now_ms();
		if (left <= 0)
			return NULL;
		struct wsc_msg m;
		int t = wsc_recv(c->ws, (int)left, &m);
		if (t != WSC_TEXT) {
			wsc_msg_free(&m);
			if (t == WSC_TIMEOUT)
				continue;
			return NULL;
		}
		struct json_object *o = json_tokener_parse(m.data);
		wsc_msg_free(&m);
		const char *mt = tc_str(o, "type");
		if (!mt) {
			json_object_put(o);
			continue;
		}
		if (strcmp(mt, "HELLO") == 0) {
			if (c->hello)
				json_object_put(c->hello);
			c->hello = json_object_get(o);
			if (type && strcmp(type, "HELLO") == 0)
				return o;
			json_object_put(o);
			continue;
		}
		if (!type || strcmp(mt, type) == 0)
			return o;
		fprintf(stderr, "[%s] unexpected %s while waiting for %s: %s\n", c->name, mt, type,
			json_object_to_json_string(o));
		json_object_put(o);
		return NULL;
	}
}

int tc_quiet(struct tclient *c, int ms)
{
	struct json_object *o = tc_expect(c, NULL, ms);
	if (o) {
		fprintf(stderr, "[%s] expected silence, got %s\n", c->name,
			json_object_to_json_string(o));
		json_object_put(o);
		return 0;
	}
	return 1;
}

const char *tc_want_offer(struct tclient *c, const char *job_id, const char *service, int priority,
			  int timeout_ms)
{
	static char token[32];
	if (tc_send(c, "{\"type\":\"WANT\",\"job_id\":\"%s\",\"service\":\"%s\",\"priority\":%d}",
		    job_id, service, priority) != 0)
		return NULL;
	struct json_object *o = tc_expect(c, "OFFER", timeout_ms);
	if (!o)
		return NULL;
	const char *t = tc_str(o, "token"), *id = tc_str(o, "job_id");
	int ok = t && id && strcmp(id, job_id) == 0;
	if (ok)
		snprintf(token, sizeof token, "%s", t);
	json_object_put(o);
	return ok ? token : NULL;
}

int tc_start_job(struct tclient *c, const char *job_id, const char *service, const char *job_json)
{
	const char *token = tc_want_offer(c, job_id, service, 0, 3000);
	if (!token)
		return -1;
	return tc_send(c, "{\"type\":\"JOB\",\"job_id\":\"%s\",\"token\":\"%s\",\"job\":%s}",
		       job_id, token, job_json);
}

struct json_object *tc_run_job(struct tclient *c, const char *job_id, const char *service,
			       const char *job_json, int timeout_ms)
{
	if (tc_start_job(c, job_id, service, job_json) != 0)
		return NULL;
	return tc_expect(c, "DONE", timeout_ms);
}

struct json_object *tc_receipt(struct json_object *done)
{
	struct json_object *r = NULL;
	if (done)
		json_object_object_get_ex(done, "receipt", &r);
	return r;
}
