/* status_page.c - see status_page.h.  One snapshot under the lock, formatted after. */
#include "autoconfig.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "book/book_class.h"
#include "common/clock.h"
#include "common/json_text.h"
#include "common/prom_text.h"
#include "config/config.h"
#include "handler/handler.h"
#include "handler/status_page.h"
#include "job/receipt.h"

struct snapshot {
	struct book_status st;
	struct book_wg_status wg[BOOK_MAX_WAITGROUPS];
	struct book_service_status svc[BOOK_MAX_SERVICES];
	int consistent;
	char why[256];
	int has_lock; /* a BOOK_LOCK_STATS build: lock figures */
	struct book_lock_stats lock;
	uint32_t handler_clients[BOOK_MAX_HANDLERS];
	/* detail (GET /status?detail=1): the wants one by one, the failures */
	int detail;
	size_t nwants, nfailures;
	struct book_failure failures[BOOK_FAILURES];
	struct book_want_info wants[]; /* DETAIL_WANTS */
};

/* The detail's bounds: every running and offered job (the slots bound
 * them), and the first DETAIL_PARKED parked wants of each waitgroup. */
#define DETAIL_PARKED 100u
#define DETAIL_WANTS 4096u

/* json: for /status (the per-handler client counts); check: also run the
 * book's consistency check, which is O(table sizes) under the lock, so
 * only on request (GET /status?check=1); detail: the wants and failures
 * one by one (GET /status?detail=1). */
