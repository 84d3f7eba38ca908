/*
 * test_net.c - unit tests of the handler network layer: HTTP request heads
 * (http_head), the websocket handshake and bearer check (ws_handshake),
 * UTF-8 validation, and websocket sessions (ws) driven by the test client
 * (tests/lib/wsclient) over socketpairs and over TCP.
 *
 * Session tests: the session runs on an event_base in the main thread; the
 * client runs a script in a second thread and only records what it saw;
 * all CUnit assertions are made in the main thread after the join.
 * Exit status: 0 when every test passed, 1 otherwise.
 */
#include "autoconfig.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/utf8.h"
#include "net/http_head.h"
#include "net/ws.h"
#include "net/ws_handshake.h"
#include "wsclient.h"

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ======================================================================
 * http_head
 * ====================================================================== */

static struct http_head_parser hp;

/* Feeds s in chunks of chunk bytes; *used gets the bytes consumed. */
static int feed(struct http_head_parser *p, const char *s, size_t len, size_t chunk, size_t *used)
{
	size_t off = 0;
	int r = HTTP_HEAD_NEED_MORE;

	*used = 0;
	while (off < len) {
		size_t n = len - off < chunk ? len - off : chunk, c = 0;

		r = http_head_feed(p, s + off, n, &c);
		*used += c;
		if (r != HTTP_HEAD_NEED_MORE)
			break;
		CU_ASSERT_EQUAL(c, n);
		off += n;
	}
	return r;
}

static int parse(const char *s, size_t chunk, size_t *used)
{
	size_t u;

	http_head_parser_init(&hp);
	return feed(&hp, s, strlen(s), chunk, used ? used : &u);
}

static const char simple_get[] = "GET /broker?client=a%20b HTTP/1.1\r\n"
				 "Host: example.org:8080\r\n"
				 "Upgrade: websocket\r\n"
				 "Connection: keep-alive, Upgrade\r\n"
				 "\r\n";

static void check_simple(const struct http_head *h)
{
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	CU_ASSERT_STRING_EQUAL(h->method, "GET");
	CU_ASSERT_EQUAL(h->method_id, HTTP_GET);
	CU_ASSERT_STRING_EQUAL(h->target, "/broker?client=a%20b");
	CU_ASSERT_STRING_EQUAL(h->path, "/broker");
	CU_ASSERT_STRING_EQUAL(h->query, "client=a%20b");
	CU_ASSERT_EQUAL(h->version_major, 1);
	CU_ASSERT_EQUAL(h->version_minor, 1);
	CU_ASSERT_EQUAL(h->nheaders, 3);
	CU_ASSERT_STRING_EQUAL(h->headers[0].name, "Host");
	CU_ASSERT_STRING_EQUAL(h->headers[0].value, "example.org:8080");
	CU_ASSERT_STRING_EQUAL(http_header_get(h, "upgrade"), "websocket");
	CU_ASSERT_FALSE(h->has_content_length);
	CU_ASSERT_FALSE(h->chunked);
}

static void test_head_simple(void)
{
	size_t used;

	CU_ASSERT_EQUAL(parse(simple_get, 1 << 20, &used), HTTP_HEAD_DONE);
	CU_ASSERT_EQUAL(used, strlen(simple_get));
	check_simple(http_head_get(&hp));
	CU_ASSERT_EQUAL(http_head_status(&hp), 0);
}

static void test_head_bytewise(void)
{
	size_t used;

	for (size_t chunk = 1; chunk <= 7; chunk++) {
		CU_ASSERT_EQUAL(parse(simple_get, chunk, &used), HTTP_HEAD_DONE);
		CU_ASSERT_EQUAL(used, strlen(simple_get));
		check_simple(http_head_get(&hp));
	}
}

static void test_head_headers(void)
{
	const char *req = "GET / HTTP/1.1\r\n"
			  "hOsT:   spaced.example   \r\n"
			  "X-Empty:\r\n"
			  "X-Blank:    \r\n"
			  "Connection: keep-alive,Upgradex\r\n"
			  "connection: ,, UPGRADE ,\r\n"
			  "\r\n";
	const struct http_head *h;

	CU_ASSERT_EQUAL_FATAL(parse(req, 3, NULL), HTTP_HEAD_DONE);
	h = http_head_get(&hp);
	CU_ASSERT_EQUAL(h->nheaders, 5);
	CU_ASSERT_STRING_EQUAL(http_header_get(h, "HOST"), "spaced.example");
	CU_ASSERT_STRING_EQUAL(http_header_get(h, "x-empty"), "");
	CU_ASSERT_STRING_EQUAL(http_header_get(h, "X-BLANK"), "");
	CU_ASSERT_PTR_NULL(http_header_get(h, "X-Missing"));
	CU_ASSERT_EQUAL(http_header_count(h, "Connection"), 2);
	CU_ASSERT_STRING_EQUAL(http_header_get(h, "Connection"), "keep-alive,Upgradex");
	CU_ASSERT_TRUE(http_header_has_token(h, "Connection", "upgrade"));
	CU_ASSERT_TRUE(http_header_has_token(h, "connection", "Keep-Alive"));
	CU_ASSERT_FALSE(http_header_has_token(h, "Connection", "close"));
	CU_ASSERT_STRING_EQUAL(h->path, "/");
	CU_ASSERT_STRING_EQUAL(h->query, "");
}

static void test_token_list(void)
{
	CU_ASSERT_TRUE(http_token_list_has("keep-alive, Upgrade", "upgrade"));
	CU_ASSERT_TRUE(http_token_list_has("Upgrade", "upgrade"));
	CU_ASSERT_TRUE(http_token_list_has(" \tupgrade\t ", "UPGRADE"));
	CU_ASSERT_TRUE(http_token_list_has("a,,b, ,upgrade", "upgrade"));
	CU_ASSERT_FALSE(http_token_list_has("keep-alive, Upgradex", "upgrade"));
	CU_ASSERT_FALSE(http_token_list_has("xupgrade", "upgrade"));
	CU_ASSERT_FALSE(http_token_list_has("up grade", "upgrade"));
	CU_ASSERT_FALSE(http_token_list_has("", "upgrade"));
	CU_ASSERT_FALSE(http_token_list_has(NULL, "upgrade"));
	CU_ASSERT_FALSE(http_token_list_has("a, b", ""));
}

/* A head of exactly total bytes: one padding header fills it up. */
static char *head_of_size(size_t total)
{
	const char *start = "GET / HTTP/1.1\r\nHost: h\r\nX-Pad: ";
	const char *end = "\r\n\r\n";
	size_t fixed = strlen(start) + strlen(end);
	char *s = malloc(total + 1);

	CU_ASSERT_FATAL(s != NULL && total > fixed);
	strcpy(s, start);
	memset(s + strlen(start), 'p', total - fixed);
	strcpy(s + total - strlen(end), end);
	return s;
}

static void test_head_size_limit(void)
{
	char *s;
	size_t used;

	s = head_of_size(HTTP_HEAD_MAX);
	CU_ASSERT_EQUAL(parse(s, 1 << 20, &used), HTTP_HEAD_DONE);
	CU_ASSERT_EQUAL(used, HTTP_HEAD_MAX);
	CU_ASSERT_EQUAL(strlen(http_header_get(http_head_get(&hp), "X-Pad")), HTTP_HEAD_MAX - 36);
	free(s);

	s = head_of_size(HTTP_HEAD_MAX + 1);
	CU_ASSERT_EQUAL(parse(s, 1 << 20, &used), HTTP_HEAD_ERROR);
	CU_ASSERT_EQUAL(http_head_status(&hp), 431);
	CU_ASSERT_EQUAL(parse(s, 1, &used), HTTP_HEAD_ERROR);
	CU_ASSERT_EQUAL(http_head_status(&hp), 431);
	CU_ASSERT(used <= HTTP_HEAD_MAX);
	free(s);

	/* many lines: still 431 */
	char big[20000] = "GET / HTTP/1.1\r\n";
	for (int i = 0; i < 30; i++) {
		char line[520];
		snprintf(line, sizeof line, "X-H%d: %0500d\r\n", i, 0);
		strcat(big, line);
	}
	strcat(big, "\r\n");
	CU_ASSERT_EQUAL(parse(big, 1000, &used), HTTP_HEAD_ERROR);
	CU_ASSERT_EQUAL(http_head_status(&hp), 431);
}

static void test_head_too_many_headers(void)
{
	char req[4096] = "GET / HTTP/1.1\r\n";

	for (int i = 0; i < HTTP_HEAD_MAX_HEADERS; i++) {
		char line[32];
		snprintf(line, sizeof line, "X-%d: v\r\n", i);
		strcat(req, line);
	}
	strcat(req, "\r\n");
	CU_ASSERT_EQUAL(parse(req, 1 << 20, NULL), HTTP_HEAD_DONE);
	CU_ASSERT_EQUAL(http_head_get(&hp)->nheaders, HTTP_HEAD_MAX_HEADERS);

	req[strlen(req) - 2] = '\0';
	strcat(req, "X-One-Too-Many: v\r\n\r\n");
	CU_ASSERT_EQUAL(parse(req, 1 << 20, NULL), HTTP_HEAD_ERROR);
	CU_ASSERT_EQUAL(http_head_status(&hp), 431);
}

static void test_head_long_uri(void)
{
	static char req[12000];

	for (size_t len = HTTP_URI_MAX; len <= HTTP_URI_MAX + 1; len++) {
		strcpy(req, "GET /");
		memset(req + 5, 'u', len - 1);
		strcpy(req + 4 + len, " HTTP/1.1\r\nHost: h\r\n\r\n");
		int r = parse(req, 1 << 20, NULL);
		if (len == HTTP_URI_MAX) {
			CU_ASSERT_EQUAL(r, HTTP_HEAD_DONE);
			CU_ASSERT_EQUAL(strlen(http_head_get(&hp)->target), HTTP_URI_MAX);
		} else {
			CU_ASSERT_EQUAL(r, HTTP_HEAD_ERROR);
			CU_ASSERT_EQUAL(http_head_status(&hp), 414);
		}
	}
	/* a URI longer than the whole head limit is still 414, fed any way */
	strcpy(req, "GET /");
	memset(req + 5, 'u', 10000);
	strcpy(req + 10005, " HTTP/1.1\r\n\r\n");
	CU_ASSERT_EQUAL(parse(req, 1 << 20, NULL), HTTP_HEAD_ERROR);
	CU_ASSERT_EQUAL(http_head_status(&hp), 414);
	CU_ASSERT_EQUAL(parse(req, 1, NULL), HTTP_HEAD_ERROR);
	CU_ASSERT_EQUAL(http_head_status(&hp), 414);
	CU_ASSERT_EQUAL(parse(req, 4095, NULL), HTTP_HEAD_ERROR);
	CU_ASSERT_EQUAL(http_head_status(&hp), 414);
}

static void test_head_bad_version(void)
{
	CU_ASSERT_EQUAL(parse("GET / HTTP/2.0\r\nHost: h\r\n\r\n", 1 << 20, NULL), HTTP_HEAD_ERROR);
	CU_ASSERT_EQUAL(http_head_status(&hp), 505);
	CU_ASSERT_EQUAL(parse("GET / HTTP/0.9\r\n\r\n", 1 << 20, NULL), HTTP_HEAD_ERROR);
	CU_ASSERT_EQUAL(http_head_status(&hp), 505);
	CU_ASSERT_EQUAL(parse("GET / HTTP/9.9\r\n\r\n", 1, NULL), HTTP_HEAD_ERROR);
	CU_ASSERT_EQUAL(http_head_status(&hp), 505);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.0\r\n\r\n", 1 << 20, NULL), HTTP_HEAD_DONE);
	CU_ASSERT_EQUAL(http_head_get(&hp)->version_minor, 0);
	CU_ASSERT_FALSE(http_head_get(&hp)->keep_alive);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.9\r\n\r\n", 1 << 20, NULL), HTTP_HEAD_DONE);
}

/* A request line of another shape than method SP target SP HTTP/d.d is
 * malformed (RFC 9112 3): 400, not 505, whatever version it names, however
 * the bytes are cut into feeds. */
static void test_head_bad_request_line(void)
{
	static const char *bad[] = {
		"GET /broker HTTP/1.1 extra\r\nHost: h\r\n\r\n",
		"GET /broker HTTP/1.1 \r\nHost: h\r\n\r\n",
		"GET /broker\r\nHost: h\r\n\r\n",
		"GET /broker\r\n\r\n",
		"GET /broker\n\n",
		"GET /?a=b\r\n\r\n",
		"GET / HTTP/11.1\r\n\r\n",
		"GET / HTTP/1.10\r\n\r\n",
		"GET / HTTP/1\r\n\r\n",
		"GET / HTTP/2\r\n\r\n",
		"GET / HTTP/x.1\r\n\r\n",
	};
	static const size_t chunks[] = { 1 << 20, 1, 2, 3, 7 };

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
			int r = parse(bad[i], chunks[c], NULL);
			CU_ASSERT_EQUAL(r, HTTP_HEAD_ERROR);
			CU_ASSERT_EQUAL(http_head_status(&hp), 400);
			if (r != HTTP_HEAD_ERROR || http_head_status(&hp) != 400)
				fprintf(stderr, "\n  %s (feeds of %zu): %d, status %d\n", bad[i],
					chunks[c], r, http_head_status(&hp));
		}
}

