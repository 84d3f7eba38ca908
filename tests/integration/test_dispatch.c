/*
 * test_dispatch.c - execdispatch running jobs: real PostgreSQL, real
 * execservers, real dispatchers.  Submit, claim and finish with each
 * outcome; bad input; the claim share of two dispatchers on a 4-slot
 * execserver and its growth when one stops; admission per service (two
 * waitgroups of one execserver); a cancel from a session that
 * owns nothing reaching the run within cancelPollMs + 200 ms; no claim and
 * no query while no execserver is connected; execctl's database commands;
 * a no_slot job claimed again with the same attempt, its outcome written
 * under its new claim.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/CUnit.h>

#include "dispatch_fixture.h"
#include "suite.h"

static struct dfix F;

static void test_setup(void)
{
	CU_ASSERT_FATAL(df_start(&F) == 0);
	CU_ASSERT_FATAL(df_start_exec(&F, 0, 4) == 0);
}

static void clear_queue(void)
{
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
}

/* An empty queue and dispatcher 0 started with /metrics on a free port,
 * which it returns. */
static int start_with_metrics(void)
{
	int mport;

	clear_queue();
	mport = df_start_with_metrics(&F, 0, NULL);
	CU_ASSERT_FATAL(mport > 0);
	return mport;
}

static void test_run_outcomes(void)
{
	long long ok, bad, slow, unknown, badjob, env;
	char buf[256];
	int mport = start_with_metrics();

	ok = df_submit(&F, "{\"command\":\"true\"}", 0);
	bad = df_submit(&F, "{\"command\":\"false\"}", 0);
	slow = df_submit(&F, "{\"command\":\"sleep\",\"args\":[\"0.3\"]}", 2);
	badjob = df_submit(&F, "{\"command\":\"nosuch\"}", 0);
	env = df_submit(&F,
			"{\"command\":\"sh\",\"args\":[\"-c\",\"echo $EXECDISPATCH_JOB_ID/"
			"$EXECDISPATCH_ATTEMPT\"],\"env\":[\"EXECDISPATCH_ATTEMPT=9\"]}",
			0);
	/* an unknown service: not offered by any execserver */
	unknown = pgtest_int(F.c, "SELECT execdispatch.submit('nope', '{\"command\":\"true\"}')");
	CU_ASSERT_FATAL(df_wait_final(&F, 30000) == 0);

	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf,
			    "SELECT state || '/' || attempts || "
			    "'/' || (receipt->>'exit_code') FROM execdispatch.job WHERE id = %lld",
			    ok),
		"done/1/0");
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf,
			    "SELECT state || '/' || error || "
			    "'/' || (receipt->>'exit_code') FROM execdispatch.job WHERE id = %lld",
			    bad),
		"failed/exit_status/1");
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(
			F.c, buf, sizeof buf,
			"SELECT state FROM execdispatch.job "
			"WHERE id = %lld AND started_at IS NOT NULL AND finished_at > started_at",
			slow),
		"done");
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf,
			    "SELECT state || '/' || error FROM "
			    "execdispatch.job WHERE id = %lld",
			    badjob),
		"failed/unknown_command: job.command: not configured for service work");
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf,
			    "SELECT state || '/' || error FROM "
			    "execdispatch.job WHERE id = %lld",
			    unknown),
		"failed/unknown_service: no reached instance offers service \"nope\"");
	/* every run that started records it, the short ones too (DQ_START
	 * sees them only when they are still running 100 ms on) */
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id IN (%lld, "
				   "%lld, %lld) AND started_at IS NOT NULL AND started_at <= "
				   "finished_at",
				   ok, bad, env),
			3);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id IN (%lld, "
				   "%lld) AND started_at IS NULL",
				   badjob, unknown),
			2);
	/* the program sees its row and attempt (the job's own entry replaced) */
	snprintf(buf, sizeof buf, "%lld/1\n", env);
	char got[256];
	CU_ASSERT_STRING_EQUAL(pgtest_text(F.c, got, sizeof got,
					   "SELECT receipt->>'stdout' FROM "
					   "execdispatch.job WHERE id = %lld",
					   env),
			       buf);
	/* nothing is held any more */
	CU_ASSERT_EQUAL(df_held(&F, "d0"), 0);
	/* a request with headers beyond 8 KB is refused, not buffered */
	char cmd[300];
	snprintf(cmd, sizeof cmd,
		 "curl -s -o /dev/null -w '%%{http_code}' -H \"X-Big: $(head -c 20000 /dev/zero | "
		 "tr '\\0' x)\" http://127.0.0.1:%d/metrics",
		 mport);
	FILE *big = popen(cmd, "r");
	char code[16] = "";
	if (big) {
		if (!fgets(code, sizeof code, big))
			code[0] = '\0';
		pclose(big);
	}
	if (strcmp(code, "400") != 0)
		fprintf(stderr, "metrics with big headers: %s\n", code);
	CU_ASSERT_STRING_EQUAL(code, "400");
	/* the counters of /metrics (the gauges follow at the next poll) */
	CU_ASSERT(df_wait_metric(mport, "execdispatch_held", 0, 5000) == 0);
	CU_ASSERT(df_wait_metric(mport, "execdispatch_admission", 5, 5000) == 0);
	CU_ASSERT_EQUAL(df_metric(mport, "execdispatch_claimed_total"), 6);
	CU_ASSERT_EQUAL(df_metric(mport, "execdispatch_outcomes_total{outcome=\"done\"}"), 3);
	CU_ASSERT_EQUAL(df_metric(mport, "execdispatch_outcomes_total{outcome=\"failed\"}"), 3);
	CU_ASSERT_EQUAL(df_metric(mport, "execdispatch_held"), 0);
	CU_ASSERT_EQUAL(df_metric(mport, "execdispatch_admission"), 5);
	CU_ASSERT_EQUAL(df_metric(mport, "execdispatch_database_up"), 1);
	CU_ASSERT(df_metric(mport, "execdispatch_statements_total") > 6);
	/* every held row and the life moved only as their tables allow */
	CU_ASSERT_EQUAL(df_metric(mport, "execdispatch_illegal_transitions_total"), 0);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 5000), 0);

	/* the retention janitor (retainDoneDays 7) removes old finished rows
	 * only, at the start */
	PQclear(pgtest_query(F.c,
			     "UPDATE execdispatch.job SET finished_at = now() - interval '8 days' "
			     "WHERE id IN (%lld, %lld)",
			     ok, bad));
	PQclear(pgtest_query(F.c,
			     "UPDATE execdispatch.job SET finished_at = now() - interval '6 days' "
			     "WHERE id = %lld",
			     slow));
	CU_ASSERT_FATAL(df_start_disp(&F, 0) == 0);
	for (int i = 0; i < 100 && pgtest_int(F.c,
					      "SELECT count(*) FROM execdispatch.job WHERE "
					      "id IN (%lld, %lld)",
					      ok, bad) > 0;
	     i++)
		harness_sleep_ms(50);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id IN "
				   "(%lld, %lld)",
				   ok, bad),
			0);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job"), 4);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 5000), 0);
	/* a clean stop removes the dispatcher's row */
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.dispatcher"), 0);
}

/* The execserver of these tests (4 slots) started again with `extra`
 * appended to its configuration, on a new port. */
static int restart_exec(const char *extra)
{
	char body[1536];

	snprintf(body, sizeof body, "%s%s", df_exec_body(4), extra);
	harness_stop(&F.es[0], 10000);
	return harness_restart(&F.es[0], 1, body, NULL);
}

/* A payload within the database's cap whose JOB is larger than the
 * execserver's maxFrameBytes (64 KiB here, a 100 000-byte payload):
 * libexecclient refuses it without sending it, the row ends failed with
 * bad_job naming the limit, at its first attempt, and the jobs around it
 * run as their first attempt on the same connection: the dispatcher never
 * loses its execserver.  The payload is all slashes, which the JOB carries
 * unescaped, so a payload under the database's cap fits an execserver of
 * the default 1 MiB (docs/dispatch.md, "Payload size"). */
static void test_payload_over_frame(void)
{
	enum {
		SLASHES = 100000
	};
	char *job = malloc(SLASHES + 64), buf[512];
	long long big, before, after[3];
	size_t len;

	CU_ASSERT_FATAL(job != NULL);
	clear_queue();
	CU_ASSERT_FATAL(restart_exec("maxFrameBytes: 65536\n") == 0);
	CU_ASSERT_FATAL(df_write_config(&F, 0, NULL) == 0);
	CU_ASSERT_FATAL(df_start_disp(&F, 0) == 0);
	before = df_submit(&F, "{\"command\":\"sleep\",\"args\":[\"2\"]}", 0);
	for (int i = 0; i < 200 && pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job "
						   "WHERE state = 'running'") < 1;
	     i++)
		harness_sleep_ms(50);
	int k = snprintf(job, SLASHES + 64, "{\"command\":\"true\",\"pad\":\"");
	memset(job + k, '/', SLASHES);
	strcpy(job + k + SLASHES, "\"}");
	big = df_submit(&F, job, 0);
	free(job);
	CU_ASSERT_FATAL(big > 0);
	for (int i = 0; i < 3; i++)
		after[i] = df_submit(&F, "{\"command\":\"sleep\",\"args\":[\"0.2\"]}", 0);
	CU_ASSERT_FATAL(df_wait_final(&F, 30000) == 0);
	pgtest_text(F.c, buf, sizeof buf,
		    "SELECT state || '/' || attempts || '/' || coalesce(error, '-') FROM "
		    "execdispatch.job WHERE id = %lld",
		    big);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "failed/1/bad_job: the JOB message is "));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "bytes, more than the 65536 bytes instance "));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "takes (its maxFrameBytes)"));
	/* sent as it is: 100 000 slashes, not 200 000 escaped ones */
	long long sent = atoll(strstr(buf, "message is ") ? strstr(buf, "message is ") + 11 : "0");
	CU_ASSERT(sent > SLASHES && sent < SLASHES + 2000);
	if (!strstr(buf, "failed/1/bad_job"))
		fprintf(stderr, "the big payload's row: %s\n", buf);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id IN "
				   "(%lld, %lld, %lld, %lld) AND state = 'done' AND attempts = 1",
				   before, after[0], after[1], after[2]),
			4);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 5000), 0);
	unsigned char *log = harness_read_file(F.log[0], &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(log);
	CU_ASSERT_PTR_NULL(strstr((char *)log, "no execserver connected"));
	CU_ASSERT_PTR_NULL(strstr((char *)log, "1009"));
	free(log);
	clear_queue();
	CU_ASSERT_FATAL(restart_exec("") == 0);
	/* the later tests' files name the new port */
	CU_ASSERT(df_write_config(&F, 0, NULL) == 0 && df_write_config(&F, 1, NULL) == 0);
}

