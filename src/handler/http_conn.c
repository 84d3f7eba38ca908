/*
 * http_conn.c - a TCP connection in its HTTP phase: read one request head,
 * answer it, and either hand the socket to the broker (websocket upgrade
 * at /broker) or to a body-mode job (PUT /job of the legacy transport,
 * legacy.c), or close it after the answer.
 *
 * Invariants: the head must arrive within handshakeTimeoutSec (a slowloris
 * upgrade is cut off, its parser freed); the parser exists only during this
 * phase, so an established websocket costs nothing for HTTP.  With TLS
 * the bufferevent is an OpenSSL one from accept on; nothing after it
 * knows the difference.
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
#include <event2/bufferevent_ssl.h>
#include <openssl/ssl.h>

#include "common/log.h"
#include "config/addr_rule.h"
#include "execserver/protocol.h"
#include "handler/broker.h"
#include "handler/console.h"
#include "handler/handler.h"
#include "handler/http_conn.h"
#include "handler/legacy.h"
#include "handler/legacy_stream.h"
#include "handler/status_page.h"
#include "net/http_head.h"
#include "net/proxy_header.h"
#include "net/ws.h"
#include "net/ws_handshake.h"

struct http_conn {
	struct bufferevent *bev;
	struct event *deadline; /* the whole HTTP phase, from accept */
	char peer[64];
	struct sockaddr_storage peer_addr; /* for the callback guard */
	socklen_t peer_len;
	int answered;                   /* response queued: free once written */
	int proxied;                    /* peer_addr came in a PROXY header (proxy_gate.c) */
	int started;                    /* its first bytes were looked at */
	int head_only;                  /* a HEAD request: every answer without its body */
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
	if (c->answered && evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
		ws_tls_close_notify(bev); /* TLS: the answer ends cleanly */
		http_conn_free(c);
	}
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
	if (body && !c->head_only) /* HEAD: GET's head, its Content-Length too */
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

/* The protocol version in effect for an upgrade: the smaller of the
 * client's ?protocol=N (absent: 1) and ours; -1 when N is not a decimal
 * integer from 1 to 999999999. */
static int negotiate_protocol(const struct http_head *h)
{
	char v[16];
	int n = http_query_param(h->query, PROTO_PARAM_PROTOCOL, v, sizeof v);
	if (n == HTTP_QP_ABSENT)
		return 1;
	if (n < 1 || n > 9)
		return -1;
	long asked = 0;
	for (int i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		asked = asked * 10 + (v[i] - '0');
	}
	if (asked < 1)
		return -1;
	return asked < PROTO_VERSION ? (int)asked : PROTO_VERSION;
}

static void upgrade(struct http_conn *c, const struct http_head *h)
{
	const struct es_config *cfg = handler.inst->cfg;
	char accept[WS_ACCEPT_LEN + 1], response[256], client_id[BOOK_ID_MAX + 1] = "";
	struct book_ref ref;
	int status;

	if (cfg->auth_token &&
	    !ws_bearer_ok(http_header_get(h, "Authorization"), cfg->auth_token)) {
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
			if ((unsigned char)client_id[i] < 0x21 ||
			    (unsigned char)client_id[i] > 0x7e) {
				respond_text(c, 400, "client: 1 to 64 printable characters", NULL);
				return;
			}
	}
	int protocol = negotiate_protocol(h);
	if (protocol < 0) {
		respond_text(c, 400, "protocol: a version number from 1 up", NULL);
		return;
	}
	if (handler.draining) {
		respond_text(c, 503, "the execserver is stopping", "Retry-After: 1\r\n");
		return;
	}
	status = broker_register(n > 0 ? client_id : NULL, protocol, &ref);
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
	if (broker_attach(bev, ref, n > 0 ? client_id : NULL, protocol, c->peer,
			  (const struct sockaddr *)&c->peer_addr, c->peer_len) != 0) {
		broker_unregister(ref);
		bufferevent_free(bev);
	}
	http_conn_free(c);
}

