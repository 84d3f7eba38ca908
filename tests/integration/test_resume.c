/*
 * test_resume.c - a client's running jobs across its connections, against a
 * real daemon with two handlers: DONE after a reconnect on the other
 * handler (job still running, or ended while the client was away), the
 * grace running out, a second live connection taking over, and CANCEL from
 * a connection held by another handler than the one running the job.
 */
#include "autoconfig.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "harness.h"
#include "proto.h"
#include "suite.h"

static struct es_daemon D;

static void start(void)
{
	CU_ASSERT_FATAL(harness_start_default(&D, 2, 2, "resumeGraceSec: 2\n", NULL) == 0);
}

static void stop(void)
{
	CU_ASSERT(harness_finish(&D, 0) == 0);
}

/* WANT + JOB of `sleep secs` (service sleep) on c. */
static void start_sleep(struct tclient *c, const char *id, const char *secs)
{
	char job[96];

	long long started = harness_status_int(&D, "services", "sleep", "started", NULL);
	snprintf(job, sizeof job, "{\"command\":\"sleep\",\"args\":[\"%s\"]}", secs);
	CU_ASSERT_FATAL(tc_start_job(c, id, "sleep", job) == 0);
	CU_ASSERT(harness_wait_int(&D, started + 1, 5000, "services", "sleep", "started", NULL) ==
		  0);
}

static void expect_done(struct tclient *c, const char *id, int exit_code, const char *error,
			int timeout_ms)
{
	struct json_object *d = tc_expect(c, "DONE", timeout_ms), *e;
	CU_ASSERT_FATAL(d != NULL);
	CU_ASSERT_STRING_EQUAL(tc_str(d, "job_id"), id);
	if (exit_code >= 0)
		CU_ASSERT_EQUAL(tc_int(tc_receipt(d), "exit_code"), exit_code);
	if (error)
		CU_ASSERT(json_object_object_get_ex(tc_receipt(d), "error", &e) &&
			  strcmp(tc_str(e, "code"), error) == 0);
	json_object_put(d);
}

static void test_reconnect_while_running(void)
{
	start();
	struct tclient *a = tc_connect_on_handler(&D, 2, 0, "res1");
	CU_ASSERT_FATAL(a != NULL);
	start_sleep(a, "j", "1.5");
	tc_close(a);
	/* back within the grace, on the other handler: the DONE comes there
	 * (probing connections that land on handler 0 come and go long before
	 * the job ends) */
	struct tclient *b = tc_connect_on_handler(&D, 2, 1, "res1");
	CU_ASSERT_FATAL(b != NULL);
	expect_done(b, "j", 0, NULL, 5000);
	CU_ASSERT(tc_quiet(b, 300)); /* exactly once */
	tc_close(b);
	stop();
}

static void test_reconnect_after_job_ended(void)
{
	start();
	struct tclient *a = tc_connect_on_handler(&D, 2, 1, "res2");
	CU_ASSERT_FATAL(a != NULL);
	start_sleep(a, "j", "0.3");
	tc_close(a);
	/* the job ends while the client is away */
	CU_ASSERT(harness_wait_wg(&D, "wg", "running", 0, 5000) == 0);
	/* any handler: a probing connection that landed elsewhere would itself
	 * be the comeback and take the DONE */
	struct tclient *b = tc_connect(D.port, "res2");
	CU_ASSERT_FATAL(b != NULL);
	expect_done(b, "j", 0, NULL, 3000);
	/* the id is free again once its DONE went out */
	CU_ASSERT(tc_want_offer(b, "j", "cat", 0, 3000) != NULL);
	tc_close(b);
	stop();
}

static void test_grace_runs_out(void)
{
	start();
	struct tclient *a = tc_connect(D.port, "res3");
	CU_ASSERT_FATAL(a != NULL);
	char dur[32], pattern[96];
	snprintf(dur, sizeof dur, "40.%d", (int)getpid());
	snprintf(pattern, sizeof pattern, "pgrep -f '^sleep %s$' > /dev/null", dur);
	start_sleep(a, "long", dur);
	tc_close(a);
	/* grace 2 s, then SIGTERM */
	CU_ASSERT(harness_wait_pgrep(pattern, 0, 10000) == 0);
	struct tclient *b = tc_connect(D.port, "res3");
	CU_ASSERT_FATAL(b != NULL);
	CU_ASSERT(tc_quiet(b, 300)); /* no DONE: the grace is over */
	tc_send(b, "{\"type\":\"QUERY\",\"job_id\":\"long\"}");
	struct json_object *e = tc_expect(b, "ERROR", 3000);
	CU_ASSERT(e && strcmp(tc_str(e, "code"), "unknown_job") == 0);
	if (e)
		json_object_put(e);
	/* and its slot is free */
	CU_ASSERT(tc_want_offer(b, "next", "sleep", 0, 3000) != NULL);
	tc_close(b);
	stop();
}

