/*
 * legacy_stream.c - see legacy_stream.h.
 *
 * One struct lstream per PUT /job that got its job started.  Its two
 * streams are job_io's stdin and stdout (job_io.h): the request body is
 * decoded (Content-Length or chunked) and offered to the stdin sink; the
 * stdout source is pulled into the response.  job_io opens stdout only
 * once the output outgrows its 4000-byte buffer (then with size -1: the
 * response is committed, 200 with a chunked body) or once the program
 * succeeded (then with its size: the bytes are kept and answered at the
 * end, with the outcome in header fields).  The outcome of a committed
 * response goes into trailer fields after the last chunk.
 *
 * Invariants:
 *  - stream callbacks (the sink's write, the source's read, both done)
 *    only run from pump(), which only runs from a libevent callback:
 *    never inside a job_io call (the transfer contract);
 *  - a committed response whose job failed gets its last chunk only when
 *    the client announced "TE: trailers" (it reads the failure there);
 *    otherwise the connection is cut before the last chunk, so a failure
 *    can never pass for a complete body;
 *  - the lstream lives until both the job's done came (job == NULL) and
 *    the connection is finished (bev == NULL); counted in handler.nhttp;
 *  - back-pressure: at most LS_READ_MAX request bytes are buffered (the
 *    socket is not read further while stdin waits), and stdout is pulled
 *    only while less than LS_WRITE_MAX response bytes wait to be sent.
 */
#include "autoconfig.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/hex.h"
#include "common/log.h"
#include "execserver/protocol.h"
#include "handler/handler.h"
#include "handler/legacy_stream.h"
#include "job/job.h"
#include "job/job_io.h"
#include "job/receipt.h"
#include "job/transfer.h"

#define LS_READ_MAX (256 * 1024)
#define LS_WRITE_MAX (64 * 1024)
#define LS_CHUNK 16384
#define LS_LINE_MAX 1024 /* chunk-size and trailer lines */
#define LS_LINGER_S 2    /* reading what the client still sends, after the answer */

enum body_state {
	B_LENGTH,
	B_CHUNK_SIZE,
	B_CHUNK_DATA,
	B_CHUNK_CRLF,
	B_TRAILERS,
	B_END,
	B_ERROR
};

struct lstream;

/* One direction: job_io's handle is a pointer to this. */
struct lside {
	struct lstream *ls;
	int open;   /* between open and done/abort */
	int paused; /* waits for resume */
	int ended;  /* done is due: ok unless failed */
	int failed;
	union {
		struct transfer_sink sink;
		struct transfer_source src;
	} cb;
	void *arg;
	uint64_t bytes;
	char err[256];
};

struct lstream {
	struct bufferevent *bev; /* NULL once the connection is finished or gone */
	char peer[64];
	struct job *job; /* NULL once the job's done came */
	int gone;        /* the client went away while the job ran */
	int cancel_sent;
	int te_trailers, expect_continue;
	enum body_state body;
	uint64_t left; /* B_LENGTH: body bytes; B_CHUNK_DATA: chunk bytes */
	char body_why[128];
	int eof;                /* the client's side of the connection ended */
	int committed;          /* the 200 head with a chunked body went out */
	int closing;            /* the answer is queued */
	struct evbuffer *small; /* a sized output, answered at the end */
	struct event *pump_ev, *linger_ev;
	struct lside in, out;
};

static void pump(struct lstream *ls);

static void ls_free(struct lstream *ls)
{
	if (ls->bev)
		bufferevent_free(ls->bev);
	if (ls->small)
		evbuffer_free(ls->small);
	if (ls->pump_ev)
		event_free(ls->pump_ev);
	if (ls->linger_ev)
		event_free(ls->linger_ev);
	free(ls);
	handler.nhttp--;
	handler_maybe_exit();
}

/* The connection is over (answered, cut, or gone). */
static void finish_conn(struct lstream *ls)
{
	if (ls->bev) {
		bufferevent_free(ls->bev);
		ls->bev = NULL;
	}
	if (ls->linger_ev)
		event_del(ls->linger_ev);
	if (!ls->job)
		ls_free(ls);
}

