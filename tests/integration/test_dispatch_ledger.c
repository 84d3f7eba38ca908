/*
 * test_dispatch_ledger.c - exactly-once, proved with a ledger: three
 * dispatchers and two execservers run many jobs whose program records each
 * run in a table with UNIQUE (job_id, attempt), while the test cancels
 * some of them at staggered moments.  Then:
 *  - every job reached exactly one final state, and no final row was ever
 *    changed again (a trigger records any such update);
 *  - a job whose cancel answered "cancelled" or "requested" is cancelled,
 *    one whose cancel came too late is done: nothing succeeds after its
 *    cancel was committed;
 *  - every done job has one ledger run, of its last attempt, finished; no
 *    two runs of one job overlap.
 * The same test then runs unchanged through PgBouncer in transaction mode.
 *
 * DISPATCH_LEDGER_JOBS sets the number of jobs (default 150, so that
 * make check stays short; 2000 for the long run).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "dispatch_fixture.h"
#include "suite.h"

#define DISPATCHERS 3
#define CANCEL_EVERY 13

static struct dfix F;

static int jobs_count(void)
{
	const char *e = getenv("DISPATCH_LEDGER_JOBS");
	int n = e ? atoi(e) : 0;
	return n > 0 ? n : 150;
}

static void test_setup(void)
{
	CU_ASSERT_FATAL(df_start(&F) == 0);
	CU_ASSERT_FATAL(df_start_exec(&F, 0, 3) == 0);
	CU_ASSERT_FATAL(df_start_exec(&F, 1, 3) == 0);
	CU_ASSERT_FATAL(df_make_ledger(&F) == 0);
}

static void run_ledger(const char *conninfo)
{
	int n = jobs_count();
	long long *ids = calloc((size_t)n, sizeof *ids);
	char *answer = calloc((size_t)n, 1); /* c: cancelled, r: requested, n: not found */
	char job[1024], buf[64];
	long long t0 = harness_now_ms();

	PQclear(pgtest_query(F.c, "TRUNCATE execdispatch.job, execdispatch.job_attempt, "
				  "execdispatch.job_key, ledger, violations"));
	F.conninfo = conninfo;
	for (int i = 0; i < DISPATCHERS; i++) {
		CU_ASSERT_FATAL(df_write_config(&F, i, NULL) == 0);
		CU_ASSERT_FATAL(df_start_disp(&F, i) == 0);
	}
	df_ledger_job(&F, job, sizeof job, 20, 0);
	for (int i = 0; i < n; i++) {
		ids[i] = df_submit(&F, job, i % 3 - 1);
		CU_ASSERT_FATAL(ids[i] > 0);
		/* cancel some while they may be queued, held or running */
		int k = i - 7;
		if (k >= 0 && k % CANCEL_EVERY == 0) {
			pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.cancel(%lld)",
				    ids[k]);
			answer[k] = buf[0] == 'c' ? 'c' : buf[0] == 'r' ? 'r' : 'n';
			CU_ASSERT(answer[k] == 'c' || answer[k] == 'r' ||
				  strcmp(buf, "not_found_or_finished") == 0);
		}
		if (i % 50 == 49) /* sleep: paced, so claims interleave with submissions */
			harness_sleep_ms(30);
	}
	/* cancel rows that are held or running right now, and finished ones */
	for (int round = 0; round < 24; round++) {
		const char *which = round % 3 == 2 ? "state = 'done'"
						   : "state IN ('claimed', 'running')";
		long long id = pgtest_int(F.c,
					  "SELECT id FROM execdispatch.job WHERE %s "
					  "ORDER BY id DESC LIMIT 1",
					  which);
		for (int i = 0; id > 0 && i < n; i++)
			if (ids[i] == id && !answer[i]) {
				pgtest_text(F.c, buf, sizeof buf,
					    "SELECT execdispatch.cancel(%lld)", id);
				answer[i] = buf[0] == 'c' ? 'c' : buf[0] == 'r' ? 'r' : 'n';
			}
		/* sleep: the rounds spread over 1 s meet rows in other states */
		harness_sleep_ms(40);
	}
	/* 2 minutes, more for the long run (150 ms a job: slow machines) */
	CU_ASSERT_FATAL(df_wait_final(&F, n * 150 > 120000 ? n * 150 : 120000) == 0);
	fprintf(stderr, "%d ledger jobs with %d dispatchers in %lld ms\n", n, DISPATCHERS,
		harness_now_ms() - t0);

	/* exactly one final state each, never changed afterwards */
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE state IN "
					"('done', 'failed', 'cancelled')"),
			n);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM violations"), 0);
	/* cancels: the answer and the final state agree */
	int cancelled = 0, requested = 0, late = 0;
	for (int i = 0; i < n; i++) {
		if (!answer[i])
			continue;
		pgtest_text(F.c, buf, sizeof buf,
			    "SELECT state FROM execdispatch.job WHERE id = %lld", ids[i]);
		if (answer[i] == 'n') {
			late++;
			CU_ASSERT_STRING_EQUAL(buf, "done");
		} else {
			answer[i] == 'c' ? cancelled++ : requested++;
			CU_ASSERT_STRING_EQUAL(buf, "cancelled");
		}
	}
	fprintf(stderr, "cancels: %d before the start, %d requested, %d too late\n", cancelled,
		requested, late);
	CU_ASSERT(cancelled > 0 && requested > 0 && late > 0);
	/* everything not cancelled is done, with its one run in the ledger */
	CU_ASSERT_EQUAL(
		pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE state = 'failed'"), 0);
	CU_ASSERT_EQUAL(
		pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job j WHERE state = 'done' "
				"AND NOT EXISTS (SELECT 1 FROM ledger l WHERE l.job_id = j.id AND "
				"l.attempt = j.attempts AND l.finished_at IS NOT NULL)"),
		0);
	CU_ASSERT_EQUAL(
		pgtest_int(F.c, "SELECT count(*) FROM ledger l JOIN execdispatch.job j "
				"ON j.id = l.job_id WHERE j.state = 'done'"),
		pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE state = 'done'"));
	/* no run of a job that was not claimed for it, no overlapping runs */
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM ledger l JOIN execdispatch.job j "
					"ON j.id = l.job_id WHERE l.attempt > j.attempts"),
			0);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM ledger a JOIN ledger b ON "
					"a.job_id = b.job_id AND a.attempt < b.attempt AND "
					"a.started_at < coalesce(b.finished_at, 'infinity') AND "
					"b.started_at < coalesce(a.finished_at, 'infinity')"),
			0);
	/* every dispatcher took part */
	for (int i = 0; i < DISPATCHERS; i++)
		CU_ASSERT(pgtest_int(F.c,
				     "SELECT count(*) FROM execdispatch.job WHERE "
				     "runner_instance = 'd%d'",
				     i) > 0);
	for (int i = 0; i < DISPATCHERS; i++)
		CU_ASSERT_EQUAL(df_stop_disp(&F, i, SIGTERM, 10000), 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.dispatcher"), 0);
	free(ids);
	free(answer);
}

static void test_ledger_direct(void)
{
	run_ledger(F.pg.conninfo);
}

static void test_ledger_pgbouncer(void)
{
	CU_ASSERT_FATAL(pgtest_start_bouncer(&F.pg) == 0);
	run_ledger(F.pg.bouncer_conninfo);
	/* the dispatchers really went through the pooler: it logged their logins */
	char path[300];
	size_t len;
	snprintf(path, sizeof path, "%s/pgbouncer.log", F.pg.dir);
	unsigned char *log = harness_read_file(path, &len);
	CU_ASSERT(log && strstr((char *)log, "login attempt: db=postgres user=postgres"));
	free(log);
}

static void test_teardown(void)
{
	df_cleanup(&F, CU_get_number_of_failures() > 0);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "setup: PostgreSQL, two execservers of 3 slots, the ledger", test_setup },
		{ "ledger: three dispatchers, cancels, exactly once", test_ledger_direct },
		{ "ledger through PgBouncer in transaction mode", test_ledger_pgbouncer },
		{ "teardown", test_teardown },
		{ NULL, NULL }
	};
	return run_suite("dispatch-ledger", cases);
}
