/*
 * test_transfer_guard.c - unit tests of the transfer layer's guard hook
 * (transfer_set_guard in src/job/transfer.c) against the pipe server:
 * the guard sees every address curl connects to after name resolution, a
 * refused address gets no connection, a transfer whose addresses were all
 * refused reports result.refused, one that could try an allowed address
 * fails (or not) as the network says, and guarded transfers never reuse a
 * connection.
 */
#include "autoconfig.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <curl/curl.h>
#include <event2/event.h>

#include "job/transfer.h"
#include "pipe_server.h"
#include "suite.h"

static struct pipe_server srv;

struct guard_log {
	int allow_v4, allow_v6;      /* what the guard allows */
	unsigned asked_v4, asked_v6; /* addresses it was asked about */
};

static int guard(void *arg, const struct sockaddr *sa, socklen_t len)
{
	struct guard_log *g = arg;

	(void)len;
	if (sa->sa_family == AF_INET) {
		g->asked_v4++;
		return g->allow_v4;
	}
	g->asked_v6++;
	return g->allow_v6;
}

struct outcome {
	int done;
	struct transfer_result r;
	size_t got;
};

static size_t sink_write(void *arg, const char *data, size_t len)
{
	struct outcome *o = arg;
	(void)data;
	o->got += len;
	return len;
}

static void sink_done(void *arg, const struct transfer_result *r)
{
	struct outcome *o = arg;
	o->r = *r;
	o->r.error = NULL; /* valid during the call only */
	o->done = 1;
}

/* GETs url with the guard; returns the outcome. */
static struct outcome fetch(const char *url, struct guard_log *g)
{
	static const struct transfer_sink sink = { sink_write, sink_done };
	struct outcome o = { 0 };
	struct event_base *base = event_base_new();
	struct transfer_loop *loop = transfer_loop_new(base);
	struct transfer_options opt;

	transfer_options_init(&opt);
	opt.connect_timeout_ms = 3000;
	CU_ASSERT_FATAL(loop && transfer_loop_set_defaults(loop, &opt) == 0);
	struct transfer *t = transfer_get(loop, url, &sink, &o);
	CU_ASSERT_FATAL(t != NULL);
	if (g)
		CU_ASSERT_FATAL(transfer_set_guard(t, guard, g) == 0);
	for (int i = 0; i < 500 && !o.done; i++) {
		struct timeval tv = { 0, 10000 };
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
	CU_ASSERT(o.done);
	transfer_loop_free(loop);
	event_base_free(base);
	return o;
}

static unsigned requests(const char *name)
{
	struct pipe_result r;
	return pipe_server_result(&srv, name, &r) == 0 ? r.requests : 999;
}

static void serve(const char *name, char *url, size_t len)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	e.seed = 3;
	e.size = 1000;
	CU_ASSERT_FATAL(pipe_server_in(&srv, name, &e, url, len) == 0);
}

static void test_allowed_and_refused(void)
{
	char url[256];
	struct guard_log g = { .allow_v4 = 1 };

	serve("a", url, sizeof url);
	struct outcome o = fetch(url, &g);
	CU_ASSERT(o.r.ok && o.got == 1000 && !o.r.refused);
	CU_ASSERT_EQUAL(g.asked_v4, 1);

	/* refused: no request reaches the server, result.refused */
	serve("b", url, sizeof url);
	g = (struct guard_log){ 0 };
	o = fetch(url, &g);
	CU_ASSERT(!o.r.ok && o.r.refused);
	CU_ASSERT_EQUAL(o.r.curl_code, CURLE_COULDNT_CONNECT);
	CU_ASSERT_EQUAL(g.asked_v4, 1);
	CU_ASSERT_EQUAL(requests("b"), 0);

	/* no guard: not asked, not refused */
	serve("c", url, sizeof url);
	o = fetch(url, NULL);
	CU_ASSERT(o.r.ok && !o.r.refused);
}

static void test_every_resolved_address(void)
{
	char url[256], named[256];

	/* localhost resolves to ::1 and 127.0.0.1 (the server is on the
	 * latter): the guard is asked about each address tried */
	serve("d", url, sizeof url);
	snprintf(named, sizeof named, "http://localhost%s", strchr(url + 7, ':'));
	struct guard_log g = { .allow_v4 = 1, .allow_v6 = 0 };
	struct outcome o = fetch(named, &g);
	CU_ASSERT(o.r.ok && !o.r.refused);
	CU_ASSERT(g.asked_v4 >= 1);
	/* both refused: refused, nothing reached the server */
	serve("e", url, sizeof url);
	snprintf(named, sizeof named, "http://localhost%s", strchr(url + 7, ':'));
	g = (struct guard_log){ 0 };
	o = fetch(named, &g);
	CU_ASSERT(!o.r.ok && o.r.refused);
	CU_ASSERT_EQUAL(requests("e"), 0);
}

static void test_allowed_but_unreachable(void)
{
	/* a port where nothing listens: the allowed address fails as the
	 * network says (a retryable connect failure), not as a refusal */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof sa;
	char url[128];

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	CU_ASSERT_FATAL(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	snprintf(url, sizeof url, "http://localhost:%d/x", ntohs(sa.sin_port));
	/* bound, not listening: connections are refused by the kernel */
	struct guard_log g = { .allow_v4 = 1, .allow_v6 = 0 };
	struct outcome o = fetch(url, &g);
	CU_ASSERT(!o.r.ok && !o.r.refused);
	CU_ASSERT_EQUAL(o.r.curl_code, CURLE_COULDNT_CONNECT);
	close(fd);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "allowed, refused, no guard", test_allowed_and_refused },
		{ "every resolved address is asked", test_every_resolved_address },
		{ "allowed but unreachable is no refusal", test_allowed_but_unreachable },
		{ NULL, NULL },
	};
	if (pipe_server_start(&srv) < 0) {
		fprintf(stderr, "cannot start the pipe server\n");
		return 1;
	}
	int rc = run_suite("transfer_guard", cases);
	pipe_server_stop(&srv);
	return rc;
}
