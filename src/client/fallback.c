/*
 * fallback.c - the fallback to the legacy token transport (protocol
 * section 9) for an address whose GET /broker answered 404 (an execserver
 * without the broker).  pool.c marks such an address `legacy`.
 *
 * A waiting job with at least one legacy address that serves its service
 * gets a struct legacy_job: a one-second timer that sends GET /token/<svc>
 * to every such address (at most one request in flight per address), at
 * once and then once per second, while the job is WAITING.  The first slot
 * wins, whatever brings it: a token that arrives while the job still waits
 * makes it RUNNING (its broker wants get UNWANT; an OFFER that arrives
 * later is DECLINEd by client_job.c); a token that arrives after the job got its
 * slot goes to another waiting job of the service that polls the same
 * address, or is not used (it expires on the server and its slot returns
 * to the book).
 *
 * With a token the job runs as PUT /job/<svc>?token=&job= in body mode,
 * on its own connection: "Expect: 100-continue", so that no stdin byte is
 * read before the program runs (an answer without 100 leaves the stdin
 * source untouched and the job may wait again: 403 token gone, 503; so
 * does a connection that failed before the whole request head left: the
 * server cannot have started it.  One that fails after the head left
 * and before the 100 arrived ends the job lost: the server may have
 * started the program and its 100 may be what was lost);
 * stdin goes up as chunks, read from the source only while the socket's
 * output is below LJ_OUT_MAX; the response body goes to the stdout sink,
 * and the socket is not read while the sink's queue is above LJ_SINK_MAX.
 * "TE: trailers" is sent, so the outcome always comes in the
 * X-Execserver-Receipt header or trailer, which becomes the receipt.
 * Named input/output files are served from the pipe endpoints (pipes.c)
 * on the local address of the PUT's socket, as on the broker path.
 *
 * Memory: a request never holds a whole body: error bodies and the token
 * answer are kept up to LJ_SMALL_MAX bytes; stdout with EXC_IO_NONE keeps
 * its first 4000 bytes for the receipt.  A request is freed only outside
 * http_parser_execute (callbacks set flags; feed() acts on them).
 */
#include "autoconfig.h"
#include "client/fallback.h"
#include "client/job_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <http_parser.h>

#define LJ_POLL_MS 1000
#define LJ_SMALL_MAX 4096      /* token answers, error bodies */
#define LJ_KEEP_MAX 4000       /* stdout kept for the receipt (EXC_IO_NONE) */
#define LJ_OUT_MAX (64 * 1024) /* upload: socket output bound */
#define LJ_CHUNK 65536
#define LJ_SINK_MAX (256 * 1024) /* download: sink queue bound */
#define LJ_TARGET_MAX 4096

struct lreq {
	struct legacy_job *lj;
	struct exc_addr *a;
	struct lreq *next;
	int is_put;
	struct bufferevent *bev;
	http_parser hp;
	int status;      /* final status (not 1xx) */
	int continued;   /* 100 Continue seen: upload runs */
	int head_queued; /* PUT: the request head was handed to the socket */
	int sock_err;    /* the socket's error, when it failed */
	int upload_done;
	int header_is;                          /* the field being read: 1 receipt */
	int body_is_output;                     /* the body goes to stdout */
	int complete;                           /* the final answer was read */
	int paused;                             /* sink queue full: not reading */
	int failed_local;                       /* a local stream failed */
	int eof;                                /* the server closed (or the socket failed) */
	int ended;                              /* finishing: waits for the sink to drain */
	char token[PROTO_LEGACY_TOKEN_HEX + 1]; /* PUT: the token to redeem */
	char *receipt;                          /* X-Execserver-Receipt value */
	struct evbuffer *small;                 /* token answer / error body */
	struct evbuffer *tmp;
	char keep[LJ_KEEP_MAX + 1];
	size_t kept;
	int keep_truncated;
	uint64_t out_bytes, in_bytes;
};

struct legacy_job {
	struct exc_job *j;
	struct event *timer;
	struct lreq *gets; /* token requests in flight */
	struct lreq *put;  /* the running job */
};

