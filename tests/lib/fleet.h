/*
 * fleet.h - several execserver instances behind one haproxy (balancer.h),
 * the shape of a replicated deployment: clients are given only the
 * balancer's address (fleet.url) and the tests look at each instance
 * through its own /status and its instance_id.
 *
 * Owns: the daemons and the balancer; fleet_stop stops and removes all.
 * Invariant: f->id[i] is the current instance_id of daemon i (refreshed by
 * fleet_restart).
 */
#ifndef ES_FLEET_H
#define ES_FLEET_H

#include "balancer.h"
#include "bed.h"
#include "harness.h"

/* Where a fleet runs in a test bed (bed.h), and how its balancer is set. */
struct fleet_place {
	const struct bed_host *balancer;                    /* haproxy's host
							     * (NULL: loopback) */
	const struct bed_host *host[BALANCER_MAX_BACKENDS]; /* instance i's
							     * (NULL: loopback) */
	const char *server_opts;                            /* "send-proxy" or "send-proxy-v2": each
					 * instance then lists the balancer's
					 * address in trustedProxies (on a bed
					 * host only) */
	const char *backend_lines;                          /* balancer_spec's */
	int http;                                           /* balancer_spec's */
};

struct fleet {
	int n;
	struct es_daemon d[BALANCER_MAX_BACKENDS];
	char id[BALANCER_MAX_BACKENDS][65];
	struct es_balancer lb;
	char url[64]; /* ws://<balancer address>:<balancer port> */
	int placed;
	struct fleet_place place;
};

/* Starts n instances (1 handler each; bodies[i] or, when bodies or
 * bodies[i] is NULL, harness_default_body(slots)) and haproxy in front.
 * 0, or -1 (everything started is stopped again). */
int fleet_start(struct fleet *f, int n, int slots, const char *const *bodies);
/* The same on the hosts of a test bed (place; NULL: fleet_start). */
int fleet_start_placed(struct fleet *f, int n, int slots, const char *const *bodies,
		       const struct fleet_place *place);
/* Stops the balancer and every instance (SIGTERM, then their directories
 * are removed).  Returns 0 when every instance exited with status 0. */
int fleet_stop(struct fleet *f);
/* Stops instance i and starts it again with the same configuration body on
 * a new port (a new instance_id), pointing the balancer at it.  0 or -1. */
int fleet_restart(struct fleet *f, int i, const char *body);
/* The index of the instance with this id, or -1. */
int fleet_index(const struct fleet *f, const char *instance_id);
/* An integer from instance i's /status at a path of keys (NULL-ended), or
 * -1. */
long long fleet_status_int(const struct fleet *f, int i, ...);
/* The sum of fleet_status_int over all instances for a path of keys. */
long long fleet_sum(const struct fleet *f, ...);

#endif
