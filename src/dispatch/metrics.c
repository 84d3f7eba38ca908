/*
 * metrics.c - see metrics.h.  One table says every counter's and gauge's
 * name, type, help and where its value lives (rows of one family follow
 * each other, one label value each), so the page and the list cannot
 * drift; the histograms, the queue's figures and the execservers per
 * address follow it.
 */
#include "autoconfig.h"
#include "dispatch/metrics.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/prom_text.h"
#include "dispatch/chores.h"
#include "dispatch/console.h"
#include "dispatch/dispatch_config.h"
#include "dispatch/queries.h"

#define METRICS_HEADERS_MAX 8192 /* request line and headers */
#define METRICS_TIMEOUT_SEC 10

/* The states of the rows not finished, as DQ_QUEUE_STATS names them. */
static const char *const queue_states[] = { "queued", "claimed", "running" };
#define NSTATES 3

/* One service of DQ_QUEUE_STATS's answer. */
struct queue_row {
	char service[65];
	uint64_t count[NSTATES]; /* rows by queue_states */
	int64_t oldest_ms;       /* the queued one due longest: waited so long */
	int rows;                /* it has rows not finished */
	int paused;              /* in paused_service (migration 009) */
};

struct metrics {
	struct evhttp *http;
	const struct dispatch_config *cfg;
	const struct dispatch_stats *st;
	/* the dispatcher's client, NULL once a stop left its runs or the
	 * instance was taken over (the client is freed then) */
	exc_client *const *client;
	struct chores *chores;
	uint64_t start_ms;
	char *q_queue;           /* DQ_QUEUE_STATS in the schema */
	struct event *queue_ev;  /* the next DQ_QUEUE_STATS */
	uint64_t asked_ms;       /* when the one on the lane was asked (monotonic) */
	struct queue_row *queue; /* its last answer; NULL: none, or it failed */
	size_t nqueue;
	int said_failed;          /* the statement failed, logged once until it answers */
	struct dconsole *console; /* on the same address (console.h), or NULL */
};

enum kind {
	U64,
	UINT,
	INT
};

struct metric_def {
	const char *name, *type, *help;
	const char *label, *value; /* one label, or NULL */
	size_t offset;
	enum kind kind;
};

#define M(n, t, h, f, k)                                                   \
	{                                                                  \
		n, t, h, NULL, NULL, offsetof(struct dispatch_stats, f), k \
	}
/* one row of a family with a label (t and h: those of its first row) */
#define L(n, t, h, l, v, f)                                            \
	{                                                              \
		n, t, h, l, v, offsetof(struct dispatch_stats, f), U64 \
	}
static const struct metric_def defs[] = {
	M("execdispatch_claim_statements_total", "counter", "Claim statements sent.", claims, U64),
	M("execdispatch_claimed_total", "counter", "Rows claimed.", claimed, U64),
	M("execdispatch_attempts_total", "counter",
	  "Sum of the attempt numbers of the rows claimed (minus claimed_total: the retries).",
	  attempts, U64),
	L("execdispatch_outcomes_total", "counter",
	  "Claims ended, by outcome: written done, failed, requeued (retry) or no_slot "
	  "(attempt given back), or dropped (the claim was lost).",
	  "outcome", "done", done),
	L("execdispatch_outcomes_total", NULL, NULL, "outcome", "failed", failed),
	L("execdispatch_outcomes_total", NULL, NULL, "outcome", "requeued", requeued),
	L("execdispatch_outcomes_total", NULL, NULL, "outcome", "no_slot", no_slot),
	L("execdispatch_outcomes_total", NULL, NULL, "outcome", "dropped", dropped),
	L("execdispatch_rescued_total", "counter",
	  "Rows of silent dispatchers this one's rescues requeued or failed (out of attempts).",
	  "outcome", "requeued", rescued_requeued),
	L("execdispatch_rescued_total", NULL, NULL, "outcome", "failed", rescued_failed),
	M("execdispatch_rescue_put_off_total", "counter",
	  "Silent dispatchers this one's rescues put off because another transaction "
	  "holds a lock on one of their rows (each rescue counts each one again).",
	  rescue_put_off, U64),
	M("execdispatch_rescue_put_off_dispatchers", "gauge",
	  "Silent dispatchers this one's last rescue put off (their rows wait for a lock).",
	  rescue_put_off_last, UINT),
	M("execdispatch_statements_total", "counter", "Statements sent to the database.",
	  statements, U64),
	M("execdispatch_illegal_transitions_total", "counter",
	  "Transitions of held rows, of the dispatcher's stages or of its database connections "
	  "not in their table (a bug).",
	  illegal_transitions, U64),
	M("execdispatch_admission", "gauge",
	  "Claim share now (jobs this dispatcher may hold at the execservers).", share, UINT),
	M("execdispatch_held", "gauge", "Rows at the execservers now.", at_exec, UINT),
	M("execdispatch_services", "gauge",
	  "Services admission knows now (those the execservers run, and those of rows held).",
	  services, UINT),
	M("execdispatch_database_up", "gauge", "1 while connected to the database.", db_up, INT),
};

