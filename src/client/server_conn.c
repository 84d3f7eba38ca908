/*
 * server_conn.c - one broker connection of an address: TCP connect, the websocket
 * upgrade (client side of net/ws_handshake), the session (net/ws.c in its
 * client role), HELLO, and the dispatch of server messages to client_job.c.
 *
 * States: CONNECTING (TCP) [-> TLS (wss: handshake and verification)]
 * -> UPGRADING (request sent, reading the 101)
 * -> OPEN (websocket up, no HELLO yet) -> READY (HELLO known).  Any
 * failure or close goes through conn_end(), which tells the pool and the
 * jobs and frees the connection; the handshake deadline
 * (handshake_timeout_ms) covers CONNECTING to OPEN-with-HELLO.
 * The local address of the socket is read with getsockname once TCP is up:
 * the pipe endpoints of jobs run on this connection are bound there.
 * Host names are resolved by libevent without a DNS base (getaddrinfo,
 * which blocks the loop while it runs; give numeric addresses or names
 * from /etc/hosts where that matters).  The connection's bufferevent
 * defers its callbacks, so that a failure libevent knows at once (no such
 * name, no descriptor left, a network unreachable) still comes from the
 * loop: conn_open never frees the connection it returns.
 * wss:// (tls.c): once TCP is up, the socket moves from its plain
 * bufferevent to an OpenSSL one in connecting state (so that a refused
 * connect is told apart from a failed handshake); that one's CONNECTED
 * event means the TLS handshake, certificate and host verification
 * included, is done, and only then is the upgrade request written.  A
 * certificate that does not verify ends the attempt with "certificate
 * verify failed: <reason>" and marks the address (tls_refused) so that
 * jobs are not kept waiting on it forever.
 */
#include "autoconfig.h"
#include "client/client_impl.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>

#include "execserver/protocol.h"
#include "net/ws.h"
#include "net/ws_handshake.h"

#define RESPONSE_HEAD_MAX 8192

static void conn_end(struct exc_conn *k, int http_status, const char *why);

static void conn_unlink(struct exc_conn *k)
{
	for (struct exc_conn **pp = &k->a->conns; *pp; pp = &(*pp)->next)
		if (*pp == k) {
			*pp = k->next;
			break;
		}
}

void conn_free(struct exc_conn *k, int flush)
{
	if (k == NULL)
		return;
	conn_unlink(k);
	job_on_conn_gone(k->a->c, k);
	if (k->ws) {
		if (flush) {
			ws_close(k->ws, PROTO_CLOSE_NORMAL, "client closing");
			ws_session_flush_now(k->ws);
		}
		ws_session_free(k->ws);
	}
	if (k->bev)
		bufferevent_free(k->bev);
	if (k->timer)
		event_free(k->timer);
	if (k->hello)
		json_object_put(k->hello);
	free(k);
}

/* The connection is over: pool and jobs learn it, then it is freed. */
static void conn_end(struct exc_conn *k, int http_status, const char *why)
{
	struct exc_addr *a = k->a;
	int was_ready = k->state == K_READY;

	k->state = K_CLOSING;
	conn_unlink(k);
	job_on_conn_gone(a->c, k);
	pool_on_closed(a, k, was_ready, http_status, why);
	conn_free(k, 0);
}

int conn_send(struct exc_conn *k, struct json_object *o)
{
	const char *text;
	int r = -1;

	if (o == NULL)
		return -1;
	if (k->ws && (k->state == K_OPEN || k->state == K_READY)) {
		text = json_object_to_json_string_ext(o, WIRE_TEXT);
		r = ws_send_text(k->ws, text, strlen(text));
	}
	json_object_put(o);
	return r;
}

int conn_has_service(const struct exc_conn *k, const char *service)
{
	struct json_object *svc;

	if (k->state != K_READY || k->draining || k->hello == NULL)
		return 0;
	return json_object_object_get_ex(k->hello, "services", &svc) &&
	       json_object_is_type(svc, json_type_object) &&
	       json_object_object_get_ex(svc, service, NULL);
}

