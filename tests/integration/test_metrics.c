/*
 * test_metrics.c - GET /metrics against its contract, protocol.md section
 * 7 ("GET /metrics"): the list of metrics is read from that section itself
 * (so a metric documented later is checked too), every one must be there
 * with every documented label value, and nothing undocumented; with fixed
 * waitgroups the auto-balance metrics are absent, with auto-balance
 * present.  After a known sequence of jobs, offers and errors on a real
 * daemon, every figure has the value the sequence implies.
 */
#include "autoconfig.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "harness.h"
#include "proto.h"
#include "suite.h"
#include "wsclient.h"

/* One documented metric: its name and its label set as written
 * ("service,outcome=\"started|finished|failed\"", or ""). */
struct doc_metric {
	char name[96];
	char labels[160];
	int auto_only; /* listed after "with auto-balance also" */
};

static struct doc_metric doc[64];
static int ndoc;

static void doc_add(const char *name, size_t name_len, const char *labels, size_t labels_len,
		    int auto_only)
{
	if (ndoc == 64 || name_len >= sizeof doc[0].name || labels_len >= sizeof doc[0].labels) {
		CU_FAIL("protocol.md lists more or longer metrics than this test can hold");
		return;
	}
	snprintf(doc[ndoc].name, sizeof doc[0].name, "%.*s", (int)name_len, name);
	snprintf(doc[ndoc].labels, sizeof doc[0].labels, "%.*s", (int)labels_len, labels);
	doc[ndoc++].auto_only = auto_only;
}

/* Expands one backquoted name: a brace group right after '_' lists
 * alternatives of the name ("execserver_waitgroup_{processes,running}"),
 * a brace group after a letter is the label set. */
static void doc_expand(const char *span, size_t len, int auto_only)
{
	const char *open = memchr(span, '{', len);

	if (open == NULL) {
		doc_add(span, len, "", 0, auto_only);
		return;
	}
	const char *close = memchr(open, '}', len - (size_t)(open - span));
	if (close == NULL) {
		CU_FAIL("protocol.md: a metric's braces are not closed");
		return;
	}
	if (open > span && open[-1] == '_') {
		for (const char *alt = open + 1; alt < close;) {
			const char *end = memchr(alt, ',', (size_t)(close - alt));
			char name[200];
			if (end == NULL)
				end = close;
			int n = snprintf(name, sizeof name, "%.*s%.*s%.*s", (int)(open - span),
					 span, (int)(end - alt), alt,
					 (int)(len - (size_t)(close + 1 - span)), close + 1);
			doc_expand(name, (size_t)n, auto_only);
			alt = end + 1;
		}
		return;
	}
	doc_add(span, (size_t)(open - span), open + 1, (size_t)(close - open - 1), auto_only);
}

/* Reads the metric names of protocol.md's "### GET /metrics" section. */
static void doc_load(void)
{
	const char *top = getenv("TOP_SRCDIR");
	char path[512];
	size_t len;

	snprintf(path, sizeof path, "%s/docs/protocol.md", top ? top : "..");
	char *md = (char *)harness_read_file(path, &len);
	CU_ASSERT_FATAL(md != NULL);
	char *sec = strstr(md, "### GET /metrics\n");
	CU_ASSERT_FATAL(sec != NULL);
	char *end = strstr(sec + 1, "\n#");
	if (end)
		*end = '\0';
	char *auto_from = strstr(sec, "auto-balance also");
	ndoc = 0;
	for (char *p = strchr(sec, '`'); p; p = strchr(p, '`')) {
		char *q = strchr(p + 1, '`');
		if (q == NULL)
			break;
		if (strncmp(p + 1, "execserver_", 11) == 0)
			doc_expand(p + 1, (size_t)(q - p - 1), auto_from && p > auto_from);
		p = q + 1;
	}
	free(md);
	CU_ASSERT(ndoc >= 16); /* what the section listed when this test was written */
}

/* 1 if body has a sample of name (whose line contains label_text, when
 * not NULL). */
