/*
 * test_dispatch_faults.c - execdispatch when things break, with the
 * ledger's program (each run recorded, UNIQUE (job_id, attempt)) and a
 * trigger that records any change of a finished row:
 *  - SIGKILL of a dispatcher in mid-run: the other rescues its rows within
 *    staleAfterSec plus one sweep and finishes them;
 *  - SIGSTOP beyond staleAfterSec, then SIGCONT: the stopped one notices
 *    it lost its claims and writes nothing over the rescuer's outcomes;
 *  - pg_terminate_backend of the dispatchers' sessions and a PostgreSQL
 *    restart in mid-run: running jobs go on, their outcomes are written
 *    once the database is back, nothing runs twice;
 *  - a claim whose result was lost with the connection: requeued once the
 *    dispatcher is back, and run; a finish whose reply was lost (PgBouncer
 *    stopped, then killed): written again, found written, counted so; a
 *    start whose reply was lost: sent again, its run found started;
 *  - a handler of the execserver killed: its jobs come back as exec_lost
 *    and are requeued, counting the attempt;
 *  - an outcome the database refuses (a trigger): refused in every form it
 *    stays held and is written once the database takes it, never dropped
 *    nor run again; refused only as done, it ends failed with error
 *    outcome_not_stored; no other job is disturbed; a stop meanwhile gives
 *    it up after 10 s and leaves the row to the rescue;
 *  - a database that stops answering (backends stopped): the loop goes
 *    on; a claim given up at a stopped backend and committed after it
 *    resumed is requeued by the late sweep, and runs once;
 *  - a reused instanceId: a process frozen while a new life took its row
 *    over takes none of the new life's jobs over at the execserver and
 *    exits; a stop ends within stopTimeoutSec while a run goes on.
 * Timings: heartbeatSec 1, staleAfterSec 3, pollMs 100, retryDelaySec 1.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/CUnit.h>

#include "dispatch_fixture.h"
#include "suite.h"

static struct dfix F;

static void test_setup(void)
{
	CU_ASSERT_FATAL(df_start(&F) == 0);
	/* two handlers, so that one can be killed (exec_lost) */
	CU_ASSERT_FATAL(harness_start(&F.es[0], 2, df_exec_body(4), NULL) == 0);
	F.nes = 1;
	CU_ASSERT_FATAL(df_make_ledger(&F) == 0);
}

/* extra: configuration lines of every dispatcher (NULL: the defaults) */
static void fresh_with(int dispatchers, const char *extra)
{
	PQclear(pgtest_query(F.c, "TRUNCATE execdispatch.job, execdispatch.job_attempt, "
				  "execdispatch.job_key, execdispatch.dispatcher, ledger, "
				  "violations"));
	for (int i = 0; i < dispatchers; i++) {
		CU_ASSERT_FATAL(df_write_config(&F, i, extra) == 0);
		CU_ASSERT_FATAL(df_start_disp(&F, i) == 0);
	}
}

static void fresh(int dispatchers)
{
	fresh_with(dispatchers, NULL);
}

static void submit_ledger(int n, int ms)
{
	char job[3072];

	df_ledger_job(&F, job, sizeof job, ms, 1);
	for (int i = 0; i < n; i++)
		CU_ASSERT(df_submit(&F, job, 0) > 0);
}

/* Every job done, its last attempt's run finished in the ledger, no final
 * row ever changed, no overlapping runs but across a rescue. */
static void check_all_done(int n)
{
	CU_ASSERT_FATAL(df_wait_final(&F, 60000) == 0);
	CU_ASSERT_EQUAL(
		pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE state = 'done'"), n);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM violations"), 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job j WHERE NOT EXISTS ("
					"SELECT 1 FROM ledger l WHERE l.job_id = j.id AND "
					"l.attempt = j.attempts AND l.finished_at IS NOT NULL)"),
			0);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM ledger l JOIN execdispatch.job j "
					"ON j.id = l.job_id WHERE l.attempt > j.attempts"),
			0);
}

static int wait_held_running(const char *inst, int min, int timeout_ms)
{
	long long end = harness_now_ms() + timeout_ms;

	while (harness_now_ms() < end) {
		if (pgtest_int(F.c,
			       "SELECT count(*) FROM execdispatch.job WHERE runner_instance = '%s' "
			       "AND state = 'running'",
			       inst) >= min)
			return 0;
		harness_sleep_ms(20);
	}
	return -1;
}

/* The documented bound of a stop (execdispatch(8)): an outcome not written
 * 10 s into it is given up, and the leave has a deadline of staleAfterSec
 * (3 s here); 16 s leaves the scheduler its margin.  A stop that hangs
 * still fails. */
static void stop_all(int dispatchers)
{
	for (int i = 0; i < dispatchers; i++)
		if (F.disp[i])
			CU_ASSERT_EQUAL(df_stop_disp(&F, i, SIGTERM, 16000), 0);
}

static void test_sigkill(void)
{
	long long t0, took, held;

	fresh(2);
	submit_ledger(8, 1500);
	CU_ASSERT_FATAL(wait_held_running("d0", 1, 10000) == 0);
	held = df_held(&F, "d0");
	t0 = harness_now_ms();
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGKILL, 2000), SIGKILL);
	while (df_held(&F, "d0") > 0 && harness_now_ms() - t0 < 15000)
		harness_sleep_ms(50);
	took = harness_now_ms() - t0;
	fprintf(stderr, "%lld rows of the killed dispatcher rescued after %lld ms\n", held, took);
	/* staleAfterSec (3 s) + one sweep (heartbeatSec 1 s) + scheduling */
	CU_ASSERT(took <= 3000 + 1000 + 500);
	check_all_done(8);
	CU_ASSERT(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE attempts = 2") >= 1);
	stop_all(2);
}

static void test_sigstop(void)
{
	long long t0;

	fresh(2);
	submit_ledger(6, 2500);
	CU_ASSERT_FATAL(wait_held_running("d0", 1, 10000) == 0);
	CU_ASSERT_EQUAL(kill(F.disp[0], SIGSTOP), 0);
	t0 = harness_now_ms();
	while (df_held(&F, "d0") > 0 && harness_now_ms() - t0 < 15000)
		harness_sleep_ms(50);
	CU_ASSERT_EQUAL(df_held(&F, "d0"), 0);
	/* let its runs end at the execserver while it sleeps, then wake it:
	 * its receipts arrive for claims that are not its own any more */
	CU_ASSERT(harness_wait_wg(&F.es[0], "wg", "running", 0, 15000) == 0);
	CU_ASSERT_EQUAL(kill(F.disp[0], SIGCONT), 0);
	check_all_done(6);
	CU_ASSERT(df_wait_log(&F, 0, "our dispatcher row was removed by a rescue", 10000) == 0);
	/* the stopped one registered again and still works */
	for (t0 = harness_now_ms();
	     pgtest_int(F.c,
			"SELECT count(*) FROM execdispatch.dispatcher WHERE instance = 'd0'") !=
		     1 &&
	     harness_now_ms() - t0 < 10000;
	     harness_sleep_ms(50))
		;
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.dispatcher WHERE "
					"instance = 'd0'"),
			1);
	stop_all(2);
}

static int wait_log(int i, const char *text, int timeout_ms);

static void test_db_sessions_killed(void)
{
	long long t0 = harness_now_ms();

	fresh(2);
	submit_ledger(6, 2000);
	CU_ASSERT_FATAL(wait_held_running("d0", 1, 10000) == 0);
	/* every lane up: both dispatchers' rescue lanes have sent a rescue
	 * (after a written beat), so each lane has a session to lose */
	while (pgtest_int(F.c,
			  "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
			  "'execdispatch' AND query LIKE 'WITH stale AS MATERIALIZED%%'") < 2 &&
	       harness_now_ms() - t0 < 10000)
		harness_sleep_ms(50);
	CU_ASSERT(pgtest_int(F.c, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
				  "WHERE application_name = 'execdispatch'") >= 2);
	/* each lost connection's line names its lane (this run's lines: the
	 * pid) */
	const char *lanes[] = { "hot1", "chores", "beat", "rescue" };
	for (size_t i = 0; i < sizeof lanes / sizeof lanes[0]; i++) {
		char line[120];
		snprintf(line, sizeof line,
			 "[execdispatch %d] error: database (%s): connection lost (",
			 (int)F.disp[0], lanes[i]);
		CU_ASSERT(wait_log(0, line, 10000) == 0);
	}
	check_all_done(6);
	/* nothing ran twice: the runs went on and their outcomes were written */
	CU_ASSERT_EQUAL(
		pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE attempts <> 1"), 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM ledger"), 6);
	stop_all(2);
}

/* A claim whose reply never came (the session ended between the commit
 * and the result): the row is claimed by the live dispatcher, which does
 * not know it.  Made here by hand, committed before the dispatcher can see
 * the job; the dispatcher's session is then ended.  Once reconnected, the
 * dispatcher requeues the claims it holds in the database but not in
 * memory, and the job runs (the lost claim's attempt stays counted). */
