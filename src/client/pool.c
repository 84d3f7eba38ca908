/*
 * pool.c - the connections of one operator address.  The address may be
 * one instance or a load balancer in front of several; the pool learns
 * which instances it reached only from HELLO.instance_id, and never
 * connects anywhere but the address it was given.
 *
 * Rules (docs/architecture.md, "The client library"):
 *  - one connection to start;
 *  - growth only under back-pressure: client_job.c sets `pressure` when a want of
 *    a service the address serves waited a whole retry tick without an
 *    offer (or could not be parked at all); then one more connection is
 *    opened, at most one per grow_interval_ms per address, at most
 *    pool_cap live or opening;
 *  - a new connection whose HELLO repeats an instance_id of the pool is
 *    closed and the address marked covered: growth stops;
 *  - every reprobe_interval_ms the covered mark is cleared, so instances
 *    added behind the balancer later are found by the next growth;
 *  - owner seeking: while client_job.c names an instance it needs (`seek`, the
 *    instance that runs a job whose connection dropped), connections are
 *    opened (same rate limit, covered or not) until a HELLO shows it; each
 *    carries ?instance=<id> for a balancer that routes on it
 *    (docs/balancers.md), until two of them missed that instance: then the
 *    hint is dropped and the connections are plain ones;
 *  - a connection that drops is replaced at once (rate limit permitting)
 *    when it was the last one; failed attempts back off from
 *    grow_interval_ms, doubling up to reconnect_max_ms; after 401 or 404,
 *    or a certificate that did not verify (wss), only every reprobe
 *    interval.
 * Only one connection of an address is being opened at a time.
 */
#include "autoconfig.h"
#include "client/client_impl.h"
#include "client/fallback.h"

#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

static void pool_timer(evutil_socket_t fd, short what, void *arg)
{
	pool_kick(arg);
}

static void schedule(struct exc_addr *a, uint64_t delay_ms)
{
	struct timeval tv = { (time_t)(delay_ms / 1000), (suseconds_t)((delay_ms % 1000) * 1000) };

	evtimer_add(a->timer, &tv);
}

struct exc_addr *pool_new(exc_client *c, const char *url, const struct exc_url *u)
{
	struct exc_addr *a = calloc(1, sizeof *a);

	if (a == NULL)
		return NULL;
	a->c = c;
	a->u = *u;
	a->url = strdup(url);
	a->timer = evtimer_new(c->base, pool_timer, a);
	a->backoff_ms = c->opt.grow_interval_ms;
	if (a->url == NULL || a->timer == NULL) {
		pool_free(a);
		return NULL;
	}
	schedule(a, 0);
	return a;
}

void pool_free(struct exc_addr *a)
{
	if (a == NULL)
		return;
	while (a->conns)
		conn_free(a->conns, 1);
	if (a->timer)
		event_free(a->timer);
	free(a->url);
	free(a);
}

unsigned pool_ready(const struct exc_addr *a)
{
	unsigned n = 0;

	for (struct exc_conn *k = a->conns; k; k = k->next)
		n += k->state == K_READY;
	return n;
}

unsigned pool_connecting(const struct exc_addr *a)
{
	unsigned n = 0;

	for (struct exc_conn *k = a->conns; k; k = k->next)
		n += k->state != K_READY && k->state != K_CLOSING;
	return n;
}

unsigned pool_instances(const struct exc_addr *a)
{
	unsigned n = 0;

	for (struct exc_conn *k = a->conns; k; k = k->next) {
		int seen = 0;

		if (k->state != K_READY)
			continue;
		for (struct exc_conn *o = a->conns; o != k; o = o->next)
			if (o->state == K_READY && strcmp(o->instance_id, k->instance_id) == 0)
				seen = 1;
		n += !seen;
	}
	return n;
}

int pool_serves(const struct exc_addr *a, const char *service)
{
	return a->u.service[0] == '\0' || strcmp(a->u.service, service) == 0;
}

static int has_instance(const struct exc_addr *a, const struct exc_conn *except, const char *id)
{
	for (struct exc_conn *k = a->conns; k; k = k->next)
		if (k != except && k->state == K_READY && strcmp(k->instance_id, id) == 0)
			return 1;
	return 0;
}

/* The ?instance= hint for the next connection: the sought instance, unless
 * two hinted connections missed it. */
static const char *seek_hint(struct exc_addr *a)
{
	if (!a->seek[0])
		return NULL;
	if (strcmp(a->hint_for, a->seek) != 0) {
		snprintf(a->hint_for, sizeof a->hint_for, "%s", a->seek);
		a->hint_misses = 0;
	}
	return a->hint_misses < 2 ? a->seek : NULL;
}

/* A connection opened with a hint did not reach that instance (another
 * one answered, or none). */
static void hint_missed(struct exc_addr *a, const struct exc_conn *k)
{
	if (!k->hint[0] || strcmp(a->hint_for, k->hint) != 0)
		return;
	a->hint_misses++;
	client_log(a->c, a->hint_misses == 2 ? EXC_LOG_INFO : EXC_LOG_DEBUG,
		   "%s: ?instance=%s did not reach it (%u)%s", a->url, k->hint, a->hint_misses,
		   a->hint_misses == 2 ? ": hint dropped, seeking without it" : "");
}

