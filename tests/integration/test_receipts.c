/*
 * test_receipts.c - receipts across half-open connections (protocol 2,
 * docs/protocol.md section 6 "Receipts"), against a real daemon with two
 * handlers and raw test websocket clients:
 *  - a client that goes silent right after its JOB (it reads nothing and
 *    answers no ping): the job ends, its DONE goes out into the silent
 *    connection, the server's ping deadline closes it (1001), and the
 *    client's next connection gets the DONE again, exactly once;
 *  - the same before the server has noticed: the new connection takes the
 *    job over at once;
 *  - a JOB that arrives on a connection after the client's newer one
 *    adopted its jobs is refused (its offer was withdrawn), never run;
 *  - an acknowledged receipt is never delivered again (the id is free);
 *  - QUERY of an unacknowledged job says "finished", CANCEL of it is
 *    answered by nothing but its DONE;
 *  - the owner's handler crashes after sending a DONE and before its ACK:
 *    the DONE comes again on the client's connection on the other handler;
 *    a job lost with its runner arrives as exec_lost, once acknowledged
 *    never again;
 *  - protocol negotiation: ?protocol=N above ours gives 2, a bad value 400,
 *    and a protocol-1 client sees what it always saw (HELLO protocol 1, ACK
 *    unknown_type, QUERY of a finished job unknown_job, a DONE counted as
 *    delivered once sent).
 */
#include "autoconfig.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "execserver/protocol.h"
#include "harness.h"
#include "proto.h"
#include "suite.h"

static struct es_daemon D;

/* pingTimeoutSec: how long the server waits for a silent client */
static void start(int ping_timeout_sec)
{
	char body[4096];
	snprintf(body, sizeof body,
		 "resumeGraceSec: 10\npingIntervalSec: 1\npingTimeoutSec: %d\n%s", ping_timeout_sec,
		 harness_default_body(2));
	CU_ASSERT_FATAL(harness_start(&D, 2, body, NULL) == 0);
}

static void stop(void)
{
	struct json_object *st = harness_status(&D), *v;
	CU_ASSERT(st && json_object_object_get_ex(st, "book_consistent", &v) &&
		  json_object_get_boolean(v));
	if (st)
		json_object_put(st);
	CU_ASSERT(harness_stop_clean(&D) == 0);
}

static struct tclient *v2(const char *client_id)
{
	char q[128];
	snprintf(q, sizeof q, "client=%s&protocol=2", client_id);
	struct tclient *c = tc_connect_query(D.port, q, client_id);
	if (c)
		CU_ASSERT_EQUAL(tc_int(c->hello, "protocol"), 2);
	return c;
}

/* WANT + JOB of `sleep secs` on c. */
static void start_sleep(struct tclient *c, const char *id, const char *secs)
{
	char job[96];

	snprintf(job, sizeof job, "{\"command\":\"sleep\",\"args\":[\"%s\"]}", secs);
	CU_ASSERT_FATAL(tc_start_job(c, id, "sleep", job) == 0);
}

/* The next DONE on c is job id's, exit code 0 (or error code `error`). */
static void expect_done(struct tclient *c, const char *id, const char *error, int timeout_ms)
{
	struct json_object *d = tc_expect(c, "DONE", timeout_ms), *e;
	CU_ASSERT_FATAL(d != NULL);
	CU_ASSERT_STRING_EQUAL(tc_str(d, "job_id"), id);
	if (error) {
		CU_ASSERT(json_object_object_get_ex(tc_receipt(d), "error", &e) &&
			  strcmp(tc_str(e, "code"), error) == 0);
	} else {
		CU_ASSERT_EQUAL(tc_int(tc_receipt(d), "exit_code"), 0);
	}
	json_object_put(d);
}

/* What the silent connection got meanwhile (read only now, as a client
 * that wakes up would): the DONE of id, then the server's close 1001. */