static void test_claim_reply_lost(void)
{
	char job[3072], started[80];
	long long t0;

	fresh(1);
	/* past its start (this run's first line, logged after the start's
	 * requeue of the rows an earlier run of d0 held, which would otherwise
	 * take the row made below; the log goes on from the earlier tests) */
	snprintf(started, sizeof started, "[execdispatch %d] info: execdispatch ", (int)F.disp[0]);
	CU_ASSERT_FATAL(wait_log(0, started, 20000) == 0);
	df_ledger_job(&F, job, sizeof job, 100, 1);
	PQclear(pgtest_query(
		F.c,
		"BEGIN; SELECT execdispatch.submit('work', $J$%s$J$::jsonb, 0); "
		"UPDATE execdispatch.job SET state = 'claimed', runner_instance = 'd0', "
		"attempts = 1 WHERE state = 'queued'; COMMIT",
		job));
	CU_ASSERT_EQUAL(df_held(&F, "d0"), 1);
	/* a few polls pass while the row stays claimed */
	CU_ASSERT(df_wait_statements(&F, 3, 5000) == 0);
	CU_ASSERT(pgtest_int(F.c, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
				  "WHERE application_name = 'execdispatch'") >= 1);
	t0 = harness_now_ms();
	while (pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE state = 'done'") < 1 &&
	       harness_now_ms() - t0 < 15000)
		harness_sleep_ms(50);
	check_all_done(1);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT attempts FROM execdispatch.job"), 2);
	size_t len;
	unsigned char *log = harness_read_file(F.log[0], &len);
	const char *run = log ? strstr((char *)log, started) : NULL; /* this run's lines */
	CU_ASSERT(run && strstr(run, "requeued 1 rows claimed by a statement whose result "
				     "the lost connection took"));
	free(log);
	stop_all(1);
}

static void test_db_restart(void)
{
	/* While the database is away no heartbeat is written; staleAfterSec
	 * well beyond the outage (a restart takes seconds on a loaded machine),
	 * so that what is tested is the outcomes written afterwards, not a
	 * rescue racing the owner's reconnect (which the SIGSTOP test covers). */
	fresh_with(2, "staleAfterSec: 30\n");
	submit_ledger(6, 2000);
	CU_ASSERT_FATAL(wait_held_running("d0", 1, 10000) == 0);
	PQfinish(F.c);
	F.c = NULL;
	CU_ASSERT_FATAL(pgtest_stop(&F.pg) == 0);
	CU_ASSERT_FATAL(pgtest_restart(&F.pg) == 0);
	F.c = pgtest_connect(F.pg.conninfo);
	CU_ASSERT_FATAL(F.c != NULL);
	check_all_done(6);
	CU_ASSERT_EQUAL(
		pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE attempts <> 1"), 0);
	stop_all(2);
}

static void test_exec_lost(void)
{
	int pids[8], n;

	fresh(1);
	submit_ledger(4, 3000);
	CU_ASSERT_FATAL(wait_held_running("d0", 4, 10000) == 0);
	CU_ASSERT(harness_wait_wg(&F.es[0], "wg", "running", 4, 5000) == 0);
	/* kill every handler: each running job ends with exec_lost */
	n = harness_handler_pids(&F.es[0], pids, 8);
	CU_ASSERT(n >= 1);
	for (int i = 0; i < n; i++)
		if (pids[i] > 0)
			kill(pids[i], SIGKILL);
	check_all_done(4);
	/* requeued through exec_lost, counting the attempt */
	CU_ASSERT_EQUAL(
		pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE attempts >= 2"), 4);
	size_t len;
	unsigned char *log = harness_read_file(F.log[0], &len);
	CU_ASSERT(log && strstr((char *)log, "attempt 1: queued exec_lost"));
	free(log);
	stop_all(1);
}

/* Polls the dispatcher's log for text. */
static int wait_log(int i, const char *text, int timeout_ms)
{
	return df_wait_log(&F, i, text, timeout_ms);
}

static void test_outcome_refused(void)
{
	long long held, cut, other;

	fresh(1);
	/* the test's fault: a trigger refusing the final write of the rows
	 * whose job carries REFUSE=all (every form) or REFUSE=done (as done) */
	PQclear(pgtest_query(F.c, "CREATE OR REPLACE FUNCTION refuse_final() RETURNS trigger "
				  "LANGUAGE plpgsql AS $$ BEGIN "
				  "RAISE EXCEPTION 'refused by the test'; END $$"));
	PQclear(pgtest_query(
		F.c, "CREATE TRIGGER refuse_final BEFORE UPDATE ON execdispatch.job FOR EACH ROW "
		     "WHEN (OLD.state IN ('claimed', 'running') AND NEW.state NOT IN ('claimed', "
		     "'running') AND ((NEW.job->'env') ? 'REFUSE=all' OR "
		     "((NEW.job->'env') ? 'REFUSE=done' AND NEW.state = 'done'))) "
		     "EXECUTE FUNCTION refuse_final()"));
	held = df_submit(&F, "{\"command\":\"true\",\"env\":[\"REFUSE=all\"]}", 0);
	cut = df_submit(&F, "{\"command\":\"true\",\"env\":[\"REFUSE=done\"]}", 0);
	CU_ASSERT_FATAL(held > 0 && cut > 0);
	CU_ASSERT_FATAL(wait_log(0, "not written in any form", 20000) == 0);
	/* refused as done: written as failed, outcome_not_stored */
	for (int i = 0; i < 400 && pgtest_int(F.c,
					      "SELECT count(*) FROM execdispatch.job WHERE "
					      "id = %lld AND state = 'failed'",
					      cut) != 1;
	     i++)
		harness_sleep_ms(50);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id = %lld AND "
				   "state = 'failed' AND error = 'outcome_not_stored' AND "
				   "attempts = 1",
				   cut),
			1);
	/* refused in every form: still held by d0, first attempt, not lost */
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id = %lld AND "
				   "state IN ('claimed', 'running') AND runner_instance = 'd0' AND "
				   "attempts = 1",
				   held),
			1);
	/* nobody else is disturbed meanwhile */
	other = df_submit(&F, "{\"command\":\"true\"}", 0);
	for (int i = 0; i < 200 && pgtest_int(F.c,
					      "SELECT count(*) FROM execdispatch.job WHERE "
					      "id = %lld AND state = 'done'",
					      other) != 1;
	     i++)
		harness_sleep_ms(50);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id = %lld AND "
				   "state = 'done'",
				   other),
			1);
	/* the database takes it again: the original outcome, with its receipt */
	PQclear(pgtest_query(F.c, "DROP TRIGGER refuse_final ON execdispatch.job"));
	CU_ASSERT_FATAL(df_wait_final(&F, 20000) == 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id = %lld AND "
				   "state = 'done' AND attempts = 1 AND receipt IS NOT NULL",
				   held),
			1);
	stop_all(1);
}

/* PgBouncer's pid, or 0. */
static pid_t bouncer_pid(void)
{
	char path[400];
	size_t len;
	unsigned char *txt;
	pid_t pid;

	snprintf(path, sizeof path, "%s/pgbouncer.pid", F.pg.dir);
	txt = harness_read_file(path, &len);
	pid = txt ? (pid_t)atoi((char *)txt) : 0;
	free(txt);
	return pid;
}

/* Once `sleeping` statements sleep in a trigger (pg_sleep), PgBouncer is
 * stopped (SIGSTOP: what it forwarded goes on, the replies wait in it),
 * and the row id waited for until it is in state.  PgBouncer's pid, or 0. */
static pid_t stop_bouncer_until_state(int sleeping, long long id, const char *state)
{
	pid_t pid;
	long long t0;

	for (t0 = harness_now_ms(); harness_now_ms() - t0 < 10000 &&
				    pgtest_int(F.c, "SELECT count(*) FROM pg_stat_activity WHERE "
						    "wait_event = 'PgSleep'") < sleeping;)
		harness_sleep_ms(10);
	pid = bouncer_pid();
	if (pid <= 0 || kill(pid, SIGSTOP) != 0)
		return 0;
	for (t0 = harness_now_ms();
	     harness_now_ms() - t0 < 10000 &&
	     pgtest_int(F.c,
			"SELECT count(*) FROM execdispatch.job WHERE id = %lld AND "
			"state = '%s'",
			id, state) == 0;)
		harness_sleep_ms(10);
	return pid;
}

static pid_t stop_bouncer_until_done(int sleeping, long long id)
{
	return stop_bouncer_until_state(sleeping, id, "done");
}

/* A trigger name on job sleeping secs after each row updated when (a
 * condition on NEW). */
static void sleep_trigger(const char *name, int secs, const char *when)
{
	PQclear(pgtest_query(F.c,
			     "CREATE OR REPLACE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS "
			     "$$ BEGIN PERFORM pg_sleep(%d); RETURN NULL; END $$",
			     name, secs));
	PQclear(pgtest_query(F.c,
			     "CREATE TRIGGER %s AFTER UPDATE ON execdispatch.job FOR EACH ROW WHEN "
			     "(%s) EXECUTE FUNCTION %s()",
			     name, when, name));
}

/* A fresh queue and dispatcher 0 through PgBouncer, started now, with
 * PostgreSQL itself as the second host of its connection string (where
 * it goes once PgBouncer is gone), or (bouncer_only) PgBouncer alone.
 * 0, or -1. */
