/*
 * pipes.c - the one-time pipe endpoints a job's execserver fetches its
 * stdin and input files from (GET) and sends its stdout and output files
 * to (PUT): http://<local address of the broker connection>:<port>/p/<id>,
 * id = 128 random bits in hex (the credential).
 *
 * One small HTTP/1.1 server per local address (bound on that address,
 * ephemeral port), shared by the jobs whose broker connection has it.
 * Why not evhttp: libevent 2.1's evhttp hands a request to the application
 * only once its whole body has arrived, so a PUT of a large stdout would
 * sit in memory; here request heads are parsed by the project's bounded
 * parser (net/http_head.c) and bodies stream with back-pressure both ways.
 *
 * Invariants: an endpoint serves exactly one request (a second one gets
 * 410, an unknown id 404, the wrong method 405); its done callback is
 * called once, when its transfer ended (ok only for a complete body),
 * and never after endpoint_free; at most OUT_HIGH bytes of a GET are
 * buffered, and a PUT connection stops being read while its sink holds
 * more than SINK_HIGH bytes.  One request per connection (Connection:
 * close).  A request that ends, however, detaches its endpoint's stream
 * (stream_detach), so that the caller's fd becoming ready later never
 * reaches a freed request; a GET keeps reading its connection only to
 * notice the peer's close at once (the program closed its stdin).
 *
 * Against a local peer that connects and dawdles: a request head must be
 * complete HEAD_TIMEOUT_SEC after the accept (an absolute deadline, not
 * an idle timeout a byte a second would keep alive); at most 2 x live
 * endpoints + 8 connections may wait for their head at once (a new one
 * beyond that closes the oldest waiting one); when accept fails for want
 * of fds (EMFILE/ENFILE) the oldest waiting connection is closed and the
 * listener pauses ACCEPT_PAUSE_MS instead of spinning; and the listener
 * accepts only while the server has endpoints.
 */
#include "autoconfig.h"
#include "client/client_impl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "net/http_head.h"

#define OUT_HIGH (64 * 1024)
#define READ_CHUNK (16 * 1024)
#define SINK_HIGH (256 * 1024)
#define LINE_MAX_LEN 4096
#define HEAD_TIMEOUT_SEC 10
#define HEAD_WAITERS_BASE 8
#define ACCEPT_PAUSE_MS 200

struct pipe_srv {
	exc_client *c;
	struct pipe_srv *next;
	struct sockaddr_storage addr; /* port 0 */
	struct evconnlistener *lis;
	char host[INET6_ADDRSTRLEN + 2]; /* for URLs: a.b.c.d or [v6] */
	int port;
	struct endpoint *eps;
	struct pipe_req *reqs; /* newest first */
	struct event *pause;   /* re-enables the listener after EMFILE */
	int paused;
};

struct endpoint {
	struct pipe_srv *srv;
	struct endpoint *next;
	char id[33];
	int is_sink;
	struct stream *st;
	endpoint_done_fn done;
	void *arg;
	int used, finished;
	struct pipe_req *req;
	uint64_t bytes;
};

enum req_state {
	R_HEAD,
	R_GET,
	R_PUT,
	R_FINISH
};
enum chunk_state {
	C_SIZE,
	C_DATA,
	C_DATA_END,
	C_TRAILER,
	C_END
};

struct pipe_req {
	struct pipe_srv *srv;
	struct pipe_req *next;
	struct bufferevent *bev;
	struct http_head_parser *hp;
	struct endpoint *ep;
	enum req_state state;
	int chunked; /* GET: answer chunked; PUT: body chunked */
	enum chunk_state cs;
	uint64_t left; /* PUT: body or chunk bytes still to come */
	int body_done; /* PUT: the whole body arrived */
	int src_eof;   /* GET: the source ended */
	struct evbuffer *tmp;
	struct event *head_deadline; /* R_HEAD: the head must be in by then */
};

static void req_free(struct pipe_req *r);

static void ep_finish(struct endpoint *e, int ok, const char *why)
{
	if (e == NULL || e->finished)
		return;
	e->finished = 1;
	if (e->done)
		e->done(e->arg, ok, e->bytes, why);
}

/* ---- requests ------------------------------------------------------------ */

static void req_unlink(struct pipe_req *r)
{
	for (struct pipe_req **pp = &r->srv->reqs; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			break;
		}
}

/* Frees r; its endpoint's stream forgets r (the ready/drained callback it
 * armed names r), so that the stream's fd becoming ready later reaches
 * nobody. */