static int has_sample(const char *body, const char *name, const char *label_text)
{
	size_t n = strlen(name);

	for (const char *l = body; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		const char *eol = strchr(l, '\n');
		size_t ll = eol ? (size_t)(eol - l) : strlen(l);
		if (ll > n && strncmp(l, name, n) == 0 && (l[n] == ' ' || l[n] == '{')) {
			if (label_text == NULL)
				return 1;
			char line[512];
			snprintf(line, sizeof line, "%.*s", (int)ll, l);
			if (strstr(line, label_text))
				return 1;
		}
	}
	return 0;
}

/* Every metric listed (the auto-balance ones only when with_auto) is in
 * body with a TYPE line, a sample, each label and each documented value;
 * the auto-balance ones are absent otherwise; body has no other metric. */
static void check_documented(const char *body, int with_auto)
{
	char text[256];

	for (int i = 0; i < ndoc; i++) {
		const struct doc_metric *m = &doc[i];
		snprintf(text, sizeof text, "# TYPE %.95s ", m->name);
		if (m->auto_only && !with_auto) {
			if (strstr(body, text))
				fprintf(stderr,
					"%s: an auto-balance metric with fixed waitgroups\n",
					m->name);
			CU_ASSERT(strstr(body, text) == NULL);
			continue;
		}
		int ok = strstr(body, text) != NULL && has_sample(body, m->name, NULL);
		char labels[160];
		snprintf(labels, sizeof labels, "%s", m->labels);
		for (char *save, *lab = strtok_r(labels, ",", &save); lab;
		     lab = strtok_r(NULL, ",", &save)) {
			char *eq = strchr(lab, '=');
			if (eq == NULL) {
				snprintf(text, sizeof text, "%s=\"", lab);
				ok = ok && has_sample(body, m->name, text);
				continue;
			}
			*eq = '\0';
			char *vals = eq + 1 + (eq[1] == '"');
			vals[strcspn(vals, "\"")] = '\0';
			for (char *s2, *v = strtok_r(vals, "|", &s2); v;
			     v = strtok_r(NULL, "|", &s2)) {
				snprintf(text, sizeof text, "%s=\"%s\"", lab, v);
				ok = ok && has_sample(body, m->name, text);
			}
		}
		if (!ok)
			fprintf(stderr, "/metrics lacks %s{%s} as protocol.md lists it\n", m->name,
				m->labels);
		CU_ASSERT(ok);
	}
	for (const char *t = strstr(body, "# TYPE "); t; t = strstr(t + 1, "# TYPE ")) {
		char name[96] = "";
		int known = 0;
		sscanf(t + 7, "%95s", name);
		for (int i = 0; i < ndoc; i++)
			known |= strcmp(doc[i].name, name) == 0;
		if (!known)
			fprintf(stderr, "/metrics has %s, which protocol.md does not list\n", name);
		CU_ASSERT(known);
	}
}

static char body[1 << 16];

static void get_metrics(const struct es_daemon *d)
{
	int status = 0;
	body[0] = '\0';
	CU_ASSERT(wsc_http_get("127.0.0.1", d->port, "/metrics", 5000, &status, body,
			       sizeof body) >= 0);
	CU_ASSERT_EQUAL(status, 200);
}