static void req_free(struct lreq *r)
{
	if (r == NULL)
		return;
	if (r->is_put) { /* the streams outlive the request */
		stream_detach(r->lj->j->files[0].st);
		stream_detach(r->lj->j->files[1].st);
	}
	if (r->bev)
		bufferevent_free(r->bev);
	if (r->small)
		evbuffer_free(r->small);
	if (r->tmp)
		evbuffer_free(r->tmp);
	free(r->receipt);
	free(r);
}

static void unlink_get(struct legacy_job *lj, struct lreq *r)
{
	for (struct lreq **pp = &lj->gets; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			return;
		}
}

/* ---- response parsing -------------------------------------------------------- */

static void sink_drained(void *arg);
static void feed(struct lreq *r);

static int on_header_field(http_parser *p, const char *at, size_t len)
{
	struct lreq *r = p->data;

	int is = len == strlen(PROTO_LEGACY_RECEIPT) &&
		 strncasecmp(at, PROTO_LEGACY_RECEIPT, len) == 0;

	if (is && !r->header_is && r->receipt) { /* a second field: the last counts */
		free(r->receipt);
		r->receipt = NULL;
	}
	r->header_is = is;
	return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
	struct lreq *r = p->data;
	size_t old = r->receipt ? strlen(r->receipt) : 0;
	char *n;

	if (!r->header_is || p->status_code < 200)
		return 0;
	if (old + len > 65536)
		return 1;
	n = realloc(r->receipt, old + len + 1);
	if (n == NULL)
		return 1;
	memcpy(n + old, at, len);
	n[old + len] = '\0';
	r->receipt = n;
	return 0;
}

static int on_headers_complete(http_parser *p)
{
	struct lreq *r = p->data;

	if (p->status_code < 200) {
		if (p->status_code == 100 && r->is_put)
			r->continued = 1;
		return 0;
	}
	r->status = p->status_code;
	r->header_is = 0;
	/* the job's answer (it has an outcome) carries its output; a refusal
	 * carries one line of text */
	r->body_is_output = r->is_put && (r->receipt != NULL || p->status_code == 200);
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct lreq *r = p->data;
	struct jfile *out;
	long queued;

	if (r->status == 0)
		return 0;
	if (!r->body_is_output) {
		size_t have = evbuffer_get_length(r->small);

		if (have < LJ_SMALL_MAX)
			evbuffer_add(r->small, at,
				     len < LJ_SMALL_MAX - have ? len : LJ_SMALL_MAX - have);
		return 0;
	}
	out = &r->lj->j->files[1];
	r->out_bytes += len;
	if (out->st == NULL) {
		size_t room = LJ_KEEP_MAX - r->kept;

		if (len > room)
			r->keep_truncated = 1;
		memcpy(r->keep + r->kept, at, len < room ? len : room);
		r->kept += len < room ? len : room;
		return 0;
	}
	if (r->failed_local)
		return 0;
	evbuffer_add(r->tmp, at, len);
	queued = stream_write(out->st, r->tmp, sink_drained, r);
	if (queued < 0) {
		r->failed_local = 1;
		snprintf(out->why, sizeof out->why, "%s", stream_error(out->st));
	} else if (queued > LJ_SINK_MAX) {
		r->paused = 1;
		http_parser_pause(p, 1);
	}
	return 0;
}

static int on_message_complete(http_parser *p)
{
	struct lreq *r = p->data;

	if (p->status_code >= 200) {
		r->complete = 1;
		http_parser_pause(p, 1);
	}
	return 0;
}

