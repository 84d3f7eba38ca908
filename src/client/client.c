/*
 * client.c - exc_client: options, addresses, the retry tick, claim share,
 * pool figures, errors and logging, and the orderly free.
 *
 * The retry tick (retry_tick_ms) drives everything periodic: re-placing
 * refused wants, back-pressure growth, owner seeking, the lost grace and
 * the unknown-service/unauthorized verdicts (job_tick), and the pools'
 * re-probe (pool_kick).  Library log lines (including those of the shared
 * websocket code in src/net) go to the caller's log callback.
 */
#include "autoconfig.h"
#include "client/client_impl.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <event2/event.h>

uint64_t client_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int client_random(void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = getrandom((char *)buf + got, len - got, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		got += (size_t)n;
	}
	return 0;
}

int client_random_hex(char *out, size_t len)
{
	unsigned char raw[64];

	if (len > sizeof raw || client_random(raw, len) != 0)
		return -1;
	for (size_t i = 0; i < len; i++)
		snprintf(out + 2 * i, 3, "%02x", raw[i]);
	return 0;
}

void client_fail(exc_client *c, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->last_error, sizeof c->last_error, fmt, ap);
	va_end(ap);
	errno = err;
}

void client_log(exc_client *c, enum exc_log_level lvl, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if (c->opt.log == NULL || lvl > c->opt.log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	c->opt.log(c->opt.arg, lvl, line);
}

void client_conn_event(exc_client *c, struct exc_addr *a, enum exc_conn_event ev,
		       const char *instance_id, int code, const char *message)
{
	struct exc_conn_info info;

	if (c->opt.on_conn == NULL || c->freeing)
		return;
	info.address = a->url;
	info.instance_id = instance_id;
	info.code = code;
	info.message = message;
	info.connections = pool_ready(a);
	info.instances = pool_instances(a);
	info.covered = a->covered;
	info.tls_verify_failed = ev == EXC_CONN_FAILED && a->tls_refused;
	c->opt.on_conn(c->opt.arg, ev, &info);
}

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
	job_tick(arg);
}

void exc_options_init(struct exc_options *o)
{
	memset(o, 0, sizeof *o);
	o->pool_cap = 8;
	o->retry_tick_ms = 1000;
	o->grow_interval_ms = 2000;
	o->reprobe_interval_ms = 30000;
	o->reconnect_max_ms = 30000;
	o->owner_grace_sec = 30;
	o->handshake_timeout_ms = 10000;
	o->ping_timeout_ms = 30000;
	o->log_level = EXC_LOG_WARN;
}

exc_client *exc_client_new(struct event_base *base, const struct exc_options *o)
{
	exc_client *c;
	struct timeval tv;

	if (base == NULL) {
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof *c);
	if (c == NULL)
		return NULL;
	c->base = base;
	exc_options_init(&c->opt);
	if (o)
		c->opt = *o;
	if (c->opt.pool_cap == 0 || c->opt.retry_tick_ms == 0 || c->opt.grow_interval_ms == 0 ||
	    c->opt.reprobe_interval_ms == 0 || c->opt.handshake_timeout_ms == 0 ||
	    c->opt.ping_timeout_ms < 300 ||
	    (c->opt.client_id && exc_client_id_problem(c->opt.client_id)) ||
	    (c->opt.auth_token && exc_auth_token_problem(c->opt.auth_token))) {
		free(c);
		errno = EINVAL;
		return NULL;
	}
	if (c->opt.reconnect_max_ms < c->opt.grow_interval_ms)
		c->opt.reconnect_max_ms = c->opt.grow_interval_ms;
	if (c->opt.client_id)
		snprintf(c->client_id, sizeof c->client_id, "%s", c->opt.client_id);
	else if (client_random_hex(c->client_id, 16) != 0)
		goto fail;
	c->opt.client_id = NULL;
	if (c->opt.auth_token && (c->auth_token = strdup(c->opt.auth_token)) == NULL)
		goto fail;
	c->opt.auth_token = NULL;
	if ((c->opt.tls_ca_file && (c->tls_ca_file = strdup(c->opt.tls_ca_file)) == NULL) ||
	    (c->opt.tls_ca_dir && (c->tls_ca_dir = strdup(c->opt.tls_ca_dir)) == NULL))
		goto fail;
	c->opt.tls_ca_file = c->opt.tls_ca_dir = NULL;
	c->tick_ev = event_new(base, -1, EV_PERSIST, tick_cb, c);
	if (c->tick_ev == NULL)
		goto fail;
	tv.tv_sec = c->opt.retry_tick_ms / 1000;
	tv.tv_usec = (c->opt.retry_tick_ms % 1000) * 1000;
	event_add(c->tick_ev, &tv);
	return c;
fail:
	free(c->auth_token);
	free(c->tls_ca_file);
	free(c->tls_ca_dir);
	free(c);
	errno = ENOMEM;
	return NULL;
}

