/*
 * test_bed_receipts.c - no receipt lost across a cut link (docs/protocol.md
 * section 6, "Receipts"), on the test bed of hosts (tests/lib/bed.c): the
 * client on host a, an execserver on host b.  Right after the JOB, a's link
 * is cut (no FIN, no RST: both connections go half-open), the job ends
 * while the link is down (its DONE is sent into the dead connection), the
 * client's ping deadline fires, the link is mended, and the client comes
 * back with its id:
 *  - libexecclient: on_done exactly once, with the job's exit status; the
 *    job ran once; the server keeps nothing afterwards (acknowledged);
 *  - execctl run: exits with the job's status and prints its output.
 * As root only: otherwise one line says how many tests it left out.
 */
#include "autoconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <event2/event.h>

#include "bed.h"
#include "client_fixture.h"
#include "harness.h"
#include "suite.h"

static struct bed B;
#define A (&B.host[0])
#define S (&B.host[1])

static const char body[] =
	"waitgroups:\n"
	"  wg: {processes: 2}\n"
	"services:\n"
	"  slow:\n"
	"    waitgroup: wg\n"
	"    commands:\n"
	"      slow5: {prog: sh, args: [\"-c\", \"sleep 1.5; echo slow; exit 5\"]}\n";

static void stop_daemon(struct es_daemon *d)
{
	CU_ASSERT(harness_stop_clean(d) == 0);
}

/* The daemon's counter services.slow.<what> is n. */
struct count_goal {
	struct es_daemon *d;
	const char *what;
	long long n;
};

static int count_in(struct json_object *st, void *arg)
{
	const struct count_goal *g = arg;
	return harness_json_int(st, "services", "slow", g->what, NULL) == g->n;
}

/* The same for fx_wait_pred: the library's loop runs meanwhile. */
static int count_is(void *arg)
{
	const struct count_goal *g = arg;
	struct json_object *st = harness_status(g->d);
	int ok = st && count_in(st, arg);
	if (st)
		json_object_put(st);
	return ok;
}

static void test_library_cut_after_job(void)
{
	struct es_daemon d;
	struct exc_options o;
	struct exc_job_spec s;
	struct fx_done done = { 0 };
	char url[64];

	CU_ASSERT_FATAL(harness_start_on(&d, S, 1, body, NULL) == 0);
	CU_ASSERT_FATAL(bed_enter(A) == 0);
	fx_options(&o);
	o.client_id = "bed-lib";
	o.ping_timeout_ms = 1500;
	o.owner_grace_sec = 30;
	exc_client *c = fx_client(&o, NULL, 0, NULL);
	CU_ASSERT_FATAL(c != NULL);
	snprintf(url, sizeof url, "ws://%s:%d", S->addr, d.port);
	CU_ASSERT_FATAL(exc_client_add_address(c, url) == 0);
	fx_spec(&s, "slow", "{\"command\":\"slow5\"}", &done);
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT_FATAL(fx_wait_pred(count_is, &(struct count_goal){ &d, "started", 1 }, 10000));
	CU_ASSERT_FATAL(bed_cut(A) == 0);
	/* the job ends behind the cut, and the library's deadline fires */
	CU_ASSERT(fx_wait_pred(count_is, &(struct count_goal){ &d, "finished", 1 }, 10000));
	fx_spin(3000);
	CU_ASSERT_FALSE(done.called);
	CU_ASSERT(bed_mend(A) == 0);
	CU_ASSERT(fx_wait(&done.called, 30000));
	CU_ASSERT_EQUAL(done.called, 1);
	CU_ASSERT_EQUAL(done.exit_code, 5);
	CU_ASSERT_STRING_EQUAL(done.stdout_text, "slow\n");
	fx_spin(1000);
	CU_ASSERT_EQUAL(done.called, 1);
	struct json_object *st = harness_status(&d);
	CU_ASSERT(st && harness_json_int(st, "services", "slow", "started", NULL) == 1);
	CU_ASSERT(st && harness_json_int(st, "wants", NULL) == 0); /* acknowledged */
	if (st)
		json_object_put(st);
	exc_client_free(c);
	CU_ASSERT(bed_leave() == 0);
	stop_daemon(&d);
}

static void test_execctl_cut_after_job(void)
{
	struct es_daemon d;
	char url[64], log[300];

	CU_ASSERT_FATAL(harness_start_on(&d, S, 1, body, NULL) == 0);
	snprintf(url, sizeof url, "ws://%s:%d", S->addr, d.port);
	snprintf(log, sizeof log, "%s/execctl.log", d.dir);
	char *argv[] = { (char *)harness_execctl(),
			 "run",
			 "-a",
			 url,
			 "-s",
			 "slow",
			 "-n",
			 "-q",
			 "--client",
			 "bed-cli",
			 "--ping-timeout",
			 "2",
			 "--",
			 "slow5",
			 NULL };
	pid_t pid = bed_spawn(A, log, NULL, argv);
	CU_ASSERT_FATAL(pid > 0);
	struct count_goal started = { &d, "started", 1 }, finished = { &d, "finished", 1 };
	CU_ASSERT_FATAL(harness_wait_status(&d, 10000, count_in, &started) == 0);
	CU_ASSERT_FATAL(bed_cut(A) == 0);
	CU_ASSERT(harness_wait_status(&d, 10000, count_in, &finished) == 0);
	/* sleep: the cut outlasts execctl's ping deadline (2 s), which fires:
	 * nothing outside execctl shows it */
	harness_sleep_ms(4000);
	CU_ASSERT(bed_mend(A) == 0);
	int status = harness_reap(&pid, 0, 30000);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 5);
	size_t len = 0;
	char *out = (char *)harness_read_file(log, &len);
	CU_ASSERT(out && strstr(out, "slow\n") && strstr(out, "the job exited with status 5"));
	if (!(WIFEXITED(status) && WEXITSTATUS(status) == 5))
		harness_tail("execctl", log, 30);
	free(out);
	CU_ASSERT(count_is(&started)); /* run once */
	stop_daemon(&d);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "libexecclient: link cut after the JOB, receipt once",
		  test_library_cut_after_job },
		{ "execctl: link cut after the JOB, exit status right",
		  test_execctl_cut_after_job },
		{ NULL, NULL },
	};
	int rc = bed_run_suite("test_bed_receipts", "receipts across a cut link", cases, &B, 2);
	if (fx_base)
		event_base_free(fx_base);
	return rc;
}