static const http_parser_settings settings = {
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

/* ---- the job's end over this transport ------------------------------------------ */

static void upload(struct lreq *r);
static void put_finish(struct lreq *r);
static void get_finish(struct lreq *r, int ok);

/* The job goes back to waiting (nothing of it ran, its stdin untouched). */
static void back_to_waiting(struct legacy_job *lj, const char *why)
{
	struct exc_job *j = lj->j;

	client_log(j->c, EXC_LOG_INFO, "job %s: legacy PUT not taken (%s): waiting again", j->id,
		   why);
	req_free(lj->put);
	lj->put = NULL;
	job_free_pipes(j);
	j->state = J_WAITING;
	j->owner_addr = NULL;
	j->since_ms = client_now_ms();
	if (j->connect_timeout_sec && !evtimer_pending(j->timer, NULL)) {
		/* its connect timeout passed while the PUT was tried */
		job_finish_local(j, EXC_E_NO_SLOT, 1, "no slot within %u s",
				 j->connect_timeout_sec);
		return;
	}
	job_place(j);
}

/* The job's local error from a refusal (an answer without outcome):
 * "bad_job: ..." and "unknown_command: ..." keep their code; 404 is
 * unknown_service, 401 unauthorized; anything else bad_job. */
static void refusal(struct lreq *r)
{
	struct exc_job *j = r->lj->j;
	size_t n = evbuffer_get_length(r->small);
	char body[LJ_SMALL_MAX + 1];
	const char *code = PROTO_E_BAD_JOB, *msg = body;

	evbuffer_copyout(r->small, body, n);
	body[n] = '\0';
	body[strcspn(body, "\r\n")] = '\0';
	if (r->status == 404)
		code = EXC_E_UNKNOWN_SERVICE;
	else if (r->status == 401)
		code = EXC_E_UNAUTHORIZED;
	else if (strncmp(body, PROTO_E_UNKNOWN_COMMAND ": ", strlen(PROTO_E_UNKNOWN_COMMAND) + 2) ==
		 0) {
		code = PROTO_E_UNKNOWN_COMMAND;
		msg = body + strlen(code) + 2;
	} else if (strncmp(body, PROTO_E_BAD_JOB ": ", strlen(PROTO_E_BAD_JOB) + 2) == 0) {
		msg = body + strlen(code) + 2;
	}
	snprintf(j->local_code, sizeof j->local_code, "%s", code);
	snprintf(j->local_msg, sizeof j->local_msg, "HTTP %d: %.200s", r->status, msg);
	j->local_retryable = 0;
}

/* The whole PUT head left for the server (written to the socket): from
 * then on the server may have started the program, whether or not its
 * 100 Continue arrives. */
static int head_left(struct lreq *r)
{
	return r->head_queued && evbuffer_get_length(bufferevent_get_output(r->bev)) == 0;
}

static void put_finish(struct lreq *r)
{
	struct legacy_job *lj = r->lj;
	struct exc_job *j = lj->j;
	struct json_object *rj = NULL;

	if (r->receipt == NULL && !r->continued &&
	    (r->status == 403 || r->status == 503 || (r->status == 0 && !head_left(r)))) {
		back_to_waiting(lj, r->status == 403 ? "token gone"
				    : r->status      ? "HTTP 503"
						     : "connection failed before the request left");
		return;
	}
	if (r->receipt && r->complete) {
		rj = json_tokener_parse(r->receipt);
		if (rj && !json_object_is_type(rj, json_type_object)) {
			json_object_put(rj);
			rj = NULL;
		}
	}
	j->files[0].bytes = r->in_bytes;
	j->files[1].bytes = j->files[1].st ? r->out_bytes : 0;
	if (rj && j->files[1].st == NULL && r->kept) {
		r->keep[r->kept] = '\0';
		json_object_object_add(rj, "stdout", json_object_new_string(r->keep));
		if (r->keep_truncated)
			json_object_object_add(rj, "stdout_truncated", json_object_new_boolean(1));
	}
	if (r->failed_local) {
		const struct jfile *f = j->files[1].why[0] ? &j->files[1] : &j->files[0];

		snprintf(j->local_code, sizeof j->local_code, "%s", EXC_E_LOCAL_IO);
		snprintf(j->local_msg, sizeof j->local_msg, "%s: %s", f->name, f->why);
		j->local_retryable = 0;
		json_object_put(rj);
		rj = NULL;
	} else if (rj == NULL && r->complete && r->status) {
		refusal(r);
	} else if (rj == NULL) {
		snprintf(j->local_code, sizeof j->local_code, "%s", EXC_E_LOST);
		snprintf(j->local_msg, sizeof j->local_msg,
			 "the legacy PUT to %s ended without an outcome%s%s (it may have run)",
			 r->a->url, r->sock_err ? ": " : "",
			 r->sock_err ? strerror(r->sock_err) : "");
		j->local_retryable = 1;
	}
	lj->put = NULL;
	req_free(r);
	job_finish(j, rj); /* frees the job and lj */
	json_object_put(rj);
}

static void sink_drained(void *arg)
{
	struct lreq *r = arg;

	if (r->paused) {
		r->paused = 0;
		http_parser_pause(&r->hp, 0);
		bufferevent_enable(r->bev, EV_READ);
		feed(r);
	} else if (r->ended) {
		put_finish(r);
	}
}

/* The answer is over (complete, or cut by eof/a bad answer): finish the
 * request once the sink took everything. */
static void settle(struct lreq *r)
{
	if (!r->is_put) {
		get_finish(r, r->complete);
		return;
	}
	bufferevent_disable(r->bev, EV_READ | EV_WRITE);
	r->ended = 1;
	if (r->lj->j->files[1].st && !r->failed_local &&
	    stream_write(r->lj->j->files[1].st, NULL, sink_drained, r) > 0)
		return; /* sink_drained finishes */
	put_finish(r);
}

/* Runs the parser over the input; acts on what the callbacks flagged.
 * r may be freed when it returns. */
static void feed(struct lreq *r)
{
	struct evbuffer *in = bufferevent_get_input(r->bev);
	int was_continued = r->continued;

	while (!r->complete && !r->paused && evbuffer_get_length(in) > 0) {
		struct evbuffer_iovec v;
		size_t used;

		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
			break;
		used = http_parser_execute(&r->hp, &settings, v.iov_base, v.iov_len);
		evbuffer_drain(in, used);
		if (HTTP_PARSER_ERRNO(&r->hp) != HPE_OK &&
		    HTTP_PARSER_ERRNO(&r->hp) != HPE_PAUSED) {
			client_log(r->lj->j->c, EXC_LOG_WARN, "%s: bad legacy answer: %s",
				   r->a->url, http_errno_description(HTTP_PARSER_ERRNO(&r->hp)));
			r->eof = 1;
			r->complete = 0;
			settle(r);
			return;
		}
	}
	if (r->paused) {
		bufferevent_disable(r->bev, EV_READ);
		return;
	}
	if (!r->complete && r->eof && evbuffer_get_length(in) == 0) {
		/* an answer ended by the close (no length) completes here */
		http_parser_execute(&r->hp, &settings, NULL, 0);
	}
	if (r->complete || r->eof) {
		settle(r);
		return;
	}
	if (r->is_put && r->continued && !was_continued)
		upload(r);
}

static void on_read(struct bufferevent *bev, void *arg)
{
	feed(arg);
}

/* ---- upload --------------------------------------------------------------------- */

static void source_ready(void *arg)
{
	upload(arg);
}

static void on_write(struct bufferevent *bev, void *arg)
{
	struct lreq *r = arg;

	if (r->is_put && r->continued && !r->upload_done && !r->complete)
		upload(r);
}

static void upload(struct lreq *r)
{
	struct evbuffer *out = bufferevent_get_output(r->bev);
	struct jfile *in = &r->lj->j->files[0];

	while (!r->upload_done && !r->complete && evbuffer_get_length(out) < LJ_OUT_MAX) {
		long n = in->st ? stream_read(in->st, r->tmp, LJ_CHUNK, source_ready, r) : -2;

		if (n == 0)
			return;
		if (n == -1) {
			snprintf(in->why, sizeof in->why, "%s", stream_error(in->st));
			r->failed_local = 1;
			r->upload_done = 1; /* no last chunk: the server sees a cut body */
			bufferevent_disable(r->bev, EV_WRITE);
			shutdown(bufferevent_getfd(r->bev), SHUT_WR);
			return;
		}
		if (n == -2) {
			evbuffer_add(out, "0\r\n\r\n", 5);
			r->upload_done = 1;
			return;
		}
		r->in_bytes += (uint64_t)n;
		evbuffer_add_printf(out, "%lx\r\n", n);
		evbuffer_add_buffer(out, r->tmp);
		evbuffer_add(out, "\r\n", 2);
	}
}

/* ---- requests ------------------------------------------------------------------- */

static void pct_encode(struct evbuffer *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || strchr("-._~", ch))
			evbuffer_add(b, s, 1);
		else
			evbuffer_add_printf(b, "%%%c%c", hex[ch >> 4], hex[ch & 15]);
	}
}

