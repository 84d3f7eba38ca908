/*
 * test_broker.c - the broker protocol over real websockets against a real
 * daemon with several handlers: HELLO, the slot life (WANT, OFFER, JOB,
 * DONE, DECLINE, UNWANT), refusals that leave the connection working,
 * priority across clients, round robin within a class, offer expiry,
 * hand-over between handlers, a handler crash under load, the repair of
 * the robust mutex through the fault switch, and what a protocol-2 client
 * finds after its handler died in the section that cancelled its parked
 * want.
 */
#include "autoconfig.h"

#include <signal.h>
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
	CU_ASSERT(harness_finish(&D, 1) == 0);
}

static long long wg_field(const char *field)
{
	return harness_wg_field(&D, "wg", field);
}

/* ---- tests ------------------------------------------------------------ */

static void test_hello(void)
{
	start(2, 2, NULL, NULL);
	struct tclient *a = tc_connect(D.port, "a");
	CU_ASSERT_FATAL(a != NULL);
	const char *id = tc_str(a->hello, "instance_id");
	CU_ASSERT(id && strlen(id) == 32);
	CU_ASSERT_EQUAL(tc_int(a->hello, "clients"), 1);
	struct json_object *svcs, *wgs, *v;
	CU_ASSERT(json_object_object_get_ex(a->hello, "services", &svcs));
	CU_ASSERT(json_object_object_get_ex(svcs, "cat", &v) &&
		  strcmp(json_object_get_string(v), "wg") == 0);
	CU_ASSERT(json_object_object_get_ex(a->hello, "waitgroups", &wgs));
	CU_ASSERT_EQUAL(harness_json_int(a->hello, "waitgroups", "wg", "processes", NULL), 2);
	CU_ASSERT(json_object_object_get_ex(a->hello, "draining", &v) &&
		  !json_object_get_boolean(v));
	/* nothing changed: no second HELLO */
	struct wsc_msg m;
	CU_ASSERT_EQUAL(wsc_recv(a->ws, 400, &m), WSC_TIMEOUT);
	wsc_msg_free(&m);

	/* a second client: both see clients = 2, with the same instance id */
	struct tclient *b = tc_connect(D.port, "b");
	CU_ASSERT_FATAL(b != NULL);
	CU_ASSERT_STRING_EQUAL(tc_str(b->hello, "instance_id"), id);
	struct json_object *h = tc_expect(a, "HELLO", 3000);
	CU_ASSERT(h != NULL);
	CU_ASSERT_EQUAL(tc_int(h, "clients"), 2);
	if (h)
		json_object_put(h);
	/* a second connection of client b does not count twice */
	struct tclient *b2 = tc_connect(D.port, "b");
	CU_ASSERT_EQUAL(tc_int(b2->hello, "clients"), 2);
	tc_close(b2);
	tc_close(b);
	h = tc_expect(a, "HELLO", 3000);
	CU_ASSERT(h && tc_int(h, "clients") == 1);
	if (h)
		json_object_put(h);
	tc_close(a);
	stop();
}

static void test_job_round_trip(void)
{
	start(2, 2, NULL, NULL);
	struct tclient *a = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(a != NULL);
	const char *token = tc_want_offer(a, "j1", "cat", 0, 3000);
	CU_ASSERT_FATAL(token != NULL);
	CU_ASSERT(tc_send(a,
			  "{\"type\":\"JOB\",\"job_id\":\"j1\",\"token\":\"%s\","
			  "\"job\":{\"command\":\"echo\",\"args\":[\"hello\",\"world\"]}}",
			  token) == 0);
	struct json_object *done = tc_expect(a, "DONE", 5000), *r;
	CU_ASSERT_FATAL(done != NULL);
	CU_ASSERT_STRING_EQUAL(tc_str(done, "job_id"), "j1");
	CU_ASSERT(json_object_object_get_ex(done, "receipt", &r));
	CU_ASSERT_EQUAL(tc_int(r, "exit_code"), 0);
	CU_ASSERT_STRING_EQUAL(tc_str(r, "stdout"), "hello world\n");
	json_object_put(done);

	/* a failing command: exit code and the decisive stderr line */
	CU_ASSERT_FATAL(tc_start_job(a, "j2", "cat",
				     "{\"command\":\"cat\",\"args\":[\"/no/such/file\"]}") == 0);
	done = tc_expect(a, "DONE", 5000);
	CU_ASSERT_FATAL(done != NULL);
	json_object_object_get_ex(done, "receipt", &r);
	CU_ASSERT_EQUAL(tc_int(r, "exit_code"), 1);
	CU_ASSERT(tc_str(r, "stderr") && strstr(tc_str(r, "stderr"), "No such file") != NULL);
	json_object_put(done);

	/* the job id may be reused after DONE; slots are all free again */
	CU_ASSERT(tc_want_offer(a, "j1", "cat", 0, 3000) != NULL);
	tc_send(a, "{\"type\":\"UNWANT\",\"job_id\":\"j1\"}");
	CU_ASSERT_EQUAL(harness_wait_wg(&D, "wg", "offered", 0, 5000), 0);
	CU_ASSERT_EQUAL(wg_field("running"), 0);
	CU_ASSERT_EQUAL(wg_field("offered"), 0);
	tc_close(a);
	stop();
}

