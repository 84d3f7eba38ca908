/*
 * test_limits.c - the connection and job limits against a real daemon
 * (docs/security.md, "Limits"): maxConnections, maxFrameBytes,
 * maxWantsPerConnection, handshakeTimeoutSec, idleTimeoutSec and
 * maxJobsPerClient.  Each test hits the limit, checks the exact answer a
 * client sees (HTTP status, close code or ERROR code), and proves that the
 * connection (where it survives) and other clients keep working.
 */
#include "autoconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "harness.h"
#include "proto.h"
#include "suite.h"

static struct es_daemon D;

static void start(int handlers, int slots, const char *extra, const char *env)
{
	CU_ASSERT_FATAL(harness_start_default(&D, handlers, slots, extra, env) == 0);
}

static void stop(void)
{
	CU_ASSERT(harness_finish(&D, 0) == 0);
}

/* 1 when GET /status gets no answer: a handler full itself closes it. */
static int status_refused(void *arg)
{
	struct json_object *st = harness_status(&D);

	(void)arg;
	if (st)
		json_object_put(st);
	return st == NULL;
}

/* A client that can still do business: a job runs through it. */
static int works(struct tclient *c, const char *job_id)
{
	struct json_object *d = tc_run_job(c, job_id, "cat", "{\"command\":\"true\"}", 5000);
	int ok = d && tc_int(tc_receipt(d), "exit_code") == 0;
	if (d)
		json_object_put(d);
	return ok;
}

/* Waits for the server to close c; returns the close code (0: EOF without
 * a close frame, -1: still open after timeout_ms). */
static int close_code(struct tclient *c, int timeout_ms)
{
	long long end = harness_now_ms() + timeout_ms;
	for (;;) {
		long long left = end - harness_now_ms();
		if (left <= 0)
			return -1;
		struct wsc_msg m;
		int t = wsc_recv(c->ws, (int)left, &m);
		int code = m.close_code;
		wsc_msg_free(&m);
		if (t == WSC_CLOSE)
			return code;
		if (t == WSC_EOF || t == WSC_ERROR)
			return 0;
	}
}

static void test_max_connections(void)
{
	start(1, 2, "maxConnections: 3\n", NULL);
	struct tclient *a = tc_connect(D.port, "a"), *b = tc_connect(D.port, "b");
	CU_ASSERT_FATAL(a && b);
	/* an HTTP-phase connection counts too: the third slot */
	int half = wsc_tcp_connect("127.0.0.1", D.port, 2000);
	CU_ASSERT_FATAL(half >= 0);
	/* the handler counts it: full, it closes even /status unanswered */
	CU_ASSERT_FATAL(harness_wait_until(status_refused, NULL, 5000) == 0);
	int status = -1;
	struct wsc *x = wsc_connect("127.0.0.1", D.port, "/broker", NULL, 3000, &status);
	/* the handler that accepted it is full: closed without an answer */
	CU_ASSERT(x == NULL);
	CU_ASSERT_EQUAL(status, 0);
	wsc_free(x);
	/* the ones inside keep working */
	CU_ASSERT(works(a, "a1"));
	CU_ASSERT(works(b, "b1"));
	/* one leaves: room for one more */
	close(half);
	CU_ASSERT(harness_wait_int(&D, 2, 5000, "connections", NULL) == 0);
	struct tclient *c = tc_connect(D.port, "c");
	CU_ASSERT_FATAL(c != NULL);
	CU_ASSERT(works(c, "c1"));
	tc_close(a);
	tc_close(b);
	tc_close(c);
	stop();
}