/* Samples the held rows of d0 and d1 for ms; the largest counts seen. */
static void sample_held(int ms, long long *max0, long long *max1)
{
	long long end = harness_now_ms() + ms;

	*max0 = *max1 = 0;
	while (harness_now_ms() < end) {
		long long a = df_held(&F, "d0"), b = df_held(&F, "d1");
		if (a > *max0)
			*max0 = a;
		if (b > *max1)
			*max1 = b;
		harness_sleep_ms(20);
	}
}

static int two_clients(struct json_object *st, void *arg)
{
	(void)arg;
	return harness_json_int(st, "clients", NULL) == (long long)(size_t)arg;
}

/* Waits (10 s at most) until the dispatcher with /metrics on port
 * announces a claim share of share: it has read the HELLO that gives it. */
static int admission_is(int port, long long share)
{
	for (int ms = 0; ms < 10000; ms += 50) {
		if (df_metric(port, "execdispatch_admission") == share)
			return 1;
		harness_sleep_ms(50);
	}
	return 0;
}

static void test_claim_shares(void)
{
	long long m0, m1;

	clear_queue();
	int p0 = df_start_with_metrics(&F, 0, NULL), p1 = df_start_with_metrics(&F, 1, NULL);
	CU_ASSERT_FATAL(p0 > 0 && p1 > 0);
	CU_ASSERT_FATAL(harness_wait_status(&F.es[0], 5000, two_clients, (void *)2) == 0);
	/* both have read the HELLO with clients 2 (on a loaded machine the
	 * second dispatcher's arrival reaches the first one late) */
	CU_ASSERT_FATAL(admission_is(p0, 3) && admission_is(p1, 3));
	for (int i = 0; i < 24; i++)
		df_submit(&F, "{\"command\":\"sleep\",\"args\":[\"0.5\"]}", 0);
	/* 4 slots, 2 clients: ceil(4/2) + 1 headroom = 3 each */
	sample_held(1500, &m0, &m1);
	fprintf(stderr, "held at most: %lld and %lld (share 3 each); ", m0, m1);
	CU_ASSERT(m0 <= 3 && m1 <= 3);
	CU_ASSERT(m0 >= 2 && m1 >= 2);
	/* one leaves: the survivor's share becomes 4 + 1 */
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 10000), 0);
	CU_ASSERT_EQUAL(df_held(&F, "d0"), 0);
	CU_ASSERT_FATAL(harness_wait_status(&F.es[0], 5000, two_clients, (void *)1) == 0);
	CU_ASSERT(admission_is(p1, 5));
	sample_held(1500, &m0, &m1);
	fprintf(stderr, "the survivor %lld (share 5)\n", m1);
	CU_ASSERT_EQUAL(m0, 0);
	CU_ASSERT(m1 >= 4 && m1 <= 5);
	CU_ASSERT_FATAL(df_wait_final(&F, 30000) == 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE state = 'done' "
				   "AND attempts = 1"),
			24);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 1, SIGTERM, 5000), 0);
	/* the later tests' files have no metrics port */
	CU_ASSERT(df_write_config(&F, 0, NULL) == 0 && df_write_config(&F, 1, NULL) == 0);
}

static int running_n(struct json_object *st, void *arg)
{
	return harness_json_int(st, "waitgroups", "wg", "running", NULL) == (long long)(size_t)arg;
}

static void test_cancel_from_elsewhere(void)
{
	long long id, t0, took;
	char buf[64];
	int mport = start_with_metrics();

	id = df_submit(&F, "{\"command\":\"sleep\",\"args\":[\"30\"]}", 0);
	CU_ASSERT_FATAL(harness_wait_status(&F.es[0], 5000, running_n, (void *)1) == 0);
	for (int i = 0; i < 100 && strcmp(pgtest_text(F.c, buf, sizeof buf,
						      "SELECT state FROM "
						      "execdispatch.job WHERE id = %lld",
						      id),
					  "running") != 0;
	     i++)
		harness_sleep_ms(20);
	CU_ASSERT_STRING_EQUAL(buf, "running");
	/* the test's session owns nothing: the row is the only transport */
	t0 = harness_now_ms();
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.cancel(%lld)", id),
		"requested");
	CU_ASSERT_EQUAL(harness_wait_status(&F.es[0], 5000, running_n, (void *)0), 0);
	took = harness_now_ms() - t0;
	fprintf(stderr,
		"cancel: the execserver's slot was free %lld ms after the commit "
		"(cancelPollMs 100)\n",
		took);
	/* the process is gone and the slot free soon after (the execserver's
	 * kill and the /status polling add to it; loose under load) */
	CU_ASSERT(took <= 1000);
	CU_ASSERT_STRING_EQUAL(pgtest_text(F.c, buf, sizeof buf,
					   "SELECT state FROM execdispatch.job "
					   "WHERE id = %lld",
					   id),
			       "cancelled");
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.cancel(%lld)", id),
		"not_found_or_finished");
	/* the dispatcher dropped the run's result: the row stays cancelled */
	CU_ASSERT(df_wait_metric(mport, "execdispatch_held", 0, 5000) == 0);
	CU_ASSERT_STRING_EQUAL(pgtest_text(F.c, buf, sizeof buf,
					   "SELECT state || coalesce(receipt::text, "
					   "'') FROM execdispatch.job WHERE id = %lld",
					   id),
			       "cancelled");
	/* the cancel reached the run (the dispatcher noticed it and sent
	 * CANCEL at once) within cancelPollMs + 200 ms of its commit, measured
	 * on the database's clock */
	CU_ASSERT_EQUAL(df_metric(mport, "execdispatch_cancel_latency_seconds_count"), 1);
	long long lat = (long long)(df_metric_value(mport,
						    "execdispatch_cancel_latency_seconds_sum") *
				    1000);
	fprintf(stderr, "cancel: noticed %lld ms after the commit\n", lat);
	CU_ASSERT(lat >= 0 && lat <= 100 + 200);
	CU_ASSERT_EQUAL(df_metric(mport, "execdispatch_outcomes_total{outcome=\"dropped\"}"), 1);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 5000), 0);
}

/* Lines of the server log that record a statement (only the role
 * "probe" has log_statement = all). */
static int logged_statements(void)
{
	char path[300];
	size_t len;
	unsigned char *txt;
	int n = 0;

	snprintf(path, sizeof path, "%s/postgres.log", F.pg.dir);
	txt = harness_read_file(path, &len);
	for (char *p = (char *)txt; p && (p = strstr(p, "LOG:  execute <unnamed>")); p++)
		n++;
	free(txt);
	return n;
}

static void test_no_execserver(void)
{
	char buf[64], conninfo[600];
	int before, after;
	const char *saved_conninfo = F.conninfo;
	int saved_nes = F.nes;

	clear_queue();
	/* a dispatcher whose only execserver address answers nothing,
	 * connected as a role whose statements the server logs */
	PQclear(pgtest_query(F.c, "CREATE ROLE probe LOGIN SUPERUSER; "
				  "ALTER ROLE probe SET log_statement = 'all'"));
	snprintf(conninfo, sizeof conninfo, "host=127.0.0.1 port=%d user=probe dbname=postgres",
		 F.pg.port);
	F.conninfo = conninfo;
	F.nes = 0;
	CU_ASSERT_FATAL(df_write_config(&F, 2, NULL) == 0);
	F.nes = saved_nes;
	F.conninfo = saved_conninfo;
	long long t0 = harness_now_ms();
	CU_ASSERT_FATAL(df_start_disp(&F, 2) == 0);
	long long id = df_submit(&F, "{\"command\":\"true\"}", 0);
	/* past the start: the first poll found no execserver */
	CU_ASSERT(df_wait_log(&F, 2, "no execserver connected: claiming nothing", 10000) == 0);
	before = logged_statements();
	/* sleep: the statements of a 2 s window are counted (the rate) */
	harness_sleep_ms(2000);
	after = logged_statements();
	CU_ASSERT_STRING_EQUAL(pgtest_text(F.c, buf, sizeof buf,
					   "SELECT state FROM execdispatch.job "
					   "WHERE id = %lld",
					   id),
			       "queued");
	/* the heartbeat (1 s) only, its beat and the rescue after it (the
	 * window may end between the two), and the look at the schedules
	 * (the first just after the start, then every scheduleCheckSec, 10
	 * s): no claim every 100 ms (20 in 2 s), no cancel poll */
	fprintf(stderr, "statements in 2 s without an execserver: %d\n", after - before);
	CU_ASSERT(after - before >= 1 && after - before <= 7);
	/* position() and execctl position say why the job waits (the beat
	 * writes it into the dispatcher row; migration 007) */
	char out[1024];
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "position --db '%s' %lld", F.conninfo, id), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(
		out, "(no dispatcher claims: d2: no execserver connected (ws://127.0.0.1:9: "));
	if (!strstr(out, "no dispatcher claims: d2"))
		fprintf(stderr, "execctl position: %s\n", out);
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "show --db '%s' %lld", F.conninfo, id), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nposition "));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "(no dispatcher claims: d2: no execserver connected"));
	CU_ASSERT_EQUAL(df_stop_disp(&F, 2, SIGTERM, 5000), 0);
	long long lived = harness_now_ms() - t0;
	/* why nothing is claimed, said again every 10 polls (1 s here), not
	 * once for good, and not more often: at most one line a second of the
	 * process's life (however long a loaded machine made it) */
	size_t len;
	unsigned char *log = harness_read_file(F.log[2], &len);
	int said = 0;
	for (char *p = (char *)log; p && (p = strstr(p, "no execserver connected: claiming "
							"nothing (ws://127.0.0.1:9: "));
	     p++)
		said++;
	free(log);
	if (said < 2 || said > lived / 1000 + 1)
		fprintf(stderr, "said %d times in %lld ms\n", said, lived);
	CU_ASSERT(said >= 2 && said <= lived / 1000 + 1);
	clear_queue();
}

