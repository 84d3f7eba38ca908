/*
 * test_legacy.c - the legacy token transport (docs/protocol.md section 9)
 * against a real daemon: GET /token reserves a slot, never one a parked
 * broker want waits for (also when a slot frees: it goes to the want;
 * with auto-balance, parked wants that may not take the free slot block
 * only their own service's token, not a light one's); an
 * unused token expires and its slot goes to a broker want parked after
 * it; a token issued by one handler is redeemed on another (the book is
 * shared); single use; body mode streams a large stdin through `cat` and
 * reports the outcome in header or trailer fields; bad requests get their
 * documented answers and do not use up the token; legacyToken: off hides
 * the endpoints.  HTTP is spoken on raw sockets (tests/lib/httpc.c).
 */
#include "autoconfig.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "harness.h"
#include "httpc.h"
#include "proto.h"
#include "suite.h"
#include "wsclient.h"

static struct es_daemon D;

static void start(int handlers, int slots, const char *extra)
{
	char body[4096];
	snprintf(body, sizeof body,
		 "%s%s"
		 "  sh:\n"
		 "    waitgroup: wg\n"
		 "    commands:\n"
		 "      sh: {prog: sh}\n",
		 extra ? extra : "", harness_default_body(slots));
	CU_ASSERT_FATAL(harness_start(&D, handlers, body, NULL) == 0);
}

static void stop(void)
{
	CU_ASSERT(harness_finish(&D, 1) == 0);
}

static long long wg_field(const char *field)
{
	return harness_wg_field(&D, "wg", field);
}

/* GET /token/service: the status; the token into tok (33 bytes) on 200. */
static int get_token(const char *service, char *tok)
{
	char target[128];
	struct httpc_resp r;
	snprintf(target, sizeof target, "/token/%s", service);
	if (httpc_request(D.port, "GET", target, NULL, NULL, 0, 0, 5000, &r) != 0)
		return -1;
	int status = r.status;
	if (status == 200 && tok) {
		struct json_object *o = json_tokener_parse(r.body);
		const char *t = tc_str(o, "token");
		snprintf(tok, 33, "%s", t ? t : "");
		CU_ASSERT(t && strlen(t) == 32);
		json_object_put(o);
	}
	httpc_free(&r);
	return status;
}

/* PUT /job/service?token=tok&job=<job> with body (NULL: none). */
static int put_job(const char *service, const char *tok, const char *job, const char *headers,
		   const void *body, size_t len, size_t chunk, struct httpc_resp *r)
{
	char target[4096];
	int n = snprintf(target, sizeof target, "/job/%s?", service);
	if (tok)
		n += snprintf(target + n, sizeof target - (size_t)n, "token=%s&", tok);
	if (job)
		snprintf(target + n, sizeof target - (size_t)n, "job=%s", httpc_qs(job));
	return httpc_request(D.port, "PUT", target, headers, body, len, chunk, 30000, r);
}

static int body_is(const struct httpc_resp *r, const char *text)
{
	return r->body && r->body_len == strlen(text) && memcmp(r->body, text, r->body_len) == 0;
}

/* The receipt of an answer (header field, else trailer field), parsed. */
static struct json_object *receipt_of(const struct httpc_resp *r)
{
	char v[4096];
	const char *s = httpc_field(r->head, "X-Execserver-Receipt", v, sizeof v);
	if (!s)
		s = httpc_field(r->trailers, "X-Execserver-Receipt", v, sizeof v);
	return s ? json_tokener_parse(s) : NULL;
}

/* ---- tests ------------------------------------------------------------ */