/* The value of the sample "name{labels}" (or "name"), NAN if absent. */
static double value(const char *sample)
{
	size_t n = strlen(sample);
	for (const char *l = body; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		if (strncmp(l, sample, n) == 0 && l[n] == ' ')
			return strtod(l + n + 1, NULL);
	fprintf(stderr, "/metrics has no %s\n", sample);
	return NAN;
}

static int running_is(struct json_object *st, void *arg)
{
	return harness_json_int(st, "waitgroups", "wg", "running", NULL) == *(long long *)arg;
}

static int waiting_is(struct json_object *st, void *arg)
{
	return harness_json_int(st, "waitgroups", "wg", "waiting", NULL) == *(long long *)arg;
}

/* WANT, OFFER, JOB of a 30 s sleep; returns once it runs. */
static void start_sleep(const struct es_daemon *d, struct tclient *c, const char *job_id)
{
	long long one = 1;
	const char *token = tc_want_offer(c, job_id, "sleep", 0, 5000);
	CU_ASSERT_FATAL(token != NULL);
	CU_ASSERT(tc_send(c,
			  "{\"type\":\"JOB\",\"job_id\":\"%s\",\"token\":\"%s\","
			  "\"job\":{\"command\":\"sleep\",\"args\":[\"30\"]}}",
			  job_id, token) == 0);
	CU_ASSERT(harness_wait_status(d, 5000, running_is, &one) == 0);
}

static void expect_done(struct tclient *c, const char *job_id, long long exit_code,
			const char *error)
{
	struct json_object *done = tc_expect(c, "DONE", 10000), *r = tc_receipt(done);
	CU_ASSERT_FATAL(done != NULL);
	CU_ASSERT_STRING_EQUAL(tc_str(done, "job_id"), job_id);
	struct json_object *e = NULL;
	if (error) {
		CU_ASSERT(json_object_object_get_ex(r, "error", &e) && tc_str(e, "code") &&
			  strcmp(tc_str(e, "code"), error) == 0);
	} else {
		CU_ASSERT_EQUAL(tc_int(r, "exit_code"), exit_code);
	}
	json_object_put(done);
}

/* Fixed waitgroups: the list, then the figures after a known sequence. */
static void test_fixed(void)
{
	struct es_daemon d;
	long long one = 1;

	doc_load();
	CU_ASSERT_FATAL(harness_start(&d, 1, harness_default_body(1), NULL) == 0);
	get_metrics(&d);
	check_documented(body, 0);
	CU_ASSERT_EQUAL(value("execserver_grants_total"), 0);

	struct tclient *a = tc_connect(d.port, "a"), *b = tc_connect(d.port, "b");
	CU_ASSERT_FATAL(a != NULL && b != NULL);
	/* two jobs of cat: one succeeds, one exits 1 */
	struct json_object *done = tc_run_job(a, "j1", "cat", "{\"command\":\"true\"}", 10000);
	CU_ASSERT(done != NULL && tc_int(tc_receipt(done), "exit_code") == 0);
	json_object_put(done);
	done = tc_run_job(a, "j2", "cat", "{\"command\":\"false\"}", 10000);
	CU_ASSERT(done != NULL && tc_int(tc_receipt(done), "exit_code") == 1);
	json_object_put(done);
	/* an offer declined, a service that does not exist */
	const char *token = tc_want_offer(a, "j3", "cat", 0, 5000);
	CU_ASSERT_FATAL(token != NULL);
	CU_ASSERT(tc_send(a, "{\"type\":\"DECLINE\",\"job_id\":\"j3\",\"token\":\"%s\"}", token) ==
		  0);
	CU_ASSERT(tc_send(a, "{\"type\":\"WANT\",\"job_id\":\"j4\",\"service\":\"nosuch\"}") == 0);
	struct json_object *err = tc_expect(a, "ERROR", 5000);
	CU_ASSERT(err != NULL && strcmp(tc_str(err, "code"), "unknown_service") == 0);
	json_object_put(err);
	/* a sleep cancelled while it runs: finished, and failed */
	start_sleep(&d, a, "j5");
	CU_ASSERT(tc_send(a, "{\"type\":\"CANCEL\",\"job_id\":\"j5\"}") == 0);
	expect_done(a, "j5", 0, "cancelled");
	/* b holds the only slot with a sleep, a's want waits behind it */
	start_sleep(&d, b, "h");
	CU_ASSERT(tc_send(a, "{\"type\":\"WANT\",\"job_id\":\"j6\",\"service\":\"cat\"}") == 0);
	CU_ASSERT(harness_wait_status(&d, 5000, waiting_is, &one) == 0);

	get_metrics(&d);
	check_documented(body, 0);
	CU_ASSERT_EQUAL(value("execserver_clients"), 2);
	CU_ASSERT_EQUAL(value("execserver_connections"), 2);
	CU_ASSERT_EQUAL(value("execserver_wants"), 2);        /* h running, j6 parked */
	CU_ASSERT_EQUAL(value("execserver_grants_total"), 5); /* j1 j2 j3 j5 h */
	CU_ASSERT_EQUAL(value("execserver_book_repairs_total"), 0);
	CU_ASSERT_EQUAL(value("execserver_draining"), 0);
	CU_ASSERT_EQUAL(value("execserver_waitgroup_processes{waitgroup=\"wg\"}"), 1);
	CU_ASSERT_EQUAL(value("execserver_waitgroup_running{waitgroup=\"wg\"}"), 1);
	CU_ASSERT_EQUAL(value("execserver_waitgroup_offered{waitgroup=\"wg\"}"), 0);
	CU_ASSERT_EQUAL(value("execserver_waitgroup_waiting{waitgroup=\"wg\"}"), 1);
	CU_ASSERT_EQUAL(value("execserver_waitgroup_tokens{waitgroup=\"wg\"}"), 0);
	CU_ASSERT_EQUAL(value("execserver_service_jobs_total{service=\"cat\",outcome=\"started\"}"),
			2);
	CU_ASSERT_EQUAL(
		value("execserver_service_jobs_total{service=\"cat\",outcome=\"finished\"}"), 2);
	CU_ASSERT_EQUAL(value("execserver_service_jobs_total{service=\"cat\",outcome=\"failed\"}"),
			1);
	CU_ASSERT_EQUAL(
		value("execserver_service_jobs_total{service=\"sleep\",outcome=\"started\"}"), 2);
	CU_ASSERT_EQUAL(
		value("execserver_service_jobs_total{service=\"sleep\",outcome=\"finished\"}"), 1);
	CU_ASSERT_EQUAL(
		value("execserver_service_jobs_total{service=\"sleep\",outcome=\"failed\"}"), 1);
	CU_ASSERT_EQUAL(value("execserver_service_runtime_samples{service=\"cat\"}"), 2);
	double mean = value("execserver_service_mean_runtime_seconds{service=\"cat\"}");
	CU_ASSERT(mean >= 0 && mean < 1.0);
	/* /status says the same (the two views of one snapshot) */
	struct json_object *st = harness_status(&d);
	CU_ASSERT_EQUAL(harness_json_int(st, "grants", NULL), 5);
	CU_ASSERT_EQUAL(harness_json_int(st, "services", "sleep", "samples", NULL),
			(long long)value("execserver_service_runtime_samples{service=\"sleep\"}"));
	json_object_put(st);

	CU_ASSERT(tc_send(b, "{\"type\":\"CANCEL\",\"job_id\":\"h\"}") == 0);
	expect_done(b, "h", 0, "cancelled"); /* so that the stop need not wait for it */
	tc_close(a);
	tc_close(b);
	CU_ASSERT_EQUAL(harness_stop(&d, 10000), 0);
	harness_cleanup(&d);
}

/* Auto-balance: the same list, with the class and reserve metrics. */
static void test_auto_balance(void)
{
	struct es_daemon d;

	doc_load();
	CU_ASSERT_FATAL(harness_start(&d, 1,
				      "cpus: 3\n"
				      "fastReserve: 1\n"
				      "services:\n"
				      "  light:\n"
				      "    commands:\n"
				      "      true: {prog: \"true\"}\n",
				      NULL) == 0);
	get_metrics(&d);
	check_documented(body, 1);
	CU_ASSERT_EQUAL(value("execserver_fast_reserve"), 1);
	CU_ASSERT_EQUAL(value("execserver_waitgroup_processes{waitgroup=\"auto\"}"), 3);
	CU_ASSERT_EQUAL(value("execserver_service_class{service=\"light\",class=\"unknown\"}"), 1);
	CU_ASSERT_EQUAL(value("execserver_service_class{service=\"light\",class=\"light\"}"), 0);
	CU_ASSERT_EQUAL(harness_stop(&d, 10000), 0);
	harness_cleanup(&d);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "fixed waitgroups: every documented metric, the values of a known sequence",
		  test_fixed },
		{ "auto-balance: every documented metric, the class and reserve",
		  test_auto_balance },
		{ NULL, NULL },
	};
	return run_suite("metrics", cases);
}
