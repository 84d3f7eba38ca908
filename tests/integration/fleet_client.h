/*
 * fleet_client.h - libexecclient clients on a fleet's balancer address
 * (tests/lib/fleet.h) and the conditions the multi-instance tests wait
 * for, as predicates for fx_wait_pred (client_fixture.h): the pool's
 * figures, and a waitgroup figure on one or every instance.
 */
#ifndef ES_FLEET_CLIENT_H
#define ES_FLEET_CLIENT_H

#include <execserver/client.h>

#include "client_fixture.h"
#include "fleet.h"

/* A client (fx_client with o) given only f's balancer address. */
exc_client *fleet_client(const struct fleet *f, struct exc_options *o);
/* The figures of the client's one address (zeros when there is none). */
struct exc_address_stats fleet_client_stats(const exc_client *c);

/* At least this many connections and instances, and covered if asked. */
struct pool_goal {
	const exc_client *c;
	unsigned connections, instances;
	int covered;
};
int pool_reached(void *goal);

/* waitgroups.wg.<field> == value on instance `instance` (-1: on every
 * instance), read from /status. */
struct wg_goal {
	const struct fleet *f;
	int instance;
	const char *field;
	long long value;
};
int wg_reached(void *goal);

#endif
