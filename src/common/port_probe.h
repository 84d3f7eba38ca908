/*
 * port_probe.h - is an address:port already held by another socket?
 *
 * A daemon calls it before it creates its listeners, so that a second
 * instance on a busy address fails at once with "address already in use"
 * (as nginx or gearmand do) instead of joining the port: execserver's
 * listeners set SO_REUSEPORT (every handler has its own socket on the same
 * address), and a second execserver started by the same user would share
 * the port with the first without a word.  There is a moment between the
 * probe and the real bind; a process that binds in it is caught by the
 * real bind unless it too sets SO_REUSEPORT as the same user.
 */
#ifndef ES_PORT_PROBE_H
#define ES_PORT_PROBE_H

#include <sys/socket.h>

/* 0 when nothing holds addr; else the errno of a trial bind (EADDRINUSE:
 * another socket listens there). */
int port_probe(const struct sockaddr *addr, socklen_t len);

#endif
