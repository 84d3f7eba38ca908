/*
 * fuzz_http_head.c - fuzz target of the HTTP request head parser
 * (src/net/http_head.c) and of what the handler does next with a
 * parsed head (the websocket handshake check, query parameters).  The
 * input is the first bytes a client sent on a new connection.
 *
 * Properties checked, beyond "no crash, no leak, no undefined behaviour":
 *  - feeding the input at once and one byte at a time gives the same
 *    result (DONE, NEED_MORE or ERROR) and, unless it is an error, the
 *    same number of consumed bytes: the parser does not depend on how
 *    TCP cut the stream;
 *  - the parser never consumes more than it was given, and on DONE stops
 *    right after the empty line (the bytes after it are the caller's);
 *  - an accepted head holds no bare CR (a CR that is not followed by LF);
 *  - an error answers one of the documented statuses (400, 414, 431, 505);
 *  - a parsed head has every string set, at most HTTP_HEAD_MAX_HEADERS
 *    fields, and a query parameter never overflows its buffer.
 */
#include "autoconfig.h"

#include <string.h>

#include "fuzz.h"
#include "net/http_head.h"
#include "net/ws_handshake.h"

/* Parsers are big (~14 KiB): static, re-initialized for every input. */
static struct http_head_parser whole, bytewise;

static int feed_bytewise(const uint8_t *data, size_t size, size_t *consumed)
{
	int r = HTTP_HEAD_NEED_MORE;

	*consumed = 0;
	for (size_t i = 0; i < size && r == HTTP_HEAD_NEED_MORE; i++) {
		size_t used = 0;

		r = http_head_feed(&bytewise, (const char *)data + i, 1, &used);
		FUZZ_CHECK(used <= 1);
		*consumed += used;
	}
	return r;
}

static void check_head(const struct http_head *h)
{
	char accept[WS_ACCEPT_LEN + 1];
	char value[64];
	int n;

	FUZZ_CHECK(h->method && h->target && h->path && h->query);
	FUZZ_CHECK(h->nheaders <= HTTP_HEAD_MAX_HEADERS);
	for (size_t i = 0; i < h->nheaders; i++) {
		FUZZ_CHECK(h->headers[i].name && h->headers[i].value);
		FUZZ_CHECK(http_header_get(h, h->headers[i].name) != NULL);
	}
	n = ws_handshake_check(h, accept);
	FUZZ_CHECK(n == 0 || n == 400 || n == 405 || n == 426);
	if (n == 0)
		FUZZ_CHECK(strlen(accept) == WS_ACCEPT_LEN);
	(void)http_header_has_token(h, "Connection", "upgrade");
	n = http_query_param(h->query, "token", value, sizeof value);
	FUZZ_CHECK(n >= HTTP_QP_TOO_LONG && n < (int)sizeof value);
	if (n >= 0)
		FUZZ_CHECK(strlen(value) == (size_t)n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t used_whole = 0, used_bytes = 0;
	int r1, r2;

	http_head_parser_init(&whole);
	http_head_parser_init(&bytewise);
	r1 = http_head_feed(&whole, (const char *)data, size, &used_whole);
	r2 = feed_bytewise(data, size, &used_bytes);
	FUZZ_CHECK(r1 == r2);
	FUZZ_CHECK(used_whole <= size);
	if (r1 != HTTP_HEAD_ERROR)
		FUZZ_CHECK(used_whole == used_bytes);
	if (r1 == HTTP_HEAD_ERROR) {
		int st = http_head_status(&whole);

		/* not compared with the bytewise status: http-parser reports a
		 * field in pieces that depend on the cut, so which of two faults
		 * in one head is noticed first (say 400 or 431) may differ */
		FUZZ_CHECK(http_head_status(&bytewise) != 0);
		FUZZ_CHECK(st == 400 || st == 414 || st == 431 || st == 505);
		FUZZ_CHECK(http_reason(st)[0] != '\0');
		FUZZ_CHECK(http_head_get(&whole) == NULL);
		return 0;
	}
	if (r1 == HTTP_HEAD_NEED_MORE) {
		FUZZ_CHECK(used_whole == size);
		FUZZ_CHECK(http_head_get(&whole) == NULL);
		return 0;
	}
	/* DONE: the head ends with the empty line; every CR ends a line */
	FUZZ_CHECK(used_whole >= 2 && data[used_whole - 1] == '\n');
	for (size_t i = 0; i < used_whole; i++)
		FUZZ_CHECK(data[i] != '\r' || data[i + 1] == '\n');
	check_head(http_head_get(&whole));
	FUZZ_CHECK(http_head_get(&bytewise)->nheaders == http_head_get(&whole)->nheaders);
	return 0;
}
