/*
 * test_dispatch_schedule.c - periodic jobs (docs/dispatch.md, "Periodic
 * jobs") on a real PostgreSQL with real dispatchers:
 *  - schedule() creates and replaces (next_run_at reset), refuses a bad
 *    spec, zone or job; unschedule() answers true then false;
 *  - a dispatcher computes a new row's first next_run_at; a spec the C
 *    parser refuses gets its error, said once in the fleet's logs; so
 *    does a job the table job refuses (nothing submitted);
 *  - three dispatchers read one occurrence while the test holds the
 *    row's lock, so that all three send their statement: one job, one
 *    "submitted as job" line, two "submitted by another dispatcher";
 *  - the same with one dispatcher SIGKILLed (and its backend ended) at
 *    that moment: the others submit it, once;
 *  - a statement queued behind a lock until after the next occurrence,
 *    with a read from before it, submits nothing (the guard on
 *    next_run_at): the next occurrence is submitted once, as itself;
 *  - PostgreSQL down across an occurrence: submitted once, after;
 *  - ten occurrences missed while no dispatcher ran: one job, for the
 *    latest;
 *  - execctl schedule add (the C parser's refusal first), list, remove.
 * cron is minute-grained: the tests set next_run_at themselves (now() + 2
 * s, or minutes back) to make an occurrence due, rather than wait for
 * one; a yearly spec keeps a natural one from coming in between.
 * No execserver runs: the jobs stay queued, counted by their payload.
 * Timings: scheduleCheckSec 1, the fixture's others (staleAfterSec 10 in
 * the races, so that the statements waiting for the lock stay within
 * their deadline on a loaded machine).
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <CUnit/CUnit.h>

#include "dispatch_fixture.h"
#include "suite.h"

static struct dfix F;

#define YEARLY "0 0 1 1 *"
#define RACE_EXTRA "scheduleCheckSec: 1\nstaleAfterSec: 10\nheartbeatSec: 2\n"

static void clear_all(void)
{
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.schedule"));
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.dispatcher"));
}

/* Polls the integer query q until it reads want; 0, or -1 after ms. */
static int wait_sql(int ms, long long want, const char *fmt, ...)
{
	char q[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(q, sizeof q, fmt, ap);
	va_end(ap);
	for (long long end = harness_now_ms() + ms; harness_now_ms() < end; harness_sleep_ms(20))
		if (pgtest_int(F.c, "%s", q) == want)
			return 0;
	return -1;
}

/* Where dispatcher i's log stood when start_disp started it (a log is
 * appended to by every start of the same index). */
static size_t log_base[DF_MAX_DISP];

/* Times dispatcher i's log holds text since its last start_disp. */
static int log_count(int i, const char *text)
{
	size_t len = 0;
	unsigned char *buf = harness_read_file(F.log[i], &len);
	int n = 0;

	for (char *p = buf && len > log_base[i] ? (char *)buf + log_base[i] : NULL;
	     p && (p = strstr(p, text)); p += strlen(text))
		n++;
	free(buf);
	return n;
}

/* The jobs a schedule submitted (its payload names it). */
static long long jobs_of(const char *name)
{
	return pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE job->>'tag' = '%s'",
			  name);
}

static void add(const char *name, const char *spec)
{
	char out[64];

	pgtest_text(F.c, out, sizeof out,
		    "SELECT execdispatch.schedule('%s', '%s', 'work', "
		    "'{\"command\": \"true\", \"tag\": \"%s\"}')",
		    name, spec, name);
	CU_ASSERT_STRING_EQUAL(out, "created");
}

/* Dispatcher i started with extra, its sessions named d<i>. */
static void start_disp(int i, const char *extra)
{
	char named[512];
	const char *plain = F.conninfo;

	snprintf(named, sizeof named, "%s application_name=d%d", plain, i);
	F.conninfo = named;
	CU_ASSERT_FATAL(df_write_config(&F, i, extra) == 0);
	F.conninfo = plain;
	free(harness_read_file(F.log[i], &log_base[i]));
	CU_ASSERT_FATAL(df_start_disp(&F, i) == 0);
}

