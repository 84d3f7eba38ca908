/*
 * bench_fleet.h - many broker connections driven from one thread with
 * epoll: each message that arrives is handed to the scenario's callback
 * with its arrival time, its type and the fields a scenario needs (job_id,
 * token, a receipt's stdout), read by a cheap scan instead of a JSON parse
 * so that the client costs little next to the server it measures.
 *
 * Owns: the connections (tests/lib/proto.h clients) and the epoll set.
 * Invariants: a connection that ends is marked dead and never read again;
 * every wait is bounded.  Not thread-safe (one fleet per thread).
 */
#ifndef ES_BENCH_FLEET_H
#define ES_BENCH_FLEET_H

#include <stddef.h>

struct tclient;
struct fleet;

struct fleet_conn {
	struct tclient *tc;
	int idx;
	int dead;
	int seq;           /* the scenario's job counter */
	int outstanding;   /* the scenario's: wants parked, offered or running */
	long long t_mark;  /* the scenario's timestamp (ns) */
	long long t_offer; /* the scenario's: when the last OFFER came (ns) */
	long long count;   /* the scenario's counter */
	int priority;
	const char *service;
	int handler;         /* the scenario's: which handler holds it (-1) */
	unsigned char *cork; /* fleet_cork: frames held for one write */
	size_t cork_len, cork_cap;
	int corked;
};

/* What arrived: type "HELLO", "OFFER", "DONE", "ERROR", ... or "PING". */
struct fleet_msg {
	const char *type;
	const char *job_id;
	const char *token;
	const char *raw; /* the whole text */
	size_t len;      /* payload bytes on the wire */
	long long t_ns;  /* when it was read */
};

typedef void (*fleet_fn)(struct fleet *f, struct fleet_conn *c, const struct fleet_msg *m);

struct fleet {
	int n;
	struct fleet_conn *c;
	int ep;
	fleet_fn on_msg;
	void *user;
	int stop;       /* set by a callback: fleet_run returns */
	long long msgs; /* messages seen */
};

/* n connections to 127.0.0.1:port; client ids "<prefix><i % groups>"
 * (groups 0: each its own id).  report_pings: pings are handed to on_msg
 * too (still answered).  Exits the program when a connection fails. */
struct fleet *fleet_open(int port, int n, const char *prefix, int groups, int report_pings);
/* The same from the IPv4 source address source (NULL: the kernel's
 * choice); each source address has its own ephemeral ports. */
struct fleet *fleet_open_from(int port, int n, const char *prefix, int groups, int report_pings,
			      const char *source);
void fleet_close(struct fleet *f);
/* Handles traffic until f->stop or until the deadline (ns, monotonic);
 * tick (may be NULL) is called at least every tick_ms. */
void fleet_run(struct fleet *f, long long deadline_ns, int tick_ms, void (*tick)(struct fleet *f));

/* Sends a message (printf-style) on c; marks c dead on failure. */
int fleet_send(struct fleet_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Waits until deadline_ns (monotonic) for a message of type on c, a
 * tests/lib client outside the fleet, letting f run between looks so that
 * its flood stays served; the message (the caller puts it) or NULL.  c is
 * read at once when something arrives, so its timestamps stay exact. */
struct json_object;
struct json_object *fleet_expect_on(struct fleet *f, struct tclient *c, const char *type,
				    long long deadline_ns);

/* Between fleet_cork and fleet_uncork, what fleet_send sends on c goes
 * out in one write (one TCP segment), as a client that pipelines does. */
void fleet_cork(struct fleet_conn *c);
int fleet_uncork(struct fleet_conn *c);
/* WANT of job "<c->idx>-<c->seq++>" on c->service at c->priority. */
int fleet_want(struct fleet_conn *c);

/* The string value of "key" in a flat JSON text, copied into out ("" when
 * absent). */
const char *fleet_field(const char *raw, const char *key, char *out, size_t cap);

#endif