static void test_head_garbage(void)
{
	static const char *bad[] = {
		"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", /* TLS hello */
		"HELLO / HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.1\r\nNo colon here\r\n\r\n",
		"GET / HTTP/1.1\r\nX: a\x01"
		"b\r\n\r\n",
		"GET / HTTP/1.1\r\nBad Name: v\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
		"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
		"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
		"GET / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
		"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
		"CONNECT example.org:443 HTTP/1.1\r\n\r\n",
		"GET /a\x7f HTTP/1.1\r\n\r\n",
		"GET /caf\xC3\xA9 HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.1\r\nX\t: v\r\n\r\n",
		"GET / HTTP/1.1\r\nX-\xC3\xA9: v\r\n\r\n",
		"GET / HTTP/1.1\rX\n\r\n",
	};
	size_t used;

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int r = parse(bad[i], 1 << 20, &used);
		CU_ASSERT_EQUAL(r, HTTP_HEAD_ERROR);
		CU_ASSERT_EQUAL(http_head_status(&hp), 400);
		if (r != HTTP_HEAD_ERROR || http_head_status(&hp) != 400)
			fprintf(stderr, "\n  garbage case %zu: result %d status %d\n", i, r,
				http_head_status(&hp));
		CU_ASSERT_PTR_NULL(http_head_get(&hp));
		/* sticky */
		CU_ASSERT_EQUAL(http_head_feed(&hp, "GET", 3, &used), HTTP_HEAD_ERROR);
		CU_ASSERT_EQUAL(used, 0);
	}
	http_head_parser_init(&hp);
	CU_ASSERT_EQUAL(http_head_feed(&hp, "", 0, &used), HTTP_HEAD_NEED_MORE);
	CU_ASSERT_EQUAL(http_head_status(&hp), 0);
	CU_ASSERT_PTR_NULL(http_head_get(&hp));
}

/* A CR not followed by LF is no line end (found by fuzz_http_head: the
 * head ended at CR CR and took the byte after it as its end). */
static void test_head_bare_cr(void)
{
	static const char *bad[] = {
		"GET / HTTP/1.1\r\nHost: x\r\n\r\r",
		"GET / HTTP/1.1\r\nHost: x\r\n\r\x81\x85",
		"GET / HTTP/1.1\r\nHost: x\rY: z\r\n\r\n",
		"GET / HTTP/1.1\r\r\n\r\n",
	};
	size_t used;

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		for (size_t chunk = 1; chunk <= 1 << 20; chunk <<= 20) {
			int r = parse(bad[i], chunk, &used);

			CU_ASSERT_EQUAL(r, HTTP_HEAD_ERROR);
			CU_ASSERT_EQUAL(http_head_status(&hp), 400);
			if (r != HTTP_HEAD_ERROR)
				fprintf(stderr, "\n  bare CR case %zu (chunk %zu): result %d\n", i,
					chunk, r);
		}
	}
	/* bare LF line ends stay accepted, and a CRLF split across feeds */
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\nHost: x\n\n", 1 << 20, &used), HTTP_HEAD_DONE);
	CU_ASSERT_EQUAL(parse(simple_get, 1, &used), HTTP_HEAD_DONE);
	CU_ASSERT_EQUAL(used, strlen(simple_get));
}

