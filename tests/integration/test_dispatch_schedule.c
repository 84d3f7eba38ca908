/*
 * test_dispatch_schedule.c - periodic jobs (docs/dispatch.md, "Periodic
 * jobs") on a real PostgreSQL with real dispatchers:
 *  - schedule() creates and replaces (next_run_at reset), refuses a bad
 *    spec, zone or job; unschedule() answers true then false;
 *  - a dispatcher computes a new row's first next_run_at; a spec the C
 *    parser refuses gets its error, said once in the fleet's logs; so
 *    does a job the table job refuses (nothing submitted);
 *  - three dispatchers read one occurrence; one's fire is held in
 *    flight (its job insert waits at the test's gate, an advisory lock):
 *    the two others' fires pass over the locked row without waiting;
 *    one job, one "submitted as job" line;
 *  - the same with the holder SIGKILLed (and its backend ended) at that
 *    moment: another submits it, once;
 *  - a statement queued behind the gate until after the next occurrence,
 *    with a read from before it, submits nothing (the guard on
 *    next_run_at): the next occurrence is submitted once, as itself;
 *  - PostgreSQL down across an occurrence: submitted once, after;
 *  - ten occurrences missed while no dispatcher ran: one job, for the
 *    latest;
 *  - an occurrence at or before last_run_at (a replace racing a fire,
 *    next_run_at set back by hand) is never submitted again; schedule()
 *    stamps updated_at with clock_timestamp();
 *  - a replace with the same cron and tz keeps a missed occurrence;
 *  - rows the test's session holds are passed over, never waited for;
 *  - 110 failing rows back off and do not starve a healthy one;
 *  - execctl schedule add (the C parser's refusal first), list, remove.
 * cron is minute-grained: the tests set next_run_at themselves (now() + 2
 * s, or minutes back) to make an occurrence due, rather than wait for
 * one; a yearly spec keeps a natural one from coming in between.
 * No execserver runs: the jobs stay queued, counted by their payload.
 * Timings: scheduleCheckSec 1, the fixture's others (staleAfterSec 10 in
 * the races, so that the statements waiting at the gate stay within
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

/* The query counting the dispatchers' fires waiting for a lock (the
 * gate's, or on the old code a schedule row's). */
#define LOCK_WAITERS                                                                      \
	"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query " \
	"LIKE '%%last_job_id%%'"

/* The gate: a trigger on job (created in main) takes advisory lock 4242
 * for its transaction before a job goes in.  The test holds it in a
 * session of its own to keep a fire in flight: that fire holds its
 * schedule row, which the other dispatchers' fires pass over (SKIP
 * LOCKED) rather than wait for. */
static PGconn *gate_close(void)
{
	PGconn *g = pgtest_connect(F.pg.conninfo);

	CU_ASSERT_FATAL(g != NULL);
	PQclear(pgtest_query(g, "SELECT pg_advisory_lock(4242)"));
	return g;
}

static void gate_open(PGconn *g)
{
	PQclear(pgtest_query(g, "SELECT pg_advisory_unlock(4242)"));
	PQfinish(g);
}

/* The index of the dispatcher whose fire waits at the gate (-1: none). */
static int gate_waiter(void)
{
	char app[32];

	pgtest_text(F.c, app, sizeof app,
		    "SELECT application_name FROM pg_stat_activity WHERE wait_event_type = "
		    "'Lock' AND query LIKE '%%last_job_id%%'");
	return app[0] == 'd' ? atoi(app + 1) : -1;
}

/* Three dispatchers with the yearly row "race" due at now() + 2 s and
 * the gate closed: returns the gate once one fire waits at it (*w: its
 * dispatcher). */
