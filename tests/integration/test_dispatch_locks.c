/*
 * test_dispatch_locks.c - execdispatch beside an application's open
 * transaction: a test session holds a row lock (as an application's
 * transaction does after cancel(), or a long UPDATE) on the row a
 * dispatcher's statement wants, for longer than staleAfterSec:
 *  - the start of a run (written running), the write of a POSITION and
 *    the rescue of a silent dispatcher's row never wait for the lock: the
 *    heartbeat stays fresh all along, and the row's work is done once the
 *    lock is gone (written running, the position written, the row
 *    rescued and run);
 *  - a statement that does wait for a lock past its deadline (an outcome)
 *    is cancelled at the server when its connection is abandoned, so
 *    abandoned backends do not pile up behind the lock;
 *  - a stop while an outcome waits behind a lock gives the outcome up 10 s
 *    after the signal, and the rescue reruns it;
 *  - an application's LOCK TABLE job held longer than staleAfterSec holds
 *    no dispatcher's heartbeat back (the beat touches the dispatcher table
 *    alone), and nothing is rescued once it is gone: every job runs once.
 * Timings: heartbeatSec 1, staleAfterSec 3, pollMs 100, cancelPollMs 100.
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <CUnit/CUnit.h>

#include "dispatch_fixture.h"
#include "suite.h"

static struct dfix F;

/* The lock is held this long: more than staleAfterSec (3 s), so that a
 * statement waiting for it would reach its deadline, and a heartbeat
 * queued behind it would be stale. */
#define HOLD_MS 3500
/* The age the heartbeat may reach: heartbeatSec plus slack for a loaded
 * machine, below what a heartbeat queued behind the lock would reach
 * (HOLD_MS or staleAfterSec). */
#define FRESH_MS 2500
/* LOCK TABLE job is held this long: past staleAfterSec plus a heartbeat
 * and a reconnection (4.3 s), so that (before) every dispatcher's
 * heartbeat waiting for it reached its deadline and was sent again, and
 * the first to go on after the lock found the others silent; below two
 * deadlines (6 s). */
#define TABLE_HOLD_MS 5000

static void test_setup(void)
{
	CU_ASSERT_FATAL(df_start(&F) == 0);
	CU_ASSERT_FATAL(df_start_exec(&F, 0, 4) == 0);
	CU_ASSERT_FATAL(df_make_ledger(&F) == 0);
}

static void clear_queue(void)
{
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.dispatcher"));
}

/* The age of our dispatcher's heartbeat in ms (the dispatchers' rows but
 * the made-up "ghost"). */
static long long beat_age(void)
{
	return pgtest_int(F.c, "SELECT coalesce(max(floor(extract(epoch FROM now() - "
			       "heartbeat_at) * 1000)), 0)::bigint FROM execdispatch.dispatcher "
			       "WHERE instance <> 'ghost'");
}

/* Holds the lock for ms (other's transaction), sampling the heartbeat's
 * age; the oldest seen. */
static long long hold_and_sample(int ms)
{
	long long max_ms = 0, age, t0;

	for (t0 = harness_now_ms(); harness_now_ms() - t0 < ms; harness_sleep_ms(100))
		if ((age = beat_age()) > max_ms)
			max_ms = age;
	return max_ms;
}

/* Waits up to ms for d0's heartbeat_at to change n times; 1 once it has. */
static int wait_beats(int n, int ms)
{
	char last[64], now[64];

	pgtest_text(F.c, last, sizeof last,
		    "SELECT heartbeat_at::text FROM execdispatch.dispatcher WHERE instance = 'd0'");
	for (long long t0 = harness_now_ms(); n > 0 && harness_now_ms() - t0 < ms;
	     harness_sleep_ms(50)) {
		pgtest_text(F.c, now, sizeof now,
			    "SELECT heartbeat_at::text FROM execdispatch.dispatcher WHERE "
			    "instance = 'd0'");
		if (strcmp(now, last) != 0) {
			n--;
			snprintf(last, sizeof last, "%s", now);
		}
	}
	return n == 0;
}