/* harness_wait_until's condition: the file arg exists. */
static int file_exists(void *arg)
{
	return access((const char *)arg, F_OK) == 0;
}

struct rows_wait {
	const char *where;
	long long n;
};

static int rows_are(void *arg)
{
	const struct rows_wait *w = arg;

	return pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE %s", w->where) == w->n;
}

/* Waits until n rows of job match where; 0, or -1 after ms. */
static int wait_rows(const char *where, long long n, int ms)
{
	struct rows_wait w = { where, n };

	return harness_wait_until(rows_are, &w, ms);
}

/* The retry policy of service "work" from the services: block
 * (docs/dispatch.md, "Retries"): a program that exits 75 at its first
 * attempt and 0 at its second runs twice, the second attempt not before
 * retryDelaySec (3 s: below 5 s there is no jitter) after the first
 * started, and `execctl show` says when meanwhile; with maxAttempts 1
 * the same program fails at its first attempt. */
static void test_retry_exit_code(void)
{
	static const char job[] = "{\"command\":\"sh\",\"args\":[\"-c\",\"[ "
				  "\\\"$EXECDISPATCH_ATTEMPT\\\" = 1 ] && exit 75; exit 0\"]}";
	char out[4096], after[64], cmd[128];
	long long id;

	clear_queue();
	CU_ASSERT_FATAL(df_write_config(&F, 0,
					"services:\n  work:\n    retryDelaySec: 3\n"
					"    retryExitCodes: [75, 69]\n    maxAttempts: 3\n") == 0);
	CU_ASSERT_FATAL(df_start_disp(&F, 0) == 0);
	id = df_submit(&F, job, 0);
	snprintf(cmd, sizeof cmd, "state = 'queued' AND attempts = 1 AND id = %lld", id);
	CU_ASSERT_FATAL(wait_rows(cmd, 1, 20000) == 0);
	pgtest_text(F.c, after, sizeof after,
		    "SELECT start_after FROM execdispatch.job WHERE id = %lld", id);
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "show -c %s %lld", F.cfg[0], id), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nnext attempt "));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, after));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "(attempt 2)\n"));
	/* the delay counts from the first attempt's end: its start plus 3 s
	 * at least, and not much more */
	CU_ASSERT_EQUAL(
		pgtest_int(F.c,
			   "SELECT count(*) FROM execdispatch.job WHERE id = %lld AND "
			   "start_after - started_at BETWEEN interval '3 s' AND interval '6 s' "
			   "AND error = 'exit_status'",
			   id),
		1);
	CU_ASSERT_FATAL(df_wait_final(&F, 20000) == 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id = %lld AND "
				   "state = 'done' AND attempts = 2 AND started_at >= '%s'",
				   id, after),
			1);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 5000), 0);

	/* maxAttempts 1: exit 75 is final */
	CU_ASSERT_FATAL(df_write_config(&F, 0, "services:\n  work: {maxAttempts: 1}\n") == 0);
	CU_ASSERT_FATAL(df_start_disp(&F, 0) == 0);
	id = df_submit(&F, job, 0);
	CU_ASSERT_FATAL(df_wait_final(&F, 20000) == 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id = %lld AND "
				   "state = 'failed' AND attempts = 1 AND error = 'exit_status'",
				   id),
			1);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 5000), 0);
	CU_ASSERT_FATAL(df_write_config(&F, 0, NULL) == 0);
}

/* execctl jobs: 120 queued jobs (due in an hour: nobody claims them) in
 * pages of 50 by keyset (50, 50, 20: each job once, "next: --after ID"
 * only after a full page); a bad state refused; execctl stats counts
 * them; a cancelled one is listed under its state; the list of every
 * state in id order, cut by --since; a service without a state refused. */
static void test_execctl_listing(void)
{
	static char out[32768];
	char after[40] = "", seen[121][24];
	int pages[3], nseen = 0;

	clear_queue();
	PQclear(pgtest_query(
		F.c, "SELECT execdispatch.submit('lst', '{\"command\": \"true\"}', "
		     "g %% 2 * 2, now() + interval '1 hour') FROM generate_series(1, 120) g"));
	for (int p = 0; p < 3; p++) {
		CU_ASSERT_EQUAL(df_execctl(out, sizeof out,
					   "jobs --db '%s' --state queued -s lst -n 50 %s",
					   F.conninfo, after),
				0);
		pages[p] = 0;
		for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
			if (line[0] >= '0' && line[0] <= '9' && nseen < 121) {
				snprintf(seen[nseen], sizeof seen[nseen], "%.*s",
					 (int)strcspn(line, " "), line);
				for (int i = 0; i < nseen; i++)
					CU_ASSERT(strcmp(seen[i], seen[nseen]) != 0);
				nseen++;
				pages[p]++;
			}
			after[0] = '\0';
			if (strncmp(line, "next: ", 6) == 0)
				snprintf(after, sizeof after, "%s", line + 6);
		}
	}
	CU_ASSERT(pages[0] == 50 && pages[1] == 50 && pages[2] == 20);
	CU_ASSERT_EQUAL(nseen, 120);
	CU_ASSERT_EQUAL(after[0], '\0'); /* no next after the short page */
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "jobs --db '%s' --state bogus", F.conninfo), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "--state bogus: expected queued"));
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "stats --db '%s' --json", F.conninfo), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"service\":\"lst\",\"queued\":120,"));
	CU_ASSERT_PTR_NOT_NULL(
		strstr(out, "{\"state\":\"queued\",\"rows\":120,\"estimated\":false}"));
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "cancel --db '%s' %s", F.conninfo, seen[7]), 0);
	CU_ASSERT_EQUAL(
		df_execctl(out, sizeof out, "jobs --db '%s' --state cancelled -s lst", F.conninfo),
		0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, seen[7]));
	CU_ASSERT_PTR_NULL(strstr(out, "next:"));
	/* every state: id order, newest first; --since cut at the first id
	 * created at or after it (one minute per id here, the lowest id made
	 * newest: left out below the cut, as docs/dispatch.md says) */
	PQclear(pgtest_query(
		F.c,
		"UPDATE execdispatch.job SET created_at = '2026-01-01 00:00:00+00'::timestamptz "
		"- make_interval(mins => ((SELECT max(id) FROM execdispatch.job) - id)::int)"));
	PQclear(pgtest_query(F.c,
			     "UPDATE execdispatch.job SET created_at = '2026-01-01 00:00:00+00' "
			     "WHERE id = (SELECT min(id) FROM execdispatch.job)"));
	long long top = pgtest_int(F.c, "SELECT max(id) FROM execdispatch.job");
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out,
				   "jobs --db '%s' --json -n 50 --since '2025-12-31 23:29:30+00'",
				   F.conninfo),
			0);
	int rows = 0;
	long long last = top + 1, id;
	for (const char *p = strstr(out, "\"id\":"); p; p = strstr(p + 1, "\"id\":")) {
		id = atoll(p + 5);
		CU_ASSERT(id == last - 1); /* each id, descending */
		last = id;
		rows++;
	}
	CU_ASSERT_EQUAL(rows, 31); /* max - 30 .. max */
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out,
				   "jobs --db '%s' --json --since '2026-01-01 00:00:01+00'",
				   F.conninfo),
			0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "[]"));
	/* one service's jobs are listed per state */
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "jobs --db '%s' -s lst", F.conninfo), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "--service needs --state"));
	clear_queue();
}

static void test_execctl_db(void)
{
	char out[2048], id[32];
	long long qid;

	clear_queue();
	CU_ASSERT_FATAL(df_write_config(&F, 0, NULL) == 0);
	CU_ASSERT_FATAL(df_start_disp(&F, 0) == 0);
	/* submit -w: the id, then the outcome; exit status of the program */
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "submit -c %s -s work -w -- true", F.cfg[0]),
			0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, ": done"));
	/* ... and the receipt as run shows it, said once */
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "submit -c %s -s work -w -- false", F.cfg[0]),
			1);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, ": failed (exit_status)\n"
					   "execctl: the job exited with status 1\n"));
	/* a payload that is not JSON: one line, exit 2, nothing queued */
	CU_ASSERT_EQUAL(
		df_execctl(out, sizeof out, "submit -c %s -s work --job 'not json'", F.cfg[0]), 2);
	CU_ASSERT(strncmp(out, "execctl: submit: --job: ", 24) == 0 && !strstr(out, "CONTEXT"));
	/* a payload given as the command, without --job: refused, not queued
	 * as a command named '{"command"...' */
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "submit -c %s -s work '{\"command\":\"true\"}'",
				   F.cfg[0]),
			2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "looks like a JSON job: give it with --job"));
	/* show, with --db instead of the file */
	CU_ASSERT_EQUAL(
		df_execctl(out, sizeof out, "submit --db '%s' -s work -- sleep 0.1", F.conninfo),
		0);
	snprintf(id, sizeof id, "%lld", atoll(out));
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "wait -c %s %s", F.cfg[0], id), 0);
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "show -c %s %s", F.cfg[0], id), 0);
	/* one column for the values, as wide as the longest name */
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nrunner_instance     d0\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nposition_wanted_at  "));
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "show -c %s --json %s", F.cfg[0], id), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"state\":\"done\""));
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "cancel -c %s %s", F.cfg[0], id), 122);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "not_found_or_finished"));
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 5000), 0);

	/* no dispatcher: queued; position, wait --timeout, cancel */
	qid = df_submit(&F, "{\"command\":\"true\"}", 0);
	df_submit(&F, "{\"command\":\"true\"}", 0);
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "submit -c %s -s work -p interactive -- true",
				   F.cfg[0]),
			0);
	snprintf(id, sizeof id, "%lld", qid + 1);
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "position -c %s %s", F.cfg[0], id), 0);
	/* the interactive one and qid; why it waits (migration 007) */
	CU_ASSERT_STRING_EQUAL(out, "0 running, 2 ahead in the queue (no dispatcher is running)\n");
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "wait -c %s --wait-timeout 1 %s", F.cfg[0], id),
			121);
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "cancel -c %s %s", F.cfg[0], id), 0);
	CU_ASSERT_STRING_EQUAL(out, "cancelled\n");
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "wait -c %s %s", F.cfg[0], id), 120);
	CU_ASSERT(strstr(out, ": cancelled\n") && !strstr(out, "cancelled cancelled"));
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "show -c %s 999999", F.cfg[0]), 122);
	/* refused by submit(): one line, no CONTEXT lines, exit 2 */
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "submit -c %s -s 'bad name' -- true", F.cfg[0]),
			2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "service must be 1 to 64"));
	CU_ASSERT(strchr(out, '\n') == out + strlen(out) - 1);
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "submit -c %s -- true", F.cfg[0]), 2);
	/* numbers: garbage, overflow and out of range refused, naming the option */
	static const struct {
		const char *args, *word;
	} bad[] = {
		{ "submit --db x -s work --after 5x -- true",
		  "submit: --after 5x: expected seconds" },
		{ "submit --db x -s work --after -1 -- true",
		  "submit: --after -1: expected seconds" },
		{ "submit --db x -s work --after 4294967297 -- true", "--after 4294967297" },
		{ "submit --db x -s work -p 12abc -- true", "submit: --priority 12abc: expected" },
		{ "submit --db x -s work -p 1001 -- true",
		  "--priority 1001: expected an integer in" },
		{ "submit --db x -s work -p 99999999999999999999 -- true", "--priority 9999" },
		{ "wait --db x --timeout ten 1", "wait: --wait-timeout ten: expected seconds" },
		{ "wait --db x --wait-timeout 99999999999 1", "wait: --wait-timeout 99999999999" },
		{ "submit --db x -s work --job '[1]'", "submit: --job: a JSON object is required" },
		{ "pause --db x", "pause: one SERVICE is required" },
		{ "resume --db x a b", "resume: one SERVICE is required" },
		{ "retry --db x abc", "retry: one job id (a positive integer) is required" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "%s", bad[i].args), 2);
		CU_ASSERT_PTR_NOT_NULL(strstr(out, bad[i].word));
		if (!strstr(out, bad[i].word))
			fprintf(stderr, "\n  execctl %s: %s\n", bad[i].args, out);
	}
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "position --db 'host=127.0.0.1 port=1' 1"),
			111);
	/* pause() refuses the name: one line, exit 2 */
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "pause -c %s 'bad name'", F.cfg[0]), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "pause: service must be 1 to 64"));
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "retry -c %s 999999", F.cfg[0]), 122);
	CU_ASSERT_STRING_EQUAL(out, "not_found_or_not_finished\n");
	clear_queue();
}

