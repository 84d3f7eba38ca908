/*
 * http_conn.h - accepted TCP connections before they become websockets: one
 * HTTP request head, then an answer (/status, /metrics, GET /token,
 * errors), the upgrade to the broker protocol at /broker, or a body-mode
 * job (PUT /job, legacy.h).
 */
#ifndef ES_HTTP_CONN_H
#define ES_HTTP_CONN_H

#include <stddef.h>
#include <sys/socket.h>

/* Takes the accepted socket fd whose client is addr.  proxied: addr came
 * in a PROXY header from a trusted proxy (proxy_gate.h); otherwise a
 * connection that begins with a PROXY header is refused. */
void conn_accept(int fd, struct sockaddr *addr, int socklen, int proxied);
/* "a.b.c.d:port" or "[v6]:port" of a socket address. */
void conn_format_peer(const struct sockaddr *sa, char *out, size_t len);

#endif