static void test_head_pipelined(void)
{
	char buf[512];
	size_t used, hl = strlen(simple_get);

	snprintf(buf, sizeof buf, "%s%s", simple_get, "\x81\x85garbage-or-frame");
	CU_ASSERT_EQUAL(parse(buf, 1 << 20, &used), HTTP_HEAD_DONE);
	CU_ASSERT_EQUAL(used, hl);
	check_simple(http_head_get(&hp));
	/* once done, nothing more is taken */
	CU_ASSERT_EQUAL(http_head_feed(&hp, buf + used, strlen(buf) - used, &used), HTTP_HEAD_DONE);
	CU_ASSERT_EQUAL(used, 0);

	/* split in two feeds, the second carrying the end of the head and more */
	http_head_parser_init(&hp);
	CU_ASSERT_EQUAL(http_head_feed(&hp, buf, hl - 3, &used), HTTP_HEAD_NEED_MORE);
	CU_ASSERT_EQUAL(used, hl - 3);
	CU_ASSERT_EQUAL(http_head_feed(&hp, buf + hl - 3, strlen(buf) - hl + 3, &used),
			HTTP_HEAD_DONE);
	CU_ASSERT_EQUAL(used, 3);

	/* a second request right behind the first */
	snprintf(buf, sizeof buf, "GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\n\r\n");
	CU_ASSERT_EQUAL(parse(buf, 1 << 20, &used), HTTP_HEAD_DONE);
	CU_ASSERT_EQUAL(used, strlen("GET /a HTTP/1.1\r\nHost: h\r\n\r\n"));
	CU_ASSERT_STRING_EQUAL(http_head_get(&hp)->path, "/a");

	/* a body stays with the caller */
	snprintf(buf, sizeof buf, "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello");
	CU_ASSERT_EQUAL(parse(buf, 1 << 20, &used), HTTP_HEAD_DONE);
	CU_ASSERT_EQUAL(used, strlen(buf) - 5);
	CU_ASSERT_TRUE(http_head_get(&hp)->has_content_length);
	CU_ASSERT_EQUAL(http_head_get(&hp)->content_length, 5);
	CU_ASSERT_STRING_EQUAL(http_head_get(&hp)->method, "POST");

	snprintf(buf, sizeof buf,
		 "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, "
		 "chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
	CU_ASSERT_EQUAL(parse(buf, 1 << 20, &used), HTTP_HEAD_DONE);
	CU_ASSERT_TRUE(http_head_get(&hp)->chunked);
	CU_ASSERT_EQUAL(buf[used], '5');
}

static void test_head_targets(void)
{
	CU_ASSERT_EQUAL_FATAL(
		parse("GET http://example.org:81/status?x=1 HTTP/1.1\r\nHost: h\r\n\r\n", 1 << 20,
		      NULL),
		HTTP_HEAD_DONE);
	CU_ASSERT_STRING_EQUAL(http_head_get(&hp)->path, "/status");
	CU_ASSERT_STRING_EQUAL(http_head_get(&hp)->query, "x=1");
	CU_ASSERT_EQUAL_FATAL(parse("GET /a%2Fb?? HTTP/1.1\r\n\r\n", 1 << 20, NULL),
			      HTTP_HEAD_DONE);
	CU_ASSERT_STRING_EQUAL(http_head_get(&hp)->path, "/a%2Fb");
	CU_ASSERT_STRING_EQUAL(http_head_get(&hp)->query, "?");
	CU_ASSERT_EQUAL_FATAL(parse("\r\nGET /x? HTTP/1.1\r\n\r\n", 1 << 20, NULL), HTTP_HEAD_DONE);
	CU_ASSERT_STRING_EQUAL(http_head_get(&hp)->path, "/x");
	CU_ASSERT_STRING_EQUAL(http_head_get(&hp)->query, "");
	CU_ASSERT_EQUAL_FATAL(parse("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", 1 << 20, NULL),
			      HTTP_HEAD_DONE);
	CU_ASSERT_STRING_EQUAL(http_head_get(&hp)->path, "*");
	/* bare LF line ends are tolerated by http-parser */
	CU_ASSERT_EQUAL(parse("GET /lf HTTP/1.1\nHost: h\n\nrest", 1 << 20, NULL), HTTP_HEAD_DONE);
}

static void test_query_param(void)
{
	const char *q = "a=1&client=a%20b+c&x&empty=&cl%69ent=second&e=%C3%A9&a=2";
	char out[64];

	CU_ASSERT_EQUAL(http_query_param(q, "client", out, sizeof out), 5);
	CU_ASSERT_STRING_EQUAL(out, "a b c");
	CU_ASSERT_EQUAL(http_query_param(q, "a", out, sizeof out), 1);
	CU_ASSERT_STRING_EQUAL(out, "1");
	CU_ASSERT_EQUAL(http_query_param(q, "x", out, sizeof out), 0);
	CU_ASSERT_STRING_EQUAL(out, "");
	CU_ASSERT_EQUAL(http_query_param(q, "empty", out, sizeof out), 0);
	CU_ASSERT_EQUAL(http_query_param(q, "e", out, sizeof out), 2);
	CU_ASSERT_STRING_EQUAL(out, "\xC3\xA9");
	CU_ASSERT_EQUAL(http_query_param(q, "missing", out, sizeof out), HTTP_QP_ABSENT);
	CU_ASSERT_EQUAL(http_query_param("", "a", out, sizeof out), HTTP_QP_ABSENT);
	CU_ASSERT_EQUAL(http_query_param("&&", "a", out, sizeof out), HTTP_QP_ABSENT);
	CU_ASSERT_EQUAL(http_query_param("ab=1", "a", out, sizeof out), HTTP_QP_ABSENT);
	CU_ASSERT_EQUAL(http_query_param("a=%41%4a%4A", "a", out, sizeof out), 3);
	CU_ASSERT_STRING_EQUAL(out, "AJJ");
	CU_ASSERT_EQUAL(http_query_param("a=b=c", "a", out, sizeof out), 3);
	CU_ASSERT_STRING_EQUAL(out, "b=c");

	static const char *bad[] = {
		"a=%zz", "a=%4",  "a=%",      "a=x%4g",      "a=%00",          "a=x%0Ay", "a=%7F",
		"a=%1b", "a=%C3", "a=%C0%AF", "a=%ED%A0%80", "a=%F4%90%80%80", "a=\x01",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CU_ASSERT_EQUAL(http_query_param(bad[i], "a", out, sizeof out), HTTP_QP_INVALID);

	CU_ASSERT_EQUAL(http_query_param("a=12345", "a", out, 5), HTTP_QP_TOO_LONG);
	CU_ASSERT_EQUAL(http_query_param("a=12345", "a", out, 6), 5);
	CU_ASSERT_EQUAL(http_query_param("a=%31%32%33%34%35", "a", out, 5), HTTP_QP_TOO_LONG);
	CU_ASSERT_EQUAL(http_query_param("a=%31%32%33%34%35", "a", out, 6), 5);
	/* a malformed name elsewhere does not hide the one asked for */
	CU_ASSERT_EQUAL(http_query_param("%zz=1&a=ok", "a", out, sizeof out), 2);
	CU_ASSERT_STRING_EQUAL(out, "ok");
}

static void test_reason(void)
{
	CU_ASSERT_STRING_EQUAL(http_reason(400), "Bad Request");
	CU_ASSERT_STRING_EQUAL(http_reason(431), "Request Header Fields Too Large");
	CU_ASSERT_STRING_EQUAL(http_reason(426), "Upgrade Required");
	CU_ASSERT_STRING_EQUAL(http_reason(299), "");
	CU_ASSERT_STRING_EQUAL(http_reason(-1), "");
}

/* ======================================================================
 * ws_handshake
 * ====================================================================== */

static const struct http_head *head_from(const char *req)
{
	size_t used;

	http_head_parser_init(&hp);
	CU_ASSERT_EQUAL_FATAL(feed(&hp, req, strlen(req), 1 << 20, &used), HTTP_HEAD_DONE);
	return http_head_get(&hp);
}

static int check_upgrade(const char *extra_first, const char *method, const char *version,
			 const char *headers)
{
	char req[2048];

	snprintf(req, sizeof req, "%s%s /broker HTTP/%s\r\n%s\r\n", extra_first, method, version,
		 headers);
	return ws_handshake_check(head_from(req), NULL);
}

#define H_HOST "Host: server.example.com\r\n"
#define H_UPG "Upgrade: websocket\r\n"
#define H_CONN "Connection: Upgrade\r\n"
#define H_KEY "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
#define H_VER "Sec-WebSocket-Version: 13\r\n"

static void test_handshake_accept(void)
{
	char accept[WS_ACCEPT_LEN + 1];
	const struct http_head *h;

	CU_ASSERT_EQUAL(ws_handshake_accept("dGhlIHNhbXBsZSBub25jZQ==", accept), 0);
	CU_ASSERT_STRING_EQUAL(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");

	h = head_from("GET /chat HTTP/1.1\r\n" H_HOST
		      "Upgrade: WebSocket\r\nConnection: keep-alive, Upgrade\r\n"
		      "Sec-WebSocket-Key:   dGhlIHNhbXBsZSBub25jZQ==  \r\n"
		      "Origin: http://example.com\r\n"
		      "Sec-WebSocket-Protocol: chat, superchat\r\n" H_VER "\r\n");
	memset(accept, 0, sizeof accept);
	CU_ASSERT_EQUAL(ws_handshake_check(h, accept), 0);
	CU_ASSERT_STRING_EQUAL(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");

	CU_ASSERT_EQUAL(ws_handshake_accept("dGhlIHNhbXBsZSBub25jZQ=", accept), -1);
	CU_ASSERT_EQUAL(ws_handshake_accept(NULL, accept), -1);
}

static void test_handshake_errors(void)
{
	CU_ASSERT_EQUAL(check_upgrade("", "GET", "1.1", H_HOST H_UPG H_CONN H_KEY H_VER), 0);
	CU_ASSERT_EQUAL(check_upgrade("", "POST", "1.1", H_HOST H_UPG H_CONN H_KEY H_VER), 405);
	CU_ASSERT_EQUAL(check_upgrade("", "HEAD", "1.1", H_HOST H_UPG H_CONN H_KEY H_VER), 405);
	CU_ASSERT_EQUAL(check_upgrade("", "GET", "1.0", H_HOST H_UPG H_CONN H_KEY H_VER), 400);
	CU_ASSERT_EQUAL(check_upgrade("", "GET", "1.1", H_UPG H_CONN H_KEY H_VER), 400);
	CU_ASSERT_EQUAL(check_upgrade("", "GET", "1.1", H_HOST H_CONN H_KEY H_VER), 400);
	CU_ASSERT_EQUAL(
		check_upgrade("", "GET", "1.1", H_HOST "Upgrade: h2c\r\n" H_CONN H_KEY H_VER), 400);
	CU_ASSERT_EQUAL(check_upgrade("", "GET", "1.1",
				      H_HOST "Upgrade: h2c, websocket\r\n" H_CONN H_KEY H_VER),
			0);
	CU_ASSERT_EQUAL(check_upgrade("", "GET", "1.1", H_HOST H_UPG H_KEY H_VER), 400);
	CU_ASSERT_EQUAL(check_upgrade("", "GET", "1.1",
				      H_HOST H_UPG "Connection: keep-alive\r\n" H_KEY H_VER),
			400);
	CU_ASSERT_EQUAL(
		check_upgrade("", "GET", "1.1",
			      H_HOST H_UPG
			      "Connection: keep-alive\r\nConnection: upgrade\r\n" H_KEY H_VER),
		0);
	CU_ASSERT_EQUAL(check_upgrade("", "GET", "1.1", H_HOST H_UPG H_CONN H_KEY), 426);
	CU_ASSERT_EQUAL(check_upgrade("", "GET", "1.1",
				      H_HOST H_UPG H_CONN H_KEY "Sec-WebSocket-Version: 8\r\n"),
			426);
	CU_ASSERT_EQUAL(check_upgrade("", "GET", "1.1",
				      H_HOST H_UPG H_CONN H_KEY "Sec-WebSocket-Version: 13, 8\r\n"),
			426);
	CU_ASSERT_EQUAL(check_upgrade("", "GET", "1.1", H_HOST H_UPG H_CONN H_KEY H_VER H_VER),
			426);
	CU_ASSERT_EQUAL(check_upgrade("", "GET", "1.1", H_HOST H_UPG H_CONN H_VER), 400);
	CU_ASSERT_EQUAL(check_upgrade("", "GET", "1.1", H_HOST H_UPG H_CONN H_KEY H_KEY H_VER),
			400);
	CU_ASSERT_EQUAL(check_upgrade("", "GET", "1.1",
				      H_HOST H_UPG H_CONN
				      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ\r\n" H_VER),
			400);
	CU_ASSERT_EQUAL(check_upgrade("", "GET", "1.1",
				      H_HOST H_UPG H_CONN
				      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==x\r\n" H_VER),
			400);
	CU_ASSERT_EQUAL(check_upgrade("", "GET", "1.1",
				      H_HOST H_UPG H_CONN
				      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub2!jZQ==\r\n" H_VER),
			400);
	/* 24 characters but 18 bytes: not a 16-byte key */
	CU_ASSERT_EQUAL(check_upgrade("", "GET", "1.1",
				      H_HOST H_UPG H_CONN
				      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQAA\r\n" H_VER),
			400);
	CU_ASSERT_EQUAL(check_upgrade("", "GET", "1.1",
				      H_HOST H_UPG H_CONN "Sec-WebSocket-Key: \r\n" H_VER),
			400);
}

static void test_handshake_responses(void)
{
	char buf[512];
	int n;

	n = ws_handshake_response("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", NULL, buf, sizeof buf);
	CU_ASSERT_EQUAL((size_t)n, strlen(buf));
	CU_ASSERT_STRING_EQUAL(buf, "HTTP/1.1 101 Switching Protocols\r\n"
				    "Upgrade: websocket\r\n"
				    "Connection: Upgrade\r\n"
				    "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
				    "\r\n");
	n = ws_handshake_response("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", "chat", buf, sizeof buf);
	CU_ASSERT(n > 0 && strstr(buf, "\r\nSec-WebSocket-Protocol: chat\r\n\r\n") != NULL);
	CU_ASSERT_EQUAL(
		ws_handshake_response("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", "a\r\nX: y", buf, sizeof buf),
		-1);
	CU_ASSERT_EQUAL(ws_handshake_response("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", "", buf, sizeof buf),
			-1);
	CU_ASSERT_EQUAL(ws_handshake_response("short", NULL, buf, sizeof buf), -1);
	CU_ASSERT_EQUAL(ws_handshake_response("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", NULL, buf, 50), -1);

	n = ws_handshake_error_response(426, NULL, buf, sizeof buf);
	CU_ASSERT(n > 0);
	CU_ASSERT(strncmp(buf, "HTTP/1.1 426 Upgrade Required\r\n", 31) == 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\r\nSec-WebSocket-Version: 13\r\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\r\nConnection: close\r\n"));
	n = ws_handshake_error_response(405, NULL, buf, sizeof buf);
	CU_ASSERT(n > 0 && strstr(buf, "\r\nAllow: GET\r\n") != NULL);
	n = ws_handshake_error_response(401, "WWW-Authenticate: Bearer\r\n", buf, sizeof buf);
	CU_ASSERT(n > 0 && strstr(buf, "\r\nWWW-Authenticate: Bearer\r\n") != NULL);
	/* the body is what Content-Length says */
	const char *body = strstr(buf, "\r\n\r\n") + 4;
	const char *cl = strstr(buf, "Content-Length: ") + 16;
	CU_ASSERT_EQUAL(strtoul(cl, NULL, 10), strlen(body));
	CU_ASSERT_EQUAL(ws_handshake_error_response(400, NULL, buf, 20), -1);
	CU_ASSERT_EQUAL(ws_handshake_error_response(42, NULL, buf, sizeof buf), -1);
}

static void test_bearer(void)
{
	CU_ASSERT_TRUE(ws_bearer_ok("Bearer s3cret-token", "s3cret-token"));
	CU_ASSERT_TRUE(ws_bearer_ok("bearer s3cret-token", "s3cret-token"));
	CU_ASSERT_TRUE(ws_bearer_ok("BEARER   s3cret-token  ", "s3cret-token"));
	CU_ASSERT_FALSE(ws_bearer_ok("Bearer s3cret-toke", "s3cret-token"));
	CU_ASSERT_FALSE(ws_bearer_ok("Bearer s3cret-tokenn", "s3cret-token"));
	CU_ASSERT_FALSE(ws_bearer_ok("Bearer S3cret-token", "s3cret-token"));
	CU_ASSERT_FALSE(ws_bearer_ok("Basic s3cret-token", "s3cret-token"));
	CU_ASSERT_FALSE(ws_bearer_ok("Bearers3cret-token", "s3cret-token"));
	CU_ASSERT_FALSE(ws_bearer_ok("s3cret-token", "s3cret-token"));
	CU_ASSERT_FALSE(ws_bearer_ok("Bearer ", "s3cret-token"));
	CU_ASSERT_FALSE(ws_bearer_ok("Bearer", "s3cret-token"));
	CU_ASSERT_FALSE(ws_bearer_ok(NULL, "s3cret-token"));
	CU_ASSERT_FALSE(ws_bearer_ok("Bearer ", ""));
	CU_ASSERT_FALSE(ws_bearer_ok("Bearer x", ""));
	CU_ASSERT_FALSE(ws_bearer_ok("Bearer x", NULL));
}

/* ======================================================================
 * utf8
 * ====================================================================== */

struct u8case {
	const char *s;
	size_t len; /* 0: strlen */
};

static void test_utf8(void)
{
	static const struct u8case valid[] = {
		{ "", 0 },
		{ "plain ascii", 0 },
		{ "\x00", 1 },
		{ "a\x00"
		  "b",
		  3 },
		{ "\x7F", 0 },
		{ "\xC2\x80", 0 },
		{ "\xDF\xBF", 0 }, /* U+0080, U+07FF */
		{ "\xE0\xA0\x80", 0 },
		{ "\xEF\xBF\xBF", 0 }, /* U+0800, U+FFFF */
		{ "\xED\x9F\xBF", 0 },
		{ "\xEE\x80\x80", 0 }, /* around surrogates */
		{ "\xF0\x90\x80\x80", 0 },
		{ "\xF4\x8F\xBF\xBF", 0 }, /* U+10000, U+10FFFF */
		{ "\xE2\x82\xAC \xC3\xA9t\xC3\xA9 \xF0\x9F\x98\x80", 0 },
		{ "\xEF\xBB\xBF"
		  "bom",
		  0 },
		/* ASCII runs of eight and more (read eight bytes at a time) */
		{ "01234567\xE2\x82\xAC"
		  "89abcdef\xC3\xA9",
		  0 },
		{ "0123456789abcdef\x00g", 18 },
	};
	static const struct u8case invalid[] = {
		{ "\x80", 0 },
		{ "\xBF", 0 },
		{ "a\x80"
		  "b",
		  0 }, /* lone continuation */
		{ "\xC0\x80", 0 },
		{ "\xC1\xBF", 0 }, /* overlong 2 */
		{ "\xE0\x80\x80", 0 },
		{ "\xE0\x9F\xBF", 0 }, /* overlong 3 */
		{ "\xF0\x80\x80\x80", 0 },
		{ "\xF0\x8F\xBF\xBF", 0 }, /* overlong 4 */
		{ "\xED\xA0\x80", 0 },
		{ "\xED\xBF\xBF", 0 },             /* surrogates */
		{ "\xED\xA0\xBD\xED\xB8\x80", 0 }, /* CESU pair */
		{ "\xF4\x90\x80\x80", 0 },
		{ "\xF5\x80\x80\x80", 0 }, /* > U+10FFFF */
		{ "\xF7\xBF\xBF\xBF", 0 },
		{ "\xF8\x88\x80\x80\x80", 0 },
		{ "\xFE", 0 },
		{ "\xFF", 0 },
		{ "\xC2", 0 },
		{ "\xE2\x82", 0 },
		{ "\xF0\x9F\x98", 0 }, /* truncated */
		{ "x\xE2\x82", 0 },
		{ "\xE2\x82x", 0 },
		{ "\xC2\xC2\x80", 0 },
		{ "\xF0\x9F\x98\x80\x80", 0 },
		{ "0123456789\xC0\x80", 0 },
		{ "01234567\x80", 0 },
		{ "0123456789abcdef\xF0\x9F\x98", 0 },
		{ "01234567\xE2\x82\xAC"
		  "89abcdef\xFF",
		  0 },
	};

	for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++) {
		size_t len = valid[i].len ? valid[i].len : strlen(valid[i].s);
		CU_ASSERT_TRUE(utf8_valid((const unsigned char *)valid[i].s, len));
	}
	for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
		size_t len = invalid[i].len ? invalid[i].len : strlen(invalid[i].s);
		CU_ASSERT_FALSE(utf8_valid((const unsigned char *)invalid[i].s, len));
	}
	/* every prefix of a 4-byte sequence short of the whole is invalid */
	for (size_t n = 1; n < 4; n++)
		CU_ASSERT_FALSE(utf8_valid((const unsigned char *)"\xF0\x9F\x98\x80", n));
}

/* ======================================================================
 * websocket sessions: the server side on an event_base (main thread), a
 * wsclient in a thread over a socketpair
 * ====================================================================== */

#define MAXREC 64

/* What the client saw, in order; the last entry is how it ended. */
struct seen {
	int n;
	int type[MAXREC];
	uint16_t code[MAXREC];
	size_t len[MAXREC];
	char data[MAXREC][64];
	int64_t end_ms; /* when the last entry came, from the start */
};

struct owner {
	struct ws_session *s;
	int closed_calls;
	uint16_t code;
	int64_t closed_ms; /* from the start */
	int texts;
	int texts_parsed; /* of them, while wslay's context existed */
	char last[64];
	size_t last_len;
	int keep_on_close;  /* do not free the session from on_closed */
	int after_close_rc; /* ws_send_text right after ws_close */
	int drained;
	int drained_sent;
	size_t max_pending;
	int64_t t0;
	int texts_read_ended; /* texts when on_read_end last ran */
	int read_ends;        /* on_read_end calls */
};

struct run;
typedef void (*script_fn)(struct run *r, struct wsc *c);

struct run {
	struct ws_options opt;
	struct owner o;
	script_fn script;
	int aux;         /* a parameter for the script */
	const void *pre; /* in the input buffer before the session starts */
	size_t pre_len;
	int client_options;
	struct wsc *c;
	struct seen seen;
	atomic_int client_done;
	int64_t t0;
	atomic_int idle_gap;  /* the script: nothing is in flight now */
	int parser_held_idle; /* samples of ws_session_has_parser in idle gaps */
	int parser_free_idle;
	int turns_without_read_end; /* loop turns that left a text of an open
				     * session without its on_read_end */
};

static void o_text(void *arg, const char *msg, size_t len)
{
	struct owner *o = arg;
	size_t n = len < sizeof o->last - 1 ? len : sizeof o->last - 1;

	o->texts++;
	o->texts_parsed += o->s && ws_session_has_parser(o->s);
	o->last_len = len;
	memcpy(o->last, msg, n);
	o->last[n] = '\0';
	if (len == 4 && memcmp(msg, "free", 4) == 0) {
		ws_session_free(o->s);
		o->s = NULL;
	} else if (len == 3 && memcmp(msg, "bye", 3) == 0) {
		ws_close(o->s, 4000, "bye now");
		o->after_close_rc = ws_send_text(o->s, "x", 1);
	} else if (len == 8 && memcmp(msg, "farewell", 8) == 0) {
		/* a last message, then the close: both must arrive, in order */
		ws_send_text(o->s, "see you", 7);
		ws_close(o->s, 4002, NULL);
	} else if (len == 5 && memcmp(msg, "flood", 5) == 0) {
		static char big[32768];

		memset(big, 'f', sizeof big);
		for (int i = 0; i < 20; i++)
			ws_send_text(o->s, big, sizeof big);
		o->max_pending = ws_session_pending_out(o->s);
	} else {
		ws_send_text(o->s, msg, len); /* echo */
	}
}

static void o_read_end(void *arg)
{
	struct owner *o = arg;

	o->texts_read_ended = o->texts;
	o->read_ends++;
}

static void o_closed(void *arg, uint16_t code)
{
	struct owner *o = arg;

	o->closed_calls++;
	o->code = code;
	o->closed_ms = mono_ms() - o->t0;
	if (!o->keep_on_close) {
		ws_session_free(o->s);
		o->s = NULL;
	}
}

static void o_drained(void *arg)
{
	struct owner *o = arg;

	/* a message queued from on_drained must go out too */
	o->drained++;
	if (o->max_pending > 0 && !o->drained_sent) {
		o->drained_sent = 1;
		ws_send_text(o->s, "drained", 7);
	}
}

/* One wsc_recv, recorded. */
static int rec(struct run *r, struct wsc *c, int timeout_ms)
{
	struct wsc_msg m;
	struct seen *s = &r->seen;
	int t = wsc_recv(c, timeout_ms, &m);

	if (s->n < MAXREC) {
		s->type[s->n] = t;
		s->code[s->n] = m.close_code;
		s->len[s->n] = m.len;
		snprintf(s->data[s->n], sizeof s->data[0], "%s", m.data ? m.data : "");
		s->n++;
	}
	s->end_ms = mono_ms() - r->t0;
	wsc_msg_free(&m);
	return t;
}

/* Records everything until the connection ends (or nothing comes). */
static void collect(struct run *r, struct wsc *c, int timeout_ms)
{
	int t;

	do
		t = rec(r, c, timeout_ms);
	while (t > 0);
}

static void *client_main(void *arg)
{
	struct run *r = arg;

	wsc_set_options(r->c, r->client_options);
	r->script(r, r->c);
	wsc_free(r->c);
	r->c = NULL;
	atomic_store(&r->client_done, 1);
	return NULL;
}

static void wake_cb(evutil_socket_t fd, short what, void *arg)
{
}

/* Runs the loop for ms milliseconds. */
static void loop_for(struct event_base *base, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

static void test_opts(struct ws_options *opt)
{
	ws_options_default(opt);
	opt->ping_interval_ms = 0;
	opt->ping_timeout_ms = 0;
	opt->close_timeout_ms = 400;
	opt->max_msg_len = 1000;
}

/*
 * Runs r->script against a fresh session until the session is over and
 * the client is done (or budget_ms passed), then some more so that a
 * second on_closed would show.
 */
static void run_ws(struct run *r, int budget_ms)
{
	static const struct ws_callbacks cb = { .on_text = o_text,
						.on_closed = o_closed,
						.on_drained = o_drained,
						.on_read_end = o_read_end };
	struct timeval tick = { 0, 5000 };
	struct event_base *base = event_base_new();
	struct bufferevent *bev;
	struct event *wake;
	pthread_t th;
	int sv[2];
	int64_t deadline;

	CU_ASSERT_PTR_NOT_NULL_FATAL(base);
	CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	evutil_make_socket_nonblocking(sv[0]);
	evutil_make_socket_nonblocking(sv[1]);
	bev = bufferevent_socket_new(base, sv[0], BEV_OPT_CLOSE_ON_FREE);
	CU_ASSERT_PTR_NOT_NULL_FATAL(bev);
	if (r->pre_len) {
		/* as after an upgrade: bytes already read into the input buffer */
		CU_ASSERT_FATAL(write(sv[1], r->pre, r->pre_len) == (ssize_t)r->pre_len);
		bufferevent_enable(bev, EV_READ);
		for (int i = 0;
		     i < 100 && evbuffer_get_length(bufferevent_get_input(bev)) < r->pre_len; i++)
			loop_for(base, 5);
		CU_ASSERT_EQUAL_FATAL(evbuffer_get_length(bufferevent_get_input(bev)), r->pre_len);
	}
	r->t0 = r->o.t0 = mono_ms();
	r->o.after_close_rc = 99;
	r->o.s = ws_session_new(bev, &r->opt, &cb, &r->o);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r->o.s);
	r->c = wsc_from_fd(sv[1]);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r->c);
	atomic_init(&r->client_done, 0);
	atomic_init(&r->idle_gap, 0);
	wake = event_new(base, -1, EV_PERSIST, wake_cb, NULL);
	event_add(wake, &tick);
	CU_ASSERT_FATAL(pthread_create(&th, NULL, client_main, r) == 0);

	deadline = mono_ms() + budget_ms;
	while (mono_ms() < deadline) {
		if ((r->o.closed_calls > 0 || r->o.s == NULL) && atomic_load(&r->client_done))
			break;
		event_base_loop(base, EVLOOP_ONCE);
		if (r->o.s && r->o.closed_calls == 0 && r->o.texts != r->o.texts_read_ended)
			r->turns_without_read_end++;
		if (r->o.s && atomic_load(&r->idle_gap)) {
			if (ws_session_has_parser(r->o.s))
				r->parser_held_idle++;
			else
				r->parser_free_idle++;
		}
	}
	loop_for(base, r->o.keep_on_close ? r->opt.close_timeout_ms + 300 : 30);
	pthread_join(th, NULL);
	if (r->o.s) {
		if (r->o.keep_on_close && r->o.closed_calls == 1) {
			/* an ended session refuses everything quietly */
			CU_ASSERT_FALSE(ws_session_is_open(r->o.s));
			CU_ASSERT_EQUAL(ws_send_text(r->o.s, "x", 1), -1);
			ws_close(r->o.s, 1000, NULL);
		}
		ws_session_free(r->o.s);
		r->o.s = NULL;
	}
	event_free(wake);
	event_base_free(base);
}

/* run_ws with the default test options and a client that reports pongs. */
static void run_reporting_pongs(struct run *r, script_fn script, int budget_ms)
{
	test_opts(&r->opt);
	r->script = script;
	r->client_options = WSC_OPT_REPORT_PONGS;
	run_ws(r, budget_ms);
}

/* run_ws with the default test options but pings every interval_ms and a
 * ping timeout of timeout_ms (r->client_options as the caller set them). */
static void run_pinged(struct run *r, script_fn script, int interval_ms, int timeout_ms,
		       int budget_ms)
{
	test_opts(&r->opt);
	r->opt.ping_interval_ms = interval_ms;
	r->opt.ping_timeout_ms = timeout_ms;
	r->script = script;
	run_ws(r, budget_ms);
}

static void dump_seen(const char *what, const struct run *r)
{
	fprintf(stderr, "\n  %s: owner closed %d code %u texts %d; client saw:", what,
		r->o.closed_calls, r->o.code, r->o.texts);
	for (int i = 0; i < r->seen.n; i++)
		fprintf(stderr, " [%d code %u len %zu]", r->seen.type[i], r->seen.code[i],
			r->seen.len[i]);
	fprintf(stderr, "\n");
}

/* The client saw a close frame with code and then the end of the stream. */
static int saw_close_then_eof(const struct run *r, uint16_t code)
{
	const struct seen *s = &r->seen;

	for (int i = 0; i + 1 < s->n; i++)
		if (s->type[i] == WSC_CLOSE)
			return s->code[i] == code && s->type[i + 1] == WSC_EOF && i + 2 == s->n;
	return 0;
}

#define EXPECT_END(r, closecode)                                              \
	do {                                                                  \
		CU_ASSERT_EQUAL((r)->o.closed_calls, 1);                      \
		CU_ASSERT_EQUAL((r)->o.code, (closecode));                    \
		CU_ASSERT_TRUE(saw_close_then_eof((r), (closecode)));         \
		if ((r)->o.closed_calls != 1 || (r)->o.code != (closecode) || \
		    !saw_close_then_eof((r), (closecode)))                    \
			dump_seen(__func__, (r));                             \
	} while (0)

/* ---- scripts ---------------------------------------------------------- */

static void sc_echo(struct run *r, struct wsc *c)
{
	wsc_send_text(c, "hello", 5);
	rec(r, c, 2000);
	wsc_send_text(c, "", 0);
	rec(r, c, 2000);
	wsc_send_close(c, 1000, "done");
	collect(r, c, 2000);
}

static void test_ws_echo(void)
{
	struct run r = { 0 };

	test_opts(&r.opt);
	r.script = sc_echo;
	run_ws(&r, 5000);
	CU_ASSERT_EQUAL(r.seen.type[0], WSC_TEXT);
	CU_ASSERT_STRING_EQUAL(r.seen.data[0], "hello");
	CU_ASSERT_EQUAL(r.seen.type[1], WSC_TEXT);
	CU_ASSERT_EQUAL(r.seen.len[1], 0);
	CU_ASSERT_EQUAL(r.o.texts, 2);
	/* each read's texts are followed by on_read_end (direct path too) */
	CU_ASSERT_EQUAL(r.turns_without_read_end, 0);
	CU_ASSERT_EQUAL(r.o.texts_read_ended, 2);
	EXPECT_END(&r, 1000);
}

static void sc_burst(struct run *r, struct wsc *c)
{
	static unsigned char buf[100 * 32];
	size_t off = 0;
	int ok = 1;

	for (int i = 0; i < 100; i++) {
		char m[16];
		struct wsc_frame f = { .fin = 1,
				       .opcode = WSC_TEXT,
				       .masked = 1,
				       .payload = m,
				       .len = (size_t)snprintf(m, sizeof m, "m%d", i) };
		off += wsc_build_frame(&f, buf + off, sizeof buf - off);
	}
	wsc_send_bytes(c, buf, off);
	for (int i = 0; i < 100; i++) {
		struct wsc_msg m;
		char want[16];

		snprintf(want, sizeof want, "m%d", i);
		if (wsc_recv(c, 2000, &m) != WSC_TEXT || strcmp(m.data, want) != 0)
			ok = 0;
		wsc_msg_free(&m);
	}
	r->aux = ok;
	wsc_send_close(c, 1000, NULL);
	collect(r, c, 2000);
}

static void test_ws_burst(void)
{
	struct run r = { 0 };

	test_opts(&r.opt);
	r.script = sc_burst;
	run_ws(&r, 5000);
	CU_ASSERT_EQUAL(r.aux, 1);
	CU_ASSERT_EQUAL(r.o.texts, 100);
	/* whole small text frames are taken without wslay's context, and the
	 * echoes go out without one (ws.c, take_frames and add_frame) */
	CU_ASSERT_EQUAL(r.o.texts_parsed, 0);
	EXPECT_END(&r, 1000);
}

static void send_frame(struct wsc *c, int fin, int op, const char *p, size_t len)
{
	wsc_send_raw_frame(c, fin, op, 1, p, len);
}

static void sc_fragments(struct run *r, struct wsc *c)
{
	send_frame(c, 0, WSC_TEXT, "hel", 3);
	send_frame(c, 1, WSC_PING, "p", 1); /* control frames may interleave */
	send_frame(c, 0, 0, "lo ", 3);
	send_frame(c, 0, 0, "", 0);
	send_frame(c, 1, 0, "world", 5);
	rec(r, c, 2000); /* pong */
	rec(r, c, 2000); /* hello world */
	/* a UTF-8 sequence cut across fragments */
	send_frame(c, 0, WSC_TEXT, "\xE2\x82", 2);
	send_frame(c, 1, 0, "\xAC", 1);
	rec(r, c, 2000);
	wsc_send_close(c, 1000, NULL);
	collect(r, c, 2000);
}

/*
 * wslay's context is freed between frames and created again when bytes
 * come: frames cut into pieces that arrive in separate reads (inside the
 * header, inside the payload, between the fragments of a message, with a
 * ping among them) must come out whole, and between messages the session
 * holds no parser.
 */
static void send_in_pieces(struct wsc *c, const unsigned char *b, size_t n)
{
	static const size_t cuts[] = { 1, 1, 2, 3, 5, 8 };
	size_t off = 0;

	for (size_t i = 0; off < n; i++) {
		size_t k = i < sizeof cuts / sizeof cuts[0] ? cuts[i] : n - off;

		if (k > n - off)
			k = n - off;
		wsc_send_bytes(c, b + off, k);
		off += k;
		usleep(3000); /* sleep: paced, so that each piece is most likely a read of its own */
	}
}

static void idle_gap(struct run *r)
{
	usleep(5000); /* sleep: the server's turn after the last message ends */
	atomic_store(&r->idle_gap, 1);
	usleep(40000); /* sleep: an idle window of 40 ms, sampled by the server's loop */
	atomic_store(&r->idle_gap, 0);
}

static void sc_pieces(struct run *r, struct wsc *c)
{
	static char mid[200];
	unsigned char b[512];
	size_t n = 0;

	memset(mid, 'm', sizeof mid);
	idle_gap(r);
	struct wsc_frame small = {
		.fin = 1, .opcode = WSC_TEXT, .masked = 1, .payload = "short", .len = 5
	};
	n = wsc_build_frame(&small, b, sizeof b);
	send_in_pieces(c, b, n);
	rec(r, c, 2000);
	idle_gap(r);
	struct wsc_frame longer = {
		.fin = 1, .opcode = WSC_TEXT, .masked = 1, .payload = mid, .len = sizeof mid
	}; /* 16-bit length field */
	n = wsc_build_frame(&longer, b, sizeof b);
	send_in_pieces(c, b, n);
	rec(r, c, 2000);
	idle_gap(r);
	struct wsc_frame parts[] = {
		{ .fin = 0, .opcode = WSC_TEXT, .masked = 1, .payload = "frag", .len = 4 },
		{ .fin = 1, .opcode = WSC_PING, .masked = 1, .payload = "pi", .len = 2 },
		{ .fin = 0, .opcode = 0, .masked = 1, .payload = "men", .len = 3 },
		{ .fin = 1, .opcode = 0, .masked = 1, .payload = "ted", .len = 3 },
	};
	for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
		n = wsc_build_frame(&parts[i], b, sizeof b);
		send_in_pieces(c, b, n);
	}
	rec(r, c, 2000); /* pong */
	rec(r, c, 2000); /* fragmented */
	idle_gap(r);
	wsc_send_close(c, 1000, NULL);
	collect(r, c, 2000);
}

static void test_ws_parser_on_demand(void)
{
	struct run r = { 0 };

	run_reporting_pongs(&r, sc_pieces, 8000);
	CU_ASSERT_EQUAL(r.seen.type[0], WSC_TEXT);
	CU_ASSERT_STRING_EQUAL(r.seen.data[0], "short");
	CU_ASSERT_EQUAL(r.seen.type[1], WSC_TEXT);
	CU_ASSERT_EQUAL(r.seen.len[1], 200);
	CU_ASSERT_EQUAL(r.seen.type[2], WSC_PONG);
	CU_ASSERT_STRING_EQUAL(r.seen.data[2], "pi");
	CU_ASSERT_EQUAL(r.seen.type[3], WSC_TEXT);
	CU_ASSERT_STRING_EQUAL(r.seen.data[3], "fragmented");
	CU_ASSERT_EQUAL(r.o.texts, 3);
	/* with and without the parser, each read ends with on_read_end */
	CU_ASSERT_EQUAL(r.turns_without_read_end, 0);
	CU_ASSERT_EQUAL(r.o.texts_read_ended, 3);
	/* between messages: no parser, whenever the loop looked */
	CU_ASSERT_TRUE(r.parser_free_idle > 0);
	CU_ASSERT_EQUAL(r.parser_held_idle, 0);
	EXPECT_END(&r, 1000);
}

/* An idle connection's pings and pongs never need wslay's context: the
 * server's pings, the client's ping (answered with its payload) and an
 * unsolicited pong, each whole or in pieces. */
static void sc_control_only(struct run *r, struct wsc *c)
{
	unsigned char b[64];
	int pings = 0;

	atomic_store(&r->idle_gap, 1);
	struct wsc_frame ping = {
		.fin = 1, .opcode = WSC_PING, .masked = 1, .payload = "hi", .len = 2
	};
	size_t n = wsc_build_frame(&ping, b, sizeof b);
	send_in_pieces(c, b, n);
	struct wsc_frame pong = {
		.fin = 1, .opcode = WSC_PONG, .masked = 1, .payload = "x", .len = 1
	};
	n = wsc_build_frame(&pong, b, sizeof b);
	CU_ASSERT(wsc_send_bytes(c, b, n) == 0);
	for (int64_t end = mono_ms() + 1500; pings < 3 && mono_ms() < end;)
		pings += rec(r, c, 500) == WSC_PING;
	atomic_store(&r->idle_gap, 0);
	/* and the session still works for messages */
	CU_ASSERT(wsc_send_text(c, "after", 5) == 0);
	rec(r, c, 2000);
	wsc_send_close(c, 1000, NULL);
	collect(r, c, 2000);
}

static void test_ws_control_frames_without_parser(void)
{
	struct run r = { 0 };
	int pings = 0, pongs = 0;

	r.client_options = WSC_OPT_REPORT_PONGS | WSC_OPT_REPORT_PINGS;
	run_pinged(&r, sc_control_only, 100, 0, 8000);
	for (int i = 0; i < r.seen.n; i++) {
		pings += r.seen.type[i] == WSC_PING;
		if (r.seen.type[i] == WSC_PONG) {
			pongs++;
			CU_ASSERT_STRING_EQUAL(r.seen.data[i], "hi");
		}
	}
	CU_ASSERT_EQUAL(pongs, 1);
	CU_ASSERT(pings >= 3);
	CU_ASSERT_EQUAL(r.o.texts, 1);
	CU_ASSERT_STRING_EQUAL(r.o.last, "after");
	CU_ASSERT_TRUE(r.parser_free_idle > 0);
	CU_ASSERT_EQUAL(r.parser_held_idle, 0);
	EXPECT_END(&r, 1000);
}

static void test_ws_fragments(void)
{
	struct run r = { 0 };

	run_reporting_pongs(&r, sc_fragments, 5000);
	CU_ASSERT_EQUAL(r.seen.type[0], WSC_PONG);
	CU_ASSERT_STRING_EQUAL(r.seen.data[0], "p");
	CU_ASSERT_EQUAL(r.seen.type[1], WSC_TEXT);
	CU_ASSERT_STRING_EQUAL(r.seen.data[1], "hello world");
	CU_ASSERT_EQUAL(r.seen.type[2], WSC_TEXT);
	CU_ASSERT_STRING_EQUAL(r.seen.data[2], "\xE2\x82\xAC");
	CU_ASSERT_EQUAL(r.o.texts, 2);
	CU_ASSERT(r.o.texts_parsed >= 1); /* a fragmented message is wslay's */
	EXPECT_END(&r, 1000);
}

/* Hostile inputs: r->aux picks one; each must end with the given code. */
struct bad_input {
	const char *name;
	uint16_t code;
	struct wsc_frame f[2];
	int nframes;
	const char *raw; /* or raw bytes */
	size_t rawlen;
};

static char p126[126];
static char p1001[1001];
static char p600[600];

static const struct bad_input bad_inputs[] = {
	{ "binary", 1003, { { 1, 0, WSC_BINARY, 1, 0, "\x01\x02", 2 } }, 1, NULL, 0 },
	{ "bad utf-8", 1007, { { 1, 0, WSC_TEXT, 1, 0, "a\xC0\xAF", 3 } }, 1, NULL, 0 },
	{ "surrogate", 1007, { { 1, 0, WSC_TEXT, 1, 0, "\xED\xA0\x80", 3 } }, 1, NULL, 0 },
	{ "truncated utf-8", 1007, { { 1, 0, WSC_TEXT, 1, 0, "ab\xE2\x82", 4 } }, 1, NULL, 0 },
	{ "bad utf-8 across fragments",
	  1007,
	  { { 0, 0, WSC_TEXT, 1, 0, "\xE2\x82", 2 }, { 1, 0, 0, 1, 0, "\x28", 1 } },
	  2,
	  NULL,
	  0 },
	{ "bad utf-8 in first fragment",
	  1007,
	  { { 0, 0, WSC_TEXT, 1, 0, "\xFF", 1 } },
	  1,
	  NULL,
	  0 },
	{ "too big", 1009, { { 1, 0, WSC_TEXT, 1, 0, p1001, 1001 } }, 1, NULL, 0 },
	{ "too big in fragments",
	  1009,
	  { { 0, 0, WSC_TEXT, 1, 0, p600, 600 }, { 1, 0, 0, 1, 0, p600, 600 } },
	  2,
	  NULL,
	  0 },
	{ "unmasked", 1002, { { 1, 0, WSC_TEXT, 0, 0, "abc", 3 } }, 1, NULL, 0 },
	{ "unmasked empty", 1002, { { 1, 0, WSC_TEXT, 0, 0, "", 0 } }, 1, NULL, 0 },
	{ "control frame > 125", 1002, { { 1, 0, WSC_PING, 1, 0, p126, 126 } }, 1, NULL, 0 },
	{ "fragmented control frame", 1002, { { 0, 0, WSC_PING, 1, 0, "p", 1 } }, 1, NULL, 0 },
	{ "reserved opcode 3", 1002, { { 1, 0, 3, 1, 0, "x", 1 } }, 1, NULL, 0 },
	{ "reserved opcode 0xB", 1002, { { 1, 0, 0xB, 1, 0, "x", 1 } }, 1, NULL, 0 },
	{ "continuation first", 1002, { { 1, 0, 0, 1, 0, "x", 1 } }, 1, NULL, 0 },
	{ "text inside a fragmented text",
	  1002,
	  { { 0, 0, WSC_TEXT, 1, 0, "a", 1 }, { 1, 0, WSC_TEXT, 1, 0, "b", 1 } },
	  2,
	  NULL,
	  0 },
	{ "RSV1", 1002, { { 1, 4, WSC_TEXT, 1, 0, "x", 1 } }, 1, NULL, 0 },
	{ "RSV3", 1002, { { 1, 1, WSC_TEXT, 1, 0, "x", 1 } }, 1, NULL, 0 },
	{ "16-bit length for 5 bytes",
	  1002,
	  { { 1, 0, WSC_TEXT, 1, 16, "hello", 5 } },
	  1,
	  NULL,
	  0 },
	{ "64-bit length for 5 bytes",
	  1002,
	  { { 1, 0, WSC_TEXT, 1, 64, "hello", 5 } },
	  1,
	  NULL,
	  0 },
	{ "64-bit length, top bit set",
	  1002,
	  { { 0 } },
	  0,
	  "\x81\xFF\x80\x00\x00\x00\x00\x01\x00\x00\x12\x34\x56\x78",
	  14 },
	{ "close code 1005", 1002, { { 1, 0, WSC_CLOSE, 1, 0, "\x03\xED", 2 } }, 1, NULL, 0 },
	{ "close code 999", 1002, { { 1, 0, WSC_CLOSE, 1, 0, "\x03\xE7", 2 } }, 1, NULL, 0 },
	{ "close with a 1-byte body", 1002, { { 1, 0, WSC_CLOSE, 1, 0, "\x03", 1 } }, 1, NULL, 0 },
	{ "close reason not UTF-8",
	  1007,
	  { { 1, 0, WSC_CLOSE, 1, 0, "\x03\xE8\xFF", 3 } },
	  1,
	  NULL,
	  0 },
};

static void sc_bad(struct run *r, struct wsc *c)
{
	const struct bad_input *b = &bad_inputs[r->aux];

	for (int i = 0; i < b->nframes; i++)
		wsc_send_frame(c, &b->f[i]);
	if (b->raw)
		wsc_send_bytes(c, b->raw, b->rawlen);
	collect(r, c, 2000);
}

static void test_ws_bad_inputs(void)
{
	memset(p126, 'c', sizeof p126);
	memset(p1001, 'b', sizeof p1001);
	memset(p600, 'f', sizeof p600);
	for (size_t i = 0; i < sizeof bad_inputs / sizeof bad_inputs[0]; i++) {
		struct run r = { 0 };

		test_opts(&r.opt);
		r.script = sc_bad;
		r.aux = (int)i;
		run_ws(&r, 5000);
		CU_ASSERT_EQUAL(r.o.texts, 0);
		if (r.o.closed_calls != 1 || r.o.code != bad_inputs[i].code ||
		    !saw_close_then_eof(&r, bad_inputs[i].code))
			fprintf(stderr, "\n  case \"%s\":", bad_inputs[i].name);
		EXPECT_END(&r, bad_inputs[i].code);
	}
}

static void sc_max_size(struct run *r, struct wsc *c)
{
	static char m[1000];

	memset(m, 'm', sizeof m);
	wsc_send_text(c, m, sizeof m);
	rec(r, c, 2000);
	send_frame(c, 0, WSC_TEXT, m, 500);
	send_frame(c, 1, 0, m, 500);
	rec(r, c, 2000);
	wsc_send_close(c, 1000, NULL);
	collect(r, c, 2000);
}

static void test_ws_max_size(void)
{
	struct run r = { 0 };

	test_opts(&r.opt);
	r.script = sc_max_size;
	run_ws(&r, 5000);
	CU_ASSERT_EQUAL(r.seen.type[0], WSC_TEXT);
	CU_ASSERT_EQUAL(r.seen.len[0], 1000);
	CU_ASSERT_EQUAL(r.seen.type[1], WSC_TEXT);
	CU_ASSERT_EQUAL(r.seen.len[1], 1000);
	EXPECT_END(&r, 1000);
}

static void sc_ping(struct run *r, struct wsc *c)
{
	wsc_send_ping(c, "are you there", 13);
	rec(r, c, 2000);
	wsc_send_ping(c, "", 0);
	rec(r, c, 2000);
	wsc_send_close(c, 1000, NULL);
	collect(r, c, 2000);
}

static void test_ws_ping_pong(void)
{
	struct run r = { 0 };

	run_reporting_pongs(&r, sc_ping, 5000);
	CU_ASSERT_EQUAL(r.seen.type[0], WSC_PONG);
	CU_ASSERT_STRING_EQUAL(r.seen.data[0], "are you there");
	CU_ASSERT_EQUAL(r.seen.type[1], WSC_PONG);
	CU_ASSERT_EQUAL(r.seen.len[1], 0);
	EXPECT_END(&r, 1000);
}

static void sc_silent(struct run *r, struct wsc *c)
{
	collect(r, c, 3000);
}

static void test_ws_ping_timeout(void)
{
	struct run r = { 0 };
	int pings = 0;

	r.client_options = WSC_OPT_NO_AUTO_PONG | WSC_OPT_REPORT_PINGS;
	run_pinged(&r, sc_silent, 50, 200, 5000);
	for (int i = 0; i < r.seen.n; i++)
		pings += r.seen.type[i] == WSC_PING;
	CU_ASSERT(pings >= 2);
	CU_ASSERT(r.o.closed_ms >= 200);
	CU_ASSERT(r.o.closed_ms < 200 + 50 + 400 + 300);
	EXPECT_END(&r, 1001);
}

static void sc_pongs_keep_alive(struct run *r, struct wsc *c)
{
	rec(r, c, 700); /* pings answered and swallowed: times out */
	wsc_send_text(c, "alive", 5);
	rec(r, c, 2000);
	wsc_send_close(c, 1000, NULL);
	collect(r, c, 2000);
}

static void test_ws_pongs_keep_alive(void)
{
	struct run r = { 0 };

	run_pinged(&r, sc_pongs_keep_alive, 50, 200, 5000);
	CU_ASSERT_EQUAL(r.seen.type[0], WSC_TIMEOUT);
	CU_ASSERT_EQUAL(r.seen.type[1], WSC_TEXT);
	CU_ASSERT_STRING_EQUAL(r.seen.data[1], "alive");
	EXPECT_END(&r, 1000);
}

static void sc_server_close(struct run *r, struct wsc *c)
{
	wsc_send_text(c, "bye", 3);
	collect(r, c, 2000);
}

static void test_ws_server_close(void)
{
	struct run r = { 0 };

	test_opts(&r.opt);
	r.script = sc_server_close;
	run_ws(&r, 5000);
	CU_ASSERT_EQUAL(r.o.after_close_rc, -1);
	CU_ASSERT_EQUAL(r.seen.type[0], WSC_CLOSE);
	CU_ASSERT_STRING_EQUAL(r.seen.data[0], "bye now");
	CU_ASSERT(r.o.closed_ms < 300); /* answered: no timeout */
	EXPECT_END(&r, 4000);
}

static void sc_farewell(struct run *r, struct wsc *c)
{
	wsc_send_text(c, "farewell", 8);
	collect(r, c, 2000);
}

static void test_ws_message_then_close(void)
{
	struct run r = { 0 };

	test_opts(&r.opt);
	r.script = sc_farewell;
	run_ws(&r, 5000);
	CU_ASSERT_EQUAL(r.seen.type[0], WSC_TEXT);
	CU_ASSERT_STRING_EQUAL(r.seen.data[0], "see you");
	CU_ASSERT_EQUAL(r.seen.type[1], WSC_CLOSE);
	CU_ASSERT_EQUAL(r.seen.len[1], 0);
	EXPECT_END(&r, 4002);
}

static void sc_server_close_unanswered(struct run *r, struct wsc *c)
{
	wsc_send_text(c, "bye", 3);
	wsc_send_text(c, "late", 4); /* after the server's close: dropped */
	collect(r, c, 3000);
}

static void test_ws_server_close_timeout(void)
{
	struct run r = { 0 };

	test_opts(&r.opt);
	r.script = sc_server_close_unanswered;
	r.client_options = WSC_OPT_NO_CLOSE_REPLY;
	run_ws(&r, 5000);
	CU_ASSERT_EQUAL(r.o.texts, 1);
	CU_ASSERT(r.o.closed_ms >= 350);
	CU_ASSERT(r.o.closed_ms < 1500);
	EXPECT_END(&r, 4000);
}

static void sc_close_codes(struct run *r, struct wsc *c)
{
	if (r->aux == 0)
		wsc_send_close(c, 0, NULL); /* no code */
	else
		wsc_send_close(c, 4001, "client leaving");
	collect(r, c, 2000);
}

static void test_ws_peer_close(void)
{
	struct run r = { 0 };

	test_opts(&r.opt);
	r.script = sc_close_codes;
	r.aux = 0;
	run_ws(&r, 5000);
	EXPECT_END(&r, 1005);

	memset(&r, 0, sizeof r);
	test_opts(&r.opt);
	r.script = sc_close_codes;
	r.aux = 1;
	run_ws(&r, 5000);
	EXPECT_END(&r, 4001);
}

static void sc_drop(struct run *r, struct wsc *c)
{
	if (r->aux == 0) {
		wsc_send_text(c, "hi", 2);
		rec(r, c, 2000);
	} else {
		unsigned char f[64];
		struct wsc_frame fr = { .fin = 1,
					.opcode = WSC_TEXT,
					.masked = 1,
					.payload = "0123456789",
					.len = 10 };
		size_t n = wsc_build_frame(&fr, f, sizeof f);

		wsc_send_bytes(c, f, n - 5); /* a truncated frame */
	}
	/* the socket closes when the script returns */
}

static void test_ws_peer_drop(void)
{
	for (int i = 0; i < 2; i++) {
		struct run r = { 0 };

		test_opts(&r.opt);
		r.script = sc_drop;
		r.aux = i;
		run_ws(&r, 5000);
		CU_ASSERT_EQUAL(r.o.closed_calls, 1);
		CU_ASSERT_EQUAL(r.o.code, 1006);
		CU_ASSERT_EQUAL(r.o.texts, i == 0 ? 1 : 0);
	}
}

static void sc_early(struct run *r, struct wsc *c)
{
	rec(r, c, 2000);
	rec(r, c, 2000);
	wsc_send_close(c, 1000, NULL);
	collect(r, c, 2000);
}

static void test_ws_early_bytes(void)
{
	struct run r = { 0 };
	unsigned char buf[64];
	struct wsc_frame f1 = {
		.fin = 1, .opcode = WSC_TEXT, .masked = 1, .payload = "early", .len = 5
	};
	struct wsc_frame f2 = {
		.fin = 1, .opcode = WSC_TEXT, .masked = 1, .payload = "second", .len = 6
	};
	size_t n = wsc_build_frame(&f1, buf, sizeof buf);

	n += wsc_build_frame(&f2, buf + n, sizeof buf - n);
	test_opts(&r.opt);
	r.script = sc_early;
	r.pre = buf;
	r.pre_len = n;
	run_ws(&r, 5000);
	CU_ASSERT_EQUAL(r.seen.type[0], WSC_TEXT);
	CU_ASSERT_STRING_EQUAL(r.seen.data[0], "early");
	CU_ASSERT_EQUAL(r.seen.type[1], WSC_TEXT);
	CU_ASSERT_STRING_EQUAL(r.seen.data[1], "second");
	EXPECT_END(&r, 1000);
}

static void sc_free_me(struct run *r, struct wsc *c)
{
	wsc_send_text(c, "free", 4);
	wsc_send_text(c, "never delivered", 15);
	collect(r, c, 2000);
}

static void test_ws_free_in_callback(void)
{
	struct run r = { 0 };

	test_opts(&r.opt);
	r.script = sc_free_me;
	run_ws(&r, 5000);
	CU_ASSERT_EQUAL(r.o.closed_calls, 0);
	CU_ASSERT_PTR_NULL(r.o.s);
	CU_ASSERT_EQUAL(r.o.texts, 1);
	CU_ASSERT_EQUAL(r.seen.n, 1);
	CU_ASSERT_EQUAL(r.seen.type[0], WSC_EOF);
}

static void test_ws_closed_once(void)
{
	/* the owner keeps the session after on_closed: no timer may call again */
	static const int cases[] = { 0 /* binary */, 10 /* control > 125 */ };

	memset(p126, 'c', sizeof p126);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct run r = { 0 };

		r.o.keep_on_close = 1;
		r.aux = cases[i];
		run_pinged(&r, sc_bad, 50, 100, 5000);
		EXPECT_END(&r, bad_inputs[cases[i]].code);
	}
	{
		struct run r = { 0 };

		test_opts(&r.opt);
		r.o.keep_on_close = 1;
		r.script = sc_drop;
		r.aux = 0;
		run_ws(&r, 5000);
		CU_ASSERT_EQUAL(r.o.closed_calls, 1);
		CU_ASSERT_EQUAL(r.o.code, 1006);
	}
}

static void sc_flood(struct run *r, struct wsc *c)
{
	int ok = 0;

	wsc_send_text(c, "flood", 5);
	usleep(200 * 1000); /* sleep: the server's output piles up while nothing is read */
	for (int i = 0; i < 20; i++) {
		struct wsc_msg m;

		if (wsc_recv(c, 2000, &m) == WSC_TEXT && m.len == 32768)
			ok++;
		wsc_msg_free(&m);
	}
	r->aux = ok;
	rec(r, c, 2000);
	wsc_send_close(c, 1000, NULL);
	collect(r, c, 2000);
}

static void test_ws_backpressure(void)
{
	struct run r = { 0 };

	test_opts(&r.opt);
	r.opt.out_high_water = 65536;
	r.script = sc_flood;
	run_ws(&r, 5000);
	CU_ASSERT_EQUAL(r.aux, 20);
	CU_ASSERT(r.o.max_pending >= 20 * 32768);
	CU_ASSERT(r.o.drained >= 2); /* after the flood, after "drained" */
	CU_ASSERT_EQUAL(r.seen.type[0], WSC_TEXT);
	CU_ASSERT_STRING_EQUAL(r.seen.data[0], "drained");
	EXPECT_END(&r, 1000);
}

static void test_ws_send_checks(void)
{
	struct event_base *base = event_base_new();
	struct bufferevent *pair[2];
	struct ws_callbacks cb = { o_text, o_closed, NULL };
	struct owner o = { 0 };
	struct ws_session *s;

	CU_ASSERT_FATAL(bufferevent_pair_new(base, 0, pair) == 0);
	bufferevent_enable(pair[1], EV_READ);
	s = ws_session_new(pair[0], NULL, &cb, &o);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT_TRUE(ws_session_is_open(s));
	CU_ASSERT_EQUAL(ws_send_text(s, "\xC0\xAF", 2), -1);
	CU_ASSERT_EQUAL(ws_send_text(s, "ok", 2), 0);
	/* no parser was needed: the frame went into the output at once, and
	 * the pair handed it to the other end (checked below) */
	CU_ASSERT_FALSE(ws_session_has_parser(s));
	CU_ASSERT_EQUAL(ws_session_pending_out(s), 0);
	ws_close(s, 999, NULL); /* not sendable: becomes 1011 */
	CU_ASSERT_FALSE(ws_session_is_open(s));
	CU_ASSERT_EQUAL(ws_send_text(s, "late", 4), -1);
	loop_for(base, 20);
	/* the text frame, then close 1011 */
	unsigned char out[32];
	size_t n = evbuffer_remove(bufferevent_get_input(pair[1]), out, sizeof out);
	CU_ASSERT_EQUAL(n, 4 + 4);
	CU_ASSERT(n >= 8 && memcmp(out, "\x81\x02ok\x88\x02\x03\xF3", 8) == 0);
	CU_ASSERT_EQUAL(o.closed_calls, 0);
	ws_session_free(s);
	bufferevent_free(pair[1]);
	event_base_free(base);
}

/* Pings counted in what a session wrote to its end of a pair (the raw
 * server frames: 0x89, length 4, 4 bytes of payload); drains it. */
static int pings_written(struct bufferevent *peer)
{
	struct evbuffer *in = bufferevent_get_input(peer);
	unsigned char f[2];
	int pings = 0;

	while (evbuffer_copyout(in, f, 2) == 2) {
		CU_ASSERT_EQUAL(f[0], 0x89);
		CU_ASSERT_EQUAL(f[1], 4);
		if (f[0] != 0x89 || f[1] != 4)
			break;
		evbuffer_drain(in, 6);
		pings++;
	}
	return pings;
}

/* A session on one end of a new pair, whose other end collects what it
 * writes. */
static void session_on_pair(struct event_base *base, struct bufferevent *pair[2],
			    const struct ws_options *opt, const struct ws_callbacks *cb,
			    struct owner *o)
{
	CU_ASSERT_FATAL(bufferevent_pair_new(base, 0, pair) == 0);
	bufferevent_enable(pair[1], EV_READ);
	o->t0 = mono_ms();
	o->s = ws_session_new(pair[0], opt, cb, o);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o->s);
}

/* The largest text frame taken without wslay's context (4096 bytes, the
 * 126 length form), in both roles: it arrives whole and intact (its echo
 * shows it) and needs no parser.  The frame and its header are longer
 * than the payload: the copy of them must fit where the payload goes
 * (a stack overflow there shows under ASan, scripts/test.sh). */
static void test_ws_largest_direct_text(void)
{
	for (int client = 0; client < 2; client++) {
		struct event_base *base = event_base_new();
		struct bufferevent *pair[2];
		struct ws_callbacks cb = { .on_text = o_text, .on_closed = o_closed };
		struct owner o = { 0 };
		struct ws_options opt;
		static unsigned char frame[8 + 4096], echo[8 + 4096 + 1];
		const unsigned char key[4] = { 0x12, 0x34, 0x56, 0x78 };
		size_t n = 0, hlen = client ? 8 : 4;

		test_opts(&opt);
		opt.max_msg_len = 8192;
		opt.client_role = client;
		session_on_pair(base, pair, &opt, &cb, &o);
		frame[n++] = 0x81;
		frame[n++] = client ? 126 : 0x80 | 126;
		frame[n++] = 0x10;
		frame[n++] = 0x00;
		if (!client)
			for (int i = 0; i < 4; i++)
				frame[n++] = key[i];
		for (size_t i = 0; i < 4096; i++)
			frame[n + i] = (unsigned char)('a' + i % 26) ^ (client ? 0 : key[i % 4]);
		n += 4096;
		bufferevent_write(pair[1], frame, n);
		loop_for(base, 20);
		CU_ASSERT_EQUAL(o.texts, 1);
		CU_ASSERT_EQUAL(o.texts_parsed, 0);
		CU_ASSERT_EQUAL(o.last_len, 4096);
		/* the echo: the same 4096 bytes, masked by a client session */
		size_t got = evbuffer_remove(bufferevent_get_input(pair[1]), echo, sizeof echo);
		CU_ASSERT_EQUAL(got, hlen + 4096);
		CU_ASSERT(got >= 4 && echo[0] == 0x81 && echo[1] == (client ? 0x80 | 126 : 126) &&
			  echo[2] == 0x10 && echo[3] == 0x00);
		int same = got == hlen + 4096;
		for (size_t i = 0; same && i < 4096; i++)
			same = (echo[hlen + i] ^ (client ? echo[4 + i % 4] : 0)) ==
			       (unsigned char)('a' + i % 26);
		CU_ASSERT_TRUE(same);
		CU_ASSERT_EQUAL(o.closed_calls, 0);
		ws_session_free(o.s);
		bufferevent_free(pair[1]);
		event_base_free(base);
	}
}

/* A text sent without wslay's context in every length form: 125 bytes
 * (7-bit), 126 and 65535 (16-bit), 65536 (64-bit), each the shortest
 * form, masked by a client session; the payload arrives intact. */
static void test_ws_direct_send_length_forms(void)
{
	static const size_t lens[] = { 125, 126, 65535, 65536 };
	static char msg[65536];
	static unsigned char out[14 + 65536 + 1];

	memset(msg, 'x', sizeof msg);
	for (int client = 0; client < 2; client++)
		for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
			struct event_base *base = event_base_new();
			struct bufferevent *pair[2];
			struct ws_callbacks cb = { .on_text = o_text, .on_closed = o_closed };
			struct owner o = { 0 };
			struct ws_options opt;
			size_t len = lens[k], hlen = len < 126 ? 2 : len <= 0xffff ? 4 : 10;
			size_t mlen = client ? 4 : 0;

			test_opts(&opt);
			opt.client_role = client;
			session_on_pair(base, pair, &opt, &cb, &o);
			msg[0] = (char)('a' + k);
			CU_ASSERT_EQUAL(ws_send_text(o.s, msg, len), 0);
			CU_ASSERT_FALSE(ws_session_has_parser(o.s));
			loop_for(base, 10);
			size_t got = evbuffer_remove(bufferevent_get_input(pair[1]), out,
						     sizeof out);
			CU_ASSERT_EQUAL(got, hlen + mlen + len);
			CU_ASSERT_EQUAL(out[0], 0x81);
			CU_ASSERT_EQUAL(out[1] & 0x80u, client ? 0x80u : 0);
			uint64_t stated = out[1] & 0x7fu;
			if (hlen > 2) {
				CU_ASSERT_EQUAL(stated, hlen == 4 ? 126 : 127);
				stated = 0;
				for (size_t i = 2; i < hlen; i++)
					stated = stated << 8 | out[i];
			}
			CU_ASSERT_EQUAL(stated, len);
			int same = got == hlen + mlen + len;
			for (size_t i = 0; same && i < len; i++)
				same = (out[hlen + mlen + i] ^ (client ? out[hlen + i % 4] : 0)) ==
				       (unsigned char)msg[i];
			CU_ASSERT_TRUE(same);
			ws_session_free(o.s);
			bufferevent_free(pair[1]);
			event_base_free(base);
		}
}

/* A client session refuses a masked text frame (RFC 6455 5.1) and a
 * 126-form length under 126 (5.2) also when the frame is small and whole:
 * 1002, no on_text. */
static void test_ws_client_refuses_direct(void)
{
	static const unsigned char bad[][12] = {
		{ 0x81, 0x83, 1, 2, 3, 4, 'a' ^ 1, 'b' ^ 2, 'c' ^ 3 },
		{ 0x81, 126, 0, 3, 'a', 'b', 'c' },
	};
	static const size_t bad_len[] = { 9, 7 };

	for (size_t k = 0; k < 2; k++) {
		struct event_base *base = event_base_new();
		struct bufferevent *pair[2];
		struct ws_callbacks cb = { .on_text = o_text, .on_closed = o_closed };
		struct owner o = { .keep_on_close = 1 };
		struct ws_options opt;

		test_opts(&opt);
		opt.client_role = 1;
		session_on_pair(base, pair, &opt, &cb, &o);
		bufferevent_write(pair[1], bad[k], bad_len[k]);
		loop_for(base, 20);
		CU_ASSERT_EQUAL(o.texts, 0);
		CU_ASSERT_EQUAL(o.closed_calls, 1);
		CU_ASSERT_EQUAL(o.code, WS_CLOSE_PROTOCOL_ERROR);
		ws_session_free(o.s);
		bufferevent_free(pair[1]);
		event_base_free(base);
	}
}

/* ws.h: no owner callback from inside a ws_* call, also when the
 * bufferevent hands output on at once (a pair does, and calls its write
 * callback then): a text sent without wslay's context gets its on_drained
 * from the loop, not from inside ws_send_text. */
static int inside_send;
static int drained_inside;

static void o_drained_count(void *arg)
{
	struct owner *o = arg;

	o->drained++;
	drained_inside += inside_send;
}

static void test_ws_drained_not_from_send(void)
{
	struct event_base *base = event_base_new();
	struct bufferevent *pair[2];
	struct ws_callbacks cb = { .on_text = o_text,
				   .on_closed = o_closed,
				   .on_drained = o_drained_count };
	struct owner o = { 0 };
	struct ws_options opt;

	test_opts(&opt);
	session_on_pair(base, pair, &opt, &cb, &o);
	loop_for(base, 10);
	drained_inside = 0;
	inside_send = 1;
	CU_ASSERT_EQUAL(ws_send_text(o.s, "ok", 2), 0);
	CU_ASSERT_EQUAL(ws_send_text(o.s, "ok", 2), 0);
	inside_send = 0;
	CU_ASSERT_EQUAL(drained_inside, 0);
	loop_for(base, 20);
	CU_ASSERT_EQUAL(o.drained, 1); /* and it still comes, once */
	CU_ASSERT_EQUAL(evbuffer_get_length(bufferevent_get_input(pair[1])), 8);
	ws_session_free(o.s);
	bufferevent_free(pair[1]);
	event_base_free(base);
}

/* ws.h: on_read_end follows the messages of a read even when the read then
 * fails the session; here a ping behind a text, taken without wslay's
 * context, cannot be answered (the output refuses more bytes, as when out
 * of memory): on_text, on_read_end, then on_closed with 1011. */
static void o_text_quiet(void *arg, const char *msg, size_t len)
{
	((struct owner *)arg)->texts++;
}

static void test_ws_read_end_when_take_fails(void)
{
	struct event_base *base = event_base_new();
	struct bufferevent *pair[2];
	struct ws_callbacks cb = { .on_text = o_text_quiet,
				   .on_closed = o_closed,
				   .on_read_end = o_read_end };
	struct owner o = { 0 };
	struct ws_options opt;
	const unsigned char in[] = { 0x81, 0x81, 0, 0, 0, 0, 'a', 0x89, 0x80, 0, 0, 0, 0 };

	test_opts(&opt);
	session_on_pair(base, pair, &opt, &cb, &o);
	loop_for(base, 10);
	o.read_ends = 0;
	evbuffer_freeze(bufferevent_get_output(pair[0]), 0);
	bufferevent_write(pair[1], in, sizeof in);
	loop_for(base, 20);
	CU_ASSERT_EQUAL(o.texts, 1);
	CU_ASSERT_EQUAL(o.read_ends, 1);
	CU_ASSERT_EQUAL(o.closed_calls, 1);
	CU_ASSERT_EQUAL(o.code, WS_CLOSE_INTERNAL_ERROR);
	bufferevent_free(pair[1]);
	event_base_free(base);
}

#define SHARED 40

/* One pinger for many sessions (what a handler does): every session gets
 * its pings, from one timer that fires about once per interval (per-session
 * timers would fire SHARED times as often); a session freed leaves the
 * queue; the pinger lives on while sessions hold it after its creator let
 * go; and a silent peer is found by the sweep's liveness check. */
static void test_ws_pinger_shared(void)
{
	struct event_base *base = event_base_new();
	struct ws_pinger *p = ws_pinger_new(base);
	struct bufferevent *pair[SHARED][2];
	struct owner o[SHARED];
	struct ws_callbacks cb = { .on_text = o_text, .on_closed = o_closed };
	struct ws_options opt;
	int pings[SHARED];

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	test_opts(&opt);
	opt.ping_interval_ms = 100;
	opt.pinger = p;
	memset(o, 0, sizeof o);
	for (int i = 0; i < SHARED; i++)
		session_on_pair(base, pair[i], &opt, &cb, &o[i]);
	ws_pinger_release(p); /* the sessions keep it */
	loop_for(base, 1050);
	uint64_t sweeps = ws_pinger_sweeps(p);
	for (int i = 0; i < SHARED; i++) {
		pings[i] = pings_written(pair[i][1]);
		CU_ASSERT(pings[i] >= 9 && pings[i] <= 11);
	}
	CU_ASSERT(sweeps >= 9 && sweeps <= 12);
	/* half of them go; the others keep their pings */
	for (int i = 0; i < SHARED; i += 2) {
		ws_session_free(o[i].s);
		o[i].s = NULL;
	}
	loop_for(base, 520);
	for (int i = 1; i < SHARED; i += 2) {
		int n = pings_written(pair[i][1]);
		CU_ASSERT(n >= 4 && n <= 6);
	}
	for (int i = 0; i < SHARED; i++)
		CU_ASSERT_EQUAL(o[i].closed_calls, 0);
	for (int i = 1; i < SHARED; i += 2)
		ws_session_free(o[i].s);
	for (int i = 0; i < SHARED; i++)
		bufferevent_free(pair[i][1]);

	/* two periods on one pinger (sessions made before and after a
	 * reload): each keeps its own rate */
	p = ws_pinger_new(base);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	opt.pinger = p;
	memset(o, 0, sizeof o);
	for (int i = 0; i < 16; i++) {
		opt.ping_interval_ms = i < 8 ? 100 : 60;
		session_on_pair(base, pair[i], &opt, &cb, &o[i]);
	}
	loop_for(base, 1030);
	for (int i = 0; i < 16; i++) {
		int n = pings_written(pair[i][1]);
		if (i < 8) {
			CU_ASSERT(n >= 9 && n <= 11);
		} else {
			CU_ASSERT(n >= 15 && n <= 18);
		}
		ws_session_free(o[i].s);
		bufferevent_free(pair[i][1]);
	}
	ws_pinger_release(p);

	/* liveness through the shared timer: nobody answers, 1001 after the
	 * timeout and at most an interval and its slack later */
	p = ws_pinger_new(base);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	opt.ping_interval_ms = 100;
	opt.ping_timeout_ms = 300;
	opt.pinger = p;
	memset(o, 0, sizeof o);
	for (int i = 0; i < 4; i++)
		session_on_pair(base, pair[i], &opt, &cb, &o[i]);
	loop_for(base, 1200);
	for (int i = 0; i < 4; i++) {
		CU_ASSERT_EQUAL(o[i].closed_calls, 1);
		CU_ASSERT_EQUAL(o[i].code, 1001);
		CU_ASSERT(o[i].closed_ms >= 300 - 100 / 8);
		CU_ASSERT(o[i].closed_ms < 300 + 100 + 100 / 8 + 400 + 100);
		bufferevent_free(pair[i][1]);
	}
	ws_pinger_release(p);
	event_base_free(base);
}

/* Counts the frames a session wrote to its end of a pair by opcode (server
 * frames: unmasked, short); drains them. */
static void frames_written(struct bufferevent *peer, int *pings, int *pongs)
{
	struct evbuffer *in = bufferevent_get_input(peer);
	unsigned char f[2];

	*pings = *pongs = 0;
	while (evbuffer_copyout(in, f, 2) == 2 && (f[1] & 0x80u) == 0 && f[1] < 126) {
		*pings += f[0] == 0x89;
		*pongs += f[0] == 0x8A;
		evbuffer_drain(in, 2u + f[1]);
	}
	CU_ASSERT_EQUAL(evbuffer_get_length(in), 0);
}

/* Feeds one masked frame (mask key 0) with an empty body to a session's
 * peer end. */
static void peer_sends(struct bufferevent *peer, unsigned char opcode)
{
	unsigned char f[6] = { (unsigned char)(0x80u | opcode), 0x80, 0, 0, 0, 0 };

	bufferevent_write(peer, f, sizeof f);
}

/* protocol.md, "Liveness": no ping to a peer that sent a frame other than
 * a pong since the last tick; its pongs alone do not spare it the next
 * ping; the pings resume once it falls silent. */
static void test_ws_no_ping_to_a_talking_peer(void)
{
	struct event_base *base = event_base_new();
	struct ws_pinger *p = ws_pinger_new(base);
	struct bufferevent *pair[3][2];
	struct owner o[3] = { 0 };
	struct ws_callbacks cb = { .on_text = o_text, .on_closed = o_closed };
	struct ws_options opt;
	int pings[3], pongs[3];

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	test_opts(&opt);
	opt.pinger = p;
	opt.ping_interval_ms = 100;
	opt.ping_timeout_ms = 3000; /* peer 2 stays */
	for (int i = 0; i < 3; i++)
		session_on_pair(base, pair[i], &opt, &cb, &o[i]);
	/* peer 0 pings every 40 ms, peer 1 sends pongs only, peer 2 is
	 * silent (answers nothing) */
	for (int k = 0; k < 25; k++) {
		peer_sends(pair[0][1], 0x9);
		peer_sends(pair[1][1], 0xA);
		loop_for(base, 40);
	}
	for (int i = 0; i < 3; i++)
		frames_written(pair[i][1], &pings[i], &pongs[i]);
	CU_ASSERT_EQUAL(pings[0], 0);
	CU_ASSERT(pongs[0] >= 24 && pongs[0] <= 25);
	CU_ASSERT(pings[1] >= 8 && pings[1] <= 11);
	CU_ASSERT_EQUAL(pongs[1], 0);
	CU_ASSERT(pings[2] >= 8 && pings[2] <= 11);
	/* peer 0 falls silent: pinged again from the tick after next */
	loop_for(base, 520);
	frames_written(pair[0][1], &pings[0], &pongs[0]);
	CU_ASSERT(pings[0] >= 3 && pings[0] <= 5);
	for (int i = 0; i < 3; i++) {
		CU_ASSERT_EQUAL(o[i].closed_calls, 0);
		ws_session_free(o[i].s);
		bufferevent_free(pair[i][1]);
	}
	ws_pinger_release(p);
	event_base_free(base);
}

/* A peer that answers every ping and sent one message just after a tick
 * is not closed: with pingTimeoutSec under twice pingIntervalSec, the tick
 * after the message still pings (skipping it would leave the peer silent
 * past the timeout at the tick after, through no fault of its own). */
static void sc_one_message_then_pongs(struct run *r, struct wsc *c)
{
	while (mono_ms() - r->t0 < 340) /* just after the first tick (300 ms) */
		usleep(5000);
	wsc_send_text(c, "once", 4);
	rec(r, c, 2000);
	rec(r, c, 1500); /* pings answered and swallowed: times out */
	wsc_send_close(c, 1000, NULL);
	collect(r, c, 2000);
}

static void test_ws_skipped_ping_keeps_the_deadline(void)
{
	struct run r = { 0 };

	run_pinged(&r, sc_one_message_then_pongs, 300, 500, 6000);
	CU_ASSERT_EQUAL(r.seen.type[0], WSC_TEXT);
	CU_ASSERT_EQUAL(r.seen.type[1], WSC_TIMEOUT);
	EXPECT_END(&r, 1000);
}

static void test_keepalive(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0), v = 0;
	socklen_t l = sizeof v;

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(ws_set_keepalive(fd), 0);
	CU_ASSERT_EQUAL(getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &v, &l), 0);
	CU_ASSERT_EQUAL(v, 1);
	close(fd);
	CU_ASSERT_EQUAL(ws_set_keepalive(-1), -1);
}

