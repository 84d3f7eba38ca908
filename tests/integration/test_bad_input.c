/*
 * test_bad_input.c - the bad-input table of docs/security.md, row by row,
 * against a real daemon with two handlers.
 *
 * Every row sends one malformed or hostile input on a connection of its
 * own and compares the answer it observes (an ERROR code, a close code, an
 * HTTP status, the connection cut) with the row's expected answer.  After
 * every row a bystander client, connected before the first row, runs a
 * whole job (WANT, OFFER, JOB, DONE), and the row's own connection, where
 * the answer is an ERROR, must still answer a QUERY: the proof that the
 * connection and every other client kept working.  At the end the book
 * passes its consistency check and no slot or want is left.
 *
 * `test_bad_input --table` prints the table in Markdown; the last test
 * checks that docs/security.md holds exactly that table, so the document
 * cannot drift from what is tested.
 */
#include "autoconfig.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "harness.h"
#include "proto.h"
#include "suite.h"

#define MAX_FRAME 65536
#define MAX_WANTS_PER_CONN 1000

static struct es_daemon D;
static struct tclient *bystander;

/* ---- answers ---------------------------------------------------------- */

/* What a row observed, as text: "ERROR <code>", "close <code>",
 * "HTTP <status>", "cut" (no close frame), "open" (no answer at all). */
struct answer {
	char text[64];
};