static void pump_later(struct lstream *ls)
{
	event_active(ls->pump_ev, 0, 0);
}

static void pump_cb(evutil_socket_t fd, short what, void *arg)
{
	pump(arg);
}

static void linger_cb(evutil_socket_t fd, short what, void *arg)
{
	finish_conn(arg);
}

/* ---- request body -> stdin ------------------------------------------------- */

static void body_fail(struct lstream *ls, const char *why)
{
	ls->body = B_ERROR;
	snprintf(ls->body_why, sizeof ls->body_why, "%s", why);
}

/* A chunk-size line: hex digits, then optional extensions after ';'. */
static int chunk_size(const char *line, uint64_t *size)
{
	uint64_t v = 0;
	int digits = 0;
	for (; *line; line++, digits++) {
		int d = hex_digit(*line);
		if (d < 0)
			break;
		if (v >> 60)
			return -1;
		v = v * 16 + (uint64_t)d;
	}
	while (*line == ' ' || *line == '\t')
		line++;
	if (digits == 0 || (*line && *line != ';'))
		return -1;
	*size = v;
	return 0;
}

/* Advances the decoder over framing; returns 1 when body data (ls->left
 * bytes of it) is next, 0 when more input is needed, -1 at the end or on
 * an error (ls->body says which). */
static int body_frame(struct lstream *ls, struct evbuffer *in)
{
	for (;;) {
		switch (ls->body) {
		case B_END:
		case B_ERROR: return -1;
		case B_LENGTH:
		case B_CHUNK_DATA:
			if (ls->left > 0)
				return 1;
			ls->body = ls->body == B_LENGTH ? B_END : B_CHUNK_CRLF;
			continue;
		default: break;
		}
		size_t n;
		char *line = evbuffer_readln(in, &n, EVBUFFER_EOL_CRLF);
		if (!line) {
			if (evbuffer_get_length(in) > LS_LINE_MAX)
				body_fail(ls, "chunked body: a line longer than 1024 bytes");
			return ls->body == B_ERROR ? -1 : 0;
		}
		if (ls->body == B_CHUNK_SIZE) {
			uint64_t size;
			if (chunk_size(line, &size) != 0)
				body_fail(ls, "chunked body: bad chunk size");
			else if (size == 0)
				ls->body = B_TRAILERS;
			else {
				ls->left = size;
				ls->body = B_CHUNK_DATA;
			}
		} else if (ls->body == B_CHUNK_CRLF) {
			if (n != 0)
				body_fail(ls, "chunked body: chunk data longer than its size");
			else
				ls->body = B_CHUNK_SIZE;
		} else if (n == 0) { /* B_TRAILERS: the empty line ends them */
			ls->body = B_END;
		}
		free(line);
	}
}

static void side_end(struct lside *s, const char *fail_why)
{
	s->ended = 1;
	if (fail_why) {
		s->failed = 1;
		if (!s->err[0])
			snprintf(s->err, sizeof s->err, "%s", fail_why);
	}
}

static void feed_stdin(struct lstream *ls)
{
	struct lside *s = &ls->in;
	if (!ls->bev) {
		side_end(s, "the client closed the connection");
		return;
	}
	struct evbuffer *in = bufferevent_get_input(ls->bev);
	while (!s->ended && !s->paused) {
		int r = body_frame(ls, in);
		if (r < 0) {
			side_end(s, ls->body == B_END ? NULL : ls->body_why);
			return;
		}
		struct evbuffer_iovec v;
		/* evbuffer_peek may report an empty chain (libevent keeps one
		 * after EOF): no bytes is "nothing there yet", never a write of
		 * 0 bytes, which would loop here forever */
		if (r == 0 || evbuffer_get_length(in) == 0 ||
		    evbuffer_peek(in, -1, NULL, &v, 1) < 1 || v.iov_len == 0) {
			if (ls->eof)
				side_end(s, "the client closed the connection before the end of "
					    "the body");
			return; /* more when the client sends it */
		}
		size_t n = v.iov_len < ls->left ? v.iov_len : (size_t)ls->left;
		size_t took = s->cb.sink.write(s->arg, v.iov_base, n);
		if (took == TRANSFER_SINK_ERROR) {
			side_end(s, "the program's input failed");
			return;
		}
		evbuffer_drain(in, took);
		ls->left -= took;
		s->bytes += took;
		if (took < n || took == 0)
			s->paused = 1; /* job_io resumes us */
	}
}