/* ======================================================================
 * end to end over TCP: a minimal server built from http_head,
 * ws_handshake and ws (what the handler's connection code does), and the
 * wsclient's handshake and HTTP helpers
 * ====================================================================== */

#define MAX_CONNS 32

struct mini_conn {
	struct bufferevent *bev; /* NULL once handed over or freed */
	struct http_head_parser p;
	struct owner o;
};

struct mini_server {
	struct event_base *base;
	evutil_socket_t lfd;
	struct event *lev;
	int port;
	int nconns;
	struct mini_conn *conns[MAX_CONNS];
};

static void mini_written(struct bufferevent *bev, void *arg)
{
	struct mini_conn *c = arg;

	bufferevent_free(c->bev);
	c->bev = NULL;
}

static void mini_event(struct bufferevent *bev, short what, void *arg)
{
	mini_written(bev, arg);
}

static void mini_respond(struct mini_conn *c, const char *text, size_t len)
{
	bufferevent_setcb(c->bev, NULL, mini_written, mini_event, c);
	bufferevent_write(c->bev, text, len);
	bufferevent_enable(c->bev, EV_WRITE);
}

static void mini_route(struct mini_conn *c, const struct http_head *h)
{
	static const struct ws_callbacks cb = { o_text, o_closed, NULL };
	char buf[512], accept[WS_ACCEPT_LEN + 1];
	int n, st;

	if (strcmp(h->path, "/status") == 0) {
		const char *body = "{\"ok\":true}\n";
		n = snprintf(buf, sizeof buf,
			     "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
			     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
			     strlen(body), body);
		mini_respond(c, buf, (size_t)n);
		return;
	}
	if (strcmp(h->path, "/broker") != 0) {
		n = ws_handshake_error_response(404, NULL, buf, sizeof buf);
		mini_respond(c, buf, (size_t)n);
		return;
	}
	st = ws_handshake_check(h, accept);
	if (st != 0) {
		n = ws_handshake_error_response(st, NULL, buf, sizeof buf);
		mini_respond(c, buf, (size_t)n);
		return;
	}
	n = ws_handshake_response(accept, NULL, buf, sizeof buf);
	bufferevent_write(c->bev, buf, (size_t)n);
	struct ws_options opt;
	test_opts(&opt);
	c->o.t0 = mono_ms();
	c->o.s = ws_session_new(c->bev, &opt, &cb, &c->o);
	c->bev = NULL;
}

