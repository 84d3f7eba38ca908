/*
 * http_head.c - see http_head.h.  http-parser does the HTTP grammar; this
 * file collects the pieces it reports into a fixed store and enforces the
 * limits.  http-parser may hand over any string in several pieces (a feed
 * can end anywhere), so each string is appended to store as it comes and
 * NUL-terminated when the parser moves on to the next one.
 *
 * Stopping at the end of the head: on_headers_complete returns 2, which
 * tells http-parser to expect neither a body nor another message; it then
 * returns right after the final LF, so the caller keeps what follows.
 *
 * The packaged http-parser is built without its strict checks: it lets
 * blanks into field names and any byte >= 0x80 into the request-target.
 * Both are checked again here, as are control characters in field values
 * (RFC 7230 3.2.4, 3.1.1).  It also takes a CR followed by anything as a
 * line end (a head could end with CR CR and swallow the byte after it), so
 * it is never given the byte after a bare CR: the head fails there, at
 * the same byte however the stream was cut into feeds.
 */
#include "autoconfig.h"
#include "net/http_head.h"

#include <arpa/inet.h>
#include <limits.h>
#include <string.h>
#include <strings.h>

#include "common/hex.h"
#include "common/utf8.h"

enum {
	CUR_NONE,
	CUR_URL,
	CUR_FIELD,
	CUR_VALUE
};

static struct http_head_parser *parser_of(http_parser *hp)
{
	return hp->data;
}

static int fail(struct http_head_parser *p, int status)
{
	if (p->status == 0)
		p->status = status;
	return 1; /* non-zero stops http-parser */
}

static int store_append(struct http_head_parser *p, const char *at, size_t len)
{
	/* keep one byte for the terminating NUL */
	if (len >= sizeof p->store - p->used)
		return fail(p, 431);
	memcpy(p->store + p->used, at, len);
	p->used += len;
	return 0;
}

/* Ends the string being collected; returns a pointer to it. */
static const char *store_finish(struct http_head_parser *p)
{
	const char *s = p->store + p->cur_off;

	p->store[p->used++] = '\0';
	p->cur = CUR_NONE;
	return s;
}

static int is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* RFC 7230 3.2.6 tchar */
static int is_tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/*
 * Ends the field name being collected.  http-parser built without strict
 * checks lets blanks into names ("Host : x"), which RFC 7230 3.2.4 makes
 * a 400 (request smuggling); so every byte is checked here.
 */
static int finish_name(struct http_head_parser *p)
{
	const char *n = p->store + p->cur_off;
	size_t len = p->used - p->cur_off;

	if (len == 0)
		return fail(p, 400);
	for (size_t i = 0; i < len; i++)
		if (!is_tchar((unsigned char)n[i]))
			return fail(p, 400);
	p->head.headers[p->head.nheaders - 1].name = store_finish(p);
	p->cur_off = p->used;
	p->cur = CUR_VALUE;
	return 0;
}

/* The request-target: visible ASCII only (RFC 3986 and 7230 3.1.1). */
static int finish_target(struct http_head_parser *p)
{
	const char *t = p->store + p->cur_off;

	for (size_t i = 0; i < p->used - p->cur_off; i++)
		if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] >= 0x7f)
			return fail(p, 400);
	p->head.target = store_finish(p);
	return 0;
}

static int finish_value(struct http_head_parser *p)
{
	struct http_header *h = &p->head.headers[p->head.nheaders - 1];
	char *v = p->store + p->cur_off;
	size_t len = p->used - p->cur_off;

	while (len > 0 && is_blank(v[len - 1]))
		len--;
	p->used = p->cur_off + len;
	while (v < p->store + p->used && is_blank(*v))
		v++;
	for (const char *c = v; c < p->store + p->used; c++) {
		unsigned char u = (unsigned char)*c;
		if ((u < 0x20 && u != '\t') || u == 0x7f)
			return fail(p, 400);
	}
	store_finish(p);
	h->value = v;
	return 0;
}

/* Called whenever a different kind of string starts or the head ends. */
static int finish_current(struct http_head_parser *p)
{
	switch (p->cur) {
	case CUR_URL: return finish_target(p);
	case CUR_FIELD:
		/* a name without a value callback: treat as empty value */
		if (finish_name(p) != 0)
			return 1;
		return finish_value(p);
	case CUR_VALUE: return finish_value(p);
	default: return 0;
	}
}