static void host_header(struct evbuffer *b, const struct exc_addr *a)
{
	evbuffer_add_printf(b, strchr(a->u.host, ':') ? "Host: [%s]:%d\r\n" : "Host: %s:%d\r\n",
			    a->u.host, a->u.port);
	if (a->c->auth_token)
		evbuffer_add_printf(b, "Authorization: Bearer %s\r\n", a->c->auth_token);
}

/* Writes the PUT head once TCP is up (the endpoints need the local address). */
static int put_head(struct lreq *r)
{
	struct exc_job *j = r->lj->j;
	struct sockaddr_storage local;
	socklen_t len = sizeof local;
	struct json_object *job;
	struct evbuffer *head = evbuffer_new();
	int rc = -1;

	if (head == NULL)
		return -1;
	if (getsockname(bufferevent_getfd(r->bev), (struct sockaddr *)&local, &len) != 0 ||
	    (job = job_build(j, &local, 1)) == NULL) {
		evbuffer_free(head);
		return -1;
	}
	evbuffer_add_printf(head, "PUT %s%s?token=%s&job=", PROTO_LEGACY_JOB_PREFIX, j->service,
			    r->token);
	pct_encode(head, json_object_to_json_string_ext(job, JSON_C_TO_STRING_PLAIN));
	json_object_put(job);
	if (evbuffer_get_length(head) > LJ_TARGET_MAX) {
		evbuffer_free(head);
		errno = E2BIG;
		return -1;
	}
	evbuffer_add_printf(head, " HTTP/1.1\r\n");
	host_header(head, r->a);
	evbuffer_add_printf(head, "Transfer-Encoding: chunked\r\nExpect: 100-continue\r\n"
				  "TE: trailers\r\nConnection: TE, close\r\n\r\n");
	rc = bufferevent_write_buffer(r->bev, head);
	evbuffer_free(head);
	return rc;
}