static void mini_read(struct bufferevent *bev, void *arg)
{
	struct mini_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	while (evbuffer_get_length(in) > 0) {
		struct evbuffer_iovec v;
		size_t used = 0;
		int r;

		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
			return;
		r = http_head_feed(&c->p, v.iov_base, v.iov_len, &used);
		evbuffer_drain(in, used);
		if (r == HTTP_HEAD_ERROR) {
			char buf[512];
			int n = ws_handshake_error_response(http_head_status(&c->p), NULL, buf,
							    sizeof buf);
			mini_respond(c, buf, (size_t)n);
			return;
		}
		if (r == HTTP_HEAD_DONE) {
			mini_route(c, http_head_get(&c->p));
			return;
		}
	}
}

static void mini_accept(evutil_socket_t lfd, short what, void *arg)
{
	struct mini_server *srv = arg;
	struct mini_conn *c;
	int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd < 0)
		return;
	if (srv->nconns == MAX_CONNS || (c = calloc(1, sizeof *c)) == NULL) {
		close(fd);
		return;
	}
	srv->conns[srv->nconns++] = c;
	http_head_parser_init(&c->p);
	c->bev = bufferevent_socket_new(srv->base, fd, BEV_OPT_CLOSE_ON_FREE);
	bufferevent_setcb(c->bev, mini_read, NULL, mini_event, c);
	bufferevent_enable(c->bev, EV_READ);
}