static int disp_through_bouncer_as(int bouncer_only)
{
	static char conninfo[600];
	const char *saved = F.conninfo;
	int rc;

	PQclear(pgtest_query(F.c, "TRUNCATE execdispatch.job, execdispatch.job_attempt, "
				  "execdispatch.job_key, execdispatch.dispatcher, ledger, "
				  "violations"));
	if (pgtest_start_bouncer(&F.pg) != 0)
		return -1;
	if (bouncer_only)
		snprintf(conninfo, sizeof conninfo,
			 "host=127.0.0.1 port=%d user=postgres dbname=postgres", F.pg.bouncer_port);
	else
		snprintf(conninfo, sizeof conninfo,
			 "host=127.0.0.1,127.0.0.1 port=%d,%d user=postgres dbname=postgres",
			 F.pg.bouncer_port, F.pg.port);
	F.conninfo = conninfo;
	rc = df_write_config(&F, 0, NULL);
	F.conninfo = saved;
	return rc == 0 ? df_start_disp(&F, 0) : -1;
}

static int disp_through_bouncer(void)
{
	return disp_through_bouncer_as(0);
}

/* The reply of a statement lost after its commit: dispatcher 0 through
 * PgBouncer (disp_through_bouncer), a trigger named trigger sleeping 1 s
 * after each row updated when (a condition on NEW), the job submitted;
 * PgBouncer is stopped while the statement sleeps (the commit and its
 * reply then wait in PgBouncer's socket) and killed once the row is in
 * state.  The job's id. */
static long long lose_reply(const char *trigger, const char *when, const char *job,
			    const char *state)
{
	long long id;

	CU_ASSERT_FATAL(disp_through_bouncer() == 0);
	sleep_trigger(trigger, 1, when);
	id = df_submit(&F, job, 0);
	pid_t bouncer = stop_bouncer_until_state(1, id, state);
	CU_ASSERT_FATAL(bouncer > 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id = %lld AND "
				   "state = '%s'",
				   id, state),
			1);
	kill(bouncer, SIGKILL);
	F.pg.bouncer_port = 0; /* gone: nothing to stop at the cleanup */
	return id;
}

/* Dispatcher 0's log does not say "job <id> attempt 1: <what>". */
static void log_lacks(long long id, const char *what)
{
	char line[200];
	size_t len;
	unsigned char *txt = harness_read_file(F.log[0], &len);

	snprintf(line, sizeof line, "job %lld attempt 1: %s", id, what);
	CU_ASSERT(txt && !strstr((char *)txt, line));
	free(txt);
}

/* A finish whose commit went through but whose reply the lost connection
 * took (lose_reply): the dispatcher reconnects straight to PostgreSQL
 * (the next host), writes the outcome again, finds it written under its
 * claim, and counts it written, not dropped. */
static void test_finish_reply_lost(void)
{
	char line[200];
	long long id = lose_reply("slow_finish", "NEW.state = 'done'", "{\"command\":\"true\"}",
				  "done");

	snprintf(line, sizeof line,
		 "job %lld attempt 1: outcome done written by a statement whose reply the lost "
		 "connection took",
		 id);
	CU_ASSERT(wait_log(0, line, 20000) == 0);
	log_lacks(id, "claim lost before its outcome");
	PQclear(pgtest_query(F.c, "DROP TRIGGER slow_finish ON execdispatch.job"));
	stop_all(1);
}

/* A start (the statement writing the row running) whose commit went
 * through but whose reply the lost connection took (lose_reply): the
 * dispatcher reconnects straight to PostgreSQL, sends the start again,
 * finds the row running under its claim, and lets the run go on to its
 * outcome (never cancelled as a claim lost, nor left running). */
static void test_start_reply_lost(void)
{
	long long id = lose_reply("slow_start", "NEW.state = 'running'",
				  "{\"command\":\"sleep\",\"args\":[\"2\"]}", "running");

	PQclear(pgtest_query(F.c, "DROP TRIGGER slow_start ON execdispatch.job"));
	CU_ASSERT_EQUAL(df_wait_final(&F, 20000), 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id = %lld AND "
				   "state = 'done' AND attempts = 1",
				   id),
			1);
	log_lacks(id, "its claim was lost before it started");
	stop_all(1);
}

/* A claim whose reply is lost on the second hot connection while the
 * first stays up: its row is requeued and run without waiting for the
 * second connection to come back.  The first connection goes straight to
 * PostgreSQL (PgBouncer, the first host, is not up yet at the start); the
 * second, opened once the first carries a statement, goes through
 * PgBouncer.  The outcomes of two short jobs sleep 2 s in a trigger, so
 * the outcome of the one ending 0.5 s after the other goes on the second
 * connection with a claim (no blocking statement meanwhile: no cancel
 * poll, no heartbeat, no run waiting to be written started); PgBouncer is stopped while that statement
 * sleeps and killed once its claim is committed.  With nothing left
 * running that would make the first connection busy, the second is not
 * reopened: the row claimed must still be requeued and done. */
static void test_claim_reply_lost_second_conn(void)
{
	static const char long_job[] = "{\"command\":\"sleep\",\"args\":[\"12\"]}";
	char conninfo[600];
	const char *saved = F.conninfo;
	long long s1, s2, z1, z2, t0, claimed;

	PQclear(pgtest_query(F.c, "TRUNCATE execdispatch.job, execdispatch.job_attempt, "
				  "execdispatch.job_key, execdispatch.dispatcher, ledger, "
				  "violations"));
	F.pg.bouncer_port = harness_free_port();
	snprintf(conninfo, sizeof conninfo,
		 "host=127.0.0.1,127.0.0.1 port=%d,%d user=postgres dbname=postgres",
		 F.pg.bouncer_port, F.pg.port);
	F.conninfo = conninfo;
	/* pollMs 60000: claims follow the notifications and the outcomes
	 * only, each in the statement of an outcome */
	CU_ASSERT_FATAL(df_write_config(&F, 0,
					"cancelPollMs: 0\nheartbeatSec: 10\nstaleAfterSec: 30\n"
					"pollMs: 60000\nnotify: true\n") == 0);
	F.conninfo = saved;
	/* z1 and z2 become claimable between the ends of the two short runs
	 * (below), so that the first end's claim finds nothing and the
	 * second's one row */
	z1 = df_submit(&F, "{\"command\":\"true\"}", 0);
	z2 = df_submit(&F, "{\"command\":\"true\"}", 0);
	PQclear(pgtest_query(F.c,
			     "UPDATE execdispatch.job SET start_after = now() + interval '1 hour' "
			     "WHERE id IN (%lld, %lld)",
			     z1, z2));
	CU_ASSERT_FATAL(df_start_disp(&F, 0) == 0);
	CU_ASSERT_FATAL(pgtest_start_bouncer(&F.pg) == 0);
	for (t0 = harness_now_ms(); harness_now_ms() - t0 < 10000 &&
				    pgtest_int(F.c, "SELECT count(*) FROM pg_stat_activity WHERE "
						    "query LIKE 'LISTEN %%'") == 0;)
		harness_sleep_ms(10);
	/* share 4 + 1: two short runs, two long ones, in one transaction:
	 * one notification, so that after the first claim (the "other"
	 * class) the claims go with the outcomes */
	PQclear(pgtest_query(F.c, "BEGIN"));
	s1 = df_submit(&F, "{\"command\":\"sleep\",\"args\":[\"1\"]}", 3);
	s2 = df_submit(&F, "{\"command\":\"sleep\",\"args\":[\"1.5\"]}", 3);
	PQclear(pgtest_query(F.c, "CREATE OR REPLACE FUNCTION slow_finish() RETURNS trigger "
				  "LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(2); RETURN NULL; "
				  "END $$"));
	PQclear(pgtest_query(F.c,
			     "CREATE TRIGGER slow_finish AFTER UPDATE ON execdispatch.job FOR EACH "
			     "ROW WHEN (NEW.state = 'done' AND NEW.id IN (%lld, %lld)) EXECUTE "
			     "FUNCTION slow_finish()",
			     s1, s2));
	for (int i = 0; i < 2; i++)
		df_submit(&F, long_job, 2);
	PQclear(pgtest_query(F.c, "COMMIT"));
	for (t0 = harness_now_ms();
	     harness_now_ms() - t0 < 10000 &&
	     pgtest_int(F.c,
			"SELECT count(*) FROM execdispatch.job WHERE id = %lld AND state = "
			"'running'",
			s1) == 0;)
		harness_sleep_ms(10);
	PQclear(pgtest_query(F.c,
			     "UPDATE execdispatch.job SET start_after = (SELECT started_at FROM "
			     "execdispatch.job WHERE id = %lld) + interval '1250 ms' WHERE id IN "
			     "(%lld, %lld)",
			     s1, z1, z2));
	/* both outcomes sleeping, one on each connection; the second's
	 * statement committed: s2 done, a z claimed */
	pid_t bouncer = stop_bouncer_until_done(2, s2);
	CU_ASSERT_FATAL(bouncer > 0);
	claimed = pgtest_int(F.c,
			     "SELECT count(*) FROM execdispatch.job WHERE id IN (%lld, %lld) AND "
			     "state = 'claimed'",
			     z1, z2);
	kill(bouncer, SIGKILL);
	CU_ASSERT_EQUAL(claimed, 1);
	F.pg.bouncer_port = 0; /* gone: nothing to stop at the cleanup */
	PQclear(pgtest_query(F.c, "DROP TRIGGER slow_finish ON execdispatch.job"));
	/* both done well before the long jobs end (12 s), which would make
	 * the first connection busy */
	for (t0 = harness_now_ms();
	     harness_now_ms() - t0 < 6000 &&
	     pgtest_int(F.c,
			"SELECT count(*) FROM execdispatch.job WHERE id IN (%lld, %lld) AND "
			"state = 'done'",
			z1, z2) < 2;)
		harness_sleep_ms(20);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id IN (%lld, "
				   "%lld) AND state = 'done'",
				   z1, z2),
			2);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGKILL, 5000), SIGKILL);
	PQclear(pgtest_query(F.c, "TRUNCATE execdispatch.job, execdispatch.job_attempt, "
				  "execdispatch.job_key, execdispatch.dispatcher"));
}