static int on_url(http_parser *hp, const char *at, size_t len)
{
	struct http_head_parser *p = parser_of(hp);

	if (p->cur != CUR_URL) {
		if (p->cur != CUR_NONE || p->head.target != NULL)
			return fail(p, 400);
		p->cur = CUR_URL;
		p->cur_off = p->used;
	}
	if (p->used - p->cur_off + len > HTTP_URI_MAX)
		return fail(p, 414);
	/* The target's last piece is passed with the byte that ended it; a line
	 * end there means no HTTP-version, which http-parser takes for an
	 * HTTP/0.9 request: a malformed request line (RFC 9112 3). */
	if (at + len < p->feed_end && (at[len] == '\r' || at[len] == '\n'))
		return fail(p, 400);
	return store_append(p, at, len);
}

static int on_header_field(http_parser *hp, const char *at, size_t len)
{
	struct http_head_parser *p = parser_of(hp);

	if (p->cur != CUR_FIELD) {
		if (finish_current(p) != 0)
			return 1;
		if (p->head.nheaders >= HTTP_HEAD_MAX_HEADERS)
			return fail(p, 431);
		p->head.nheaders++;
		p->cur = CUR_FIELD;
		p->cur_off = p->used;
	}
	return store_append(p, at, len);
}

static int on_header_value(http_parser *hp, const char *at, size_t len)
{
	struct http_head_parser *p = parser_of(hp);

	if (p->cur == CUR_FIELD) {
		if (finish_name(p) != 0)
			return 1;
	} else if (p->cur != CUR_VALUE) {
		return fail(p, 400);
	}
	return store_append(p, at, len);
}

/* Copies [s, s+len) into store as a new string. */
static const char *store_copy(struct http_head_parser *p, const char *s, size_t len)
{
	p->cur_off = p->used;
	if (store_append(p, s, len) != 0)
		return NULL;
	return store_finish(p);
}

static int split_target(struct http_head_parser *p)
{
	struct http_head *h = &p->head;
	struct http_parser_url u;
	const char *t = h->target;
	size_t tlen = strlen(t);

	if (tlen == 0 || h->method_id == HTTP_CONNECT)
		return fail(p, 400);
	http_parser_url_init(&u);
	if (http_parser_parse_url(t, tlen, 0, &u) != 0)
		return fail(p, 400);
	if (u.field_set & (1 << UF_PATH))
		h->path = store_copy(p, t + u.field_data[UF_PATH].off, u.field_data[UF_PATH].len);
	else
		h->path = store_copy(p, "/", 1);
	if (u.field_set & (1 << UF_QUERY))
		h->query = store_copy(p, t + u.field_data[UF_QUERY].off,
				      u.field_data[UF_QUERY].len);
	else
		h->query = store_copy(p, "", 0);
	if (h->path == NULL || h->query == NULL)
		return 1;
	return 0;
}

/* Transfer-Encoding: the last coding must be chunked (RFC 7230 3.3.3). */
static int check_framing(struct http_head_parser *p)
{
	struct http_head *h = &p->head;
	const char *te = NULL;
	size_t nte = 0;

	for (size_t i = 0; i < h->nheaders; i++) {
		if (strcasecmp(h->headers[i].name, "Transfer-Encoding") == 0) {
			te = h->headers[i].value;
			nte++;
		}
	}
	h->has_content_length = (p->hp.flags & F_CONTENTLENGTH) != 0;
	h->content_length = h->has_content_length ? p->hp.content_length : 0;
	if (nte == 0)
		return 0;
	if (nte > 1 || h->has_content_length)
		return fail(p, 400);
	/* the last element of the list */
	const char *last = strrchr(te, ',');
	last = last ? last + 1 : te;
	while (is_blank(*last))
		last++;
	size_t n = strlen(last);
	while (n > 0 && is_blank(last[n - 1]))
		n--;
	if (n != 7 || strncasecmp(last, "chunked", 7) != 0)
		return fail(p, 400);
	h->chunked = 1;
	return 0;
}