static void req_free(struct pipe_req *r)
{
	req_unlink(r);
	if (r->ep) {
		stream_detach(r->ep->st);
		r->ep->req = NULL;
	}
	if (r->bev)
		bufferevent_free(r->bev);
	if (r->tmp)
		evbuffer_free(r->tmp);
	if (r->head_deadline)
		event_free(r->head_deadline);
	free(r->hp);
	free(r);
}

/* Queues the last bytes; the connection closes once they are written. */
static void req_finish(struct pipe_req *r)
{
	r->state = R_FINISH;
	bufferevent_disable(r->bev, EV_READ);
	bufferevent_setwatermark(r->bev, EV_WRITE, 0, 0);
	if (evbuffer_get_length(bufferevent_get_output(r->bev)) == 0)
		req_free(r);
	else
		bufferevent_enable(r->bev, EV_WRITE);
}

static void respond(struct pipe_req *r, int status, const char *body)
{
	evbuffer_add_printf(bufferevent_get_output(r->bev),
			    "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
			    "Connection: close\r\n\r\n%s",
			    status, http_reason(status), strlen(body), body);
	req_finish(r);
}

/* The request failed in the middle of a body: cut the connection. */
static void req_abort(struct pipe_req *r, const char *why)
{
	struct endpoint *e = r->ep;

	if (e)
		client_log(r->srv->c, EXC_LOG_DEBUG, "pipe endpoint %s: %s", e->id, why);
	req_free(r);
	ep_finish(e, 0, why);
}

/* GET: moves source bytes to the connection while it has room. */
static void get_ready(void *arg);

static void get_pump(struct pipe_req *r)
{
	struct evbuffer *out = bufferevent_get_output(r->bev);

	while (r->state == R_GET && evbuffer_get_length(out) < OUT_HIGH) {
		long n = stream_read(r->ep->st, r->tmp, READ_CHUNK, get_ready, r);

		if (n == 0)
			return;
		if (n == -1) {
			char why[200];

			snprintf(why, sizeof why, "stdin source: %s", stream_error(r->ep->st));
			req_abort(r, why);
			return;
		}
		if (n == -2) {
			int64_t len = stream_length(r->ep->st);

			if (r->chunked)
				evbuffer_add(out, "0\r\n\r\n", 5);
			else if (len >= 0 && (uint64_t)len != r->ep->bytes) {
				req_abort(r, "source shorter than its length");
				return;
			}
			r->src_eof = 1;
			req_finish(r);
			return;
		}
		r->ep->bytes += (uint64_t)n;
		if (r->chunked)
			evbuffer_add_printf(out, "%lx\r\n", n);
		evbuffer_add_buffer(out, r->tmp);
		if (r->chunked)
			evbuffer_add(out, "\r\n", 2);
	}
}

static void get_ready(void *arg)
{
	get_pump(arg);
}

/* pipe_idle_timeout_ms (0, the default: none) on the direction that moves
 * the body: a GET whose peer took nothing of what is queued, a PUT whose
 * peer sent nothing, for that long is cut.  A direction that waits for the
 * local side (the source has nothing new, the sink is full) is not timed.
 * Without it a taken endpoint lives as long as its job: the job's
 * timeout_sec, its DONE or its loss end it (job_free_pipes). */
static void set_idle_timeout(struct pipe_req *r, int is_sink)
{
	unsigned ms = r->srv->c->opt.pipe_idle_timeout_ms;
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	if (ms == 0)
		return;
	bufferevent_set_timeouts(r->bev, is_sink ? &tv : NULL, is_sink ? NULL : &tv);
}

static void start_get(struct pipe_req *r)
{
	struct evbuffer *out = bufferevent_get_output(r->bev);
	int64_t len = stream_length(r->ep->st);

	r->state = R_GET;
	r->chunked = len < 0;
	evbuffer_add_printf(out, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
				 "Connection: close\r\n");
	if (r->chunked)
		evbuffer_add_printf(out, "Transfer-Encoding: chunked\r\n\r\n");
	else
		evbuffer_add_printf(out, "Content-Length: %lld\r\n\r\n", (long long)len);
	bufferevent_setwatermark(r->bev, EV_WRITE, OUT_HIGH / 2, 0);
	set_idle_timeout(r, 0);
	/* reading stays on: the peer's close (the program closed its stdin)
	 * ends the GET at once, not at the next write into it */
	bufferevent_enable(r->bev, EV_READ | EV_WRITE);
	get_pump(r);
}