static void test_position(void)
{
	long long ids[7];
	char buf[256], state[32];

	clear_queue();
	CU_ASSERT_FATAL(df_write_config(&F, 0, NULL) == 0);
	for (int i = 0; i < 7; i++)
		ids[i] = df_submit(&F, "{\"command\":\"sleep\",\"args\":[\"3\"]}", 0);
	CU_ASSERT_FATAL(df_start_disp(&F, 0) == 0);
	/* 4 slots: 4 running, 1 claimed (share 4 + 1), 2 queued */
	CU_ASSERT_FATAL(harness_wait_status(&F.es[0], 5000, running_n, (void *)4) == 0);
	for (int i = 0;
	     i < 100 && pgtest_int(F.c, "SELECT count(*) FILTER (WHERE state = 'running') "
					"* 10 + count(*) FILTER (WHERE state = 'claimed') FROM "
					"execdispatch.job") != 41;
	     i++)
		harness_sleep_ms(20);
	long long claimed = pgtest_int(F.c,
				       "SELECT id FROM execdispatch.job WHERE state = 'claimed'");
	CU_ASSERT_FATAL(claimed > 0);
	/* the first ask: no execserver figure yet; the dispatcher sees the ask
	 * in its next cancel poll and writes the POSITION into the row */
	pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.position(%lld)::text", claimed);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"state\": \"claimed\""));
	for (int i = 0; i < 50 && !strstr(buf, "capacity"); i++) {
		harness_sleep_ms(50);
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.position(%lld)::text",
			    claimed);
	}
	fprintf(stderr, "position of the claimed row: %s\n", buf);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"ahead\": 0"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"running\": 4"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"capacity\": 4"));
	/* a queued row: the claimed one and the queued ones before it */
	pgtest_text(F.c, state, sizeof state, "SELECT state FROM execdispatch.job WHERE id = %lld",
		    ids[6]);
	CU_ASSERT_STRING_EQUAL(state, "queued");
	pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.position(%lld)::text", ids[6]);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"ahead\": 2"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"running\": 4"));
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGKILL, 5000), SIGKILL);
	clear_queue();
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.dispatcher"));
}

/* Progress of running jobs (migration 010, progress_write.c): three jobs
 * report; with progressWriteSec 1 each row gets its latest value within
 * a few seconds, and the dispatcher writes them with one statement per
 * tick (pg_stat_statements is not needed: the dispatcher's log of the
 * statement count stays out of it; the rows are the proof); position()
 * and execctl position and show show it; a row that finished keeps its
 * last value. */
static long long row_has_progress(const char *id)
{
	return pgtest_int(F.c,
			  "SELECT count(*) FROM execdispatch.job WHERE id = %s AND "
			  "progress->>'text' = 'half'",
			  id);
}

static void test_progress_rows(void)
{
	const char *job = "{\"command\":\"sh\",\"args\":[\"-c\",\"echo 0.25 >&3; "
			  "sleep 0.3; echo '50% half' >&3; sleep 4; echo '1 done' >&3\"]}";
	long long ids[3];
	char id[24], buf[512], out[4096];

	clear_queue();
	CU_ASSERT_FATAL(df_write_config(&F, 0, "progressWriteSec: 1\n") == 0);
	for (int i = 0; i < 3; i++)
		ids[i] = df_submit(&F, job, 0);
	CU_ASSERT_FATAL(df_start_disp(&F, 0) == 0);
	for (int i = 0; i < 3; i++) {
		snprintf(id, sizeof id, "%lld", ids[i]);
		int k = 0;
		while (k < 100 && row_has_progress(id) != 1) {
			harness_sleep_ms(50); /* a poll: the row changes when written */
			k++;
		}
		CU_ASSERT_EQUAL(row_has_progress(id), 1);
	}
	pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.position(%lld)::text", ids[0]);
	CU_ASSERT_PTR_NOT_NULL(
		strstr(buf, "\"progress\": {\"text\": \"half\", \"fraction\": 0.5}"));
	if (!strstr(buf, "half"))
		fprintf(stderr, "position of a running row: %s\n", buf);
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "position --db '%s' %lld", F.conninfo, ids[0]),
			0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "running: 50% half"));
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "show --db '%s' %lld", F.conninfo, ids[0]), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "running: 50% half"));
	/* the end: the last value is written before the DONE's outcome or
	 * stays 0.5; a finished row keeps what it had */
	CU_ASSERT(df_wait_final(&F, 15000) == 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE state = "
					"'done' AND progress IS NOT NULL"),
			3);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 10000), 0);
	clear_queue();
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.dispatcher"));
}

static long long submit_to(const char *service, const char *job, int priority)
{
	return pgtest_int(F.c, "SELECT execdispatch.submit('%s', '%s', %d)", service, job,
			  priority);
}

static long long local_running(void)
{
	return pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE service = 'hostwork' "
			       "AND state = 'running'");
}

/* Processes on this host whose command line is exactly argv (n words). */
static int count_processes(const char *const *argv, int n)
{
	char want[256], got[256], path[300];
	size_t len = 0;
	int count = 0;
	struct dirent *e;
	DIR *dir = opendir("/proc");

	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(want + len, sizeof want - len, "%s", argv[i]) + 1;
	while (dir && (e = readdir(dir))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		size_t r = fread(got, 1, sizeof got, f);
		fclose(f);
		count += r == len && memcmp(got, want, len) == 0;
	}
	if (dir)
		closedir(dir);
	return count;
}

