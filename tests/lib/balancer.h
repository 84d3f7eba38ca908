/*
 * balancer.h - a real load balancer for multi-instance tests: Debian's
 * haproxy on a free loopback port (or on a bed host, bed.h) in front of
 * execserver instances started with harness.c, plus its runtime API to take a backend out and put it
 * back, move it to a new port, or cut its connections.
 *
 * Owns: one haproxy process, its private directory (generated
 * configuration, runtime-API unix socket, log).
 * Invariants: TCP mode (websockets and HTTP pass through untouched) unless
 * a spec asks for HTTP mode;
 * `balance leastconn`, so a new connection goes to the backend with the
 * fewest open connections (ties in turn), which makes "open one more
 * connection to the same address" reach an instance this client has not
 * reached yet, the behaviour the pool's growth relies on and what haproxy
 * recommends for long-lived sessions; no health checks (a check is a
 * connection the daemons would see and a timing the tests could not
 * control): a backend's state changes only through balancer_set_state, and
 * a backend whose port refuses is skipped by `option redispatch`.  Backends
 * are named s1..sN in the order given (index 0 is s1) in backend "be".
 */
#ifndef ES_BALANCER_H
#define ES_BALANCER_H

#include <sys/types.h>

#define BALANCER_MAX_BACKENDS 8

struct es_balancer {
	pid_t pid;
	int port;           /* the one address clients dial */
	char bind_addr[16]; /* ... on this address */
	char netns[40];     /* its network namespace ("": the test's) */
	int nbackends;
	int backend_port[BALANCER_MAX_BACKENDS];
	char backend_addr[BALANCER_MAX_BACKENDS][16];
	char server_opts[64];     /* after each server line's address */
	char backend_lines[1024]; /* extra lines in backend be */
	int http;                 /* mode http instead of tcp */
	char dir[256];            /* private directory, removed by balancer_cleanup */
	char config[300];
	char socket[300]; /* runtime API (stats socket, level admin) */
	char log[300];
};

/* Writes the configuration for backends on 127.0.0.1:ports[0..n-1], starts
 * haproxy in the foreground and waits until its port and runtime API
 * answer.  Returns 0, or -1 (the log is printed). */
int balancer_start(struct es_balancer *b, const int *ports, int n);

/* The same, placed and configured (a field left 0 or NULL is as above). */
struct balancer_spec {
	const char *netns;     /* a bed host's namespace (bed.h) */
	const char *bind_addr; /* the address it listens on */
	int n;                 /* backends s1..sn */
	const char *addr[BALANCER_MAX_BACKENDS];
	int port[BALANCER_MAX_BACKENDS];
	const char *server_opts;   /* e.g. "send-proxy-v2" */
	const char *backend_lines; /* e.g. "    use-server s2 if { urlp(instance) -m str x }\n" */
	int http;                  /* mode http (websockets pass through;
					 * needed for urlp() routing) */
};
int balancer_start_at(struct es_balancer *b, const struct balancer_spec *spec);
/* SIGTERM (haproxy's hard stop: open connections are cut), then waits up to
 * timeout_ms.  Returns the status as from waitpid (a hard stop ends haproxy
 * by that SIGTERM itself), or -1 on timeout (then it is killed). */
int balancer_stop(struct es_balancer *b, int timeout_ms);
/* Kills whatever is left and removes the directory. */
void balancer_cleanup(struct es_balancer *b);

/* One runtime-API command ("show servers state"); its answer goes to out
 * (NUL-terminated, truncated to cap - 1).  Returns the answer's length or
 * -1 when the socket cannot be reached. */
int balancer_command(const struct es_balancer *b, const char *command, char *out, size_t cap);
/* Backend index (0-based) to "ready", "drain" or "maint".  A backend in
 * maint gets no new connection; its open ones stay.  0 or -1. */
int balancer_set_state(const struct es_balancer *b, int index, const char *state);
/* Points backend index at 127.0.0.1:port (an instance restarted on a new
 * port).  0 or -1. */
int balancer_set_port(struct es_balancer *b, int index, int port);
/* Cuts every open connection that goes through backend index (as a network
 * failure would: the client sees its connection end without a close
 * frame).  0 or -1. */
int balancer_cut(const struct es_balancer *b, int index);
/* Cuts the connections through backend index except those whose client
 * port (as the balancer sees it) is in keep_ports.  Returns how many it
 * cut, or -1. */
int balancer_cut_except(const struct es_balancer *b, int index, const int *keep_ports, int nkeep);
/* Open connections through backend index (haproxy's scur), or -1. */
int balancer_sessions(const struct es_balancer *b, int index);
/* Bytes the balancer carried so far, both ways (the frontend's bin + bout:
 * from clients and to them), or -1. */
long long balancer_bytes(const struct es_balancer *b);
/* Requests denied in backend be (http-request deny in backend_lines,
 * HTTP mode), or -1. */
long long balancer_denied(const struct es_balancer *b);

#endif
