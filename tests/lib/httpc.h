/*
 * httpc.h - a plain HTTP/1.1 client for integration tests, on a raw
 * loopback socket: one request per connection (the server closes), the
 * body sent while the answer is read (so a large body streamed through a
 * job cannot deadlock), the whole answer read until the server closes,
 * then parsed: status, header fields, body (chunked decoded, trailer
 * fields kept apart).  No library: what goes over the wire is exactly
 * what the test wrote.
 */
#ifndef ES_TEST_HTTPC_H
#define ES_TEST_HTTPC_H

#include <stddef.h>

struct httpc_resp {
	int status;     /* 0: no status line */
	char *head;     /* the header block of the final answer, NUL-terminated */
	char *trailers; /* trailer fields of a chunked body, "" if none */
	char *body;     /* decoded body, NUL-terminated (may hold NULs) */
	size_t body_len;
	int chunked;     /* the body was chunked */
	int complete;    /* Content-Length reached, or the last chunk seen */
	int interim_100; /* a 100 Continue came first */
};

/*
 * Sends `method target` to 127.0.0.1:port with extra header lines
 * (each ending in \r\n, may be NULL; "Host: 127.0.0.1" unless they start
 * with a Host line of their own) and a body of len bytes (body NULL:
 * none).  chunk > 0 sends the body chunked in pieces of that size, else
 * with Content-Length (when body is not NULL).  Returns 0 (r filled, free
 * it with httpc_free) or -1 (connection failed, or no answer within
 * timeout_ms).
 */
int httpc_request(int port, const char *method, const char *target, const char *headers,
		  const void *body, size_t len, size_t chunk, int timeout_ms, struct httpc_resp *r);
void httpc_free(struct httpc_resp *r);
/* Value of a header field of head (or trailers), case-insensitive, copied
 * into out; NULL when absent. */
const char *httpc_field(const char *block, const char *name, char *out, size_t outlen);
/* Percent-encodes s for a query (static buffer, reused by each call). */
const char *httpc_qs(const char *s);

#endif