static void test_token_answers(void)
{
	char tok[33], v[64];
	struct httpc_resp r;
	start(2, 1, NULL);
	CU_ASSERT_EQUAL(httpc_request(D.port, "GET", "/token/cat", NULL, NULL, 0, 0, 5000, &r), 0);
	CU_ASSERT_EQUAL(r.status, 200);
	CU_ASSERT(httpc_field(r.head, "Content-Type", v, sizeof v) &&
		  strcmp(v, "application/json") == 0);
	struct json_object *o = json_tokener_parse(r.body);
	CU_ASSERT(tc_str(o, "token") && strlen(tc_str(o, "token")) == 32);
	CU_ASSERT(tc_str(o, "service") && strcmp(tc_str(o, "service"), "cat") == 0);
	CU_ASSERT_EQUAL(tc_int(o, "valid_ms"), 10000); /* the default */
	json_object_put(o);
	httpc_free(&r);
	CU_ASSERT_EQUAL(wg_field("tokens"), 1);
	/* the one slot is held: busy, for every service of the waitgroup */
	CU_ASSERT_EQUAL(httpc_request(D.port, "GET", "/token/sleep", NULL, NULL, 0, 0, 5000, &r),
			0);
	CU_ASSERT_EQUAL(r.status, 503);
	CU_ASSERT(body_is(&r, "All workers busy\n"));
	CU_ASSERT(httpc_field(r.head, "Retry-After", v, sizeof v) && strcmp(v, "1") == 0);
	httpc_free(&r);
	CU_ASSERT_EQUAL(get_token("nope", tok), 404);
	CU_ASSERT_EQUAL(httpc_request(D.port, "POST", "/token/cat", NULL, "", 0, 0, 5000, &r), 0);
	CU_ASSERT_EQUAL(r.status, 405);
	CU_ASSERT(httpc_field(r.head, "Allow", v, sizeof v) && strcmp(v, "GET") == 0);
	httpc_free(&r);
	/* a broker WANT finds no slot either: the token holds it */
	struct tclient *c = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(c != NULL);
	tc_send(c, "{\"type\":\"WANT\",\"job_id\":\"w\",\"service\":\"cat\"}");
	CU_ASSERT(tc_quiet(c, 300));
	CU_ASSERT_EQUAL(wg_field("waiting"), 1);
	tc_close(c);
	stop();
}

/* A parked broker want blocks GET /token, also when a slot frees: the
 * slot goes to the want. */
static void test_parked_want_blocks_tokens(void)
{
	start(2, 1, NULL);
	struct tclient *a = tc_connect(D.port, "a"), *b = tc_connect(D.port, "b");
	CU_ASSERT_FATAL(a && b);
	const char *t = tc_want_offer(a, "run", "sleep", 0, 5000);
	CU_ASSERT_FATAL(t != NULL);
	tc_send(a,
		"{\"type\":\"JOB\",\"job_id\":\"run\",\"token\":\"%s\","
		"\"job\":{\"command\":\"sleep\",\"args\":[\"1\"]}}",
		t);
	tc_send(b, "{\"type\":\"WANT\",\"job_id\":\"parked\",\"service\":\"cat\"}");
	CU_ASSERT(tc_quiet(b, 200));
	CU_ASSERT_EQUAL(wg_field("waiting"), 1);
	CU_ASSERT_EQUAL(get_token("cat", NULL), 503);
	/* the sleep ends: the slot goes to the parked want, not to a token */
	struct json_object *done = tc_expect(a, "DONE", 5000);
	CU_ASSERT(done != NULL);
	json_object_put(done);
	struct json_object *offer = tc_expect(b, "OFFER", 5000);
	CU_ASSERT_FATAL(offer != NULL);
	CU_ASSERT_EQUAL(get_token("cat", NULL), 503);
	CU_ASSERT_EQUAL(wg_field("tokens"), 0);
	/* once the want declines, nothing waits: a token may take the slot */
	tc_send(b, "{\"type\":\"DECLINE\",\"job_id\":\"parked\",\"token\":\"%s\"}",
		tc_str(offer, "token"));
	json_object_put(offer);
	CU_ASSERT(tc_quiet(b, 200));
	CU_ASSERT_EQUAL(get_token("cat", NULL), 200);
	tc_close(a);
	tc_close(b);
	stop();
}

/* A `sleep 30` job of service on c: WANT, OFFER, JOB. */
static void run_sleep(struct tclient *c, const char *job_id, const char *service)
{
	const char *t = tc_want_offer(c, job_id, service, 0, 5000);
	CU_ASSERT_FATAL(t != NULL);
	CU_ASSERT(tc_send(c,
			  "{\"type\":\"JOB\",\"job_id\":\"%s\",\"token\":\"%s\","
			  "\"job\":{\"command\":\"sleep\",\"args\":[\"30\"]}}",
			  job_id, t) == 0);
}

static int auto_settled(struct json_object *st, void *arg)
{
	const long long *want = arg; /* running, waiting, tokens */
	return harness_json_int(st, "waitgroups", "auto", "running", NULL) == want[0] &&
	       harness_json_int(st, "waitgroups", "auto", "waiting", NULL) == want[1] &&
	       harness_json_int(st, "waitgroups", "auto", "tokens", NULL) == want[2];
}

static const char *service_class(const char *service)
{
	static char out[16];
	struct json_object *st = harness_status(&D), *v;
	snprintf(out, sizeof out, "%s",
		 st && json_object_object_get_ex(st, "services", &v) &&
				 json_object_object_get_ex(v, service, &v) &&
				 json_object_object_get_ex(v, "class", &v)
			 ? json_object_get_string(v)
			 : "");
	if (st)
		json_object_put(st);
	return out;
}