static PGconn *three_gated(int *w)
{
	clear_all();
	for (int i = 0; i < 3; i++)
		start_disp(i, RACE_EXTRA);
	add("race", YEARLY);
	CU_ASSERT_FATAL(wait_sql(5000, 1,
				 "SELECT count(*) FROM execdispatch.schedule WHERE next_run_at > "
				 "now()") == 0);
	PGconn *g = gate_close();
	PQclear(pgtest_query(F.c, "UPDATE execdispatch.schedule SET next_run_at = now() + "
				  "interval '2 s'"));
	CU_ASSERT_FATAL(wait_sql(6000, 1, LOCK_WAITERS) == 0);
	*w = gate_waiter();
	CU_ASSERT_FATAL(*w >= 0 && *w < 3);
	CU_ASSERT_EQUAL(jobs_of("race"), 0);
	return g;
}

/* The gate opened: one job, the row moved on past it. */
static void open_and_count(PGconn *g)
{
	gate_open(g);
	CU_ASSERT(wait_sql(5000, 0, LOCK_WAITERS) == 0);
	CU_ASSERT(wait_sql(5000, 1, "SELECT count(*) FROM execdispatch.job") == 0);
	CU_ASSERT_EQUAL(jobs_of("race"), 1);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.schedule s JOIN "
					"execdispatch.job j ON j.id = s.last_job_id WHERE "
					"s.next_run_at > now() + interval '1 day'"),
			1);
}

/* One fire in flight (held at the gate, the row locked): the two other
 * dispatchers read the same occurrence and send their fire, which
 * passes over the locked row without waiting (nobody else waits for a
 * lock); the gate opened, one job. */
static void test_three_race(void)
{
	int w;
	PGconn *g = three_gated(&w);

	for (long long end = harness_now_ms() + 5000;
	     harness_now_ms() < end && (log_count((w + 1) % 3, "submitted by another") == 0 ||
					log_count((w + 2) % 3, "submitted by another") == 0);
	     harness_sleep_ms(20))
		;
	CU_ASSERT(log_count((w + 1) % 3, "submitted by another") >= 1);
	CU_ASSERT(log_count((w + 2) % 3, "submitted by another") >= 1);
	CU_ASSERT_EQUAL(pgtest_int(F.c, LOCK_WAITERS), 1);
	open_and_count(g);
	for (long long end = harness_now_ms() + 5000;
	     harness_now_ms() < end && log_count(w, "submitted as job") == 0; harness_sleep_ms(20))
		;
	CU_ASSERT_EQUAL(log_count(0, "submitted as job") + log_count(1, "submitted as job") +
				log_count(2, "submitted as job"),
			1);
	CU_ASSERT_EQUAL(log_count(w, "submitted as job"), 1);
	for (int i = 0; i < 3; i++)
		df_stop_disp(&F, i, SIGTERM, 10000);
}

/* The dispatcher whose fire is in flight SIGKILLed and its backend
 * ended (a host lost): rolled back, the row is still due; another
 * dispatcher's next pass fires it (and waits at the gate); one job. */
static void test_killed_at_the_occurrence(void)
{
	int w;
	PGconn *g = three_gated(&w);

	df_stop_disp(&F, w, SIGKILL, 5000);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(pg_terminate_backend(pid)) FROM "
				   "pg_stat_activity WHERE application_name = 'd%d' AND "
				   "wait_event_type = 'Lock'",
				   w),
			1);
	int w2 = -1;
	for (long long end = harness_now_ms() + 6000;
	     harness_now_ms() < end && ((w2 = gate_waiter()) < 0 || w2 == w); harness_sleep_ms(20))
		;
	CU_ASSERT(w2 >= 0 && w2 != w);
	open_and_count(g);
	for (long long end = harness_now_ms() + 5000;
	     harness_now_ms() < end && w2 >= 0 && log_count(w2, "submitted as job") == 0;
	     harness_sleep_ms(20))
		;
	CU_ASSERT_EQUAL(log_count((w + 1) % 3, "submitted as job") +
				log_count((w + 2) % 3, "submitted as job"),
			1);
	for (int i = 0; i < 3; i++)
		if (i != w)
			df_stop_disp(&F, i, SIGTERM, 10000);
}