/* Waits up to ms for row id to meet cond (SQL); 1 once it does. */
static int wait_row(int ms, long long id, const char *cond)
{
	for (long long t0 = harness_now_ms(); harness_now_ms() - t0 < ms; harness_sleep_ms(50))
		if (pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE id = %lld AND %s",
			       id, cond) == 1)
			return 1;
	return 0;
}

/* A session of its own with row id locked in an open transaction (as an
 * application's after cancel()); COMMIT on it and PQfinish it after. */
static PGconn *lock_row(long long id)
{
	PGconn *other = pgtest_connect(F.pg.conninfo);

	CU_ASSERT_FATAL(other != NULL);
	PQclear(pgtest_query(other, "BEGIN"));
	PQclear(pgtest_query(other, "SELECT id FROM execdispatch.job WHERE id = %lld FOR UPDATE",
			     id));
	return other;
}

/* An empty queue, dispatcher 0 started, job submitted and running: its id. */
static long long one_running(const char *job)
{
	long long id;

	clear_queue();
	CU_ASSERT_FATAL(df_write_config(&F, 0, NULL) == 0);
	id = df_submit(&F, job, 0);
	CU_ASSERT_FATAL(df_start_disp(&F, 0) == 0);
	CU_ASSERT_FATAL(wait_row(5000, id, "state = 'running'"));
	return id;
}

/* Four sleeps fill the execserver's 4 slots; a fifth row is claimed
 * (share 4 + 1) and its want parked: its id. */
static long long fifth_claimed(const char *sleep_s, const char *fifth_s)
{
	char job[96];
	long long id;

	snprintf(job, sizeof job, "{\"command\":\"sleep\",\"args\":[\"%s\"]}", sleep_s);
	for (int i = 0; i < 4; i++)
		df_submit(&F, job, 1);
	snprintf(job, sizeof job, "{\"command\":\"sleep\",\"args\":[\"%s\"]}", fifth_s);
	id = df_submit(&F, job, 0);
	CU_ASSERT_FATAL(df_start_disp(&F, 0) == 0);
	CU_ASSERT_FATAL(wait_row(5000, id, "state = 'claimed'"));
	return id;
}

/* The start of a run whose row is locked: the run starts at the
 * execserver while the lock is held; DQ_START skips the row (it waited
 * for it, with the heartbeat queued behind it, before), and writes it
 * running once the lock is gone. */
static void test_start_locked(void)
{
	PGconn *other;
	long long id, max_ms;
	char buf[64];

	clear_queue();
	CU_ASSERT_FATAL(df_write_config(&F, 0, NULL) == 0);
	/* the sleeps end after 1.5 s, with the lock held: the fifth runs */
	id = fifth_claimed("1.5", "7");
	other = lock_row(id);
	max_ms = hold_and_sample(1500 + HOLD_MS);
	fprintf(stderr, "start blocked by a lock: heartbeat at most %lld ms old\n", max_ms);
	CU_ASSERT(max_ms < FRESH_MS);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id = %lld AND "
				   "state = 'claimed'",
				   id),
			1);
	PQclear(pgtest_query(other, "COMMIT"));
	/* written running within a few start checks, then done, once */
	CU_ASSERT(wait_row(2000, id, "state = 'running'"));
	CU_ASSERT(wait_row(10000, id, "state = 'done'"));
	CU_ASSERT_STRING_EQUAL(pgtest_text(F.c, buf, sizeof buf,
					   "SELECT attempts || '/' || (started_at IS NOT NULL) "
					   "FROM execdispatch.job WHERE id = %lld",
					   id),
			       "1/true");
	PQfinish(other);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 15000), 0);
	clear_queue();
}

