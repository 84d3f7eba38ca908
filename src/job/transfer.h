/*
 * transfer.h - HTTP transfers of a handler process: GET into a sink, PUT
 * from a source, on libcurl's multi interface driven by the handler's
 * libevent loop.  No threads, no blocking call.  (Files and pipes as
 * bodies, for the tests: tests/lib/transfer_files.h, on transfer_set_end.)
 *
 * Owns: one CURLM per transfer_loop, one libevent event per curl socket,
 * one libevent timer for curl's timeout, and per transfer an easy handle, a
 * stall timer and at most one write callback's worth (16 KiB) of held data.
 *
 * Contract (the invariants the job code relies on):
 *  - done is called exactly once per transfer that was not aborted, always
 *    from the event loop: never from inside a transfer_* call, never from
 *    inside a sink or source callback.  After done returns the handle is
 *    gone (freed); do not use it.
 *  - transfer_abort(t) cancels: done is NOT called, no sink/source callback
 *    runs after transfer_abort returns, and its end hook (transfer_set_end)
 *    has run by then.  The handle is invalid after the call.  Memory and the socket are
 *    released on the loop's next turn (or by transfer_loop_free).  It may be
 *    called from anywhere, including a sink/source callback of the same or
 *    another transfer and another transfer's done; inside its own done it
 *    does nothing.
 *  - Pausing: a sink that cannot take everything (returns fewer bytes than
 *    offered, 0 included) must call transfer_resume(t) when it can take
 *    more; the bytes it did not take are kept by the transfer and offered
 *    again first, so no byte is lost or duplicated.  A source that returns
 *    TRANSFER_PAUSE must call transfer_resume(t) when it has data (or EOF).
 *    transfer_resume may be called from anywhere and any number of times;
 *    the actual restart happens from the loop.
 *  - Failure: any curl error, any HTTP status outside 200..299 (redirects
 *    are never followed), a sink/source error, a stall.  The body of an
 *    error response is never handed to the sink.
 *  - Stall: a transfer that moves no byte for stall_timeout_ms while it is
 *    waiting for the network fails (CURLE_OPERATION_TIMEDOUT).  Time spent
 *    paused by the local side (full sink, empty source) does not count.
 */
#ifndef ES_TRANSFER_H
#define ES_TRANSFER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

struct event_base;
struct transfer_loop;
struct transfer;

/* Returned by a source's read: nothing now, call transfer_resume later. */
#define TRANSFER_PAUSE ((ssize_t)-2)
/* Returned by a source's read: fail the transfer. */
#define TRANSFER_ERROR ((ssize_t)-1)
/* Returned by a sink's write: fail the transfer. */
#define TRANSFER_SINK_ERROR ((size_t)-1)

struct transfer_result {
	int ok;               /* 1: completed, status 2xx, every byte delivered */
	long http_status;     /* final status, 0 when no response was read */
	int curl_code;        /* CURLcode; CURLE_OK if curl itself succeeded */
	const char *error;    /* "" when ok; valid during the done call only */
	uint64_t bytes;       /* body bytes taken by the sink / given by the source */
	unsigned pauses;      /* times the transfer waited for its sink/source */
	uint64_t duration_ms; /* from creation to done */
	int refused;          /* 1: failed because the guard refused every address */
};

typedef void (*transfer_done_fn)(void *arg, const struct transfer_result *r);

struct transfer_sink {
	/* Offers len > 0 body bytes; returns how many were taken (0..len) or
	 * TRANSFER_SINK_ERROR.  Fewer than len: call transfer_resume later. */
	size_t (*write)(void *arg, const char *data, size_t len);
	transfer_done_fn done;
};

struct transfer_source {
	/* Fills up to cap bytes; returns > 0 bytes, 0 at the end of the body,
	 * TRANSFER_PAUSE (call transfer_resume later) or TRANSFER_ERROR. */
	ssize_t (*read)(void *arg, char *buf, size_t cap);
	transfer_done_fn done;
};