static void mini_start(struct mini_server *srv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof sa;

	memset(srv, 0, sizeof *srv);
	srv->base = event_base_new();
	srv->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	CU_ASSERT_FATAL(srv->lfd >= 0);
	CU_ASSERT_FATAL(bind(srv->lfd, (struct sockaddr *)&sa, sizeof sa) == 0);
	CU_ASSERT_FATAL(listen(srv->lfd, 16) == 0);
	CU_ASSERT_FATAL(getsockname(srv->lfd, (struct sockaddr *)&sa, &sl) == 0);
	srv->port = ntohs(sa.sin_port);
	srv->lev = event_new(srv->base, srv->lfd, EV_READ | EV_PERSIST, mini_accept, srv);
	event_add(srv->lev, NULL);
}

static void mini_stop(struct mini_server *srv)
{
	for (int i = 0; i < srv->nconns; i++) {
		struct mini_conn *c = srv->conns[i];

		if (c->bev)
			bufferevent_free(c->bev);
		if (c->o.s)
			ws_session_free(c->o.s);
		free(c);
	}
	event_free(srv->lev);
	close(srv->lfd);
	event_base_free(srv->base);
}

struct e2e {
	int port;
	atomic_int done;
	int st_ok, st_version, st_nokey, st_get, st_404, st_431, st_partial;
	int echo_ok, early_ok, close_ok, slow_open, slow_closed;
	char body[256];
};

