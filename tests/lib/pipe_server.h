/*
 * pipe_server.h - a small HTTP server (libevent evhttp) that plays a
 * client's pipe and file endpoints in tests.  It runs in a forked child, so
 * a test may block (or drive a daemon) while it serves; it dies with the
 * test process.
 *
 * Endpoints (all on 127.0.0.1, or on the address given to
 * pipe_server_start_at):
 *   GET  /in/<name>      serves the bytes registered for name: a file, or
 *                        `size` pseudo-random bytes from a seed (so 100 MiB+
 *                        need no file), Content-Length or chunked; it may
 *                        answer another status, drop the connection after K
 *                        body bytes, or stop sending after K bytes and hold
 *                        the connection open.  An unregistered name: 404.
 *   PUT  /out/<name>     consumes the body (chunked or not), stores its
 *                        length and SHA-256 and answers the registered
 *                        status (200 by default; any name is accepted).
 *   GET  /result/<name>  {"requests":K,"length":N,"sha256":"hex",
 *                        "chunked":true,"content_length":N|-1,"sent":N,
 *                        "user_agent":"...","peer":"10.250.0.13"}:
 *                        requests counts every request for name (GET /in
 *                        and PUT /out alike, so "each pipe URL is used
 *                        exactly once" is requests == 1); length/sha256/
 *                        chunked/content_length describe the last PUT body;
 *                        sent is the body bytes the last GET wrote;
 *                        user_agent and peer those of the last request.  404 if
 *                        the name was never registered nor used.
 *   POST /control        JSON {"op":"in"|"out","name":...} plus the fields
 *                        of struct pipe_endpoint below; answers {"url":...},
 *                        the URL to use.  Registering a name again replaces
 *                        it and clears its results.
 *
 * Slow endpoints (rate > 0) get a listener of their own whose connections
 * are rate limited both ways (a libevent token bucket), which is why the
 * answer carries the URL: evhttp in libevent 2.1 hands a request to the
 * application only once its body is complete, so a per-request limit
 * cannot be set in time.  For the same reason a PUT body is held in the
 * server process until it is complete (the test process is not affected).
 *
 * Names: 1-64 of [A-Za-z0-9._-].
 */
#ifndef ES_PIPE_SERVER_H
#define ES_PIPE_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "suite.h"

struct pipe_server {
	pid_t pid;
	int port;
	char host[16];  /* the address it listens on */
	char netns[40]; /* its network namespace ("": the test's) */
};

struct pipe_endpoint {
	const char *file; /* GET: serve this file, or else: */
	uint64_t seed;    /* GET: `size` pseudo-random bytes from seed */
	uint64_t size;
	int status;           /* 0: 200 */
	const char *location; /* a Location header (redirects), or NULL */
	uint64_t rate;        /* bytes per second both ways; 0: unlimited */
	int64_t drop_after;   /* GET: close the connection after this many
				* body bytes; -1: never */
	int64_t stall_after;  /* GET: stop sending after this many body bytes
				* but keep the connection; -1: never */
	int chunked;          /* GET: chunked instead of Content-Length */
};
#define PIPE_ENDPOINT_INIT                          \
	{                                           \
		.drop_after = -1, .stall_after = -1 \
	}

struct pipe_result {
	unsigned requests;
	uint64_t length;        /* last PUT body */
	char sha256[65];        /* its SHA-256, lower-case hex */
	int chunked;            /* it came with Transfer-Encoding: chunked */
	int64_t content_length; /* its Content-Length, -1 if none */
	uint64_t sent;          /* body bytes written by the last GET */
	char user_agent[128];   /* User-Agent of the last request */
	char peer[48];          /* the address the last request came from */
};

/* Forks the server; returns its port, or -1. */
int pipe_server_start(struct pipe_server *ps);
/* The same in network namespace netns (a bed host, bed.h; NULL: the
 * test's), listening on host (NULL: 127.0.0.1). */
int pipe_server_start_at(struct pipe_server *ps, const char *netns, const char *host);
/* Kills and reaps it. */
void pipe_server_stop(struct pipe_server *ps);

/* Registers GET /in/<name> or PUT /out/<name>; url gets the URL to use.
 * Returns 0 or -1. */
int pipe_server_in(const struct pipe_server *ps, const char *name, const struct pipe_endpoint *e,
		   char *url, size_t urllen);
int pipe_server_out(const struct pipe_server *ps, const char *name, const struct pipe_endpoint *e,
		    char *url, size_t urllen);
/* GET /result/<name>.  Returns 0, or -1 (unknown name, no server). */
int pipe_server_result(const struct pipe_server *ps, const char *name, struct pipe_result *r);

/* The pseudo-random stream the server serves: bytes [offset, offset+len)
 * of the stream for seed. */
void pipe_random_fill(uint64_t seed, uint64_t offset, void *buf, size_t len);
/* SHA-256 (hex) of the first size bytes of that stream. */
void pipe_random_sha256(uint64_t seed, uint64_t size, char hex[65]);
/* Lower-case hex of a 32-byte digest. */
void pipe_sha256_hex(const unsigned char md[32], char hex[65]);
/* SHA-256 (hex) and size of the file at path.  Returns 0, or -1 when it
 * cannot be opened. */
int pipe_file_sha256(const char *path, char hex[65], uint64_t *size);

/* The main() of a test program that uses the pipe server: srv is forked
 * first (before anything else exists in the process), dir (len bytes)
 * becomes a fresh directory /tmp/test_NAME.XXXXXX, the cases run (suite
 * NAME) and srv stops.  The caller removes dir (left "" when it was not
 * made).  Returns the exit status. */
int pipe_server_run_suite(struct pipe_server *srv, const char *name, const struct test_case *cases,
			  char *dir, size_t len);

#endif
