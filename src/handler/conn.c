/*
 * conn.c - a TCP connection in its HTTP phase: read one request head,
 * answer it, and either hand the socket to the broker (websocket upgrade
 * at /broker) or close it after the answer.
 *
 * Invariants: the head must arrive within HANDSHAKE_TIMEOUT_S (a slowloris
 * upgrade is cut off, its parser freed); the parser exists only during this
 * phase, so an established websocket costs nothing for HTTP.
 */
#include "autoconfig.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "common/log.h"
#include "execserver/protocol.h"
#include "handler/broker.h"
#include "handler/conn.h"
#include "handler/handler.h"
#include "net/http_head.h"
#include "handler/status.h"
#include "net/ws.h"
#include "net/ws_handshake.h"

#define HANDSHAKE_TIMEOUT_S 10

struct http_conn {
	struct bufferevent *bev;
	struct event *deadline;     /* the whole HTTP phase, from accept */
	char peer[64];
	int answered; /* response queued: free once written */
	struct http_head_parser parser; /* last: initialised by its own init */
};

static void http_conn_free(struct http_conn *c)
{
	if (c->bev)
		bufferevent_free(c->bev);
	event_free(c->deadline);
	free(c);
	handler.nhttp--;
	handler_maybe_exit();
}

static void on_write_done(struct bufferevent *bev, void *arg)
{
	struct http_conn *c = arg;
	if (c->answered && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		http_conn_free(c);
}

static void respond(struct http_conn *c, int status, const char *content_type,
		    struct evbuffer *body, const char *extra_headers)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);
	size_t len = body ? evbuffer_get_length(body) : 0;

	evbuffer_add_printf(out,
			    "HTTP/1.1 %d %s\r\nServer: execserver/%s\r\nConnection: close\r\n"
			    "Content-Length: %zu\r\n%s%s%s%s\r\n",
			    status, http_reason(status), PACKAGE_VERSION, len,
			    content_type ? "Content-Type: " : "", content_type ? content_type : "",
			    content_type ? "\r\n" : "", extra_headers ? extra_headers : "");
	if (body)
		evbuffer_add_buffer(out, body);
	c->answered = 1;
	bufferevent_disable(c->bev, EV_READ);
	bufferevent_enable(c->bev, EV_WRITE);
}

static void respond_text(struct http_conn *c, int status, const char *text,
			 const char *extra_headers)
{
	struct evbuffer *body = evbuffer_new();
	evbuffer_add_printf(body, "%s\n", text);
	respond(c, status, "text/plain; charset=utf-8", body, extra_headers);
	evbuffer_free(body);
}

static void upgrade(struct http_conn *c, const struct http_head *h)
{
	const struct es_config *cfg = handler.inst->cfg;
	char accept[WS_ACCEPT_LEN + 1], response[256], client_id[BOOK_ID_MAX + 1] = "";
	struct book_ref ref;
	int status;

	if (cfg->auth_token && !ws_bearer_ok(http_header_get(h, "Authorization"), cfg->auth_token)) {
		respond_text(c, 401, "a valid Authorization: Bearer token is required",
			     "WWW-Authenticate: Bearer realm=\"execserver\"\r\n");
		return;
	}
	status = ws_handshake_check(h, accept);
	if (status != 0) {
		respond_text(c, status, "not a valid websocket upgrade",
			     status == 426 ? "Sec-WebSocket-Version: 13\r\n" : NULL);
		return;
	}
	int n = http_query_param(h->query, "client", client_id, sizeof client_id);
	if (n == HTTP_QP_INVALID || n == HTTP_QP_TOO_LONG || n == 0) {
		respond_text(c, 400, "client: 1 to 64 printable characters", NULL);
		return;
	}
	if (n > 0) {
		for (int i = 0; i < n; i++)
			if ((unsigned char)client_id[i] < 0x21 || (unsigned char)client_id[i] > 0x7e) {
				respond_text(c, 400, "client: 1 to 64 printable characters", NULL);
				return;
			}
	}
	if (handler.draining) {
		respond_text(c, 503, "the execserver is stopping", "Retry-After: 1\r\n");
		return;
	}
	status = broker_register(n > 0 ? client_id : NULL, &ref);
	if (status != 0) {
		respond_text(c, status, "connection limit reached", "Retry-After: 1\r\n");
		return;
	}
	int rlen = ws_handshake_response(accept, NULL, response, sizeof response);
	evbuffer_add(bufferevent_get_output(c->bev), response, (size_t)rlen);
	/* The bufferevent (with any frame bytes that followed the head) now
	 * belongs to the websocket session. */
	struct bufferevent *bev = c->bev;
	c->bev = NULL;
	if (broker_attach(bev, ref, n > 0 ? client_id : NULL, c->peer) != 0) {
		broker_unregister(ref);
		bufferevent_free(bev);
	}
	http_conn_free(c);
}

