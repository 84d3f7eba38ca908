/*
 * metrics.c - see metrics.h.  One table says every metric's name, type,
 * help and where its value lives, so the page and the list cannot drift.
 */
#include "autoconfig.h"
#include "dispatch/metrics.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#define METRICS_HEADERS_MAX 8192 /* request line and headers */
#define METRICS_TIMEOUT_SEC 10

struct metrics {
	struct evhttp *http;
	const struct dispatch_stats *st;
	char instance[80];
};

enum kind {
	U64,
	UINT,
	INT
};

struct metric_def {
	const char *name, *type, *help;
	size_t offset;
	enum kind kind;
};

#define M(n, t, h, f, k)                                       \
	{                                                      \
		n, t, h, offsetof(struct dispatch_stats, f), k \
	}
static const struct metric_def defs[] = {
	M("execdispatch_claim_statements_total", "counter", "Claim statements sent.", claims, U64),
	M("execdispatch_claimed_total", "counter", "Rows claimed.", claimed, U64),
	M("execdispatch_attempts_total", "counter",
	  "Sum of the attempt numbers of the rows claimed "
	  "(minus claimed_total: the retries).",
	  attempts, U64),
	M("execdispatch_done_total", "counter", "Rows finished done.", done, U64),
	M("execdispatch_failed_total", "counter", "Rows finished failed.", failed, U64),
	M("execdispatch_requeued_total", "counter", "Rows requeued for a retryable error.",
	  requeued, U64),
	M("execdispatch_no_slot_total", "counter",
	  "Rows requeued without a slot (attempt given "
	  "back).",
	  no_slot, U64),
	M("execdispatch_dropped_total", "counter",
	  "Results dropped because the claim was lost "
	  "(cancelled or rescued).",
	  dropped, U64),
	M("execdispatch_rescued_requeued_total", "counter",
	  "Rows of silent dispatchers this one "
	  "requeued.",
	  rescued_requeued, U64),
	M("execdispatch_rescued_failed_total", "counter",
	  "Rows of silent dispatchers this one "
	  "failed (out of attempts).",
	  rescued_failed, U64),
	M("execdispatch_rescue_put_off_total", "counter",
	  "Silent dispatchers this one's rescues put off because another transaction "
	  "holds a lock on one of their rows (each rescue counts each one again).",
	  rescue_put_off, U64),
	M("execdispatch_cancels_total", "counter",
	  "Cancels of held rows noticed by the cancel "
	  "poll.",
	  cancels, U64),
	M("execdispatch_cancel_latency_ms_total", "counter",
	  "Sum over those of the milliseconds "
	  "from the cancel's commit to its notice.",
	  cancel_latency_ms, U64),
	M("execdispatch_statements_total", "counter", "Statements sent to the database.",
	  statements, U64),
	M("execdispatch_admission", "gauge",
	  "Claim share now (jobs this dispatcher may hold at "
	  "the execservers).",
	  share, UINT),
	M("execdispatch_held", "gauge", "Rows at the execservers now.", at_exec, UINT),
	M("execdispatch_services", "gauge",
	  "Services admission knows now (those the "
	  "execservers run, and those of rows held).",
	  services, UINT),
	M("execdispatch_rescue_put_off", "gauge",
	  "Silent dispatchers this one's last rescue put off (their rows wait for "
	  "a lock).",
	  rescue_put_off_last, UINT),
	M("execdispatch_database_up", "gauge", "1 while connected to the database.", db_up, INT),
};

static void serve(struct evhttp_request *req, void *arg)
{
	struct metrics *m = arg;
	struct evbuffer *out = evbuffer_new();
	const char *base = (const char *)m->st;

	if (!out) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
		const struct metric_def *d = &defs[i];
		const void *p = base + d->offset;
		evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n%s{instance=\"%s\"} ",
				    d->name, d->help, d->name, d->type, d->name, m->instance);
		if (d->kind == U64)
			evbuffer_add_printf(out, "%" PRIu64 "\n", *(const uint64_t *)p);
		else if (d->kind == UINT)
			evbuffer_add_printf(out, "%u\n", *(const unsigned *)p);
		else
			evbuffer_add_printf(out, "%d\n", *(const int *)p);
	}
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "text/plain; version=0.0.4");
	evhttp_send_reply(req, 200, "OK", out);
	evbuffer_free(out);
}

struct metrics *metrics_start(struct event_base *base, const char *addr,
			      const struct dispatch_stats *st, const char *instance, char *err,
			      size_t errlen)
{
	struct metrics *m = calloc(1, sizeof *m);
	char host[256];
	const char *colon = strrchr(addr, ':');
	int port = colon ? atoi(colon + 1) : 0;

	if (!m || !colon || port <= 0 || port > 65535 || (size_t)(colon - addr) >= sizeof host) {
		snprintf(err, errlen, "metrics: host:port is required (got \"%s\")", addr);
		free(m);
		return NULL;
	}
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = '\0';
	m->st = st;
	snprintf(m->instance, sizeof m->instance, "%s", instance);
	m->http = evhttp_new(base);
	if (m->http) { /* a request is a short GET: bounded in size and time */
		evhttp_set_max_headers_size(m->http, METRICS_HEADERS_MAX);
		evhttp_set_max_body_size(m->http, 0);
		evhttp_set_timeout(m->http, METRICS_TIMEOUT_SEC);
	}
	if (!m->http || evhttp_bind_socket(m->http, host, (unsigned short)port) != 0) {
		snprintf(err, errlen, "metrics: cannot listen on %s", addr);
		metrics_stop(m);
		return NULL;
	}
	evhttp_set_cb(m->http, "/metrics", serve, m);
	return m;
}

void metrics_stop(struct metrics *m)
{
	if (!m)
		return;
	if (m->http)
		evhttp_free(m->http);
	free(m);
}