static struct snapshot *take_snapshot(int json, int check, int detail)
{
	const struct es_config *cfg = handler.inst->cfg;
	struct snapshot *s = calloc(1,
				    sizeof *s + (detail ? DETAIL_WANTS * sizeof s->wants[0] : 0));
	if (!s)
		return NULL;
	s->detail = detail;
	struct book *b = handler_book_lock();
	if (json) /* O(connections): /status only, not every scrape */
		book_handler_clients(b, s->handler_clients);
	if (detail) {
		s->nwants = book_list_wants(b, s->wants, DETAIL_WANTS, DETAIL_PARKED);
		s->nfailures = book_failures(b, s->failures, BOOK_FAILURES);
	}
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

/* A handler's CPU time (user + system) in seconds from /proc/PID/stat,
 * or -1 when it cannot be read. */
static double cpu_seconds(int pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	FILE *f = pid > 0 ? fopen(path, "r") : NULL;
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* after the command's closing parenthesis: state is field 3, utime
	 * and stime are fields 14 and 15 */
	const char *p = strrchr(buf, ')');
	unsigned long long ut, st;
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	long hz = sysconf(_SC_CLK_TCK);
	return hz > 0 ? (double)(ut + st) / (double)hz : -1;
}

static const char *state_name(enum want_state st)
{
	return st == WANT_PARKED    ? "parked"
	       : st == WANT_OFFERED ? "offered"
	       : st == WANT_RUNNING ? "running"
				    : "finished";
}

static struct json_object *jstr_or_null(const char *v)
{
	return v && *v ? json_object_new_string(v) : NULL;
}

/* One want of the detail; now: the monotonic clock the book keeps. */
static struct json_object *want_json(const struct es_config *cfg, const struct book_want_info *w,
				     uint64_t now)
{
	struct json_object *j = json_object_new_object();
	char id[32];
	snprintf(id, sizeof id, "%" PRIu32 ".%" PRIu32, w->ref.idx, w->ref.gen);
	const struct config_service *svc = &cfg->services[w->service];
	json_object_object_add(j, "id", json_object_new_string(id));
	json_object_object_add(j, "job_id", json_object_new_string(w->job_id));
	json_object_object_add(j, "client", jstr_or_null(w->client_id));
	json_object_object_add(j, "conn", jint(w->conn));
	json_object_object_add(j, "state", json_object_new_string(state_name(w->state)));
	json_object_object_add(j, "service", json_object_new_string(svc->name));
	json_object_object_add(j, "waitgroup", json_object_new_string(svc->waitgroup));
	json_object_object_add(j, "handler", json_object_new_int((int)w->handler));
	json_object_object_add(j, "priority", json_object_new_int(w->priority));
	if (w->state == WANT_PARKED) {
		json_object_object_add(j, "position", jint(w->position));
		json_object_object_add(j, "waited_ms",
				       jint(now > w->since_ms ? now - w->since_ms : 0));
	} else if (w->state == WANT_RUNNING) {
		json_object_object_add(j, "elapsed_ms",
				       jint(now > w->since_ms ? now - w->since_ms : 0));
		json_object_object_add(
			j, "command",
			w->command >= 0 && (size_t)w->command < svc->ncommands
				? json_object_new_string(svc->commands[w->command].name)
				: NULL);
		json_object_object_add(j, "pgid", json_object_new_int(w->pgid));
		if (w->progress >= 0)
			json_object_object_add(j, "progress", json_fraction(w->progress / 10000.0));
	}
	return j;
}

/* The detail's arrays: "jobs" (running, then offered), "waiting" (parked,
 * by waitgroup, then position) and "failures" (newest first). */
static void detail_json(struct json_object *o, const struct es_config *cfg, struct snapshot *s)
{
	struct json_object *jobs = json_object_new_array(), *waiting = json_object_new_array();
	struct json_object *fails = json_object_new_array();
	uint64_t now = clock_mono_ms();
	for (size_t i = 0; i < s->nwants; i++)
		json_object_array_add(s->wants[i].state == WANT_PARKED ? waiting : jobs,
				      want_json(cfg, &s->wants[i], now));
	for (size_t i = 0; i < s->nfailures; i++) {
		const struct book_failure *f = &s->failures[i];
		struct json_object *j = json_object_new_object();
		const char *err = receipt_error_name(f->error);
		json_object_object_add(j, "job_id", json_object_new_string(f->job_id));
		json_object_object_add(j, "client", jstr_or_null(f->client_id));
		json_object_object_add(j, "service",
				       json_object_new_string(cfg->services[f->service].name));
		json_object_object_add(j, "error", err ? json_object_new_string(err) : NULL);
		json_object_object_add(j, "exit_code", json_object_new_int(f->exit_code));
		json_object_object_add(j, "signal", json_object_new_int(f->signal));
		json_object_object_add(j, "duration_ms", jint(f->duration_ms));
		json_object_object_add(j, "ago_ms", jint(now > f->at_ms ? now - f->at_ms : 0));
		json_object_array_add(fails, j);
	}
	json_object_object_add(o, "jobs", jobs);
	json_object_object_add(o, "waiting", waiting);
	json_object_object_add(o, "waiting_listed_max", jint(DETAIL_PARKED));
	json_object_object_add(o, "failures", fails);
}

void status_json(struct evbuffer *out, int check, int detail)
{
	const struct es_config *cfg = handler.inst->cfg;
	struct snapshot *s = take_snapshot(1, check, detail);
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
	json_object_object_add(o, "handovers", jint(s->st.handovers));
	struct json_object *pl = json_object_new_object();
	json_object_object_add(pl, "good", jint(s->st.progress_good));
	json_object_object_add(pl, "bad", jint(s->st.progress_bad));
	json_object_object_add(o, "progress_lines", pl);
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
		json_object_object_add(h, "clients", jint(s->handler_clients[i]));
		json_object_object_add(
			h, "restarts",
			jint(s->st.handler_starts[i] ? s->st.handler_starts[i] - 1 : 0));
		double cpu = cpu_seconds(s->st.handler_pids[i]);
		json_object_object_add(h, "cpu_seconds",
				       cpu >= 0 ? json_object_new_double(cpu) : NULL);
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
	if (s->detail)
		detail_json(o, cfg, s);
	evbuffer_add_printf(out, "%s\n",
			    json_object_to_json_string_ext(
				    o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
	free(s);
}

/* The per-service families: counts and gauges, the finished jobs by
 * outcome (the two outcomes add up to the finished jobs), the
 * histograms. */
static void per_service(struct evbuffer *out, const struct es_config *cfg, const struct snapshot *s)
{
	static const struct {
		const char *name, *type, *help;
		size_t off;
		int ms; /* a uint64_t of milliseconds, shown in seconds */
	} fields[] = {
		{ "execserver_service_jobs_started_total", "counter",
		  "Jobs that started, by service.", offsetof(struct book_service_status, started),
		  0 },
		{ "execserver_service_mean_runtime_seconds", "gauge",
		  "Moving average of the service's job runtime.",
		  offsetof(struct book_service_status, mean_runtime_ms), 1 },
		{ "execserver_service_runtime_samples", "gauge",
		  "Finished jobs in the service's runtime average.",
		  offsetof(struct book_service_status, samples), 0 },
	};
	static const struct {
		const char *name, *help;
		size_t off;
	} hists[] = {
		{ "execserver_service_job_duration_seconds",
		  "Run time of the finished jobs (not those lost with their handler), by service.",
		  offsetof(struct book_service_status, runtime) },
		{ "execserver_service_slot_wait_seconds",
		  "Wait of the wants that got a slot, from WANT to OFFER, by service.",
		  offsetof(struct book_service_status, slot_wait) },
	};

	for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
		prom_family(out, fields[f].name, fields[f].type, fields[f].help);
		for (size_t i = 0; i < cfg->nservices; i++) {
			uint64_t v;
			memcpy(&v, (const char *)&s->svc[i] + fields[f].off, sizeof v);
			evbuffer_add_printf(out, "%s{service=\"%s\"} ", fields[f].name,
					    cfg->services[i].name);
			if (fields[f].ms)
				evbuffer_add_printf(out, "%" PRIu64 ".%03u\n", v / 1000,
						    (unsigned)(v % 1000));
			else
				evbuffer_add_printf(out, "%" PRIu64 "\n", v);
		}
	}
	prom_family(out, "execserver_service_jobs_finished_total", "counter",
		    "Jobs that finished, by service and outcome (succeeded or failed).");
	for (size_t i = 0; i < cfg->nservices; i++) {
		const char *n = cfg->services[i].name;
		const struct book_service_status *v = &s->svc[i];
		evbuffer_add_printf(out,
				    "execserver_service_jobs_finished_total{service=\"%s\","
				    "outcome=\"succeeded\"} %" PRIu64 "\n"
				    "execserver_service_jobs_finished_total{service=\"%s\","
				    "outcome=\"failed\"} %" PRIu64 "\n",
				    n, v->finished - v->failed, n, v->failed);
	}
	for (size_t h = 0; h < sizeof hists / sizeof hists[0]; h++) {
		prom_family(out, hists[h].name, "histogram", hists[h].help);
		for (size_t i = 0; i < cfg->nservices; i++)
			prom_histogram(
				out, hists[h].name, "service", cfg->services[i].name,
				(const struct hist *)((const char *)&s->svc[i] + hists[h].off));
	}
}

/* Label values here are config names ([A-Za-z0-9_.-]), which need no
 * escaping; the version and the instance id go through prom_identity's. */
void status_metrics(struct evbuffer *out)
{
	const struct es_config *cfg = handler.inst->cfg;
	struct snapshot *s = take_snapshot(0, 0, 0);
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

	prom_identity(out, "execserver", handler.inst->instance_name, handler.inst->start_ms);
	prom_family(out, "execserver_clients", "gauge", "Distinct clients with a live connection.");
	evbuffer_add_printf(out, "execserver_clients %" PRIu32 "\n", s->st.clients);
	prom_family(out, "execserver_connections", "gauge", "Broker websocket connections.");
	evbuffer_add_printf(out, "execserver_connections %" PRIu32 "\n", s->st.connections);
	prom_family(out, "execserver_wants", "gauge",
		    "Jobs known to the want-book (parked, offered, running).");
	evbuffer_add_printf(out, "execserver_wants %" PRIu32 "\n", s->st.wants);
	prom_family(out, "execserver_grants_total", "counter", "Slots offered since start.");
	evbuffer_add_printf(out, "execserver_grants_total %" PRIu64 "\n", s->st.grants);
	prom_family(out, "execserver_book_repairs_total", "counter",
		    "Want-book repairs after a process died holding its lock.");
	evbuffer_add_printf(out, "execserver_book_repairs_total %" PRIu64 "\n", s->st.repairs);
	prom_family(out, "execserver_progress_lines_total", "counter",
		    "Progress lines of ended jobs; bad ones were ignored.");
	evbuffer_add_printf(out, "execserver_progress_lines_total{outcome=\"good\"} %" PRIu64 "\n",
			    s->st.progress_good);
	evbuffer_add_printf(out, "execserver_progress_lines_total{outcome=\"bad\"} %" PRIu64 "\n",
			    s->st.progress_bad);
	prom_family(out, "execserver_draining", "gauge", "1 while the instance drains.");
	evbuffer_add_printf(out, "execserver_draining %d\n", s->st.draining ? 1 : 0);
	for (size_t f = 0; f < sizeof wg_fields / sizeof wg_fields[0]; f++) {
		prom_family(out, wg_fields[f].name, "gauge", wg_fields[f].help);
		for (size_t i = 0; i < cfg->nwaitgroups; i++) {
			uint32_t v;
			memcpy(&v, (const char *)&s->wg[i] + wg_fields[f].off, sizeof v);
			evbuffer_add_printf(out, "%s{waitgroup=\"%s\"} %" PRIu32 "\n",
					    wg_fields[f].name, cfg->waitgroups[i].name, v);
		}
	}
	per_service(out, cfg, s);
	if (cfg->auto_balance) {
		prom_family(
			out, "execserver_service_class", "gauge",
			"Auto-balance class of the service: 1 for its class, 0 for the others.");
		for (size_t i = 0; i < cfg->nservices; i++)
			for (unsigned k = SVC_UNKNOWN; k <= SVC_HEAVY; k++)
				evbuffer_add_printf(out,
						    "execserver_service_class{service=\"%s\",class="
						    "\"%s\"} %d\n",
						    cfg->services[i].name, class_name(k),
						    s->svc[i].klass == k);
		prom_family(out, "execserver_fast_reserve", "gauge",
			    "Slots of the auto-balance pool that only light jobs take.");
		evbuffer_add_printf(out, "execserver_fast_reserve %d\n", cfg->fast_reserve);
	}
	free(s);
}