static void test_sql_api(void)
{
	char out[256];

	clear_all();
	add("a", "*/5 * * * *");
	PQclear(pgtest_query(F.c, "UPDATE execdispatch.schedule SET next_run_at = now()"));
	pgtest_text(F.c, out, sizeof out,
		    "SELECT execdispatch.schedule('a', '@hourly', 'work', '{\"command\": \"x\"}', "
		    "5, 'Europe/Berlin')");
	CU_ASSERT_STRING_EQUAL(out, "replaced");
	pgtest_text(F.c, out, sizeof out,
		    "SELECT cron || '|' || tz || '|' || priority || '|' || (next_run_at IS NULL) "
		    "|| '|' || count(*) OVER () FROM execdispatch.schedule");
	CU_ASSERT_STRING_EQUAL(out, "@hourly|Europe/Berlin|5|true|1");
	/* refusals: 22023 with the argument named, nothing changed */
	static const char *const bad[][2] = {
		{ "'b', '* * *', 'work', '{\"command\": \"x\"}'", "cron must be five fields" },
		{ "'b', '@reboot', 'work', '{\"command\": \"x\"}'", "cron must be five fields" },
		{ "'b', '* * * * *', 'work', '{\"command\": \"x\"}', 0, 'Mars/Base'",
		  "tz must be a time zone" },
		{ "'b', '* * * * *', 'work', '{\"x\": 1}'", "job must be a JSON object" },
		{ "'b c', '* * * * *', 'work', '{\"command\": \"x\"}'", "name must be" },
		{ "'b', '* * * * *', 'no space', '{\"command\": \"x\"}'", "service must be" },
		{ "'b', '* * * * *', 'work', '{\"command\": \"x\"}', 5000", "priority must be" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char q[512];
		snprintf(q, sizeof q, "SELECT execdispatch.schedule(%s)", bad[i][0]);
		PGresult *r = PQexec(F.c, q);
		const char *msg = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
		const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
		CU_ASSERT(st && strcmp(st, "22023") == 0);
		CU_ASSERT(msg && strstr(msg, bad[i][1]));
		if (!msg || !strstr(msg, bad[i][1]))
			printf("\n  %s: %s\n", q, msg ? msg : "(accepted)");
		PQclear(r);
	}
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.schedule"), 1);
	pgtest_text(F.c, out, sizeof out, "SELECT execdispatch.unschedule('a')::text");
	CU_ASSERT_STRING_EQUAL(out, "true");
	pgtest_text(F.c, out, sizeof out, "SELECT execdispatch.unschedule('a')::text");
	CU_ASSERT_STRING_EQUAL(out, "false");
}

/* A new row gets the first occurrence after its schedule() call; a spec
 * the C parser refuses (the SQL shape check lets 61 through) gets its
 * error, logged once by one dispatcher of two; replaced, it runs. */
static void test_first_and_refused(void)
{
	char out[256];

	clear_all();
	start_disp(0, "scheduleCheckSec: 1\n");
	start_disp(1, "scheduleCheckSec: 1\n");
	add("every", "* * * * *");
	add("bad", "61 * * * *");
	CU_ASSERT(wait_sql(5000, 1,
			   "SELECT count(*) FROM execdispatch.schedule WHERE name = 'every' AND "
			   "coalesce(last_run_at, next_run_at) = date_trunc('minute', updated_at) "
			   "+ interval '1 minute'") == 0);
	CU_ASSERT(wait_sql(5000, 1,
			   "SELECT count(*) FROM execdispatch.schedule WHERE name = 'bad' AND "
			   "error IS NOT NULL") == 0);
	pgtest_text(F.c, out, sizeof out,
		    "SELECT error || '|' || (next_run_at IS NULL) FROM execdispatch.schedule WHERE "
		    "name = 'bad'");
	CU_ASSERT_PTR_NOT_NULL(
		strstr(out, "cron: field 1 (minute) at column 1: 61 is out of range"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "|true"));
	CU_ASSERT_EQUAL(
		log_count(0, "schedule bad: refused") + log_count(1, "schedule bad: refused"), 1);
	/* replaced with a good spec: the error goes, next_run_at comes */
	PQclear(pgtest_query(F.c, "SELECT execdispatch.schedule('bad', '@daily', 'work', "
				  "'{\"command\": \"true\"}')"));
	CU_ASSERT(wait_sql(5000, 1,
			   "SELECT count(*) FROM execdispatch.schedule WHERE name = 'bad' AND "
			   "error IS NULL AND next_run_at > now()") == 0);
	df_stop_disp(&F, 0, SIGTERM, 10000);
	df_stop_disp(&F, 1, SIGTERM, 10000);
}

/* A job the table job refuses (a trigger here, as an application's
 * constraint would): the occurrence's statement fails whole (next_run_at
 * not moved, no job) and the reason goes to the row's error, which takes
 * it out of the passes. */
static void test_job_refused(void)
{
	char out[512];

	clear_all();
	PQclear(pgtest_query(
		F.c, "CREATE FUNCTION no_nojob() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
		     "IF NEW.job->>'tag' = 'nojob' THEN RAISE EXCEPTION 'no nojob here' USING "
		     "ERRCODE = 'check_violation'; END IF; RETURN NEW; END $$; "
		     "CREATE TRIGGER no_nojob BEFORE INSERT ON execdispatch.job FOR EACH ROW "
		     "EXECUTE FUNCTION no_nojob()"));
	start_disp(0, "scheduleCheckSec: 1\n");
	add("nojob", YEARLY);
	CU_ASSERT_FATAL(wait_sql(5000, 1,
				 "SELECT count(*) FROM execdispatch.schedule WHERE next_run_at > "
				 "now()") == 0);
	PQclear(pgtest_query(F.c, "UPDATE execdispatch.schedule SET next_run_at = now()"));
	CU_ASSERT(wait_sql(5000, 1,
			   "SELECT count(*) FROM execdispatch.schedule WHERE error IS NOT NULL") ==
		  0);
	pgtest_text(F.c, out, sizeof out,
		    "SELECT error || '|' || (next_run_at <= now()) || '|' || (last_run_at IS NULL) "
		    "FROM execdispatch.schedule");
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "job refused: no nojob here|true|true"));
	if (!strstr(out, "refused: no nojob here|true|true"))
		printf("\n  row: %s\n", out);
	CU_ASSERT_EQUAL(jobs_of("nojob"), 0);
	CU_ASSERT_EQUAL(log_count(0, "schedule nojob: refused: job refused"), 1);
	PQclear(pgtest_query(F.c, "DROP TRIGGER no_nojob ON execdispatch.job; DROP FUNCTION "
				  "no_nojob()"));
	df_stop_disp(&F, 0, SIGTERM, 10000);
}