static void test_local(void)
{
	static const char *const big_run[] = { "/bin/sleep", "7.5" };
	char buf[256];
	long long echo, fail, unknown, stream, big, cancel, notarray, nullenv, manyargs, cut;

	clear_queue();
	CU_ASSERT_FATAL(df_write_config(&F, 0,
					"localSlots: 4\n"
					"services:\n"
					"  hostwork:\n"
					"    local: true\n"
					"    commands:\n"
					"      echo: {prog: /bin/echo, args: [\"-n\"]}\n"
					"      false: {prog: /bin/false}\n"
					"      sleep: {prog: /bin/sleep}\n"
					"      sh: {prog: /bin/sh}\n") == 0);
	CU_ASSERT_FATAL(df_start_disp(&F, 0) == 0);
	echo = submit_to("hostwork", "{\"command\":\"echo\",\"args\":[\"hi\"]}", 0);
	/* progress lines as on an execserver: fd 3 takes them (here they go
	 * nowhere), EXECSERVER_PROGRESS_FD names it; a job may not set it */
	long long prog = submit_to("hostwork",
				   "{\"command\":\"sh\",\"args\":[\"-c\",\"echo 0.5 >&3 && "
				   "printf %s \\\"$EXECSERVER_PROGRESS_FD\\\"\"]}",
				   0);
	long long progenv = submit_to(
		"hostwork", "{\"command\":\"sh\",\"env\":[\"EXECSERVER_PROGRESS_FD=4\"]}", 0);
	fail = submit_to("hostwork", "{\"command\":\"false\"}", 0);
	unknown = submit_to("hostwork", "{\"command\":\"rm\"}", 0);
	stream = submit_to("hostwork", "{\"command\":\"echo\",\"stdin\":\"http://x/\"}", 0);
	/* args and env that are not arrays (json-c aborts on their length) or
	 * too long: refused, the dispatcher lives on */
	notarray = submit_to("hostwork", "{\"command\":\"echo\",\"args\":\"hi\"}", 0);
	nullenv = submit_to("hostwork", "{\"command\":\"echo\",\"env\":null}", 0);
	manyargs = pgtest_int(
		F.c,
		"SELECT execdispatch.submit('hostwork', jsonb_build_object('command', "
		"'echo', 'args', (SELECT jsonb_agg('x'::text) FROM generate_series(1, 300))))");
	/* an unknown command of 81 bytes: its name, cut to 64 bytes in the
	 * error, ends in half a character, which the database refuses as text */
	cut = submit_to(
		"hostwork",
		"{\"command\":\"a\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"
		"\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"
		"\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"
		"\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\"}",
		0);
	CU_ASSERT_FATAL(df_wait_final(&F, 10000) == 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(pgtest_text(F.c, buf, sizeof buf,
						  "SELECT state || '/' || error "
						  "FROM execdispatch.job WHERE id = %lld",
						  cut),
				      "failed/unknown_command: a"));
	CU_ASSERT_PTR_NOT_NULL(strstr(pgtest_text(F.c, buf, sizeof buf,
						  "SELECT state || '/' || error "
						  "FROM execdispatch.job WHERE id = %lld",
						  notarray),
				      "failed/bad_job: job.args: an array of at most 254 strings"));
	CU_ASSERT_PTR_NOT_NULL(strstr(pgtest_text(F.c, buf, sizeof buf,
						  "SELECT state || '/' || error "
						  "FROM execdispatch.job WHERE id = %lld",
						  nullenv),
				      "failed/bad_job: job.env"));
	CU_ASSERT_PTR_NOT_NULL(strstr(pgtest_text(F.c, buf, sizeof buf,
						  "SELECT state || '/' || error "
						  "FROM execdispatch.job WHERE id = %lld",
						  manyargs),
				      "failed/bad_job: job.args"));
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT max(attempts) FROM execdispatch.job"), 1);
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf,
			    "SELECT state || '/' || coalesce(receipt->>'stdout', '') "
			    "FROM execdispatch.job WHERE id = %lld",
			    prog),
		"done/3");
	CU_ASSERT_PTR_NOT_NULL(strstr(pgtest_text(F.c, buf, sizeof buf,
						  "SELECT state || '/' || error "
						  "FROM execdispatch.job WHERE id = %lld",
						  progenv),
				      "failed/bad_job: job.env[0]: EXECSERVER_PROGRESS_FD"));
	/* run on this host, with the same receipt fields as an execserver's */
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(
			F.c, buf, sizeof buf,
			"SELECT state || '/' || "
			"(receipt->>'stdout') || '/' || (receipt->>'local') FROM execdispatch.job "
			"WHERE id = %lld",
			echo),
		"done/hi/true");
	CU_ASSERT_STRING_EQUAL(pgtest_text(F.c, buf, sizeof buf,
					   "SELECT state || '/' || error "
					   "FROM execdispatch.job WHERE id = %lld",
					   fail),
			       "failed/exit_status");
	CU_ASSERT_PTR_NOT_NULL(strstr(pgtest_text(F.c, buf, sizeof buf,
						  "SELECT state || '/' || error "
						  "FROM execdispatch.job WHERE id = %lld",
						  unknown),
				      "failed/unknown_command"));
	CU_ASSERT_PTR_NOT_NULL(strstr(pgtest_text(F.c, buf, sizeof buf,
						  "SELECT state || '/' || error "
						  "FROM execdispatch.job WHERE id = %lld",
						  stream),
				      "failed/bad_job: job.stdin"));

	/* 4 local slots, one of them kept for priority >= 2 */
	for (int i = 0; i < 5; i++)
		submit_to("hostwork", "{\"command\":\"sleep\",\"args\":[\"3\"]}", 0);
	for (int i = 0; i < 100 && local_running() < 3; i++)
		harness_sleep_ms(20);
	/* several polls pass, and the fourth slot stays free */
	CU_ASSERT(df_wait_statements(&F, 4, 5000) == 0);
	CU_ASSERT_EQUAL(local_running(), 3);
	big = submit_to("hostwork", "{\"command\":\"sleep\",\"args\":[\"7.5\"]}", 2);
	for (int i = 0; i < 100 && local_running() < 4; i++)
		harness_sleep_ms(20);
	CU_ASSERT_EQUAL(local_running(), 4);
	CU_ASSERT_STRING_EQUAL(pgtest_text(F.c, buf, sizeof buf,
					   "SELECT state FROM execdispatch.job "
					   "WHERE id = %lld",
					   big),
			       "running");
	CU_ASSERT_EQUAL(count_processes(big_run, 2), 1);
	/* a cancel reaches a local run too: its process group is killed */
	cancel = big;
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.cancel(%lld)", cancel),
		"requested");
	for (int i = 0; i < 50 && local_running() > 3; i++)
		harness_sleep_ms(20);
	CU_ASSERT(local_running() <= 3);
	/* the process itself is gone within a few cancel polls (100 ms),
	 * though no exec-bound row is held */
	for (int i = 0; i < 100 && count_processes(big_run, 2) > 0; i++)
		harness_sleep_ms(20);
	CU_ASSERT_EQUAL(count_processes(big_run, 2), 0);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGKILL, 5000), SIGKILL);
	clear_queue();
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.dispatcher"));
}

/* Retention keeps up with more than one batch (1000 rows) of finished
 * rows: the janitor goes on while its batches are full. */
static void test_retention(void)
{
	clear_queue();
	PQclear(pgtest_query(F.c, "INSERT INTO execdispatch.job (service, job, state, finished_at) "
				  "SELECT 'work', '{}', 'done', now() - interval '3 days' "
				  "FROM generate_series(1, 2500)"));
	PQclear(pgtest_query(F.c,
			     "INSERT INTO execdispatch.job (service, job, state, finished_at) "
			     "SELECT 'work', '{}', 'done', now() FROM generate_series(1, 10)"));
	CU_ASSERT_FATAL(df_write_config(&F, 0, "retainDoneDays: 1\n") == 0);
	CU_ASSERT_FATAL(df_start_disp(&F, 0) == 0);
	for (int i = 0; i < 100 && pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job") > 10;
	     i++)
		harness_sleep_ms(100);
	/* the old ones gone, the recent ones kept */
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job"), 10);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 5000), 0);
	clear_queue();
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.dispatcher"));
}

/* A finished row locked by another transaction (an application that
 * cancelled it in a transaction still open): the janitor skips it, and
 * the statements queued behind the janitor (the heartbeat) are not held:
 * the heartbeat never gets as old as staleAfterSec (3 s), which would
 * let another dispatcher rescue, and so rerun, every row held here. */
static void test_retention_locked_row(void)
{
	PGconn *other = pgtest_connect(F.pg.conninfo);
	long long age_ms, max_ms = 0, t0;

	CU_ASSERT_FATAL(other != NULL);
	clear_queue();
	PQclear(pgtest_query(F.c, "INSERT INTO execdispatch.job (service, job, state, finished_at) "
				  "SELECT 'work', '{}', 'done', now() - interval '3 days' "
				  "FROM generate_series(1, 3)"));
	PQclear(pgtest_query(other, "BEGIN"));
	PQclear(pgtest_query(other, "SELECT id FROM execdispatch.job WHERE id = (SELECT min(id) "
				    "FROM execdispatch.job) FOR UPDATE"));
	CU_ASSERT_FATAL(df_write_config(&F, 0, "retainDoneDays: 1\n") == 0);
	CU_ASSERT_FATAL(df_start_disp(&F, 0) == 0);
	for (t0 = harness_now_ms(); harness_now_ms() - t0 < 7000; harness_sleep_ms(100)) {
		age_ms = pgtest_int(F.c, "SELECT coalesce(max(floor(extract(epoch FROM now() - "
					 "heartbeat_at) * 1000)), 0)::bigint FROM "
					 "execdispatch.dispatcher");
		if (age_ms > max_ms)
			max_ms = age_ms;
	}
	fprintf(stderr, "janitor blocked by a lock: heartbeat at most %lld ms old\n", max_ms);
	CU_ASSERT(max_ms < 2500);
	/* the unlocked ones removed, the locked one kept */
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job"), 1);
	PQclear(pgtest_query(other, "COMMIT"));
	PQfinish(other);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 5000), 0);
	clear_queue();
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.dispatcher"));
}

static void test_notify(void)
{
	long long id, t0, took;
	char buf[64];

	clear_queue();
	/* the poll alone would take a minute */
	CU_ASSERT_FATAL(df_write_config(&F, 0, "notify: true\npollMs: 60000\n") == 0);
	CU_ASSERT_FATAL(df_start_disp(&F, 0) == 0);
	/* connected to the execserver, listening */
	CU_ASSERT_FATAL(harness_wait_int(&F.es[0], 1, 5000, "clients", NULL) == 0);
	CU_ASSERT_FATAL(df_wait_log(&F, 0, "notify: listening on", 5000) == 0);
	t0 = harness_now_ms();
	id = df_submit(&F, "{\"command\":\"true\"}", 0);
	while (strcmp(pgtest_text(F.c, buf, sizeof buf,
				  "SELECT state FROM execdispatch.job WHERE "
				  "id = %lld",
				  id),
		      "done") != 0 &&
	       harness_now_ms() - t0 < 5000)
		harness_sleep_ms(5);
	took = harness_now_ms() - t0;
	fprintf(stderr, "notify: submitted to done in %lld ms (pollMs 60000)\n", took);
	CU_ASSERT_STRING_EQUAL(buf, "done");
	CU_ASSERT(took < 1000);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 5000), 0);
	clear_queue();
}

/* A wrong authToken: every execserver answers 401, nothing can be
 * claimed, and the log says so with the reason, again every 10 polls
 * (1 s here) while it lasts; position() names it (issue 27, item 7).
 * Before, one 401 line at the start, then silence. */
static void test_wrong_token(void)
{
	struct es_daemon es;
	char body[1200];
	FILE *f;
	int said = 0;

	clear_queue();
	snprintf(body, sizeof body, "%sauthToken: s3cret\n", df_exec_body(1));
	harness_auth_token = "s3cret";
	CU_ASSERT_FATAL(harness_start(&es, 1, body, NULL) == 0);
	harness_auth_token = NULL;
	snprintf(F.cfg[3], sizeof F.cfg[3], "%s/d3.yml", F.dir);
	snprintf(F.log[3], sizeof F.log[3], "%s/d3.log", F.dir);
	f = fopen(F.cfg[3], "w");
	CU_ASSERT_FATAL(f != NULL);
	fprintf(f,
		"database: \"%s\"\nexecservers: [ws://127.0.0.1:%d]\nauthToken: wrong\n"
		"instanceId: d3\npollMs: 100\nheartbeatSec: 1\nstaleAfterSec: 3\n",
		F.conninfo, es.port);
	fclose(f);
	CU_ASSERT_FATAL(df_start_disp(&F, 3) == 0);
	long long id = df_submit(&F, "{\"command\":\"true\"}", 0);
	char line[200], buf[512];
	snprintf(line, sizeof line,
		 "no execserver connected: claiming nothing (ws://127.0.0.1:%d: 401, the "
		 "authToken was refused)",
		 es.port);
	for (long long t0 = harness_now_ms(); said < 3 && harness_now_ms() - t0 < 10000;
	     harness_sleep_ms(50)) {
		size_t len;
		unsigned char *log = harness_read_file(F.log[3], &len);
		said = 0;
		for (char *p = (char *)log; p && (p = strstr(p, line)); p++)
			said++;
		free(log);
	}
	CU_ASSERT(said >= 3);
	CU_ASSERT_PTR_NOT_NULL(
		strstr(pgtest_text(F.c, buf, sizeof buf,
				   "SELECT execdispatch.position(%lld)->>'waiting'", id),
		       "d3: no execserver connected (ws://127.0.0.1:"));
	CU_ASSERT_EQUAL(df_stop_disp(&F, 3, SIGTERM, 5000), 0);
	harness_stop(&es, 5000);
	harness_cleanup(&es);
	clear_queue();
}