/* The position of a claimed row asked for, then the row locked: the
 * POSITION's write skips it and goes again at each cancel poll until the
 * lock is gone (it waited, with the heartbeat behind it, before). */
static void test_position_locked(void)
{
	PGconn *other = pgtest_connect(F.pg.conninfo);
	long long id, max_ms;

	CU_ASSERT_FATAL(other != NULL);
	clear_queue();
	CU_ASSERT_FATAL(df_write_config(&F, 0, NULL) == 0);
	id = fifth_claimed("12", "1");
	PQclear(pgtest_query(F.c, "SELECT execdispatch.position(%lld)", id));
	/* the lock, and any position written before it taken away */
	PQclear(pgtest_query(other, "BEGIN"));
	PQclear(pgtest_query(
		other, "UPDATE execdispatch.job SET exec_position = NULL WHERE id = %lld", id));
	max_ms = hold_and_sample(HOLD_MS);
	fprintf(stderr, "position write blocked by a lock: heartbeat at most %lld ms old\n",
		max_ms);
	CU_ASSERT(max_ms < FRESH_MS);
	PQclear(pgtest_query(other, "COMMIT"));
	CU_ASSERT(wait_row(3000, id, "state = 'claimed' AND exec_position->>'capacity' = '4'"));
	PQfinish(other);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGKILL, 5000), SIGKILL);
	clear_queue();
}

/* Waits up to ms for metric name on port to read want; 1 once it does. */
static int wait_metric(int ms, int port, const char *name, long long want)
{
	for (long long t0 = harness_now_ms(); harness_now_ms() - t0 < ms; harness_sleep_ms(50))
		if (df_metric(port, name) == want)
			return 1;
	return 0;
}

/* A silent dispatcher ("ghost") holds a running row that a session has
 * locked: the rescue puts the ghost off (it waited for the lock, with our
 * heartbeat in the same statement, before) and rescues it whole once the
 * lock is gone; the row then runs here as its second attempt.  /metrics
 * counts the put-offs: the gauge is 1 while the lock is held and 0 after
 * the rescue, the counter grows at each rescue while the lock is held and
 * stops after. */
static void test_rescue_locked(void)
{
	PGconn *other;
	long long id, max_ms, put_off;
	char buf[64];
	int mport;

	clear_queue();
	PQclear(pgtest_query(F.c, "INSERT INTO execdispatch.dispatcher (instance, host, pid, "
				  "heartbeat_at) VALUES ('ghost', 'nowhere', 1, now() - "
				  "interval '1 hour')"));
	id = df_submit(&F, "{\"command\":\"true\"}", 0);
	PQclear(pgtest_query(
		F.c,
		"UPDATE execdispatch.job SET state = 'running', runner_instance = "
		"'ghost', attempts = 1, claims = 1, started_at = now() WHERE id = %lld",
		id));
	other = lock_row(id);
	mport = df_start_with_metrics(&F, 0, NULL);
	CU_ASSERT_FATAL(mport > 0);
	max_ms = hold_and_sample(HOLD_MS);
	fprintf(stderr, "rescue blocked by a lock: heartbeat at most %lld ms old\n", max_ms);
	CU_ASSERT(max_ms < FRESH_MS);
	/* put off whole: the ghost's row and its job untouched; counted at
	 * each rescue (after each heartbeat) */
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.dispatcher WHERE "
					"instance = 'ghost'"),
			1);
	CU_ASSERT_EQUAL(df_metric(mport, "execdispatch_rescue_put_off_dispatchers"), 1);
	put_off = df_metric(mport, "execdispatch_rescue_put_off_total");
	fprintf(stderr, "rescue blocked by a lock: put off %lld times\n", put_off);
	CU_ASSERT(put_off >= 1);
	PQclear(pgtest_query(other, "COMMIT"));
	CU_ASSERT(wait_row(5000, id, "state = 'done'"));
	CU_ASSERT(wait_metric(2000, mport, "execdispatch_rescue_put_off_dispatchers", 0));
	put_off = df_metric(mport, "execdispatch_rescue_put_off_total");
	/* a heartbeat and its rescue, at least: the beat written twice */
	CU_ASSERT(wait_beats(2, 10000));
	CU_ASSERT_EQUAL(df_metric(mport, "execdispatch_rescue_put_off_total"), put_off);
	CU_ASSERT_STRING_EQUAL(pgtest_text(F.c, buf, sizeof buf,
					   "SELECT attempts || '/' || runner_instance FROM "
					   "execdispatch.job WHERE id = %lld",
					   id),
			       "2/d0");
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.dispatcher WHERE "
					"instance = 'ghost'"),
			0);
	PQfinish(other);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 5000), 0);
	clear_queue();
}