static void counters(struct evbuffer *out, const struct dispatch_stats *st)
{
	const char *base = (const char *)st;

	for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
		const struct metric_def *d = &defs[i];
		const void *p = base + d->offset;
		if (d->type)
			prom_family(out, d->name, d->type, d->help);
		if (d->label)
			evbuffer_add_printf(out, "%s{%s=\"%s\"} ", d->name, d->label, d->value);
		else
			evbuffer_add_printf(out, "%s ", d->name);
		if (d->kind == U64)
			evbuffer_add_printf(out, "%" PRIu64 "\n", *(const uint64_t *)p);
		else if (d->kind == UINT)
			evbuffer_add_printf(out, "%u\n", *(const unsigned *)p);
		else
			evbuffer_add_printf(out, "%d\n", *(const int *)p);
	}
}

static void histograms(struct evbuffer *out, const struct dispatch_stats *st)
{
	static const struct {
		const char *name, *help;
		size_t offset;
	} h[] = {
		{ "execdispatch_queue_wait_seconds",
		  "Wait of the rows claimed, from due (start_after) to the claim, on the "
		  "database's clock.",
		  offsetof(struct dispatch_stats, queue_wait) },
		{ "execdispatch_job_duration_seconds",
		  "Run time of the runs that ended (the receipt's duration_ms).",
		  offsetof(struct dispatch_stats, run) },
		{ "execdispatch_cancel_latency_seconds",
		  "Cancels of held rows: from the cancel's commit to the poll that noticed it, "
		  "on the database's clock.",
		  offsetof(struct dispatch_stats, cancel_latency) },
	};

	for (size_t i = 0; i < sizeof h / sizeof h[0]; i++) {
		prom_family(out, h[i].name, "histogram", h[i].help);
		prom_histogram(out, h[i].name, NULL, NULL,
			       (const struct hist *)((const char *)st + h[i].offset));
	}
}

/* The queue's figures (none before the first answer, or after a failed
 * one; a service with rows not finished has all three states), the paused
 * services (the same answer's "paused" rows) and the execservers connected
 * per configured address. */
static void outside(struct evbuffer *out, const struct metrics *m)
{
	prom_family(out, "execdispatch_queue_jobs", "gauge",
		    "Rows not finished, by service and state (queued, claimed, running); "
		    "the whole table's, asked every 10 s.");
	for (size_t i = 0; i < m->nqueue; i++)
		for (int k = 0; k < NSTATES && m->queue[i].rows; k++) {
			evbuffer_add_printf(out, "execdispatch_queue_jobs{service=");
			prom_label_value(out, m->queue[i].service);
			evbuffer_add_printf(out, ",state=\"%s\"} %" PRIu64 "\n", queue_states[k],
					    m->queue[i].count[k]);
		}
	prom_family(out, "execdispatch_queue_oldest_age_seconds", "gauge",
		    "How long the queued row of the service that is due longest has waited "
		    "(0: none due).");
	for (size_t i = 0; i < m->nqueue; i++) {
		if (!m->queue[i].rows)
			continue;
		evbuffer_add_printf(out, "execdispatch_queue_oldest_age_seconds{service=");
		prom_label_value(out, m->queue[i].service);
		evbuffer_add_printf(out, "} %" PRId64 ".%03d\n", m->queue[i].oldest_ms / 1000,
				    (int)(m->queue[i].oldest_ms % 1000));
	}
	prom_family(out, "execdispatch_service_paused", "gauge",
		    "1 per service paused (pause()): no dispatcher claims its rows.");
	for (size_t i = 0; i < m->nqueue; i++) {
		if (!m->queue[i].paused)
			continue;
		evbuffer_add_printf(out, "execdispatch_service_paused{service=");
		prom_label_value(out, m->queue[i].service);
		evbuffer_add_printf(out, "} 1\n");
	}
	prom_family(out, "execdispatch_execservers_connected", "gauge",
		    "Execservers (distinct instances) connected through each configured address.");
	for (size_t i = 0; *m->client && i < m->cfg->execservers.count; i++) {
		struct exc_address_stats as;
		if (exc_address_stats(*m->client, (unsigned)i, &as) != 0)
			continue;
		evbuffer_add_printf(out, "execdispatch_execservers_connected{address=");
		prom_label_value(out, m->cfg->execservers.items[i]);
		evbuffer_add_printf(out, "} %u\n", as.instances);
	}
}

static void serve(struct evhttp_request *req, void *arg)
{
	struct metrics *m = arg;
	struct evbuffer *out = evbuffer_new();

	if (!out) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	prom_identity(out, "execdispatch", m->cfg->instance_id, m->start_ms);
	counters(out, m->st);
	histograms(out, m->st);
	outside(out, m);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "text/plain; version=0.0.4");
	evhttp_send_reply(req, 200, "OK", out);
	evbuffer_free(out);
}

static void queue_forget(struct metrics *m)
{
	free(m->queue);
	m->queue = NULL;
	m->nqueue = 0;
}

