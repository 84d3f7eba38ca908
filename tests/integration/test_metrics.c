/*
 * test_metrics.c - GET /metrics of both daemons against Prometheus and
 * their contracts: each page goes through metrics_check.py (Debian's
 * python3-prometheus-client parses it, the strict OpenMetrics parser
 * too, the conventions hold, and its families are the table of
 * docs/protocol.md section 7, resp. docs/dispatch.md "Metrics", both
 * ways); after a known sequence of jobs, offers and errors on a real
 * execserver every figure has the value the sequence implies and the
 * histograms count the waits and runs it made; a real execdispatch shows
 * the queue of a real PostgreSQL, an execserver address that answers
 * nothing as 0 connected, and its histograms move with a run and a
 * cancel.
 */
#include "autoconfig.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "dispatch_fixture.h"
#include "harness.h"
#include "pgtest.h"
#include "proto.h"
#include "suite.h"
#include "wsclient.h"

/* Debian's interpreter, which sees python3-prometheus-client
 * (scripts/setup.sh); a python3 earlier in PATH (pyenv's) may not. */
#define PYTHON "/usr/bin/python3"

static char body[1 << 16];

static void get_page(int port)
{
	int status = 0;
	body[0] = '\0';
	CU_ASSERT(wsc_http_get("127.0.0.1", port, "/metrics", 5000, &status, body, sizeof body) >=
		  0);
	CU_ASSERT_EQUAL(status, 200);
}

static void get_metrics(const struct es_daemon *d)
{
	get_page(d->port);
}

/* body through metrics_check.py against the table of doc (under the
 * line heading); auto_balance "yes", "no" or NULL (the option left out). */