/* A stop while an outcome is refused in every form does not wait for
 * ever: the outcome is given up after 10 s (logged), the row stays held
 * and our dispatcher row stays, so that the rescue reruns it. */
static void test_stop_outcome_refused(void)
{
	long long id, t0, took;
	char line[200];

	fresh(1);
	PQclear(pgtest_query(
		F.c, "CREATE TRIGGER refuse_final BEFORE UPDATE ON execdispatch.job FOR EACH ROW "
		     "WHEN (OLD.state IN ('claimed', 'running') AND NEW.state NOT IN ('claimed', "
		     "'running')) EXECUTE FUNCTION refuse_final()"));
	id = df_submit(&F, "{\"command\":\"true\"}", 0);
	snprintf(line, sizeof line, "job %lld attempt 1: outcome done not written in any form", id);
	CU_ASSERT_FATAL(wait_log(0, line, 20000) == 0);
	t0 = harness_now_ms();
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 30000), 0);
	took = harness_now_ms() - t0;
	fprintf(stderr, "stop with an outcome refused in every form: %lld ms\n", took);
	CU_ASSERT(took >= 9000 && took < 20000);
	size_t len;
	unsigned char *log = harness_read_file(F.log[0], &len);
	snprintf(line, sizeof line,
		 "job %lld attempt 1: stopping: outcome done (error none, receipt {", id);
	CU_ASSERT(log && strstr((char *)log, line));
	free(log);
	/* still held by d0's first attempt, and d0's row is there for the rescue */
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id = %lld AND "
				   "state IN ('claimed', 'running') AND runner_instance = 'd0' AND "
				   "attempts = 1",
				   id),
			1);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.dispatcher WHERE "
					"instance = 'd0'"),
			1);
	/* the database takes outcomes again: d1 rescues the row, which runs again */
	PQclear(pgtest_query(F.c, "DROP TRIGGER refuse_final ON execdispatch.job"));
	CU_ASSERT_FATAL(df_write_config(&F, 1, NULL) == 0);
	CU_ASSERT_FATAL(df_start_disp(&F, 1) == 0);
	CU_ASSERT_FATAL(df_wait_final(&F, 20000) == 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id = %lld AND "
				   "state = 'done' AND attempts = 2 AND runner_instance = 'd1'",
				   id),
			1);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 1, SIGTERM, 10000), 0);
}

/* A database that stops answering (the dispatcher's backends stopped
 * with SIGSTOP: the connections stay up, nothing answers) while a job
 * runs.  The heartbeat, the cancel poll and the outcome go out to
 * the stopped backends and wait: the event loop keeps serving meanwhile
 * (/metrics answers), the statements give up after their deadline
 * (staleAfterSec, 3 s), the connections are made again to fresh backends,
 * and the outcome is written while the old backends are still stopped.
 * Then a new job runs as usual. */
static void test_db_silent(void)
{
	char extra[64], buf[64];
	int mport = harness_free_port(), npids = 0, served = 0;
	long long id, t0, pids[16];
	PGresult *res;

	snprintf(extra, sizeof extra, "metrics: 127.0.0.1:%d\n", mport);
	fresh_with(1, extra);
	id = df_submit(&F, "{\"command\":\"sleep\",\"args\":[\"1.5\"]}", 0);
	CU_ASSERT_FATAL(wait_held_running("d0", 1, 10000) == 0);
	res = pgtest_query(F.c, "SELECT pid FROM pg_stat_activity WHERE application_name = "
				"'execdispatch'");
	for (int i = 0; res && i < PQntuples(res) && npids < 16; i++)
		pids[npids++] = atoll(PQgetvalue(res, i, 0));
	PQclear(res);
	CU_ASSERT_FATAL(npids >= 1);
	for (int i = 0; i < npids; i++)
		kill((pid_t)pids[i], SIGSTOP);
	t0 = harness_now_ms();
	/* the run ends 1.5 s in; the statements wait for 3 s */
	for (int i = 0; i < 5; i++) {
		/* sleep: /metrics is sampled every 0.5 s through the stall */
		harness_sleep_ms(500);
		served += df_metric(mport, "execdispatch_held") >= 0;
	}
	CU_ASSERT_EQUAL(served, 5);
	while (strcmp(pgtest_text(F.c, buf, sizeof buf,
				  "SELECT state FROM execdispatch.job WHERE id = %lld", id),
		      "done") != 0 &&
	       harness_now_ms() - t0 < 15000)
		harness_sleep_ms(50);
	fprintf(stderr, "done %lld ms after the backends stopped\n", harness_now_ms() - t0);
	CU_ASSERT_STRING_EQUAL(buf, "done");
	CU_ASSERT(wait_log(0, "no answer to a statement within 3000 ms", 1000) == 0);
	for (int i = 0; i < npids; i++)
		kill((pid_t)pids[i], SIGCONT);
	id = df_submit(&F, "{\"command\":\"true\"}", 0);
	CU_ASSERT(df_wait_final(&F, 10000) == 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id = %lld AND "
				   "state = 'done'",
				   id),
			1);
	stop_all(1);
}

/* Dispatcher i's log from the first line of its current run on (the log
 * goes on from the earlier tests), malloc'd, or NULL. */
static char *this_run(int i)
{
	char started[80];
	size_t len;
	unsigned char *log = harness_read_file(F.log[i], &len);
	const char *run;
	char *out;

	snprintf(started, sizeof started, "[execdispatch %d] info: execdispatch ", (int)F.disp[i]);
	run = log ? strstr((char *)log, started) : NULL;
	out = run ? strdup(run) : NULL;
	free(log);
	return out;
}

/* How often text is in this_run(i). */
static int run_count(int i, const char *text)
{
	char *run = this_run(i);
	int n = 0;

	for (const char *p = run; p && (p = strstr(p, text)); p++)
		n++;
	free(run);
	return n;
}

/* Waits until text is in this_run(i) n times or more: 0, or -1 after
 * timeout_ms. */
static int wait_run_count(int i, const char *text, int n, int timeout_ms)
{
	long long end = harness_now_ms() + timeout_ms;

	while (run_count(i, text) < n) {
		if (harness_now_ms() >= end)
			return -1;
		harness_sleep_ms(50);
	}
	return 0;
}

/* Waits until text is in this_run(i): 0, or -1 after timeout_ms. */
static int wait_run_log(int i, const char *text, int timeout_ms)
{
	return wait_run_count(i, text, 1, timeout_ms);
}

static int wait_sql(const char *q, long long want, int timeout_ms)
{
	long long end = harness_now_ms() + timeout_ms;

	while (harness_now_ms() < end) {
		if (pgtest_int(F.c, "%s", q) >= want)
			return 0;
		harness_sleep_ms(20);
	}
	return -1;
}

/* Once a statement sleeps in a trigger (pg_sleep), PgBouncer is killed:
 * the dispatcher's connections through it break while the backend goes
 * on with the statement (PgBouncer does not cancel it). */
static void kill_bouncer_once_sleeping(void)
{
	CU_ASSERT_FATAL(wait_sql("SELECT count(*) FROM pg_stat_activity WHERE wait_event = "
				 "'PgSleep'",
				 1, 10000) == 0);
	pid_t bouncer = bouncer_pid();
	CU_ASSERT_FATAL(bouncer > 0);
	kill(bouncer, SIGKILL);
	F.pg.bouncer_port = 0; /* gone: nothing to stop at the cleanup */
}

/* A claim whose connection broke by an error (not at its deadline) while
 * its backend still ran it: the dispatcher goes through PgBouncer, a
 * trigger makes the claim sleep 4 s at the server (as one waiting for a
 * lock would), and PgBouncer is killed meanwhile (it does not cancel the
 * server's statement; the backend goes on and commits).  The dispatcher
 * reconnects straight to PostgreSQL and sweeps at once, before that
 * commit; the row claimed after it must still be requeued (the sweep
 * again once the connection has been up for staleAfterSec, and every
 * staleAfterSec after a lost claim) and run.  Without the later sweeps it
 * would stay claimed for good under a live dispatcher that does not hold
 * it: nobody rescues the rows of a dispatcher whose heartbeat goes on. */
