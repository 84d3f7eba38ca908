/* status_page.c - see status_page.h.  One snapshot under the lock, formatted after. */
#include "autoconfig.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "book/book_class.h"
#include "config/config.h"
#include "handler/handler.h"
#include "handler/status_page.h"

struct snapshot {
	struct book_status st;
	struct book_wg_status wg[BOOK_MAX_WAITGROUPS];
	struct book_service_status svc[BOOK_MAX_SERVICES];
	int consistent;
	char why[256];
	int has_lock; /* a BOOK_LOCK_STATS build: lock figures */
	struct book_lock_stats lock;
};

/* check: also run the book's consistency check, which is O(table sizes)
 * under the lock, so only on request (GET /status?check=1). */
static struct snapshot *take_snapshot(int check)
{
	const struct es_config *cfg = handler.inst->cfg;
	struct snapshot *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	struct book *b = handler_book_lock();
	book_status(b, &s->st);
	for (size_t i = 0; i < cfg->nwaitgroups; i++)
		book_wg_status(b, (uint32_t)i, &s->wg[i]);
	for (size_t i = 0; i < cfg->nservices; i++)
		book_service_status(b, (uint32_t)i, &s->svc[i]);
	if (check)
		s->consistent = book_check(b, s->why, sizeof s->why) == 0;
	s->has_lock = book_lock_stats(b, &s->lock) == 0;
	handler_book_unlock();
	return s;
}

static struct json_object *jint(uint64_t v)
{
	return json_object_new_int64((int64_t)v);
}

/* The book lock's figures (a bench build only): totals, and the hold-time
 * histogram as [upper edge in ns, count] pairs of its non-empty buckets. */
static struct json_object *lock_json(const struct book_lock_stats *st)
{
	struct json_object *l = json_object_new_object(), *h = json_object_new_array();
	json_object_object_add(l, "ops", jint(st->ops));
	json_object_object_add(l, "waits", jint(st->waits));
	json_object_object_add(l, "wait_ns", jint(st->wait_ns));
	json_object_object_add(l, "hold_ns", jint(st->hold_ns));
	json_object_object_add(l, "hashes", jint(st->hashes));
	for (unsigned i = 0; i < BOOK_LOCK_BUCKETS; i++) {
		if (!st->hold_hist[i])
			continue;
		struct json_object *pair = json_object_new_array();
		json_object_array_add(pair, jint(book_lock_bucket_ns(i)));
		json_object_array_add(pair, jint(st->hold_hist[i]));
		json_object_array_add(h, pair);
	}
	json_object_object_add(l, "hold_hist", h);
	return l;
}

/* The auto-balance parameters in effect, or null with fixed waitgroups. */
static struct json_object *auto_balance_json(const struct es_config *cfg)
{
	if (!cfg->auto_balance)
		return NULL;
	struct json_object *a = json_object_new_object();
	json_object_object_add(a, "pool", json_object_new_string(CONFIG_AUTO_POOL));
	json_object_object_add(a, "cpus", jint((uint64_t)cfg->waitgroups[0].processes));
	json_object_object_add(a, "fast_reserve", jint((uint64_t)cfg->fast_reserve));
	json_object_object_add(a, "heavy_threshold_ms", jint((uint64_t)cfg->heavy_threshold_ms));
	json_object_object_add(a, "unknown_cap", jint((uint64_t)cfg->unknown_cap));
	json_object_object_add(a, "min_samples", jint((uint64_t)cfg->min_samples));
	return a;
}

