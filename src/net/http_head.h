/*
 * http_head.h - an incremental, bounded parser for HTTP/1.x request heads
 * (request line + header fields), built on the packaged http-parser.
 *
 * Owns: struct http_head_parser and the strings of the head it parsed.
 * Invariants:
 *  - nothing is allocated: every string lives in the parser's own fixed
 *    store, so a parser costs a constant ~14 KiB and feeding it arbitrary
 *    bytes can neither grow memory nor overrun a buffer;
 *  - lines end with CRLF or a bare LF; a CR not followed by LF anywhere in
 *    the head fails with 400 (RFC 9112 2.2: a bare CR is invalid, and
 *    reading it as a line end would let the head end elsewhere than a
 *    proxy in front of us thinks);
 *  - a request line of another shape than METHOD SP target SP HTTP/d.d
 *    (no version, anything after it, a version not one digit each side of
 *    the dot) fails with 400 (RFC 9112 3); 505 is only for a well-formed
 *    version whose major number is not 1;
 *  - a head larger than HTTP_HEAD_MAX bytes (request line, header lines and
 *    the empty line) fails with 431, a request-target longer than
 *    HTTP_URI_MAX with 414, more than HTTP_HEAD_MAX_HEADERS fields with 431;
 *  - the feeder stops exactly after the empty line that ends the head: the
 *    bytes that follow (a request body, a pipelined request, or the first
 *    websocket frame sent right behind an upgrade request) are never
 *    consumed;
 *  - the strings in struct http_head point into the parser: do not copy or
 *    move a parser once feeding started, and keep it alive while the head
 *    is in use.
 */
#ifndef ES_HTTP_HEAD_H
#define ES_HTTP_HEAD_H

#include <stddef.h>
#include <stdint.h>

#include <http_parser.h>

#define HTTP_HEAD_MAX 8192       /* whole head, bytes */
#define HTTP_URI_MAX 4096        /* request-target, bytes */
#define HTTP_HEAD_MAX_HEADERS 64 /* header fields */
/* Strings of the head (each NUL-terminated) plus copies of path and query. */
#define HTTP_HEAD_STORE (HTTP_HEAD_MAX + HTTP_URI_MAX + 64)

/* Results of http_head_feed(). */
enum {
	HTTP_HEAD_ERROR = -1, /* bad head; http_head_status() says what to answer */
	HTTP_HEAD_NEED_MORE = 0,
	HTTP_HEAD_DONE = 1,
};

struct http_header {
	const char *name;  /* as received; compare case-insensitively */
	const char *value; /* leading and trailing blanks removed */
};

struct http_head {
	const char *method; /* "GET", "POST"... (http_method_str) */
	int method_id;      /* enum http_method */
	const char *target; /* the raw request-target */
	const char *path;   /* raw path: no query, not percent-decoded */
	const char *query;  /* raw query without '?', "" if none */
	int version_major, version_minor;
	int keep_alive; /* http_should_keep_alive() */
	int has_content_length;
	uint64_t content_length; /* valid when has_content_length */
	int chunked;             /* Transfer-Encoding ends with chunked */
	size_t nheaders;
	struct http_header headers[HTTP_HEAD_MAX_HEADERS];
};

/* Opaque in spirit: use the functions below, not the fields. */
struct http_head_parser {
	http_parser hp;
	int result;           /* HTTP_HEAD_* */
	int status;           /* HTTP status to answer when result is ERROR */
	size_t total;         /* head bytes consumed so far */
	int cur;              /* which string is being collected */
	int after_cr;         /* the last head byte seen was a CR */
	const char *feed_end; /* end of the bytes http-parser is given */
	size_t cur_off;       /* where it starts in store */
	size_t used;          /* bytes of store in use */
	struct http_head head;
	char store[HTTP_HEAD_STORE];
};

void http_head_parser_init(struct http_head_parser *p);

/*
 * Feeds the next len bytes of the connection.  *consumed is set to the
 * number of bytes that belong to the head (all of them while NEED_MORE;
 * on DONE the bytes after the head are left to the caller).  After DONE or
 * ERROR further calls return the same result and consume nothing.
 */
int http_head_feed(struct http_head_parser *p, const char *data, size_t len, size_t *consumed);

/* The HTTP status to answer after ERROR: 400, 414, 431 or 505. */
int http_head_status(const struct http_head_parser *p);

/* The parsed head after DONE, else NULL. */
const struct http_head *http_head_get(const struct http_head_parser *p);

/* Value of the first header field called name (case-insensitive), or NULL. */
const char *http_header_get(const struct http_head *h, const char *name);
/* 1 when h's Host names an IP address or localhost (with or without a
 * port), or h has none; 0 for a DNS name, which a rebinding attack could
 * point at this address (docs/security.md, "DNS rebinding"). */
int http_host_is_address(const struct http_head *h);

/* How many header fields are called name. */
size_t http_header_count(const struct http_head *h, const char *name);

/*
 * 1 if the comma-separated list contains token (case-insensitive, blanks
 * around elements ignored), e.g. http_token_list_has("keep-alive, Upgrade",
 * "upgrade").
 */
int http_token_list_has(const char *list, const char *token);

/* 1 if any header field called name has token in its list value. */
int http_header_has_token(const struct http_head *h, const char *name, const char *token);

/* Results of http_query_param() other than a length. */
enum {
	HTTP_QP_ABSENT = -1,   /* no such parameter */
	HTTP_QP_INVALID = -2,  /* bad %-escape, control character or bad UTF-8 */
	HTTP_QP_TOO_LONG = -3, /* decoded value does not fit in out */
};

/*
 * Looks up parameter name in a raw query string ("a=1&b=x%20y").  Names
 * and values are percent-decoded and '+' decodes to a space (the
 * form-urlencoded convention).  The first parameter whose decoded name
 * equals name wins; "a" and "a=" both give the empty value.  On success the
 * NUL-terminated decoded value is stored in out and its length returned.
 * A value that decodes to NUL, another control character (below 0x20, or
 * 0x7F) or invalid UTF-8 gives HTTP_QP_INVALID.
 */
int http_query_param(const char *query, const char *name, char *out, size_t outlen);

/* The reason phrase of an HTTP status ("Bad Request"), "" if unknown. */
const char *http_reason(int status);

#endif