static void test_claim_committed_after_sweep(void)
{
	long long id, t0;

	CU_ASSERT_FATAL(disp_through_bouncer() == 0);
	sleep_trigger("slow_claim", 4, "NEW.state = 'claimed' AND NEW.claims = 1");
	id = df_submit(&F, "{\"command\":\"true\"}", 0);
	kill_bouncer_once_sleeping();
	t0 = harness_now_ms();
	CU_ASSERT(wait_run_log(0, "a statement was on the wire when the connection was lost",
			       5000) == 0);
	/* done: requeued by a later sweep (staleAfterSec 3 s after the
	 * reconnection, or the one every staleAfterSec), claimed again, run */
	CU_ASSERT(wait_sql("SELECT count(*) FROM execdispatch.job WHERE state = 'done'", 1,
			   20000) == 0);
	fprintf(stderr, "the claim committed after the sweeps: done %lld ms after PgBouncer died\n",
		harness_now_ms() - t0);
	CU_ASSERT_EQUAL(run_count(0, "requeued 1 rows claimed by a statement whose result"), 1);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT claims FROM execdispatch.job WHERE id = %lld", id),
			2);
	PQclear(pgtest_query(F.c, "DROP TRIGGER slow_claim ON execdispatch.job"));
	stop_all(1);
}

/* A claim of 4 places lost with its connection while its backend goes
 * on: the dispatcher goes through PgBouncer, one row held (running), then
 * 12 rows of job queued at once, whose claim (4 places: share 4 + 1, less
 * the one held) a trigger makes sleep secs at the server (at its first
 * row); PgBouncer is killed meanwhile and the backend commits the claim
 * later.  The id of the first of the 12 rows. */
static long long lose_claim_of_four(const char *job, int secs)
{
	long long first = 0;
	char when[120];

	CU_ASSERT_FATAL(disp_through_bouncer() == 0);
	df_submit(&F, job, 0);
	CU_ASSERT_FATAL(wait_held_running("d0", 1, 10000) == 0);
	PQclear(pgtest_query(F.c, "BEGIN"));
	for (int i = 0; i < 12; i++) {
		long long id = df_submit(&F, job, 0);
		if (!first)
			first = id;
	}
	snprintf(when, sizeof when, "NEW.state = 'claimed' AND NEW.claims = 1 AND NEW.id = %lld",
		 first);
	sleep_trigger("slow_claim", secs, when);
	PQclear(pgtest_query(F.c, "COMMIT"));
	kill_bouncer_once_sleeping();
	return first;
}

/* A claim lost with its connection while its backend goes on keeps its
 * places until that backend ended and the sweep after it looked
 * (lose_claim_of_four).  The dispatcher, straight to PostgreSQL, must
 * claim nothing in those places until the sweep has requeued what that
 * claim took: the table never shows more than 5 rows held by it (without
 * the places kept: 9). */
static void test_lost_claim_keeps_places(void)
{
	long long first = lose_claim_of_four("{\"command\":\"sleep\",\"args\":[\"6\"]}", 3),
		  most = 0, t0;

	/* the rows held sampled until the late claim's rows are requeued
	 * (their claims 2) and claimed again by the dispatcher (held again) */
	for (t0 = harness_now_ms(); harness_now_ms() - t0 < 30000;) {
		long long held = df_held(&F, "d0");
		if (held > most)
			most = held;
		if (pgtest_int(F.c,
			       "SELECT count(*) FROM execdispatch.job WHERE id >= %lld AND "
			       "claims >= 2",
			       first) > 0)
			break;
		harness_sleep_ms(10);
	}
	/* the claim that broke the loop may have come after its sample */
	long long last = df_held(&F, "d0");
	if (last > most)
		most = last;
	PQclear(pgtest_query(F.c, "DROP TRIGGER slow_claim ON execdispatch.job"));
	if (most > 5) {
		fprintf(stderr, "held %lld rows with a claim share of 5\n", most);
		harness_tail("dispatcher holding more than its share", F.log[0], 60);
	}
	CU_ASSERT(most >= 4 && most <= 5);
	CU_ASSERT(run_count(0, "rows claimed by a statement whose result the lost connection "
			       "took") >= 1);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGKILL, 5000), SIGKILL);
	PQclear(pgtest_query(F.c, "TRUNCATE execdispatch.job, execdispatch.job_attempt, "
				  "execdispatch.job_key, execdispatch.dispatcher"));
}

/* The places of a lost claim (lose_claim_of_four, its backend sleeping
 * 6 s) are freed by the first probe after its backend ended, also beside
 * a heartbeat slow to commit (a trigger sleeping 0.3 s after our
 * dispatcher row is updated, as a synchronous standby far away makes
 * every commit wait): our beat holds our row (FOR NO KEY UPDATE) until
 * it commits, so a probe sent beside it misses the row and keeps the
 * places taken one heartbeat more, or for good if it always is.  Once the
 * sweep requeued the late claim's rows (it has ended then), no probe
 * finds the row held. */
static void test_lost_claim_freed_beside_slow_beat(void)
{
	static const char held[] = "a statement still holds our dispatcher row";
	unsigned char *txt;
	const char *req;
	size_t len;

	lose_claim_of_four("{\"command\":\"sleep\",\"args\":[\"8\"]}", 6);
	PQclear(pgtest_query(F.c,
			     "CREATE OR REPLACE FUNCTION slow_beat() RETURNS trigger LANGUAGE "
			     "plpgsql AS $$ BEGIN PERFORM pg_sleep(0.3); RETURN NULL; END $$"));
	PQclear(pgtest_query(F.c,
			     "CREATE TRIGGER slow_beat AFTER UPDATE ON execdispatch.dispatcher "
			     "FOR EACH ROW EXECUTE FUNCTION slow_beat()"));
	CU_ASSERT(wait_log(0, "settled: their places are free", 20000) == 0);
	txt = harness_read_file(F.log[0], &len);
	req = txt ? strstr((char *)txt, "requeued 4 rows claimed by a statement") : NULL;
	CU_ASSERT(req && !strstr(req, held));
	if (!req || strstr(req, held))
		harness_tail("a probe beside our own heartbeat", F.log[0], 40);
	free(txt);
	PQclear(pgtest_query(F.c, "DROP TRIGGER slow_beat ON execdispatch.dispatcher"));
	PQclear(pgtest_query(F.c, "DROP TRIGGER slow_claim ON execdispatch.job"));
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGKILL, 5000), SIGKILL);
	PQclear(pgtest_query(F.c, "TRUNCATE execdispatch.job, execdispatch.job_attempt, "
				  "execdispatch.job_key, execdispatch.dispatcher"));
}

/* An instanceId reused by a new process (an orchestrator restarting it
 * with the same EXECDISPATCH_INSTANCE_ID) while the old one is cut off
 * (SIGSTOP while a claim waits at the server for an application's LOCK
 * TABLE job; the lock goes while it is stopped): the new life takes the
 * stale row over, requeues the old life's rows and claims them again.
 * The old one, woken, finds its row taken (its beat names its own life),
 * and neither sweeps the new life's claims (its statements name its own
 * row) nor claims: the new life's claims stay as they are.  A sweep of the
 * old life that requeued them would make their jobs run twice. */
static void test_reused_instance(void)
{
	long long parked;

	PQclear(pgtest_query(F.c, "TRUNCATE execdispatch.job, execdispatch.job_attempt, "
				  "execdispatch.job_key, execdispatch.dispatcher, ledger, "
				  "violations"));
	CU_ASSERT_FATAL(df_write_config(&F, 0, NULL) == 0);
	CU_ASSERT_FATAL(df_start_disp(&F, 0) == 0);
	for (int i = 0; i < 4; i++)
		df_submit(&F, "{\"command\":\"sleep\",\"args\":[\"25\"]}", 0);
	CU_ASSERT_FATAL(wait_sql("SELECT count(*) FROM execdispatch.job WHERE state = 'running'", 4,
				 15000) == 0);
	PGconn *lk = pgtest_connect(F.conninfo);
	PQclear(pgtest_query(lk, "BEGIN; LOCK TABLE execdispatch.job IN ACCESS EXCLUSIVE MODE"));
	/* its claim (admission 5, 4 held) waits for the lock */
	CU_ASSERT(wait_sql("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
			   "'execdispatch' AND wait_event_type = 'Lock' AND query LIKE '%picked%'",
			   1, 5000) == 0);
	kill(F.disp[0], SIGSTOP);
	PQclear(pgtest_query(lk, "COMMIT"));
	PQfinish(lk);
	/* the new life: the same file, so the same instanceId d0, once the
	 * old row is stale (staleAfterSec 3) */
	CU_ASSERT(wait_sql("SELECT count(*) FROM execdispatch.dispatcher WHERE heartbeat_at < "
			   "now() - interval '3.5 seconds'",
			   1, 10000) == 0);
	snprintf(F.cfg[2], sizeof F.cfg[2], "%s", F.cfg[0]);
	snprintf(F.log[2], sizeof F.log[2], "%s/d0-new.log", F.dir);
	CU_ASSERT_FATAL(df_spawn_disp(&F, 2) == 0);
	CU_ASSERT_FATAL(wait_log(2, "registered as d0: claiming", 10000) == 0);
	/* it claims the requeued rows again; the slots are busy with the old
	 * life's runs, so they stay claimed (parked) */
	CU_ASSERT_FATAL(wait_sql("SELECT count(*) FROM execdispatch.job WHERE state = 'claimed' "
				 "AND claims = 2",
				 1, 15000) == 0);
	parked = pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE claims = 2");
	kill(F.disp[0], SIGCONT);
	/* it finds its row taken and exits (test_reused_instance_life) */
	CU_ASSERT(wait_run_log(0, "was taken over by another live dispatcher", 10000) == 0);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, 0, 5000), 1 << 8);
	/* sleep: the old life's sweep, if one was on its way, has answered
	 * within 1 s; no sign of a statement that never comes can be awaited */
	harness_sleep_ms(1000);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE claims >= 3"),
			0);
	/* every claim of the new life still stands */
	CU_ASSERT(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE claims = 2") >=
		  parked);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE claims = 2 "
					"AND NOT (runner_instance = 'd0' AND state IN ('claimed', "
					"'running'))"),
			0);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 2, SIGKILL, 5000), SIGKILL);
}