static int on_headers_complete(http_parser *hp)
{
	struct http_head_parser *p = parser_of(hp);
	struct http_head *h = &p->head;

	if (finish_current(p) != 0)
		return -1;
	if (h->target == NULL) {
		fail(p, 400);
		return -1;
	}
	h->version_major = hp->http_major;
	h->version_minor = hp->http_minor;
	if (hp->http_major != 1) {
		fail(p, 505);
		return -1;
	}
	h->method_id = hp->method;
	h->method = http_method_str(hp->method);
	h->keep_alive = http_should_keep_alive(hp);
	if (http_header_count(h, "Host") > 1) { /* RFC 7230 5.4 */
		fail(p, 400);
		return -1;
	}
	if (split_target(p) != 0 || check_framing(p) != 0)
		return -1;
	p->result = HTTP_HEAD_DONE;
	/* no body, no further message: http-parser stops after the head */
	return 2;
}

static const http_parser_settings settings = {
	.on_url = on_url,
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
};

void http_head_parser_init(struct http_head_parser *p)
{
	memset(p, 0, offsetof(struct http_head_parser, store));
	http_parser_init(&p->hp, HTTP_REQUEST);
	p->hp.data = p;
	p->result = HTTP_HEAD_NEED_MORE;
	p->cur = CUR_NONE;
}

static int map_errno(enum http_errno e)
{
	switch (e) {
	case HPE_HEADER_OVERFLOW: return 431;
	default: return 400;
	}
}

/* How many of the n bytes at data come before the first byte that follows
 * a bare CR (a CR not followed by LF; the CR may end the previous feed):
 * n if there is none. */
static size_t before_bare_cr(const struct http_head_parser *p, const char *data, size_t n)
{
	int after_cr = p->after_cr;

	for (size_t i = 0; i < n; i++) {
		if (after_cr && data[i] != '\n')
			return i;
		after_cr = data[i] == '\r';
	}
	return n;
}

int http_head_feed(struct http_head_parser *p, const char *data, size_t len, size_t *consumed)
{
	size_t room, n, k, done;

	*consumed = 0;
	if (p->result != HTTP_HEAD_NEED_MORE)
		return p->result;
	if (len == 0)
		return HTTP_HEAD_NEED_MORE;
	/* never let the parser see more than the head may still hold, nor the
	 * byte after a bare CR (so it cannot take the CR for a line end) */
	room = HTTP_HEAD_MAX - p->total;
	n = len < room ? len : room;
	k = before_bare_cr(p, data, n);
	/* a zero length would tell http-parser the stream ended */
	p->feed_end = data + k;
	done = k > 0 ? http_parser_execute(&p->hp, &settings, data, k) : 0;
	if (p->result == HTTP_HEAD_DONE) {
		if (HTTP_PARSER_ERRNO(&p->hp) != HPE_OK || done > k) {
			p->result = HTTP_HEAD_ERROR;
			p->status = 400;
			return p->result;
		}
		p->total += done;
		*consumed = done;
		return HTTP_HEAD_DONE;
	}
	if (HTTP_PARSER_ERRNO(&p->hp) != HPE_OK || done != k) {
		p->result = HTTP_HEAD_ERROR;
		if (p->status == 0)
			p->status = map_errno(HTTP_PARSER_ERRNO(&p->hp));
		*consumed = done <= k ? done : k;
		return p->result;
	}
	if (k < n) {
		/* the head goes on past a bare CR */
		p->result = HTTP_HEAD_ERROR;
		p->status = 400;
		*consumed = k;
		return p->result;
	}
	p->after_cr = data[n - 1] == '\r';
	p->total += n;
	*consumed = n;
	if (p->total >= HTTP_HEAD_MAX) {
		/* the head is not over and may not grow any more */
		p->result = HTTP_HEAD_ERROR;
		p->status = p->cur == CUR_URL ? 414 : 431;
		return p->result;
	}
	return HTTP_HEAD_NEED_MORE;
}

int http_head_status(const struct http_head_parser *p)
{
	return p->result == HTTP_HEAD_ERROR ? p->status : 0;
}

const struct http_head *http_head_get(const struct http_head_parser *p)
{
	return p->result == HTTP_HEAD_DONE ? &p->head : NULL;
}