static void check_page(const char *doc, const char *heading, const char *auto_balance)
{
	const char *top = getenv("TOP_SRCDIR");
	char page[] = "/tmp/es-metrics-XXXXXX", cmd[1200], line[512];
	int fd = mkstemp(page);

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(write(fd, body, strlen(body)) == (ssize_t)strlen(body));
	close(fd);
	snprintf(cmd, sizeof cmd,
		 PYTHON " '%s/tests/integration/metrics_check.py' '%s' '%s/docs/%s' '%s' %s%s 2>&1",
		 top ? top : "..", page, top ? top : "..", doc, heading,
		 auto_balance ? "--auto-balance " : "", auto_balance ? auto_balance : "");
	FILE *p = popen(cmd, "r");
	CU_ASSERT_FATAL(p != NULL);
	while (fgets(line, sizeof line, p))
		fprintf(stderr, "metrics_check %s: %s", doc, line);
	int st = pclose(p);
	if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		fprintf(stderr, "---- the page ----\n%s----\n", body);
	CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	unlink(page);
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

#define SVC(name, svc) name "{service=\"" svc "\"}"
#define JOBS_FINISHED(svc, outcome) \
	"execserver_service_jobs_finished_total{service=\"" svc "\",outcome=\"" outcome "\"}"

/* Fixed waitgroups: the page checked, then the figures after a known
 * sequence, the histograms among them. */
static void test_fixed(void)
{
	struct es_daemon d;
	long long one = 1;

	CU_ASSERT_FATAL(harness_start(&d, 1, harness_default_body(1), NULL) == 0);
	get_metrics(&d);
	check_page("protocol.md", "### GET /metrics", "no");
	CU_ASSERT_EQUAL(value("execserver_grants_total"), 0);
	CU_ASSERT_EQUAL(value(SVC("execserver_service_slot_wait_seconds_count", "cat")), 0);

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
	long long want_sent = harness_now_ms();
	CU_ASSERT(tc_send(a, "{\"type\":\"WANT\",\"job_id\":\"j6\",\"service\":\"cat\"}") == 0);
	CU_ASSERT(harness_wait_status(&d, 5000, waiting_is, &one) == 0);
	long long seen_parked = harness_now_ms();

	get_metrics(&d);
	check_page("protocol.md", "### GET /metrics", "no");
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
	/* started, and finished by outcomes that add up to the finished jobs */
	CU_ASSERT_EQUAL(value(SVC("execserver_service_jobs_started_total", "cat")), 2);
	CU_ASSERT_EQUAL(value(JOBS_FINISHED("cat", "succeeded")), 1);
	CU_ASSERT_EQUAL(value(JOBS_FINISHED("cat", "failed")), 1);
	CU_ASSERT_EQUAL(value(SVC("execserver_service_jobs_started_total", "sleep")), 2);
	CU_ASSERT_EQUAL(value(JOBS_FINISHED("sleep", "succeeded")), 0);
	CU_ASSERT_EQUAL(value(JOBS_FINISHED("sleep", "failed")), 1);
	CU_ASSERT_EQUAL(value(SVC("execserver_service_runtime_samples", "cat")), 2);
	double mean = value(SVC("execserver_service_mean_runtime_seconds", "cat"));
	CU_ASSERT(mean >= 0 && mean < 1.0);
	/* run time: each finished job once; slot wait: each offer once */
	CU_ASSERT_EQUAL(value(SVC("execserver_service_job_duration_seconds_count", "cat")), 2);
	CU_ASSERT_EQUAL(value(SVC("execserver_service_job_duration_seconds_count", "sleep")), 1);
	CU_ASSERT_EQUAL(value(SVC("execserver_service_slot_wait_seconds_count", "cat")), 3);
	CU_ASSERT_EQUAL(value(SVC("execserver_service_slot_wait_seconds_count", "sleep")), 2);
	double wait_sum = value(SVC("execserver_service_slot_wait_seconds_sum", "cat"));
	/* /status says the same (the two views of one snapshot) */
	struct json_object *st = harness_status(&d);
	CU_ASSERT_EQUAL(harness_json_int(st, "grants", NULL), 5);
	CU_ASSERT_EQUAL(harness_json_int(st, "services", "sleep", "samples", NULL),
			(long long)value(SVC("execserver_service_runtime_samples", "sleep")));
	CU_ASSERT_EQUAL(harness_json_int(st, "services", "cat", "finished", NULL),
			value(JOBS_FINISHED("cat", "succeeded")) +
				value(JOBS_FINISHED("cat", "failed")));
	json_object_put(st);

	/* h ends: j6 gets the slot; its wait lies between the time it was
	 * seen parked and the cancel, and the time from its WANT to the
	 * OFFER (the book's clock in whole ms: 2 ms either way) */
	long long cancel_sent = harness_now_ms();
	CU_ASSERT(tc_send(b, "{\"type\":\"CANCEL\",\"job_id\":\"h\"}") == 0);
	expect_done(b, "h", 0, "cancelled");
	struct json_object *offer = tc_expect(a, "OFFER", 5000);
	long long offered = harness_now_ms();
	CU_ASSERT_FATAL(offer != NULL && strcmp(tc_str(offer, "job_id"), "j6") == 0);
	CU_ASSERT(tc_send(a, "{\"type\":\"DECLINE\",\"job_id\":\"j6\",\"token\":\"%s\"}",
			  tc_str(offer, "token")) == 0);
	json_object_put(offer);
	get_metrics(&d);
	CU_ASSERT_EQUAL(value(SVC("execserver_service_slot_wait_seconds_count", "cat")), 4);
	double waited = value(SVC("execserver_service_slot_wait_seconds_sum", "cat")) - wait_sum;
	fprintf(stderr,
		"slot wait of j6: %.3f s (parked %lld ms before the cancel, %lld ms from "
		"the WANT to the OFFER)\n",
		waited, cancel_sent - seen_parked, offered - want_sent);
	CU_ASSERT(waited * 1000 >= (double)(cancel_sent - seen_parked) - 2);
	CU_ASSERT(waited * 1000 <= (double)(offered - want_sent) + 2);
	/* a job of 0.3 s: counted above the 0.25 bucket, its time in _sum */
#define SLEEP_RUNS(le) \
	"execserver_service_job_duration_seconds_bucket{service=\"sleep\",le=\"" le "\"}"
	double runs = value(SVC("execserver_service_job_duration_seconds_sum", "sleep"));
	double quick = value(SLEEP_RUNS("0.25")), all = value(SLEEP_RUNS("+Inf"));
	done = tc_run_job(b, "j7", "sleep", "{\"command\":\"sleep\",\"args\":[\"0.3\"]}", 10000);
	CU_ASSERT(done != NULL && tc_int(tc_receipt(done), "exit_code") == 0);
	json_object_put(done);
	get_metrics(&d);
	check_page("protocol.md", "### GET /metrics", "no");
	CU_ASSERT_EQUAL(value(SLEEP_RUNS("0.25")), quick);
	CU_ASSERT_EQUAL(value(SLEEP_RUNS("+Inf")), all + 1);
	CU_ASSERT(value(SVC("execserver_service_job_duration_seconds_sum", "sleep")) - runs >= 0.3);
	tc_close(a);
	tc_close(b);
	CU_ASSERT_EQUAL(harness_stop(&d, 10000), 0);
	harness_cleanup(&d);
}

/* Auto-balance: the page with the class and reserve metrics. */
static void test_auto_balance(void)
{
	struct es_daemon d;

	CU_ASSERT_FATAL(harness_start(&d, 1,
				      "cpus: 3\n"
				      "fastReserve: 1\n"
				      "services:\n"
				      "  light:\n"
				      "    commands:\n"
				      "      true: {prog: \"true\"}\n",
				      NULL) == 0);
	get_metrics(&d);
	check_page("protocol.md", "### GET /metrics", "yes");
	CU_ASSERT_EQUAL(value("execserver_fast_reserve"), 1);
	CU_ASSERT_EQUAL(value("execserver_waitgroup_processes{waitgroup=\"auto\"}"), 3);
	CU_ASSERT_EQUAL(value("execserver_service_class{service=\"light\",class=\"unknown\"}"), 1);
	CU_ASSERT_EQUAL(value("execserver_service_class{service=\"light\",class=\"light\"}"), 0);
	CU_ASSERT_EQUAL(harness_stop(&d, 10000), 0);
	harness_cleanup(&d);
}

/* Waits (ms at most) until the dispatcher's series has the value want. */
static int wait_series(int port, const char *series, double want, int ms)
{
	for (long long t0 = harness_now_ms(); harness_now_ms() - t0 < ms; harness_sleep_ms(50))
		if (df_metric_value(port, series) == want)
			return 1;
	fprintf(stderr, "%s: %g, not %g\n", series, df_metric_value(port, series), want);
	return 0;
}

#define SUBMIT_WORK(when) \
	"SELECT execdispatch.submit('work', '{\"command\":\"true\"}', 0, now() " when ")"
#define QUEUE_JOBS(state) "execdispatch_queue_jobs{service=\"work\",state=\"" state "\"}"

/* execdispatch: a dispatcher without an execserver claims nothing and
 * shows the queue as it is (two rows due a minute ago, one due in an
 * hour) and its address as 0 connected; one with an execserver runs the
 * two rows, and its histograms count their wait in the queue, their runs
 * and a cancel. */
static void test_dispatch(void)
{
	struct dfix f;
	char series[160];

	CU_ASSERT_FATAL(df_start(&f) == 0);
	PQclear(pgtest_query(f.c, SUBMIT_WORK("- interval '60 seconds'")));
	PQclear(pgtest_query(f.c, SUBMIT_WORK("- interval '60 seconds'")));
	PQclear(pgtest_query(f.c, SUBMIT_WORK("+ interval '1 hour'")));
	/* no execserver started yet: d0's one address is ws://127.0.0.1:9 */
	int p0 = df_start_with_metrics(&f, 0, NULL);
	CU_ASSERT_FATAL(p0 > 0);
	CU_ASSERT(wait_series(p0, QUEUE_JOBS("queued"), 3, 10000));
	get_page(p0);
	check_page("dispatch.md", "## Metrics", NULL);
	CU_ASSERT_EQUAL(value(QUEUE_JOBS("claimed")), 0);
	CU_ASSERT_EQUAL(value(QUEUE_JOBS("running")), 0);
	CU_ASSERT(value("execdispatch_queue_oldest_age_seconds{service=\"work\"}") >= 60);
	CU_ASSERT_EQUAL(value("execdispatch_execservers_connected{address=\"ws://127.0.0.1:9\"}"),
			0);
	CU_ASSERT_EQUAL(value("execdispatch_build_info{version=\"" PACKAGE_VERSION
			      "\",instance_id=\"d0\"}"),
			1);
	CU_ASSERT_EQUAL(value("execdispatch_claimed_total"), 0);
	CU_ASSERT_EQUAL(df_stop_disp(&f, 0, SIGTERM, 5000), 0);

	CU_ASSERT_FATAL(df_start_exec(&f, 0, 1) == 0);
	int p1 = df_start_with_metrics(&f, 1, NULL);
	CU_ASSERT_FATAL(p1 > 0);
	CU_ASSERT(wait_series(p1, "execdispatch_outcomes_total{outcome=\"done\"}", 2, 10000));
	snprintf(series, sizeof series,
		 "execdispatch_execservers_connected{address=\"ws://127.0.0.1:%d\"}", f.es[0].port);
	get_page(p1);
	CU_ASSERT_EQUAL(value(series), 1);
	/* each row waited a minute and more in the queue */
	CU_ASSERT_EQUAL(value("execdispatch_queue_wait_seconds_count"), 2);
	CU_ASSERT_EQUAL(value("execdispatch_queue_wait_seconds_bucket{le=\"30\"}"), 0);
	CU_ASSERT_EQUAL(value("execdispatch_queue_wait_seconds_bucket{le=\"300\"}"), 2);
	CU_ASSERT(value("execdispatch_queue_wait_seconds_sum") >= 120);
	CU_ASSERT_EQUAL(value("execdispatch_job_duration_seconds_count"), 2);
	CU_ASSERT_EQUAL(value("execdispatch_cancel_latency_seconds_count"), 0);
	/* a running row cancelled */
	long long id = df_submit(&f, "{\"command\":\"sleep\",\"args\":[\"30\"]}", 0);
	for (long long t0 = harness_now_ms();
	     harness_now_ms() - t0 < 10000 &&
	     pgtest_int(f.c,
			"SELECT count(*) FROM execdispatch.job WHERE id = %lld AND state = "
			"'running'",
			id) != 1;
	     harness_sleep_ms(50))
		;
	PQclear(pgtest_query(f.c, "SELECT execdispatch.cancel(%lld)", id));
	CU_ASSERT(wait_series(p1, "execdispatch_cancel_latency_seconds_count", 1, 10000));
	CU_ASSERT(wait_series(p1, "execdispatch_job_duration_seconds_count", 3, 10000));
	get_page(p1);
	check_page("dispatch.md", "## Metrics", NULL);
	CU_ASSERT_EQUAL(df_stop_disp(&f, 1, SIGTERM, 5000), 0);
	df_cleanup(&f, CU_get_number_of_failures() > 0);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "fixed waitgroups: every documented metric, the values of a known sequence",
		  test_fixed },
		{ "auto-balance: every documented metric, the class and reserve",
		  test_auto_balance },
		{ "execdispatch: the page, the queue, an address not reached, the histograms",
		  test_dispatch },
		{ NULL, NULL },
	};
	return run_suite("metrics", cases);
}