/* The sequence of issue 28 (docs/dispatch.md, "Identity"): a dispatcher
 * P1 of instance d0 is frozen (SIGSTOP) past staleAfterSec; the
 * execserver, pinging every second with a deadline of 2 s, closes its
 * connection meanwhile; a new life P2 of d0 takes the row over and runs
 * three jobs; then P1 is continued (SIGCONT), and its client library
 * connects again at once.  With the instanceId as the client id of both,
 * that connection took P2's running jobs over (docs/protocol.md section
 * 6): their DONEs went to P1, which acknowledged and dropped them ("a job
 * done already"), the rows stayed running under P2 for good and P2's stop
 * never ended.  Each process now shows the execservers a client id of its
 * own: P1 finds its row taken, closes its connections and exits (status
 * 1); the jobs end done under P2 with their receipts, and P2's stop ends
 * at once. */
static void test_reused_instance_life(void)
{
	char body[1200];
	long long t0;
	int st;

	harness_stop(&F.es[0], 5000);
	harness_cleanup(&F.es[0]);
	snprintf(body, sizeof body, "%spingIntervalSec: 1\npingTimeoutSec: 2\n", df_exec_body(4));
	CU_ASSERT_FATAL(harness_start(&F.es[0], 1, body, NULL) == 0);
	PQclear(pgtest_query(F.c, "TRUNCATE execdispatch.job, execdispatch.job_attempt, "
				  "execdispatch.job_key, execdispatch.dispatcher, ledger, "
				  "violations"));
	CU_ASSERT_FATAL(df_write_config(&F, 0, NULL) == 0);
	CU_ASSERT_FATAL(df_start_disp(&F, 0) == 0);
	for (t0 = harness_now_ms();
	     harness_status_int(&F.es[0], "clients", NULL) < 1 && harness_now_ms() - t0 < 10000;)
		harness_sleep_ms(20);
	kill(F.disp[0], SIGSTOP);
	CU_ASSERT(wait_sql("SELECT count(*) FROM execdispatch.dispatcher WHERE heartbeat_at < "
			   "now() - interval '3.5 seconds'",
			   1, 10000) == 0);
	/* P1's connection is closed by the execserver's ping deadline */
	for (t0 = harness_now_ms();
	     harness_status_int(&F.es[0], "clients", NULL) != 0 && harness_now_ms() - t0 < 10000;)
		harness_sleep_ms(20);
	CU_ASSERT(harness_status_int(&F.es[0], "clients", NULL) == 0);
	snprintf(F.cfg[2], sizeof F.cfg[2], "%s", F.cfg[0]);
	snprintf(F.log[2], sizeof F.log[2], "%s/d0-life2.log", F.dir);
	CU_ASSERT_FATAL(df_spawn_disp(&F, 2) == 0);
	CU_ASSERT_FATAL(wait_log(2, "registered as d0: claiming", 10000) == 0);
	for (int i = 0; i < 3; i++)
		df_submit(&F, "{\"command\":\"sleep\",\"args\":[\"4\"]}", 0);
	CU_ASSERT_FATAL(wait_sql("SELECT count(*) FROM execdispatch.job WHERE state = 'running'", 3,
				 10000) == 0);
	kill(F.disp[0], SIGCONT);
	st = df_stop_disp(&F, 0, 0, 10000);
	CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	CU_ASSERT(df_wait_final(&F, 15000) == 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE state = "
					"'done' AND runner_instance = 'd0' AND claims = 1 AND "
					"receipt IS NOT NULL AND started_at IS NOT NULL"),
			3);
	CU_ASSERT_EQUAL(wait_log(0, "a job done already", 0), -1);
	t0 = harness_now_ms();
	st = df_stop_disp(&F, 2, SIGTERM, 10000);
	CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CU_ASSERT(harness_now_ms() - t0 < 3000);
}

/* PostgreSQL stopped behind PgBouncer: PgBouncer refuses every new server
 * login for its server_login_retry (15 s by default, longer than half of
 * staleAfterSec, 3 s here) with "server login has been failing, try again
 * later (server_login_retry)"; the dispatcher says so once it has seen it
 * for longer than 1.5 s (docs/dispatch.md, "Poolers and the database's
 * health").  Before, it logged only lost connections. */
static void test_login_retry_said(void)
{
	CU_ASSERT_FATAL(disp_through_bouncer_as(1) == 0);
	CU_ASSERT_FATAL(pgtest_stop(&F.pg) == 0);
	CU_ASSERT(wait_run_log(0, "PgBouncer has refused our connections for", 15000) == 0);
	CU_ASSERT_EQUAL(run_count(0, "PgBouncer has refused our connections for"), 1);
	df_stop_disp(&F, 0, SIGKILL, 5000);
	kill(bouncer_pid(), SIGKILL);
	F.pg.bouncer_port = 0; /* gone: nothing to stop at the cleanup */
	CU_ASSERT_FATAL(pgtest_restart(&F.pg) == 0);
	PQreset(F.c);
}

/* A database not reachable at the start is waited for, with back-off
 * and a line per failed attempt (docs/dispatch.md, "Starting"): the
 * dispatcher is still up at its sixth attempt (about 8 s), and once
 * PostgreSQL is started it registers and claims.  Before, it exited with
 * status 1 five seconds after its start. */
static void test_start_database_down(void)
{
	PQclear(pgtest_query(F.c, "TRUNCATE execdispatch.job, execdispatch.job_attempt, "
				  "execdispatch.job_key, execdispatch.dispatcher, ledger, "
				  "violations"));
	CU_ASSERT(df_submit(&F, "{\"command\":\"true\"}", 0) > 0);
	CU_ASSERT_FATAL(pgtest_stop(&F.pg) == 0);
	CU_ASSERT_FATAL(df_write_config(&F, 0, NULL) == 0);
	CU_ASSERT_FATAL(df_spawn_disp(&F, 0) == 0);
	CU_ASSERT(wait_run_count(0, "waiting for the database at the start", 6, 15000) == 0);
	CU_ASSERT_FATAL(pgtest_restart(&F.pg) == 0);
	PQreset(F.c);
	CU_ASSERT(wait_sql("SELECT count(*) FROM execdispatch.dispatcher WHERE instance = 'd0'", 1,
			   15000) == 0);
	CU_ASSERT(df_wait_final(&F, 10000) == 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT (state = 'done')::int FROM execdispatch.job"), 1);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 10000), 0);
}

/* A stop ends within stopTimeoutSec even while a run goes on (a long
 * job, or a DONE that never comes): the run is cancelled at the
 * execserver, its row stays held under the instance and the dispatcher
 * row stays, so that the rescue requeues it (docs/dispatch.md,
 * "Stopping").  Before, the stop waited for the run's end for ever. */
static void test_stop_bound(void)
{
	long long t0;
	int st;

	fresh_with(1, "stopTimeoutSec: 1\n");
	df_submit(&F, "{\"command\":\"sleep\",\"args\":[\"30\"]}", 0);
	CU_ASSERT_FATAL(wait_sql("SELECT count(*) FROM execdispatch.job WHERE state = 'running'", 1,
				 10000) == 0);
	t0 = harness_now_ms();
	st = df_stop_disp(&F, 0, SIGTERM, 8000);
	CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CU_ASSERT(harness_now_ms() - t0 < 3000);
	CU_ASSERT_EQUAL(df_held(&F, "d0"), 1);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.dispatcher"), 1);
	CU_ASSERT_EQUAL(wait_log(0, "left held under instance d0 for the rescue", 0), 0);
	/* cancelled at the execserver: its slot is free again */
	for (t0 = harness_now_ms();
	     harness_wg_field(&F.es[0], "wg", "running") != 0 && harness_now_ms() - t0 < 5000;)
		harness_sleep_ms(20);
	CU_ASSERT_EQUAL(harness_wg_field(&F.es[0], "wg", "running"), 0);
	/* restarted at once with the same instanceId (an init script's
	 * restart): the row left fresh is waited for until it goes stale, then
	 * taken over and the held row requeued.  Before, the start exited with
	 * status 1 ("held by another live dispatcher"), which the systemd unit
	 * does not restart. */
	CU_ASSERT_FATAL(df_spawn_disp(&F, 0) == 0);
	CU_ASSERT(wait_run_log(0, "waiting up to 5 s for it to go stale", 5000) == 0);
	CU_ASSERT(wait_run_log(0, "requeued 1 rows an earlier run of instance d0 still held",
			       10000) == 0);
	/* one statement, one snapshot: the new life may claim the row between
	 * two separate counts */
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job "
					"WHERE (runner_instance = 'd0' AND state IN ('claimed', "
					"'running')) OR (state = 'queued' AND attempts = 1)"),
			1);
	st = df_stop_disp(&F, 0, SIGTERM, 8000);
	CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* The stop after stopTimeoutSec: lk's lock released (COMMIT), dispatcher 0
 * exits with status 0 and row id is as cond says. */