void pool_kick(struct exc_addr *a)
{
	exc_client *c = a->c;
	uint64_t now = client_now_ms();
	unsigned total = pool_ready(a) + pool_connecting(a);
	int want;

	if (c->freeing)
		return;
	if (a->covered && now - a->covered_at_ms >= c->opt.reprobe_interval_ms) {
		a->covered = 0; /* re-probe: the next growth may find more */
		client_log(c, EXC_LOG_DEBUG, "%s: covered mark cleared (re-probe)", a->url);
	}
	if (a->seek[0] && has_instance(a, NULL, a->seek))
		a->seek[0] = '\0';
	if (pool_connecting(a) > 0)
		return; /* one attempt at a time; its end kicks again */
	want = total == 0 || (total < c->opt.pool_cap && a->pressure && !a->covered) ||
	       (total < c->opt.pool_cap && a->seek[0]);
	if (!want)
		return;
	if (now < a->retry_at_ms) {
		schedule(a, a->retry_at_ms - now);
		return;
	}
	if (a->opened > 0 && now - a->last_open_ms < c->opt.grow_interval_ms) {
		schedule(a, c->opt.grow_interval_ms - (now - a->last_open_ms));
		return;
	}
	a->pressure = 0;
	a->last_open_ms = now;
	a->opened++;
	const char *hint = seek_hint(a);
	client_log(c, EXC_LOG_DEBUG, "%s: opening connection %u (%s%s%s)", a->url, total + 1,
		   total == 0   ? (a->opened > 1 ? "reconnect" : "start")
		   : a->seek[0] ? "seeking owner"
				: "back-pressure",
		   hint ? ", ?instance=" : "", hint ? hint : "");
	struct exc_conn *k = conn_open(a);
	if (k == NULL) {
		a->retry_at_ms = now + a->backoff_ms;
		schedule(a, a->backoff_ms);
	} else if (hint) {
		snprintf(k->hint, sizeof k->hint, "%s", hint);
	}
}

int pool_on_hello(struct exc_addr *a, struct exc_conn *k, int first_hello)
{
	exc_client *c = a->c;

	a->reached = 1;
	a->legacy = 0; /* the broker is there (again) */
	a->last_status = 0;
	a->tls_refused = 0;
	a->backoff_ms = c->opt.grow_interval_ms;
	a->retry_at_ms = 0;
	if (k->hint[0] && strcmp(k->hint, k->instance_id) != 0)
		hint_missed(a, k);
	if (has_instance(a, k, k->instance_id)) {
		char id[65];

		memcpy(id, k->instance_id, sizeof id);
		a->duplicates++;
		a->covered = 1;
		a->covered_at_ms = client_now_ms();
		conn_free(k, 1);
		client_log(c, EXC_LOG_DEBUG, "%s: instance %s reached twice: covered", a->url, id);
		client_conn_event(c, a, EXC_CONN_DUPLICATE, id, 0,
				  "instance already in the pool: connection closed, growth stops");
		schedule(a, 0);
		return -1;
	}
	if (a->seek[0] && strcmp(a->seek, k->instance_id) == 0)
		a->seek[0] = '\0';
	client_conn_event(c, a, EXC_CONN_UP, k->instance_id, 0, "connected");
	schedule(a, 0);
	return 0;
}

void pool_on_closed(struct exc_addr *a, struct exc_conn *k, int was_ready, int code,
		    const char *why)
{
	exc_client *c = a->c;
	uint64_t now = client_now_ms();

	if (c->freeing)
		return;
	if (was_ready) {
		client_log(c, EXC_LOG_INFO, "%s: %s", a->url, why);
		client_conn_event(c, a, EXC_CONN_DOWN, k->instance_id, code, why);
		a->retry_at_ms = 0; /* replace it at once (rate limit permitting) */
	} else {
		hint_missed(a, k);
		a->last_status = code;
		if (code != 404) {
			client_log(c, code == 401 || a->tls_refused ? EXC_LOG_ERROR : EXC_LOG_WARN,
				   "%s: %s", a->url, why);
			client_conn_event(c, a, EXC_CONN_FAILED, NULL, code, why);
		} else if (!a->legacy) { /* no broker there: fallback.c takes over */
			a->legacy = 1;
			client_conn_event(c, a, EXC_CONN_LEGACY, NULL, code,
					  "no broker (HTTP 404): using the legacy token transport");
			legacy_address_found(c, a);
		}
		if (code == 401 || code == 404 || a->tls_refused) {
			a->retry_at_ms = now + c->opt.reprobe_interval_ms;
		} else {
			a->retry_at_ms = now + a->backoff_ms;
			a->backoff_ms *= 2;
			if (a->backoff_ms > c->opt.reconnect_max_ms)
				a->backoff_ms = c->opt.reconnect_max_ms;
		}
	}
	schedule(a, 0);
}