static void queue_answer(void *arg, PGresult *res, int away, const void *note)
{
	struct metrics *m = arg;
	/* the next one after METRICS_QUEUE_MS, or 10 times as long as this
	 * one took (a big queue: its count takes at most a tenth of the lane) */
	uint64_t took = clock_mono_ms() - m->asked_ms, next = took * 10;
	if (next < METRICS_QUEUE_MS)
		next = METRICS_QUEUE_MS;
	struct timeval tv = { (time_t)(next / 1000), (suseconds_t)(next % 1000 * 1000) };
	int n = res ? PQntuples(res) : 0;

	(void)note;
	if (!res && !away && !m->said_failed++)
		log_warn("metrics: the queue's figures: %s", chores_db(m->chores)->last_error);
	if (res)
		m->said_failed = 0;
	queue_forget(m);
	/* rows ordered by service: one entry per service */
	if (res && n > 0 && (m->queue = calloc((size_t)n, sizeof *m->queue)) != NULL) {
		for (int r = 0; r < n; r++) {
			const char *svc = PQgetvalue(res, r, 0), *state = PQgetvalue(res, r, 1);
			struct queue_row *q = &m->queue[m->nqueue ? m->nqueue - 1 : 0];
			if (!m->nqueue || strcmp(q->service, svc) != 0) {
				q = &m->queue[m->nqueue++];
				snprintf(q->service, sizeof q->service, "%s", svc);
			}
			if (strcmp(state, "paused") == 0)
				q->paused = 1;
			else
				q->rows = 1;
			for (int k = 0; k < NSTATES; k++)
				if (strcmp(state, queue_states[k]) == 0)
					q->count[k] = strtoull(PQgetvalue(res, r, 2), NULL, 10);
			if (strcmp(state, "queued") == 0)
				q->oldest_ms = strtoll(PQgetvalue(res, r, 3), NULL, 10);
		}
	}
	evtimer_add(m->queue_ev, &tv);
}

static void queue_ask(evutil_socket_t fd, short what, void *arg)
{
	struct metrics *m = arg;
	struct timeval tv = { METRICS_QUEUE_MS / 1000, (METRICS_QUEUE_MS % 1000) * 1000 };

	(void)fd;
	(void)what;
	m->asked_ms = clock_mono_ms();
	if (chores_add(m->chores, m->q_queue, 0, NULL, NULL, 0, queue_answer, m) != 0)
		evtimer_add(m->queue_ev, &tv); /* out of memory: the next time */
}

/* What the page shows besides st: 0, or -1 (out of memory). */
static int sources(struct metrics *m, struct event_base *base, const struct dispatch_config *cfg,
		   exc_client *const *client, struct chores *chores)
{
	m->cfg = cfg;
	m->client = client;
	m->chores = chores;
	m->start_ms = clock_wall_ms();
	m->q_queue = dq_expand(DQ_QUEUE_STATS, cfg->schema);
	m->queue_ev = evtimer_new(base, queue_ask, m);
	return m->q_queue && m->queue_ev ? 0 : -1;
}

struct metrics *metrics_start(struct event_base *base, const struct dispatch_config *cfg,
			      const struct dispatch_stats *st, exc_client *const *client,
			      struct chores *chores, char *err, size_t errlen)
{
	struct metrics *m = calloc(1, sizeof *m);
	const char *addr = cfg->metrics;
	char host[256];
	const char *colon = strrchr(addr, ':');
	int port = colon ? atoi(colon + 1) : 0;

	if (!m || !colon || port <= 0 || port > 65535 || (size_t)(colon - addr) >= sizeof host) {
		snprintf(err, errlen, "metrics: host:port is required (got \"%s\")", addr);
		free(m);
		return NULL;
	}
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = '\0';
	m->st = st;
	if (sources(m, base, cfg, client, chores) != 0) {
		snprintf(err, errlen, "metrics: out of memory");
		metrics_stop(m);
		return NULL;
	}
	m->http = evhttp_new(base);
	if (m->http) { /* a request is a short GET: bounded in size and time */
		evhttp_set_max_headers_size(m->http, METRICS_HEADERS_MAX);
		evhttp_set_max_body_size(m->http, 0);
		evhttp_set_timeout(m->http, METRICS_TIMEOUT_SEC);
	}
	if (!m->http || evhttp_bind_socket(m->http, host, (unsigned short)port) != 0) {
		snprintf(err, errlen, "metrics: cannot listen on %s", addr);
		metrics_stop(m);
		return NULL;
	}
	evhttp_set_cb(m->http, "/metrics", serve, m);
	m->console = dconsole_start(base, m->http, cfg, client, err, errlen);
	if (!m->console && cfg->console_enabled) {
		metrics_stop(m);
		return NULL;
	}
	event_active(m->queue_ev, EV_TIMEOUT, 0);
	return m;
}

void metrics_stop(struct metrics *m)
{
	if (!m)
		return;
	if (m->http)
		evhttp_free(m->http);
	dconsole_stop(m->console);
	if (m->queue_ev)
		event_free(m->queue_ev);
	queue_forget(m);
	free(m->q_queue);
	free(m);
}
