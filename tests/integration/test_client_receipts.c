/*
 * test_client_receipts.c - libexecclient and a server that goes silent
 * (tests/lib/relay.c freezes the connection: no byte either way, no FIN,
 * no RST), against a real daemon:
 *  - the job's connection freezes right after its JOB; the library
 *    notices by its ping deadline, reconnects with its client id, the new
 *    connection takes the job over and its receipt (sent into the frozen
 *    connection already) comes again: on_done once, the job ran once;
 *  - the library comes back only after the server dropped the receipt
 *    (its resume grace ran out): the job ends "lost", retryable, and is
 *    not run again.
 */
#include "autoconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <CUnit/Basic.h>
#include <event2/event.h>

#include "client_fixture.h"
#include "relay.h"
#include "suite.h"

static struct es_daemon D;
static struct relay R;

/* A daemon with `server` extra configuration lines, a relay in front. */
static void start(const char *server)
{
	char body[4096];
	snprintf(body, sizeof body, "%s%s", server, harness_default_body(2));
	CU_ASSERT_FATAL(harness_start(&D, 2, body, NULL) == 0);
	CU_ASSERT_FATAL(relay_start(&R, D.port) == 0);
}

static void stop(void)
{
	relay_stop(&R);
	CU_ASSERT(harness_stop_clean(&D) == 0);
}

static long long started(void)
{
	struct json_object *st = harness_status(&D), *v, *s, *n;
	long long x = -1;
	if (st && json_object_object_get_ex(st, "services", &v) &&
	    json_object_object_get_ex(v, "sleep", &s) &&
	    json_object_object_get_ex(s, "started", &n))
		x = json_object_get_int64(n);
	if (st)
		json_object_put(st);
	return x;
}

/* A client through the relay with ping deadline ping_ms; job `sleep secs`
 * submitted and running. */
static exc_client *running_job(unsigned ping_ms, const char *secs, struct fx_done *done,
			       exc_job **job)
{
	struct exc_options o;
	struct exc_job_spec s;
	char url[64], json[128];

	fx_options(&o);
	o.client_id = "silent";
	o.ping_timeout_ms = ping_ms;
	o.owner_grace_sec = 20;
	exc_client *c = fx_client(&o, NULL, 0, NULL);
	CU_ASSERT_FATAL(c != NULL);
	snprintf(url, sizeof url, "ws://127.0.0.1:%d", R.port);
	CU_ASSERT_FATAL(exc_client_add_address(c, url) == 0);
	snprintf(json, sizeof json, "{\"command\":\"sleep\",\"args\":[\"%s\"]}", secs);
	memset(done, 0, sizeof *done);
	fx_spec(&s, "sleep", json, done);
	*job = exc_submit(c, &s);
	CU_ASSERT_FATAL(*job != NULL);
	for (int i = 0; i < 100 && strcmp(exc_job_state(*job), "running") != 0; i++)
		fx_spin(50);
	CU_ASSERT_FATAL(strcmp(exc_job_state(*job), "running") == 0);
	fx_spin(100); /* the JOB is out */
	return c;
}

static void test_silent_server_receipt_once(void)
{
	struct fx_done done;
	exc_job *job;

	start(""); /* the server's ping deadline: 45 s */
	exc_client *c = running_job(1000, "1", &done, &job);
	CU_ASSERT_EQUAL(relay_freeze(&R), 1);
	long long t0 = harness_now_ms();
	/* the job ends at 1 s and its DONE goes into the frozen connection;
	 * the library's deadline (1 s, pings every 333 ms) and the close
	 * timeout (2 s) later it reconnects and gets the DONE again */
	CU_ASSERT(fx_wait(&done.called, 10000));
	long long ms = harness_now_ms() - t0;
	CU_ASSERT(ms >= 900 && ms < 8000);
	printf("\n    receipt %lld ms after the freeze (job 1 s, ping deadline 1 s, "
	       "close timeout 2 s) ",
	       ms);
	CU_ASSERT_EQUAL(done.called, 1);
	CU_ASSERT(done.ok);
	CU_ASSERT_EQUAL(done.exit_code, 0);
	CU_ASSERT(fx_log_find("reached again") != NULL);
	CU_ASSERT(relay_accepted(&R) >= 2);
	fx_spin(500);
	CU_ASSERT_EQUAL(done.called, 1); /* exactly once */
	CU_ASSERT_EQUAL(started(), 1);   /* run once */
	/* acknowledged: the server keeps nothing for this client */
	struct json_object *st = harness_status(&D), *v;
	CU_ASSERT(st && json_object_object_get_ex(st, "wants", &v) && json_object_get_int(v) == 0);
	if (st)
		json_object_put(st);
	exc_client_free(c);
	stop();
}

static void test_receipt_dropped_is_lost_not_rerun(void)
{
	struct fx_done done;
	exc_job *job;

	/* the server notices the silence in 2 s and keeps the client's jobs
	 * for 1 s more; the library's deadline is 6 s */
	start("pingIntervalSec: 1\npingTimeoutSec: 2\nresumeGraceSec: 1\n");
	exc_client *c = running_job(6000, "0.5", &done, &job);
	CU_ASSERT_EQUAL(relay_freeze(&R), 1);
	CU_ASSERT(fx_wait(&done.called, 15000));
	CU_ASSERT_EQUAL(done.called, 1);
	CU_ASSERT_FALSE(done.ok);
	CU_ASSERT_STRING_EQUAL(done.error_code, "lost");
	CU_ASSERT(done.retryable);
	CU_ASSERT(strstr(done.error_message, "no longer knows the job") != NULL);
	fx_spin(500);
	CU_ASSERT_EQUAL(started(), 1); /* never sent again */
	exc_client_free(c);
	stop();
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "a silent server: ping deadline, reconnect, receipt once",
		  test_silent_server_receipt_once },
		{ "a receipt the server dropped: lost, not run again",
		  test_receipt_dropped_is_lost_not_rerun },
		{ NULL, NULL },
	};
	int rc = run_suite("libexecclient: receipts across silent connections", cases);
	if (fx_base)
		event_base_free(fx_base);
	return rc;
}