/* ---- stdout -> response body ---------------------------------------------- */

static void pull_stdout(struct lstream *ls)
{
	struct lside *s = &ls->out;
	if (!ls->bev) {
		side_end(s, "the client closed the connection");
		return;
	}
	struct evbuffer *o = bufferevent_get_output(ls->bev);
	char buf[LS_CHUNK];
	while (!s->ended && !s->paused && evbuffer_get_length(o) < LS_WRITE_MAX) {
		ssize_t r = s->cb.src.read(s->arg, buf, sizeof buf);
		if (r > 0) {
			if (ls->small) {
				evbuffer_add(ls->small, buf, (size_t)r);
			} else {
				evbuffer_add_printf(o, "%zx\r\n", (size_t)r);
				evbuffer_add(o, buf, (size_t)r);
				evbuffer_add(o, "\r\n", 2);
			}
			s->bytes += (uint64_t)r;
		} else if (r == 0) {
			side_end(s, NULL);
		} else if (r == TRANSFER_PAUSE) {
			s->paused = 1;
		} else {
			side_end(s, "the program's output failed");
		}
	}
}

/* ---- the pump ----------------------------------------------------------------- */

static void deliver(struct lside *s)
{
	if (!s->open || !s->ended)
		return;
	s->open = 0;
	struct transfer_result r = {
		.ok = !s->failed,
		.error = s->failed ? s->err : "",
		.bytes = s->bytes,
	};
	if (s == &s->ls->in)
		s->cb.sink.done(s->arg, &r);
	else
		s->cb.src.done(s->arg, &r);
}

static void pump(struct lstream *ls)
{
	if (ls->in.open && !ls->in.paused && !ls->in.ended)
		feed_stdin(ls);
	if (ls->out.open && !ls->out.paused && !ls->out.ended)
		pull_stdout(ls);
	/* nothing job_io does in a done calls us back or frees us */
	deliver(&ls->in);
	deliver(&ls->out);
	if (ls->bev && ls->body == B_END && !ls->in.open) {
		/* what follows the body is not ours: read it to notice the end */
		struct evbuffer *in = bufferevent_get_input(ls->bev);
		evbuffer_drain(in, evbuffer_get_length(in));
	}
	if (ls->gone && ls->job && !ls->cancel_sent) {
		ls->cancel_sent = 1;
		job_body_cancel(ls->job); /* last: its done may free ls */
	}
}

/* ---- the connection ---------------------------------------------------------- */

static void on_read(struct bufferevent *bev, void *arg)
{
	struct lstream *ls = arg;
	if (ls->closing) {
		struct evbuffer *in = bufferevent_get_input(bev);
		evbuffer_drain(in, evbuffer_get_length(in));
		return;
	}
	pump(ls);
}

static void on_write(struct bufferevent *bev, void *arg)
{
	struct lstream *ls = arg;
	if (!ls->closing) {
		pump(ls);
		return;
	}
	if (evbuffer_get_length(bufferevent_get_output(bev)) > 0)
		return;
	/* answered: let the client finish sending (a close with unread bytes
	 * would reset the connection and could destroy the answer) */
	shutdown(bufferevent_getfd(bev), SHUT_WR);
	struct timeval tv = { LS_LINGER_S, 0 };
	evtimer_add(ls->linger_ev, &tv);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	struct lstream *ls = arg;
	if (ls->closing) {
		finish_conn(ls);
		return;
	}
	ls->eof = 1;
	if ((what & BEV_EVENT_EOF) && ls->body != B_END && ls->in.open) {
		pump(ls); /* stdin fails: the body was cut */
		return;
	}
	/* the client is gone: stop its job */
	log_debug("%s: PUT /job: the client went away", ls->peer);
	bufferevent_free(ls->bev);
	ls->bev = NULL;
	ls->gone = 1;
	pump(ls);
}