/* The backends of the dispatcher waiting for a lock, now. */
static long long lock_waiters(void)
{
	return pgtest_int(F.c, "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
			       "'execdispatch' AND wait_event_type = 'Lock'");
}

/* How many processes (zombies too) have pid for parent. */
static int children_of(pid_t pid)
{
	DIR *dir = opendir("/proc");
	struct dirent *e;
	int n = 0;

	while (dir && (e = readdir(dir))) {
		char path[sizeof "/proc//stat" + sizeof e->d_name], stat[512];
		FILE *f;
		const char *p;
		int ppid;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
		if (!(f = fopen(path, "r")))
			continue;
		/* after the ")" that ends the command: state, then ppid */
		if (fgets(stat, sizeof stat, f) && (p = strrchr(stat, ')')) &&
		    sscanf(p + 1, " %*c %d", &ppid) == 1 && ppid == pid)
			n++;
		fclose(f);
	}
	if (dir)
		closedir(dir);
	return n;
}

/* An outcome whose row a session keeps locked for 13 s: its statement
 * waits past its deadline (staleAfterSec, 3 s), the connection is
 * abandoned and remade, and the outcome is written again on the new one,
 * which waits too.  Each abandoned statement is cancelled at the server,
 * so at most the current statement (and, for a moment, the one just
 * abandoned) waits for the lock; before, every abandoned backend went on
 * waiting (PQfinish does not end a lock wait): 4 of them by the end.
 * The outcome is written once the lock is gone, once; the children that
 * sent the cancel requests are gone (reaped, no zombie). */
static void test_abandoned_cancelled(void)
{
	PGconn *other;
	long long id, most = 0, n, t0;
	char buf[64];

	id = one_running("{\"command\":\"sleep\",\"args\":[\"1\"]}");
	other = lock_row(id);
	for (t0 = harness_now_ms(); harness_now_ms() - t0 < 13000; harness_sleep_ms(100))
		if ((n = lock_waiters()) > most)
			most = n;
	fprintf(stderr, "an outcome waiting for a lock 13 s: at most %lld backends waiting\n",
		most);
	CU_ASSERT(most >= 1); /* the outcome did wait */
	CU_ASSERT(most <= 2);
	/* the abandoned ones ended (cancelled), not only closed */
	CU_ASSERT(lock_waiters() <= 1);
	PQclear(pgtest_query(other, "COMMIT"));
	CU_ASSERT(wait_row(5000, id, "state = 'done'"));
	CU_ASSERT_STRING_EQUAL(pgtest_text(F.c, buf, sizeof buf,
					   "SELECT state || '/' || attempts FROM execdispatch.job "
					   "WHERE id = %lld",
					   id),
			       "done/1");
	for (t0 = harness_now_ms();
	     (lock_waiters() > 0 || children_of(F.disp[0]) > 0) && harness_now_ms() - t0 < 5000;
	     harness_sleep_ms(50))
		;
	CU_ASSERT_EQUAL(lock_waiters(), 0);
	/* the cancel requests' children have ended and were reaped */
	CU_ASSERT_EQUAL(children_of(F.disp[0]), 0);
	PQfinish(other);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 5000), 0);
	clear_queue();
}