/* Auto-balance (protocol.md section 9, "Parked wants come first"): with
 * free slots, a parked want that may not take them refuses the token of
 * its own service (by its class), and only that: a light service's token
 * gets the free slot none of the parked wants could take, as a light WANT
 * would.  Capacity alone refuses nothing here: a slot is free each time. */
static void test_auto_balance_parked_wants(void)
{
	long long want[3];
	CU_ASSERT_FATAL(harness_start(&D, 1,
				      "cpus: 4\n"
				      "fastReserve: 1\n"
				      "heavyThreshold: 400ms\n"
				      "minSamples: 1\n"
				      "unknownShare: 0.25\n"
				      "legacyTokenValiditySec: 1\n"
				      "services:\n"
				      "  quick:\n"
				      "    commands:\n"
				      "      true: {prog: \"true\"}\n"
				      "  slow:\n"
				      "    commands:\n"
				      "      sleep: {prog: sleep}\n"
				      "  fresh:\n"
				      "    commands:\n"
				      "      sleep: {prog: sleep}\n",
				      NULL) == 0);
	struct tclient *a = tc_connect(D.port, "a");
	CU_ASSERT_FATAL(a != NULL);
	/* the classes: quick is light, slow heavy, fresh stays unknown */
	struct json_object *done = tc_run_job(a, "q", "quick", "{\"command\":\"true\"}", 10000);
	json_object_put(done);
	done = tc_run_job(a, "s", "slow", "{\"command\":\"sleep\",\"args\":[\"1\"]}", 10000);
	json_object_put(done);
	CU_ASSERT_STRING_EQUAL(service_class("quick"), "light");
	CU_ASSERT_STRING_EQUAL(service_class("slow"), "heavy");
	CU_ASSERT_STRING_EQUAL(service_class("fresh"), "unknown");

	/* an unknown service at its share (1 slot), its second want parked,
	 * three slots free */
	run_sleep(a, "f1", "fresh");
	CU_ASSERT(tc_send(a, "{\"type\":\"WANT\",\"job_id\":\"f2\",\"service\":\"fresh\"}") == 0);
	want[0] = 1, want[1] = 1, want[2] = 0;
	CU_ASSERT(harness_wait_status(&D, 5000, auto_settled, want) == 0);
	CU_ASSERT_EQUAL(get_token("fresh", NULL), 503);
	CU_ASSERT_EQUAL(get_token("quick", NULL), 200);
	CU_ASSERT_EQUAL(get_token("slow", NULL), 200); /* 1 + 1 + reserve < 4 */
	CU_ASSERT_EQUAL(harness_wg_field(&D, "auto", "tokens"), 2);
	CU_ASSERT(tc_send(a, "{\"type\":\"CANCEL\",\"job_id\":\"f2\"}") == 0);
	CU_ASSERT(tc_send(a, "{\"type\":\"CANCEL\",\"job_id\":\"f1\"}") == 0);
	for (int i = 0; i < 2; i++) {
		done = tc_expect(a, "DONE", 5000);
		CU_ASSERT(done != NULL);
		json_object_put(done);
	}
	want[0] = 0, want[1] = 0, want[2] = 0; /* the tokens expire after 1 s */
	CU_ASSERT(harness_wait_status(&D, 8000, auto_settled, want) == 0);

	/* three heavy jobs run, a fourth waits beside the reserve */
	for (int i = 0; i < 3; i++) {
		char id[8];
		snprintf(id, sizeof id, "h%d", i);
		run_sleep(a, id, "slow");
	}
	CU_ASSERT(tc_send(a, "{\"type\":\"WANT\",\"job_id\":\"h3\",\"service\":\"slow\"}") == 0);
	want[0] = 3, want[1] = 1, want[2] = 0;
	CU_ASSERT(harness_wait_status(&D, 5000, auto_settled, want) == 0);
	CU_ASSERT_EQUAL(get_token("slow", NULL), 503);  /* the reserve is for light work */
	CU_ASSERT_EQUAL(get_token("quick", NULL), 200); /* which a light token is */
	CU_ASSERT_EQUAL(get_token("quick", NULL), 503); /* now the pool is full */
	CU_ASSERT_EQUAL(harness_wg_field(&D, "auto", "tokens"), 1);
	CU_ASSERT_EQUAL(harness_wg_field(&D, "auto", "waiting"), 1);
	/* the parked want first: a running job's end would offer it its slot */
	for (int i = 3; i >= 0; i--) {
		CU_ASSERT(tc_send(a, "{\"type\":\"CANCEL\",\"job_id\":\"h%d\"}", i) == 0);
		done = tc_expect(a, "DONE", 10000);
		CU_ASSERT(done != NULL);
		json_object_put(done);
	}
	tc_close(a);
	stop();
}

/* An unused token expires after legacyTokenValiditySec and its slot goes
 * to a want parked after it was issued; the expired token is not found. */