static void unlock_then_exited(PGconn *lk, long long id, const char *cond)
{
	int st;

	PQclear(pgtest_query(lk, "COMMIT"));
	PQfinish(lk);
	st = df_stop_disp(&F, 0, 0, 8000);
	CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id = %lld AND %s",
				   id, cond),
			1);
}

/* A local claim sent before the stop whose answer comes after
 * stopTimeoutSec left the runs to the rescue (held up by a lock on the
 * dispatcher row): the row is given back, not run.  Before, its run
 * started then, and the stop waited for it with no bound left (a 30 s
 * job: 30 s). */
static void test_stop_bound_late_local_claim(void)
{
	static const char sleep30[] = "'{\"command\":\"sleep\",\"args\":[\"30\"]}'";
	PGconn *lk = pgtest_connect(F.conninfo);
	long long late;

	PQclear(pgtest_query(F.c, "TRUNCATE execdispatch.job, execdispatch.job_attempt, "
				  "execdispatch.job_key, execdispatch.dispatcher"));
	CU_ASSERT_FATAL(df_write_config(&F, 0,
					"stopTimeoutSec: 1\nlocalSlots: 2\nservices:\n  here:\n"
					"    local: true\n    commands:\n"
					"      sleep: {prog: /bin/sleep}\n") == 0);
	CU_ASSERT_FATAL(df_start_disp(&F, 0) == 0);
	PQclear(pgtest_query(F.c, "SELECT execdispatch.submit('here', %s, 0)", sleep30));
	CU_ASSERT_FATAL(wait_sql("SELECT count(*) FROM execdispatch.job WHERE state = 'running'", 1,
				 10000) == 0);
	PQclear(pgtest_query(lk, "BEGIN; SELECT 1 FROM execdispatch.dispatcher FOR UPDATE"));
	late = pgtest_int(F.c, "SELECT execdispatch.submit('here', %s, 0)", sleep30);
	CU_ASSERT_FATAL(wait_sql("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
				 "'execdispatch' AND wait_event_type = 'Lock' AND query LIKE "
				 "'%%picked%%'",
				 1, 5000) == 0);
	kill(F.disp[0], SIGTERM);
	CU_ASSERT(wait_run_log(0, "(stopTimeoutSec): cancelling them", 3000) == 0);
	unlock_then_exited(lk, late, "state = 'queued' AND attempts = 0");
}

/* /metrics after a stop's stopTimeoutSec freed the client, while the
 * loop still waits for an outcome (its finish held by a row lock): the
 * page is served and has no execservers_connected lines.  Before, it read
 * the freed client (exc_address_stats): stale figures, or a crash that
 * lost the outcome. */
static void test_stop_bound_metrics(void)
{
	PGconn *locker = pgtest_connect(F.conninfo);
	long long quick;
	int port;

	PQclear(pgtest_query(F.c, "TRUNCATE execdispatch.job, execdispatch.job_attempt, "
				  "execdispatch.job_key, execdispatch.dispatcher"));
	port = df_start_with_metrics(&F, 0, "stopTimeoutSec: 1\n");
	CU_ASSERT_FATAL(port > 0);
	df_submit(&F, "{\"command\":\"sleep\",\"args\":[\"30\"]}", 0);
	quick = df_submit(&F, "{\"command\":\"sleep\",\"args\":[\"1\"]}", 0);
	CU_ASSERT_FATAL(wait_sql("SELECT count(*) FROM execdispatch.job WHERE state = 'running'", 2,
				 10000) == 0);
	CU_ASSERT(df_metric(port, "execdispatch_execservers_connected") == 1);
	PQclear(pgtest_query(locker,
			     "BEGIN; SELECT 1 FROM execdispatch.job WHERE id = %lld FOR "
			     "UPDATE",
			     quick));
	/* the quick run's finish waits for the lock */
	CU_ASSERT_FATAL(wait_sql("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = "
				 "'Lock'",
				 1, 10000) == 0);
	kill(F.disp[0], SIGTERM);
	CU_ASSERT(wait_run_log(0, "left held under instance d0 for the rescue", 5000) == 0);
	CU_ASSERT(df_metric(port, "execdispatch_database_up") == 1);
	CU_ASSERT(df_metric(port, "execdispatch_execservers_connected") == -1);
	unlock_then_exited(locker, quick, "state = 'done'");
}

/* The late sweep (db.c, late_cb).  A claim sent to a backend stopped
 * (SIGSTOP) while idle waits past its deadline (staleAfterSec, 3 s): it is
 * abandoned and cancelled at the server (the cancel waits in the stopped
 * backend), is not answered within 3 s more either, and is given up: its
 * connection closed.  Then the backend is resumed: the cancel came while
 * it was idle, so PostgreSQL drops it, reads the claim and commits it,
 * after every sweep the reconnections ran.  Only a sweep made after the
 * give-up (the one once the connection has been up for staleAfterSec, or
 * the one every staleAfterSec after a lost claim, whichever comes first)
 * finds the row claimed under the instance by a claim it does not hold,
 * and requeues it.  No other claim may take the job meanwhile: a session holds our
 * dispatcher row locked, so no heartbeat is written and the dispatcher
 * starts nothing (stale after staleAfterSec / 2), and the job is submitted
 * only then.  Once the lock is gone the job runs once (the ledger), as
 * attempt 2: the late claim's attempt counts. */
#define GIVEN_UP "abandoned at its deadline has not ended"

/* Whether backend pid's process title says it waits for a statement
 * ("... idle", not "idle in transaction"): read from /proc, which a
 * stopped backend cannot hold up. */
static int backend_title_idle(pid_t pid)
{
	char path[64], title[256];
	ssize_t n;
	int fd;

	snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, title, sizeof title - 1);
	close(fd);
	if (n <= 0)
		return 0;
	title[n] = '\0';
	while (n > 0 && (title[n - 1] == ' ' || title[n - 1] == '\0'))
		title[--n] = '\0';
	return n >= 5 && strcmp(title + n - 5, " idle") == 0;
}

static void test_claim_committed_late(void)
{
	char job[3072], line[200], ids[200] = "{}";
	long long pids[4];
	int npids = 0;
	PGconn *other;
	PGresult *res;

	fresh(1);
	/* the claims' backends (the hot connections), stopped while idle: one
	 * stopped in a statement would take the cancel; then resumed, again */
	for (int tries = 0; tries < 50 && npids == 0; tries++) {
		size_t at = 1;
		/* the exec-bound claim (claim_exec.sql: WITH RECURSIVE, for its
		 * walk of the queued services) */
		res = pgtest_query(
			F.c, "SELECT pid FROM pg_stat_activity WHERE application_name = "
			     "'execdispatch' AND query LIKE 'WITH RECURSIVE me AS%%picked_s%%'");
		for (int i = 0; res && i < PQntuples(res) && npids < 4; i++) {
			pids[npids] = atoll(PQgetvalue(res, i, 0));
			kill((pid_t)pids[npids], SIGSTOP);
			at += (size_t)snprintf(ids + at, sizeof ids - at, "%s%lld",
					       npids ? "," : "", pids[npids]);
			npids++;
		}
		PQclear(res);
		snprintf(ids + at, sizeof ids - at, "}");
		/* a stopped backend cannot change its state; one stopped while it
		 * reported a new statement would make every reader of
		 * pg_stat_activity wait for it, so its own process title is read
		 * first, and the look there is bounded by a statement timeout */
		int busy = 0;
		for (int i = 0; i < npids; i++)
			busy |= !backend_title_idle((pid_t)pids[i]);
		if (!busy) {
			PQclear(pgtest_query(F.c, "SET statement_timeout = 1000"));
			busy = pgtest_int(F.c,
					  "SELECT count(*) FROM pg_stat_activity WHERE pid = "
					  "ANY('%s'::int[]) AND state <> 'idle'",
					  ids) != 0;
			PQclear(pgtest_query(F.c, "RESET statement_timeout"));
		}
		if (npids && busy) {
			for (int i = 0; i < npids; i++)
				kill((pid_t)pids[i], SIGCONT);
			npids = 0;
		}
		if (npids == 0)
			harness_sleep_ms(30);
	}
	CU_ASSERT_FATAL(npids >= 1);
	/* no heartbeat from now on, so nothing is started: the job is not
	 * claimed but by the claims at the stopped backends (sent within a
	 * poll, 100 ms, while the heartbeat was fresh) */
	other = pgtest_connect(F.pg.conninfo);
	CU_ASSERT_FATAL(other != NULL);
	PQclear(pgtest_query(other, "BEGIN"));
	PQclear(pgtest_query(other, "SELECT 1 FROM execdispatch.dispatcher WHERE instance = 'd0' "
				    "FOR NO KEY UPDATE"));
	snprintf(line, sizeof line, "[execdispatch %d] warn: heartbeat not written",
		 (int)F.disp[0]);
	CU_ASSERT_FATAL(wait_log(0, line, 10000) == 0);
	df_ledger_job(&F, job, sizeof job, 100, 1);
	long long id = df_submit(&F, job, 0);
	/* every claim at a stopped backend given up */
	for (long long t0 = harness_now_ms();
	     harness_now_ms() - t0 < 15000 && run_count(0, GIVEN_UP) < npids;)
		harness_sleep_ms(50);
	CU_ASSERT_FATAL(run_count(0, GIVEN_UP) == npids);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id = %lld AND "
				   "state = 'queued' AND claims = 0",
				   id),
			1);
	for (int i = 0; i < npids; i++)
		kill((pid_t)pids[i], SIGCONT);
	/* claimed by the resumed backend, then requeued by the late sweep,
	 * the lock still held */
	for (long long t0 = harness_now_ms();
	     harness_now_ms() - t0 < 10000 &&
	     pgtest_int(
		     F.c,
		     "SELECT count(*) FROM execdispatch.job WHERE id = %lld AND state = 'queued' "
		     "AND claims = 1 AND attempts = 1",
		     id) == 0;)
		harness_sleep_ms(50);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id = %lld AND "
				   "state = 'queued' AND claims = 1 AND attempts = 1",
				   id),
			1);
	/* by a sweep after the give-up */
	char *run = this_run(0);
	const char *gave = run ? strstr(run, GIVEN_UP) : NULL;
	const char *requeued = run ? strstr(run, "requeued 1 rows claimed by a statement whose "
						 "result the lost connection took")
				   : NULL;
	CU_ASSERT(gave && requeued && requeued > gave);
	free(run);
	PQclear(pgtest_query(other, "COMMIT"));
	PQfinish(other);
	check_all_done(1);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT attempts FROM execdispatch.job"), 2);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM ledger"), 1);
	stop_all(1);
}