/* A field of an ERROR: want NULL (not checked), "" (absent) or its value. */
static void expect_field(struct json_object *e, const char *key, const char *want)
{
	const char *v = tc_str(e, key);

	if (want == NULL)
		return;
	if (want[0] == '\0' ? v != NULL : v == NULL || strcmp(v, want) != 0)
		fprintf(stderr, "%s: expected \"%s\" in %s\n", key, want,
			json_object_to_json_string(e));
	CU_ASSERT(want[0] == '\0' ? v == NULL : v != NULL && strcmp(v, want) == 0);
}

/* The next ERROR on c: its code, job_id, and what it says it refused (the
 * message type, the token of a JOB or DECLINE), each NULL when not checked
 * and "" when it must be absent. */
static void expect_refusal(struct tclient *c, const char *code, const char *job_id,
			   const char *refused, const char *token)
{
	struct json_object *e = tc_expect(c, "ERROR", 3000);
	CU_ASSERT(e != NULL);
	if (!e)
		return;
	if (strcmp(tc_str(e, "code"), code) != 0)
		fprintf(stderr, "expected %s, got %s\n", code, json_object_to_json_string(e));
	CU_ASSERT_STRING_EQUAL(tc_str(e, "code"), code);
	if (job_id)
		CU_ASSERT(tc_str(e, "job_id") && strcmp(tc_str(e, "job_id"), job_id) == 0);
	expect_field(e, "refused", refused);
	expect_field(e, "token", token);
	json_object_put(e);
}

static void expect_error(struct tclient *c, const char *code, const char *job_id)
{
	expect_refusal(c, code, job_id, NULL, NULL);
}

/* protocol.md section 3: a slot is held from the OFFER until the job's
 * DONE is sent, so a client never sees the OFFER of a slot before the
 * DONE of the job that held it. */
static void test_done_before_offer_of_its_slot(void)
{
	start(1, 1, NULL, NULL);
	struct tclient *c = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(c != NULL);
	for (int i = 0; i < 20; i++) {
		char a[16], b[16], token[64];
		snprintf(a, sizeof a, "a%d", i);
		snprintf(b, sizeof b, "b%d", i);
		const char *t = tc_want_offer(c, a, "cat", 0, 5000);
		CU_ASSERT_FATAL(t != NULL);
		snprintf(token, sizeof token, "%s", t);
		/* b waits for the only slot, which a's job holds */
		tc_send(c,
			"{\"type\":\"WANT\",\"job_id\":\"%s\",\"service\":\"cat\",\"priority\":0}",
			b);
		tc_send(c,
			"{\"type\":\"JOB\",\"job_id\":\"%s\",\"token\":\"%s\",\"job\":{\"command\":"
			"\"true\"}}",
			a, token);
		struct json_object *first = tc_expect(c, NULL, 5000),
				   *second = tc_expect(c, NULL, 5000);
		CU_ASSERT_FATAL(first != NULL && second != NULL);
		CU_ASSERT_STRING_EQUAL(tc_str(first, "type"), "DONE");
		CU_ASSERT_STRING_EQUAL(tc_str(first, "job_id"), a);
		CU_ASSERT_STRING_EQUAL(tc_str(second, "type"), "OFFER");
		struct json_object *offer = strcmp(tc_str(second, "type"), "OFFER") == 0 ? second
											 : first;
		tc_send(c, "{\"type\":\"DECLINE\",\"job_id\":\"%s\",\"token\":\"%s\"}", b,
			tc_str(offer, "token"));
		json_object_put(first);
		json_object_put(second);
	}
	tc_close(c);
	stop();
}