struct transfer_options {
	long connect_timeout_ms; /* TCP + TLS connect; default 10000 */
	long stall_timeout_ms;   /* no byte moved while waiting for the
				     * network; 0 = off; default 60000 */
	long total_timeout_ms;   /* whole transfer; 0 = off (default) */
	long keepalive_idle_sec; /* TCP keepalive idle and interval; 60 */
	const char *user_agent;  /* NULL: "execserver/<version>" */
	const char *proxy;       /* NULL: none (the environment is ignored) */
	const char *ca_file;     /* NULL: the system's CA store */
	const char *ca_path;
	int insecure; /* 1: no TLS peer/host verification */
	/* Called last on each new easy handle (a CURL *), for anything else
	 * TLS may need; returns 0, or -1 to refuse the transfer. */
	int (*setup)(void *easy, void *setup_arg);
	void *setup_arg;
};

/* Fills o with the built-in defaults. */
void transfer_options_init(struct transfer_options *o);

/* A loop on base; NULL on failure.  The first call initialises libcurl. */
struct transfer_loop *transfer_loop_new(struct event_base *base);
/* Aborts every transfer left (done is not called) and frees the loop.
 * Not from inside a transfer callback. */
void transfer_loop_free(struct transfer_loop *loop);
/* Options for transfers created from now on (strings are copied).
 * Returns 0 or -1 (out of memory; the previous options stay). */
int transfer_loop_set_defaults(struct transfer_loop *loop, const struct transfer_options *o);
/* Transfer objects alive, including aborted ones not yet released. */
unsigned transfer_loop_count(const struct transfer_loop *loop);

/*
 * Starting a transfer.  The sink/source structure is copied.  Returns the
 * handle, or NULL with errno set when it could not be created (then done
 * is never called).  Every other failure, an unusable URL included, is
 * reported through done.
 */
struct transfer *transfer_get(struct transfer_loop *loop, const char *url,
			      const struct transfer_sink *sink, void *arg);
/* size: the body length (Content-Length), or -1 for a chunked body. */
struct transfer *transfer_put(struct transfer_loop *loop, const char *url,
			      const struct transfer_source *src, void *arg, int64_t size);

/* An owner's end hook on t, for a sink or source that holds something
 * (an open file, an event): end(helper, ok) runs once when t ends, before
 * done, with ok 0 when it failed or was aborted (transfer_abort and
 * transfer_loop_free call it, and no done follows); a non-zero return
 * fails a transfer that had succeeded.  helper is freed (free()) with t. */
void transfer_set_end(struct transfer *t, int (*end)(void *helper, int ok), void *helper);
/* A download whose Content-Length is over max bytes is refused before
 * any byte of its body. */
void transfer_set_max_body(struct transfer *t, uint64_t max);
/* The event base the loop runs on. */
struct event_base *transfer_loop_base(const struct transfer_loop *loop);

/* The callback guard of one transfer: called with every address curl is
 * about to connect to (after name resolution); 1 allows it, 0 refuses it
 * (no socket is opened; curl tries its next address, if any).  A transfer
 * whose addresses were all refused fails with result.refused set; one that
 * could try an allowed address fails (if it does) as curl says. */
typedef int (*transfer_guard_fn)(void *arg, const struct sockaddr *sa, socklen_t len);
/* Sets t's guard; call right after creating t (before the loop runs).  A
 * guarded transfer never reuses a connection nor leaves one for reuse.
 * Returns 0 or -1 (curl refused an option). */
int transfer_set_guard(struct transfer *t, transfer_guard_fn fn, void *arg);

/* The sink or source can take or give data again (see the contract). */
void transfer_resume(struct transfer *t);
/* Cancels t; done is not called (see the contract). */
void transfer_abort(struct transfer *t);
/* Gives the reason a sink or source is about to return an error; it is
 * reported as the result's error text. */
void transfer_set_error(struct transfer *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