/* The start's requeue of the rows an earlier life of the instance left is
 * refused by the database (here a trigger; a permission or a lock timeout
 * alike): the dispatcher logs the error, claims nothing, and tries again
 * every heartbeatSec; once the requeue goes through, the left row runs
 * again and the queued one runs.  Claiming with the old life's row still
 * held under the instance would leave that row held by nobody who runs
 * it. */
static void test_start_requeue_refused(void)
{
	char job[3072];
	long long left;

	PQclear(pgtest_query(F.c, "TRUNCATE execdispatch.job, execdispatch.job_attempt, "
				  "execdispatch.job_key, execdispatch.dispatcher, ledger, "
				  "violations"));
	CU_ASSERT_FATAL(df_write_config(&F, 0, NULL) == 0);
	/* an earlier life of d0, silent, holding a row */
	PQclear(pgtest_query(F.c,
			     "INSERT INTO execdispatch.dispatcher (instance, host, pid, "
			     "started_at, heartbeat_at) VALUES ('d0', 'h', 1, now() - interval "
			     "'1 hour', now() - interval '1 hour')"));
	df_ledger_job(&F, job, sizeof job, 100, 1);
	left = df_submit(&F, job, 0);
	PQclear(pgtest_query(F.c,
			     "UPDATE execdispatch.job SET state = 'claimed', runner_instance = "
			     "'d0', attempts = 1, claims = 1 WHERE id = %lld",
			     left));
	PQclear(pgtest_query(
		F.c, "CREATE FUNCTION refuse_requeue() RETURNS trigger LANGUAGE plpgsql AS "
		     "$$BEGIN RAISE EXCEPTION 'requeue refused by the test'; END$$; "
		     "CREATE TRIGGER refuse_requeue BEFORE UPDATE ON execdispatch.job FOR EACH ROW "
		     "WHEN (OLD.state = 'claimed' AND NEW.state = 'queued') "
		     "EXECUTE FUNCTION refuse_requeue()"));
	CU_ASSERT_FATAL(df_submit(&F, job, 0) > left);
	CU_ASSERT_FATAL(df_spawn_disp(&F, 0) == 0);
	CU_ASSERT(wait_run_log(0, "requeue refused by the test", 10000) == 0);
	/* tried again (heartbeatSec 1), twice more, and nothing claimed meanwhile */
	CU_ASSERT(wait_run_count(0, "requeue refused by the test", 3, 10000) == 0);
	CU_ASSERT_EQUAL(run_count(0, "claiming"), 0);
	/* the left row (the lower id) still held, the queued one not claimed */
	char rows[64];
	CU_ASSERT_STRING_EQUAL(pgtest_text(F.c, rows, sizeof rows,
					   "SELECT string_agg(state || '/' || claims, ' ' ORDER BY "
					   "id) FROM execdispatch.job"),
			       "claimed/1 queued/0");
	PQclear(pgtest_query(F.c, "DROP TRIGGER refuse_requeue ON execdispatch.job; "
				  "DROP FUNCTION refuse_requeue()"));
	CU_ASSERT(wait_run_log(0, "requeued 1 rows an earlier run of instance d0 still held",
			       5000) == 0);
	check_all_done(2);
	CU_ASSERT_EQUAL(
		pgtest_int(F.c, "SELECT attempts FROM execdispatch.job WHERE id = %lld", left), 2);
	CU_ASSERT_EQUAL(df_stop_disp(&F, 0, SIGTERM, 10000), 0);
}

/* Through every fault above (connections killed, a database restarted,
 * silent or refusing, stops), each state machine of the dispatchers took
 * only the transitions of its table (phases.h): their held rows, their
 * stages and each database connection (db.c) logged none illegal. */
static void test_no_illegal_transition(void)
{
	for (int i = 0; i < DF_MAX_DISP; i++) {
		size_t len;
		unsigned char *txt = F.log[i][0] ? harness_read_file(F.log[i], &len) : NULL;

		CU_ASSERT(!txt || !strstr((char *)txt, "illegal transition"));
		if (txt && strstr((char *)txt, "illegal transition"))
			fprintf(stderr, "%s: %.200s\n", F.log[i],
				strstr((char *)txt, "illegal transition"));
		free(txt);
	}
}

static void test_teardown(void)
{
	df_cleanup(&F, CU_get_number_of_failures() > 0);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "setup: PostgreSQL, an execserver of 4 slots, the ledger", test_setup },
		{ "SIGKILL in mid-run: rescued within staleAfterSec + one sweep", test_sigkill },
		{ "SIGSTOP beyond staleAfterSec, SIGCONT: nothing written over", test_sigstop },
		{ "pg_terminate_backend of the dispatchers' sessions", test_db_sessions_killed },
		{ "a claim whose reply was lost", test_claim_reply_lost },
		{ "PostgreSQL restarted in mid-run", test_db_restart },
		{ "execserver handlers killed: exec_lost, requeued", test_exec_lost },
		{ "an outcome the database refuses: kept, or cut to outcome_not_stored",
		  test_outcome_refused },
		{ "a finish whose reply was lost counts as written", test_finish_reply_lost },
		{ "a start whose reply was lost: the run goes on to its outcome",
		  test_start_reply_lost },
		{ "a claim whose reply was lost on the second connection is requeued",
		  test_claim_reply_lost_second_conn },
		{ "a stop while an outcome is refused in every form: given up after 10 s",
		  test_stop_outcome_refused },
		{ "a database that stops answering: the loop goes on, then recovers",
		  test_db_silent },
		{ "a claim committed after the sweeps (its connection broke) is requeued",
		  test_claim_committed_after_sweep },
		{ "a claim lost with its connection keeps its places until it is swept",
		  test_lost_claim_keeps_places },
		{ "a lost claim's places are freed beside a heartbeat slow to commit",
		  test_lost_claim_freed_beside_slow_beat },
		{ "a reused instanceId: the old life leaves the new one's claims alone",
		  test_reused_instance },
		{ "a claim committed after it was given up is requeued by a later sweep",
		  test_claim_committed_late },
		{ "the start's requeue refused: nothing claimed until it goes through",
		  test_start_requeue_refused },
		{ "PgBouncer's server_login_retry past staleAfterSec / 2 is said",
		  test_login_retry_said },
		{ "a database down at the start is waited for", test_start_database_down },
		{ "a stop ends within stopTimeoutSec while a run goes on", test_stop_bound },
		{ "/metrics after the stop's timeout freed the client", test_stop_bound_metrics },
		{ "a local claim answered after the stop's timeout is given back",
		  test_stop_bound_late_local_claim },
		/* last: it restarts the execserver with short pings */
		{ "a reused instanceId: the old life takes none of the new one's jobs over",
		  test_reused_instance_life },
		{ "no illegal transition in the dispatchers' logs", test_no_illegal_transition },
		{ "teardown", test_teardown },
		{ NULL, NULL }
	};
	return run_suite("dispatch-faults", cases);
}