/* Whether dispatcher i's log has text in it past its first from bytes
 * (what the tests before wrote there). */
static int logged_after(int i, size_t from, const char *text)
{
	size_t len;
	unsigned char *log = harness_read_file(F.log[i], &len);
	int found = log && len >= from && strstr((char *)log + from, text) != NULL;

	free(log);
	return found;
}

static int logged(int i, const char *text)
{
	return logged_after(i, 0, text);
}

/* The size of dispatcher i's log (0 while there is none). */
static size_t log_size(int i)
{
	struct stat st;

	return stat(F.log[i], &st) == 0 ? (size_t)st.st_size : 0;
}

/* A stop while an outcome cannot be written (its row locked by a session:
 * every write of it waits past its deadline): the outcome is said to
 * wait, then given up 10 s after the signal, so the stop ends in bounded
 * time (before, it retried without end); the row stays held and the
 * dispatcher row stays, so that once the lock is gone the rescue reruns
 * the job (attempt 2), as after a crash. */
static void test_stop_outcome_locked(void)
{
	PGconn *other;
	long long id, t0, took;
	char line[160];

	id = one_running("{\"command\":\"sleep\",\"args\":[\"0.5\"]}");
	other = lock_row(id);
	for (t0 = harness_now_ms();
	     harness_now_ms() - t0 < 10000 && !logged(0, "outcomes wait for the database");)
		harness_sleep_ms(100);
	CU_ASSERT(logged(0, "1 outcomes wait for the database"));
	t0 = harness_now_ms();
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 30000), 0);
	took = harness_now_ms() - t0;
	fprintf(stderr, "stop with an outcome behind a lock: %lld ms\n", took);
	/* 10 s, plus at most one statement's deadline (staleAfterSec 3 s) */
	CU_ASSERT(took >= 9000 && took < 16000);
	snprintf(line, sizeof line,
		 "job %lld attempt 1: stopping: outcome done (error none, receipt {", id);
	CU_ASSERT(logged(0, line));
	CU_ASSERT(logged(0, "not written because the database did not answer within 10 s"));
	PQclear(pgtest_query(other, "COMMIT"));
	PQfinish(other);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id = %lld AND "
				   "state = 'running' AND runner_instance = 'd0' AND attempts = 1",
				   id),
			1);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.dispatcher WHERE "
					"instance = 'd0'"),
			1);
	/* d1 rescues it after staleAfterSec; it runs again */
	CU_ASSERT_FATAL(df_write_config(&F, 1, NULL) == 0);
	CU_ASSERT_FATAL(df_start_disp(&F, 1) == 0);
	CU_ASSERT(
		wait_row(15000, id, "state = 'done' AND attempts = 2 AND runner_instance = 'd1'"));
	CU_ASSERT_EQUAL(df_stop_disp(&F, 1, SIGTERM, 10000), 0);
	clear_queue();
}

/* Running rows of instance. */
static long long running_of(const char *instance)
{
	return pgtest_int(F.c,
			  "SELECT count(*) FROM execdispatch.job WHERE runner_instance = '%s' AND "
			  "state = 'running'",
			  instance);
}

/* Two dispatchers, each with running jobs (ledger jobs of 9 s), and a
 * session holding LOCK TABLE job IN ACCESS EXCLUSIVE MODE for
 * TABLE_HOLD_MS, longer than staleAfterSec: both heartbeats stay fresh
 * all along (read from this session: the dispatcher table is not
 * locked), and once the lock is gone nothing is rescued: every job is
 * done as its first attempt and ran once (the ledger).  Before, the heartbeat and the rescue were
 * one statement: every dispatcher's heartbeat waited for the lock, and
 * the first to go on after it found the others silent and requeued their
 * running jobs, which ran twice. */