static void on_event(struct bufferevent *bev, short what, void *arg);

static struct lreq *req_open(struct legacy_job *lj, struct exc_addr *a, int is_put)
{
	exc_client *c = lj->j->c;
	struct lreq *r = calloc(1, sizeof *r);

	if (r == NULL)
		return NULL;
	r->lj = lj;
	r->a = a;
	r->is_put = is_put;
	r->small = evbuffer_new();
	r->tmp = evbuffer_new();
	/* deferred callbacks, as in server_conn.c: a failure known at once
	 * (name, descriptors, network) reaches on_event from the loop, after
	 * the caller linked r, never from inside req_open */
	r->bev = bufferevent_socket_new(c->base, -1,
					BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (r->small == NULL || r->tmp == NULL || r->bev == NULL) {
		req_free(r);
		return NULL;
	}
	http_parser_init(&r->hp, HTTP_RESPONSE);
	r->hp.data = r;
	bufferevent_setcb(r->bev, on_read, on_write, on_event, r);
	bufferevent_setwatermark(r->bev, EV_WRITE, LJ_OUT_MAX / 2, 0);
	if (bufferevent_socket_connect_hostname(r->bev, NULL, AF_UNSPEC, a->u.host, a->u.port) != 0)
		client_log(c, EXC_LOG_DEBUG, "%s: legacy connect failed at once", a->url);
	return r;
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	struct lreq *r = arg;
	struct exc_job *j = r->lj->j;

	if (what & BEV_EVENT_CONNECTED) {
		if (!r->is_put) {
			struct evbuffer *out = bufferevent_get_output(bev);

			evbuffer_add_printf(out, "GET %s%s HTTP/1.1\r\n", PROTO_LEGACY_TOKEN_PREFIX,
					    j->service);
			host_header(out, r->a);
			evbuffer_add_printf(out, "Connection: close\r\n\r\n");
		} else if (put_head(r) == 0) {
			r->head_queued = 1;
		} else {
			int e = errno;

			job_free_pipes(j);
			snprintf(j->local_code, sizeof j->local_code, "%s", EXC_E_LOCAL_IO);
			snprintf(j->local_msg, sizeof j->local_msg,
				 "cannot send the legacy PUT: %s",
				 e == E2BIG ? "the job description is longer than the 4 KiB "
					      "request target"
					    : strerror(e ? e : ENOMEM));
			j->local_retryable = 0;
			r->lj->put = NULL;
			req_free(r);
			job_finish(j, NULL);
			return;
		}
		bufferevent_enable(bev, EV_READ | EV_WRITE);
		return;
	}
	if (what & (BEV_EVENT_ERROR | BEV_EVENT_EOF)) {
		if (what & BEV_EVENT_ERROR)
			r->sock_err = EVUTIL_SOCKET_ERROR();
		r->eof = 1;
		bufferevent_disable(bev, EV_WRITE);
		feed(r); /* r may be gone after this */
	}
}

/* The job waits for a slot and may take a token now. */
static int can_take(const struct exc_job *j)
{
	return j->state == J_WAITING && !j->cancel_requested && !j->local_code[0] &&
	       !(j->legacy && j->legacy->put);
}

/* The token wins: the job's broker wants go, its PUT starts. */
static void start_put(struct exc_job *j, struct exc_addr *a, const char *token)
{
	struct legacy_job *lj;

	legacy_job_wait(j);
	lj = j->legacy;
	if (lj == NULL) {
		job_finish_local(j, EXC_E_LOCAL_IO, 0,
				 "cannot start the legacy PUT: out of memory");
		return;
	}
	job_unwant_all(j);
	j->state = J_RUNNING;
	job_started(j);
	j->owner = NULL;
	j->owner_addr = a;
	lj->put = req_open(lj, a, 1);
	if (lj->put == NULL) {
		job_finish_local(j, EXC_E_LOCAL_IO, 0, "cannot open the legacy PUT: out of memory");
		return;
	}
	snprintf(lj->put->token, sizeof lj->put->token, "%s", token);
	client_log(j->c, EXC_LOG_DEBUG, "job %s runs on %s (legacy token)", j->id, a->url);
}

/* A token answer (ok: the whole answer was read). */
static void get_finish(struct lreq *r, int ok)
{
	struct legacy_job *lj = r->lj;
	struct exc_job *j = lj->j;
	struct exc_addr *a = r->a;
	char token[PROTO_LEGACY_TOKEN_HEX + 1] = "";

	if (ok && r->status == 200) {
		size_t n = evbuffer_get_length(r->small);
		char body[LJ_SMALL_MAX + 1];
		struct json_object *o;
		const char *t;

		evbuffer_copyout(r->small, body, n);
		body[n] = '\0';
		o = json_tokener_parse(body);
		t = o ? wire_str(o, "token") : NULL;
		if (t && strlen(t) == PROTO_LEGACY_TOKEN_HEX &&
		    strspn(t, "0123456789abcdefABCDEF") == PROTO_LEGACY_TOKEN_HEX)
			memcpy(token, t, sizeof token);
		json_object_put(o);
	} else if (ok) {
		client_log(j->c, EXC_LOG_DEBUG, "job %s: GET /token at %s: HTTP %d", j->id, a->url,
			   r->status);
	} else {
		client_log(j->c, EXC_LOG_DEBUG, "job %s: GET /token at %s: no answer%s%s", j->id,
			   a->url, r->sock_err ? ": " : "",
			   r->sock_err ? strerror(r->sock_err) : "");
	}
	unlink_get(lj, r);
	req_free(r);
	if (!token[0])
		return;
	if (!can_take(j)) {
		/* the job has its slot already: another waiting job of the
		 * service takes the token; else it is not used (it expires) */
		struct exc_job *o = j->c->jobs;

		while (o && !(o != j && can_take(o) && strcmp(o->service, j->service) == 0 &&
			      pool_serves(a, o->service)))
			o = o->next;
		client_log(j->c, EXC_LOG_DEBUG, "job %s: token of %s not needed (%s)", j->id,
			   a->url, o ? "handed to another job" : "it expires");
		if (o == NULL)
			return;
		j = o;
	}
	start_put(j, a, token);
}

/* ---- polling -------------------------------------------------------------------- */

static int get_in_flight(const struct legacy_job *lj, const struct exc_addr *a)
{
	for (const struct lreq *g = lj->gets; g; g = g->next)
		if (g->a == a)
			return 1;
	return 0;
}

static void poll_now(struct legacy_job *lj)
{
	struct exc_job *j = lj->j;
	exc_client *c = j->c;

	if (j->state != J_WAITING || j->cancel_requested || j->local_code[0])
		return;
	for (unsigned i = 0; i < c->naddrs; i++) {
		struct exc_addr *a = c->addrs[i];
		struct lreq *g;

		if (!a->legacy || !pool_serves(a, j->service) || get_in_flight(lj, a))
			continue;
		g = req_open(lj, a, 0);
		if (g) {
			g->next = lj->gets;
			lj->gets = g;
		}
	}
}

static void poll_timer(evutil_socket_t fd, short what, void *arg)
{
	poll_now(arg);
}

static int has_legacy_address(const struct exc_job *j)
{
	for (unsigned i = 0; i < j->c->naddrs; i++)
		if (j->c->addrs[i]->legacy && pool_serves(j->c->addrs[i], j->service))
			return 1;
	return 0;
}

void legacy_job_wait(struct exc_job *j)
{
	struct legacy_job *lj = j->legacy;
	struct timeval tv = { LJ_POLL_MS / 1000, (LJ_POLL_MS % 1000) * 1000 };

	if (j->state != J_WAITING || !has_legacy_address(j))
		return;
	if (lj == NULL) {
		lj = calloc(1, sizeof *lj);
		if (lj == NULL)
			return;
		lj->j = j;
		lj->timer = event_new(j->c->base, -1, EV_PERSIST, poll_timer, lj);
		if (lj->timer == NULL) {
			free(lj);
			return;
		}
		j->legacy = lj;
		evtimer_add(lj->timer, &tv);
		poll_now(lj);
	}
}

void legacy_address_found(exc_client *c, struct exc_addr *a)
{
	client_log(c, EXC_LOG_INFO, "%s: no broker (404): using the legacy token transport",
		   a->url);
	for (struct exc_job *j = c->jobs; j; j = j->next) {
		if (j->legacy)
			poll_now(j->legacy);
		else
			legacy_job_wait(j);
	}
}

int legacy_cancel(struct exc_job *j)
{
	struct legacy_job *lj = j->legacy;

	if (lj == NULL || lj->put == NULL)
		return -1;
	req_free(lj->put); /* the server cancels the job when we go away */
	lj->put = NULL;
	job_finish_local(j, EXC_E_CANCELLED, 0, "cancelled (legacy PUT closed)");
	return 0;
}

void legacy_job_free(struct exc_job *j)
{
	struct legacy_job *lj = j->legacy;

	if (lj == NULL)
		return;
	while (lj->gets) {
		struct lreq *g = lj->gets;

		lj->gets = g->next;
		req_free(g);
	}
	req_free(lj->put);
	event_free(lj->timer);
	free(lj);
	j->legacy = NULL;
}