int exc_client_add_address(exc_client *c, const char *url)
{
	struct exc_url u;
	struct exc_addr *a, **n;

	if (url_parse(url, &u) != 0) {
		client_fail(c, EINVAL,
			    "%s: not ws[s]://host:port or ws[s]://host:port/job/<service>",
			    url ? url : "(null)");
		return -1;
	}
	if (u.tls && tls_client_ctx(c) != 0)
		return -1;
	n = realloc(c->addrs, (c->naddrs + 1) * sizeof *n);
	if (n == NULL) {
		client_fail(c, ENOMEM, "out of memory");
		return -1;
	}
	c->addrs = n;
	a = pool_new(c, url, &u);
	if (a == NULL) {
		client_fail(c, ENOMEM, "out of memory");
		return -1;
	}
	c->addrs[c->naddrs++] = a;
	return 0;
}

const char *exc_client_id(const exc_client *c)
{
	return c->client_id;
}

const char *exc_client_last_error(const exc_client *c)
{
	return c->last_error;
}

/* 1 if a connection before k (of address i) reaches k's instance through
 * an address that serves service (NULL: any). */
static int counted_before(const exc_client *c, unsigned i, const struct exc_conn *k,
			  const char *service)
{
	for (unsigned i2 = 0; i2 <= i; i2++) {
		if (service && !pool_serves(c->addrs[i2], service))
			continue;
		for (struct exc_conn *o = c->addrs[i2]->conns; o && o != k; o = o->next)
			if (o->state == K_READY && strcmp(o->instance_id, k->instance_id) == 0)
				return 1;
	}
	return 0;
}

/* The claim shares of the distinct reached instances (each once, however
 * many connections reach it); for a service, only through the addresses
 * that serve it. */
static unsigned share_sum(const exc_client *c, const char *service)
{
	unsigned share = 0;

	for (unsigned i = 0; i < c->naddrs; i++) {
		if (service && !pool_serves(c->addrs[i], service))
			continue;
		for (struct exc_conn *k = c->addrs[i]->conns; k; k = k->next)
			if (k->state == K_READY && !counted_before(c, i, k, service)) {
				unsigned more = conn_share(k, service);
				share = share > UINT_MAX - more ? UINT_MAX : share + more;
			}
	}
	return share;
}

unsigned exc_claim_share(const exc_client *c)
{
	return share_sum(c, NULL);
}

unsigned exc_claim_share_service(const exc_client *c, const char *service)
{
	return service ? share_sum(c, service) : 0;
}

int exc_address_stats(const exc_client *c, unsigned n, struct exc_address_stats *st)
{
	const struct exc_addr *a;

	if (n >= c->naddrs) {
		errno = ENOENT;
		return -1;
	}
	a = c->addrs[n];
	st->connections = pool_ready(a);
	st->connecting = pool_connecting(a);
	st->instances = pool_instances(a);
	st->covered = a->covered;
	st->opened = a->opened;
	st->duplicates = a->duplicates;
	return 0;
}

void exc_client_free(exc_client *c)
{
	if (c == NULL)
		return;
	c->freeing = 1;
	job_free_all(c);
	for (unsigned i = 0; i < c->naddrs; i++)
		pool_free(c->addrs[i]);
	free(c->addrs);
	pipes_free_all(c);
	if (c->tick_ev)
		event_free(c->tick_ev);
	tls_client_free(c);
	free(c->auth_token);
	free(c->tls_ca_file);
	free(c->tls_ca_dir);
	free(c);
}