/* A statement sent after the next occurrence with a read from before it
 * submits nothing: d0 reads rows a and b due at T1; its fire of a waits
 * at the gate (the row a locked), the one of b is queued behind it on
 * the same lane; meanwhile the test, as another dispatcher that won b's
 * T1, moves b on to T2 = now + 2 s; once T2 is past the gate opens: d0's
 * statement for b (now() after T2, so "still due" holds) finds
 * next_run_at no longer the one it read and submits nothing; the next
 * pass submits T2, once: last_run_at is T2, not T1 (without the guard on
 * next_run_at, d0 would submit b as T1 and skip T2). */
static void test_stale_after_next(void)
{
	clear_all();
	start_disp(0, RACE_EXTRA);
	add("a", YEARLY);
	add("b", YEARLY);
	CU_ASSERT_FATAL(wait_sql(5000, 2,
				 "SELECT count(*) FROM execdispatch.schedule WHERE next_run_at > "
				 "now()") == 0);
	PGconn *g = gate_close();
	long long t1 = pgtest_int(F.c, "UPDATE execdispatch.schedule SET next_run_at = "
				       "date_trunc('second', now()) + interval '2 s' RETURNING "
				       "extract(epoch FROM next_run_at)::bigint");
	CU_ASSERT_FATAL(wait_sql(6000, 1, LOCK_WAITERS) == 0);
	long long t2 = pgtest_int(F.c, "UPDATE execdispatch.schedule SET next_run_at = "
				       "date_trunc('second', clock_timestamp()) + interval '2 s' "
				       "WHERE name = 'b' RETURNING extract(epoch FROM "
				       "next_run_at)::bigint");
	CU_ASSERT(t2 > t1);
	CU_ASSERT(wait_sql(5000, 1, "SELECT (extract(epoch FROM clock_timestamp()) > %lld)::int",
			   t2) == 0);
	gate_open(g);
	CU_ASSERT(wait_sql(5000, 2, "SELECT count(*) FROM execdispatch.job") == 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT extract(epoch FROM last_run_at)::bigint FROM "
					"execdispatch.schedule WHERE name = 'b'"),
			t2);
	CU_ASSERT_EQUAL(jobs_of("a"), 1);
	CU_ASSERT_EQUAL(jobs_of("b"), 1);
	CU_ASSERT_EQUAL(log_count(0, "submitted by another dispatcher"), 1);
	df_stop_disp(&F, 0, SIGTERM, 10000);
}

/* An occurrence at or before last_run_at is never submitted again.
 * "again": the end state of a replace racing a fire (the fire of this
 * year's Jan 1 committed, then the replace, stamped before it, reset
 * next_run_at): the first next_run_at is computed after last_run_at, not
 * after updated_at.  "hand": next_run_at set back to last_run_at by
 * hand: moved on, nothing submitted, a warning.  Then schedule() in a
 * transaction begun 200 ms earlier stamps updated_at when it runs
 * (clock_timestamp()), not at the transaction's start. */