static void test_refusals_keep_connection(void)
{
	start(1, 1, NULL, NULL);
	struct tclient *a = tc_connect(D.port, NULL), *b = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(a && b);
	tc_send(a, "{not json");
	expect_refusal(a, "bad_json", NULL, "", "");
	tc_send(a, "[1,2]");
	expect_error(a, "bad_json", NULL);
	tc_send(a, "{\"type\":\"FROB\",\"job_id\":\"x\"}");
	expect_refusal(a, "unknown_type", "x", "", "");
	tc_send(a, "{\"type\":\"WANT\",\"job_id\":\"x\",\"service\":\"nope\"}");
	expect_refusal(a, "unknown_service", "x", "WANT", "");
	/* a NUL does not cut a name short (found by fuzz_messages) */
	tc_send(a, "{\"type\":\"WANT\",\"job_id\":\"x\",\"service\":\"cat\\u0000x\"}");
	expect_error(a, "unknown_service", "x");
	tc_send(a, "{\"type\":\"QUERY\\u0000x\",\"job_id\":\"x\"}");
	expect_error(a, "unknown_type", "x");
	tc_send(a, "{\"type\":\"WANT\",\"job_id\":7,\"service\":\"cat\"}");
	expect_error(a, "bad_message", NULL);
	tc_send(a,
		"{\"type\":\"WANT\",\"job_id\":\"x\",\"service\":\"cat\",\"priority\":\"high\"}");
	expect_error(a, "bad_message", "x");
	tc_send(a, "{\"type\":\"WANT\",\"job_id\":\"x\",\"service\":\"cat\",\"priority\":"
		   "99999999999}");
	expect_error(a, "bad_message", "x");
	tc_send(a, "{\"type\":\"UNWANT\",\"job_id\":\"never\"}");
	expect_refusal(a, "unknown_job", "never", "UNWANT", "");
	tc_send(a, "{\"type\":\"JOB\",\"job_id\":\"never\",\"token\":\"00000000000000A1\",\"job\":{"
		   "}}");
	expect_refusal(a, "unknown_job", "never", "JOB", "00000000000000a1");
	/* the token is named also when another field is wrong */
	tc_send(a,
		"{\"type\":\"JOB\",\"job_id\":\"never\",\"token\":\"00000000000000a2\",\"job\":7}");
	expect_refusal(a, "bad_message", "never", "JOB", "00000000000000a2");
	tc_send(a, "{\"type\":\"DECLINE\",\"job_id\":\"never\",\"token\":\"12\"}");
	expect_refusal(a, "bad_message", "never", "DECLINE", "");

	const char *token = tc_want_offer(a, "x", "cat", 0, 3000);
	CU_ASSERT_FATAL(token != NULL);
	char tok[32];
	snprintf(tok, sizeof tok, "%s", token);
	tc_send(a, "{\"type\":\"WANT\",\"job_id\":\"x\",\"service\":\"cat\"}");
	expect_refusal(a, "duplicate_job", "x", "WANT", "");
	tc_send(a,
		"{\"type\":\"JOB\",\"job_id\":\"x\",\"token\":\"%016x\",\"job\":{\"command\":"
		"\"true\"}}",
		12345);
	expect_refusal(a, "bad_token", "x", "JOB", "0000000000003039");
	/* b cannot decline a's offer: job ids are scoped to their client */
	tc_send(b, "{\"type\":\"DECLINE\",\"job_id\":\"x\",\"token\":\"%s\"}", tok);
	expect_refusal(b, "unknown_job", "x", "DECLINE", tok);
	/* an unconfigured command withdraws the offer */
	tc_send(a,
		"{\"type\":\"JOB\",\"job_id\":\"x\",\"token\":\"%s\",\"job\":{\"command\":\"rm\"}}",
		tok);
	expect_refusal(a, "unknown_command", "x", "JOB", tok);
	/* ... so the slot is free again and b gets it at once */
	CU_ASSERT(tc_want_offer(b, "y", "cat", 0, 3000) != NULL);
	/* and a still works */
	tc_send(a, "{\"type\":\"QUERY\",\"job_id\":\"x\"}");
	expect_refusal(a, "unknown_job", "x", "QUERY", "");
	tc_close(a);
	tc_close(b);
	stop();
}

static void test_priority_across_clients(void)
{
	start(2, 1, NULL, NULL);
	/* a and b on different handlers: priority is global across them */
	struct tclient *a = tc_connect_on_handler(&D, 2, 0, "a"),
		       *b = tc_connect_on_handler(&D, 2, 1, "b");
	CU_ASSERT_FATAL(a && b);
	/* a holds the only slot with a running job */
	CU_ASSERT_FATAL(tc_start_job(a, "hold", "sleep",
				     "{\"command\":\"sleep\",\"args\":[\"0.5\"]}") == 0);
	for (int i = 0; i < 5; i++)
		tc_send(a,
			"{\"type\":\"WANT\",\"job_id\":\"bg%d\",\"service\":\"cat\",\"priority\":-"
			"2}",
			i);
	CU_ASSERT_EQUAL(harness_wait_wg(&D, "wg", "waiting", 5, 5000), 0);
	tc_send(b, "{\"type\":\"WANT\",\"job_id\":\"urgent\",\"service\":\"cat\",\"priority\":2}");
	/* QUERY: b's want is first in line, a's background wants behind it */
	tc_send(b, "{\"type\":\"QUERY\",\"job_id\":\"urgent\"}");
	struct json_object *p = tc_expect(b, "POSITION", 3000);
	CU_ASSERT(p && strcmp(tc_str(p, "state"), "waiting") == 0 && tc_int(p, "ahead") == 0 &&
		  tc_int(p, "running") == 1 && tc_int(p, "capacity") == 1);
	if (p)
		json_object_put(p);
	tc_send(a, "{\"type\":\"QUERY\",\"job_id\":\"bg4\"}");
	p = tc_expect(a, "POSITION", 3000);
	CU_ASSERT(p && tc_int(p, "ahead") == 5);
	if (p)
		json_object_put(p);

	struct json_object *done = tc_expect(a, "DONE", 5000);
	CU_ASSERT(done != NULL);
	if (done)
		json_object_put(done);
	struct json_object *o = tc_expect(b, "OFFER", 3000);
	CU_ASSERT(o && strcmp(tc_str(o, "job_id"), "urgent") == 0);
	if (o)
		json_object_put(o);
	CU_ASSERT(tc_quiet(a, 200)); /* a's background wants wait */
	tc_close(a);
	tc_close(b);
	stop();
}