static void test_expiry_returns_the_slot(void)
{
	char tok[33];
	struct httpc_resp r;
	start(2, 1, "legacyTokenValiditySec: 1\n");
	long long t0 = harness_now_ms();
	CU_ASSERT_EQUAL_FATAL(get_token("cat", tok), 200);
	struct tclient *c = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(c != NULL);
	tc_send(c, "{\"type\":\"WANT\",\"job_id\":\"late\",\"service\":\"cat\"}");
	struct json_object *offer = tc_expect(c, "OFFER", 4000);
	long long waited = harness_now_ms() - t0;
	CU_ASSERT(offer != NULL);
	CU_ASSERT(waited >= 900); /* not before the token's second ran out */
	CU_ASSERT(waited < 2500); /* expiry runs every 100 ms */
	json_object_put(offer);
	CU_ASSERT_EQUAL(wg_field("tokens"), 0);
	CU_ASSERT_EQUAL(put_job("cat", tok, "{\"command\":\"true\"}", NULL, NULL, 0, 0, &r), 0);
	CU_ASSERT_EQUAL(r.status, 403);
	CU_ASSERT(body_is(&r, "Token not found\n"));
	httpc_free(&r);
	tc_close(c);
	stop();
}

/* The handler named in a debug line about token tok ("issued"/"redeemed"),
 * or -1. */
static int handler_of(const char *tok, const char *what)
{
	char needle[80], line[1024];
	int found = -1;
	snprintf(needle, sizeof needle, "legacy token %.16s %s", tok, what);
	FILE *f = fopen(D.log, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f)) {
		const char *h = strstr(line, "[handler ");
		if (h && strstr(line, needle))
			found = atoi(h + 9);
	}
	fclose(f);
	return found;
}

/* A token issued by one handler is redeemed on another: the kernel spreads
 * connections over the handlers, so a few rounds give such a pair. */
static void test_token_on_another_handler(void)
{
	char tok[33];
	int crossed = 0;
	start(2, 1, NULL);
	for (int round = 0; round < 40 && !crossed; round++) {
		struct httpc_resp r;
		CU_ASSERT_EQUAL_FATAL(get_token("cat", tok), 200);
		CU_ASSERT_EQUAL_FATAL(put_job("cat", tok,
					      "{\"command\":\"echo\",\"args\":[\"hi\"]}", NULL,
					      NULL, 0, 0, &r),
				      0);
		CU_ASSERT_EQUAL(r.status, 200);
		CU_ASSERT(body_is(&r, "hi\n"));
		httpc_free(&r);
		int issuer = -1, runner = -1;
		for (long long t0 = harness_now_ms();
		     ((issuer = handler_of(tok, "issued")) < 0 ||
		      (runner = handler_of(tok, "redeemed")) < 0) &&
		     harness_now_ms() - t0 < 5000;
		     harness_sleep_ms(20))
			; /* the log lines */
		CU_ASSERT(issuer >= 0 && runner >= 0);
		crossed = issuer >= 0 && runner >= 0 && issuer != runner;
	}
	CU_ASSERT(crossed);
	stop();
}

static void test_single_use(void)
{
	char tok[33], v[64];
	struct httpc_resp r;
	start(2, 2, NULL);
	CU_ASSERT_EQUAL_FATAL(get_token("cat", tok), 200);
	CU_ASSERT_EQUAL(put_job("cat", tok, "{\"command\":\"true\"}", NULL, NULL, 0, 0, &r), 0);
	CU_ASSERT_EQUAL(r.status, 200);
	CU_ASSERT(httpc_field(r.head, "X-Execserver-Exit-Code", v, sizeof v) &&
		  strcmp(v, "0") == 0);
	httpc_free(&r);
	CU_ASSERT_EQUAL(put_job("cat", tok, "{\"command\":\"true\"}", NULL, NULL, 0, 0, &r), 0);
	CU_ASSERT_EQUAL(r.status, 403);
	CU_ASSERT(body_is(&r, "Token not found\n"));
	httpc_free(&r);
	/* a token of another service is refused and stays usable */
	CU_ASSERT_EQUAL_FATAL(get_token("sleep", tok), 200);
	CU_ASSERT_EQUAL(put_job("cat", tok, "{\"command\":\"true\"}", NULL, NULL, 0, 0, &r), 0);
	CU_ASSERT_EQUAL(r.status, 403);
	httpc_free(&r);
	CU_ASSERT_EQUAL(put_job("sleep", tok, "{\"command\":\"sleep\",\"args\":[\"0\"]}", NULL,
				NULL, 0, 0, &r),
			0);
	CU_ASSERT_EQUAL(r.status, 200);
	httpc_free(&r);
	CU_ASSERT_EQUAL(wg_field("tokens"), 0);
	stop();
}