/* The query counting the race's backends waiting for the row lock. */
#define LOCK_WAITERS                                                                      \
	"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query " \
	"LIKE '%%last_job_id%%'"

/* Three dispatchers with the yearly row "race" due at now() + 2 s, its
 * lock held by the test once it is set: returns the locking session once
 * all three statements wait for it. */
static PGconn *three_waiting(void)
{
	clear_all();
	for (int i = 0; i < 3; i++)
		start_disp(i, RACE_EXTRA);
	add("race", YEARLY);
	CU_ASSERT_FATAL(wait_sql(5000, 1,
				 "SELECT count(*) FROM execdispatch.schedule WHERE next_run_at > "
				 "now()") == 0);
	PGconn *other = pgtest_connect(F.pg.conninfo);
	CU_ASSERT_FATAL(other != NULL);
	PQclear(pgtest_query(F.c, "UPDATE execdispatch.schedule SET next_run_at = now() + "
				  "interval '2 s'"));
	PQclear(pgtest_query(other, "BEGIN"));
	PQclear(pgtest_query(other, "SELECT name FROM execdispatch.schedule FOR UPDATE"));
	CU_ASSERT_FATAL(wait_sql(6000, 3, LOCK_WAITERS) == 0);
	CU_ASSERT_EQUAL(jobs_of("race"), 0);
	return other;
}

