/* fleet_client.c - see fleet_client.h. */
#include "autoconfig.h"

#include <string.h>

#include "fleet_client.h"

exc_client *fleet_client(const struct fleet *f, struct exc_options *o)
{
	exc_client *c = fx_client(o, NULL, 0, NULL);
	if (c && exc_client_add_address(c, f->url) != 0) {
		exc_client_free(c);
		return NULL;
	}
	return c;
}

struct exc_address_stats fleet_client_stats(const exc_client *c)
{
	struct exc_address_stats st;
	if (exc_address_stats(c, 0, &st) != 0)
		memset(&st, 0, sizeof st);
	return st;
}

int pool_reached(void *goal)
{
	const struct pool_goal *g = goal;
	struct exc_address_stats st = fleet_client_stats(g->c);
	return st.connections >= g->connections && st.instances >= g->instances &&
	       (!g->covered || st.covered);
}

int wg_reached(void *goal)
{
	const struct wg_goal *g = goal;
	for (int i = 0; i < g->f->n; i++)
		if ((g->instance < 0 || g->instance == i) &&
		    fleet_status_int(g->f, i, "waitgroups", "wg", g->field, NULL) != g->value)
			return 0;
	return 1;
}