/* Body mode: a large stdin through cat, byte for byte, with the outcome in
 * the trailers; chunked and sized request bodies; a failure with a small
 * output answers 422 with the stderr line; a failure after the response
 * was committed cuts the body, or ends it with the outcome in trailers
 * for a client that accepts them. */
static void test_body_mode(void)
{
	char tok[33], v[256];
	struct httpc_resp r;
	size_t len = 8u << 20;
	unsigned char *data = malloc(len);
	CU_ASSERT_FATAL(data != NULL);
	unsigned seed = 12345;
	for (size_t i = 0; i < len; i++) {
		seed = seed * 1103515245u + 12345u;
		data[i] = (unsigned char)(seed >> 16);
	}
	start(2, 1, NULL);
	for (int chunked = 0; chunked < 2; chunked++) {
		CU_ASSERT_EQUAL_FATAL(get_token("cat", tok), 200);
		CU_ASSERT_EQUAL_FATAL(put_job("cat", tok, "{\"command\":\"cat\"}",
					      "TE: trailers\r\nExpect: 100-continue\r\n", data, len,
					      chunked ? 100000 : 0, &r),
				      0);
		CU_ASSERT_EQUAL(r.status, 200);
		CU_ASSERT(r.interim_100);
		CU_ASSERT(r.chunked && r.complete);
		CU_ASSERT(r.body_len == len && memcmp(r.body, data, len) == 0);
		CU_ASSERT(httpc_field(r.trailers, "X-Execserver-Exit-Code", v, sizeof v) &&
			  strcmp(v, "0") == 0);
		struct json_object *rc = receipt_of(&r);
		CU_ASSERT(rc && tc_int(rc, "exit_code") == 0 && tc_int(rc, "duration_ms") >= 0);
		json_object_put(rc);
		httpc_free(&r);
	}
	free(data);

	/* a small failure: 422, body = its output, the stderr line in the receipt */
	CU_ASSERT_EQUAL_FATAL(get_token("sh", tok), 200);
	CU_ASSERT_EQUAL(put_job("sh", tok,
				"{\"command\":\"sh\",\"args\":[\"-c\",\"echo hi; echo "
				"first >&2; echo 'the decisive line' >&2; exit 3\"]}",
				NULL, NULL, 0, 0, &r),
			0);
	CU_ASSERT_EQUAL(r.status, 422);
	CU_ASSERT(body_is(&r, "hi\n"));
	CU_ASSERT(httpc_field(r.head, "X-Execserver-Exit-Code", v, sizeof v) &&
		  strcmp(v, "3") == 0);
	struct json_object *rc = receipt_of(&r);
	CU_ASSERT(rc && tc_int(rc, "exit_code") == 3 && tc_str(rc, "stderr") &&
		  strcmp(tc_str(rc, "stderr"), "the decisive line") == 0);
	json_object_put(rc);
	httpc_free(&r);

	/* a failure after 10000 bytes (read by the server during the second
	 * the program waits): the body is cut without its last chunk */
	const char *fail10k = "{\"command\":\"sh\",\"args\":[\"-c\",\"head -c 10000 /dev/zero; "
			      "sleep 1; echo broken >&2; exit 2\"]}";
	CU_ASSERT_EQUAL_FATAL(get_token("sh", tok), 200);
	CU_ASSERT_EQUAL(put_job("sh", tok, fail10k, NULL, NULL, 0, 0, &r), 0);
	CU_ASSERT_EQUAL(r.status, 200);
	CU_ASSERT(r.chunked && !r.complete);
	httpc_free(&r);
	/* ... or, for a client that reads trailers, ended with the outcome */
	CU_ASSERT_EQUAL_FATAL(get_token("sh", tok), 200);
	CU_ASSERT_EQUAL(put_job("sh", tok, fail10k, "TE: trailers\r\n", NULL, 0, 0, &r), 0);
	/* the output streamed before the failure was known: a prefix */
	CU_ASSERT(r.chunked && r.complete && r.body_len <= 10000);
	for (size_t i = 0; i < r.body_len; i++)
		if (r.body[i] != 0) {
			CU_FAIL("not a prefix of the output");
			break;
		}
	CU_ASSERT(httpc_field(r.trailers, "X-Execserver-Exit-Code", v, sizeof v) &&
		  strcmp(v, "2") == 0);
	rc = receipt_of(&r);
	CU_ASSERT(rc && tc_str(rc, "stderr") && strcmp(tc_str(rc, "stderr"), "broken") == 0);
	json_object_put(rc);
	httpc_free(&r);

	/* a program that cannot start */
	CU_ASSERT_EQUAL_FATAL(get_token("cat", tok), 200);
	CU_ASSERT_EQUAL(put_job("cat", tok,
				"{\"command\":\"cat\",\"inputs\":[{\"name\":\"x\","
				"\"url\":\"http://127.0.0.1:1/nothing\"}]}",
				NULL, NULL, 0, 0, &r),
			0);
	CU_ASSERT(r.status == 422 || r.status == 503);
	rc = receipt_of(&r);
	struct json_object *err = NULL;
	CU_ASSERT(rc && json_object_object_get_ex(rc, "error", &err) &&
		  strcmp(tc_str(err, "code"), "input_failed") == 0);
	json_object_put(rc);
	httpc_free(&r);
	CU_ASSERT_EQUAL(wg_field("tokens"), 0);
	stop();
}