/* The lock released: the statements go one after the other; one job. */
static void release_and_count(PGconn *other)
{
	PQclear(pgtest_query(other, "COMMIT"));
	PQfinish(other);
	CU_ASSERT(wait_sql(5000, 0, LOCK_WAITERS) == 0);
	CU_ASSERT_EQUAL(jobs_of("race"), 1);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.schedule s JOIN "
					"execdispatch.job j ON j.id = s.last_job_id WHERE "
					"s.next_run_at > now() + interval '1 day'"),
			1);
}

static void test_three_race(void)
{
	PGconn *other = three_waiting();

	release_and_count(other);
	/* each dispatcher logs its answer once it has read it */
	int won = 0, lost = 0;
	for (long long end = harness_now_ms() + 5000; harness_now_ms() < end && won < 3;
	     harness_sleep_ms(20)) {
		won = lost = 0;
		for (int i = 0; i < 3; i++) {
			won += log_count(i, "schedule race: occurrence ");
			lost += log_count(i, "submitted by another dispatcher");
		}
	}
	/* every dispatcher sent it: one wrote, two found it written */
	CU_ASSERT_EQUAL(lost, 2);
	CU_ASSERT_EQUAL(won - lost, 1);
	if (lost != 2 || won != 3)
		for (int i = 0; i < 3; i++)
			printf("\n  d%d: %d lines of the occurrence, %d lost", i,
			       log_count(i, "schedule race: occurrence "),
			       log_count(i, "submitted by another dispatcher"));
	for (int i = 0; i < 3; i++)
		df_stop_disp(&F, i, SIGTERM, 10000);
}

static void test_killed_at_the_occurrence(void)
{
	PGconn *other = three_waiting();

	/* d0 gone with its statement: its backend ended too (a host lost) */
	df_stop_disp(&F, 0, SIGKILL, 5000);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(pg_terminate_backend(pid)) FROM "
					"pg_stat_activity WHERE application_name = 'd0' AND "
					"wait_event_type = 'Lock'"),
			1);
	CU_ASSERT(wait_sql(5000, 2, LOCK_WAITERS) == 0);
	release_and_count(other);
	/* d1 and d2 both answered: one wrote it, the other found it written */
	for (long long end = harness_now_ms() + 5000;
	     harness_now_ms() < end && log_count(1, "schedule race: occurrence ") +
						       log_count(2, "schedule race: occurrence ") <
					       2;
	     harness_sleep_ms(20))
		;
	CU_ASSERT_EQUAL(log_count(1, "submitted as job") + log_count(2, "submitted as job"), 1);
	CU_ASSERT_EQUAL(log_count(1, "submitted by another") + log_count(2, "submitted by another"),
			1);
	df_stop_disp(&F, 1, SIGTERM, 10000);
	df_stop_disp(&F, 2, SIGTERM, 10000);
}

/* A statement sent after the next occurrence with a read from before it
 * submits nothing: d0 reads rows a and b due at T1; its statement for a
 * waits for the test's lock on a, the one for b is queued behind it;
 * meanwhile the test, as another dispatcher that won b's T1, moves b on
 * to T2 = now + 2 s; once T2 is past the lock goes: d0's statement for b
 * (now() after T2, so "still due" holds) finds next_run_at no longer the
 * one it read and submits nothing; the next pass submits T2, once:
 * last_run_at is T2, not T1 (without the guard on next_run_at, d0 would
 * submit b as T1 and skip T2). */