static void silent_got_done_then_1001(struct tclient *c, const char *id)
{
	int saw_done = 0, close_code = 0;
	struct wsc_msg m;
	for (int i = 0; i < 64 && !close_code; i++) {
		int t = wsc_recv(c->ws, 3000, &m);
		if (t == WSC_TEXT && strstr(m.data, "\"DONE\"") && strstr(m.data, id))
			saw_done++;
		else if (t == WSC_CLOSE)
			close_code = m.close_code;
		else if (t != WSC_TEXT && t != WSC_PING)
			close_code = -1;
		wsc_msg_free(&m);
	}
	CU_ASSERT_EQUAL(saw_done, 1);
	CU_ASSERT_EQUAL(close_code, 1001);
}

static void ack(struct tclient *c, const char *id)
{
	tc_send(c, "{\"type\":\"ACK\",\"job_id\":\"%s\"}", id);
}

/* After the ACK: no DONE on a new connection, QUERY unknown_job, the id
 * free for a new WANT. */
static void acked_is_gone(const char *client_id, const char *id)
{
	struct tclient *c = v2(client_id);
	CU_ASSERT_FATAL(c != NULL);
	CU_ASSERT(tc_quiet(c, 500));
	tc_send(c, "{\"type\":\"QUERY\",\"job_id\":\"%s\"}", id);
	struct json_object *e = tc_expect(c, NULL, 3000);
	CU_ASSERT(e && strcmp(tc_str(e, "type"), "ERROR") == 0 &&
		  strcmp(tc_str(e, "code"), "unknown_job") == 0);
	if (e)
		json_object_put(e);
	CU_ASSERT(tc_want_offer(c, id, "cat", 0, 3000) != NULL);
	tc_close(c);
}

static void test_silent_client_gets_done_on_return(void)
{
	start(2);
	struct tclient *a = v2("rc1");
	CU_ASSERT_FATAL(a != NULL);
	wsc_set_options(a->ws, WSC_OPT_NO_AUTO_PONG);
	start_sleep(a, "j", "0.3");
	/* a reads nothing from here on: the job ends (its DONE is sent into
	 * the silent connection), then the ping deadline (2 s) closes it */
	CU_ASSERT(harness_wait_int(&D, 0, 10000, "clients", NULL) == 0);
	struct tclient *b = v2("rc1");
	CU_ASSERT_FATAL(b != NULL);
	expect_done(b, "j", NULL, 3000);
	ack(b, "j");
	CU_ASSERT(tc_quiet(b, 300)); /* exactly once */
	silent_got_done_then_1001(a, "j");
	tc_close(a);
	tc_close(b);
	acked_is_gone("rc1", "j");
	stop();
}

static void test_new_connection_takes_over(void)
{
	start(60); /* the server will not notice the silence in this test */
	struct tclient *a = v2("rc2");
	CU_ASSERT_FATAL(a != NULL);
	wsc_set_options(a->ws, WSC_OPT_NO_AUTO_PONG);
	start_sleep(a, "j", "0.3");
	start_sleep(a, "k", "1.5");
	/* j ended, its DONE went to a */
	CU_ASSERT(harness_wait_int(&D, 1, 5000, "services", "sleep", "finished", NULL) == 0);
	struct tclient *b = v2("rc2");
	CU_ASSERT_FATAL(b != NULL);
	/* j's DONE again, and k's when it ends: b owns both now */
	expect_done(b, "j", NULL, 3000);
	ack(b, "j");
	/* until acknowledged, k is "finished" to QUERY and CANCEL is silent */
	expect_done(b, "k", NULL, 3000);
	tc_send(b, "{\"type\":\"QUERY\",\"job_id\":\"k\"}");
	struct json_object *p = tc_expect(b, NULL, 3000);
	CU_ASSERT(p && strcmp(tc_str(p, "type"), "POSITION") == 0 &&
		  strcmp(tc_str(p, "state"), "finished") == 0);
	if (p)
		json_object_put(p);
	tc_send(b, "{\"type\":\"CANCEL\",\"job_id\":\"k\"}");
	CU_ASSERT(tc_quiet(b, 300));
	ack(b, "k");
	ack(b, "k");    /* a second ACK changes nothing */
	ack(b, "nope"); /* nor one of an unknown job */
	CU_ASSERT(tc_quiet(b, 300));
	tc_close(b);
	tc_close(a);
	acked_is_gone("rc2", "j");
	acked_is_gone("rc2", "k");
	stop();
}