static void *e2e_client(void *arg)
{
	struct e2e *e = arg;
	struct wsc *c;
	struct wsc_msg m;
	char big[10000];

	c = wsc_connect("127.0.0.1", e->port, "/broker?client=t1", NULL, 2000, &e->st_ok);
	if (c) {
		wsc_send_text(c, "over tcp", 8);
		e->echo_ok = wsc_recv(c, 2000, &m) == WSC_TEXT && strcmp(m.data, "over tcp") == 0;
		wsc_msg_free(&m);
		wsc_send_close(c, 1000, NULL);
		e->close_ok = wsc_recv(c, 2000, &m) == WSC_CLOSE && m.close_code == 1000;
		wsc_msg_free(&m);
		e->close_ok = e->close_ok && wsc_recv(c, 2000, &m) == WSC_EOF;
		wsc_msg_free(&m);
		wsc_free(c);
	}

	/* a frame in the same packet as the upgrade request */
	{
		unsigned char f[32];
		struct wsc_frame fr = {
			.fin = 1, .opcode = WSC_TEXT, .masked = 1, .payload = "first", .len = 5
		};
		struct wsc_connect_opts o = { .timeout_ms = 2000, .early = f };
		int st;

		o.early_len = wsc_build_frame(&fr, f, sizeof f);
		c = wsc_connect_opts("127.0.0.1", e->port, "/broker", &o, &st);
		if (c) {
			e->early_ok = wsc_recv(c, 2000, &m) == WSC_TEXT &&
				      strcmp(m.data, "first") == 0;
			wsc_msg_free(&m);
			wsc_free(c);
		}
	}
	{
		struct wsc_connect_opts o = { .timeout_ms = 2000, .version = "12" };
		c = wsc_connect_opts("127.0.0.1", e->port, "/broker", &o, &e->st_version);
		wsc_free(c);
	}
	{
		struct wsc_connect_opts o = { .timeout_ms = 2000, .omit_key = 1 };
		c = wsc_connect_opts("127.0.0.1", e->port, "/broker", &o, &e->st_nokey);
		wsc_free(c);
	}
	wsc_http_get("127.0.0.1", e->port, "/status", 2000, &e->st_get, e->body, sizeof e->body);
	wsc_http_get("127.0.0.1", e->port, "/nope", 2000, &e->st_404, NULL, 0);
	snprintf(big, sizeof big, "GET / HTTP/1.1\r\nHost: h\r\nX-Big: %09000d\r\n\r\n", 0);
	wsc_http_request("127.0.0.1", e->port, big, 2000, &e->st_431, NULL, 0);

	/* half a request, then junk: the server answers 400 and hangs up */
	{
		int fd = wsc_slow_connect("127.0.0.1", e->port,
					  "GET /broker HTTP/1.1\r\nHost: x\r\n", 2000);
		if (fd >= 0) {
			/* nothing happens while the head is incomplete */
			e->slow_open = wsc_wait_closed(fd, 100) == 0;
			send(fd, "\x01\x02\r\n\r\n", 6, MSG_NOSIGNAL);
			e->slow_closed = wsc_wait_closed(fd, 2000);
			close(fd);
		}
	}
	atomic_store(&e->done, 1);
	return NULL;
}