static void test_replace_after_fire(void)
{
	clear_all();
	add("again", YEARLY);
	add("hand", YEARLY);
	long long jan1 = pgtest_int(
		F.c,
		"UPDATE execdispatch.schedule SET last_run_at = date_trunc('year', now() AT "
		"TIME ZONE 'UTC') AT TIME ZONE 'UTC', last_job_id = 777, next_run_at = NULL, "
		"updated_at = date_trunc('year', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - "
		"interval '0.1 s' WHERE name = 'again' RETURNING extract(epoch FROM "
		"last_run_at)::bigint");
	PQclear(pgtest_query(
		F.c,
		"UPDATE execdispatch.schedule SET last_run_at = to_timestamp(%lld), "
		"next_run_at = to_timestamp(%lld), last_job_id = 778 WHERE name = 'hand'",
		jan1, jan1));
	start_disp(0, "scheduleCheckSec: 1\n");
	CU_ASSERT(wait_sql(5000, 2,
			   "SELECT count(*) FROM execdispatch.schedule WHERE next_run_at > "
			   "now()") == 0);
	CU_ASSERT(wait_sql(5000, 1,
			   "SELECT count(*) FROM execdispatch.schedule WHERE name = "
			   "'hand' AND next_run_at > now()") == 0);
	CU_ASSERT_EQUAL(jobs_of("again"), 0);
	CU_ASSERT_EQUAL(jobs_of("hand"), 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.schedule WHERE last_run_at = "
				   "to_timestamp(%lld) AND last_job_id IN (777, 778)",
				   jan1),
			2);
	CU_ASSERT_EQUAL(log_count(0, "schedule hand: occurrence"), 1);
	CU_ASSERT_EQUAL(log_count(0, "at or before its last_run_at"), 1);
	df_stop_disp(&F, 0, SIGTERM, 10000);

	PGconn *o = pgtest_connect(F.pg.conninfo);
	CU_ASSERT_FATAL(o != NULL);
	PQclear(pgtest_query(o, "BEGIN"));
	for (long long end = harness_now_ms() + 3000;
	     harness_now_ms() < end &&
	     pgtest_int(o, "SELECT (clock_timestamp() > now() + interval '200 ms')::int") != 1;
	     harness_sleep_ms(20))
		;
	PQclear(pgtest_query(o, "SELECT execdispatch.schedule('again', '@daily', 'work', "
				"'{\"command\": \"true\"}')"));
	CU_ASSERT_EQUAL(pgtest_int(o, "SELECT (updated_at >= now() + interval '200 ms')::int "
				      "FROM execdispatch.schedule WHERE name = 'again'"),
			1);
	PQclear(pgtest_query(o, "COMMIT"));
	PQfinish(o);
}

/* A replace with the same cron and tz keeps next_run_at: an occurrence
 * missed while no dispatcher ran (a deploy that re-applies its
 * schedules) is still submitted, with the new job; another cron resets
 * it. */
static void test_reapply_keeps_missed(void)
{
	char out[64];

	clear_all();
	add("keep", YEARLY);
	long long due = pgtest_int(F.c,
				   "UPDATE execdispatch.schedule SET next_run_at = "
				   "date_trunc('second', now()) - interval '1 minute' RETURNING "
				   "extract(epoch FROM next_run_at)::bigint");
	pgtest_text(F.c, out, sizeof out,
		    "SELECT execdispatch.schedule('keep', '%s', 'work', '{\"command\": \"true\", "
		    "\"tag\": \"keep2\"}')",
		    YEARLY);
	CU_ASSERT_STRING_EQUAL(out, "replaced");
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT extract(epoch FROM next_run_at)::bigint FROM "
					"execdispatch.schedule"),
			due);
	start_disp(0, "scheduleCheckSec: 1\n");
	CU_ASSERT(wait_sql(10000, 1,
			   "SELECT count(*) FROM execdispatch.job WHERE job->>'tag' = 'keep2'") ==
		  0);
	CU_ASSERT_EQUAL(jobs_of("keep"), 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT extract(epoch FROM last_run_at)::bigint FROM "
					"execdispatch.schedule"),
			due);
	df_stop_disp(&F, 0, SIGTERM, 10000);
	PQclear(pgtest_query(F.c, "SELECT execdispatch.schedule('keep', '0 0 1 7 *', 'work', "
				  "'{\"command\": \"true\"}')"));
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.schedule WHERE "
					"next_run_at IS NULL"),
			1);
}

/* Rows another session holds (a refusal, a first next_run_at and a fire
 * to write) are passed over: the chores lane never waits for a
 * schedule's lock, and the row after them is submitted meanwhile; once
 * released, the next passes do the three. */