static void test_max_connections_book(void)
{
	/* Two handlers: the limit is the instance's (the book's), so whichever
	 * handler gets the fourth connection refuses it: 503 from one that has
	 * room of its own (a close comes only from one that is full itself,
	 * test_max_connections).  The three are spread, two and one, so that
	 * neither handler is full itself: every refusal is the book's 503. */
	start(2, 2, "maxConnections: 3\n", NULL);
	struct tclient *c[3];
	for (int i = 0; i < 3; i++) {
		char id[8];
		snprintf(id, sizeof id, "k%d", i);
		c[i] = tc_connect_on_handler(&D, 2, i % 2, id);
		CU_ASSERT_FATAL(c[i] != NULL);
	}
	int refused503 = 0;
	for (int i = 0; i < 6; i++) {
		int status = -1;
		struct wsc *x = wsc_connect("127.0.0.1", D.port, "/broker", NULL, 3000, &status);
		CU_ASSERT(x == NULL);
		CU_ASSERT_EQUAL(status, 503);
		refused503 += status == 503;
		wsc_free(x);
	}
	CU_ASSERT_EQUAL(refused503, 6);
	CU_ASSERT_EQUAL(harness_log_count(&D, "connection refused: "), 6);
	for (int i = 0; i < 3; i++) {
		char id[8];
		snprintf(id, sizeof id, "j%d", i);
		CU_ASSERT(works(c[i], id));
	}
	/* (/status is an HTTP connection: it counts too, so it is read once
	 * there is room) */
	tc_close(c[0]);
	CU_ASSERT_EQUAL(harness_wait_int(&D, 2, 5000, "connections", NULL), 0);
	tc_close(c[1]);
	tc_close(c[2]);
	stop();
}

static void test_max_frame_bytes(void)
{
	start(1, 1, "maxFrameBytes: 1024\n", NULL);
	struct tclient *big = tc_connect(D.port, "big"), *other = tc_connect(D.port, "other");
	CU_ASSERT_FATAL(big && other);
	/* exactly 1024 bytes is accepted (an unknown field pads it) */
	char msg[2100];
	int pad = 1024 - (int)strlen("{\"type\":\"QUERY\",\"job_id\":\"q\",\"x\":\"\"}");
	snprintf(msg, sizeof msg, "{\"type\":\"QUERY\",\"job_id\":\"q\",\"x\":\"%0*d\"}", pad, 0);
	CU_ASSERT_EQUAL(strlen(msg), 1024);
	CU_ASSERT(wsc_send_text(big->ws, msg, strlen(msg)) == 0);
	struct json_object *e = tc_expect(big, "ERROR", 3000);
	CU_ASSERT(e && strcmp(tc_str(e, "code"), "unknown_job") == 0);
	if (e)
		json_object_put(e);
	/* one byte more closes with 1009 */
	snprintf(msg, sizeof msg, "{\"type\":\"QUERY\",\"job_id\":\"q\",\"x\":\"%0*d\"}", pad + 1,
		 0);
	CU_ASSERT(wsc_send_text(big->ws, msg, strlen(msg)) == 0);
	CU_ASSERT_EQUAL(close_code(big, 3000), 1009);
	CU_ASSERT(works(other, "o1"));
	tc_close(big);
	tc_close(other);
	stop();
}

/* One read of more messages than the broker applies in one section
 * (handler/broker.c), then one over maxFrameBytes, then one more: every
 * message before the oversize one is answered, in order across the
 * sections, and then the connection closes 1009 without a word about
 * the message after it. */