static void test_round_robin_within_class(void)
{
	start(2, 1, NULL, NULL);
	struct tclient *c[3];
	const char *names[3] = { "ra", "rb", "rc" };
	/* spread over both handlers: the round robin is book-wide */
	for (int i = 0; i < 3; i++) {
		c[i] = tc_connect_on_handler(&D, 2, i % 2, names[i]);
		CU_ASSERT_FATAL(c[i] != NULL);
	}
	/* ra takes the slot first; then everyone parks many wants */
	const char *t = tc_want_offer(c[0], "first", "cat", 0, 3000);
	CU_ASSERT_FATAL(t != NULL);
	char tok[32];
	snprintf(tok, sizeof tok, "%s", t);
	for (int i = 0; i < 3; i++) {
		for (int k = 0; k < 20; k++)
			tc_send(c[i], "{\"type\":\"WANT\",\"job_id\":\"w%d\",\"service\":\"cat\"}",
				k);
		/* a round trip, so the next client's wants arrive after these */
		tc_send(c[i], "{\"type\":\"QUERY\",\"job_id\":\"w19\"}");
		struct json_object *p = tc_expect(c[i], "POSITION", 3000);
		CU_ASSERT_FATAL(p != NULL);
		json_object_put(p);
	}
	tc_send(c[0], "{\"type\":\"DECLINE\",\"job_id\":\"first\",\"token\":\"%s\"}", tok);
	/* Each offer is declined at once; the slot must go round: rb, rc, ra,
	 * rb, rc, ra ... (ra was served last). */
	int expect = 1, served[3] = { 0, 0, 0 };
	for (int n = 0; n < 45; n++) {
		struct json_object *o = tc_expect(c[expect], "OFFER", 3000);
		CU_ASSERT_FATAL(o != NULL);
		served[expect]++;
		tc_send(c[expect], "{\"type\":\"DECLINE\",\"job_id\":\"%s\",\"token\":\"%s\"}",
			tc_str(o, "job_id"), tc_str(o, "token"));
		/* FIFO within the connection */
		char want_id[16];
		snprintf(want_id, sizeof want_id, "w%d", served[expect] - 1);
		CU_ASSERT_STRING_EQUAL(tc_str(o, "job_id"), want_id);
		json_object_put(o);
		expect = (expect + 1) % 3;
	}
	CU_ASSERT(served[0] == 15 && served[1] == 15 && served[2] == 15);
	for (int i = 0; i < 3; i++)
		tc_close(c[i]);
	stop();
}

/* The messages of one read are applied together (broker.c) but in their
 * order, and the grants they cause follow the round robin as one at a
 * time would: each holder DECLINEs and parks the same job id again in one
 * write (reversed, that WANT would be a duplicate_job), on connections
 * spread over two handlers (grants cross handlers as mail). */
static void test_one_read_in_order(void)
{
	start(2, 1, NULL, NULL);
	struct tclient *c[3];
	const char *names[3] = { "oa", "ob", "oc" };
	char msg[2][160], id[3][8];
	const char *two[2] = { msg[0], msg[1] };
	for (int i = 0; i < 3; i++) {
		c[i] = tc_connect_on_handler(&D, 2, i % 2, names[i]);
		CU_ASSERT_FATAL(c[i] != NULL);
		snprintf(id[i], sizeof id[i], "j%d", i);
	}
	const char *t = tc_want_offer(c[0], id[0], "cat", 0, 3000);
	CU_ASSERT_FATAL(t != NULL);
	char tok[32];
	snprintf(tok, sizeof tok, "%s", t);
	for (int i = 1; i < 3; i++) {
		tc_send(c[i], "{\"type\":\"WANT\",\"job_id\":\"%s\",\"service\":\"cat\"}", id[i]);
		tc_send(c[i], "{\"type\":\"QUERY\",\"job_id\":\"%s\"}", id[i]);
		struct json_object *p = tc_expect(c[i], "POSITION", 3000);
		CU_ASSERT_FATAL(p != NULL);
		json_object_put(p);
	}
	int holder = 0;
	for (int n = 0; n < 12; n++) {
		snprintf(msg[0], sizeof msg[0],
			 "{\"type\":\"DECLINE\",\"job_id\":\"%s\",\"token\":\"%s\"}", id[holder],
			 tok);
		snprintf(msg[1], sizeof msg[1],
			 "{\"type\":\"WANT\",\"job_id\":\"%s\",\"service\":\"cat\"}", id[holder]);
		CU_ASSERT_FATAL(tc_send_together(c[holder], two, 2) == 0);
		holder = (holder + 1) % 3; /* the one served least recently */
		struct json_object *o = tc_expect(c[holder], "OFFER", 3000);
		CU_ASSERT_FATAL(o != NULL);
		CU_ASSERT_STRING_EQUAL(tc_str(o, "job_id"), id[holder]);
		snprintf(tok, sizeof tok, "%s", tc_str(o, "token"));
		json_object_put(o);
	}
	for (int i = 0; i < 3; i++)
		CU_ASSERT(tc_quiet(c[i], i == 0 ? 300 : 0));
	/* the answers come in the order of the messages, decode errors among them */
	const char *three[3] = { "{\"type\":\"WANT\",\"job_id\":\"dup\",\"service\":\"nope\"}",
				 "not json", "{\"type\":\"UNWANT\",\"job_id\":\"none\"}" };
	CU_ASSERT_FATAL(tc_send_together(c[1], three, 3) == 0);
	const char *codes[3] = { "unknown_service", "bad_json", "unknown_job" };
	for (int i = 0; i < 3; i++) {
		struct json_object *e = tc_expect(c[1], "ERROR", 3000);
		CU_ASSERT_FATAL(e != NULL);
		CU_ASSERT_STRING_EQUAL(tc_str(e, "code"), codes[i]);
		json_object_put(e);
	}
	/* a WANT and its duplicate in one read: the second is refused */
	snprintf(msg[0], sizeof msg[0], "{\"type\":\"WANT\",\"job_id\":\"d\",\"service\":\"cat\"}");
	snprintf(msg[1], sizeof msg[1], "{\"type\":\"WANT\",\"job_id\":\"d\",\"service\":\"cat\"}");
	CU_ASSERT_FATAL(tc_send_together(c[2], two, 2) == 0);
	struct json_object *e = tc_expect(c[2], "ERROR", 3000);
	CU_ASSERT(e && strcmp(tc_str(e, "code"), "duplicate_job") == 0);
	if (e)
		json_object_put(e);
	for (int i = 0; i < 3; i++)
		tc_close(c[i]);
	stop();
}