/* The waitgroup's running and offered counts from /status. */
static void wg_counts(long long *running, long long *offered)
{
	struct json_object *st = harness_status(&D), *wgs, *wg;
	*running = *offered = -1;
	if (st && json_object_object_get_ex(st, "waitgroups", &wgs) &&
	    json_object_object_get_ex(wgs, "wg", &wg)) {
		*running = tc_int(wg, "running");
		*offered = tc_int(wg, "offered");
	}
	if (st)
		json_object_put(st);
}

/* The late JOB (docs/architecture.md, "What it found"): the client answers
 * an OFFER with JOB on A, gives A up before the server reads it and
 * resumes on B, whose QUERY answers unknown_job.  The JOB that then
 * arrives on A is refused (unknown_job; the OFFER_EXPIRED the adoption
 * sent there comes before or after it), the job never runs, and its slot is free. */
static void test_late_job_on_superseded_connection(void)
{
	start(60); /* the server will not notice that A was given up */
	struct tclient *a = v2("late");
	CU_ASSERT_FATAL(a != NULL);
	const char *t = tc_want_offer(a, "j", "sleep", 0, 3000);
	CU_ASSERT_FATAL(t != NULL);
	char token[64];
	snprintf(token, sizeof token, "%s", t);
	struct tclient *b = v2("late");
	CU_ASSERT_FATAL(b != NULL);
	tc_send(b, "{\"type\":\"QUERY\",\"job_id\":\"j\"}");
	struct json_object *e = tc_expect(b, NULL, 3000);
	CU_ASSERT(e && strcmp(tc_str(e, "type"), "ERROR") == 0 &&
		  strcmp(tc_str(e, "code"), "unknown_job") == 0);
	if (e)
		json_object_put(e);
	/* the JOB that was on its way on A */
	tc_send(a,
		"{\"type\":\"JOB\",\"job_id\":\"j\",\"token\":\"%s\",\"job\":{\"command\":"
		"\"sleep\",\"args\":[\"5\"]}}",
		token);
	/* both ERRORs, in either order: when A and B sit on different
	 * handlers the OFFER_EXPIRED reaches A's handler through its mailbox,
	 * and A's JOB may be read before that mail is taken */
	int expired = 0, unknown = 0;
	for (int i = 0; i < 2; i++) {
		e = tc_expect(a, "ERROR", 3000);
		CU_ASSERT(e && strcmp(tc_str(e, "job_id"), "j") == 0);
		expired += e && strcmp(tc_str(e, "code"), "offer_expired") == 0;
		unknown += e && strcmp(tc_str(e, "code"), "unknown_job") == 0;
		if (e)
			json_object_put(e);
	}
	CU_ASSERT(expired == 1 && unknown == 1);
	long long running, offered;
	wg_counts(&running, &offered);
	CU_ASSERT_EQUAL(running, 0);
	CU_ASSERT_EQUAL(offered, 0);
	CU_ASSERT(tc_quiet(b, 500)); /* no DONE: it never ran */
	/* both slots are free: two WANTs on B are offered at once */
	CU_ASSERT(tc_want_offer(b, "j", "cat", 0, 3000) != NULL);
	CU_ASSERT(tc_want_offer(b, "k", "cat", 0, 3000) != NULL);
	tc_close(a);
	tc_close(b);
	stop();
}