void status_json(struct evbuffer *out, int check)
{
	const struct es_config *cfg = handler.inst->cfg;
	struct snapshot *s = take_snapshot(check);
	if (!s)
		return;
	struct json_object *o = json_object_new_object(), *hs = json_object_new_array();
	struct json_object *wgs = json_object_new_object(), *svcs = json_object_new_object();

	json_object_object_add(o, "instance_id",
			       json_object_new_string(handler.inst->instance_name));
	json_object_object_add(o, "version", json_object_new_string(PACKAGE_VERSION));
	json_object_object_add(o, "listen", json_object_new_string(handler.inst->listen_addr));
	json_object_object_add(o, "master_pid", jint((uint64_t)handler.inst->master_pid));
	json_object_object_add(o, "draining", json_object_new_boolean(s->st.draining != 0));
	json_object_object_add(o, "clients", jint(s->st.clients));
	json_object_object_add(o, "connections", jint(s->st.connections));
	json_object_object_add(o, "wants", jint(s->st.wants));
	json_object_object_add(o, "grants", jint(s->st.grants));
	json_object_object_add(o, "book_repairs", jint(s->st.repairs));
	if (check) {
		json_object_object_add(o, "book_consistent",
				       json_object_new_boolean(s->consistent));
		if (!s->consistent)
			json_object_object_add(o, "book_inconsistency",
					       json_object_new_string(s->why));
	}
	for (int i = 0; i < handler.inst->nhandlers; i++) {
		struct json_object *h = json_object_new_object();
		json_object_object_add(h, "slot", json_object_new_int(i));
		json_object_object_add(h, "pid", json_object_new_int(s->st.handler_pids[i]));
		json_object_object_add(h, "connections", jint(s->st.handler_conns[i]));
		json_object_array_add(hs, h);
	}
	json_object_object_add(o, "handlers", hs);
	for (size_t i = 0; i < cfg->nwaitgroups; i++) {
		struct json_object *w = json_object_new_object();
		json_object_object_add(w, "processes", jint(s->wg[i].processes));
		json_object_object_add(w, "running", jint(s->wg[i].running));
		json_object_object_add(w, "offered", jint(s->wg[i].offered));
		json_object_object_add(w, "waiting", jint(s->wg[i].waiting));
		json_object_object_add(w, "tokens", jint(s->wg[i].tokens));
		json_object_object_add(wgs, cfg->waitgroups[i].name, w);
	}
	json_object_object_add(o, "waitgroups", wgs);
	json_object_object_add(o, "auto_balance", auto_balance_json(cfg));
	for (size_t i = 0; i < cfg->nservices; i++) {
		struct json_object *v = json_object_new_object();
		json_object_object_add(v, "waitgroup",
				       json_object_new_string(cfg->services[i].waitgroup));
		json_object_object_add(v, "enabled",
				       json_object_new_boolean(cfg->services[i].enabled));
		json_object_object_add(
			v, "disabled_why",
			cfg->services[i].enabled
				? NULL
				: json_object_new_string(cfg->services[i].disabled_why));
		json_object_object_add(v, "waiting", jint(s->svc[i].waiting));
		json_object_object_add(v, "running", jint(s->svc[i].running));
		json_object_object_add(v, "started", jint(s->svc[i].started));
		json_object_object_add(v, "finished", jint(s->svc[i].finished));
		json_object_object_add(v, "failed", jint(s->svc[i].failed));
		json_object_object_add(v, "mean_runtime_ms",
				       s->svc[i].mean_runtime_ms ? jint(s->svc[i].mean_runtime_ms)
								 : NULL);
		json_object_object_add(v, "samples", jint(s->svc[i].samples));
		json_object_object_add(v, "class",
				       cfg->auto_balance
					       ? json_object_new_string(class_name(s->svc[i].klass))
					       : NULL);
		json_object_object_add(svcs, cfg->services[i].name, v);
	}
	json_object_object_add(o, "services", svcs);
	if (s->has_lock)
		json_object_object_add(o, "lock", lock_json(&s->lock));
	evbuffer_add_printf(out, "%s\n",
			    json_object_to_json_string_ext(
				    o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
	free(s);
}

/* Names in labels are config names ([A-Za-z0-9_.-]), which need no escaping. */
static void metric(struct evbuffer *out, const char *name, const char *type, const char *help)
{
	evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void status_metrics(struct evbuffer *out)
{
	const struct es_config *cfg = handler.inst->cfg;
	struct snapshot *s = take_snapshot(0);
	if (!s)
		return;
	static const struct {
		const char *name, *help;
		size_t off;
	} wg_fields[] = {
		{ "execserver_waitgroup_processes", "Slots of the waitgroup.",
		  offsetof(struct book_wg_status, processes) },
		{ "execserver_waitgroup_running", "Slots held by running jobs.",
		  offsetof(struct book_wg_status, running) },
		{ "execserver_waitgroup_offered", "Slots reserved by an unanswered OFFER.",
		  offsetof(struct book_wg_status, offered) },
		{ "execserver_waitgroup_waiting", "Parked wants.",
		  offsetof(struct book_wg_status, waiting) },
		{ "execserver_waitgroup_tokens", "Slots held by legacy tokens.",
		  offsetof(struct book_wg_status, tokens) },
	};

	metric(out, "execserver_clients", "gauge", "Distinct clients with a live connection.");
	evbuffer_add_printf(out, "execserver_clients %" PRIu32 "\n", s->st.clients);
	metric(out, "execserver_connections", "gauge", "Broker websocket connections.");
	evbuffer_add_printf(out, "execserver_connections %" PRIu32 "\n", s->st.connections);
	metric(out, "execserver_wants", "gauge",
	       "Jobs known to the want-book (parked, offered, running).");
	evbuffer_add_printf(out, "execserver_wants %" PRIu32 "\n", s->st.wants);
	metric(out, "execserver_grants_total", "counter", "Slots offered since start.");
	evbuffer_add_printf(out, "execserver_grants_total %" PRIu64 "\n", s->st.grants);
	metric(out, "execserver_book_repairs_total", "counter",
	       "Want-book repairs after a process died holding its lock.");
	evbuffer_add_printf(out, "execserver_book_repairs_total %" PRIu64 "\n", s->st.repairs);
	metric(out, "execserver_draining", "gauge", "1 while the instance drains.");
	evbuffer_add_printf(out, "execserver_draining %d\n", s->st.draining ? 1 : 0);
	for (size_t f = 0; f < sizeof wg_fields / sizeof wg_fields[0]; f++) {
		metric(out, wg_fields[f].name, "gauge", wg_fields[f].help);
		for (size_t i = 0; i < cfg->nwaitgroups; i++) {
			uint32_t v;
			memcpy(&v, (const char *)&s->wg[i] + wg_fields[f].off, sizeof v);
			evbuffer_add_printf(out, "%s{waitgroup=\"%s\"} %" PRIu32 "\n",
					    wg_fields[f].name, cfg->waitgroups[i].name, v);
		}
	}
	metric(out, "execserver_service_jobs_total", "counter", "Jobs by service and outcome.");
	for (size_t i = 0; i < cfg->nservices; i++) {
		const char *n = cfg->services[i].name;
		evbuffer_add_printf(
			out,
			"execserver_service_jobs_total{service=\"%s\",outcome=\"started\"} %" PRIu64
			"\n"
			"execserver_service_jobs_total{service=\"%s\",outcome=\"finished\"} "
			"%" PRIu64 "\n"
			"execserver_service_jobs_total{service=\"%s\",outcome=\"failed\"} %" PRIu64
			"\n",
			n, s->svc[i].started, n, s->svc[i].finished, n, s->svc[i].failed);
	}
	metric(out, "execserver_service_mean_runtime_seconds", "gauge",
	       "Moving average of the service's job runtime.");
	for (size_t i = 0; i < cfg->nservices; i++)
		evbuffer_add_printf(
			out, "execserver_service_mean_runtime_seconds{service=\"%s\"} %.3f\n",
			cfg->services[i].name, (double)s->svc[i].mean_runtime_ms / 1000.0);
	metric(out, "execserver_service_runtime_samples", "gauge",
	       "Finished jobs in the service's runtime average.");
	for (size_t i = 0; i < cfg->nservices; i++)
		evbuffer_add_printf(
			out, "execserver_service_runtime_samples{service=\"%s\"} %" PRIu64 "\n",
			cfg->services[i].name, s->svc[i].samples);
	if (cfg->auto_balance) {
		metric(out, "execserver_service_class", "gauge",
		       "Auto-balance class of the service: 1 for its class, 0 for the others.");
		for (size_t i = 0; i < cfg->nservices; i++)
			for (unsigned k = SVC_UNKNOWN; k <= SVC_HEAVY; k++)
				evbuffer_add_printf(out,
						    "execserver_service_class{service=\"%s\",class="
						    "\"%s\"} %d\n",
						    cfg->services[i].name, class_name(k),
						    s->svc[i].klass == k);
		metric(out, "execserver_fast_reserve", "gauge",
		       "Slots of the auto-balance pool that only light jobs take.");
		evbuffer_add_printf(out, "execserver_fast_reserve %d\n", cfg->fast_reserve);
	}
	free(s);
}
