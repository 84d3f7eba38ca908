/*
 * http_conn.h - accepted TCP connections before they become websockets: one
 * HTTP request head, then an answer (/status, /metrics, GET /token,
 * errors), the upgrade to the broker protocol at /broker, or a body-mode
 * job (PUT /job, legacy.h).
 */
#ifndef ES_HTTP_CONN_H
#define ES_HTTP_CONN_H

#include <sys/socket.h>

void conn_accept(int fd, struct sockaddr *addr, int socklen);

#endif
