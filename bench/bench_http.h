/*
 * bench_http.h - plain HTTP for the benchmarks: one request on a fresh
 * loopback connection with the bytes that crossed the wire counted (the
 * legacy token path's cost), and a byte source and sink for the streaming
 * row that does no work per byte beyond the socket calls.
 *
 * The source/sink runs in a forked child (one thread per connection) and
 * dies with the benchmark: GET /in/<bytes> answers that many bytes ('x',
 * Content-Length); PUT /out/<anything> reads the body to its end (chunked
 * or Content-Length) and answers 200 with the body length as text.
 */
#ifndef ES_BENCH_HTTP_H
#define ES_BENCH_HTTP_H

#include <stddef.h>
#include <sys/types.h>

struct http_count {
	long long tx, rx; /* bytes sent and received */
};

/* Sends request to 127.0.0.1:port, reads the answer until the server
 * closes.  Returns the status (0: none), adds to *count (may be NULL),
 * copies the body to body (may be NULL). */
int http_raw(int port, const char *request, struct http_count *count, char *body, size_t cap);

struct http_sink {
	pid_t pid;
	int port;
};
int http_sink_start(struct http_sink *s);
void http_sink_stop(struct http_sink *s);

#endif