static void test_locked_rows_skipped(void)
{
	clear_all();
	add("h_bad", "61 * * * *");
	add("h_first", YEARLY);
	add("h_due", YEARLY);
	add("free", YEARLY);
	PQclear(pgtest_query(F.c, "UPDATE execdispatch.schedule SET next_run_at = now() - CASE "
				  "name WHEN 'h_due' THEN interval '2 min' ELSE interval '1 min' "
				  "END WHERE name IN ('h_due', 'free')"));
	PGconn *o = pgtest_connect(F.pg.conninfo);
	CU_ASSERT_FATAL(o != NULL);
	PQclear(pgtest_query(o, "BEGIN"));
	PQclear(pgtest_query(o, "SELECT name FROM execdispatch.schedule WHERE name LIKE 'h%%' FOR "
				"UPDATE"));
	start_disp(0, RACE_EXTRA);
	CU_ASSERT(wait_sql(5000, 1,
			   "SELECT count(*) FROM execdispatch.job WHERE job->>'tag' = 'free'") ==
		  0);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM pg_stat_activity WHERE "
					"application_name = 'd0' AND wait_event_type = 'Lock'"),
			0);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.schedule WHERE name "
					"LIKE 'h%%' AND error IS NULL AND last_run_at IS NULL AND "
					"(next_run_at IS NULL) = (name <> 'h_due')"),
			3);
	PQclear(pgtest_query(o, "COMMIT"));
	PQfinish(o);
	CU_ASSERT(wait_sql(5000, 1,
			   "SELECT count(*) FROM execdispatch.job WHERE job->>'tag' = 'h_due'") ==
		  0);
	CU_ASSERT(
		wait_sql(5000, 2,
			 "SELECT count(*) FROM execdispatch.schedule WHERE (name = 'h_bad' AND "
			 "error LIKE 'cron: %%') OR (name = 'h_first' AND next_run_at > now())") ==
		0);
	CU_ASSERT_EQUAL(log_count(0, "schedule h_bad: refused"), 1);
	df_stop_disp(&F, 0, SIGTERM, 10000);
}

/* 110 rows whose fire fails (a trigger's P0001, due an hour ago) and a
 * healthy row due later: the healthy one is submitted all the same
 * (the failing rows back off and sort last); a failing row's n-th
 * failure in a row waits scheduleCheckSec * 2^(n-1) (1 s, 2 s, ...),
 * said in the log; a replace resets its back-off. */
static void test_failing_backoff(void)
{
	char out[64];

	clear_all();
	PQclear(pgtest_query(
		F.c,
		"CREATE FUNCTION fail_job() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
		"IF NEW.job->>'tag' LIKE 'fail%%' THEN RAISE EXCEPTION 'no fail here'; END IF; "
		"RETURN NEW; END $$; CREATE TRIGGER fail_job BEFORE INSERT ON execdispatch.job "
		"FOR EACH ROW EXECUTE FUNCTION fail_job()"));
	PQclear(pgtest_query(F.c,
			     "INSERT INTO execdispatch.schedule (name, cron, service, job, "
			     "next_run_at) SELECT 'fail' || lpad(i::text, 3, '0'), '%s', 'work', "
			     "jsonb_build_object('command', 'true', 'tag', 'fail' || "
			     "lpad(i::text, 3, '0')), now() - interval '1 hour' FROM "
			     "generate_series(0, 109) i",
			     YEARLY));
	add("good", YEARLY);
	PQclear(pgtest_query(F.c, "UPDATE execdispatch.schedule SET next_run_at = now() - "
				  "interval '1 minute' WHERE name = 'good'"));
	start_disp(0, "scheduleCheckSec: 1\n");
	CU_ASSERT(wait_sql(10000, 1, "SELECT count(*) FROM execdispatch.job") == 0);
	CU_ASSERT_EQUAL(jobs_of("good"), 1);
	CU_ASSERT(wait_sql(10000, 2,
			   "SELECT failures FROM execdispatch.schedule WHERE name = 'fail000'") ==
		  0);
	long long t2 = harness_now_ms();
	CU_ASSERT(wait_sql(10000, 3,
			   "SELECT failures FROM execdispatch.schedule WHERE name = 'fail000'") ==
		  0);
	CU_ASSERT(harness_now_ms() - t2 >= 1900);
	for (long long end = harness_now_ms() + 5000;
	     harness_now_ms() < end && log_count(0, "schedule fail000: occurrence") < 3;
	     harness_sleep_ms(20))
		;
	CU_ASSERT_EQUAL(log_count(0, "schedule fail000: occurrence"), 3);
	CU_ASSERT_EQUAL(log_count(0, "(failure 1 in a row; tried again in 1 s): ERROR:  no fail "
				     "here"),
			110);
	CU_ASSERT(log_count(0, "(failure 2 in a row; tried again in 2 s)") >= 1);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.schedule WHERE name "
					"LIKE 'fail%%' AND failures >= 1 AND last_run_at IS NULL"),
			110);
	pgtest_text(F.c, out, sizeof out,
		    "SELECT execdispatch.schedule('fail000', '%s', 'work', '{\"command\": "
		    "\"true\"}')",
		    YEARLY);
	CU_ASSERT_STRING_EQUAL(out, "replaced");
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.schedule WHERE name = "
					"'fail000' AND failures = 0 AND retry_at IS NULL"),
			1);
	df_stop_disp(&F, 0, SIGTERM, 10000);
	PQclear(pgtest_query(F.c, "DROP TRIGGER fail_job ON execdispatch.job; DROP FUNCTION "
				  "fail_job()"));
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