/* notify: true with rows queued before the start and a poll of 10 s: the
 * first claim goes at the start and again when the execserver connects,
 * not at the first poll (issue 28, item 2).  Before, the first job started
 * about 10 s after the start. */
static void test_notify_start(void)
{
	long long t0, took;

	clear_queue();
	for (int i = 0; i < 20; i++)
		df_submit(&F, "{\"command\":\"true\"}", 0);
	CU_ASSERT_FATAL(df_write_config(&F, 0, "notify: true\npollMs: 10000\n") == 0);
	t0 = harness_now_ms();
	CU_ASSERT_FATAL(df_spawn_disp(&F, 0) == 0);
	while (pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE started_at IS NOT "
			       "NULL OR state = 'done'") < 1 &&
	       harness_now_ms() - t0 < 12000)
		harness_sleep_ms(5);
	took = harness_now_ms() - t0;
	fprintf(stderr,
		"notify: from the start to the first job started: %lld ms (pollMs "
		"10000)\n",
		took);
	CU_ASSERT(took < 2000);
	CU_ASSERT(df_wait_final(&F, 5000) == 0);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 5000), 0);
	clear_queue();
}

/* Held rows (claimed + running) of service; the largest count seen over
 * ms in *max_svc, and of service2 in *max2. */
static void sample_service(int ms, const char *svc, long long *max_svc, const char *svc2,
			   long long *max2)
{
	long long end = harness_now_ms() + ms;

	*max_svc = *max2 = 0;
	while (harness_now_ms() < end) {
		long long a = pgtest_int(F.c,
					 "SELECT count(*) FROM execdispatch.job WHERE service = "
					 "'%s' AND state IN ('claimed', 'running')",
					 svc),
			  b = pgtest_int(F.c,
					 "SELECT count(*) FROM execdispatch.job WHERE service = "
					 "'%s' AND state IN ('claimed', 'running')",
					 svc2);
		if (a > *max_svc)
			*max_svc = a;
		if (b > *max2)
			*max2 = b;
		harness_sleep_ms(20);
	}
}

/* Two services in two waitgroups of one execserver: each is claimed up to
 * its own waitgroup's share, not the execserver's overall one. */
static void test_admission_per_service(void)
{
	static const char body[] =
		"waitgroups:\n"
		"  big: {processes: 4}\n"
		"  small: {processes: 1}\n"
		"services:\n"
		"  wide: {waitgroup: big, commands: {sleep: {prog: sleep}}}\n"
		"  narrow: {waitgroup: small, commands: {sleep: {prog: sleep}}}\n"
		"logLevel: info\n";
	static const char job[] = "{\"command\":\"sleep\",\"args\":[\"0.4\"]}";
	long long narrow, wide;

	clear_queue();
	CU_ASSERT_FATAL(harness_start(&F.es[1], 1, body, NULL) == 0);
	F.nes = 2;
	CU_ASSERT_FATAL(df_write_config(&F, 0, NULL) == 0);
	CU_ASSERT_FATAL(df_start_disp(&F, 0) == 0);
	/* narrow alone: its waitgroup's share, floor(1 / 1) + 1 = 2, while
	 * the overall share (both execservers) is 5 + 6 = 11 */
	for (int i = 0; i < 8; i++)
		submit_to("narrow", job, 0);
	sample_service(1200, "narrow", &narrow, "wide", &wide);
	CU_ASSERT_EQUAL(narrow, 2);
	/* wide next to it: floor(4 / 1) + 1 = 5, narrow still 2 */
	for (int i = 0; i < 12; i++)
		submit_to("wide", job, 0);
	sample_service(1200, "narrow", &narrow, "wide", &wide);
	CU_ASSERT_EQUAL(narrow, 2);
	CU_ASSERT(wide >= 4 && wide <= 5);
	CU_ASSERT_FATAL(df_wait_final(&F, 30000) == 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE state = "
					"'done' AND attempts = 1"),
			20);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 5000), 0);
	harness_stop(&F.es[1], 5000);
	F.nes = 1;
	clear_queue();
}

/* One dispatcher, one execserver of 4 slots (share 4 + 1), n runs of
 * `sleep secs` queued, and every UPDATE of a row WHEN when (a trigger's
 * condition) made slow by pause seconds: over sample_ms the table never
 * shows more than 5 rows held, nor fewer than 4 (more than 5: the
 * dispatcher's log is printed); then every row ends done at its first
 * attempt. */
static void held_within_share_when_slow(const char *when, const char *pause, int n,
					const char *secs, int sample_ms)
{
	long long max0, max1;
	char job[96];

	clear_queue();
	PQclear(pgtest_query(F.c,
			     "CREATE FUNCTION public.slow_update() RETURNS trigger LANGUAGE "
			     "plpgsql AS $$BEGIN PERFORM pg_sleep(%s); RETURN NEW; END$$",
			     pause));
	PQclear(pgtest_query(F.c,
			     "CREATE TRIGGER slow_update BEFORE UPDATE ON execdispatch.job "
			     "FOR EACH ROW WHEN (%s) EXECUTE FUNCTION public.slow_update()",
			     when));
	snprintf(job, sizeof job, "{\"command\":\"sleep\",\"args\":[\"%s\"]}", secs);
	for (int i = 0; i < n; i++)
		df_submit(&F, job, 0);
	CU_ASSERT_FATAL(df_write_config(&F, 0, NULL) == 0);
	CU_ASSERT_FATAL(df_start_disp(&F, 0) == 0);
	sample_held(sample_ms, &max0, &max1);
	if (max0 > 5) {
		fprintf(stderr, "held %lld rows with a claim share of 5\n", max0);
		harness_tail("dispatcher holding more than its share", F.log[0], 80);
	}
	CU_ASSERT(max0 >= 4 && max0 <= 5);
	PQclear(pgtest_query(F.c, "DROP TRIGGER slow_update ON execdispatch.job"));
	PQclear(pgtest_query(F.c, "DROP FUNCTION public.slow_update()"));
	CU_ASSERT_FATAL(df_wait_final(&F, 30000) == 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE state = "
					"'done' AND attempts = 1"),
			n);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 5000), 0);
	clear_queue();
}

/* The claims on the wire count against admission: every claim made slow
 * (0.1 s per claimed row), pollMs 100, so the dispatcher polls, and opens
 * its second hot connection, while a claim of the whole share (0.5 s) is
 * still on the wire.  If that claim did not reserve its rows, the next
 * poll would claim the share a second time: every row (12) held at once.
 * A claim slowed past its deadline (staleAfterSec, on a loaded machine)
 * is given up while its backend may still commit it: its places stay
 * taken until the sweep after its end (struct limbo), so the bound holds
 * then too. */
static void test_admission_claims_on_wire(void)
{
	held_within_share_when_slow("NEW.state = 'claimed' AND OLD.state = 'queued'", "0.1", 12,
				    "1", 2500);
}

/* A row whose run ended keeps its place in the share until its outcome's
 * write commits, unless that statement itself claims the place: every
 * write of an outcome made slow (0.3 s per finished row), runs of 0.2 s.
 * A finish that claims nothing (once per pollMs, when the turn may claim
 * a row of the "other" class) was not counted, and the other hot
 * connection claimed the place it freed and committed first: the table
 * showed 8 rows held against a share of 5 (3 runs of 3). */
static void test_admission_outcomes_on_wire(void)
{
	held_within_share_when_slow("NEW.state = 'done' AND OLD.state IN ('claimed', 'running')",
				    "0.3", 16, "0.2", 3000);
}

/* Admission is the execservers' claim share and nothing else: the
 * environment the daemon starts in (here XTRA, a debugging knob that once
 * added to every share) does not widen it.  One execserver of 4 slots:
 * at most 4 + 1 rows held. */
static void test_admission_not_from_env(void)
{
	long long max0, max1;

	clear_queue();
	for (int i = 0; i < 12; i++)
		df_submit(&F, "{\"command\":\"sleep\",\"args\":[\"1\"]}", 0);
	CU_ASSERT_FATAL(df_write_config(&F, 0, NULL) == 0);
	setenv("XTRA", "3", 1);
	CU_ASSERT_FATAL(df_start_disp(&F, 0) == 0);
	unsetenv("XTRA");
	sample_held(1500, &max0, &max1);
	if (max0 > 5)
		fprintf(stderr, "held %lld rows with a claim share of 5\n", max0);
	CU_ASSERT(max0 >= 4 && max0 <= 5);
	CU_ASSERT_FATAL(df_wait_final(&F, 30000) == 0);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 5000), 0);
	clear_queue();
}

/* A claim that fails after a full batch is tried again soon, not at the
 * next pollMs: a fresh dispatcher claims the first row of a service it
 * does not know yet alone (a full batch of the "other" class) and then,
 * at once, that service's share; a trigger fails that second claim once.
 * With pollMs 60000 and one notification for all five jobs, the four
 * others would wait for the first job's end (3 s). */