static void test_second_connection_takes_over(void)
{
	start();
	struct tclient *a = tc_connect_on_handler(&D, 2, 0, "res4");
	struct tclient *b = tc_connect_on_handler(&D, 2, 1, "res4");
	CU_ASSERT_FATAL(a && b);
	start_sleep(a, "j", "0.5");
	tc_close(a);
	expect_done(b, "j", 0, NULL, 5000);
	tc_close(b);
	stop();
}

static void test_cancel_from_other_handler(void)
{
	start();
	struct tclient *a = tc_connect_on_handler(&D, 2, 0, "res5");
	struct tclient *b = tc_connect_on_handler(&D, 2, 1, "res5");
	CU_ASSERT_FATAL(a && b);
	start_sleep(a, "j", "30");
	long long t0 = harness_now_ms();
	tc_send(b, "{\"type\":\"CANCEL\",\"job_id\":\"j\"}");
	/* the DONE goes to the job's owner connection, a */
	expect_done(a, "j", -1, "cancelled", 5000);
	CU_ASSERT(harness_now_ms() - t0 < 2000);
	/* a second CANCEL, and a CANCEL of another client's job: unknown_job */
	tc_send(b, "{\"type\":\"CANCEL\",\"job_id\":\"j\"}");
	struct json_object *e = tc_expect(b, "ERROR", 3000);
	CU_ASSERT(e && strcmp(tc_str(e, "code"), "unknown_job") == 0);
	if (e)
		json_object_put(e);
	struct tclient *other = tc_connect(D.port, "someone-else");
	start_sleep(a, "k", "30");
	tc_send(other, "{\"type\":\"CANCEL\",\"job_id\":\"k\"}");
	e = tc_expect(other, "ERROR", 3000);
	CU_ASSERT(e && strcmp(tc_str(e, "code"), "unknown_job") == 0);
	if (e)
		json_object_put(e);
	tc_send(a, "{\"type\":\"CANCEL\",\"job_id\":\"k\"}");
	expect_done(a, "k", -1, "cancelled", 5000);
	tc_close(other);
	tc_close(a);
	tc_close(b);
	stop();
}

static void test_runner_crash(void)
{
	start();
	struct tclient *a = tc_connect_on_handler(&D, 2, 0, "res6");
	struct tclient *b = tc_connect_on_handler(&D, 2, 1, "res6");
	CU_ASSERT_FATAL(a && b);
	start_sleep(a, "j", "30"); /* runs on handler 0, a's handler */
	int pids[2];
	CU_ASSERT_EQUAL_FATAL(harness_handler_pids(&D, pids, 2), 2);
	kill(pids[0], SIGKILL);
	/* the job died with its handler: b, the client's surviving connection,
	 * is told, with a retryable error */
	struct json_object *d = tc_expect(b, "DONE", 5000), *e, *v;
	CU_ASSERT_FATAL(d != NULL);
	CU_ASSERT_STRING_EQUAL(tc_str(d, "job_id"), "j");
	CU_ASSERT(json_object_object_get_ex(tc_receipt(d), "error", &e) &&
		  strcmp(tc_str(e, "code"), "exec_lost") == 0 &&
		  json_object_object_get_ex(e, "retryable", &v) && json_object_get_boolean(v));
	json_object_put(d);
	CU_ASSERT(tc_quiet(b, 300));
	tc_close(a);
	tc_close(b);
	stop();
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "reconnect on another handler while the job runs", test_reconnect_while_running },
		{ "reconnect after the job ended", test_reconnect_after_job_ended },
		{ "the grace runs out", test_grace_runs_out },
		{ "a second connection takes over", test_second_connection_takes_over },
		{ "CANCEL from another handler", test_cancel_from_other_handler },
		{ "the handler running the job crashes", test_runner_crash },
		{ NULL, NULL },
	};
	return run_suite("resume", cases);
}