static void test_end_to_end(void)
{
	struct mini_server srv;
	struct e2e e = { 0 };
	pthread_t th;
	int64_t deadline = mono_ms() + 10000;

	mini_start(&srv);
	e.port = srv.port;
	atomic_init(&e.done, 0);
	CU_ASSERT_FATAL(pthread_create(&th, NULL, e2e_client, &e) == 0);
	{
		struct timeval tick = { 0, 5000 };
		struct event *wake = event_new(srv.base, -1, EV_PERSIST, wake_cb, NULL);

		event_add(wake, &tick);
		while (!atomic_load(&e.done) && mono_ms() < deadline)
			event_base_loop(srv.base, EVLOOP_ONCE);
		loop_for(srv.base, 50);
		event_free(wake);
	}
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(e.st_ok, 101);
	CU_ASSERT_TRUE(e.echo_ok);
	CU_ASSERT_TRUE(e.close_ok);
	CU_ASSERT_TRUE(e.early_ok);
	CU_ASSERT_EQUAL(e.st_version, 426);
	CU_ASSERT_EQUAL(e.st_nokey, 400);
	CU_ASSERT_EQUAL(e.st_get, 200);
	CU_ASSERT_STRING_EQUAL(e.body, "{\"ok\":true}\n");
	CU_ASSERT_EQUAL(e.st_404, 404);
	CU_ASSERT_EQUAL(e.st_431, 431);
	CU_ASSERT_TRUE(e.slow_open);
	CU_ASSERT_EQUAL(e.slow_closed, 1);
	/* the first session ended cleanly on the server side */
	CU_ASSERT_TRUE(srv.nconns >= 1);
	if (srv.nconns >= 1) {
		CU_ASSERT_EQUAL(srv.conns[0]->o.closed_calls, 1);
		CU_ASSERT_EQUAL(srv.conns[0]->o.code, 1000);
	}
	mini_stop(&srv);
}

/* ====================================================================== */

struct test_def {
	const char *name;
	void (*fn)(void);
};

static int add_suite(const char *name, const struct test_def *t, size_t n)
{
	CU_pSuite s = CU_add_suite(name, NULL, NULL);

	if (s == NULL)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (CU_add_test(s, t[i].name, t[i].fn) == NULL)
			return -1;
	return 0;
}

#define ADD_SUITE(name, arr) add_suite(name, arr, sizeof arr / sizeof arr[0])

int main(void)
{
	static const struct test_def head_tests[] = {
		{ "simple GET", test_head_simple },
		{ "fed in small pieces", test_head_bytewise },
		{ "header lookup and trimming", test_head_headers },
		{ "token lists", test_token_list },
		{ "head size limit: 431", test_head_size_limit },
		{ "header count limit: 431", test_head_too_many_headers },
		{ "long URI: 414", test_head_long_uri },
		{ "bad version: 505", test_head_bad_version },
		{ "malformed request line: 400", test_head_bad_request_line },
		{ "garbage: 400", test_head_garbage },
		{ "bare CR: 400", test_head_bare_cr },
		{ "bytes after the head stay", test_head_pipelined },
		{ "request targets", test_head_targets },
		{ "query parameters", test_query_param },
		{ "reason phrases", test_reason },
	};
	static const struct test_def hs_tests[] = {
		{ "RFC 6455 accept value", test_handshake_accept },
		{ "bad upgrades", test_handshake_errors },
		{ "responses", test_handshake_responses },
		{ "bearer check", test_bearer },
	};
	static const struct test_def utf8_tests[] = {
		{ "valid and invalid tables", test_utf8 },
	};
	static const struct test_def ws_tests[] = {
		{ "text echo", test_ws_echo },
		{ "100 messages in one write", test_ws_burst },
		{ "fragmented text with a ping inside", test_ws_fragments },
		{ "frames in pieces; no parser while idle", test_ws_parser_on_demand },
		{ "pings and pongs without a parser", test_ws_control_frames_without_parser },
		{ "hostile frames close with the right code", test_ws_bad_inputs },
		{ "message of exactly the maximum size", test_ws_max_size },
		{ "ping answered with pong", test_ws_ping_pong },
		{ "silent peer: ping timeout 1001", test_ws_ping_timeout },
		{ "pongs keep the session alive", test_ws_pongs_keep_alive },
		{ "server close answered", test_ws_server_close },
		{ "message then close from a callback", test_ws_message_then_close },
		{ "server close unanswered: timeout", test_ws_server_close_timeout },
		{ "peer close echoed", test_ws_peer_close },
		{ "peer drops the connection: 1006", test_ws_peer_drop },
		{ "frames that came with the upgrade", test_ws_early_bytes },
		{ "free from inside on_text", test_ws_free_in_callback },
		{ "on_closed exactly once", test_ws_closed_once },
		{ "back-pressure and on_drained", test_ws_backpressure },
		{ "send checks on a bufferevent pair", test_ws_send_checks },
		{ "the largest text frame taken without a parser", test_ws_largest_direct_text },
		{ "texts sent without a parser: every length form",
		  test_ws_direct_send_length_forms },
		{ "a client refuses masked and non-minimal text frames",
		  test_ws_client_refuses_direct },
		{ "on_drained not from inside ws_send_text", test_ws_drained_not_from_send },
		{ "on_read_end when taking frames fails", test_ws_read_end_when_take_fails },
		{ "one pinger for many sessions", test_ws_pinger_shared },
		{ "no ping to a peer that spoke since the last tick",
		  test_ws_no_ping_to_a_talking_peer },
		{ "a skipped ping leaves the peer its deadline",
		  test_ws_skipped_ping_keeps_the_deadline },
		{ "TCP keepalive", test_keepalive },
	};
	static const struct test_def e2e_tests[] = {
		{ "handshake, echo, status, errors over TCP", test_end_to_end },
	};
	unsigned failed;

	signal(SIGPIPE, SIG_IGN);
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	if (ADD_SUITE("http_head", head_tests) || ADD_SUITE("ws_handshake", hs_tests) ||
	    ADD_SUITE("utf8", utf8_tests) || ADD_SUITE("ws_session", ws_tests) ||
	    ADD_SUITE("end_to_end", e2e_tests)) {
		CU_cleanup_registry();
		return 1;
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = CU_get_number_of_tests_failed() + CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