/* PUT: decodes what arrived of the body into r->tmp; -1 on a bad body. */
static int put_decode(struct pipe_req *r)
{
	struct evbuffer *in = bufferevent_get_input(r->bev);

	while (!r->body_done) {
		size_t avail = evbuffer_get_length(in);

		if (!r->chunked || r->cs == C_DATA) {
			size_t n = avail < r->left ? avail : (size_t)r->left;

			if (n == 0 && r->left > 0)
				return 0;
			evbuffer_remove_buffer(in, r->tmp, n);
			r->left -= n;
			if (r->left == 0) {
				if (!r->chunked)
					r->body_done = 1;
				else
					r->cs = C_DATA_END;
			}
			continue;
		}
		{
			size_t len;
			char *line = evbuffer_readln(in, &len, EVBUFFER_EOL_CRLF_STRICT);

			if (line == NULL)
				return avail > LINE_MAX_LEN ? -1 : 0;
			if (r->cs == C_SIZE) {
				char *end;
				unsigned long long size = strtoull(line, &end, 16);

				if (end == line || (*end && *end != ';' && *end != ' ')) {
					free(line);
					return -1;
				}
				r->left = size;
				r->cs = size ? C_DATA : C_TRAILER;
			} else if (r->cs == C_DATA_END) {
				if (len != 0) {
					free(line);
					return -1;
				}
				r->cs = C_SIZE;
			} else if (len == 0) { /* C_TRAILER: the empty line ends it */
				r->cs = C_END;
				r->body_done = 1;
			}
			free(line);
		}
	}
	return 0;
}

static void put_drained(void *arg);

static void put_pump(struct pipe_req *r)
{
	long queued;
	size_t n;

	if (put_decode(r) != 0) {
		req_abort(r, "malformed chunked body");
		return;
	}
	n = evbuffer_get_length(r->tmp);
	queued = stream_write(r->ep->st, r->tmp, put_drained, r);
	if (queued < 0) {
		char why[200];

		snprintf(why, sizeof why, "sink: %s", stream_error(r->ep->st));
		ep_finish(r->ep, 0, why);
		respond(r, 500, "local sink failed\n");
		return;
	}
	r->ep->bytes += n;
	/* a complete body: nothing more is read (a peer that goes on
	 * sending is not buffered while the sink drains) */
	if (queued > SINK_HIGH || r->body_done)
		bufferevent_disable(r->bev, EV_READ);
	else
		bufferevent_enable(r->bev, EV_READ);
	if (r->body_done && queued == 0) {
		ep_finish(r->ep, 1, NULL);
		respond(r, 200, "");
	}
}

static void put_drained(void *arg)
{
	struct pipe_req *r = arg;

	if (r->state == R_PUT)
		put_pump(r);
}

static void start_put(struct pipe_req *r, const struct http_head *h)
{
	const char *expect = http_header_get(h, "Expect");

	r->state = R_PUT;
	set_idle_timeout(r, 1);
	if (h->chunked) {
		r->chunked = 1;
		r->cs = C_SIZE;
	} else if (h->has_content_length) {
		r->left = h->content_length;
		r->body_done = r->left == 0;
	} else {
		ep_finish(r->ep, 0, "PUT without a length");
		respond(r, 411, "length required\n");
		return;
	}
	if (expect && strcasecmp(expect, "100-continue") == 0)
		evbuffer_add_printf(bufferevent_get_output(r->bev),
				    "HTTP/1.1 100 Continue\r\n\r\n");
	put_pump(r);
}

static struct endpoint *find_ep(struct pipe_srv *srv, const char *path)
{
	if (strncmp(path, "/p/", 3) != 0 || strlen(path + 3) != 32)
		return NULL;
	for (struct endpoint *e = srv->eps; e; e = e->next)
		if (strcmp(e->id, path + 3) == 0)
			return e;
	return NULL;
}

static void route(struct pipe_req *r, const struct http_head *h)
{
	struct endpoint *e = find_ep(r->srv, h->path);

	if (e == NULL) {
		respond(r, 404, "no such endpoint\n");
		return;
	}
	if (e->used) {
		respond(r, 410, "endpoint already used\n");
		return;
	}
	if (h->method_id != (e->is_sink ? HTTP_PUT : HTTP_GET)) {
		respond(r, 405, e->is_sink ? "PUT only\n" : "GET only\n");
		return;
	}
	e->used = 1;
	e->req = r;
	r->ep = e;
	client_log(r->srv->c, EXC_LOG_DEBUG, "pipe endpoint %s: %s taken", e->id,
		   e->is_sink ? "PUT" : "GET");
	if (e->is_sink)
		start_put(r, h);
	else
		start_get(r);
}