const char *conn_disabled_why(const struct exc_conn *k, const char *service)
{
	struct json_object *off, *why;

	if (k->state != K_READY || k->hello == NULL ||
	    !json_object_object_get_ex(k->hello, "disabled", &off) ||
	    !json_object_object_get_ex(off, service, &why) ||
	    !json_object_is_type(why, json_type_string))
		return NULL;
	return json_object_get_string(why);
}

/* Slots of the waitgroup that runs service on k's instance (every
 * waitgroup's when service is NULL); -1 when it does not run the service. */
static int64_t slots_for(const struct exc_conn *k, const char *service)
{
	struct json_object *wgs, *svc, *wg_name, *wg;
	int64_t slots = 0;

	if (!json_object_object_get_ex(k->hello, "waitgroups", &wgs) ||
	    !json_object_is_type(wgs, json_type_object))
		return -1;
	if (service == NULL) {
		json_object_object_foreach(wgs, name, w)
		{
			(void)name;
			slots += wire_int_in(w, "processes", 0, 0, WIRE_SLOTS_MAX);
			if (slots > WIRE_SLOTS_MAX)
				slots = WIRE_SLOTS_MAX;
		}
		return slots;
	}
	if (!conn_has_service(k, service) ||
	    !json_object_object_get_ex(k->hello, "services", &svc) ||
	    !json_object_object_get_ex(svc, service, &wg_name) ||
	    !json_object_is_type(wg_name, json_type_string) ||
	    !json_object_object_get_ex(wgs, json_object_get_string(wg_name), &wg))
		return -1;
	return wire_int_in(wg, "processes", 0, 0, WIRE_SLOTS_MAX);
}

unsigned conn_share(const struct exc_conn *k, const char *service)
{
	int64_t clients = k->clients > 0 ? k->clients : 1;
	int64_t slots;

	if (k->state != K_READY || k->draining || k->hello == NULL)
		return 0;
	slots = slots_for(k, service);
	if (slots < 0)
		return 0;
	/* floor, not ceil: the clients' shares add up to the slots plus at
	 * most one parked want per client (docs/client.md, "Claim share") */
	return (unsigned)(slots / clients) + 1;
}

/* ---- messages ------------------------------------------------------------ */

/* 1 to 64 of [A-Za-z0-9_.-] (an instanceId, or 32 hex digits): safe to
 * put into the upgrade URL of a ?instance= hint as it is. */
static int instance_id_valid(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n > 64)
		return 0;
	return strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

/* How long the instance of HELLO o may still run a job after the client
 * lost its connection, or 0 if o does not say: it notices a silent
 * connection within ping_timeout_sec + ping_interval_sec of the last
 * frame it got (docs/protocol.md, "Liveness"), keeps the client's jobs
 * for resume_grace_sec more (section 6), and then stops them. */
static uint64_t keeps_jobs_ms(struct json_object *o)
{
	static const char *const keys[] = { "ping_timeout_sec", "ping_interval_sec",
					    "resume_grace_sec" };
	uint64_t ms = CONN_KILL_MARGIN_MS;

	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		int64_t s = wire_int(o, keys[i], -1);

		if (s < 0 || s > 86400)
			return 0;
		ms += (uint64_t)s * 1000;
	}
	return ms;
}