static void test_stale_after_next(void)
{
	clear_all();
	start_disp(0, RACE_EXTRA);
	add("a", YEARLY);
	add("b", YEARLY);
	CU_ASSERT_FATAL(wait_sql(5000, 2,
				 "SELECT count(*) FROM execdispatch.schedule WHERE next_run_at > "
				 "now()") == 0);
	PGconn *other = pgtest_connect(F.pg.conninfo);
	CU_ASSERT_FATAL(other != NULL);
	long long t1 = pgtest_int(F.c, "UPDATE execdispatch.schedule SET next_run_at = "
				       "date_trunc('second', now()) + interval '2 s' RETURNING "
				       "extract(epoch FROM next_run_at)::bigint");
	PQclear(pgtest_query(other, "BEGIN"));
	PQclear(pgtest_query(other, "SELECT name FROM execdispatch.schedule WHERE name = 'a' FOR "
				    "UPDATE"));
	CU_ASSERT_FATAL(wait_sql(6000, 1, LOCK_WAITERS) == 0);
	long long t2 = pgtest_int(F.c, "UPDATE execdispatch.schedule SET next_run_at = "
				       "date_trunc('second', clock_timestamp()) + interval '2 s' "
				       "WHERE name = 'b' RETURNING extract(epoch FROM "
				       "next_run_at)::bigint");
	CU_ASSERT(t2 > t1);
	CU_ASSERT(wait_sql(5000, 1, "SELECT (extract(epoch FROM clock_timestamp()) > %lld)::int",
			   t2) == 0);
	PQclear(pgtest_query(other, "COMMIT"));
	PQfinish(other);
	CU_ASSERT(wait_sql(5000, 2, "SELECT count(*) FROM execdispatch.job") == 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT extract(epoch FROM last_run_at)::bigint FROM "
					"execdispatch.schedule WHERE name = 'b'"),
			t2);
	CU_ASSERT_EQUAL(jobs_of("a"), 1);
	CU_ASSERT_EQUAL(jobs_of("b"), 1);
	CU_ASSERT_EQUAL(log_count(0, "submitted by another dispatcher"), 1);
	df_stop_disp(&F, 0, SIGTERM, 10000);
}

static int past(void *arg)
{
	return harness_now_ms() >= *(long long *)arg;
}

/* PostgreSQL stops before the occurrence and starts after it: the
 * occurrence is submitted once, after. */
static void test_restart_across(void)
{
	clear_all();
	start_disp(0, "scheduleCheckSec: 1\n");
	add("restart", YEARLY);
	CU_ASSERT_FATAL(wait_sql(5000, 1,
				 "SELECT count(*) FROM execdispatch.schedule WHERE next_run_at > "
				 "now()") == 0);
	PQclear(pgtest_query(F.c, "UPDATE execdispatch.schedule SET next_run_at = now() + "
				  "interval '2 s'"));
	long long after = harness_now_ms() + 3000;
	PQfinish(F.c);
	F.c = NULL;
	CU_ASSERT_FATAL(pgtest_stop(&F.pg) == 0);
	CU_ASSERT(harness_wait_until(past, &after, 10000) == 0);
	CU_ASSERT_FATAL(pgtest_restart(&F.pg) == 0);
	F.c = pgtest_connect(F.pg.conninfo);
	CU_ASSERT_FATAL(F.c != NULL);
	CU_ASSERT(wait_sql(20000, 1,
			   "SELECT count(*) FROM execdispatch.job WHERE job->>'tag' = "
			   "'restart'") == 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.schedule WHERE "
					"next_run_at > now() + interval '1 day' AND last_job_id IS "
					"NOT NULL"),
			1);
	CU_ASSERT_EQUAL(jobs_of("restart"), 1);
	df_stop_disp(&F, 0, SIGTERM, 10000);
}

/* Ten minutes of a every-minute spec missed with no dispatcher: one job,
 * standing for the latest minute; the next one ahead. */