static void test_offer_expiry(void)
{
	start(1, 1, "offerTimeoutSec: 1\n", NULL);
	struct tclient *a = tc_connect(D.port, NULL), *b = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(a && b);
	CU_ASSERT_FATAL(tc_want_offer(a, "slow", "cat", 0, 3000) != NULL);
	tc_send(b, "{\"type\":\"WANT\",\"job_id\":\"next\",\"service\":\"cat\"}");
	long long t0 = harness_now_ms();
	expect_refusal(a, "offer_expired", "slow", "", ""); /* it answers no message */
	long long waited = harness_now_ms() - t0;
	CU_ASSERT(waited >= 800 && waited < 2500);
	struct json_object *o = tc_expect(b, "OFFER", 3000);
	CU_ASSERT(o && strcmp(tc_str(o, "job_id"), "next") == 0);
	if (o)
		json_object_put(o);
	tc_close(a);
	tc_close(b);
	stop();
}

static int cmp_ll(const void *x, const void *y)
{
	long long a = *(const long long *)x, b = *(const long long *)y;
	return a < b ? -1 : a > b;
}

static void test_handover_across_handlers(void)
{
	enum {
		ROUNDS = 400
	};
	static long long us[ROUNDS];
	char held[16], parked[16], tok[32];

	start(2, 1, NULL, NULL);
	struct tclient *holder = tc_connect_on_handler(&D, 2, 0, "ha");
	struct tclient *waiter = tc_connect_on_handler(&D, 2, 1, "hb");
	CU_ASSERT_FATAL(holder && waiter);
	const char *t = tc_want_offer(holder, "r0", "cat", 0, 3000);
	CU_ASSERT_FATAL(t != NULL);
	snprintf(tok, sizeof tok, "%s", t);
	snprintf(held, sizeof held, "r0");
	snprintf(parked, sizeof parked, "r1");
	tc_send(waiter, "{\"type\":\"WANT\",\"job_id\":\"r1\",\"service\":\"cat\"}");
	CU_ASSERT(tc_quiet(waiter, 100));

	/* The slot goes back and forth: each DECLINE on one handler must reach
	 * the want parked on the other handler as an OFFER, through the mailbox
	 * and the eventfd. */
	for (int i = 0; i < ROUNDS; i++) {
		long long t0 = harness_now_us();
		tc_send(holder, "{\"type\":\"DECLINE\",\"job_id\":\"%s\",\"token\":\"%s\"}", held,
			tok);
		struct json_object *o = tc_expect(waiter, "OFFER", 3000);
		us[i] = harness_now_us() - t0;
		CU_ASSERT_FATAL(o != NULL);
		CU_ASSERT_STRING_EQUAL(tc_str(o, "job_id"), parked);
		snprintf(tok, sizeof tok, "%s", tc_str(o, "token"));
		json_object_put(o);
		/* the old holder parks its next want; a QUERY round trip makes
		 * sure it is parked before the next DECLINE */
		snprintf(held, sizeof held, "%s", parked);
		snprintf(parked, sizeof parked, "r%d", i + 2);
		tc_send(holder, "{\"type\":\"WANT\",\"job_id\":\"%s\",\"service\":\"cat\"}",
			parked);
		tc_send(holder, "{\"type\":\"QUERY\",\"job_id\":\"%s\"}", parked);
		struct json_object *p = tc_expect(holder, "POSITION", 3000);
		CU_ASSERT_FATAL(p != NULL);
		CU_ASSERT_STRING_EQUAL(tc_str(p, "state"), "waiting");
		json_object_put(p);
		struct tclient *swap = holder;
		holder = waiter;
		waiter = swap;
	}
	qsort(us, ROUNDS, sizeof us[0], cmp_ll);
	fprintf(stderr,
		"  cross-handler hand-over (DECLINE sent -> OFFER received, %d rounds): "
		"median %lld us, p99 %lld us, max %lld us\n",
		ROUNDS, us[ROUNDS / 2], us[ROUNDS - 1 - ROUNDS / 100], us[ROUNDS - 1]);
	tc_close(holder);
	tc_close(waiter);
	stop();
}