static void route(struct http_conn *c, const struct http_head *h)
{
	int is_get = strcmp(h->method, "GET") == 0;

	if (strcmp(h->path, PROTO_BROKER_PATH) == 0) {
		if (strcmp(h->method, "GET") != 0)
			respond_text(c, 405, "GET only", "Allow: GET\r\n");
		else
			upgrade(c, h);
	} else if ((strcmp(h->path, "/status") == 0 || strcmp(h->path, "/metrics") == 0) &&
		   handler.inst->cfg->auth_token &&
		   !ws_bearer_ok(http_header_get(h, "Authorization"), handler.inst->cfg->auth_token)) {
		respond_text(c, 401, "a valid Authorization: Bearer token is required",
			     "WWW-Authenticate: Bearer realm=\"execserver\"\r\n");
	} else if (strcmp(h->path, "/status") == 0 && is_get) {
		struct evbuffer *body = evbuffer_new();
		char check[4];
		status_json(body, http_query_param(h->query, "check", check, sizeof check) >= 0 &&
					  strcmp(check, "1") == 0);
		respond(c, 200, "application/json", body, NULL);
		evbuffer_free(body);
	} else if (strcmp(h->path, "/metrics") == 0 && is_get) {
		struct evbuffer *body = evbuffer_new();
		status_metrics(body);
		respond(c, 200, "text/plain; version=0.0.4", body, NULL);
		evbuffer_free(body);
	} else {
		respond_text(c, 404, "not found", NULL);
	}
}

static void on_read(struct bufferevent *bev, void *arg)
{
	struct http_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	while (!c->answered && evbuffer_get_length(in) > 0) {
		struct evbuffer_iovec v;
		size_t used = 0;
		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
			break;
		int r = http_head_feed(&c->parser, v.iov_base, v.iov_len, &used);
		evbuffer_drain(in, used);
		if (r == HTTP_HEAD_ERROR) {
			respond_text(c, http_head_status(&c->parser), "bad request", NULL);
			return;
		}
		if (r == HTTP_HEAD_DONE) {
			route(c, http_head_get(&c->parser));
			return; /* c may be gone (upgraded) */
		}
	}
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	http_conn_free(arg);
}

/* An absolute deadline, not an idle timeout: a peer that trickles one byte
 * at a time (slowloris) is cut off all the same. */
static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct http_conn *c = arg;
	log_debug("%s: request not complete (or answer not read) within %d s", c->peer,
		  HANDSHAKE_TIMEOUT_S);
	http_conn_free(c);
}

static void format_peer(const struct sockaddr *sa, char *out, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof host);
		port = ntohs(s4->sin_port);
		snprintf(out, len, "%s:%u", host, port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof host);
		port = ntohs(s6->sin6_port);
		snprintf(out, len, "[%s]:%u", host, port);
	} else {
		snprintf(out, len, "?");
	}
}

void conn_accept(int fd, struct sockaddr *addr, int socklen)
{
	struct http_conn *c;
	int one = 1;

	/* Connections still in their HTTP phase count against maxConnections
	 * too, so half-open upgrades cannot exhaust the descriptors. */
	if (handler.nhttp + handler.nbroker >= (unsigned)handler.inst->cfg->max_connections ||
	    !(c = malloc(sizeof *c))) {
		close(fd);
		return;
	}
	memset(c, 0, offsetof(struct http_conn, parser));
	http_head_parser_init(&c->parser);
	format_peer(addr, c->peer, sizeof c->peer);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	ws_set_keepalive(fd);
	c->bev = bufferevent_socket_new(handler.base, fd, BEV_OPT_CLOSE_ON_FREE);
	c->deadline = evtimer_new(handler.base, on_deadline, c);
	if (!c->bev || !c->deadline) {
		if (c->bev)
			bufferevent_free(c->bev);
		else
			close(fd);
		if (c->deadline)
			event_free(c->deadline);
		free(c);
		return;
	}
	handler.nhttp++;
	struct timeval tv = { HANDSHAKE_TIMEOUT_S, 0 };
	evtimer_add(c->deadline, &tv);
	bufferevent_setcb(c->bev, on_read, on_write_done, on_event, c);
	bufferevent_enable(c->bev, EV_READ);
}