/* Bad requests get their documented answers and leave the token usable. */
static void test_bad_requests(void)
{
	char tok[33], v[64];
	struct httpc_resp r;
	static const struct {
		const char *job;
		int status;
		const char *starts;
	} bad[] = {
		{ NULL, 400, "job: missing" },
		{ "{\"command\":", 400, "bad_job: job: not a JSON object" },
		{ "[1]", 400, "bad_job: job: not a JSON object" },
		{ "{\"command\":\"rm\"}", 400, "unknown_command: " },
		{ "{\"args\":[]}", 400, "bad_job: " },
		{ "{\"command\":\"cat\",\"stdin\":\"http://127.0.0.1:1/\"}", 400,
		  "bad_job: stdin: " },
		{ "{\"command\":\"cat\",\"stdout\":\"http://127.0.0.1:1/\"}", 400,
		  "bad_job: stdout: " },
	};
	start(2, 1, NULL);
	CU_ASSERT_EQUAL_FATAL(get_token("cat", tok), 200);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		CU_ASSERT_EQUAL_FATAL(put_job("cat", tok, bad[i].job, NULL, NULL, 0, 0, &r), 0);
		CU_ASSERT_EQUAL(r.status, bad[i].status);
		if (!r.body || strncmp(r.body, bad[i].starts, strlen(bad[i].starts)) != 0)
			printf("\n  case %zu: %d %s\n", i, r.status, r.body ? r.body : "(none)");
		CU_ASSERT(r.body && strncmp(r.body, bad[i].starts, strlen(bad[i].starts)) == 0);
		httpc_free(&r);
	}
	CU_ASSERT_EQUAL(put_job("cat", NULL, "{\"command\":\"true\"}", NULL, NULL, 0, 0, &r), 0);
	CU_ASSERT_EQUAL(r.status, 400);
	CU_ASSERT(r.body && strncmp(r.body, "token: missing", 14) == 0);
	httpc_free(&r);
	CU_ASSERT_EQUAL(put_job("cat", "xyz", "{\"command\":\"true\"}", NULL, NULL, 0, 0, &r), 0);
	CU_ASSERT_EQUAL(r.status, 403);
	CU_ASSERT(body_is(&r, "Token not found\n"));
	httpc_free(&r);
	/* refused while the client still sends a large body: the answer
	 * arrives all the same */
	size_t big = 4u << 20;
	char *body = calloc(1, big);
	CU_ASSERT_FATAL(body != NULL);
	for (int chunked = 0; chunked < 2; chunked++) {
		CU_ASSERT_EQUAL(put_job("cat", "ffffffffffffffffffffffffffffffff",
					"{\"command\":\"cat\"}", NULL, body, big,
					chunked ? 65536 : 0, &r),
				0);
		CU_ASSERT_EQUAL(r.status, 403);
		CU_ASSERT(body_is(&r, "Token not found\n"));
		httpc_free(&r);
	}
	free(body);
	CU_ASSERT_EQUAL(put_job("nope", tok, "{\"command\":\"true\"}", NULL, NULL, 0, 0, &r), 0);
	CU_ASSERT_EQUAL(r.status, 404);
	httpc_free(&r);
	CU_ASSERT_EQUAL(httpc_request(D.port, "GET", "/job/cat", NULL, NULL, 0, 0, 5000, &r), 0);
	CU_ASSERT_EQUAL(r.status, 405);
	CU_ASSERT(httpc_field(r.head, "Allow", v, sizeof v) && strcmp(v, "PUT") == 0);
	httpc_free(&r);
	/* the token survived all of that */
	CU_ASSERT_EQUAL(wg_field("tokens"), 1);
	CU_ASSERT_EQUAL(put_job("cat", tok, "{\"command\":\"cat\"}", NULL, "ok", 2, 0, &r), 0);
	CU_ASSERT_EQUAL(r.status, 200);
	CU_ASSERT(body_is(&r, "ok"));
	httpc_free(&r);
	stop();
}