static void test_claim_failed_after_full_batch(void)
{
	long long max0, max1;

	clear_queue();
	PQclear(pgtest_query(F.c, "CREATE SEQUENCE public.claims_seen"));
	PQclear(pgtest_query(
		F.c, "CREATE FUNCTION public.fail_second_claim() RETURNS trigger LANGUAGE plpgsql "
		     "AS $$BEGIN IF nextval('public.claims_seen') = 2 THEN RAISE EXCEPTION "
		     "'refused by the test'; END IF; RETURN NEW; END$$"));
	PQclear(pgtest_query(F.c,
			     "CREATE TRIGGER fail_second_claim BEFORE UPDATE ON "
			     "execdispatch.job FOR EACH ROW WHEN (NEW.state = 'claimed' AND "
			     "OLD.state = 'queued') EXECUTE FUNCTION public.fail_second_claim()"));
	CU_ASSERT_FATAL(df_write_config(&F, 0, "notify: true\npollMs: 60000\n") == 0);
	CU_ASSERT_FATAL(df_start_disp(&F, 0) == 0);
	/* connected to the execserver, listening */
	CU_ASSERT_FATAL(harness_wait_int(&F.es[0], 1, 5000, "clients", NULL) == 0);
	CU_ASSERT_FATAL(df_wait_log(&F, 0, "notify: listening on", 5000) == 0);
	PQclear(pgtest_query(F.c, "SELECT execdispatch.submit('work', "
				  "'{\"command\":\"sleep\",\"args\":[\"3\"]}') FROM "
				  "generate_series(1, 5)"));
	for (long long t0 = harness_now_ms();
	     df_held(&F, "d0") < 5 && harness_now_ms() - t0 < 10000; harness_sleep_ms(50))
		;
	sample_held(100, &max0, &max1);
	if (max0 != 5)
		fprintf(stderr, "held %lld rows 1.5 s after the failed claim\n", max0);
	CU_ASSERT_EQUAL(max0, 5);
	PQclear(pgtest_query(F.c, "DROP TRIGGER fail_second_claim ON execdispatch.job"));
	PQclear(pgtest_query(F.c, "DROP FUNCTION public.fail_second_claim()"));
	PQclear(pgtest_query(F.c, "DROP SEQUENCE public.claims_seen"));
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGKILL, 5000), SIGKILL);
	clear_queue();
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.dispatcher"));
}

/* Dispatcher 0's configuration (extra lines with it) with a connection
 * string whose first host is a socket that takes connections and never
 * answers (listening, never accepted), the real server second, each host
 * within connect_timeout seconds (0: the default, 5 s): the socket, for
 * the caller to close. */
static int silent_first_host(int connect_timeout, const char *extra)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t salen = sizeof sa;
	char conninfo[600], timeout[32] = "";
	const char *saved_conninfo = F.conninfo;
	int silent = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	CU_ASSERT_FATAL(silent >= 0 && bind(silent, (struct sockaddr *)&sa, sizeof sa) == 0 &&
			listen(silent, 16) == 0 &&
			getsockname(silent, (struct sockaddr *)&sa, &salen) == 0);
	if (connect_timeout)
		snprintf(timeout, sizeof timeout, " connect_timeout=%d", connect_timeout);
	snprintf(conninfo, sizeof conninfo,
		 "host=127.0.0.1,127.0.0.1 port=%d,%d user=postgres dbname=postgres%s",
		 ntohs(sa.sin_port), F.pg.port, timeout);
	F.conninfo = conninfo;
	CU_ASSERT_FATAL(df_write_config(&F, 0, extra) == 0);
	F.conninfo = saved_conninfo;
	return silent;
}

/* notify's connection gives up on a server that accepts and never
 * answers, as the main one does, and goes on to the next host, without
 * holding the event loop meanwhile: the conninfo names such a server
 * first, then the real one.  The main connection's first contact waits
 * its connect_timeout (5 s) there at start; the listener's waits as long,
 * but in the loop: a job submitted once the dispatcher is registered is
 * claimed by the poll (pollMs 200) and done long before the listener is
 * up. */
static void test_notify_silent_server(void)
{
	char buf[64];
	long long id, t0, took;
	int silent;

	clear_queue();
	silent = silent_first_host(0, "notify: true\npollMs: 200\n");
	df_start_disp(&F, 0);
	t0 = harness_now_ms();
	id = df_submit(&F, "{\"command\":\"true\"}", 0);
	while (strcmp(pgtest_text(F.c, buf, sizeof buf,
				  "SELECT state FROM execdispatch.job WHERE id = %lld", id),
		      "done") != 0 &&
	       harness_now_ms() - t0 < 10000)
		harness_sleep_ms(20);
	took = harness_now_ms() - t0;
	fprintf(stderr, "done %lld ms after the submission, the listener still connecting\n", took);
	CU_ASSERT_STRING_EQUAL(buf, "done");
	CU_ASSERT(took < 3000);
	/* and the listener reaches the real server after the silent one */
	for (int i = 0; i < 300 && pgtest_int(F.c, "SELECT count(*) FROM pg_stat_activity "
						   "WHERE query LIKE 'LISTEN %%'") == 0;
	     i++)
		harness_sleep_ms(50);
	CU_ASSERT(pgtest_int(F.c, "SELECT count(*) FROM pg_stat_activity "
				  "WHERE query LIKE 'LISTEN %%'") == 1);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 5000), 0);
	close(silent);
	clear_queue();
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.dispatcher"));
}

/* A stop while the heartbeat's lane is still connecting: that lane's
 * first connection is made at the first beat (heartbeatSec 1 after the
 * start) and waits out a silent first host's connect_timeout (5 s).  The
 * leave goes on a connection that is up (the hot one that registered):
 * the stop takes well under connect_timeout, and the dispatcher row is
 * gone.  Before, the leave was queued on the heartbeat's lane and the
 * stop waited for that whole attempt (about 4 s here). */
static void test_stop_beat_lane_connecting(void)
{
	char registered[64];
	long long t0, took;
	int silent;

	clear_queue();
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.dispatcher"));
	silent = silent_first_host(5, NULL);
	CU_ASSERT_FATAL(df_start_disp(&F, 0) == 0); /* registered past the silent host */
	pgtest_text(F.c, registered, sizeof registered,
		    "SELECT heartbeat_at::text FROM execdispatch.dispatcher WHERE instance = 'd0'");
	/* sleep: past the first heartbeat (1 s), whose lane then connects to
	 * the silent host for 5 s: nothing the test can read shows the attempt */
	harness_sleep_ms(1500);
	/* no beat written yet: the heartbeat's lane is not up */
	CU_ASSERT_FATAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.dispatcher WHERE "
				   "instance = 'd0' AND heartbeat_at = '%s'",
				   registered) == 1);
	t0 = harness_now_ms();
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 10000), 0);
	took = harness_now_ms() - t0;
	fprintf(stderr,
		"stop with the heartbeat's lane connecting: %lld ms (connect_timeout 5 s)\n", took);
	CU_ASSERT(took < 1500);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.dispatcher"), 0);
	close(silent);
}

/* The services a dispatcher knows stay bounded whatever service names
 * applications make up: 12 rows of 12 services no execserver runs each
 * end failed with unknown_service, a row of "work" ends done, and the
 * list admission keeps (the gauge execdispatch_services) never holds
 * more than "work" and the one unknown service in flight, and only "work"
 * at the end (without forgetting it grew to 13).  (12, not more: the
 * library answers unknown_service about a second after the want, and the
 * "other" class is claimed one row at a time.) */
static void test_unknown_services_bounded(void)
{
	int mport = start_with_metrics();
	long long work, most = 0, t0;
	int n = 12;

	work = df_submit(&F, "{\"command\":\"true\"}", 0);
	for (int i = 0; i < n; i++)
		PQclear(pgtest_query(F.c,
				     "SELECT execdispatch.submit('made-up-%d', "
				     "'{\"command\":\"true\"}')",
				     i));
	for (t0 = harness_now_ms();
	     harness_now_ms() - t0 < 40000 &&
	     pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE state IN "
			     "('queued', 'claimed', 'running')") > 0;
	     harness_sleep_ms(100)) {
		long long v = df_metric(mport, "execdispatch_services");
		most = v > most ? v : most;
	}
	/* a poll after the last outcome: only "work" is known */
	CU_ASSERT(df_wait_metric(mport, "execdispatch_services", 1, 5000) == 0);
	fprintf(stderr, "services known: at most %lld during the run, %lld at the end\n", most,
		df_metric(mport, "execdispatch_services"));
	CU_ASSERT_EQUAL(
		pgtest_int(
			F.c,
			"SELECT count(*) FROM execdispatch.job WHERE service LIKE "
			"'made-up-%%' AND state = 'failed' AND error LIKE 'unknown_service: %%'"),
		n);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id = %lld AND "
				   "state = 'done'",
				   work),
			1);
	CU_ASSERT(most >= 1 && most <= 2);
	CU_ASSERT_EQUAL(df_metric(mport, "execdispatch_services"), 1);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 5000), 0);
	clear_queue();
}

/* "no slot" gives the attempt back, not the claim: the four slots busy
 * longer than connectTimeoutSec, a fifth job ends no_slot, is requeued
 * and claimed again with the same attempt (1) but a new claim (claims 2
 * or more), and that claim's outcome is written (under its claims, not
 * its attempts, which the claim before had too). */
static void test_no_slot_new_claim(void)
{
	char buf[256];
	long long id;

	clear_queue();
	CU_ASSERT_FATAL(df_write_config(&F, 0, "connectTimeoutSec: 1\n") == 0);
	CU_ASSERT_FATAL(df_start_disp(&F, 0) == 0);
	for (int i = 0; i < 4; i++)
		df_submit(&F, "{\"command\":\"sleep\",\"args\":[\"3\"]}", 1);
	id = df_submit(&F, "{\"command\":\"true\"}", 0);
	CU_ASSERT_FATAL(df_wait_final(&F, 30000) == 0);
	CU_ASSERT_EQUAL(
		pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE state = 'done'"), 5);
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf,
			    "SELECT state || '/' || attempts || '/' || (claims >= 2) "
			    "FROM execdispatch.job WHERE id = %lld",
			    id),
		"done/1/true");
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 5000), 0);
	clear_queue();
}

/* The first contact at start does not block: the connection string
 * names a server that accepts and never answers first (connect_timeout
 * 2), then the real one.  While the first host is waited for, the loop
 * already serves /metrics; the next host is reached, the silent one is
 * named in the log. */