static void test_handler_crash_under_load(void)
{
	start(2, 2, NULL, NULL);
	struct tclient *victim = tc_connect_on_handler(&D, 2, 0, "victim");
	struct tclient *survivor = tc_connect_on_handler(&D, 2, 1, "survivor");
	CU_ASSERT_FATAL(victim && survivor);
	/* the victim holds both slots and parks more wants */
	CU_ASSERT_FATAL(tc_want_offer(victim, "v0", "cat", 0, 3000) != NULL);
	const char *t = tc_want_offer(victim, "v1", "sleep", 0, 3000);
	CU_ASSERT_FATAL(t != NULL);
	/* a duration unique to this run, so pgrep finds only our job */
	char dur[32], pattern[96];
	snprintf(dur, sizeof dur, "30.%d", (int)getpid());
	snprintf(pattern, sizeof pattern, "pgrep -f '^sleep %s$' > /dev/null", dur);
	tc_send(victim,
		"{\"type\":\"JOB\",\"job_id\":\"v1\",\"token\":\"%s\",\"job\":{\"command\":"
		"\"sleep\",\"args\":[\"%s\"]}}",
		t, dur);
	CU_ASSERT(harness_wait_pgrep(pattern, 1, 5000) == 0); /* it runs */
	for (int i = 2; i < 50; i++)
		tc_send(victim, "{\"type\":\"WANT\",\"job_id\":\"v%d\",\"service\":\"cat\"}", i);
	for (int i = 0; i < 10; i++)
		tc_send(survivor,
			"{\"type\":\"WANT\",\"job_id\":\"s%d\",\"service\":\"cat\",\"priority\":-"
			"2}",
			i);
	CU_ASSERT_EQUAL(harness_wait_wg(&D, "wg", "waiting", 58, 5000), 0);

	int pids[2];
	CU_ASSERT_EQUAL_FATAL(harness_handler_pids(&D, pids, 2), 2);
	kill(pids[0], SIGKILL);

	/* the survivor gets both freed slots (its own low-priority wants) */
	char held_id[2][16], held_tok[2][32];
	for (int i = 0; i < 2; i++) {
		struct json_object *o = tc_expect(survivor, "OFFER", 5000);
		CU_ASSERT_FATAL(o != NULL);
		CU_ASSERT(strncmp(tc_str(o, "job_id"), "s", 1) == 0);
		snprintf(held_id[i], sizeof held_id[i], "%s", tc_str(o, "job_id"));
		snprintf(held_tok[i], sizeof held_tok[i], "%s", tc_str(o, "token"));
		json_object_put(o);
	}
	/* the victim's connection is gone (after whatever was in flight) */
	struct wsc_msg m;
	int r;
	while ((r = wsc_recv(victim->ws, 3000, &m)) == WSC_TEXT)
		wsc_msg_free(&m);
	CU_ASSERT(r == WSC_EOF || r == WSC_ERROR || r == WSC_CLOSE);
	wsc_msg_free(&m);
	/* its wants are gone too, and the sleep job's process group was killed */
	CU_ASSERT_EQUAL(harness_wait_wg(&D, "wg", "waiting", 8, 5000), 0);
	CU_ASSERT_EQUAL(wg_field("offered"), 2);
	CU_ASSERT_EQUAL(wg_field("running"), 0);
	struct json_object *st = harness_status(&D), *v;
	CU_ASSERT(st && json_object_object_get_ex(st, "book_consistent", &v) &&
		  json_object_get_boolean(v));
	CU_ASSERT_EQUAL(harness_json_int(st, "clients", NULL), 1);
	if (st)
		json_object_put(st);
	/* pgrep exits 1 for "no such process"; 127 (not installed) must fail */
	CU_ASSERT(harness_wait_pgrep(pattern, 0, 5000) == 0);
	/* the survivor still works, and saw a HELLO with one client */
	CU_ASSERT(tc_quiet(survivor, 300));
	CU_ASSERT(survivor->hello && tc_int(survivor->hello, "clients") == 1);
	tc_send(survivor,
		"{\"type\":\"WANT\",\"job_id\":\"after\",\"service\":\"cat\",\"priority\":5}");
	tc_send(survivor, "{\"type\":\"DECLINE\",\"job_id\":\"%s\",\"token\":\"%s\"}", held_id[0],
		held_tok[0]);
	struct json_object *o = tc_expect(survivor, "OFFER", 3000);
	CU_ASSERT(o && strcmp(tc_str(o, "job_id"), "after") == 0);
	if (o)
		json_object_put(o);
	tc_close(victim);
	tc_close(survivor);
	stop();
}

/* The connection ends (its handler died): reads until then, and closes it. */
static void expect_dropped(struct tclient *a)
{
	struct wsc_msg m;
	int r;
	while ((r = wsc_recv(a->ws, 5000, &m)) == WSC_TEXT)
		wsc_msg_free(&m);
	CU_ASSERT(r == WSC_EOF || r == WSC_ERROR);
	wsc_msg_free(&m);
	tc_close(a);
}

static void test_fault_switch_repair(void)
{
	start(1, 1, NULL, "EXECSERVER_FAULT=book:want.mid");
	int pids[1];
	CU_ASSERT_EQUAL_FATAL(harness_handler_pids(&D, pids, 1), 1);
	struct tclient *a = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(a != NULL);
	/* the handler dies inside the book's critical section */
	tc_send(a, "{\"type\":\"WANT\",\"job_id\":\"boom\",\"service\":\"cat\"}");
	expect_dropped(a);
	/* the replacement (without the fault) works on a repaired book */
	struct tclient *b = NULL;
	for (int i = 0; i < 50 && !b; i++) {
		harness_sleep_ms(100);
		b = tc_connect(D.port, NULL);
	}
	CU_ASSERT_FATAL(b != NULL);
	CU_ASSERT(tc_want_offer(b, "ok", "cat", 0, 3000) != NULL);
	struct json_object *st = harness_status(&D), *v;
	CU_ASSERT(harness_json_int(st, "book_repairs", NULL) >= 1);
	CU_ASSERT(json_object_object_get_ex(st, "book_consistent", &v) &&
		  json_object_get_boolean(v));
	CU_ASSERT(harness_log_contains(&D, "fault injection: dying at want.mid"));
	CU_ASSERT(harness_log_contains(&D, "repaired"));
	if (st)
		json_object_put(st);
	tc_close(b);
	stop();
}

/* A handler that dies inside the section of a read, in its second
 * operation (the WANT after a DECLINE): the book is repaired, the DECLINE's
 * grant reaches the connection of the other handler, and the replacement
 * works. */