/* The pid of a `sleep` whose parent is one of the handlers (its handler's
 * pid in *handler), or 0. */
static pid_t find_sleep_job(pid_t *handler)
{
	int pids[8];
	int n = harness_handler_pids(&D, pids, 8);
	DIR *proc = opendir("/proc");
	struct dirent *e;
	pid_t found = 0;
	while (proc && !found && (e = readdir(proc))) {
		char path[300], comm[64] = "";
		int ppid = 0;
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		if (fscanf(f, "%*d (%63[^)]) %*c %d", comm, &ppid) == 2 &&
		    strcmp(comm, "sleep") == 0)
			for (int i = 0; i < n; i++)
				if (pids[i] > 0 && pids[i] == ppid) {
					found = (pid_t)atoi(e->d_name);
					*handler = ppid;
				}
		fclose(f);
	}
	if (proc)
		closedir(proc);
	return found;
}

/* find_sleep_job, for up to 5 s. */
static pid_t wait_sleep_job(pid_t *handler)
{
	pid_t job = 0;
	for (int i = 0; i < 100 && !job; i++) {
		harness_sleep_ms(50);
		job = find_sleep_job(handler);
	}
	return job;
}

static int tokens_are(struct json_object *st, void *arg)
{
	return harness_json_int(st, "waitgroups", "wg", "tokens", NULL) == *(long long *)arg;
}

/* A PUT of `sleep 30` in a child process; returns its pid.  The child
 * exits 0 when the connection ended without an answer. */
static pid_t put_sleep_in_child(const char *tok)
{
	fflush(stdout);
	pid_t child = fork();
	if (child == 0) {
		struct httpc_resp r;
		int rc = put_job("sleep", tok, "{\"command\":\"sleep\",\"args\":[\"30\"]}", NULL,
				 NULL, 0, 0, &r);
		_exit(rc != 0 ? 0 : 1);
	}
	return child;
}

/* The handler running a token job dies: the job dies with it, the
 * client's connection drops, and the token's slot is free again. */
static void test_handler_crash(void)
{
	char tok[33];
	long long zero = 0;
	pid_t handler = 0, job;
	start(2, 1, NULL);
	CU_ASSERT_EQUAL_FATAL(get_token("sleep", tok), 200);
	pid_t child = put_sleep_in_child(tok);
	CU_ASSERT_FATAL(child > 0);
	job = wait_sleep_job(&handler);
	CU_ASSERT_FATAL(job > 0);
	kill(handler, SIGKILL);
	CU_ASSERT_EQUAL(harness_wait_status(&D, 5000, tokens_are, &zero), 0);
	int status = 0;
	CU_ASSERT_EQUAL(waitpid(child, &status, 0), child);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CU_ASSERT(harness_wait_gone(job, 5000) == 0); /* the job died with its handler */
	CU_ASSERT_EQUAL(get_token("sleep", tok), 200);
	stop();
}

/* The client goes away while its job runs: the job is stopped and the
 * token's slot freed. */
static void test_client_gone(void)
{
	char tok[33];
	long long zero = 0;
	pid_t handler = 0, job;
	start(2, 1, NULL);
	CU_ASSERT_EQUAL_FATAL(get_token("sleep", tok), 200);
	char req[512];
	snprintf(req, sizeof req,
		 "PUT /job/sleep?token=%s&job=%s HTTP/1.1\r\nHost: x\r\n"
		 "Content-Length: 0\r\n\r\n",
		 tok, httpc_qs("{\"command\":\"sleep\",\"args\":[\"30\"]}"));
	int fd = wsc_tcp_connect("127.0.0.1", D.port, 2000);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	job = wait_sleep_job(&handler);
	CU_ASSERT_FATAL(job > 0);
	long long one = 1;
	CU_ASSERT_EQUAL(harness_wait_status(&D, 2000, tokens_are, &one), 0);
	close(fd);
	CU_ASSERT_EQUAL(harness_wait_status(&D, 5000, tokens_are, &zero), 0);
	CU_ASSERT(harness_wait_gone(job, 5000) == 0);
	/* counted as a finished, failed job of the service */
	CU_ASSERT_EQUAL(harness_status_int(&D, "services", "sleep", "failed", NULL), 1);
	stop();
}

/* A client that closes in the middle of its request body (sized, or
 * chunked mid-chunk): the job ends, its slot comes back, and the handler
 * keeps serving (it once spun on the empty input left after EOF). */