static void test_long_read_then_oversize(void)
{
	enum {
		N = 40
	};
	static char buf[N + 2][1100];
	const char *msgs[N + 2];

	start(1, 1, "maxFrameBytes: 1024\n", NULL);
	struct tclient *c = tc_connect(D.port, "lr");
	CU_ASSERT_FATAL(c != NULL);
	for (int i = 0; i < N; i++) {
		snprintf(buf[i], sizeof buf[i], "{\"type\":\"UNWANT\",\"job_id\":\"u%02d\"}", i);
		msgs[i] = buf[i];
	}
	int pad = 1025 - (int)strlen("{\"type\":\"QUERY\",\"job_id\":\"q\",\"x\":\"\"}");
	snprintf(buf[N], sizeof buf[N], "{\"type\":\"QUERY\",\"job_id\":\"q\",\"x\":\"%0*d\"}", pad,
		 0);
	CU_ASSERT_EQUAL(strlen(buf[N]), 1025);
	msgs[N] = buf[N];
	snprintf(buf[N + 1], sizeof buf[N + 1], "{\"type\":\"UNWANT\",\"job_id\":\"after\"}");
	msgs[N + 1] = buf[N + 1];
	CU_ASSERT_FATAL(tc_send_together(c, msgs, N + 2) == 0);
	for (int i = 0; i < N; i++) {
		char id[8];
		struct json_object *e = tc_expect(c, NULL, 3000);
		snprintf(id, sizeof id, "u%02d", i);
		if (!e)
			fprintf(stderr, "no answer to message %d of %d\n", i, N);
		CU_ASSERT_FATAL(e != NULL);
		CU_ASSERT_STRING_EQUAL(tc_str(e, "type"), "ERROR");
		CU_ASSERT_STRING_EQUAL(tc_str(e, "code"), "unknown_job");
		CU_ASSERT_STRING_EQUAL(tc_str(e, "job_id"), id);
		json_object_put(e);
	}
	struct wsc_msg m;
	int t;
	while ((t = wsc_recv(c->ws, 3000, &m)) == WSC_TEXT && strstr(m.data, "\"HELLO\""))
		wsc_msg_free(&m);
	CU_ASSERT_EQUAL(t, WSC_CLOSE);
	if (t != WSC_CLOSE)
		fprintf(stderr, "after the answers: type %d %s\n", t, m.data ? m.data : "");
	CU_ASSERT_EQUAL(m.close_code, 1009);
	wsc_msg_free(&m);
	tc_close(c);
	stop();
}

static void test_max_wants_per_connection(void)
{
	start(1, 1, "maxWantsPerConnection: 3\n", NULL);
	struct tclient *c = tc_connect(D.port, "w"), *other = tc_connect(D.port, "o");
	CU_ASSERT_FATAL(c && other);
	/* the slot is taken by `other`, so the wants stay parked */
	const char *tok = tc_want_offer(other, "hold", "cat", 0, 3000);
	CU_ASSERT_FATAL(tok != NULL);
	for (int i = 0; i < 3; i++)
		tc_send(c, "{\"type\":\"WANT\",\"job_id\":\"w%d\",\"service\":\"cat\"}", i);
	CU_ASSERT(tc_quiet(c, 300));
	tc_send(c, "{\"type\":\"WANT\",\"job_id\":\"w3\",\"service\":\"cat\"}");
	struct json_object *e = tc_expect(c, "ERROR", 3000);
	CU_ASSERT(e && strcmp(tc_str(e, "code"), "limit_reached") == 0 &&
		  strcmp(tc_str(e, "job_id"), "w3") == 0 &&
		  strstr(tc_str(e, "message"), "maxWantsPerConnection") != NULL);
	if (e)
		json_object_put(e);
	/* another connection is not affected */
	tc_send(other, "{\"type\":\"WANT\",\"job_id\":\"o2\",\"service\":\"cat\"}");
	CU_ASSERT(tc_quiet(other, 300));
	/* giving one back makes room again */
	tc_send(c, "{\"type\":\"UNWANT\",\"job_id\":\"w0\"}");
	tc_send(c, "{\"type\":\"WANT\",\"job_id\":\"w3\",\"service\":\"cat\"}");
	CU_ASSERT(tc_quiet(c, 300));
	tc_close(c);
	tc_close(other);
	stop();
}

static void test_handshake_timeout(void)
{
	start(1, 1, "handshakeTimeoutSec: 1\n", NULL);
	int fd = wsc_slow_connect("127.0.0.1", D.port, "GET /broker HTTP/1.1\r\nHost: x\r\n", 2000);
	CU_ASSERT_FATAL(fd >= 0);
	long long t0 = harness_now_ms();
	/* meanwhile another client connects and works */
	struct tclient *c = tc_connect(D.port, "h");
	CU_ASSERT_FATAL(c != NULL);
	CU_ASSERT(works(c, "h1"));
	CU_ASSERT_EQUAL(wsc_wait_closed(fd, 4000), 1);
	long long took = harness_now_ms() - t0;
	CU_ASSERT(took >= 800 && took < 3000);
	close(fd);
	/* sleep: the established websocket lives past handshakeTimeoutSec
	 * (1 s) from its own connect, and is not subject to it */
	harness_sleep_ms(1200);
	CU_ASSERT(works(c, "h2"));
	tc_close(c);
	stop();
}