static void on_hello(struct exc_conn *k, struct json_object *o)
{
	const char *id = wire_str(o, "instance_id");
	struct json_object *dr;
	int first = k->state != K_READY;

	if (id == NULL || !instance_id_valid(id)) {
		client_log(k->a->c, EXC_LOG_WARN, "%s: HELLO without a valid instance_id",
			   k->a->url);
		return;
	}
	if (k->hello)
		json_object_put(k->hello);
	k->hello = json_object_get(o);
	snprintf(k->instance_id, sizeof k->instance_id, "%s", id);
	k->clients = (int)wire_int_in(o, "clients", 1, 1, INT_MAX);
	k->protocol = (int)wire_int_in(o, "protocol", 1, 1, INT_MAX);
	k->draining = json_object_object_get_ex(o, "draining", &dr) && json_object_get_boolean(dr);
	/* an older instance does not say: no check (it closes the connection
	 * with 1009 on a JOB over its limit, as before) */
	k->max_frame = json_object_object_get_ex(o, "max_frame_bytes", NULL)
			       ? (size_t)wire_int_in(o, "max_frame_bytes", 0, 1024, INT32_MAX)
			       : SIZE_MAX;
	k->keeps_jobs_ms = keeps_jobs_ms(o);
	if (first) {
		k->state = K_READY;
		if (k->timer)
			evtimer_del(k->timer);
		if (pool_on_hello(k->a, k, 1) != 0)
			return; /* a duplicate: the pool closed it */
	}
	job_on_ready(k->a->c, k);
}

static void on_text(void *arg, const char *msg, size_t len)
{
	struct exc_conn *k = arg;
	exc_client *c = k->a->c;
	struct json_tokener *tok = json_tokener_new();
	struct json_object *o = tok ? json_tokener_parse_ex(tok, msg, (int)len) : NULL;
	const char *type;

	if (tok)
		json_tokener_free(tok);
	if (o == NULL || !json_object_is_type(o, json_type_object) ||
	    (type = wire_str(o, "type")) == NULL) {
		client_log(c, EXC_LOG_WARN, "%s: unreadable message from the server", k->a->url);
		json_object_put(o);
		return;
	}
	if (strcmp(type, PROTO_HELLO) == 0)
		on_hello(k, o);
	else if (k->state != K_READY)
		client_log(c, EXC_LOG_WARN, "%s: %s before HELLO", k->a->url, type);
	else if (strcmp(type, PROTO_OFFER) == 0)
		job_on_offer(c, k, o);
	else if (strcmp(type, PROTO_DONE) == 0)
		job_on_done(c, k, o);
	else if (strcmp(type, PROTO_POSITION) == 0)
		job_on_position(c, k, o);
	else if (strcmp(type, PROTO_PROGRESS) == 0)
		job_on_progress(c, k, o);
	else if (strcmp(type, PROTO_ERROR) == 0)
		job_on_error(c, k, o);
	else
		client_log(c, EXC_LOG_DEBUG, "%s: ignoring message %s", k->a->url, type);
	json_object_put(o);
}

static void on_closed(void *arg, uint16_t code)
{
	struct exc_conn *k = arg;
	char why[64];

	snprintf(why, sizeof why, "connection closed (%u)", (unsigned)code);
	conn_end(k, code, why);
}

/* The session's lines go to the client's log callback (the levels are the
 * same numbers). */
static void on_log(void *arg, enum log_level level, const char *line)
{
	struct exc_conn *k = arg;

	client_log(k->a->c, (enum exc_log_level)level, "%s", line);
}

/* ---- handshake ------------------------------------------------------------ */

static void start_session(struct exc_conn *k)
{
	static const struct ws_callbacks cb = { .on_text = on_text,
						.on_closed = on_closed,
						.on_log = on_log };
	struct ws_options opt;

	ws_options_default(&opt);
	opt.client_role = 1;
	opt.ping_timeout_ms = k->a->c->opt.ping_timeout_ms;
	opt.ping_interval_ms = opt.ping_timeout_ms / 3 < 15000 ? opt.ping_timeout_ms / 3 : 15000;
	k->ws = ws_session_new(k->bev, &opt, &cb, k);
	if (k->ws == NULL) {
		conn_end(k, 0, "out of memory");
		return;
	}
	k->bev = NULL; /* the session owns it */
	k->state = K_OPEN;
}

