/*
 * proxy_gate.c - where an accepted connection goes first: a connection
 * from an address in trustedProxies must begin with a PROXY protocol
 * header (net/proxy_header.h), read here from the socket itself, before
 * TLS or the HTTP parser see a byte; the client address it carries then
 * stands for the connection everywhere after (http_conn.c gets it as the
 * peer: the callback guard, the logs, the legacy token's peer check).  Any
 * other connection goes to http_conn.c as it is (which refuses a PROXY
 * header there).
 *
 * Invariants: no byte after the header is consumed (bytes are peeked, and
 * only those the parser counts as header are read); the header must be
 * complete within handshakeTimeoutSec of the accept (an absolute
 * deadline) and within PROXY_HEADER_MAX bytes; a connection waiting here
 * counts as one in its HTTP phase (maxConnections, draining).
 */
#include "autoconfig.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/clock.h"
#include "common/log.h"
#include "config/addr_rule.h"
#include "handler/handler.h"
#include "handler/http_conn.h"
#include "handler/proxy_gate.h"
#include "net/proxy_header.h"

struct gate {
	int fd;
	struct event *ev;
	uint64_t deadline_ms;
	struct sockaddr_storage proxy; /* the connection's own peer */
	socklen_t proxy_len;
	char proxy_text[64];
	size_t have; /* header bytes read so far */
	unsigned char buf[PROXY_HEADER_MAX];
};

static void gate_free(struct gate *g, int close_fd)
{
	if (close_fd)
		close(g->fd);
	if (g->ev)
		event_free(g->ev);
	free(g);
	handler.nhttp--;
	handler_maybe_exit();
}

static int wait_more(struct gate *g)
{
	uint64_t now = clock_mono_ms();
	if (now >= g->deadline_ms)
		return -1;
	uint64_t left = g->deadline_ms - now;
	struct timeval tv = { (time_t)(left / 1000), (suseconds_t)(left % 1000) * 1000 };
	return event_add(g->ev, &tv);
}

/* Reads exactly n bytes that a peek already showed. */
static int consume(struct gate *g, size_t n)
{
	while (n > 0) {
		ssize_t r = recv(g->fd, g->buf + g->have, n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		g->have += (size_t)r;
		n -= (size_t)r;
	}
	return 0;
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct gate *g = arg;
	struct proxy_header ph;
	const char *why;

	if (what & EV_TIMEOUT) {
		log_warn("%s: trusted proxy sent no complete PROXY header within %d s; closed",
			 g->proxy_text, handler.inst->cfg->handshake_timeout_sec);
		gate_free(g, 1);
		return;
	}
	ssize_t n = recv(fd, g->buf + g->have, sizeof g->buf - g->have, MSG_PEEK);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
		if (wait_more(g) != 0)
			gate_free(g, 1);
		return;
	}
	if (n <= 0) {
		log_debug("%s: closed before its PROXY header", g->proxy_text);
		gate_free(g, 1);
		return;
	}
	int r = proxy_header_parse(g->buf, g->have + (size_t)n, &ph, &why);
	if (r == PROXY_HEADER_ERROR) {
		log_warn("%s: connection from a trusted proxy refused: %s (trustedProxies: a "
			 "PROXY protocol header is required)",
			 g->proxy_text, why);
		gate_free(g, 1);
		return;
	}
	size_t take = r == PROXY_HEADER_MORE ? (size_t)n : (size_t)r - g->have;
	if (consume(g, take) != 0) {
		gate_free(g, 1);
		return;
	}
	if (r == PROXY_HEADER_MORE) {
		if (wait_more(g) != 0)
			gate_free(g, 1);
		return;
	}
	struct sockaddr *client = ph.local ? (struct sockaddr *)&g->proxy
					   : (struct sockaddr *)&ph.src;
	int client_len = (int)(ph.local ? g->proxy_len : ph.src_len);
	char client_text[64];
	conn_format_peer(client, client_text, sizeof client_text);
	log_debug("%s: PROXY v%d header: client %s%s", g->proxy_text, ph.version, client_text,
		  ph.local ? " (no client address in it: the proxy's own connection)" : "");
	handler.nhttp--; /* conn_accept counts it again */
	int sock = g->fd;
	event_free(g->ev);
	conn_accept(sock, client, client_len, 1);
	free(g);
}

void proxy_gate_accept(int fd, struct sockaddr *addr, int socklen)
{
	const struct es_config *cfg = handler.inst->cfg;
	struct ip_addr peer;
	struct gate *g;

	if (cfg->trusted_proxies.count == 0 ||
	    ip_addr_from_sockaddr(addr, (socklen_t)socklen, &peer) != 0 ||
	    !addr_rules_match_any(&cfg->trusted_proxies, &peer)) {
		conn_accept(fd, addr, socklen, 0);
		return;
	}
	if (handler.nhttp + handler.nbroker >= (unsigned)cfg->max_connections || socklen <= 0 ||
	    (size_t)socklen > sizeof g->proxy || !(g = calloc(1, sizeof *g))) {
		close(fd);
		return;
	}
	g->fd = fd;
	memcpy(&g->proxy, addr, (size_t)socklen);
	g->proxy_len = (socklen_t)socklen;
	conn_format_peer(addr, g->proxy_text, sizeof g->proxy_text);
	g->deadline_ms = clock_mono_ms() + (uint64_t)cfg->handshake_timeout_sec * 1000;
	g->ev = event_new(handler.base, fd, EV_READ, on_readable, g);
	handler.nhttp++;
	if (!g->ev || wait_more(g) != 0)
		gate_free(g, 1);
}