static void test_missed(void)
{
	clear_all();
	add("missed", "* * * * *");
	PQclear(pgtest_query(F.c, "UPDATE execdispatch.schedule SET next_run_at = "
				  "date_trunc('minute', now()) - interval '10 minutes'"));
	start_disp(0, "scheduleCheckSec: 1\n");
	CU_ASSERT(wait_sql(10000, 1,
			   "SELECT count(*) FROM execdispatch.job WHERE job->>'tag' = "
			   "'missed'") == 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.schedule WHERE "
					"last_run_at = date_trunc('minute', last_run_at) AND "
					"last_run_at >= date_trunc('minute', now()) - interval '1 "
					"minute' AND next_run_at > now()"),
			1);
	CU_ASSERT_EQUAL(jobs_of("missed"), 1);
	df_stop_disp(&F, 0, SIGTERM, 10000);
}

/* Runs execctl with args; stdout+stderr into out; the exit status. */
static int execctl(char *out, size_t len, const char *fmt, ...)
{
	char args[1024], cmd[1400];
	const char *bin = getenv("EXECDISPATCH_BIN");
	va_list ap;
	FILE *p;
	size_t n;
	int st;

	va_start(ap, fmt);
	vsnprintf(args, sizeof args, fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof cmd, "%.*sexecctl %s 2>&1",
		 bin ? (int)(strrchr(bin, '/') + 1 - bin) : 2, bin ? bin : "./", args);
	p = popen(cmd, "r");
	n = p ? fread(out, 1, len - 1, p) : 0;
	out[n] = '\0';
	st = p ? pclose(p) : -1;
	return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_execctl(void)
{
	char out[4096];

	clear_all();
	/* the C parser refuses before anything is sent */
	CU_ASSERT_EQUAL(execctl(out, sizeof out,
				"schedule add --db '%s' nightly '0 24 * * *' work "
				"'{\"command\": \"true\"}'",
				F.conninfo),
			2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "field 2 (hour) at column 3: 24 is out of range"));
	CU_ASSERT_EQUAL(execctl(out, sizeof out,
				"schedule add --db '%s' --tz Nowhere/Land nightly '0 3 * * *' work "
				"'{\"command\": \"true\"}'",
				F.conninfo),
			2);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.schedule"), 0);
	CU_ASSERT_EQUAL(execctl(out, sizeof out,
				"schedule add --db '%s' -P 3 --tz Europe/Berlin nightly '0 3 * * "
				"mon-fri' work '{\"command\": \"true\"}'",
				F.conninfo),
			0);
	CU_ASSERT_STRING_EQUAL(out, "created\n");
	CU_ASSERT_EQUAL(execctl(out, sizeof out, "schedule list --db '%s'", F.conninfo), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "NAME"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "nightly  0 3 * * mon-fri  Europe/Berlin  work"));
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT priority FROM execdispatch.schedule"), 3);
	CU_ASSERT_EQUAL(execctl(out, sizeof out, "schedule remove --db '%s' nightly", F.conninfo),
			0);
	CU_ASSERT_EQUAL(execctl(out, sizeof out, "schedule remove --db '%s' nightly", F.conninfo),
			122);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.schedule"), 0);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "schedule() and unschedule(): create, replace, refuse", test_sql_api },
		{ "first next_run_at; a refused spec gets its error, said once",
		  test_first_and_refused },
		{ "a job the table refuses: the row's error, nothing submitted", test_job_refused },
		{ "three dispatchers race for one occurrence: one job", test_three_race },
		{ "one dispatcher killed at the occurrence: the others submit it once",
		  test_killed_at_the_occurrence },
		{ "a statement delayed past the next occurrence submits nothing",
		  test_stale_after_next },
		{ "PostgreSQL restart across an occurrence: submitted once after",
		  test_restart_across },
		{ "occurrences missed with no dispatcher: only the latest", test_missed },
		{ "execctl schedule add, list, remove", test_execctl },
		{ NULL, NULL },
	};
	if (df_start(&F) < 0) {
		fprintf(stderr, "cannot start PostgreSQL\n");
		return 1;
	}
	int rc = run_suite("dispatch_schedule", cases);
	df_cleanup(&F, rc != 0);
	return rc;
}