static void test_table_lock(void)
{
	PGconn *other = pgtest_connect(F.pg.conninfo);
	char job[3072];
	long long max_ms, t0;
	size_t from[2];
	int ok = 0, mport[2];

	CU_ASSERT_FATAL(other != NULL);
	clear_queue();
	PQclear(pgtest_query(F.c, "TRUNCATE ledger, violations"));
	for (int i = 0; i < 2; i++) {
		from[i] = log_size(i);
		mport[i] = df_start_with_metrics(&F, i, NULL);
		CU_ASSERT_FATAL(mport[i] > 0);
	}
	/* each has the HELLO counting two clients, a claim share of 3 of the
	 * 4 slots, before the jobs come, so that both take some of them (a
	 * fixed wait was too short for a slow build) */
	for (t0 = harness_now_ms(); !ok && harness_now_ms() - t0 < 10000; harness_sleep_ms(50))
		ok = df_metric(mport[0], "execdispatch_admission") == 3 &&
		     df_metric(mport[1], "execdispatch_admission") == 3;
	CU_ASSERT_FATAL(ok);
	ok = 0;
	df_ledger_job(&F, job, sizeof job, 9000, 1);
	for (int i = 0; i < 4; i++)
		CU_ASSERT(df_submit(&F, job, 0) > 0);
	for (t0 = harness_now_ms(); !ok && harness_now_ms() - t0 < 10000; harness_sleep_ms(50))
		ok = running_of("d0") >= 1 && running_of("d1") >= 1 &&
		     running_of("d0") + running_of("d1") == 4 &&
		     pgtest_int(F.c, "SELECT count(*) FROM ledger") == 4;
	CU_ASSERT_FATAL(ok);
	PQclear(pgtest_query(other, "BEGIN"));
	PQclear(pgtest_query(other, "LOCK TABLE execdispatch.job IN ACCESS EXCLUSIVE MODE"));
	max_ms = hold_and_sample(TABLE_HOLD_MS);
	PQclear(pgtest_query(other, "COMMIT"));
	PQfinish(other);
	CU_ASSERT_FATAL(df_wait_final(&F, 30000) == 0);
	fprintf(stderr,
		"LOCK TABLE job for %d ms: heartbeats at most %lld ms old; jobs done as attempt 1: "
		"%lld of 4; runs in the ledger: %lld\n",
		TABLE_HOLD_MS, max_ms,
		pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE state = 'done' AND "
				"attempts = 1"),
		pgtest_int(F.c, "SELECT count(*) FROM ledger"));
	CU_ASSERT(max_ms < FRESH_MS);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE state = "
					"'done' AND attempts = 1"),
			4);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM ledger"), 4);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM ledger WHERE attempt > 1"), 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM violations"), 0);
	for (int i = 0; i < 2; i++) {
		CU_ASSERT(!logged_after(i, from[i], "our dispatcher row was removed by a rescue"));
		CU_ASSERT(!logged_after(i, from[i], "rescue: requeued"));
		CU_ASSERT_EQUAL(df_stop_disp(&F, i, SIGTERM, 15000), 0);
	}
	clear_queue();
}

static void test_teardown(void)
{
	df_cleanup(&F, CU_get_number_of_failures() > 0);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "setup", test_setup },
		{ "lock: a start whose row is locked holds not the heartbeat, runs after",
		  test_start_locked },
		{ "lock: a position write whose row is locked holds not the heartbeat, "
		  "written after",
		  test_position_locked },
		{ "lock: a rescue whose row is locked holds not the heartbeat, rescues after",
		  test_rescue_locked },
		{ "lock: an abandoned statement is cancelled, backends do not pile up",
		  test_abandoned_cancelled },
		{ "lock: a stop while an outcome waits behind a lock ends in bounded time",
		  test_stop_outcome_locked },
		{ "lock: LOCK TABLE job past staleAfterSec: heartbeats fresh, nothing rescued",
		  test_table_lock },
		{ "teardown", test_teardown },
		{ NULL, NULL }
	};
	return run_suite("dispatch_locks", cases);
}