static void test_body_cut(void)
{
	static const char *const cuts[] = {
		"Content-Length: 100\r\n\r\nabc",
		"Transfer-Encoding: chunked\r\n\r\n10\r\nabc",
	};
	long long zero = 0;
	start(1, 1, NULL);
	for (int i = 0; i < 2; i++) {
		char tok[33], req[1024];
		CU_ASSERT_EQUAL_FATAL(get_token("cat", tok), 200);
		snprintf(req, sizeof req, "PUT /job/cat?token=%s&job=%s HTTP/1.1\r\nHost: x\r\n%s",
			 tok, httpc_qs("{\"command\":\"cat\"}"), cuts[i]);
		int fd = wsc_tcp_connect("127.0.0.1", D.port, 2000);
		CU_ASSERT_FATAL(fd >= 0);
		CU_ASSERT_EQUAL(write(fd, req, strlen(req)), (ssize_t)strlen(req));
		/* the job runs, waiting for the rest of the body, when it is cut */
		char redeemed[64];
		snprintf(redeemed, sizeof redeemed, "legacy token %.16s redeemed", tok);
		CU_ASSERT(harness_wait_log(&D, redeemed, 5000) == 0);
		close(fd);
		/* the slot is back and the (only) handler answers */
		CU_ASSERT_EQUAL(harness_wait_status(&D, 5000, tokens_are, &zero), 0);
		struct json_object *st = harness_status(&D);
		CU_ASSERT(st != NULL);
		if (st)
			json_object_put(st);
	}
	stop();
}

/* Appends a line to the configuration and reloads (SIGHUP); then waits
 * until GET /token/cat (with headers) answers want. */
static void reload_with(const char *line, const char *headers, int want)
{
	FILE *f = fopen(D.config, "a");
	CU_ASSERT_FATAL(f != NULL);
	fputs(line, f);
	fclose(f);
	kill(D.pid, SIGHUP);
	int status = 0;
	for (int i = 0; i < 100 && status != want; i++) {
		struct httpc_resp r;
		harness_sleep_ms(50);
		if (httpc_request(D.port, "GET", "/token/cat", headers, NULL, 0, 0, 5000, &r) ==
		    0) {
			status = r.status;
			httpc_free(&r);
		}
	}
	CU_ASSERT_EQUAL(status, want);
}

/* authToken guards the legacy endpoints as it guards /status; both keys
 * are reloadable. */
static void test_auth_and_reload(void)
{
	static const char *auth = "Authorization: Bearer s3cret\r\n";
	struct httpc_resp r;
	start(1, 1, "legacyTokenValiditySec: 1\n");
	reload_with("authToken: s3cret\n", NULL, 401);
	CU_ASSERT_EQUAL(put_job("cat", "00000000000000000000000000000000", "{\"command\":\"true\"}",
				NULL, NULL, 0, 0, &r),
			0);
	CU_ASSERT_EQUAL(r.status, 401);
	httpc_free(&r);
	CU_ASSERT_EQUAL(httpc_request(D.port, "GET", "/token/cat", auth, NULL, 0, 0, 5000, &r), 0);
	/* authorized: a token, or busy when a poll before the reload got one */
	CU_ASSERT(r.status == 200 || r.status == 503);
	httpc_free(&r);
	reload_with("legacyToken: off\n", auth, 404);
	long long zero = 0; /* the issued tokens expire all the same */
	harness_auth_token = "s3cret";
	CU_ASSERT_EQUAL(harness_wait_status(&D, 5000, tokens_are, &zero), 0);
	harness_auth_token = NULL;
	CU_ASSERT(harness_stop_clean(&D) == 0);
}

static void test_switched_off(void)
{
	char tok[33];
	struct httpc_resp r;
	start(1, 1, "legacyToken: off\n");
	CU_ASSERT_EQUAL(get_token("cat", tok), 404);
	CU_ASSERT_EQUAL(put_job("cat", "00000000000000000000000000000000", "{\"command\":\"true\"}",
				NULL, NULL, 0, 0, &r),
			0);
	CU_ASSERT_EQUAL(r.status, 404);
	httpc_free(&r);
	CU_ASSERT_EQUAL(wg_field("tokens"), 0);
	stop();
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "GET /token answers", test_token_answers },
		{ "a parked want blocks tokens", test_parked_want_blocks_tokens },
		{ "auto-balance: only wants that may take the slot block tokens",
		  test_auto_balance_parked_wants },
		{ "expiry returns the slot", test_expiry_returns_the_slot },
		{ "a token redeemed on another handler", test_token_on_another_handler },
		{ "single use, bound to its service", test_single_use },
		{ "body mode", test_body_mode },
		{ "bad requests", test_bad_requests },
		{ "a handler crash frees the slot", test_handler_crash },
		{ "the client goes away", test_client_gone },
		{ "a body cut short", test_body_cut },
		{ "authToken, reload", test_auth_and_reload },
		{ "legacyToken: off", test_switched_off },
		{ NULL, NULL },
	};
	return run_suite("legacy", cases);
}