/* A TLS record (handshake or alert, any TLS version) where an HTTP
 * answer was expected: a ws:// address dialled a TLS port. */
static int looks_like_tls(struct evbuffer *in)
{
	const unsigned char *p = evbuffer_pullup(in, 3);

	return p && (p[0] == 0x15 || p[0] == 0x16) && p[1] == 0x03 && p[2] <= 0x04;
}

static void hs_read(struct bufferevent *bev, void *arg)
{
	struct exc_conn *k = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
	int status;
	size_t hlen;
	char why[96];

	if (end.pos < 0) {
		if (evbuffer_get_length(in) > RESPONSE_HEAD_MAX)
			conn_end(k, 0, "upgrade answer too long");
		else if (!k->a->u.tls && looks_like_tls(in))
			conn_end(k, 0, "the server answered with TLS: use a wss:// address");
		return;
	}
	hlen = (size_t)end.pos + 4;
	k->a->tls_refused = 0; /* an HTTP answer: TLS, if any, was fine */
	if (ws_handshake_client_check((const char *)evbuffer_pullup(in, (ssize_t)hlen), hlen,
				      k->key, &status) != 0) {
		if (status == 101)
			snprintf(why, sizeof why, "bad websocket upgrade answer");
		else if (status == 401)
			snprintf(why, sizeof why, "HTTP 401: the server refused the token");
		else
			snprintf(why, sizeof why, "HTTP %d to the websocket upgrade", status);
		conn_end(k, status == 101 ? 0 : status, why);
		return;
	}
	evbuffer_drain(in, hlen);
	start_session(k);
}

static void hs_event(struct bufferevent *bev, short what, void *arg);

/* TCP is up on a wss address: the socket moves to an OpenSSL bufferevent
 * that starts the client handshake at once. */
static void start_tls(struct exc_conn *k)
{
	char why[300];
	evutil_socket_t fd = bufferevent_getfd(k->bev);
	struct ssl_st *ssl = tls_new_ssl(k->a->c, k->a->u.host, why, sizeof why);
	struct bufferevent *tls;

	if (ssl == NULL) {
		conn_end(k, 0, why);
		return;
	}
	/* the plain bufferevent lets go of the socket without closing it */
	bufferevent_setfd(k->bev, -1);
	bufferevent_free(k->bev);
	k->bev = NULL;
	/* libevent owns ssl and fd from here; when this fails (out of
	 * memory only) it frees ssl, the socket may stay open */
	tls = bufferevent_openssl_socket_new(k->a->c->base, fd, ssl, BUFFEREVENT_SSL_CONNECTING,
					     BEV_OPT_CLOSE_ON_FREE);
	if (tls == NULL) {
		conn_end(k, 0, "cannot start TLS: out of memory");
		return;
	}
	bufferevent_openssl_set_allow_dirty_shutdown(tls, 1);
	k->bev = tls;
	k->state = K_TLS;
	bufferevent_setcb(tls, hs_read, NULL, hs_event, k);
	bufferevent_enable(tls, EV_READ | EV_WRITE);
}