static void test_idle_timeout(void)
{
	start(1, 2, "idleTimeoutSec: 1\npingIntervalSec: 1\npingTimeoutSec: 10\n", NULL);
	/* silent: closed with 1000 after about a second */
	struct tclient *idle = tc_connect(D.port, "idle");
	CU_ASSERT_FATAL(idle != NULL);
	long long t0 = harness_now_ms();
	CU_ASSERT_EQUAL(close_code(idle, 5000), 1000);
	long long took = harness_now_ms() - t0;
	CU_ASSERT(took >= 800 && took < 3500);
	tc_close(idle);

	/* pings (its own, and pongs to the server's) are not activity */
	struct tclient *pinger = tc_connect(D.port, "pinger");
	CU_ASSERT_FATAL(pinger != NULL);
	int code = -1;
	t0 = harness_now_ms();
	while (code < 0 && harness_now_ms() - t0 < 5000) {
		wsc_send_ping(pinger->ws, "x", 1);
		code = close_code(pinger, 300);
	}
	CU_ASSERT_EQUAL(code, 1000);
	tc_close(pinger);

	/* a parked want keeps a connection open, however quiet */
	struct tclient *holder = tc_connect(D.port, "holder"),
		       *parked = tc_connect(D.port, "parked");
	CU_ASSERT_FATAL(holder && parked);
	CU_ASSERT_FATAL(tc_start_job(holder, "s1", "sleep",
				     "{\"command\":\"sleep\",\"args\":[\"3\"]}") == 0);
	CU_ASSERT_FATAL(tc_start_job(parked, "s2", "sleep",
				     "{\"command\":\"sleep\",\"args\":[\"3\"]}") == 0);
	struct tclient *waiter = tc_connect(D.port, "waiter");
	CU_ASSERT_FATAL(waiter != NULL);
	tc_send(waiter, "{\"type\":\"WANT\",\"job_id\":\"p1\",\"service\":\"cat\"}");
	/* 2.5 s of silence: the running jobs and the parked want keep all
	 * three open */
	CU_ASSERT_EQUAL(close_code(holder, 2500), -1);
	struct json_object *d = tc_expect(holder, "DONE", 3000);
	CU_ASSERT(d && tc_int(tc_receipt(d), "exit_code") == 0);
	if (d)
		json_object_put(d);
	/* its job done, the holder is idle: closed about a second later */
	CU_ASSERT_EQUAL(close_code(holder, 3000), 1000);
	/* the waiter got its offer when a slot freed and can still use it */
	struct json_object *o = tc_expect(waiter, "OFFER", 3000);
	CU_ASSERT_FATAL(o != NULL);
	char token[32];
	snprintf(token, sizeof token, "%s", tc_str(o, "token"));
	json_object_put(o);
	tc_send(waiter,
		"{\"type\":\"JOB\",\"job_id\":\"p1\",\"token\":\"%s\",\"job\":"
		"{\"command\":\"true\"}}",
		token);
	d = tc_expect(waiter, "DONE", 3000);
	CU_ASSERT(d != NULL);
	if (d)
		json_object_put(d);
	tc_close(holder);
	tc_close(parked);
	tc_close(waiter);
	stop();
}