static void test_start_silent_first_host(void)
{
	struct sockaddr_in sa;
	socklen_t salen = sizeof sa;
	char extra[64], line[200];
	int mport = harness_free_port(), silent;
	long long t0;

	clear_queue();
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.dispatcher"));
	snprintf(extra, sizeof extra, "metrics: 127.0.0.1:%d\n", mport);
	silent = silent_first_host(2, extra);
	CU_ASSERT_FATAL(getsockname(silent, (struct sockaddr *)&sa, &salen) == 0);
	t0 = harness_now_ms();
	CU_ASSERT_FATAL(df_spawn_disp(&F, 0) == 0);
	/* still waiting for the silent host (2 s), and serving: /metrics
	 * answers meanwhile (a loaded machine may take a while to start it) */
	long long up;
	while ((up = df_metric(mport, "execdispatch_database_up")) < 0 &&
	       harness_now_ms() - t0 < 1800)
		harness_sleep_ms(50);
	CU_ASSERT_EQUAL(up, 0);
	if (harness_now_ms() - t0 < 1900)
		CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.dispatcher"), 0);
	while (pgtest_int(F.c, "SELECT count(*) FROM execdispatch.dispatcher") == 0 &&
	       harness_now_ms() - t0 < 10000)
		harness_sleep_ms(50);
	fprintf(stderr, "registered %lld ms after the start (connect_timeout 2 s)\n",
		harness_now_ms() - t0);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.dispatcher"), 1);
	snprintf(line, sizeof line,
		 "database (hot1): host 127.0.0.1 port %d: no answer within connect_timeout; "
		 "trying the next host",
		 ntohs(sa.sin_port));
	size_t len;
	unsigned char *log = harness_read_file(F.log[0], &len);
	CU_ASSERT(log && strstr((char *)log, line));
	free(log);
	long long id = df_submit(&F, "{\"command\":\"true\"}", 0);
	CU_ASSERT(df_wait_final(&F, 20000) == 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id = %lld AND "
				   "state = 'done'",
				   id),
			1);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 10000), 0);
	close(silent);
	clear_queue();
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.dispatcher"));
}

/* claim statements sent at least want (harness_wait_until) */
struct claims_at_least {
	int port;
	long long want;
};

static int claims_reached(void *arg)
{
	struct claims_at_least *c = arg;
	return df_metric(c->port, "execdispatch_claim_statements_total") >= c->want;
}

/* Migration 009 with a running dispatcher: a service it runs, paused, is
 * not claimed through five claim statements (pollMs 100) while /metrics
 * and position say paused; resumed, its job runs.  retry of a failed job
 * runs it again, and execctl show lists both attempts with their
 * receipts.  A cancelled run that ignores SIGTERM (the execserver kills
 * it 3 s later) answers retry "stopping" until its dispatcher wrote that
 * it ended; then the retry runs. */
static void test_pause_retry(void)
{
	char out[4096], buf[1024], marker[300];
	long long id;

	clear_queue();
	int mport = df_start_with_metrics(&F, 0, NULL);
	CU_ASSERT_FATAL(mport > 0);
	/* a job of the service first: the dispatcher knows it (its own claim) */
	df_submit(&F, "{\"command\":\"true\"}", 0);
	CU_ASSERT_EQUAL(df_wait_final(&F, 5000), 0);
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "pause -c %s work", F.cfg[0]), 0);
	CU_ASSERT_STRING_EQUAL(out, "paused\n");
	id = df_submit(&F, "{\"command\":\"true\"}", 0);
	struct claims_at_least c = { mport,
				     df_metric(mport, "execdispatch_claim_statements_total") + 5 };
	CU_ASSERT_EQUAL(harness_wait_until(claims_reached, &c, 5000), 0);
	CU_ASSERT_STRING_EQUAL(pgtest_text(F.c, buf, sizeof buf,
					   "SELECT state FROM execdispatch.job WHERE id = %lld",
					   id),
			       "queued");
	/* the queue's figures come every 10 s */
	CU_ASSERT_EQUAL(
		df_wait_metric(mport, "execdispatch_service_paused{service=\"work\"}", 1, 15000),
		0);
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "position -c %s %lld", F.cfg[0], id), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "(paused)"));
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "resume -c %s work", F.cfg[0]), 0);
	CU_ASSERT_STRING_EQUAL(out, "resumed\n");
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "resume -c %s work", F.cfg[0]), 122);
	CU_ASSERT_EQUAL(df_wait_final(&F, 5000), 0);

	/* failed, retried, done: two attempts, each with its receipt */
	snprintf(marker, sizeof marker, "%s/retried", F.dir);
	snprintf(buf, sizeof buf,
		 "{\"command\":\"sh\",\"args\":[\"-c\",\"test -e %s && echo second >&2 && exit 0; "
		 "touch %s; echo first >&2; exit 3\"]}",
		 marker, marker);
	id = df_submit(&F, buf, 0);
	CU_ASSERT_EQUAL(df_wait_final(&F, 5000), 0);
	/* the final failure is the row's alone; the retry moves it to
	 * job_attempt, the done that follows stays in the row */
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job_attempt"), 0);
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "retry -c %s %lld", F.cfg[0], id), 0);
	CU_ASSERT_STRING_EQUAL(out, "requeued\n");
	CU_ASSERT_EQUAL(df_wait_final(&F, 5000), 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job_attempt WHERE job = %lld "
				   "AND state = 'failed'",
				   id),
			1);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job_attempt"), 1);
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "show -c %s %lld", F.cfg[0], id), 0);
	char *a1 = strstr(out, "\nattempt 1  failed  d0  started "),
	     *a2 = a1 ? strstr(a1 + 1, "\nattempt 1  done  d0  started ") : NULL;
	CU_ASSERT(a1 && a2 && strstr(a1, "exit_status") && strstr(a1, "first") &&
		  strstr(a2, "second"));
	if (!(a1 && a2))
		fprintf(stderr, "execctl show:\n%s", out);
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "retry -c %s %lld", F.cfg[0], id), 122);
	CU_ASSERT_STRING_EQUAL(out, "not_found_or_not_finished\n");

	/* cancelled while its run ignores SIGTERM: stopping until it ended
	 * (the marker is made once the trap is set: a cancel before it would
	 * end the run at once, and retry would rightly requeue) */
	snprintf(marker, sizeof marker, "%s/stubborn", F.dir);
	snprintf(buf, sizeof buf,
		 "{\"command\":\"sh\",\"args\":[\"-c\",\"test -e %s && exit 0; trap '' TERM; "
		 "touch %s; while :; do sleep 0.1; done\"]}",
		 marker, marker);
	id = df_submit(&F, buf, 0);
	CU_ASSERT_FATAL(harness_wait_until(file_exists, marker, 5000) == 0);
	long long t0 = harness_now_ms();
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.cancel(%lld)", id),
		"requested");
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "retry -c %s %lld", F.cfg[0], id), 115);
	CU_ASSERT_STRING_EQUAL(out, "stopping\n");
	while (harness_now_ms() - t0 < 10000 &&
	       strcmp(pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.retry(%lld)", id),
		      "stopping") == 0)
		harness_sleep_ms(50);
	long long took = harness_now_ms() - t0;
	fprintf(stderr, "retry: stopping for %lld ms after the cancel (SIGKILL after 3 s)\n", took);
	CU_ASSERT_STRING_EQUAL(buf, "requeued");
	CU_ASSERT(took >= 2500);
	CU_ASSERT_EQUAL(df_wait_final(&F, 5000), 0);
	CU_ASSERT_STRING_EQUAL(pgtest_text(F.c, buf, sizeof buf,
					   "SELECT state FROM execdispatch.job WHERE id = %lld",
					   id),
			       "done");
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 5000), 0);
}

static void test_teardown(void)
{
	df_cleanup(&F, CU_get_number_of_failures() > 0);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "setup: PostgreSQL, one execserver of 4 slots", test_setup },
		{ "runs jobs: done, failed, unknown command, unknown service, env",
		  test_run_outcomes },
		{ "a JOB over maxFrameBytes: bad_job, one execserver connection undisturbed",
		  test_payload_over_frame },
		{ "claim shares of two dispatchers; the survivor's grows", test_claim_shares },
		{ "admission per service: each up to its waitgroup's share",
		  test_admission_per_service },
		{ "admission counts the claims on the wire", test_admission_claims_on_wire },
		{ "admission counts the outcomes on the wire", test_admission_outcomes_on_wire },
		{ "admission does not come from the environment", test_admission_not_from_env },
		{ "a claim failing after a full batch is tried again soon",
		  test_claim_failed_after_full_batch },
		{ "cancel from a session that owns nothing", test_cancel_from_elsewhere },
		{ "no execserver: nothing claimed, only the heartbeat queries",
		  test_no_execserver },
		{ "execctl submit, show, wait, cancel, position", test_execctl_db },
		{ "retries: retryExitCodes, the delay, execctl show; maxAttempts 1",
		  test_retry_exit_code },
		{ "execctl jobs (keyset pages) and stats", test_execctl_listing },
		{ "retention deletes more than one batch", test_retention },
		{ "retention: a locked finished row holds neither the janitor nor the heartbeat",
		  test_retention_locked_row },
		{ "notify: true starts a submission at once", test_notify },
		{ "notify: true claims at the start, not at the first poll", test_notify_start },
		{ "a wrong authToken: why nothing is claimed, said again and in position()",
		  test_wrong_token },
		{ "notify: a silent server does not hold the loop, the next host is reached",
		  test_notify_silent_server },
		{ "stop: the heartbeat's lane still connecting past a silent host: the leave "
		  "goes on a connection that is up",
		  test_stop_beat_lane_connecting },
		{ "local services: on this host, localSlots with a quarter for priority >= 2",
		  test_local },
		{ "position: queued from the database, claimed from the execserver",
		  test_position },
		{ "progress of running jobs: in their rows, position(), execctl",
		  test_progress_rows },
		{ "made-up services: each ends unknown_service, the list stays bounded",
		  test_unknown_services_bounded },
		{ "start: a silent first host does not hold the loop; the next is reached",
		  test_start_silent_first_host },
		{ "no slot: the attempt given back, the new claim's outcome written",
		  test_no_slot_new_claim },
		{ "pause, resume and retry with a running dispatcher; stopping until the run ended",
		  test_pause_retry },
		{ "teardown", test_teardown },
		{ NULL, NULL }
	};
	return run_suite("dispatch", cases);
}