const char *http_header_get(const struct http_head *h, const char *name)
{
	for (size_t i = 0; i < h->nheaders; i++)
		if (strcasecmp(h->headers[i].name, name) == 0)
			return h->headers[i].value;
	return NULL;
}

int http_host_is_address(const struct http_head *h)
{
	const char *host = http_header_get(h, "Host"), *end;
	char name[64];
	unsigned char a[16];
	if (!host)
		return 1;
	if (host[0] == '[') {
		host++;
		end = strchr(host, ']');
	} else {
		end = strchr(host, ':');
		if (!end)
			end = host + strlen(host);
	}
	if (!end || (size_t)(end - host) >= sizeof name)
		return 0;
	memcpy(name, host, (size_t)(end - host));
	name[end - host] = '\0';
	return strcasecmp(name, "localhost") == 0 || inet_pton(AF_INET, name, a) == 1 ||
	       inet_pton(AF_INET6, name, a) == 1;
}

size_t http_header_count(const struct http_head *h, const char *name)
{
	size_t n = 0;

	for (size_t i = 0; i < h->nheaders; i++)
		if (strcasecmp(h->headers[i].name, name) == 0)
			n++;
	return n;
}

int http_token_list_has(const char *list, const char *token)
{
	size_t tlen = strlen(token);
	const char *s = list;

	if (list == NULL || tlen == 0)
		return 0;
	while (*s != '\0') {
		const char *e;
		size_t n;

		while (is_blank(*s) || *s == ',')
			s++;
		e = s;
		while (*e != '\0' && *e != ',')
			e++;
		n = (size_t)(e - s);
		while (n > 0 && is_blank(s[n - 1]))
			n--;
		if (n == tlen && strncasecmp(s, token, tlen) == 0)
			return 1;
		s = e;
	}
	return 0;
}

int http_header_has_token(const struct http_head *h, const char *name, const char *token)
{
	for (size_t i = 0; i < h->nheaders; i++)
		if (strcasecmp(h->headers[i].name, name) == 0 &&
		    http_token_list_has(h->headers[i].value, token))
			return 1;
	return 0;
}

/*
 * Decodes [s, e) into out (capacity cap, NUL-terminated).  Returns the
 * decoded length, HTTP_QP_INVALID or HTTP_QP_TOO_LONG.
 */
static int decode_component(const char *s, const char *e, char *out, size_t cap)
{
	size_t n = 0;

	while (s < e) {
		unsigned char c = (unsigned char)*s;

		if (c == '%') {
			int hi, lo;

			if (e - s < 3 || (hi = hex_digit(s[1])) < 0 || (lo = hex_digit(s[2])) < 0)
				return HTTP_QP_INVALID;
			c = (unsigned char)(hi << 4 | lo);
			s += 3;
		} else {
			if (c == '+')
				c = ' ';
			s++;
		}
		if (c < 0x20 || c == 0x7f)
			return HTTP_QP_INVALID;
		if (n + 1 >= cap || n >= INT_MAX)
			return HTTP_QP_TOO_LONG;
		out[n++] = (char)c;
	}
	out[n] = '\0';
	if (!utf8_valid((const unsigned char *)out, n))
		return HTTP_QP_INVALID;
	return (int)n;
}

int http_query_param(const char *query, const char *name, char *out, size_t outlen)
{
	char key[256];
	const char *s = query;

	if (query == NULL || name == NULL || out == NULL || outlen == 0)
		return HTTP_QP_ABSENT;
	while (*s != '\0') {
		const char *amp = strchr(s, '&');
		const char *end = amp ? amp : s + strlen(s);
		const char *eq = memchr(s, '=', (size_t)(end - s));
		const char *kend = eq ? eq : end;
		int klen = decode_component(s, kend, key, sizeof key);

		/* a malformed name cannot be the one asked for: skip it */
		if (klen >= 0 && strcmp(key, name) == 0) {
			if (eq == NULL) {
				out[0] = '\0';
				return 0;
			}
			return decode_component(eq + 1, end, out, outlen);
		}
		s = amp ? amp + 1 : end;
	}
	return HTTP_QP_ABSENT;
}

const char *http_reason(int status)
{
	const char *r;

	if (status < 100 || status > 599)
		return "";
	r = http_status_str((enum http_status)status);
	return (r == NULL || r[0] == '<') ? "" : r;
}