static void answer(struct answer *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void answer(struct answer *a, const char *fmt, ...)
{
	char tmp[sizeof a->text];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	memcpy(a->text, tmp, sizeof tmp);
}

/* The first non-HELLO message, or the end of the connection. */
static void observe(struct tclient *c, int timeout_ms, struct answer *a)
{
	long long until = harness_now_ms() + timeout_ms;
	for (;;) {
		struct wsc_msg m;
		int left = (int)(until - harness_now_ms());
		int t = wsc_recv(c->ws, left > 0 ? left : 0, &m);
		if (t == WSC_TEXT) {
			struct json_object *o = json_tokener_parse(m.data);
			const char *type = o ? tc_str(o, "type") : NULL;
			if (type && strcmp(type, "HELLO") == 0) {
				json_object_put(o);
				wsc_msg_free(&m);
				continue;
			}
			if (type && strcmp(type, "ERROR") == 0)
				answer(a, "ERROR %s", tc_str(o, "code"));
			else
				answer(a, "%s", type ? type : "?");
			if (o)
				json_object_put(o);
		} else if (t == WSC_CLOSE) {
			answer(a, "close %d", m.close_code);
		} else if (t == WSC_TIMEOUT) {
			answer(a, "open");
		} else {
			answer(a, "cut");
		}
		wsc_msg_free(&m);
		return;
	}
}

static int still_works(struct tclient *c);

/* observe(), and where the answer is an ERROR, the connection must still
 * work afterwards. */
static void observe_error(struct tclient *c, struct answer *a)
{
	observe(c, 3000, a);
	if (strncmp(a->text, "ERROR", 5) == 0 && !still_works(c))
		answer(a, "%s, then the connection failed", a->text);
}

/* The connection still works: a QUERY of an unknown id gets unknown_job. */
static int still_works(struct tclient *c)
{
	if (tc_send(c, "{\"type\":\"QUERY\",\"job_id\":\"still-there\"}") != 0)
		return 0;
	struct json_object *e = tc_expect(c, "ERROR", 3000);
	int ok = e && strcmp(tc_str(e, "code"), "unknown_job") == 0;
	if (e)
		json_object_put(e);
	return ok;
}

/* ---- row kinds -------------------------------------------------------- */

enum kind {
	FRAMES,
	MESSAGE,
	HTTP,
	SCENARIO
};

struct row {
	const char *input;  /* for the table */
	const char *expect; /* the answer, as observe() writes it */
	enum kind kind;
	struct wsc_frame f[3]; /* FRAMES */
	int nframes;
	const char *text;              /* MESSAGE: the text; HTTP: the request */
	void (*run)(struct answer *a); /* SCENARIO */
};

static char big[MAX_FRAME + 1], half[MAX_FRAME / 2 + 8], p126[126];
static char long_id[8192];
static char long_id_msg[8300];
static char deep_json[4096];

static struct tclient *fresh(void)
{
	struct tclient *c = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(c != NULL);
	return c;
}

static void run_frames(const struct row *r, struct answer *a)
{
	struct tclient *c = fresh();
	for (int i = 0; i < r->nframes; i++)
		wsc_send_frame(c->ws, &r->f[i]);
	observe(c, 5000, a);
	tc_close(c);
}

static void run_message(const struct row *r, struct answer *a)
{
	struct tclient *c = fresh();
	wsc_send_text(c->ws, r->text, strlen(r->text));
	observe_error(c, a);
	tc_close(c);
}

static void run_http(const struct row *r, struct answer *a)
{
	int status = 0;
	if (wsc_http_request("127.0.0.1", D.port, r->text, 5000, &status, NULL, 0) < 0 &&
	    status == 0)
		answer(a, "cut");
	else
		answer(a, "HTTP %d", status);
}

/* ---- scenarios -------------------------------------------------------- */

/* A want on an idle waitgroup: offered at once; returns the token. */
static const char *offer(struct tclient *c, const char *id)
{
	const char *t = tc_want_offer(c, id, "cat", 0, 3000);
	CU_ASSERT_FATAL(t != NULL);
	return t;
}

/* JOB for an offered want with the given job description. */
static void job_with(struct answer *a, const char *job)
{
	struct tclient *c = fresh();
	const char *t = offer(c, "j");
	tc_send(c, "{\"type\":\"JOB\",\"job_id\":\"j\",\"token\":\"%s\",\"job\":%s}", t, job);
	observe_error(c, a);
	tc_close(c);
}

/* Takes both slots, so that wants stay parked; close it to free them. */
static struct tclient *hold_slots(void)
{
	struct tclient *h = fresh();
	offer(h, "h1");
	offer(h, "h2");
	return h;
}

/* A job whose input is on a host that is neither the client (127.0.0.1)
 * nor in callbackAllow: the callback guard refuses the connection. */
static void sc_disallowed_host(struct answer *a)
{
	struct tclient *c = fresh();
	const char *t = offer(c, "g");
	tc_send(c,
		"{\"type\":\"JOB\",\"job_id\":\"g\",\"token\":\"%s\",\"job\":{\"command\":"
		"\"true\",\"inputs\":[{\"name\":\"a\",\"url\":\"http://192.0.2.1:8080/x\"}]}}",
		t);
	struct json_object *d = tc_expect(c, "DONE", 5000), *e;
	if (d && json_object_object_get_ex(tc_receipt(d), "error", &e))
		answer(a, "DONE %s", tc_str(e, "code"));
	else
		answer(a, "%s", d ? "DONE without error" : "no DONE");
	if (d)
		json_object_put(d);
	tc_close(c);
}

static void sc_duplicate(struct answer *a)
{
	struct tclient *c = fresh(), *h = hold_slots();
	tc_send(c, "{\"type\":\"WANT\",\"job_id\":\"d\",\"service\":\"cat\"}");
	tc_send(c, "{\"type\":\"WANT\",\"job_id\":\"d\",\"service\":\"cat\"}");
	observe_error(c, a);
	tc_close(h);
	tc_close(c);
}

static void sc_job_without_offer(struct answer *a)
{
	struct tclient *c = fresh();
	tc_send(c, "{\"type\":\"JOB\",\"job_id\":\"never\",\"token\":\"0123456789abcdef\","
		   "\"job\":{\"command\":\"true\"}}");
	observe_error(c, a);
	tc_close(c);
}

static void sc_job_parked(struct answer *a)
{
	struct tclient *c = fresh(), *h = hold_slots();
	tc_send(c, "{\"type\":\"WANT\",\"job_id\":\"p\",\"service\":\"cat\"}");
	tc_send(c, "{\"type\":\"JOB\",\"job_id\":\"p\",\"token\":\"0123456789abcdef\","
		   "\"job\":{\"command\":\"true\"}}");
	observe_error(c, a);
	tc_close(h);
	tc_close(c);
}

static void sc_stale_token(struct answer *a)
{
	struct tclient *c = fresh();
	const char *t = offer(c, "s");
	char wrong[17];
	snprintf(wrong, sizeof wrong, "%s", t);
	wrong[0] = wrong[0] == '0' ? '1' : '0';
	tc_send(c,
		"{\"type\":\"JOB\",\"job_id\":\"s\",\"token\":\"%s\",\"job\":{\"command\":\"true\"}"
		"}",
		wrong);
	observe_error(c, a);
	tc_close(c);
}

/* After another connection meddled with it: the owner's offer is
 * untouched, its JOB runs. */
static void owner_offer_intact(struct tclient *owner, const char *id, const char *token,
			       struct answer *a)
{
	tc_send(owner,
		"{\"type\":\"JOB\",\"job_id\":\"%s\",\"token\":\"%s\","
		"\"job\":{\"command\":\"true\"}}",
		id, token);
	struct json_object *d = tc_expect(owner, "DONE", 5000);
	if (!d || tc_int(tc_receipt(d), "exit_code") != 0)
		answer(a, "%s, and the owner's offer was lost", a->text);
	if (d)
		json_object_put(d);
}

static void sc_decline_other(struct answer *a)
{
	struct tclient *owner = fresh(), *thief = fresh();
	const char *t = offer(owner, "o");
	tc_send(thief, "{\"type\":\"DECLINE\",\"job_id\":\"o\",\"token\":\"%s\"}", t);
	observe_error(thief, a);
	owner_offer_intact(owner, "o", t, a);
	tc_close(thief);
	tc_close(owner);
}

static void sc_cancel_other(struct answer *a)
{
	struct tclient *owner = tc_connect(D.port, "owner-x"),
		       *other = tc_connect(D.port, "other-y");
	CU_ASSERT_FATAL(owner && other);
	const char *t = offer(owner, "x");
	tc_send(other, "{\"type\":\"CANCEL\",\"job_id\":\"x\"}");
	observe_error(other, a);
	owner_offer_intact(owner, "x", t, a);
	tc_close(other);
	tc_close(owner);
}

static void sc_many_wants(struct answer *a)
{
	struct tclient *c = fresh(), *h = hold_slots();
	char msg[128];
	int refused = 0, accepted_before = 0, other = 0;
	for (int i = 0; i < 10000; i++) {
		int n = snprintf(msg, sizeof msg,
				 "{\"type\":\"WANT\",\"job_id\":\"w%d\",\"service\":\"cat\"}", i);
		wsc_send_text(c->ws, msg, (size_t)n);
	}
	/* exactly the wants beyond the limit are refused */
	for (int i = 0; i < 10000 - MAX_WANTS_PER_CONN; i++) {
		struct json_object *e = tc_expect(c, "ERROR", 5000);
		if (!e)
			break;
		if (strcmp(tc_str(e, "code"), "limit_reached") == 0)
			refused++;
		else
			other++;
		if (atoi(tc_str(e, "job_id") + 1) < MAX_WANTS_PER_CONN)
			accepted_before++;
		json_object_put(e);
	}
	if (refused == 10000 - MAX_WANTS_PER_CONN && !other && !accepted_before && still_works(c))
		answer(a, "ERROR limit_reached");
	else
		answer(a, "%d refused, %d others", refused, other);
	tc_close(h);
	tc_close(c);
}

static void sc_ping_flood(struct answer *a)
{
	struct tclient *c = fresh();
	wsc_set_options(c->ws, WSC_OPT_REPORT_PONGS);
	for (int i = 0; i < 5000; i++)
		wsc_send_ping(c->ws, "flood", 5);
	int pongs = 0;
	for (;;) {
		struct wsc_msg m;
		int t = wsc_recv(c->ws, 3000, &m);
		wsc_msg_free(&m);
		if (t != WSC_PONG && t != WSC_TEXT)
			break;
		pongs += t == WSC_PONG;
		if (pongs == 5000)
			break;
	}
	wsc_set_options(c->ws, 0);
	if (pongs == 5000 && still_works(c))
		answer(a, "pongs");
	else
		answer(a, "%d pongs", pongs);
	tc_close(c);
}

/* Resident memory of all handlers, KiB. */
static long handlers_rss_kib(void)
{
	int pids[8], n = harness_handler_pids(&D, pids, 8);
	long total = 0;
	for (int i = 0; i < n; i++)
		total += harness_proc_kib(pids[i], "VmRSS");
	return total;
}

static void sc_unread_ping_flood(struct answer *a)
{
	/* pings of 125 bytes whose pongs are never read: the server stops
	 * reading once its answers pile up, so its memory stays bounded */
	struct tclient *c = fresh();
	static unsigned char frames[64 * 131];
	static char payload[125];
	struct wsc_frame f = { 1, 0, WSC_PING, 1, 0, payload, sizeof payload };
	size_t one = wsc_build_frame(&f, frames, sizeof frames);
	long before = handlers_rss_kib();
	for (int i = 1; i < 64; i++)
		memcpy(frames + i * one, frames, one);
	wsc_set_send_timeout(c->ws, 2000);
	long long sent = 0;
	while (sent < 40LL << 20 && wsc_send_bytes(c->ws, frames, 64 * one) == 0)
		sent += (long long)(64 * one);
	long grew = handlers_rss_kib() - before;
	if (getenv("BAD_INPUT_ROW"))
		fprintf(stderr, "sent %lld bytes, handlers grew %ld KiB\n", sent, grew);
#ifdef __SANITIZE_ADDRESS__
	grew = 0; /* ASan's quarantine keeps freed memory: RSS says nothing */
#endif
	if (sent < 40LL << 20 && grew < 32 * 1024)
		answer(a, "stops reading");
	else
		answer(a, "%lld MiB taken, handlers grew %ld KiB", sent >> 20, grew);
	tc_close(c);
}

static void sc_truncated(struct answer *a)
{
	static unsigned char frame[256];
	static char payload[100];
	struct wsc_frame f = { 1, 0, WSC_TEXT, 1, 0, payload, sizeof payload };
	struct tclient *c = fresh();
	wsc_build_frame(&f, frame, sizeof frame);
	wsc_send_bytes(c->ws, frame, 20);
	shutdown(wsc_fd(c->ws), SHUT_WR);
	observe(c, 5000, a);
	tc_close(c);
}

static void sc_slowloris(struct answer *a)
{
	int fd = wsc_slow_connect("127.0.0.1", D.port,
				  "GET /broker HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n",
				  2000);
	CU_ASSERT_FATAL(fd >= 0);
	/* the head must be complete within the handshake deadline */
	int r = wsc_wait_closed(fd, 15000);
	answer(a, "%s", r == 1 ? "cut" : "open");
	close(fd);
}

/* ---- the table -------------------------------------------------------- */

#define FR(fin, rsv, op, masked, lenform, p, n)     \
	{                                           \
		fin, rsv, op, masked, lenform, p, n \
	}
#define FRAME_ROW(input, expect, n, ...)                              \
	{                                                             \
		input, expect, FRAMES, { __VA_ARGS__ }, n, NULL, NULL \
	}
#define MSG_ROW(input, expect, text)                             \
	{                                                        \
		input, expect, MESSAGE, { { 0 } }, 0, text, NULL \
	}
#define JOB_ROW(input, expect, job)                              \
	{                                                        \
		input, expect, SCENARIO, { { 0 } }, 0, job, NULL \
	}
#define HTTP_ROW(input, expect, request)                         \
	{                                                        \
		input, expect, HTTP, { { 0 } }, 0, request, NULL \
	}
#define SCENARIO_ROW(input, expect, fn)                         \
	{                                                       \
		input, expect, SCENARIO, { { 0 } }, 0, NULL, fn \
	}
#define WANT_WITH(fields) "{\"type\":\"WANT\",\"job_id\":\"a\",\"service\":\"cat\"," fields "}"

static struct row rows[] = {
	/* websocket framing */
	SCENARIO_ROW("frame cut short, then the client half-closes", "cut", sc_truncated),
	FRAME_ROW("text frame of maxFrameBytes + 1", "close 1009", 1,
		  FR(1, 0, WSC_TEXT, 1, 0, big, sizeof big)),
	FRAME_ROW("message over maxFrameBytes in three fragments", "close 1009", 3,
		  FR(0, 0, WSC_TEXT, 1, 0, half, sizeof half), FR(0, 0, 0, 1, 0, half, sizeof half),
		  FR(1, 0, 0, 1, 0, half, sizeof half)),
	FRAME_ROW("unmasked client frame", "close 1002", 1, FR(1, 0, WSC_TEXT, 0, 0, "{}", 2)),
	FRAME_ROW("ping with a 126-byte payload", "close 1002", 1,
		  FR(1, 0, WSC_PING, 1, 0, p126, sizeof p126)),
	FRAME_ROW("fragmented ping", "close 1002", 1, FR(0, 0, WSC_PING, 1, 0, "p", 1)),
	FRAME_ROW("text that is not UTF-8", "close 1007", 1,
		  FR(1, 0, WSC_TEXT, 1, 0, "{\"a\":\"\xC0\xAF\"}", 11)),
	FRAME_ROW("UTF-8 surrogate (CESU) in text", "close 1007", 1,
		  FR(1, 0, WSC_TEXT, 1, 0, "\"\xED\xA0\x80\"", 5)),
	FRAME_ROW("UTF-8 sequence cut by the end of the message", "close 1007", 2,
		  FR(0, 0, WSC_TEXT, 1, 0, "ab", 2), FR(1, 0, 0, 1, 0, "\xE2\x82", 2)),
	FRAME_ROW("binary frame", "close 1003", 1, FR(1, 0, WSC_BINARY, 1, 0, "\x01\x02", 2)),
	FRAME_ROW("reserved opcode 3", "close 1002", 1, FR(1, 0, 3, 1, 0, "x", 1)),
	FRAME_ROW("continuation frame with nothing to continue", "close 1002", 1,
		  FR(1, 0, 0, 1, 0, "x", 1)),
	FRAME_ROW("new text frame inside a fragmented message", "close 1002", 2,
		  FR(0, 0, WSC_TEXT, 1, 0, "a", 1), FR(1, 0, WSC_TEXT, 1, 0, "b", 1)),
	FRAME_ROW("RSV1 bit without an extension", "close 1002", 1,
		  FR(1, 4, WSC_TEXT, 1, 0, "{}", 2)),
	FRAME_ROW("64-bit length field for a 5-byte payload", "close 1002", 1,
		  FR(1, 0, WSC_TEXT, 1, 64, "hello", 5)),
	FRAME_ROW("close frame with code 999", "close 1002", 1,
		  FR(1, 0, WSC_CLOSE, 1, 0, "\x03\xE7", 2)),
	FRAME_ROW("close frame with a 1-byte body", "close 1002", 1,
		  FR(1, 0, WSC_CLOSE, 1, 0, "\x03", 1)),
	FRAME_ROW("close frame whose reason is not UTF-8", "close 1007", 1,
		  FR(1, 0, WSC_CLOSE, 1, 0, "\x03\xE8\xFF", 3)),
	SCENARIO_ROW("5,000 pings in a burst", "pongs", sc_ping_flood),
	SCENARIO_ROW("40 MB of pings whose pongs are never read", "stops reading",
		     sc_unread_ping_flood),

	/* messages */
	MSG_ROW("not JSON: `{\"type\":`", "ERROR bad_json", "{\"type\":"),
	MSG_ROW("a JSON array", "ERROR bad_json", "[1,2]"),
	MSG_ROW("a JSON string", "ERROR bad_json", "\"WANT\""),
	MSG_ROW("two JSON objects in one message", "ERROR bad_json",
		"{\"type\":\"QUERY\",\"job_id\":\"a\"}{}"),
	MSG_ROW("JSON nested 2,000 deep", "ERROR bad_json", deep_json),
	MSG_ROW("no `type`", "ERROR bad_message", "{\"job_id\":\"a\"}"),
	MSG_ROW("`type` is a number", "ERROR bad_message", "{\"type\":7}"),
	MSG_ROW("unknown type `FETCH`", "ERROR unknown_type", "{\"type\":\"FETCH\"}"),
	MSG_ROW("a server message type (`OFFER`) from the client", "ERROR unknown_type",
		"{\"type\":\"OFFER\",\"job_id\":\"a\",\"token\":\"0123456789abcdef\"}"),
	MSG_ROW("WANT without `job_id`", "ERROR bad_message",
		"{\"type\":\"WANT\",\"service\":\"cat\"}"),
	MSG_ROW("WANT with a numeric `job_id`", "ERROR bad_message",
		"{\"type\":\"WANT\",\"job_id\":5,\"service\":\"cat\"}"),
	MSG_ROW("WANT with an empty `job_id`", "ERROR bad_message",
		"{\"type\":\"WANT\",\"job_id\":\"\",\"service\":\"cat\"}"),
	MSG_ROW("WANT with an 8,000-byte `job_id`", "ERROR bad_message", long_id_msg),
	MSG_ROW("WANT with `priority` as a string", "ERROR bad_message",
		WANT_WITH("\"priority\":\"2\"")),
	MSG_ROW("WANT with `priority` 2147483648", "ERROR bad_message",
		WANT_WITH("\"priority\":2147483648")),
	MSG_ROW("WANT with `priority` 1e999", "ERROR bad_message", WANT_WITH("\"priority\":1e999")),
	MSG_ROW("WANT with `priority` 1.5", "ERROR bad_message", WANT_WITH("\"priority\":1.5")),
	MSG_ROW("WANT with a numeric `service`", "ERROR bad_message",
		"{\"type\":\"WANT\",\"job_id\":\"a\",\"service\":1}"),
	MSG_ROW("WANT for a service that is not configured", "ERROR unknown_service",
		"{\"type\":\"WANT\",\"job_id\":\"a\",\"service\":\"nope\"}"),
	SCENARIO_ROW("WANT twice with the same `job_id`", "ERROR duplicate_job", sc_duplicate),
	SCENARIO_ROW("10,000 WANTs on one connection (limit 1,000)", "ERROR limit_reached",
		     sc_many_wants),
	MSG_ROW("UNWANT of an unknown job", "ERROR unknown_job",
		"{\"type\":\"UNWANT\",\"job_id\":\"ghost\"}"),
	SCENARIO_ROW("JOB without any WANT or OFFER", "ERROR unknown_job", sc_job_without_offer),
	SCENARIO_ROW("JOB for a want that is still parked", "ERROR not_offered", sc_job_parked),
	SCENARIO_ROW("JOB with a stale token", "ERROR bad_token", sc_stale_token),
	SCENARIO_ROW("DECLINE of another connection's offer", "ERROR unknown_job",
		     sc_decline_other),
	SCENARIO_ROW("CANCEL of another client's job", "ERROR unknown_job", sc_cancel_other),
	JOB_ROW("JOB whose `job` is a string", "ERROR bad_message", "\"true\""),
	JOB_ROW("JOB with a command that is not configured", "ERROR unknown_command",
		"{\"command\":\"rm\"}"),
	JOB_ROW("JOB with `args` holding a number", "ERROR bad_job",
		"{\"command\":\"true\",\"args\":[1]}"),
	JOB_ROW("JOB with an input named `../escape`", "ERROR bad_job",
		"{\"command\":\"true\",\"inputs\":[{\"name\":\"../escape\",\"url\":\"http://"
		"127.0.0.1:1/x\"}]}"),
	JOB_ROW("JOB with an output named `/etc/passwd`", "ERROR bad_job",
		"{\"command\":\"true\",\"outputs\":[{\"name\":\"/etc/passwd\",\"url\":\"http://"
		"127.0.0.1:1/x\"}]}"),
	JOB_ROW("JOB with `stdin` at `file:///etc/shadow`", "ERROR bad_job",
		"{\"command\":\"true\",\"stdin\":\"file:///etc/shadow\"}"),
	JOB_ROW("JOB with an input at `gopher://`", "ERROR bad_job",
		"{\"command\":\"true\",\"inputs\":[{\"name\":\"a\",\"url\":\"gopher://127.0.0.1/"
		"x\"}]}"),
	SCENARIO_ROW("JOB with an input on a host that is not the client (192.0.2.1)",
		     "DONE callback_refused", sc_disallowed_host),
	JOB_ROW("JOB setting `LD_PRELOAD` in `env`", "ERROR bad_job",
		"{\"command\":\"true\",\"env\":[\"LD_PRELOAD=/tmp/x.so\"]}"),
	JOB_ROW("JOB with `timeout_sec` 1e12", "ERROR bad_job",
		"{\"command\":\"true\",\"timeout_sec\":1000000000000}"),

	/* HTTP */
	HTTP_ROW("GET of an unknown path", "HTTP 404",
		 "GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
	HTTP_ROW("upgrade without `Sec-WebSocket-Key`", "HTTP 400",
		 "GET /broker HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
		 "Sec-WebSocket-Version: 13\r\n\r\n"),
	HTTP_ROW("upgrade with `Sec-WebSocket-Version: 8`", "HTTP 426",
		 "GET /broker HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
		 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n"),
	HTTP_ROW("request line that is not HTTP (a TLS hello)", "HTTP 400",
		 "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"),
	HTTP_ROW("HTTP/2.0 request line", "HTTP 505", "GET /status HTTP/2.0\r\nHost: x\r\n\r\n"),
	HTTP_ROW("request line with a word after the version", "HTTP 400",
		 "GET /broker HTTP/1.1 extra\r\nHost: x\r\n\r\n"),
	HTTP_ROW("request line without a version", "HTTP 400", "GET /broker\r\nHost: x\r\n\r\n"),
	HTTP_ROW("request head of 64 KiB", "HTTP 431", NULL),
	SCENARIO_ROW("slowloris: an upgrade head that never ends", "cut", sc_slowloris),
};

#define NROWS ((int)(sizeof rows / sizeof rows[0]))

static char huge_head[70000];

/* Rows whose data is built at run time. */
static void build_inputs(void)
{
	memset(big, 'a', sizeof big);
	big[0] = '"';
	big[sizeof big - 1] = '"';
	memset(half, 'b', sizeof half);
	memset(p126, 'p', sizeof p126);
	memset(long_id, 'i', sizeof long_id - 1);
	snprintf(long_id_msg, sizeof long_id_msg,
		 "{\"type\":\"WANT\",\"job_id\":\"%.8000s\",\"service\":\"cat\"}", long_id);
	for (int i = 0; i < 2000; i++)
		deep_json[i] = '[';
	int n = snprintf(huge_head, sizeof huge_head, "GET /status HTTP/1.1\r\nHost: x\r\n");
	while (n < 65 * 1024)
		n += snprintf(huge_head + n, sizeof huge_head - (size_t)n, "X-Pad: %0100d\r\n", 0);
	snprintf(huge_head + n, sizeof huge_head - (size_t)n, "\r\n");
	for (int i = 0; i < NROWS; i++) {
		if (rows[i].kind == HTTP && !rows[i].text)
			rows[i].text = huge_head;
		/* SCENARIO rows with a text and no function are JOB descriptions */
	}
}

static void run_row(const struct row *r, struct answer *a)
{
	memset(a, 0, sizeof *a);
	switch (r->kind) {
	case FRAMES: run_frames(r, a); break;
	case MESSAGE: run_message(r, a); break;
	case HTTP: run_http(r, a); break;
	case SCENARIO:
		if (r->run)
			r->run(a);
		else
			job_with(a, r->text ? r->text : "\"true\"");
		break;
	}
}

/* The bystander runs a whole job: the instance still serves everybody. */
static int bystander_ok(void)
{
	static int n;
	char id[32];
	snprintf(id, sizeof id, "by%d", n++);
	struct json_object *d = tc_run_job(bystander, id, "cat", "{\"command\":\"true\"}", 5000);
	int ok = d && tc_int(tc_receipt(d), "exit_code") == 0;
	if (d)
		json_object_put(d);
	return ok;
}

static void test_rows(void)
{
	char body[4096];
	snprintf(body, sizeof body,
		 "maxFrameBytes: %d\nmaxWantsPerConnection: %d\n"
		 "handshakeTimeoutSec: 2\n%s",
		 MAX_FRAME, MAX_WANTS_PER_CONN, harness_default_body(2));
	CU_ASSERT_FATAL(harness_start(&D, 2, body, NULL) == 0);
	bystander = tc_connect(D.port, "bystander");
	CU_ASSERT_FATAL(bystander != NULL);

	int failed = 0;
	const char *only = getenv("BAD_INPUT_ROW"); /* one row, for debugging */
	for (int i = 0; i < NROWS; i++) {
		struct answer a;
		if (only && atoi(only) != i + 1)
			continue;
		int pids_before[2], pids_after[2];
		harness_handler_pids(&D, pids_before, 2);
		run_row(&rows[i], &a);
		int match = strcmp(a.text, rows[i].expect) == 0;
		int others = bystander_ok();
		/* no handler died on the way (a replacement would hide it) */
		harness_handler_pids(&D, pids_after, 2);
		others = others && pids_before[0] == pids_after[0] &&
			 pids_before[1] == pids_after[1];
		if (!match || !others) {
			fprintf(stderr, "row %d (%s): expected \"%s\", got \"%s\"%s\n", i + 1,
				rows[i].input, rows[i].expect, a.text,
				others ? ""
				       : "; the bystander's job failed or a handler was replaced");
			failed++;
		}
		CU_ASSERT(match);
		CU_ASSERT(others);
	}
	fprintf(stderr, "bad input: %d rows, %d failed\n", NROWS, failed);
	tc_close(bystander);

	struct json_object *st = harness_status(&D), *v;
	CU_ASSERT_FATAL(st != NULL);
	CU_ASSERT(json_object_object_get_ex(st, "book_consistent", &v) &&
		  json_object_get_boolean(v));
	json_object_put(st);
	if (CU_get_number_of_failures() > 0)
		harness_dump_log(&D);
	CU_ASSERT(harness_stop_clean(&D) == 0);
}

/* The Markdown table, as docs/security.md holds it. */
static size_t print_table(char *out, size_t cap)
{
	size_t n = (size_t)snprintf(out, cap, "| # | input | answer |\n|---|---|---|\n");
	for (int i = 0; i < NROWS && n < cap; i++) {
		const char *e = rows[i].expect;
		char answer[96];
		if (strncmp(e, "ERROR ", 6) == 0)
			snprintf(answer, sizeof answer, "ERROR `%s`, connection open", e + 6);
		else if (strncmp(e, "close ", 6) == 0)
			snprintf(answer, sizeof answer, "close code %s", e + 6);
		else if (strncmp(e, "DONE ", 5) == 0)
			snprintf(answer, sizeof answer, "DONE, receipt error `%s`; connection open",
				 e + 5);
		else if (strcmp(e, "cut") == 0)
			snprintf(answer, sizeof answer, "connection closed");
		else if (strcmp(e, "pongs") == 0)
			snprintf(answer, sizeof answer, "every ping answered, connection open");
		else if (strcmp(e, "stops reading") == 0)
			snprintf(answer, sizeof answer,
				 "the server stops reading once 4 MiB of "
				 "answers wait (memory bounded)");
		else
			snprintf(answer, sizeof answer, "%s", e);
		n += (size_t)snprintf(out + n, cap - n, "| %d | %s | %s |\n", i + 1, rows[i].input,
				      answer);
	}
	return n;
}

static void test_table_in_docs(void)
{
	static char table[16384], doc[1 << 17];
	char path[512];
	const char *top = getenv("TOP_SRCDIR");
	print_table(table, sizeof table);
	snprintf(path, sizeof path, "%s/docs/security.md", top ? top : ".");
	FILE *f = fopen(path, "r");
	CU_ASSERT_FATAL(f != NULL);
	size_t n = fread(doc, 1, sizeof doc - 1, f);
	doc[n] = '\0';
	fclose(f);
	CU_ASSERT(strstr(doc, table) != NULL);
	if (!strstr(doc, table))
		fprintf(stderr, "docs/security.md does not hold the table; expected:\n%s", table);
	CU_ASSERT(NROWS >= 40);
}

int main(int argc, char **argv)
{
	build_inputs();
	if (argc > 1 && strcmp(argv[1], "--table") == 0) {
		static char table[16384];
		print_table(table, sizeof table);
		fputs(table, stdout);
		return 0;
	}
	static const struct test_case cases[] = {
		{ "every row answers as the table says; others keep working", test_rows },
		{ "docs/security.md holds the table", test_table_in_docs },
		{ NULL, NULL },
	};
	return run_suite("bad input", cases);
}