static void test_fault_inside_read_section(void)
{
	/* want.mid's second pass in each handler: a's WANT of the pair */
	start(2, 1, NULL, "EXECSERVER_FAULT=book:want.mid:2");
	struct tclient *a = tc_connect_on_handler(&D, 2, 0, "fa");
	struct tclient *b = tc_connect_on_handler(&D, 2, 1, "fb");
	CU_ASSERT_FATAL(a && b);
	const char *t = tc_want_offer(a, "a0", "cat", 0, 3000);
	CU_ASSERT_FATAL(t != NULL);
	char m0[160];
	snprintf(m0, sizeof m0, "{\"type\":\"DECLINE\",\"job_id\":\"a0\",\"token\":\"%s\"}", t);
	tc_send(b, "{\"type\":\"WANT\",\"job_id\":\"b0\",\"service\":\"cat\"}");
	tc_send(b, "{\"type\":\"QUERY\",\"job_id\":\"b0\"}");
	struct json_object *p = tc_expect(b, "POSITION", 3000);
	CU_ASSERT_FATAL(p != NULL);
	json_object_put(p);
	const char *two[2] = { m0, "{\"type\":\"WANT\",\"job_id\":\"a1\",\"service\":\"cat\"}" };
	CU_ASSERT_FATAL(tc_send_together(a, two, 2) == 0);
	expect_dropped(a);
	struct json_object *o = tc_expect(b, "OFFER", 5000);
	CU_ASSERT(o && strcmp(tc_str(o, "job_id"), "b0") == 0);
	if (o)
		json_object_put(o);
	struct json_object *st = harness_status(&D), *v;
	CU_ASSERT(harness_json_int(st, "book_repairs", NULL) >= 1);
	CU_ASSERT(json_object_object_get_ex(st, "book_consistent", &v) &&
		  json_object_get_boolean(v));
	CU_ASSERT(harness_log_contains(&D, "fault injection: dying at want.mid"));
	if (st)
		json_object_put(st);
	struct tclient *c = NULL;
	for (int i = 0; i < 50 && !c; i++) {
		harness_sleep_ms(100);
		c = tc_connect_on_handler(&D, 2, 0, "fc");
	}
	CU_ASSERT_FATAL(c != NULL);
	tc_send(c, "{\"type\":\"WANT\",\"job_id\":\"c0\",\"service\":\"cat\"}");
	CU_ASSERT(tc_quiet(c, 200)); /* parked: b holds the one slot */
	tc_close(b);
	o = tc_expect(c, "OFFER", 5000);
	CU_ASSERT(o != NULL);
	if (o)
		json_object_put(o);
	tc_close(c);
	stop();
}

/* A protocol-2 client's CANCEL of a parked want is applied in a section
 * whose later WANT kills the handler, so its DONE {cancelled} never goes
 * out.  That DONE answers the CANCEL; it is no kept receipt (protocol.md
 * CANCEL, section 6): nothing ran, and the want would have gone with its
 * connection anyway.  The client that comes back finds exactly what a
 * parked want of a crashed handler leaves: no DONE for it, QUERY
 * unknown_job, and the id free for a new WANT, while the receipt of its
 * accepted job (lost with its runner) comes back as exec_lost. */
static void test_cancelled_want_in_dying_section(void)
{
	/* want.mid's third pass in handler 0: the WANT after the CANCEL */
	start(2, 2, "resumeGraceSec: 10\n", "EXECSERVER_FAULT=book:want.mid:3");
	struct tclient *h = tc_connect_on_handler(&D, 2, 1, "held");
	struct tclient *a = tc_connect_on_handler(&D, 2, 0, "pk&protocol=2");
	CU_ASSERT_FATAL(h && a);
	CU_ASSERT_FATAL(
		tc_start_job(a, "r", "sleep", "{\"command\":\"sleep\",\"args\":[\"30\"]}") == 0);
	CU_ASSERT_FATAL(tc_want_offer(h, "h0", "cat", 0, 3000) != NULL);
	tc_send(a, "{\"type\":\"WANT\",\"job_id\":\"x\",\"service\":\"cat\"}");
	tc_send(a, "{\"type\":\"QUERY\",\"job_id\":\"x\"}");
	struct json_object *p = tc_expect(a, "POSITION", 3000);
	CU_ASSERT_FATAL(p != NULL);
	CU_ASSERT_STRING_EQUAL(tc_str(p, "state"), "waiting");
	json_object_put(p);
	const char *two[2] = { "{\"type\":\"CANCEL\",\"job_id\":\"x\"}",
			       "{\"type\":\"WANT\",\"job_id\":\"y\",\"service\":\"cat\"}" };
	CU_ASSERT_FATAL(tc_send_together(a, two, 2) == 0);
	expect_dropped(a);
	CU_ASSERT(harness_log_contains(&D, "fault injection: dying at want.mid"));

	struct tclient *b = NULL;
	for (int i = 0; i < 50 && !b; i++) {
		harness_sleep_ms(100);
		b = tc_connect_query(D.port, "client=pk&protocol=2", "pk");
	}
	CU_ASSERT_FATAL(b != NULL);
	struct json_object *d = tc_expect(b, "DONE", 5000);
	CU_ASSERT_FATAL(d != NULL);
	CU_ASSERT_STRING_EQUAL(tc_str(d, "job_id"), "r");
	struct json_object *err = NULL;
	CU_ASSERT(json_object_object_get_ex(tc_receipt(d), "error", &err) &&
		  strcmp(tc_str(err, "code"), "exec_lost") == 0);
	json_object_put(d);
	tc_send(b, "{\"type\":\"ACK\",\"job_id\":\"r\"}");
	tc_send(b, "{\"type\":\"QUERY\",\"job_id\":\"x\"}");
	struct json_object *e = tc_expect(b, NULL, 3000);
	CU_ASSERT(e && strcmp(tc_str(e, "type"), "ERROR") == 0 &&
		  strcmp(tc_str(e, "code"), "unknown_job") == 0 &&
		  strcmp(tc_str(e, "job_id"), "x") == 0);
	if (e)
		json_object_put(e);
	/* the id is free: placed again, it gets the slot r held */
	const char *t = tc_want_offer(b, "x", "cat", 0, 3000);
	CU_ASSERT(t != NULL);
	CU_ASSERT(tc_quiet(b, 300)); /* and no DONE of x ever came */
	tc_close(b);
	tc_close(h);
	stop();
}