static void req_read(struct bufferevent *bev, void *arg)
{
	struct pipe_req *r = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	if (r->state == R_HEAD) {
		size_t len = evbuffer_get_length(in), used = 0;
		const char *data = (const char *)evbuffer_pullup(in, -1);
		int res = http_head_feed(r->hp, data, len, &used);

		evbuffer_drain(in, used);
		if (res == HTTP_HEAD_NEED_MORE)
			return;
		if (res == HTTP_HEAD_ERROR) {
			respond(r, http_head_status(r->hp), "bad request\n");
			return;
		}
		evtimer_del(r->head_deadline);
		route(r, http_head_get(r->hp));
		return;
	}
	if (r->state == R_PUT)
		put_pump(r);
	else /* a GET's peer has nothing more to say: read only for its close */
		evbuffer_drain(in, evbuffer_get_length(in));
}

static void req_write(struct bufferevent *bev, void *arg)
{
	struct pipe_req *r = arg;

	if (r->state == R_GET)
		get_pump(r);
	else if (r->state == R_FINISH && evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
		struct endpoint *e = r->ep;
		int ok = r->src_eof;

		req_free(r);
		if (e && !e->is_sink)
			ep_finish(e, ok, ok ? NULL : "connection closed");
	}
}

static void req_event(struct bufferevent *bev, short what, void *arg)
{
	struct pipe_req *r = arg;

	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
		req_abort(r, what & BEV_EVENT_TIMEOUT ? "pipe connection timed out"
						      : "pipe connection closed early");
}

static void head_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct pipe_req *r = arg;

	if (r->state == R_HEAD) {
		client_log(r->srv->c, EXC_LOG_DEBUG, "pipe server: no request head within %d s",
			   HEAD_TIMEOUT_SEC);
		req_free(r);
	}
}

/* Closes the oldest connection still waiting for its head; 0 if none. */
static int close_oldest_head(struct pipe_srv *srv)
{
	struct pipe_req *oldest = NULL;

	for (struct pipe_req *r = srv->reqs; r; r = r->next)
		if (r->state == R_HEAD)
			oldest = r;
	if (oldest == NULL)
		return 0;
	req_free(oldest);
	return 1;
}

static size_t count_heads(const struct pipe_srv *srv)
{
	size_t n = 0;

	for (const struct pipe_req *r = srv->reqs; r; r = r->next)
		n += r->state == R_HEAD;
	return n;
}

static size_t head_waiters_max(const struct pipe_srv *srv)
{
	size_t live = 0;

	for (const struct endpoint *e = srv->eps; e; e = e->next)
		live += !e->used;
	return 2 * live + HEAD_WAITERS_BASE;
}

/* The listener accepts while the server has endpoints and is not paused. */
static void srv_update_listening(struct pipe_srv *srv)
{
	if (srv->eps && !srv->paused)
		evconnlistener_enable(srv->lis);
	else
		evconnlistener_disable(srv->lis);
}

static void pause_over(evutil_socket_t fd, short what, void *arg)
{
	struct pipe_srv *srv = arg;

	srv->paused = 0;
	srv_update_listening(srv);
}

static void on_accept_error(struct evconnlistener *lis, void *arg)
{
	struct pipe_srv *srv = arg;
	int e = EVUTIL_SOCKET_ERROR();
	struct timeval tv = { 0, ACCEPT_PAUSE_MS * 1000 };

	client_log(srv->c, EXC_LOG_WARN, "pipe server: accept: %s", strerror(e));
	if (e == EMFILE || e == ENFILE)
		close_oldest_head(srv);
	srv->paused = 1;
	srv_update_listening(srv);
	evtimer_add(srv->pause, &tv);
}

