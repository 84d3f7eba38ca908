/*
 * proxy_gate.h - the first stop of an accepted connection: the PROXY
 * protocol header of a connection from trustedProxies (proxy_gate.c).
 */
#ifndef ES_PROXY_GATE_H
#define ES_PROXY_GATE_H

#include <sys/socket.h>

/* Takes the accepted socket fd: reads the PROXY header when addr is a
 * trusted proxy, then hands it to conn_accept with the client's address. */
void proxy_gate_accept(int fd, struct sockaddr *addr, int socklen);

#endif