/* The legacy token transport: an answer, or the socket goes to its job. */
static void route_legacy(struct http_conn *c, const struct http_head *h)
{
	struct legacy_answer a = { .body = evbuffer_new() };
	if (!a.body) {
		http_conn_free(c);
		return;
	}
	struct ip_addr peer_ip;
	int have_ip = ip_addr_from_sockaddr((const struct sockaddr *)&c->peer_addr, c->peer_len,
					    &peer_ip) == 0;
	if (legacy_handle(h, c->bev, c->peer, have_ip ? &peer_ip : NULL, &a)) {
		c->bev = NULL; /* with any body bytes that followed the head */
		http_conn_free(c);
	} else {
		respond(c, a.status, a.content_type, a.body, a.extra_headers);
		/* a client may still be sending a body: let it, so that it
		 * reads the answer instead of a reset */
		if ((h->chunked || (h->has_content_length && h->content_length > 0)) &&
		    legacy_stream_linger(c->bev) == 0) {
			c->bev = NULL;
			http_conn_free(c);
		}
	}
	evbuffer_free(a.body);
}

/* The console's page, files and action (console.h): 1 when answered. */
static int route_console(struct http_conn *c, const struct http_head *h)
{
	struct console_answer a = { .body = evbuffer_new() };
	if (!a.body)
		return 0;
	int mine = console_handle(h, &a);
	if (mine)
		respond(c, a.status, a.content_type, a.body, a.extra_headers);
	evbuffer_free(a.body);
	return mine;
}

static void route(struct http_conn *c, const struct http_head *h)
{
	/* HEAD where GET reads (the console, /status, /metrics): the same
	 * answer without its body; not where a GET acts (a legacy token, the
	 * broker's upgrade) */
	c->head_only = strcmp(h->method, "HEAD") == 0;
	int is_get = strcmp(h->method, "GET") == 0 || c->head_only;
	int legacy = legacy_path(h->path);

	if (route_console(c, h))
		return;
	if (strcmp(h->path, PROTO_BROKER_PATH) == 0 && !handler.inst->cfg->broker) {
		respond_text(c, 404, "not found: the broker is switched off (broker: off)", NULL);
	} else if (strcmp(h->path, PROTO_BROKER_PATH) == 0) {
		if (strcmp(h->method, "GET") != 0)
			respond_text(c, 405, "GET only", "Allow: GET\r\n");
		else
			upgrade(c, h);
	} else if ((strcmp(h->path, "/status") == 0 || strcmp(h->path, "/metrics") == 0 ||
		    legacy) &&
		   handler.inst->cfg->auth_token &&
		   !ws_bearer_ok(http_header_get(h, "Authorization"),
				 handler.inst->cfg->auth_token)) {
		respond_text(c, 401, "a valid Authorization: Bearer token is required",
			     "WWW-Authenticate: Bearer realm=\"execserver\"\r\n");
	} else if (strcmp(h->path, "/status") == 0 && !handler_host_trusted(h)) {
		/* no token to hold back a page whose DNS name was rebound to
		 * this address, no certificate to refuse its name: only the name
		 * in Host tells it apart */
		respond_text(c, 403,
			     "refused: without authToken, Host must be an address or localhost",
			     NULL);
	} else if (strcmp(h->path, "/status") == 0 && is_get) {
		struct evbuffer *body = evbuffer_new();
		char check[4];
		char detail[4];
		status_json(body,
			    http_query_param(h->query, "check", check, sizeof check) >= 0 &&
				    strcmp(check, "1") == 0,
			    http_query_param(h->query, "detail", detail, sizeof detail) >= 0 &&
				    strcmp(detail, "1") == 0);
		respond(c, 200, "application/json", body, "Cache-Control: no-store\r\n");
		evbuffer_free(body);
	} else if (legacy) {
		route_legacy(c, h);
	} else if (strcmp(h->path, "/metrics") == 0 && is_get) {
		struct evbuffer *body = evbuffer_new();
		status_metrics(body);
		respond(c, 200, "text/plain; version=0.0.4", body, NULL);
		evbuffer_free(body);
	} else {
		respond_text(c, 404, "not found", NULL);
	}
}