static void on_accept(struct evconnlistener *lis, evutil_socket_t fd, struct sockaddr *sa,
		      int salen, void *arg)
{
	struct pipe_srv *srv = arg;
	struct pipe_req *r;
	struct timeval head_tv = { HEAD_TIMEOUT_SEC, 0 };

	if (count_heads(srv) >= head_waiters_max(srv))
		close_oldest_head(srv);
	r = calloc(1, sizeof *r);
	if (r == NULL || (r->hp = malloc(sizeof *r->hp)) == NULL ||
	    (r->tmp = evbuffer_new()) == NULL ||
	    (r->head_deadline = evtimer_new(srv->c->base, head_deadline, r)) == NULL ||
	    (r->bev = bufferevent_socket_new(srv->c->base, fd, BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		evutil_closesocket(fd);
		if (r) {
			free(r->hp);
			if (r->tmp)
				evbuffer_free(r->tmp);
			if (r->head_deadline)
				event_free(r->head_deadline);
			free(r);
		}
		return;
	}
	r->srv = srv;
	http_head_parser_init(r->hp);
	r->next = srv->reqs;
	srv->reqs = r;
	bufferevent_setcb(r->bev, req_read, req_write, req_event, r);
	evtimer_add(r->head_deadline, &head_tv);
	bufferevent_enable(r->bev, EV_READ | EV_WRITE);
}

/* ---- servers and endpoints ------------------------------------------------ */

static int same_ip(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return 0;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		      &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
}

static struct pipe_srv *srv_get(exc_client *c, const struct sockaddr_storage *local)
{
	struct pipe_srv *srv;
	struct sockaddr_storage bound;
	socklen_t blen = sizeof bound;
	char ip[INET6_ADDRSTRLEN];

	for (srv = c->pipes; srv; srv = srv->next)
		if (same_ip(&srv->addr, local))
			return srv;
	srv = calloc(1, sizeof *srv);
	if (srv == NULL)
		return NULL;
	srv->c = c;
	srv->addr = *local;
	if (local->ss_family == AF_INET)
		((struct sockaddr_in *)&srv->addr)->sin_port = 0;
	else
		((struct sockaddr_in6 *)&srv->addr)->sin6_port = 0;
	srv->lis = evconnlistener_new_bind(
		c->base, on_accept, srv,
		LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_REUSEABLE, 64,
		(struct sockaddr *)&srv->addr,
		local->ss_family == AF_INET ? sizeof(struct sockaddr_in)
					    : sizeof(struct sockaddr_in6));
	srv->pause = evtimer_new(c->base, pause_over, srv);
	if (srv->lis == NULL || srv->pause == NULL ||
	    getsockname(evconnlistener_get_fd(srv->lis), (struct sockaddr *)&bound, &blen) != 0) {
		client_log(c, EXC_LOG_ERROR, "pipe server: cannot listen: %s", strerror(errno));
		if (srv->lis)
			evconnlistener_free(srv->lis);
		if (srv->pause)
			event_free(srv->pause);
		free(srv);
		return NULL;
	}
	evconnlistener_set_error_cb(srv->lis, on_accept_error);
	if (local->ss_family == AF_INET) {
		inet_ntop(AF_INET, &((struct sockaddr_in *)local)->sin_addr, ip, sizeof ip);
		snprintf(srv->host, sizeof srv->host, "%s", ip);
		srv->port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
	} else {
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)local)->sin6_addr, ip, sizeof ip);
		snprintf(srv->host, sizeof srv->host, "[%s]", ip);
		srv->port = ntohs(((struct sockaddr_in6 *)&bound)->sin6_port);
	}
	client_log(c, EXC_LOG_DEBUG, "pipe server on %s:%d", srv->host, srv->port);
	srv->next = c->pipes;
	c->pipes = srv;
	return srv;
}

struct endpoint *endpoint_new(exc_client *c, const struct sockaddr_storage *local, int is_sink,
			      struct stream *st, endpoint_done_fn done, void *arg, char *url,
			      size_t urlcap)
{
	struct pipe_srv *srv = srv_get(c, local);
	struct endpoint *e;

	if (srv == NULL || (e = calloc(1, sizeof *e)) == NULL)
		return NULL;
	if (client_random_hex(e->id, 16) != 0) {
		free(e);
		return NULL;
	}
	e->srv = srv;
	e->is_sink = is_sink;
	e->st = st;
	e->done = done;
	e->arg = arg;
	e->next = srv->eps;
	srv->eps = e;
	srv_update_listening(srv);
	snprintf(url, urlcap, "http://%s:%d/p/%s", srv->host, srv->port, e->id);
	return e;
}

void endpoint_free(struct endpoint *e)
{
	if (e == NULL)
		return;
	for (struct endpoint **pp = &e->srv->eps; *pp; pp = &(*pp)->next)
		if (*pp == e) {
			*pp = e->next;
			break;
		}
	if (e->req)
		req_free(e->req); /* detaches e's stream, clears e->req */
	srv_update_listening(e->srv);
	free(e);
}

int endpoint_used(const struct endpoint *e)
{
	return e->used;
}

uint64_t endpoint_bytes(const struct endpoint *e)
{
	return e->bytes;
}

void pipes_free_all(exc_client *c)
{
	while (c->pipes) {
		struct pipe_srv *srv = c->pipes;

		c->pipes = srv->next;
		while (srv->eps)
			endpoint_free(srv->eps);
		while (srv->reqs)
			req_free(srv->reqs);
		evconnlistener_free(srv->lis);
		event_free(srv->pause);
		free(srv);
	}
}