static void test_owner_handler_crash_before_ack(void)
{
	start(60);
	/* (the "client id" below carries the protocol parameter along) */
	struct tclient *a = tc_connect_on_handler(&D, 2, 0, "rc3&protocol=2");
	struct tclient *b = tc_connect_on_handler(&D, 2, 1, "rc3&protocol=2");
	CU_ASSERT_FATAL(a && b);
	start_sleep(a, "j", "0.2");
	expect_done(a, "j", NULL, 3000); /* sent on handler 0, not acknowledged */
	start_sleep(b, "lost", "30");    /* runs on handler 1 */
	int pids[2];
	CU_ASSERT_EQUAL_FATAL(harness_handler_pids(&D, pids, 2), 2);
	kill(pids[0], SIGKILL);
	/* the book outlived the handler: the DONE comes again on b */
	expect_done(b, "j", NULL, 5000);
	ack(b, "j");
	CU_ASSERT(tc_quiet(b, 300));
	/* now the runner of "lost" dies: exec_lost, exactly once */
	CU_ASSERT(tc_quiet(b, 1000)); /* the master restarted handler 0 */
	struct tclient *c = tc_connect_on_handler(&D, 2, 0, "rc3&protocol=2");
	CU_ASSERT_FATAL(c != NULL);
	CU_ASSERT_EQUAL_FATAL(harness_handler_pids(&D, pids, 2), 2);
	kill(pids[1], SIGKILL);
	expect_done(c, "lost", "exec_lost", 5000);
	ack(c, "lost");
	CU_ASSERT(tc_quiet(c, 300));
	tc_close(a);
	tc_close(b);
	tc_close(c);
	acked_is_gone("rc3", "lost");
	stop();
}

static void test_negotiation_and_protocol_1(void)
{
	start(2);
	int status = 0;
	struct wsc *w = wsc_connect("127.0.0.1", D.port, "/broker?client=rc4&protocol=0", NULL,
				    3000, &status);
	CU_ASSERT(w == NULL && status == 400);
	w = wsc_connect("127.0.0.1", D.port, "/broker?protocol=2x", NULL, 3000, &status);
	CU_ASSERT(w == NULL && status == 400);
	struct tclient *n = tc_connect_query(D.port, "protocol=17", "newer");
	CU_ASSERT_FATAL(n != NULL);
	CU_ASSERT_EQUAL(tc_int(n->hello, "protocol"), PROTO_VERSION);
	tc_close(n);

	/* protocol 1: no ACK, DONE counted as delivered when sent */
	struct tclient *a = tc_connect(D.port, "rc4");
	CU_ASSERT_FATAL(a != NULL);
	CU_ASSERT_EQUAL(tc_int(a->hello, "protocol"), 1);
	ack(a, "j");
	struct json_object *e = tc_expect(a, NULL, 3000);
	CU_ASSERT(e && strcmp(tc_str(e, "code"), "unknown_type") == 0);
	if (e)
		json_object_put(e);
	wsc_set_options(a->ws, WSC_OPT_NO_AUTO_PONG);
	start_sleep(a, "j", "0.3");
	/* DONE sent into the silence; 1001 */
	CU_ASSERT(harness_wait_int(&D, 0, 10000, "clients", NULL) == 0);
	struct tclient *b = tc_connect(D.port, "rc4");
	CU_ASSERT_FATAL(b != NULL);
	CU_ASSERT(tc_quiet(b, 500)); /* the known limit of protocol 1 */
	tc_send(b, "{\"type\":\"QUERY\",\"job_id\":\"j\"}");
	e = tc_expect(b, NULL, 3000);
	CU_ASSERT(e && strcmp(tc_str(e, "code"), "unknown_job") == 0);
	if (e)
		json_object_put(e);
	silent_got_done_then_1001(a, "j");
	tc_close(a);
	tc_close(b);
	stop();
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "a silent client gets its DONE on its next connection",
		  test_silent_client_gets_done_on_return },
		{ "a new connection takes over from a silent one", test_new_connection_takes_over },
		{ "a late JOB on a superseded connection is refused",
		  test_late_job_on_superseded_connection },
		{ "the owner's handler crashes before the ACK",
		  test_owner_handler_crash_before_ack },
		{ "negotiation; protocol 1 unchanged", test_negotiation_and_protocol_1 },
		{ NULL, NULL },
	};
	return run_suite("receipts", cases);
}