/* ---- job_io's streams ------------------------------------------------------- */

static void *open_in(void *ctx, const struct transfer_sink *sink, void *arg)
{
	struct lstream *ls = ctx;
	memset(&ls->in, 0, sizeof ls->in);
	ls->in.ls = ls;
	ls->in.open = 1;
	ls->in.cb.sink = *sink;
	ls->in.arg = arg;
	if (ls->expect_continue && ls->bev) {
		evbuffer_add_printf(bufferevent_get_output(ls->bev),
				    "HTTP/1.1 100 Continue\r\n\r\n");
		ls->expect_continue = 0;
	}
	pump_later(ls);
	return &ls->in;
}

static void *open_out(void *ctx, const struct transfer_source *src, void *arg, int64_t size)
{
	struct lstream *ls = ctx;
	memset(&ls->out, 0, sizeof ls->out);
	ls->out.ls = ls;
	ls->out.open = 1;
	ls->out.cb.src = *src;
	ls->out.arg = arg;
	if (size >= 0) {
		/* the program succeeded and its output is small: answered with
		 * the outcome in header fields */
		ls->small = evbuffer_new();
		if (!ls->small) {
			errno = ENOMEM;
			return NULL;
		}
	} else if (ls->bev) {
		ls->committed = 1;
		evbuffer_add_printf(
			bufferevent_get_output(ls->bev),
			"HTTP/1.1 200 OK\r\nServer: execserver/%s\r\nConnection: close\r\n"
			"Content-Type: application/octet-stream\r\n"
			"Transfer-Encoding: chunked\r\n"
			"Trailer: " PROTO_LEGACY_EXIT_CODE ", " PROTO_LEGACY_RECEIPT "\r\n\r\n",
			PACKAGE_VERSION);
	}
	pump_later(ls);
	return &ls->out;
}

static void stream_resume(void *ctx, void *stream)
{
	struct lside *s = stream;
	s->paused = 0;
	pump_later(ctx);
}

static void stream_abort(void *ctx, void *stream)
{
	struct lside *s = stream;
	(void)ctx;
	s->open = 0;
}

static void stream_set_error(void *ctx, void *stream, const char *msg)
{
	struct lside *s = stream;
	(void)ctx;
	snprintf(s->err, sizeof s->err, "%s", msg);
}

static const struct job_stream_ops body_streams = {
	open_in, open_out, stream_resume, stream_abort, stream_set_error,
};

/* ---- the end of the job -------------------------------------------------------- */

/* The outcome fields, each ending in CRLF. */
static void outcome_fields(struct evbuffer *o, const struct book_outcome *oc, const char *receipt,
			   size_t len)
{
	if (oc->exit_code >= 0 && !oc->signal)
		evbuffer_add_printf(o, PROTO_LEGACY_EXIT_CODE ": %d\r\n", (int)oc->exit_code);
	if (receipt && len)
		evbuffer_add_printf(o, PROTO_LEGACY_RECEIPT ": %.*s\r\n", (int)len, receipt);
}