/* A PROXY header from an address that is not in trustedProxies would let
 * anyone claim any client address: refused with a 400 that says why.
 * Decided on the first 5 bytes ("PROXY", or the start of version 2's
 * signature), waited for while the fewer that came could begin a header
 * (a request needs more than 5 bytes anyway); returns 1 when refused or
 * waiting. */
static int refuse_stray_proxy_header(struct http_conn *c, struct evbuffer *in)
{
	size_t len = evbuffer_get_length(in);
	if (len < 5)
		return len > 0 && proxy_header_looks_like(evbuffer_pullup(in, -1), len);
	c->started = 1;
	const unsigned char *first = evbuffer_pullup(in, 5);
	if (!first || !proxy_header_looks_like(first, 5))
		return 0;
	log_warn("%s: PROXY protocol header refused: the address is not in trustedProxies%s",
		 c->peer, c->proxied ? " (a second header behind the trusted proxy's)" : "");
	respond_text(c, 400,
		     c->proxied ? "a second PROXY protocol header"
				: "PROXY protocol header refused: not from an address in "
				  "trustedProxies",
		     NULL);
	return 1;
}

static void on_read(struct bufferevent *bev, void *arg)
{
	struct http_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	if (!c->started && refuse_stray_proxy_header(c, in))
		return;
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
	if (what & BEV_EVENT_CONNECTED)
		return; /* TLS: the handshake is done; the request follows */
	http_conn_free(arg);
}

/* An absolute deadline, not an idle timeout: a peer that trickles one byte
 * at a time (slowloris) is cut off all the same. */
static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct http_conn *c = arg;
	log_debug("%s: request not complete (or answer not read) within %d s", c->peer,
		  handler.inst->cfg->handshake_timeout_sec);
	http_conn_free(c);
}

void conn_format_peer(const struct sockaddr *sa, char *out, size_t len)
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

/* A plain bufferevent, or a TLS one in accepting state when the listener
 * has TLS (the handshake then runs within the HTTP phase's deadline). */
static struct bufferevent *new_bufferevent(int fd, int *fd_taken)
{
	SSL *ssl;
	struct bufferevent *bev;

	*fd_taken = 0;
	if (!handler.inst->tls_ctx)
		return bufferevent_socket_new(handler.base, fd, BEV_OPT_CLOSE_ON_FREE);
	ssl = SSL_new(handler.inst->tls_ctx);
	if (!ssl)
		return NULL;
	/* from here libevent owns ssl and fd (BEV_OPT_CLOSE_ON_FREE): when it
	 * fails it frees the SSL and may already have closed the socket */
	*fd_taken = 1;
	bev = bufferevent_openssl_socket_new(handler.base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
					     BEV_OPT_CLOSE_ON_FREE);
	if (!bev)
		return NULL;
	/* a peer that closes TCP without close_notify is an ordinary end */
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	return bev;
}

void conn_accept(int fd, struct sockaddr *addr, int socklen, int proxied)
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
	conn_format_peer(addr, c->peer, sizeof c->peer);
	c->proxied = proxied;
	if (socklen > 0 && (size_t)socklen <= sizeof c->peer_addr) {
		memcpy(&c->peer_addr, addr, (size_t)socklen);
		c->peer_len = (socklen_t)socklen;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	ws_set_keepalive(fd);
	int fd_taken;
	c->bev = new_bufferevent(fd, &fd_taken);
	c->deadline = evtimer_new(handler.base, on_deadline, c);
	if (!c->bev || !c->deadline) {
		if (c->bev)
			bufferevent_free(c->bev);
		else if (!fd_taken)
			close(fd);
		if (c->deadline)
			event_free(c->deadline);
		free(c);
		return;
	}
	handler.nhttp++;
	struct timeval tv = { handler.inst->cfg->handshake_timeout_sec, 0 };
	evtimer_add(c->deadline, &tv);
	bufferevent_setcb(c->bev, on_read, on_write_done, on_event, c);
	bufferevent_enable(c->bev, EV_READ);
}