static void test_execctl(void)
{
	char out[4096];

	clear_all();
	/* the C parser refuses before anything is sent */
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out,
				   "schedule add --db '%s' nightly '0 24 * * *' work "
				   "'{\"command\": \"true\"}'",
				   F.conninfo),
			2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "field 2 (hour) at column 3: 24 is out of range"));
	CU_ASSERT_EQUAL(
		df_execctl(out, sizeof out,
			   "schedule add --db '%s' --tz Nowhere/Land nightly '0 3 * * *' work "
			   "'{\"command\": \"true\"}'",
			   F.conninfo),
		2);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.schedule"), 0);
	CU_ASSERT_EQUAL(
		df_execctl(out, sizeof out,
			   "schedule add --db '%s' -P 3 --tz Europe/Berlin nightly '0 3 * * "
			   "mon-fri' work '{\"command\": \"true\"}'",
			   F.conninfo),
		0);
	CU_ASSERT_STRING_EQUAL(out, "created\n");
	CU_ASSERT_EQUAL(df_execctl(out, sizeof out, "schedule list --db '%s'", F.conninfo), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "NAME"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "nightly  0 3 * * mon-fri  Europe/Berlin  work"));
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT priority FROM execdispatch.schedule"), 3);
	CU_ASSERT_EQUAL(
		df_execctl(out, sizeof out, "schedule remove --db '%s' nightly", F.conninfo), 0);
	CU_ASSERT_EQUAL(
		df_execctl(out, sizeof out, "schedule remove --db '%s' nightly", F.conninfo), 122);
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
		{ "an occurrence at or before last_run_at is never submitted again",
		  test_replace_after_fire },
		{ "a replace with the same cron and tz keeps a missed occurrence",
		  test_reapply_keeps_missed },
		{ "rows another session holds are passed over, never waited for",
		  test_locked_rows_skipped },
		{ "failing fires back off; healthy rows are not starved", test_failing_backoff },
		{ "execctl schedule add, list, remove", test_execctl },
		{ NULL, NULL },
	};
	if (df_start(&F) < 0) {
		fprintf(stderr, "cannot start PostgreSQL\n");
		return 1;
	}
	PQclear(pgtest_query(F.c,
			     "CREATE FUNCTION gate() RETURNS trigger LANGUAGE plpgsql AS $$ "
			     "BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NEW; END $$; "
			     "CREATE TRIGGER gate BEFORE INSERT ON execdispatch.job FOR EACH ROW "
			     "EXECUTE FUNCTION gate()"));
	int rc = run_suite("dispatch_schedule", cases);
	df_cleanup(&F, rc != 0);
	return rc;
}