static void job_done(void *ctx, const struct book_outcome *oc, const char *receipt, size_t len,
		     const char *unstreamed, size_t ulen)
{
	struct lstream *ls = ctx;
	ls->job = NULL;
	if (!ls->bev) {
		ls_free(ls);
		return;
	}
	struct evbuffer *o = bufferevent_get_output(ls->bev);
	if (ls->committed) {
		if (oc->failed && !ls->te_trailers) {
			/* cut before the last chunk: not a complete body */
			finish_conn(ls);
			return;
		}
		evbuffer_add(o, "0\r\n", 3);
		outcome_fields(o, oc, receipt, len);
		evbuffer_add(o, "\r\n", 2);
	} else {
		int status = !oc->failed ? 200 : oc->retryable ? 503 : 422;
		size_t blen = ls->small ? evbuffer_get_length(ls->small) : ulen;
		evbuffer_add_printf(
			o,
			"HTTP/1.1 %d %s\r\nServer: execserver/%s\r\nConnection: close\r\n"
			"Content-Type: application/octet-stream\r\nContent-Length: %zu\r\n%s",
			status, http_reason(status), PACKAGE_VERSION, blen,
			status == 503 ? "Retry-After: 1\r\n" : "");
		outcome_fields(o, oc, receipt, len);
		evbuffer_add(o, "\r\n", 2);
		if (ls->small)
			evbuffer_add_buffer(o, ls->small);
		else if (ulen)
			evbuffer_add(o, unstreamed, ulen);
	}
	ls->closing = 1;
	bufferevent_setwatermark(ls->bev, EV_WRITE, 0, 0);
	bufferevent_enable(ls->bev, EV_WRITE | EV_READ);
	on_write(ls->bev, ls); /* may be written already */
}

/* ---- start ------------------------------------------------------------------------ */

int legacy_stream_run(struct bufferevent *bev, const char *peer, const struct ip_addr *peer_ip,
		      const struct http_head *h, struct book_ref token, uint32_t service,
		      struct json_object *desc)
{
	struct lstream *ls = calloc(1, sizeof *ls);
	if (!ls)
		goto fail;
	ls->pump_ev = event_new(handler.base, -1, 0, pump_cb, ls);
	ls->linger_ev = evtimer_new(handler.base, linger_cb, ls);
	if (!ls->pump_ev || !ls->linger_ev)
		goto fail;
	snprintf(ls->peer, sizeof ls->peer, "%s", peer);
	ls->te_trailers = http_header_has_token(h, "TE", "trailers");
	ls->expect_continue = http_header_has_token(h, "Expect", "100-continue");
	if (h->chunked) {
		ls->body = B_CHUNK_SIZE;
	} else {
		ls->body = B_LENGTH;
		ls->left = h->has_content_length ? h->content_length : 0;
	}
	ls->job = job_start_body(token, service, desc, peer_ip, &body_streams, job_done, ls);
	if (!ls->job) {
		/* the token was given back; the caller answers */
		event_free(ls->pump_ev);
		event_free(ls->linger_ev);
		free(ls);
		return -1;
	}
	ls->bev = bev;
	handler.nhttp++;
	bufferevent_setwatermark(bev, EV_READ, 0, LS_READ_MAX);
	bufferevent_setwatermark(bev, EV_WRITE, LS_WRITE_MAX / 2, 0);
	bufferevent_setcb(bev, on_read, on_write, on_event, ls);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	return 0;
fail:
	if (ls) {
		if (ls->pump_ev)
			event_free(ls->pump_ev);
		if (ls->linger_ev)
			event_free(ls->linger_ev);
		free(ls);
	}
	/* give the token's slot back */
	struct book_outcome o = { .exit_code = -1, .error = JOB_ERR_EXEC_FAILED, .failed = 1 };
	struct book *b = handler_book_lock();
	book_token_finished(b, token, &o);
	handler_book_unlock();
	return -1;
}

int legacy_stream_linger(struct bufferevent *bev)
{
	struct lstream *ls = calloc(1, sizeof *ls);
	if (!ls)
		return -1;
	ls->linger_ev = evtimer_new(handler.base, linger_cb, ls);
	if (!ls->linger_ev) {
		free(ls);
		return -1;
	}
	snprintf(ls->peer, sizeof ls->peer, "-");
	ls->bev = bev;
	ls->closing = 1;
	handler.nhttp++;
	bufferevent_setwatermark(bev, EV_READ, 0, LS_READ_MAX);
	bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
	bufferevent_setcb(bev, on_read, on_write, on_event, ls);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	on_write(bev, ls); /* may be written already */
	return 0;
}