static void test_max_jobs_per_client(void)
{
	/* two handlers: the count is the instance's, across handlers */
	start(2, 4, "maxJobsPerClient: 1\n", NULL);
	struct tclient *k1 = tc_connect_on_handler(&D, 2, 0, "k");
	struct tclient *k2 = tc_connect_on_handler(&D, 2, 1, "k");
	struct tclient *m = tc_connect(D.port, "m");
	CU_ASSERT_FATAL(k1 && k2 && m);
	CU_ASSERT_FATAL(
		tc_start_job(k1, "a", "sleep", "{\"command\":\"sleep\",\"args\":[\"2\"]}") == 0);
	CU_ASSERT_FATAL(harness_wait_wg(&D, "wg", "running", 1, 5000) == 0);
	/* the same client on the other handler: a second JOB is refused */
	CU_ASSERT_FATAL(tc_start_job(k2, "b", "cat", "{\"command\":\"true\"}") == 0);
	struct json_object *e = tc_expect(k2, "ERROR", 3000);
	CU_ASSERT(e && strcmp(tc_str(e, "code"), "limit_reached") == 0 &&
		  strcmp(tc_str(e, "job_id"), "b") == 0 &&
		  strstr(tc_str(e, "message"), "maxJobsPerClient") != NULL);
	if (e)
		json_object_put(e);
	/* the offer was withdrawn: the want is gone and the slot free */
	tc_send(k2, "{\"type\":\"QUERY\",\"job_id\":\"b\"}");
	e = tc_expect(k2, "ERROR", 3000);
	CU_ASSERT(e && strcmp(tc_str(e, "code"), "unknown_job") == 0);
	if (e)
		json_object_put(e);
	struct json_object *st = harness_status(&D);
	CU_ASSERT_EQUAL(harness_json_int(st, "waitgroups", "wg", "running", NULL), 1);
	CU_ASSERT_EQUAL(harness_json_int(st, "waitgroups", "wg", "offered", NULL), 0);
	if (st)
		json_object_put(st);
	/* another client runs meanwhile */
	CU_ASSERT(works(m, "m1"));
	/* once its job ended, the client may run another */
	struct json_object *d = tc_expect(k1, "DONE", 4000);
	CU_ASSERT(d && tc_int(tc_receipt(d), "exit_code") == 0);
	if (d)
		json_object_put(d);
	CU_ASSERT(works(k2, "b2"));
	tc_close(k1);
	tc_close(k2);
	tc_close(m);
	stop();
}

static void test_max_jobs_repaired(void)
{
	/* The handler dies inside book_accept (the want RUNNING, the lists not
	 * moved yet): after the repair the client's count must not be stuck at
	 * one, and its lost job ends with exec_lost. */
	start(1, 2, "maxJobsPerClient: 1\n", "EXECSERVER_FAULT=book:accept.mid");
	struct tclient *c = tc_connect(D.port, "r");
	CU_ASSERT_FATAL(c != NULL);
	CU_ASSERT_FATAL(tc_start_job(c, "x", "sleep", "{\"command\":\"sleep\",\"args\":[\"5\"]}") ==
			0);
	CU_ASSERT(close_code(c, 5000) >= 0); /* its handler died */
	tc_close(c);
	struct tclient *again = NULL;
	for (int i = 0; i < 50 && !again; i++) {
		harness_sleep_ms(100);
		again = tc_connect(D.port, "r");
	}
	CU_ASSERT_FATAL(again != NULL);
	struct json_object *d = tc_expect(again, "DONE", 5000);
	struct json_object *err = NULL;
	CU_ASSERT(d && json_object_object_get_ex(tc_receipt(d), "error", &err) &&
		  strcmp(tc_str(err, "code"), "exec_lost") == 0);
	if (d)
		json_object_put(d);
	CU_ASSERT(works(again, "y"));
	CU_ASSERT(harness_log_contains(&D, "fault injection: dying at accept.mid"));
	CU_ASSERT(harness_status_int(&D, "book_repairs", NULL) >= 1);
	tc_close(again);
	stop();
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "maxConnections (one handler)", test_max_connections },
		{ "maxConnections (the book's, two handlers)", test_max_connections_book },
		{ "maxFrameBytes", test_max_frame_bytes },
		{ "a long read, then a message over maxFrameBytes", test_long_read_then_oversize },
		{ "maxWantsPerConnection", test_max_wants_per_connection },
		{ "handshakeTimeoutSec", test_handshake_timeout },
		{ "idleTimeoutSec", test_idle_timeout },
		{ "maxJobsPerClient across handlers", test_max_jobs_per_client },
		{ "maxJobsPerClient after a repair", test_max_jobs_repaired },
		{ NULL, NULL },
	};
	return run_suite("limits", cases);
}