static void hs_event(struct bufferevent *bev, short what, void *arg)
{
	struct exc_conn *k = arg;
	char host[300], target[200];

	if (what & BEV_EVENT_CONNECTED) {
		evutil_socket_t fd = bufferevent_getfd(bev);
		int one = 1;

		/* small messages each awaited by the other side (WANT, JOB, ACK):
		 * sent at once, not held back by Nagle until the previous one is
		 * acknowledged (the server's delayed ACK: up to 40 ms) */
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		if (k->a->u.tls && k->state == K_CONNECTING) {
			start_tls(k);
			return;
		}

		k->local_len = sizeof k->local;
		if (getsockname(fd, (struct sockaddr *)&k->local, &k->local_len) != 0) {
			conn_end(k, 0, "getsockname failed");
			return;
		}
		snprintf(host, sizeof host, strchr(k->a->u.host, ':') ? "[%s]" : "%s",
			 k->a->u.host);
		snprintf(target, sizeof target, "%s?client=%s&%s=%d%s%s", PROTO_BROKER_PATH,
			 k->a->c->client_id, PROTO_PARAM_PROTOCOL, PROTO_VERSION,
			 k->hint[0] ? "&instance=" : "", k->hint);
		if (ws_handshake_client_key(k->key) != 0 ||
		    ws_handshake_client_request(bufferevent_get_output(bev), host, k->a->u.port,
						target, k->key, k->a->c->auth_token) != 0) {
			conn_end(k, 0, "cannot build the upgrade request");
			return;
		}
		k->state = K_UPGRADING;
		bufferevent_enable(bev, EV_READ | EV_WRITE);
		return;
	}
	if (what & (BEV_EVENT_ERROR | BEV_EVENT_EOF)) {
		int err = EVUTIL_SOCKET_ERROR();
		int dns = bufferevent_socket_get_dns_error(bev);
		char why[400];

		k->a->tls_refused = 0;
		/* the system's own text: libevent's table has BSD wording
		 * ("nodename nor servname provided") on every system */
		if (dns)
			snprintf(why, sizeof why, "cannot resolve %s: %s", k->a->u.host,
				 dns == EVUTIL_EAI_CANCEL ? "lookup cancelled" : gai_strerror(dns));
		else if (k->state == K_TLS)
			k->a->tls_refused = tls_failure(bev, what & BEV_EVENT_ERROR ? err : 0, why,
							sizeof why);
		else if (k->state == K_UPGRADING)
			snprintf(why, sizeof why, "connection %s during the upgrade%s%s%s",
				 what & BEV_EVENT_EOF ? "closed" : "lost",
				 what & BEV_EVENT_EOF ? "" : ": ",
				 what & BEV_EVENT_EOF ? "" : strerror(err),
				 k->a->u.tls ? "" : " (a TLS port? then use wss://)");
		else
			snprintf(why, sizeof why, "cannot connect: %s", strerror(err));
		if (k->a->tls_refused)
			snprintf(k->a->tls_why, sizeof k->a->tls_why, "%s", why);
		conn_end(k, 0, why);
	}
}

static void hs_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct exc_conn *k = arg;

	if (k->state != K_READY)
		conn_end(k, 0, "timed out connecting");
}

struct exc_conn *conn_open(struct exc_addr *a)
{
	exc_client *c = a->c;
	struct exc_conn *k = calloc(1, sizeof *k);
	struct timeval tv = { c->opt.handshake_timeout_ms / 1000,
			      (c->opt.handshake_timeout_ms % 1000) * 1000 };

	if (k == NULL)
		return NULL;
	k->a = a;
	k->state = K_CONNECTING;
	/* deferred callbacks: without a DNS base, libevent reports a failed
	 * resolution, socket() or connect() from inside the connect call;
	 * deferred, every failure reaches hs_event from the loop, after
	 * conn_open returned k to the pool (which may still write to it) */
	k->bev = bufferevent_socket_new(c->base, -1,
					BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	k->timer = evtimer_new(c->base, hs_timeout, k);
	if (k->bev == NULL || k->timer == NULL) {
		if (k->bev)
			bufferevent_free(k->bev);
		if (k->timer)
			event_free(k->timer);
		free(k);
		return NULL;
	}
	k->next = a->conns;
	a->conns = k;
	bufferevent_setcb(k->bev, hs_read, NULL, hs_event, k);
	evtimer_add(k->timer, &tv);
	if (bufferevent_socket_connect_hostname(k->bev, NULL, AF_UNSPEC, a->u.host, a->u.port) !=
	    0) {
		/* a bad port or family only (url_parse refuses those): the
		 * handshake deadline ends the attempt */
		client_log(c, EXC_LOG_DEBUG, "%s: connect failed at once", a->url);
	}
	return k;
}
