/*
 * relay.h - a TCP relay under test control, for connections that go
 * silent without closing: one forked process listens on a free loopback
 * port and forwards every connection to a backend port, byte for byte,
 * until told to freeze.
 *
 * Owns: the relay process and the test's end of its control pipes.
 * Invariants: a frozen connection is never read, written nor closed again
 * (both ends keep their sockets: no FIN, no RST; what the peers send waits
 * in the relay's kernel buffers), as when a link or a NAT drops a
 * connection's packets; connections accepted after the freeze are
 * forwarded normally.  The relay ends with the test (relay_stop, or the
 * test's death: it watches its control pipe).
 */
#ifndef ES_TEST_RELAY_H
#define ES_TEST_RELAY_H

#include <sys/types.h>

struct relay {
	pid_t pid;
	int port;            /* where clients connect */
	int ctl_out, ctl_in; /* commands to the relay, its answers */
};

/* Starts a relay to 127.0.0.1:backend_port.  0, or -1. */
int relay_start(struct relay *r, int backend_port);
/* Freezes every connection open now (both directions); returns the number
 * frozen, or -1 when the relay does not answer. */
int relay_freeze(struct relay *r);
/* Connections forwarded since the start (frozen ones included), or -1. */
int relay_accepted(struct relay *r);
/* Kills the relay (its connections close) and reaps it. */
void relay_stop(struct relay *r);

#endif