static void test_drain(void)
{
	start(1, 2, "drainTimeoutSec: 2\n", NULL);
	struct tclient *a = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(a != NULL);
	CU_ASSERT_FATAL(
		tc_start_job(a, "short", "sleep", "{\"command\":\"sleep\",\"args\":[\"1\"]}") == 0);
	CU_ASSERT_FATAL(
		tc_start_job(a, "long", "sleep", "{\"command\":\"sleep\",\"args\":[\"30\"]}") == 0);
	CU_ASSERT_EQUAL(harness_wait_wg(&D, "wg", "running", 2, 5000), 0);
	long long t0 = harness_now_ms();
	kill(D.pid, SIGTERM);

	/* the client hears it: draining, no capacity */
	struct json_object *h = tc_expect(a, "HELLO", 2000), *v;
	CU_ASSERT(h && json_object_object_get_ex(h, "draining", &v) && json_object_get_boolean(v));
	CU_ASSERT(h && harness_json_int(h, "waitgroups", "wg", "processes", NULL) == 0);
	if (h)
		json_object_put(h);
	/* newcomers get 503, /status still answers */
	int status = 0;
	struct wsc *late = wsc_connect("127.0.0.1", D.port, "/broker", NULL, 2000, &status);
	CU_ASSERT(late == NULL && status == 503);
	if (late)
		wsc_free(late);
	struct json_object *st = harness_status(&D);
	CU_ASSERT(st && json_object_object_get_ex(st, "draining", &v) &&
		  json_object_get_boolean(v));
	if (st)
		json_object_put(st);
	tc_send(a, "{\"type\":\"WANT\",\"job_id\":\"more\",\"service\":\"cat\"}");
	struct json_object *e = tc_expect(a, "ERROR", 2000);
	CU_ASSERT(e && strcmp(tc_str(e, "code"), "draining") == 0);
	if (e)
		json_object_put(e);

	/* the short job finishes; the long one is stopped, retryable */
	int got_short = 0, got_long = 0;
	for (int i = 0; i < 2; i++) {
		struct json_object *d = tc_expect(a, "DONE", 5000), *r, *err;
		CU_ASSERT_FATAL(d != NULL);
		json_object_object_get_ex(d, "receipt", &r);
		if (strcmp(tc_str(d, "job_id"), "short") == 0) {
			got_short = tc_int(r, "exit_code") == 0;
		} else {
			got_long = json_object_object_get_ex(r, "error", &err) &&
				   strcmp(tc_str(err, "code"), "exec_stopped") == 0 &&
				   json_object_object_get_ex(err, "retryable", &v) &&
				   json_object_get_boolean(v);
		}
		json_object_put(d);
	}
	CU_ASSERT(got_short && got_long);
	/* then the connection closes with 1001 and the daemon exits 0 */
	struct wsc_msg m;
	int r;
	while ((r = wsc_recv(a->ws, 3000, &m)) == WSC_TEXT)
		wsc_msg_free(&m);
	CU_ASSERT(r == WSC_CLOSE && m.close_code == 1001);
	wsc_msg_free(&m);
	int es;
	CU_ASSERT(waitpid(D.pid, &es, 0) == D.pid && WIFEXITED(es) && WEXITSTATUS(es) == 0);
	D.pid = 0;
	long long took = harness_now_ms() - t0;
	CU_ASSERT(took >= 1800 && took < 6000);
	tc_close(a);
	harness_cleanup(&D);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "HELLO and client count", test_hello },
		{ "WANT OFFER JOB DONE", test_job_round_trip },
		{ "DONE before the OFFER of its slot", test_done_before_offer_of_its_slot },
		{ "refusals keep the connection", test_refusals_keep_connection },
		{ "priority across clients", test_priority_across_clients },
		{ "round robin within a class", test_round_robin_within_class },
		{ "one read: applied together, in order", test_one_read_in_order },
		{ "offer expiry", test_offer_expiry },
		{ "hand-over across handlers", test_handover_across_handlers },
		{ "handler crash under load", test_handler_crash_under_load },
		{ "fault switch: robust mutex repair", test_fault_switch_repair },
		{ "fault inside a read's section", test_fault_inside_read_section },
		{ "cancelled want in a dying section", test_cancelled_want_in_dying_section },
		{ "drain on SIGTERM", test_drain },
		{ NULL, NULL },
	};
	return run_suite("broker", cases);
}
