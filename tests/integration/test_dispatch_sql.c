/*
 * test_dispatch_sql.c - execdispatch's database side against a real
 * PostgreSQL, no execserver: the configuration's errors, the migrations
 * (idempotent; a daemon refuses an unknown schema and names the command),
 * the SQL API (submit's checks, cancel's three answers, position), the
 * claim's index, and the races of the daemon's own statements, each
 * forced by holding one session's transaction open while the other's
 * statement runs into its lock (and the beat beside an application's
 * LOCK TABLE job, which the rescue waits for); migration 009's functions
 * (pause, retry and the attempts, unique jobs and their race, bulk).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <CUnit/CUnit.h>

#include "dispatch/dispatch_config.h"
#include "dispatch/migrate.h"
#include "dispatch/queries.h"
#include "dispatch_fixture.h"
#include "suite.h"

static struct dfix F;

/* The token (started_at) of every dispatcher row the tests make, as the
 * daemon passes its own: the text of a timestamptz. */
#define TOKEN "2026-01-02 03:04:05.678901+00"

/* A fresh dispatcher row of instance in schema (its claims need it). */
static void alive_in(const char *schema, const char *instance)
{
	PQclear(pgtest_query(F.c,
			     "INSERT INTO %s.dispatcher (instance, host, pid, started_at) VALUES "
			     "('%s', 'h', 1, '" TOKEN "') ON CONFLICT (instance) DO UPDATE SET "
			     "heartbeat_at = now(), started_at = EXCLUDED.started_at",
			     schema, instance));
}

static void alive(const char *instance)
{
	alive_in("execdispatch", instance);
}

/* --migrate's last line after applying the migrations from version from
 * (that one included) up to DISPATCH_SCHEMA_VERSION. */
static const char *migrated_from(int from)
{
	static char buf[96];
	int n = DISPATCH_SCHEMA_VERSION - from + 1;

	snprintf(buf, sizeof buf, "migrated to version %d (%d migration%s applied)",
		 DISPATCH_SCHEMA_VERSION, n, n == 1 ? "" : "s");
	return buf;
}

/* ---- configuration ---- */

static int check_config(const char *text, char *out, size_t len)
{
	char path[300];
	FILE *f;

	snprintf(path, sizeof path, "%s/check.yml", F.dir);
	f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
	const char *args[] = { "-t", "-c", path, NULL };
	return df_run_tool(out, len, args);
}

/* consoleEnabled: on by default behind authToken or with metrics on a
 * loopback address only, off otherwise; the key overrides either way. */
static void test_console_default(void)
{
	static const struct {
		const char *extra;
		int on;
	} cases[] = {
		{ "metrics: 127.0.0.1:9188\n", 1 },
		{ "metrics: localhost:9188\n", 1 },
		{ "metrics: \"[::1]:9188\"\n", 1 },
		{ "metrics: 0.0.0.0:9188\n", 0 },
		{ "metrics: 10.0.0.5:9188\n", 0 },
		{ "metrics: 0.0.0.0:9188\nauthToken: t\n", 1 },
		{ "metrics: 0.0.0.0:9188\nconsoleEnabled: true\n", 1 },
		{ "metrics: 127.0.0.1:9188\nconsoleEnabled: false\n", 0 },
		{ "metrics: 0.0.0.0:9188\nauthToken: t\nconsoleEnabled: false\n", 0 },
	};
	char text[256];

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct dispatch_config cfg;
		struct config_error err;
		int n = snprintf(text, sizeof text,
				 "database: dbname=x\nexecservers: [ws://h:1]\n%s", cases[i].extra);
		CU_ASSERT_FATAL(dispatch_config_load_buffer("c.yml", text, (size_t)n, NULL, &cfg,
							    &err) == 0);
		if (cfg.console_enabled != cases[i].on)
			fprintf(stderr, "consoleEnabled of %s: %d\n", cases[i].extra,
				cfg.console_enabled);
		CU_ASSERT_EQUAL(cfg.console_enabled, cases[i].on);
		dispatch_config_free(&cfg);
	}
	char out[1024];
	CU_ASSERT_EQUAL(check_config("database: dbname=x\nexecservers: [ws://h:1]\n"
				     "consoleEnabled: maybe\n",
				     out, sizeof out),
			1);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "check.yml:3:17: consoleEnabled"));
}

static void test_config_errors(void)
{
	static const struct {
		const char *text, *expect;
	} cases[] = {
		{ "database: dbname=x\nexecservers: [ws://h:1]\npollMs: 5\n",
		  "check.yml:3:9: pollMs" },
		{ "database: dbname=x\nexecservers: [http://h:1]\n",
		  "check.yml:2:15: execservers[0]" },
		{ "database: dbname=x\nexecservers: [ws://h:1]\npolMs: 100\n", "check.yml:3:1:" },
		{ "execservers: [ws://h:1]\n", "database: a libpq connection string" },
		{ "database: dbname=x\nexecservers: [ws://h:1]\nschema: Bad-Name\n",
		  "check.yml:3:9: schema" },
		/* 57 characters: "<schema>_submit" would not be a PostgreSQL name,
		 * and migration 002's pg_notify would fail every insert */
		{ "database: dbname=x\nexecservers: [ws://h:1]\nschema: "
		  "a23456789012345678901234567890123456789012345678901234567\n",
		  "check.yml:3:9: schema: a lower-case SQL identifier is required (a-z, 0-9, _, "
		  "not starting with a digit, at most 56)" },
		{ "database: dbname=x\nexecservers: [ws://h:1]\nheartbeatSec: 5\nstaleAfterSec: "
		  "6\n",
		  "check.yml:4:16: staleAfterSec (6) must be at least twice heartbeatSec" },
		{ "database: dbname=x\nexecservers: [ws://h:1]\ninstanceId: \"a b\"\n",
		  "check.yml:3:13: instanceId" },
		{ "database: dbname=x\nexecservers: [ws://h:1]\nmetrics: nope\n",
		  "check.yml:3:10: metrics" },
		/* libpq's own parser: a misspelt keyword, a missing "=" */
		{ "execservers: [ws://h:1]\ndatabase: \"hots=x\"\n",
		  "check.yml:2:11: database: not a libpq connection string or URI: invalid "
		  "connection option \"hots\"" },
		{ "execservers: [ws://h:1]\ndatabase: x\n",
		  "check.yml:2:11: database: not a libpq connection string or URI: missing \"=\" "
		  "after \"x\"" },
		{ "execservers: [ws://h:1]\ndatabase: \"postgresql://h/db?hots=x\"\n",
		  "check.yml:2:11: database: not a libpq connection string or URI: invalid URI "
		  "query parameter: \"hots\"" },
		/* the retry keys, at the top level and per service */
		{ "database: dbname=x\nexecservers: [ws://h:1]\nretryBackoff: linear\n",
		  "check.yml:3:15: retryBackoff: exponential or fixed is required" },
		{ "database: dbname=x\nexecservers: [ws://h:1]\nretryExitCodes: [75, 256]\n",
		  "check.yml:3:22: retryExitCodes[]" },
		{ "database: dbname=x\nexecservers: [ws://h:1]\nretryDelaySec: 100\n"
		  "retryMaxDelaySec: 10\n",
		  "check.yml:4:19: the top level: retryMaxDelaySec (10) must be at least "
		  "retryDelaySec (100)" },
		{ "database: dbname=x\nexecservers: [ws://h:1]\nservices:\n  thumb:\n"
		  "    maxAttempts: 0\n",
		  "check.yml:5:18: maxAttempts" },
		{ "database: dbname=x\nexecservers: [ws://h:1]\nservices:\n  thumb:\n"
		  "    maxAttemps: 2\n",
		  "check.yml:5:5:" },
		{ "database: dbname=x\nexecservers: [ws://h:1]\nservices:\n  thumb:\n"
		  "    retryExitCodes: 75\n",
		  "check.yml:5:21: retryExitCodes" },
		{ "database: dbname=x\nexecservers: [ws://h:1]\nservices:\n  \"a b\":\n"
		  "    maxAttempts: 2\n",
		  "check.yml:4:3: services: a service name is 1 to 64 of A-Z a-z 0-9 _ . -" },
		{ "database: dbname=x\nexecservers: [ws://h:1]\nretryDelaySec: 120\nservices:\n"
		  "  thumb:\n    retryMaxDelaySec: 60\n",
		  "check.yml:5:3: services.thumb: retryMaxDelaySec (60) must be at least "
		  "retryDelaySec (120)" },
		{ "database: dbname=x\nexecservers: [ws://h:1]\nservices:\n  thumb:\n"
		  "    commands: {c: {prog: /bin/true}}\n",
		  "check.yml:5:15: services.thumb.commands: only a local service" },
	};
	char out[1024];

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int rc = check_config(cases[i].text, out, sizeof out);
		CU_ASSERT_EQUAL(rc, 1);
		if (!strstr(out, cases[i].expect)) {
			fprintf(stderr, "case %zu: expected \"%s\" in: %s\n", i, cases[i].expect,
				out);
			CU_FAIL("config error text");
		}
	}
	CU_ASSERT_EQUAL(
		check_config("database: dbname=x\nexecservers: [ws://h:1]\n", out, sizeof out), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "test is successful"));
	CU_ASSERT_EQUAL(check_config("database: dbname=x\nexecservers: [ws://h:1]\n"
				     "retryBackoff: fixed\nretryExitCodes: []\nservices:\n"
				     "  thumb: {maxAttempts: 1, retryExitCodes: [75, 69]}\n"
				     "  video: {retryDelaySec: 5, retryMaxDelaySec: 600, "
				     "retryBackoff: exponential}\n",
				     out, sizeof out),
			0);
}

/* ---- migrations ---- */

/* Migration 007 over version 6 while a session holds a lock on the
 * dispatcher table (a pg_dump, an open transaction that read it): its
 * ALTER waits 2 s at most and the migration fails, naming the lock
 * timeout, rather than queueing every dispatcher's beat and claim behind
 * it; once the session is gone it goes through.  Before, it waited for the
 * session (here until its idle_in_transaction_session_timeout of 6 s
 * ended it) and succeeded. */
static void test_migrate_lock_bounded(void)
{
	char out[2048];
	const char *args[] = { "--migrate", "-c", F.cfg[0], NULL };
	PGconn *dump = pgtest_connect(F.conninfo);
	long long t0;

	PQclear(pgtest_query(F.c,
			     "DELETE FROM execdispatch.schema_version WHERE version >= 7; "
			     "ALTER TABLE execdispatch.dispatcher DROP COLUMN claiming_nothing"));
	PQclear(pgtest_query(dump, "SET idle_in_transaction_session_timeout = '6s'; BEGIN; "
				   "SELECT count(*) FROM execdispatch.dispatcher"));
	t0 = harness_now_ms();
	CU_ASSERT_EQUAL(df_run_tool(out, sizeof out, args), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "lock timeout"));
	CU_ASSERT(harness_now_ms() - t0 < 5000);
	PQfinish(dump);
	CU_ASSERT_EQUAL(df_run_tool(out, sizeof out, args), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, migrated_from(7)));
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM information_schema.columns WHERE "
				   "table_schema = 'execdispatch' AND table_name = 'dispatcher' "
				   "AND column_name = 'claiming_nothing'"),
			1);
}

static void test_migrate_idempotent(void)
{
	char out[2048];
	const char *args[] = { "--migrate", "-c", F.cfg[0], NULL };

	/* df_start migrated once; again changes nothing */
	CU_ASSERT_EQUAL(df_run_tool(out, sizeof out, args), 0);
	char current[64];
	snprintf(current, sizeof current, "is current (version %d)", DISPATCH_SCHEMA_VERSION);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, current));
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.schema_version"),
			DISPATCH_SCHEMA_VERSION);
	/* the table's settings and the indexes */
	char buf[256];
	pgtest_text(F.c, buf, sizeof buf,
		    "SELECT array_to_string(reloptions, ',') FROM pg_class "
		    "WHERE oid = 'execdispatch.job'::regclass");
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "fillfactor=70"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "autovacuum_vacuum_scale_factor=0.02"));
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM pg_indexes WHERE schemaname = "
					"'execdispatch' AND tablename = 'job'"),
			6); /* 001's four, 004's, 008's one */
	/* a change of state is never heap-only: every full index takes an
	 * entry at each claim, start and finish; job_pkey is the only one */
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM pg_indexes WHERE schemaname = "
					"'execdispatch' AND tablename = 'job' AND indexdef "
					"NOT LIKE '%% WHERE %%'"),
			1);
	/* 004: the per-service claim's index, its filter and order exactly */
	pgtest_text(F.c, buf, sizeof buf,
		    "SELECT indexdef FROM pg_indexes WHERE schemaname = 'execdispatch' "
		    "AND indexname = 'job_claim_service'");
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "(service, priority DESC, id) WHERE (state = 'queued'"));
}

static void test_daemon_refuses_schema(void)
{
	char out[2048], cfg[300];
	FILE *f;

	/* a schema that was never migrated */
	snprintf(cfg, sizeof cfg, "%s/other.yml", F.dir);
	f = fopen(cfg, "w");
	fprintf(f, "database: \"%s\"\nexecservers: [ws://127.0.0.1:9]\nschema: other\n",
		F.conninfo);
	fclose(f);
	const char *run[] = { "-f", "-c", cfg, NULL };
	CU_ASSERT_EQUAL(df_run_tool(out, sizeof out, run), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "run execdispatch --migrate -c"));
	/* migrated, then a version this program does not know */
	const char *mig[] = { "--migrate", "-c", cfg, NULL };
	CU_ASSERT_EQUAL(df_run_tool(out, sizeof out, mig), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, migrated_from(1)));
	/* an older version: the daemon names --migrate, which upgrades it */
	PQclear(pgtest_query(
		F.c,
		"DELETE FROM other.schema_version WHERE version >= 3; "
		"DROP INDEX other.job_claim_service; ALTER TABLE other.job DROP COLUMN claims; "
		"ALTER TABLE other.job DROP COLUMN position_wanted_at, DROP COLUMN exec_position"));
	CU_ASSERT_EQUAL(df_run_tool(out, sizeof out, run), 1);
	char needs[96];
	snprintf(needs, sizeof needs,
		 "at version 2, this execdispatch needs %d: run execdispatch --migrate",
		 DISPATCH_SCHEMA_VERSION);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, needs));
	CU_ASSERT_EQUAL(df_run_tool(out, sizeof out, mig), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, migrated_from(3)));
	PQclear(pgtest_query(F.c,
			     "INSERT INTO other.schema_version VALUES (99, '099_future.sql')"));
	CU_ASSERT_EQUAL(df_run_tool(out, sizeof out, run), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "version 99, which this execdispatch does not know"));
	CU_ASSERT_EQUAL(df_run_tool(out, sizeof out, mig), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "newer than this execdispatch"));
	PQclear(pgtest_query(F.c, "DROP SCHEMA other CASCADE"));
}

/* Migration 005 upgrades a version 4 database with rows in flight: the
 * rows not finished start their claims at their attempts, finished rows
 * keep 0; applied a second time (its version row gone) it changes
 * nothing; a claim then counts on from there. */
static void test_migrate_claims_upgrade(void)
{
	char out[2048], cfg[300], buf[256];
	FILE *f;

	snprintf(cfg, sizeof cfg, "%s/up.yml", F.dir);
	f = fopen(cfg, "w");
	fprintf(f, "database: \"%s\"\nexecservers: [ws://127.0.0.1:9]\nschema: up\n", F.conninfo);
	fclose(f);
	const char *mig[] = { "--migrate", "-c", cfg, NULL };
	CU_ASSERT_EQUAL(df_run_tool(out, sizeof out, mig), 0);
	/* back to version 4, with a queued, a claimed, a running and a done row */
	PQclear(pgtest_query(
		F.c, "DELETE FROM up.schema_version WHERE version >= 5; "
		     "ALTER TABLE up.job DROP COLUMN claims; "
		     "INSERT INTO up.job (service, job, state, attempts, runner_instance) VALUES "
		     "('work', '{\"command\": \"true\"}', 'queued', 1, NULL), "
		     "('work', '{\"command\": \"true\"}', 'claimed', 2, 'x'), "
		     "('work', '{\"command\": \"true\"}', 'running', 1, 'x'), "
		     "('work', '{\"command\": \"true\"}', 'done', 1, 'x')"));
	CU_ASSERT_EQUAL(df_run_tool(out, sizeof out, mig), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, migrated_from(5)));
	static const char rows[] = "SELECT string_agg(state || '/' || attempts || '/' || claims, "
				   "' ' ORDER BY id) FROM up.job";
	CU_ASSERT_STRING_EQUAL(pgtest_text(F.c, buf, sizeof buf, rows),
			       "queued/1/1 claimed/2/2 running/1/1 done/1/0");
	/* 005 once more over its own result */
	PQclear(pgtest_query(F.c, "DELETE FROM up.schema_version WHERE version >= 5"));
	CU_ASSERT_EQUAL(df_run_tool(out, sizeof out, mig), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, migrated_from(5)));
	CU_ASSERT_STRING_EQUAL(pgtest_text(F.c, buf, sizeof buf, rows),
			       "queued/1/1 claimed/2/2 running/1/1 done/1/0");
	/* the daemon's claim counts on: attempts 2, claims 2 */
	char *claim = dq_expand(DQ_CLAIM, "up");
	const char *p[6] = { "me", "10", "{}", "false", "-1000", TOKEN };
	alive_in("up", "me");
	PGresult *r = PQexecParams(F.c, claim, 6, NULL, p, NULL, NULL, 0);
	CU_ASSERT_EQUAL(PQntuples(r), 1);
	if (PQntuples(r) == 1) {
		CU_ASSERT_STRING_EQUAL(PQgetvalue(r, 0, 1), "2");
		CU_ASSERT_STRING_EQUAL(PQgetvalue(r, 0, 5), "2");
	}
	PQclear(r);
	free(claim);
	PQclear(pgtest_query(F.c, "DROP SCHEMA up CASCADE"));
}

/* The longest schema the configuration takes still has a notification
 * channel PostgreSQL accepts: a submit fires migration 002's trigger. */
static void test_longest_schema(void)
{
	static const char schema[] = "s2345678901234567890123456789012345678901234567890123456";
	char out[2048], cfg[300];
	FILE *f;

	CU_ASSERT_EQUAL(strlen(schema), 56);
	snprintf(cfg, sizeof cfg, "%s/long.yml", F.dir);
	f = fopen(cfg, "w");
	fprintf(f, "database: \"%s\"\nexecservers: [ws://127.0.0.1:9]\nschema: %s\n", F.conninfo,
		schema);
	fclose(f);
	const char *mig[] = { "--migrate", "-c", cfg, NULL };
	CU_ASSERT_EQUAL(df_run_tool(out, sizeof out, mig), 0);
	CU_ASSERT(pgtest_int(F.c, "SELECT %s.submit('work', '{\"command\": \"true\"}')", schema) >
		  0);
	PQclear(pgtest_query(F.c, "DROP SCHEMA %s CASCADE", schema));
}

/* ---- the SQL API ---- */

static void expect_error(const char *sql, const char *text)
{
	PGresult *r = PQexec(F.c, sql);
	CU_ASSERT_EQUAL(PQresultStatus(r), PGRES_FATAL_ERROR);
	if (!strstr(PQresultErrorMessage(r), text)) {
		fprintf(stderr, "%s: expected \"%s\", got %s", sql, text, PQresultErrorMessage(r));
		CU_FAIL("error text");
	}
	PQclear(r);
}

static void test_sql_api(void)
{
	char buf[256];
	long long a, b, c;

	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	expect_error("SELECT execdispatch.submit('work', '{\"command\":\"true\"}', 1001)",
		     "priority must be between -1000 and 1000");
	expect_error("SELECT execdispatch.submit('no such', '{\"command\":\"true\"}')",
		     "service must be 1 to 64");
	expect_error("SELECT execdispatch.submit('work', '{\"args\":[]}')", "string \"command\"");
	expect_error("SELECT execdispatch.submit('work', '[1]')", "string \"command\"");
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job"), 0);

	a = df_submit(&F, "{\"command\":\"true\"}", 0);
	b = df_submit(&F, "{\"command\":\"true\"}", 0);
	c = df_submit(&F, "{\"command\":\"true\"}", 2);
	CU_ASSERT(a > 0 && b > a && c > b);
	/* claim order is priority then id: c, a, b */
	pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.position(%lld)::text", b);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"ahead\": 2"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"state\": \"queued\""));
	pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.position(%lld)::text", c);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"ahead\": 0"));
	pgtest_text(F.c, buf, sizeof buf,
		    "SELECT coalesce(execdispatch.position(-5)::text, 'null')");
	CU_ASSERT_STRING_EQUAL(buf, "null");
	/* why a queued row waits (migration 007), from the dispatcher rows */
	static const char waiting[] = "SELECT execdispatch.position(%lld)->>'waiting'";
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.dispatcher"));
	CU_ASSERT_STRING_EQUAL(pgtest_text(F.c, buf, sizeof buf, waiting, b),
			       "no dispatcher is running");
	PQclear(pgtest_query(F.c,
			     "INSERT INTO execdispatch.dispatcher (instance, host, pid, "
			     "claiming_nothing) VALUES ('w2', 'h', 2, 'stopping'), ('w1', 'h', "
			     "1, 'no execserver connected (ws://h:1: 401, the authToken was "
			     "refused)')"));
	CU_ASSERT_STRING_EQUAL(pgtest_text(F.c, buf, sizeof buf, waiting, b),
			       "no dispatcher claims: w1: no execserver connected (ws://h:1: 401, "
			       "the authToken was refused); w2: stopping");
	PQclear(pgtest_query(F.c, "INSERT INTO execdispatch.dispatcher (instance, host, pid) "
				  "VALUES ('w3', 'h', 3)"));
	CU_ASSERT_STRING_EQUAL(pgtest_text(F.c, buf, sizeof buf, waiting, b), "its turn");
	PQclear(pgtest_query(F.c,
			     "UPDATE execdispatch.job SET start_after = now() + interval "
			     "'1 hour' WHERE id = %lld",
			     b));
	CU_ASSERT_PTR_NOT_NULL(
		strstr(pgtest_text(F.c, buf, sizeof buf, waiting, b), "not before "));
	PQclear(pgtest_query(F.c,
			     "DELETE FROM execdispatch.dispatcher; UPDATE execdispatch.job "
			     "SET start_after = now() WHERE id = %lld",
			     b));

	/* cancel: queued -> cancelled; again and unknown -> not_found_or_finished */
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.cancel(%lld)", a),
		"cancelled");
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.cancel(%lld)", a),
		"not_found_or_finished");
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.cancel(987654)"),
		"not_found_or_finished");
	/* held -> requested; a finished row keeps its outcome */
	PQclear(pgtest_query(F.c,
			     "UPDATE execdispatch.job SET state = 'running', "
			     "runner_instance = 'x', attempts = 1 WHERE id = %lld",
			     b));
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.cancel(%lld)", b),
		"requested");
	PQclear(pgtest_query(F.c, "UPDATE execdispatch.job SET state = 'done' WHERE id = %lld", c));
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.cancel(%lld)", c),
		"not_found_or_finished");
	CU_ASSERT_STRING_EQUAL(pgtest_text(F.c, buf, sizeof buf,
					   "SELECT state FROM execdispatch.job "
					   "WHERE id = %lld",
					   c),
			       "done");
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
}

/* A payload of 1044480 + extra bytes as JSON text, as an SQL expression. */
static const char *capped(char *buf, size_t len, int extra)
{
	snprintf(buf, len,
		 "jsonb_build_object('command', 'true', 'pad', repeat('x', 1044480 + %d - "
		 "octet_length(jsonb_build_object('command', 'true', 'pad', '')::text)))",
		 extra);
	return buf;
}

/* The payload cap (migration 006, docs/dispatch.md "Payload size"):
 * submit() takes a payload of exactly 1044480 bytes as JSON text and
 * refuses one byte more with its documented error, inserting nothing;
 * any other INSERT or UPDATE of a row not finished that sets its payload
 * meets the trigger job_payload_size, and so does a finished row brought
 * back; the updates of the dispatchers' hot path (claim, start, finish),
 * which leave the payload as it is, never run it. */
static void test_payload_cap(void)
{
	char e[300], sql[512];
	PGresult *r;

	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	snprintf(sql, sizeof sql, "SELECT execdispatch.submit('work', %s)", capped(e, sizeof e, 0));
	r = PQexec(F.c, sql);
	CU_ASSERT_EQUAL(PQresultStatus(r), PGRES_TUPLES_OK);
	PQclear(r);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT octet_length(job::text) FROM execdispatch.job"),
			1044480);
	snprintf(sql, sizeof sql, "SELECT execdispatch.submit('work', %s)", capped(e, sizeof e, 1));
	r = PQexec(F.c, sql);
	CU_ASSERT_EQUAL(PQresultStatus(r), PGRES_FATAL_ERROR);
	CU_ASSERT_STRING_EQUAL(PQresultErrorField(r, PG_DIAG_SQLSTATE), "22023");
	CU_ASSERT_PTR_NOT_NULL(
		strstr(PQresultErrorMessage(r),
		       "submit: job is 1044481 bytes as JSON text, more than 1044480 "
		       "(docs/dispatch.md, \"Payload size\")"));
	PQclear(r);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job"), 1);
	/* past submit(): the CHECK, for a new row and for a queued row's update */
	snprintf(sql, sizeof sql, "INSERT INTO execdispatch.job (service, job) VALUES ('work', %s)",
		 capped(e, sizeof e, 1));
	r = PQexec(F.c, sql);
	CU_ASSERT_STRING_EQUAL(PQresultErrorField(r, PG_DIAG_SQLSTATE), "23514");
	CU_ASSERT_PTR_NOT_NULL(strstr(PQresultErrorMessage(r), "job_payload_size"));
	PQclear(r);
	r = PQexec(F.c, "UPDATE execdispatch.job SET job = job || '{\"more\": 1}'");
	CU_ASSERT_STRING_EQUAL(PQresultErrorField(r, PG_DIAG_SQLSTATE), "23514");
	CU_ASSERT_PTR_NOT_NULL(strstr(PQresultErrorMessage(r), "job_payload_size"));
	PQclear(r);
	r = PQexec(F.c, "INSERT INTO execdispatch.job (service, job) VALUES ('work', '[1]')");
	CU_ASSERT_STRING_EQUAL(PQresultErrorField(r, PG_DIAG_SQLSTATE), "23514");
	CU_ASSERT_PTR_NOT_NULL(strstr(PQresultErrorMessage(r), "job_payload"));
	PQclear(r);
	/* the hot path's updates do not run the check (nor read the payload) */
	PQclear(pgtest_query(
		F.c, "BEGIN; SET LOCAL track_functions = 'pl'; "
		     "UPDATE execdispatch.job SET state = 'claimed', runner_instance = 'x', "
		     "attempts = 1, claims = 1; "
		     "UPDATE execdispatch.job SET state = 'running', started_at = now(); "
		     "UPDATE execdispatch.job SET state = 'done', finished_at = now()"));
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT coalesce(pg_stat_get_xact_function_calls("
					"'execdispatch.job_payload_size'::regproc), 0)"),
			0);
	PQclear(pgtest_query(F.c, "COMMIT"));
	/* a finished row over the cap (finished before 006) brought back */
	PQclear(pgtest_query(F.c, "ALTER TABLE execdispatch.job DISABLE TRIGGER job_payload_size; "
				  "UPDATE execdispatch.job SET job = job || '{\"more\": 1}'; "
				  "ALTER TABLE execdispatch.job ENABLE TRIGGER job_payload_size"));
	r = PQexec(F.c, "UPDATE execdispatch.job SET state = 'queued', runner_instance = NULL");
	CU_ASSERT_STRING_EQUAL(PQresultErrorField(r, PG_DIAG_SQLSTATE), "23514");
	CU_ASSERT_PTR_NOT_NULL(strstr(PQresultErrorMessage(r), "job_payload_size"));
	PQclear(r);
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
}

/* Migration 006 over a version 5 database holding payloads over the cap:
 * the rows not finished end failed, bad_job, naming their size; finished
 * and small rows stay as they were; applied again, nothing changes. */
static void test_migrate_payload_cap(void)
{
	char out[2048], cfg[300], buf[512];
	FILE *f;

	snprintf(cfg, sizeof cfg, "%s/cap.yml", F.dir);
	f = fopen(cfg, "w");
	fprintf(f, "database: \"%s\"\nexecservers: [ws://127.0.0.1:9]\nschema: cap\n", F.conninfo);
	fclose(f);
	const char *mig[] = { "--migrate", "-c", cfg, NULL };
	CU_ASSERT_EQUAL(df_run_tool(out, sizeof out, mig), 0);
	PQclear(pgtest_query(
		F.c,
		"DELETE FROM cap.schema_version WHERE version >= 6; "
		"DROP TRIGGER job_payload_size ON cap.job; "
		"INSERT INTO cap.job (service, job, state, attempts, runner_instance) "
		"SELECT 'work', jsonb_build_object('command', 'true', 'pad', repeat('x', n)), s, "
		"1, CASE WHEN s IN ('queued') THEN NULL ELSE 'x' END FROM (VALUES "
		"(2000000, 'queued'), (2000000, 'running'), (2000000, 'done'), (10, 'queued')) "
		"AS v(n, s)"));
	CU_ASSERT_EQUAL(df_run_tool(out, sizeof out, mig), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, migrated_from(6)));
	static const char rows[] =
		"SELECT string_agg(state || '/' || coalesce(error, '-'), ' | ' ORDER BY id) "
		"FROM cap.job";
	static const char want[] =
		"failed/bad_job: the payload is 2000030 bytes as JSON text, more than 1044480 "
		"(migration 006) | failed/bad_job: the payload is 2000030 bytes as JSON text, "
		"more than 1044480 (migration 006) | done/- | queued/-";
	if (strcmp(pgtest_text(F.c, buf, sizeof buf, rows), want) != 0)
		fprintf(stderr, "rows after 006: %s\n", buf);
	CU_ASSERT_STRING_EQUAL(buf, want);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM cap.job WHERE state = 'failed' "
					"AND finished_at IS NOT NULL"),
			2);
	PQclear(pgtest_query(F.c, "DELETE FROM cap.schema_version WHERE version >= 6"));
	CU_ASSERT_EQUAL(df_run_tool(out, sizeof out, mig), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, migrated_from(6)));
	CU_ASSERT_STRING_EQUAL(pgtest_text(F.c, buf, sizeof buf, rows), want);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM pg_trigger WHERE tgname LIKE "
					"'job_payload_size%%' AND tgrelid = 'cap.job'::regclass"),
			2);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM pg_constraint WHERE conname LIKE "
					"'job_payload%%' AND conrelid = 'cap.job'::regclass"),
			0);
	PQclear(pgtest_query(F.c, "DROP SCHEMA cap CASCADE"));
}

/* ---- the claim's plan ---- */

static char *q(const char *text)
{
	return dq_expand(text, "execdispatch");
}

static void test_claim_uses_index(void)
{
	char *claim = q(DQ_CLAIM), sql[4096];
	PGresult *r;
	int found = 0, sorted = 0;

	for (int i = 0; i < 50; i++)
		df_submit(&F, "{\"command\":\"true\"}", i % 3);
	PQclear(pgtest_query(F.c, "ANALYZE execdispatch.job"));
	PQclear(pgtest_query(F.c, "BEGIN; SET LOCAL enable_seqscan = off"));
	/* the claim's selection, as the planner sees it inside the statement */
	snprintf(sql, sizeof sql, "EXPLAIN %s", claim);
	const char *params[6] = { "x", "10", "{}", "false", "-1000", TOKEN };
	r = PQexecParams(F.c, sql, 6, NULL, params, NULL, NULL, 0);
	CU_ASSERT_EQUAL(PQresultStatus(r), PGRES_TUPLES_OK);
	for (int i = 0; i < PQntuples(r); i++) {
		found |= strstr(PQgetvalue(r, i, 0), "Index Scan using job_claim") != NULL;
		sorted |= strstr(PQgetvalue(r, i, 0), "Sort") != NULL;
	}
	CU_ASSERT(found);
	CU_ASSERT(!sorted); /* the index gives the order: no sort step */
	PQclear(r);
	PQclear(pgtest_query(F.c, "ROLLBACK"));
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	free(claim);
}

/* ---- forced races ---- */

struct sess {
	PGconn *c;
};

static PGresult *run_stmt(PGconn *c, const char *text, int n, const char *const *params)
{
	char *sql = q(text);
	PGresult *r = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);
	free(sql);
	if (PQresultStatus(r) != PGRES_TUPLES_OK && PQresultStatus(r) != PGRES_COMMAND_OK)
		fprintf(stderr, "statement failed: %s", PQresultErrorMessage(r));
	return r;
}

/* How many rows the statement answered. */
static int rows_of(PGconn *c, const char *text, int n, const char *const *params)
{
	PGresult *r = run_stmt(c, text, n, params);
	int rows = PQntuples(r);

	PQclear(r);
	return rows;
}

/* Sends the statement and returns once it waits for a lock (seen from
 * the test's third session in pg_stat_activity). */
static void send_blocked(PGconn *c, const char *text, int n, const char *const *params)
{
	char *sql = q(text);
	int pid = PQbackendPID(c);

	CU_ASSERT_EQUAL(PQsendQueryParams(c, sql, n, NULL, params, NULL, NULL, 0), 1);
	free(sql);
	for (int i = 0; i < 500; i++) {
		if (pgtest_int(F.c,
			       "SELECT count(*) FROM pg_stat_activity WHERE pid = %d AND "
			       "wait_event_type = 'Lock'",
			       pid) == 1)
			return;
		harness_sleep_ms(10);
	}
	CU_FAIL("the second session never waited for the first one's lock");
}

static PGresult *collect(PGconn *c)
{
	PGresult *r = PQgetResult(c), *extra;
	while ((extra = PQgetResult(c)))
		PQclear(extra);
	return r;
}

/* The dispatcher row of instance (host h, pid, this file's token), its
 * heartbeat an hour old. */
static void silent_row(const char *instance, int pid)
{
	PQclear(pgtest_query(
		F.c,
		"INSERT INTO execdispatch.dispatcher (instance, host, pid, started_at, "
		"heartbeat_at) VALUES ('%s', 'h', %d, '" TOKEN "', now() - interval "
		"'1 hour')",
		instance, pid));
}

/* silent_row, and a row it holds in state: the row's id. */
static long long silent_holder(const char *instance, int pid, const char *state)
{
	long long id;

	silent_row(instance, pid);
	id = df_submit(&F, "{\"command\":\"true\"}", 0);
	PQclear(pgtest_query(F.c,
			     "UPDATE execdispatch.job SET state = '%s', runner_instance = '%s', "
			     "attempts = 1, claims = 1 WHERE id = %lld",
			     state, instance, id));
	return id;
}

/* A row held by dispatcher "stale" (heartbeat an hour old) and the
 * dispatcher rows of "live" and "stale". */
static long long held_row(const char *state)
{
	PQclear(pgtest_query(F.c,
			     "DELETE FROM execdispatch.job; DELETE FROM "
			     "execdispatch.dispatcher; INSERT INTO execdispatch.dispatcher "
			     "(instance, host, pid, heartbeat_at) VALUES ('live', 'h', 2, now())"));
	return silent_holder("stale", 1, state);
}

static const char *rescue_params[4] = { "live", "30", "3", "{}" };

/* A row's claims (an integer column) as text, with its NUL: what
 * claim_one writes and finish_params takes. */
#define CLAIM_TEXT sizeof "-2147483648"

/* The parameters of DQ_FINISH for one row under its claim (the row's
 * claims, at most CLAIM_TEXT with its NUL): "done" with a receipt. */
struct finish_args {
	char ids[sizeof "{-9223372036854775808}"], claim[CLAIM_TEXT + 2];
	const char *p[8];
};

static void finish_params(struct finish_args *f, long long id, const char *inst, const char *claim)
{
	snprintf(f->ids, sizeof f->ids, "{%lld}", id);
	snprintf(f->claim, sizeof f->claim, "{%s}", claim);
	f->p[0] = inst;
	f->p[1] = f->ids;
	f->p[2] = f->claim;
	f->p[3] = "{done}";
	f->p[4] = "{0}";
	f->p[5] = "{0}";
	f->p[6] = "{NULL}";
	f->p[7] = "{\"{\\\"exit_code\\\": 0}\"}";
}

static char *state_of(long long id, char *buf)
{
	return (char *)pgtest_text(F.c, buf, 64,
				   "SELECT state || '/' || attempts FROM "
				   "execdispatch.job WHERE id = %lld",
				   id);
}

static void test_race_claim_rescue(void)
{
	struct sess a = { pgtest_connect(F.conninfo) }, b = { pgtest_connect(F.conninfo) };
	long long id = held_row("running");
	char buf[64];
	const char *claim[6] = { "third", "10", "{}", "false", "-1000", TOKEN };
	PGresult *r;

	alive("third");
	/* the rescue has requeued the row but not committed: a claim sees
	 * nothing to take (the row is locked, and claimed in its snapshot) */
	PQclear(pgtest_query(a.c, "BEGIN"));
	r = run_stmt(a.c, DQ_RESCUE, 4, rescue_params);
	CU_ASSERT_STRING_EQUAL(PQgetvalue(r, 0, 0), "1");
	PQclear(r);
	CU_ASSERT_EQUAL(rows_of(b.c, DQ_CLAIM, 6, claim), 0);
	PQclear(pgtest_query(a.c, "COMMIT"));
	/* after the commit it is claimed exactly once, as the second attempt */
	CU_ASSERT_EQUAL(rows_of(b.c, DQ_CLAIM, 6, claim), 1);
	CU_ASSERT_EQUAL(rows_of(a.c, DQ_CLAIM, 6, claim), 0);
	CU_ASSERT_STRING_EQUAL(state_of(id, buf), "claimed/2");
	/* the stale dispatcher's late finish changes nothing */
	struct finish_args fa;
	finish_params(&fa, id, "stale", "1");
	CU_ASSERT_EQUAL(rows_of(a.c, DQ_FINISH, 8, fa.p), 0);
	CU_ASSERT_STRING_EQUAL(state_of(id, buf), "claimed/2");
	PQfinish(a.c);
	PQfinish(b.c);
}

/* The rescue's maxAttempts per service ($4, the services: block): two
 * rows at their first attempt under the silent dispatcher; the one of
 * service "one" (maxAttempts 1) fails with dispatcher_lost, the other
 * takes the top level's 3 and is queued again. */
static void test_rescue_service_limit(void)
{
	long long a = held_row("running"), b = df_submit(&F, "{\"command\":\"true\"}", 0);
	const char *params[4] = { "live", "30", "3", "{\"one\": 1}" };
	char buf[64];
	PGresult *r;

	PQclear(pgtest_query(F.c,
			     "UPDATE execdispatch.job SET service = 'one', state = 'running', "
			     "runner_instance = 'stale', attempts = 1, claims = 1 WHERE id = %lld",
			     b));
	r = run_stmt(F.c, DQ_RESCUE, 4, params);
	CU_ASSERT_STRING_EQUAL(PQgetvalue(r, 0, 0), "1");
	CU_ASSERT_STRING_EQUAL(PQgetvalue(r, 0, 1), "1");
	PQclear(r);
	CU_ASSERT_STRING_EQUAL(state_of(a, buf), "queued/1");
	CU_ASSERT_STRING_EQUAL(state_of(b, buf), "failed/1");
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, 64, "SELECT error FROM execdispatch.job WHERE id = %lld", b),
		"dispatcher_lost");
}

/* One side of a forced race on a row held by the stale dispatcher: the
 * rescue (DQ_RESCUE of a live dispatcher), the stale dispatcher's late
 * finish, or a user's cancel. */
enum side {
	RESCUE,
	FINISH,
	CANCEL
};
static const char *const side_name[] = { "rescue", "finish", "cancel" };

/* Runs side s on row id in session c; blocked: sent only, and returns
 * NULL once it waits for a lock (its result is for collect). */
static PGresult *run_side(enum side s, PGconn *c, long long id, int blocked)
{
	struct finish_args fa;
	char cancel[64];
	const char *text = DQ_RESCUE;
	const char *const *params = rescue_params;
	int n = 4;

	if (s == FINISH) {
		finish_params(&fa, id, "stale", "1");
		text = DQ_FINISH;
		params = fa.p;
		n = 8;
	} else if (s == CANCEL) {
		snprintf(cancel, sizeof cancel, "SELECT @schema@.cancel(%lld)", id);
		text = cancel;
		params = NULL;
		n = 0;
	}
	if (!blocked)
		return run_stmt(c, text, n, params);
	send_blocked(c, text, n, params);
	return NULL;
}

/* What side s answered, in words: the rescue "requeued N, failed M", the
 * finish "finished" or "nothing", the cancel its answer.  Clears r. */
static const char *said(enum side s, PGresult *r, char *buf, size_t len)
{
	int rows = PQntuples(r);

	if (s == FINISH)
		snprintf(buf, len, "%s", rows == 1 ? "finished" : rows == 0 ? "nothing" : "rows");
	else if (rows != 1)
		snprintf(buf, len, "%d rows", rows);
	else if (s == RESCUE && atoi(PQgetvalue(r, 0, 2)) == 0)
		snprintf(buf, len, "requeued %s, failed %s", PQgetvalue(r, 0, 0),
			 PQgetvalue(r, 0, 1));
	else if (s == RESCUE)
		snprintf(buf, len, "requeued %s, failed %s, put off %s", PQgetvalue(r, 0, 0),
			 PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2));
	else
		snprintf(buf, len, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	return buf;
}

/* got must be want; says which race and what when not. */
static void expect_race(enum side first, enum side second, const char *what, const char *got,
			const char *want)
{
	if (strcmp(got, want) != 0)
		fprintf(stderr, "\n  %s then %s: %s \"%s\", expected \"%s\"\n", side_name[first],
			side_name[second], what, got, want);
	CU_ASSERT_STRING_EQUAL(got, want);
}

/* first runs in one session inside a transaction and answers first_said;
 * second, from another session, waits for its lock and after the commit
 * answers second_said; the row ends as state ("state/attempts").  A
 * rescue second never waits: while the lock is held it puts the silent
 * dispatcher off whole (its row and jobs untouched), and the next one,
 * after the commit, answers second_said. */
static void race(enum side first, const char *first_said, enum side second, const char *second_said,
		 const char *state)
{
	PGconn *a = pgtest_connect(F.conninfo), *b = pgtest_connect(F.conninfo);
	long long id = held_row("running");
	char buf[64];

	PQclear(pgtest_query(a, "BEGIN"));
	expect_race(first, second, "the first said",
		    said(first, run_side(first, a, id, 0), buf, sizeof buf), first_said);
	if (second == RESCUE) {
		expect_race(first, second, "the second said while locked",
			    said(second, run_side(second, b, id, 0), buf, sizeof buf),
			    "requeued 0, failed 0, put off 1");
		CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.dispatcher "
						"WHERE instance = 'stale'"),
				1);
		PQclear(pgtest_query(a, "COMMIT"));
		expect_race(first, second, "the second said after the commit",
			    said(second, run_side(second, b, id, 0), buf, sizeof buf), second_said);
	} else {
		run_side(second, b, id, 1);
		PQclear(pgtest_query(a, "COMMIT"));
		expect_race(first, second, "the second said",
			    said(second, collect(b), buf, sizeof buf), second_said);
	}
	expect_race(first, second, "the row is", state_of(id, buf), state);
	PQfinish(a);
	PQfinish(b);
}

static void test_race_finish_rescue(void)
{
	char buf[64];
	PGresult *r;
	long long id;

	/* finish first: the rescue puts the stale dispatcher off while the
	 * row is locked, then finds the row done */
	race(FINISH, "finished", RESCUE, "requeued 0, failed 0", "done/1");
	/* rescue first: the finish waits, then changes nothing */
	race(RESCUE, "requeued 1, failed 0", FINISH, "nothing", "queued/1");

	/* out of attempts: the rescue fails the row with dispatcher_lost */
	id = held_row("running");
	PQclear(pgtest_query(F.c, "UPDATE execdispatch.job SET attempts = 3 WHERE id = %lld", id));
	r = run_stmt(F.c, DQ_RESCUE, 4, rescue_params);
	CU_ASSERT_STRING_EQUAL(PQgetvalue(r, 0, 1), "1");
	PQclear(r);
	CU_ASSERT_STRING_EQUAL(pgtest_text(F.c, buf, 64,
					   "SELECT state || '/' || error FROM "
					   "execdispatch.job WHERE id = %lld",
					   id),
			       "failed/dispatcher_lost");
}

static void test_race_cancel_finish(void)
{
	/* cancel first: the finish waits, then changes nothing */
	race(CANCEL, "requested", FINISH, "nothing", "cancelled/1");
	/* finish first: the cancel waits, then answers not_found_or_finished */
	race(FINISH, "finished", CANCEL, "not_found_or_finished", "done/1");
}

static void test_race_cancel_rescue(void)
{
	/* cancel first: the rescue puts the stale dispatcher off while the
	 * row is locked, then leaves the row cancelled */
	race(CANCEL, "requested", RESCUE, "requeued 0, failed 0", "cancelled/1");
	/* rescue first: the cancel waits, then cancels the requeued row */
	race(RESCUE, "requeued 1, failed 0", CANCEL, "cancelled", "cancelled/1");
}

static void test_race_claim_claim(void)
{
	struct sess a = { pgtest_connect(F.conninfo) }, b = { pgtest_connect(F.conninfo) };
	const char *ca[6] = { "one", "6", "{}", "false", "-1000", TOKEN },
		   *cb[6] = { "two", "100", "{}", "false", "-1000", TOKEN };

	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	alive("one");
	alive("two");
	for (int i = 0; i < 10; i++)
		df_submit(&F, "{\"command\":\"true\"}", 0);
	/* the first claim's rows stay locked: the second takes the rest at
	 * once (SKIP LOCKED), and no row is claimed twice */
	PQclear(pgtest_query(a.c, "BEGIN"));
	CU_ASSERT_EQUAL(rows_of(a.c, DQ_CLAIM, 6, ca), 6);
	CU_ASSERT_EQUAL(rows_of(b.c, DQ_CLAIM, 6, cb), 4);
	PQclear(pgtest_query(a.c, "COMMIT"));
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE state = 'claimed' "
				   "AND attempts = 1"),
			10);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE "
					"runner_instance = 'one'"),
			6);
	PQfinish(a.c);
	PQfinish(b.c);
}

/* "no slot" for the claim of row id by "me" whose claims is claim: the
 * requeue without counting the attempt, due at once. */
static void no_slot_params(struct finish_args *f, long long id, const char *claim)
{
	finish_params(f, id, "me", claim);
	f->p[3] = "{queued}";
	f->p[4] = "{1}";
	f->p[6] = "{no_slot}";
	f->p[7] = "{NULL}";
}

/* Claims row id as "me" (the only row queued): its claims, also as text
 * into claim (CLAIM_TEXT bytes), or -1. */
static int claim_one(long long id, char *claim, size_t len)
{
	const char *p[6] = { "me", "10", "{}", "false", "-1000", TOKEN };
	PGresult *r;
	int ok;

	alive("me");
	r = run_stmt(F.c, DQ_CLAIM, 6, p);
	ok = PQntuples(r) == 1 && strtoll(PQgetvalue(r, 0, 0), NULL, 10) == id;

	snprintf(claim, len, "%s", ok ? PQgetvalue(r, 0, 5) : "-1");
	PQclear(r);
	return ok ? atoi(claim) : -1;
}

/* The daemon's requeue of what its instance holds under no claim it
 * knows is two statements: a look (DQ_FIND_OWN, DQ_FIND_LOST) for the
 * (id, claims) pairs, then DQ_REQUEUE_CLAIMS of exactly those. */
struct pairs {
	char ids[256], claims[256];
};

/* The look: its pairs into p (as array literals); how many it found. */
static int look(PGconn *c, const char *text, int n, const char *const *params, struct pairs *p)
{
	PGresult *r = run_stmt(c, text, n, params);
	size_t li = 0, lc = 0;
	int rows = PQntuples(r);

	li += (size_t)snprintf(p->ids, sizeof p->ids, "{");
	lc += (size_t)snprintf(p->claims, sizeof p->claims, "{");
	for (int i = 0; i < rows; i++) {
		li += (size_t)snprintf(p->ids + li, sizeof p->ids - li, "%s%s", i ? "," : "",
				       PQgetvalue(r, i, 0));
		lc += (size_t)snprintf(p->claims + lc, sizeof p->claims - lc, "%s%s", i ? "," : "",
				       PQgetvalue(r, i, 1));
	}
	snprintf(p->ids + li, sizeof p->ids - li, "}");
	snprintf(p->claims + lc, sizeof p->claims - lc, "}");
	PQclear(r);
	return rows;
}

/* The requeue of the pairs p by instance inst of life token: rows
 * requeued (or failed). */
static int requeue(PGconn *c, const char *inst, const struct pairs *p, const char *token)
{
	const char *params[6] = { inst, p->ids, p->claims, "3", token, "{}" };

	return rows_of(c, DQ_REQUEUE_CLAIMS, 6, params);
}

/* Both steps of the requeue of the rows an earlier life left. */
static int rescue_own(PGconn *c, const char *inst, const char *token)
{
	const char *params[2] = { inst, token };
	struct pairs p;

	look(c, DQ_FIND_OWN, 2, params, &p);
	return requeue(c, inst, &p, token);
}

/* Both steps of the sweep of lost claims, holding the claims (ids[],
 * claims[]) given. */
static int sweep_lost(PGconn *c, const char *inst, const char *ids, const char *claims,
		      const char *token)
{
	const char *params[4] = { inst, ids, claims, token };
	struct pairs p;

	look(c, DQ_FIND_LOST, 4, params, &p);
	return requeue(c, inst, &p, token);
}

/* started_at from the receipt's duration_ms (DQ_FINISH): the receipt is
 * the execserver's text, so a duration_ms that is not a number of ms from
 * 0 to about 31 years leaves started_at NULL and the outcome is written
 * with its receipt; before, the cast or the interval failed the whole
 * statement (a batch refused, the outcome then written without its
 * receipt). */
static void test_finish_duration(void)
{
	static const struct {
		const char *receipt, *started; /* started: finished_at - started_at, or NULL */
	} cases[] = {
		{ "{\"exit_code\": 0, \"duration_ms\": 1500}", "00:00:01.5" },
		{ "{\"exit_code\": 0, \"duration_ms\": \"soon\"}", NULL },
		{ "{\"exit_code\": 0, \"duration_ms\": -5}", NULL },
		{ "{\"exit_code\": 0, \"duration_ms\": 1e300}", NULL },
		{ "{\"exit_code\": 0, \"duration_ms\": 1e400}", NULL },
		{ "{\"exit_code\": 0, \"duration_ms\": null}", NULL },
		{ "{\"exit_code\": 0}", NULL },
	};
	char buf[128];

	PQclear(pgtest_query(F.c,
			     "DELETE FROM execdispatch.job; DELETE FROM execdispatch.dispatcher"));
	silent_row("me", 1);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct finish_args f;
		char arr[256], *o = arr;
		long long id = df_submit(&F, "{\"command\":\"true\"}", 0);

		PQclear(pgtest_query(
			F.c,
			"UPDATE execdispatch.job SET state = 'claimed', runner_instance "
			"= 'me', attempts = 1, claims = 1 WHERE id = %lld",
			id));
		finish_params(&f, id, "me", "1");
		*o++ = '{';
		*o++ = '"';
		for (const char *c = cases[i].receipt; *c; c++) {
			if (*c == '"' || *c == '\\')
				*o++ = '\\';
			*o++ = *c;
		}
		strcpy(o, "\"}");
		f.p[7] = arr;
		CU_ASSERT_EQUAL(rows_of(F.c, DQ_FINISH, 8, f.p), 1);
		pgtest_text(F.c, buf, sizeof buf,
			    "SELECT state || '/' || (receipt IS NOT NULL) || '/' || "
			    "coalesce((finished_at - started_at)::text, 'null') FROM "
			    "execdispatch.job WHERE id = %lld",
			    id);
		char want[64];
		snprintf(want, sizeof want, "done/true/%s",
			 cases[i].started ? cases[i].started : "null");
		if (strcmp(buf, want) != 0)
			fprintf(stderr, "receipt %s: %s, expected %s\n", cases[i].receipt, buf,
				want);
		CU_ASSERT_STRING_EQUAL(buf, want);
	}
	PQclear(pgtest_query(F.c,
			     "DELETE FROM execdispatch.job; DELETE FROM execdispatch.dispatcher"));
}

/* A "no slot" requeue whose reply was lost, then the same dispatcher's
 * next claim of the row before the requeue is written again (same
 * runner_instance, same attempts, since "no slot" gave the attempt back):
 * the second writing of the requeue must not touch the new claim (it
 * would requeue a row whose run goes on: the job would run twice); the
 * check whether the first writing landed must not take the new claim's
 * own outcome for it; and the sweep of claims lost with a connection
 * must not take the old claim's pending outcome for the new claim. */
static void test_lost_requeue_reclaimed(void)
{
	struct finish_args first, second;
	char c1[CLAIM_TEXT], c2[CLAIM_TEXT], ids[24], held[64], claims[64];
	long long id;

	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	id = df_submit(&F, "{\"command\":\"true\"}", 0);
	snprintf(ids, sizeof ids, "%lld", id);
	CU_ASSERT_EQUAL_FATAL(claim_one(id, c1, sizeof c1), 1);
	/* the requeue, whose reply is lost (the test ignores it) */
	no_slot_params(&first, id, c1);
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_FINISH, 8, first.p), 1);
	/* the same dispatcher claims the row again: the new claim runs */
	CU_ASSERT_EQUAL_FATAL(claim_one(id, c2, sizeof c2), 2);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT attempts FROM execdispatch.job WHERE id = %lld "
				   "AND state = 'claimed'",
				   id),
			1);
	/* the requeue written again: the new claim is not its claim */
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_FINISH, 8, first.p), 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id = %lld "
				   "AND state = 'claimed' AND runner_instance = 'me'",
				   id),
			1);
	/* the sweep after a reconnection, holding the first claim's outcome
	 * only (the new claim's result was lost too): the new claim is
	 * requeued, not left claimed for ever */
	snprintf(held, sizeof held, "{%s}", ids);
	snprintf(claims, sizeof claims, "{%s}", c1);
	CU_ASSERT_EQUAL(sweep_lost(F.c, "me", held, claims, TOKEN), 1);
	/* claimed again, and that claim ends "no slot" too: the row carries
	 * an outcome equal to the first claim's, but not under it */
	char c3[CLAIM_TEXT];
	CU_ASSERT_EQUAL_FATAL(claim_one(id, c3, sizeof c3), 3);
	no_slot_params(&second, id, c3);
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_FINISH, 8, second.p), 1);
	const char *land_first[6] = { ids, c1, "queued", "no_slot", NULL, "me" },
		   *land_third[6] = { ids, c3, "queued", "no_slot", NULL, "me" };
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_LANDED, 6, land_first), 0);
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_LANDED, 6, land_third), 1);
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
}

/* The sweep of lost claims and the requeue of the rows an
 * earlier life left each run on a connection that may be given up (a
 * stalled backend; the cancel may be lost), and its backend may still run
 * the statement later, after the dispatcher reconnected, did it again and
 * claimed anew under the same instance and token.  Such a late requeue
 * names the claims its look found: a new claim of the row (claims + 1)
 * is not among them, also when the late requeue waits for the new claim's
 * lock and rechecks after its commit.  A requeue of "every claimed row of
 * the instance not in my list" would requeue the new claim while its job
 * runs, and the job would run twice. */
static void test_late_requeue_misses_new_claim(void)
{
	PGconn *a = pgtest_connect(F.conninfo), *b = pgtest_connect(F.conninfo);
	const char *find[4] = { "me", "{}", "{}", TOKEN }, *own[2] = { "me", TOKEN };
	const char *claim[6] = { "me", "10", "{}", "false", "-1000", TOKEN };
	struct pairs late, now;
	char c1[16], buf[64];
	long long id;
	PGresult *r;

	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	id = df_submit(&F, "{\"command\":\"true\"}", 0);
	/* a claim whose result the lost connection took */
	CU_ASSERT_EQUAL_FATAL(claim_one(id, c1, sizeof c1), 1);
	/* the sweep on connection a: its look answered; its requeue given up
	 * before the backend ran it */
	CU_ASSERT_EQUAL(look(a, DQ_FIND_LOST, 4, find, &late), 1);
	/* reconnected (b): the sweep again, and a new claim of the row, both
	 * in flight when the late requeue comes: it sees the lost claim,
	 * waits for the row, and rechecks it after the commit */
	CU_ASSERT_EQUAL(look(b, DQ_FIND_LOST, 4, find, &now), 1);
	PQclear(pgtest_query(b, "BEGIN"));
	CU_ASSERT_EQUAL(requeue(b, "me", &now, TOKEN), 1);
	CU_ASSERT_EQUAL(rows_of(b, DQ_CLAIM, 6, claim), 1);
	const char *late_p[6] = { "me", late.ids, late.claims, "3", TOKEN, "{}" };
	send_blocked(a, DQ_REQUEUE_CLAIMS, 6, late_p);
	PQclear(pgtest_query(b, "COMMIT"));
	r = collect(a);
	CU_ASSERT_EQUAL(PQresultStatus(r), PGRES_TUPLES_OK);
	CU_ASSERT_EQUAL(PQntuples(r), 0);
	PQclear(r);
	CU_ASSERT_STRING_EQUAL(state_of(id, buf), "claimed/2");
	/* the same requeue later still, and a late look: nothing changes */
	CU_ASSERT_EQUAL(requeue(a, "me", &late, TOKEN), 0);
	CU_ASSERT_EQUAL(look(a, DQ_FIND_LOST, 4, find, &late), 1);
	CU_ASSERT_STRING_EQUAL(state_of(id, buf), "claimed/2");

	/* the requeue of the rows an earlier life left: its look answered on
	 * a, its requeue given up; done again on b, the row claimed anew;
	 * then a's requeue runs */
	CU_ASSERT_EQUAL(look(a, DQ_FIND_OWN, 2, own, &late), 1);
	CU_ASSERT_EQUAL(rescue_own(b, "me", TOKEN), 1);
	CU_ASSERT_STRING_EQUAL(state_of(id, buf), "queued/2");
	CU_ASSERT_EQUAL(rows_of(b, DQ_CLAIM, 6, claim), 1);
	CU_ASSERT_EQUAL(requeue(a, "me", &late, TOKEN), 0);
	CU_ASSERT_STRING_EQUAL(state_of(id, buf), "claimed/3");
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT claims FROM execdispatch.job WHERE id = %lld", id),
			3);
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	PQfinish(a);
	PQfinish(b);
}

/* The execserver's POSITION written under one claim is that claim's:
 * after the row is requeued (here "no slot"; a rescue alike) and claimed
 * again, position() answers "ahead": null until the new claim's holder
 * writes its own, not the figures of the claim before (maybe another
 * dispatcher's, at another execserver). */
static void test_position_of_new_claim(void)
{
	struct finish_args req;
	char c1[CLAIM_TEXT], c2[CLAIM_TEXT], ids[24], buf[512];
	long long id;

	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	id = df_submit(&F, "{\"command\":\"true\"}", 0);
	snprintf(ids, sizeof ids, "%lld", id);
	CU_ASSERT_EQUAL_FATAL(claim_one(id, c1, sizeof c1), 1);
	const char *pos[4] = { ids, "me", c1,
			       "{\"running\": 4, \"ahead\": 7, \"capacity\": 4, \"eta_ms\": 9000, "
			       "\"instance_id\": \"e1\"}" };
	PQclear(run_stmt(F.c, DQ_POSITION, 4, pos));
	pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.position(%lld)::text", id);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"ahead\": 7"));
	no_slot_params(&req, id, c1);
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_FINISH, 8, req.p), 1);
	CU_ASSERT_EQUAL_FATAL(claim_one(id, c2, sizeof c2), 2);
	pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.position(%lld)::text", id);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"ahead\": null"));
	CU_ASSERT_PTR_NULL(strstr(buf, "\"eta_ms\""));
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
}

/* Row locks held by another transaction (an application's, open after
 * cancel()): the start, the POSITION's write and the rescue never wait
 * for them, and each says what it left, so that the dispatcher does it
 * again once the lock is gone.  A statement that waited would fail here
 * (statement_timeout 1 s on the session that runs them). */
static void test_locked_rows_skipped(void)
{
	PGconn *other = pgtest_connect(F.conninfo);
	char c1[CLAIM_TEXT], ids[24], claims[24], buf[64];
	long long id;
	PGresult *r;

	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	id = df_submit(&F, "{\"command\":\"true\"}", 0);
	CU_ASSERT_EQUAL_FATAL(claim_one(id, c1, sizeof c1), 1);
	snprintf(ids, sizeof ids, "{%lld}", id);
	snprintf(claims, sizeof claims, "{%s}", c1);
	snprintf(buf, sizeof buf, "%lld", id);
	const char *start[3] = { "me", ids, claims },
		   *pos[4] = { buf, "me", c1, "{\"running\": 1, \"ahead\": 2}" };
	PQclear(pgtest_query(F.c, "SET statement_timeout = 1000"));
	PQclear(pgtest_query(other, "BEGIN"));
	PQclear(pgtest_query(other, "SELECT 1 FROM execdispatch.job WHERE id = %lld FOR UPDATE",
			     id));
	/* locked: the position not written, the row still ours */
	r = run_stmt(F.c, DQ_POSITION, 4, pos);
	CU_ASSERT_STRING_EQUAL(PQgetvalue(r, 0, 0), "0");
	CU_ASSERT_STRING_EQUAL(PQgetvalue(r, 0, 1), "1");
	PQclear(r);
	/* locked: not started, answered as still claimed (0) */
	r = run_stmt(F.c, DQ_START, 3, start);
	CU_ASSERT_EQUAL(PQntuples(r), 1);
	CU_ASSERT_STRING_EQUAL(PQgetvalue(r, 0, 1), "0");
	PQclear(r);
	CU_ASSERT_STRING_EQUAL(state_of(id, buf), "claimed/1");
	PQclear(pgtest_query(other, "COMMIT"));
	/* the lock gone: both done */
	snprintf(buf, sizeof buf, "%lld", id);
	r = run_stmt(F.c, DQ_POSITION, 4, pos);
	CU_ASSERT_STRING_EQUAL(PQgetvalue(r, 0, 0), "1");
	PQclear(r);
	r = run_stmt(F.c, DQ_START, 3, start);
	CU_ASSERT_EQUAL(PQntuples(r), 1);
	CU_ASSERT_STRING_EQUAL(PQgetvalue(r, 0, 1), "1");
	PQclear(r);
	CU_ASSERT_STRING_EQUAL(state_of(id, buf), "running/1");
	/* sent again (its reply lost): the row running under the same claim
	 * is answered as started, not as a claim lost */
	r = run_stmt(F.c, DQ_START, 3, start);
	CU_ASSERT_EQUAL(PQntuples(r), 1);
	CU_ASSERT_STRING_EQUAL(PQgetvalue(r, 0, 1), "1");
	PQclear(r);
	/* a row not ours, or of another claim: not answered at all */
	const char *theirs[3] = { "someone", ids, claims };
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_START, 3, theirs), 0);
	char later[24];
	snprintf(later, sizeof later, "{%lld}", atoll(c1) + 1);
	const char *other_claim[3] = { "me", ids, later };
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_START, 3, other_claim), 0);

	/* two silent dispatchers, one row of "stale" locked: "stale" is put
	 * off whole, "stale2" rescued */
	id = held_row("running");
	PQclear(pgtest_query(F.c,
			     "INSERT INTO execdispatch.dispatcher (instance, host, pid, "
			     "heartbeat_at) VALUES ('stale2', 'h', 3, now() - interval '1 hour')"));
	long long id2 = df_submit(&F, "{\"command\":\"true\"}", 0), id3;
	id3 = df_submit(&F, "{\"command\":\"true\"}", 0);
	PQclear(pgtest_query(F.c,
			     "UPDATE execdispatch.job SET state = 'running', runner_instance = "
			     "CASE WHEN id = %lld THEN 'stale2' ELSE 'stale' END, attempts = 1, "
			     "claims = 1 WHERE id IN (%lld, %lld)",
			     id2, id2, id3));
	PQclear(pgtest_query(other, "BEGIN"));
	PQclear(pgtest_query(other, "SELECT 1 FROM execdispatch.job WHERE id = %lld FOR UPDATE",
			     id));
	r = run_stmt(F.c, DQ_RESCUE, 4, rescue_params);
	CU_ASSERT_STRING_EQUAL(said(RESCUE, r, buf, sizeof buf), "requeued 1, failed 0, put off 1");
	CU_ASSERT_STRING_EQUAL(state_of(id2, buf), "queued/1");
	CU_ASSERT_STRING_EQUAL(state_of(id3, buf), "running/1"); /* stale's, not locked */
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.dispatcher WHERE "
					"instance IN ('stale', 'stale2')"),
			1);
	PQclear(pgtest_query(other, "COMMIT"));
	r = run_stmt(F.c, DQ_RESCUE, 4, rescue_params);
	CU_ASSERT_STRING_EQUAL(said(RESCUE, r, buf, sizeof buf), "requeued 2, failed 0");
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.dispatcher WHERE "
					"instance IN ('stale', 'stale2')"),
			0);
	PQclear(pgtest_query(F.c, "RESET statement_timeout"));
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	PQfinish(other);
}

/* A new attempt starts without the last attempt's progress: a row
 * requeued (retry, rescue, give-back) keeps the progress its last run
 * wrote; its start clears it, so position() and the row never show an old
 * attempt's value as the new one's. */
static void test_start_clears_progress(void)
{
	char c1[CLAIM_TEXT], ids[24], claims[24];
	long long id;

	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	id = df_submit(&F, "{\"command\":\"true\"}", 0);
	/* the previous attempt's value, as a requeue leaves it */
	PQclear(pgtest_query(F.c,
			     "UPDATE execdispatch.job SET progress = "
			     "'{\"fraction\": 0.9, \"text\": \"old\"}' WHERE id = %lld",
			     id));
	CU_ASSERT_EQUAL_FATAL(claim_one(id, c1, sizeof c1), 1);
	snprintf(ids, sizeof ids, "{%lld}", id);
	snprintf(claims, sizeof claims, "{%s}", c1);
	const char *start[3] = { "me", ids, claims };
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_START, 3, start), 1);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id = %lld AND "
				   "state = 'running' AND progress IS NULL",
				   id),
			1);
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
}

/* A key-share lock (what an application's open transaction holds on a
 * job row after inserting a row that references it by foreign key) does
 * not stop an update that leaves the key alone: the start, the POSITION
 * and the rescue write such a row at once instead of skipping it. */
static void test_key_share_not_skipped(void)
{
	PGconn *other = pgtest_connect(F.conninfo);
	char c1[CLAIM_TEXT], ids[24], claims[24], buf[64];
	long long id;
	PGresult *r;

	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	id = df_submit(&F, "{\"command\":\"true\"}", 0);
	CU_ASSERT_EQUAL_FATAL(claim_one(id, c1, sizeof c1), 1);
	snprintf(ids, sizeof ids, "{%lld}", id);
	snprintf(claims, sizeof claims, "{%s}", c1);
	snprintf(buf, sizeof buf, "%lld", id);
	const char *start[3] = { "me", ids, claims },
		   *pos[4] = { buf, "me", c1, "{\"running\": 1, \"ahead\": 2}" };
	PQclear(pgtest_query(F.c, "SET statement_timeout = 1000"));
	PQclear(pgtest_query(other, "BEGIN"));
	PQclear(pgtest_query(other, "SELECT 1 FROM execdispatch.job WHERE id = %lld FOR KEY SHARE",
			     id));
	r = run_stmt(F.c, DQ_POSITION, 4, pos);
	CU_ASSERT_STRING_EQUAL(PQgetvalue(r, 0, 0), "1");
	PQclear(r);
	r = run_stmt(F.c, DQ_START, 3, start);
	CU_ASSERT_EQUAL(PQntuples(r), 1);
	CU_ASSERT_STRING_EQUAL(PQgetvalue(r, 0, 1), "1");
	PQclear(r);
	CU_ASSERT_STRING_EQUAL(state_of(id, buf), "running/1");
	PQclear(pgtest_query(other, "COMMIT"));

	id = held_row("running");
	PQclear(pgtest_query(other, "BEGIN"));
	PQclear(pgtest_query(other, "SELECT 1 FROM execdispatch.job WHERE id = %lld FOR KEY SHARE",
			     id));
	r = run_stmt(F.c, DQ_RESCUE, 4, rescue_params);
	CU_ASSERT_STRING_EQUAL(said(RESCUE, r, buf, sizeof buf), "requeued 1, failed 0");
	CU_ASSERT_STRING_EQUAL(state_of(id, buf), "queued/1");
	PQclear(pgtest_query(other, "COMMIT"));
	PQclear(pgtest_query(F.c, "RESET statement_timeout"));
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	PQfinish(other);
}

/* An application's LOCK TABLE job: the beat goes through it (it touches
 * the dispatcher table alone), the rescue waits for it; a dispatcher
 * silent when the rescue started but that beat while the rescue waited
 * is not taken for silent (its new heartbeat is younger than the
 * rescue's now()), while one that stayed silent is rescued. */
static void test_beat_passes_table_lock(void)
{
	PGconn *other = pgtest_connect(F.conninfo), *b = pgtest_connect(F.conninfo);
	const char *beat[3] = { "late", TOKEN, NULL };
	long long id = held_row("running"), id2 = silent_holder("late", 3, "running");
	char buf[64];
	PGresult *r;

	PQclear(pgtest_query(other, "BEGIN"));
	PQclear(pgtest_query(other, "LOCK TABLE execdispatch.job IN ACCESS EXCLUSIVE MODE"));
	send_blocked(b, DQ_RESCUE, 4, rescue_params);
	PQclear(pgtest_query(F.c, "SET statement_timeout = 2000"));
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_BEAT, 3, beat), 1);
	PQclear(pgtest_query(F.c, "RESET statement_timeout"));
	PQclear(pgtest_query(other, "COMMIT"));
	r = collect(b);
	CU_ASSERT_STRING_EQUAL(said(RESCUE, r, buf, sizeof buf), "requeued 1, failed 0");
	CU_ASSERT_STRING_EQUAL(state_of(id, buf), "queued/1");
	CU_ASSERT_STRING_EQUAL(state_of(id2, buf), "running/1");
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.dispatcher WHERE "
					"instance = 'late'"),
			1);
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	PQfinish(other);
	PQfinish(b);
}

/* No claim of a dispatcher whose row a rescue removes is left held by
 * nobody: its claim in flight holds its row FOR KEY SHARE, so a rescue
 * meanwhile passes it over (the claim commits, the next rescue requeues
 * the row), and a claim after a rescue that holds the row waits for it
 * and then claims nothing.  A rescue that deleted the row under the claim
 * would requeue nothing, and the claim would commit under no dispatcher. */
static void test_race_own_claim_rescue(void)
{
	PGconn *a = pgtest_connect(F.conninfo), *b = pgtest_connect(F.conninfo);
	const char *claim[6] = { "stale", "{work}", "{5}", "0", "{}", TOKEN };
	char buf[64];
	long long id;
	PGresult *r;

	held_row("running");
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	id = df_submit(&F, "{\"command\":\"true\"}", 0);
	/* the stale dispatcher's claim in flight: the rescue passes it over,
	 * and counts it put off (its third column) */
	PQclear(pgtest_query(a, "BEGIN"));
	CU_ASSERT_EQUAL(rows_of(a, DQ_CLAIM_EXEC, 6, claim), 1);
	r = run_stmt(b, DQ_RESCUE, 4, rescue_params);
	CU_ASSERT_STRING_EQUAL(said(RESCUE, r, buf, sizeof buf), "requeued 0, failed 0, put off 1");
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.dispatcher WHERE "
					"instance = 'stale'"),
			1);
	PQclear(pgtest_query(a, "COMMIT"));
	CU_ASSERT_STRING_EQUAL(state_of(id, buf), "claimed/1");
	/* the next rescue sees the claim: requeued, and the row removed */
	r = run_stmt(b, DQ_RESCUE, 4, rescue_params);
	CU_ASSERT_STRING_EQUAL(said(RESCUE, r, buf, sizeof buf), "requeued 1, failed 0");
	CU_ASSERT_STRING_EQUAL(state_of(id, buf), "queued/1");
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.dispatcher WHERE "
					"instance = 'stale'"),
			0);

	/* the rescue first, not committed: the claim waits for it, then
	 * finds no row of its own and claims nothing */
	silent_row("stale", 1);
	PQclear(pgtest_query(b, "BEGIN"));
	r = run_stmt(b, DQ_RESCUE, 4, rescue_params);
	CU_ASSERT_STRING_EQUAL(said(RESCUE, r, buf, sizeof buf), "requeued 0, failed 0");
	send_blocked(a, DQ_CLAIM_EXEC, 6, claim);
	PQclear(pgtest_query(b, "COMMIT"));
	r = collect(a);
	CU_ASSERT_EQUAL(PQntuples(r), 0);
	PQclear(r);
	CU_ASSERT_STRING_EQUAL(state_of(id, buf), "queued/1");

	/* two rescues of one silent dispatcher: the one that finds the other
	 * removing it does not count it put off */
	silent_row("stale", 1);
	PQclear(pgtest_query(b, "BEGIN"));
	r = run_stmt(b, DQ_RESCUE, 4, rescue_params);
	CU_ASSERT_STRING_EQUAL(said(RESCUE, r, buf, sizeof buf), "requeued 0, failed 0");
	r = run_stmt(a, DQ_RESCUE, 4, rescue_params);
	CU_ASSERT_STRING_EQUAL(said(RESCUE, r, buf, sizeof buf), "requeued 0, failed 0");
	PQclear(pgtest_query(b, "COMMIT"));
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.dispatcher WHERE "
					"instance = 'stale'"),
			0);
	PQfinish(a);
	PQfinish(b);
}

/* A held row whose instance has no dispatcher row at all (claimed under
 * a row that a rescue removed by a snapshot taken before the claim
 * committed, or left by an older execdispatch's leave) is requeued by
 * the next rescue, counting the attempt; a row of a live dispatcher is
 * not. */
static void test_rescue_orphans(void)
{
	long long lone, kept;
	char buf[64];
	PGresult *r;

	held_row("running");
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	lone = df_submit(&F, "{\"command\":\"true\"}", 0);
	kept = df_submit(&F, "{\"command\":\"true\"}", 0);
	PQclear(pgtest_query(
		F.c,
		"UPDATE execdispatch.job SET state = 'claimed', attempts = 1, claims = "
		"1, runner_instance = CASE WHEN id = %lld THEN 'nobody' ELSE 'live' END",
		lone));
	r = run_stmt(F.c, DQ_RESCUE, 4, rescue_params);
	CU_ASSERT_STRING_EQUAL(said(RESCUE, r, buf, sizeof buf), "requeued 1, failed 0");
	CU_ASSERT_STRING_EQUAL(state_of(lone, buf), "queued/1");
	CU_ASSERT_STRING_EQUAL(state_of(kept, buf), "claimed/1");
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
}

/* The identity of a dispatcher's row is its instance and its life's
 * token (started_at as it registered): a second live process of the same
 * instance, host and pid (containers with pid 1 and a fixed hostname)
 * does not take the row over; the same life's register sent again (its
 * reply lost) does; once another life took a stale row over, the old
 * life's beat, sweep, requeue and leave touch nothing of the new one;
 * the new one's leave requeues the rows still held under the instance.
 * Either life touching the other's rows would run a job twice or leave a
 * row held by nobody. */
static void test_identity_token(void)
{
	static const char t2[] = "2026-01-02 03:04:05.678902+00";
	const char *reg1[5] = { "dup", "h", "1", "30", TOKEN },
		   *reg2[5] = { "dup", "h", "1", "30", t2 };
	const char *beat1[3] = { "dup", TOKEN, NULL }, *beat2[3] = { "dup", t2, NULL };
	const char *leave1[4] = { "dup", TOKEN, "3", "{}" }, *leave2[4] = { "dup", t2, "3", "{}" };
	char ids[32], buf[64];
	long long id;

	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job; DELETE FROM "
				  "execdispatch.dispatcher"));
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_REGISTER, 5, reg1), 1);
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_REGISTER, 5, reg2), 0); /* live: not taken over */
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_REGISTER, 5, reg1), 1); /* the same life again */
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_BEAT, 3, beat1), 1);
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_BEAT, 3, beat2), 0);
	/* the first life claims, goes silent; the second takes the row over */
	id = df_submit(&F, "{\"command\":\"true\"}", 0);
	const char *claim1[6] = { "dup", "10", "{}", "false", "-1000", TOKEN };
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_CLAIM, 6, claim1), 1);
	PQclear(pgtest_query(F.c, "UPDATE execdispatch.dispatcher SET heartbeat_at = now() - "
				  "interval '1 hour'"));
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_REGISTER, 5, reg2), 1);
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_BEAT, 3, beat1), 0);
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_CLAIM, 6, claim1), 0);
	/* the old life's requeue of its earlier rows and its sweep: nothing */
	CU_ASSERT_EQUAL(rescue_own(F.c, "dup", TOKEN), 0);
	CU_ASSERT_EQUAL(sweep_lost(F.c, "dup", "{}", "{}", TOKEN), 0);
	CU_ASSERT_STRING_EQUAL(state_of(id, buf), "claimed/1");
	/* the new life's requeue of the rows the instance left takes it, and
	 * its next claim takes it again */
	CU_ASSERT_EQUAL(rescue_own(F.c, "dup", t2), 1);
	const char *claim2[6] = { "dup", "10", "{}", "false", "-1000", t2 };
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_CLAIM, 6, claim2), 1);
	/* the old life's leave deletes and requeues nothing */
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_LEAVE, 4, leave1), 0);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.dispatcher"), 1);
	CU_ASSERT_STRING_EQUAL(state_of(id, buf), "claimed/2");
	/* the new life's sweep holding the claim: nothing; its leave holding
	 * nothing (a claim whose result it lost): requeued with the row gone */
	snprintf(ids, sizeof ids, "{%lld}", id);
	CU_ASSERT_EQUAL(sweep_lost(F.c, "dup", ids, "{2}", t2), 0);
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_LEAVE, 4, leave2), 1);
	CU_ASSERT_STRING_EQUAL(state_of(id, buf), "queued/2");
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.dispatcher"), 0);
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
}

/* A takeover of a stale row waits for a claim of the life before that is
 * in flight (it holds the row FOR KEY SHARE; the takeover locks it as a
 * key update), so the new life's requeue of the rows its instance left,
 * sent after the takeover, sees that claim and requeues it. */
static void test_takeover_waits_for_claim(void)
{
	static const char t2[] = "2026-01-02 03:04:05.678902+00";
	PGconn *a = pgtest_connect(F.conninfo), *b = pgtest_connect(F.conninfo);
	const char *claim1[6] = { "dup", "10", "{}", "false", "-1000", TOKEN };
	const char *reg2[5] = { "dup", "h", "1", "30", t2 };
	char buf[64];
	long long id;
	PGresult *r;

	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job; DELETE FROM "
				  "execdispatch.dispatcher"));
	silent_row("dup", 1);
	id = df_submit(&F, "{\"command\":\"true\"}", 0);
	PQclear(pgtest_query(a, "BEGIN"));
	CU_ASSERT_EQUAL(rows_of(a, DQ_CLAIM, 6, claim1), 1);
	send_blocked(b, DQ_REGISTER, 5, reg2);
	PQclear(pgtest_query(a, "COMMIT"));
	r = collect(b);
	CU_ASSERT_EQUAL(PQntuples(r), 1);
	PQclear(r);
	CU_ASSERT_EQUAL(rescue_own(b, "dup", t2), 1);
	CU_ASSERT_STRING_EQUAL(state_of(id, buf), "queued/1");
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	PQfinish(a);
	PQfinish(b);
}

static long long submit_svc(const char *service, int priority)
{
	return pgtest_int(F.c, "SELECT execdispatch.submit('%s', '{\"command\":\"true\"}', %d)",
			  service, priority);
}

/* The exec-bound claim: each listed service up to its limit, in its claim
 * order; other services (not local) up to the "other" limit; local ones
 * never.  Then the same through the finish-and-claim statement, which
 * also writes an outcome under its claim. */
static void test_claim_per_service(void)
{
	const char *p[6] = { "me", "{a,b}", "{2,0}", "1", "{loc}", TOKEN };
	long long a_hi, id;
	struct finish_args fa;
	PGresult *r;
	int na = 0, nb = 0, nc = 0, nf = 0, nclaimed = 0;

	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	for (int i = 0; i < 3; i++)
		submit_svc("a", 0);
	a_hi = submit_svc("a", 5);
	for (int i = 0; i < 3; i++) {
		submit_svc("b", 0);
		submit_svc("c", 0);
		submit_svc("loc", 0);
	}
	alive("me");
	r = run_stmt(F.c, DQ_CLAIM_EXEC, 6, p);
	CU_ASSERT_EQUAL(PQntuples(r), 3);
	for (int i = 0; i < PQntuples(r); i++) {
		const char *svc = PQgetvalue(r, i, 3);
		na += strcmp(svc, "a") == 0;
		nb += strcmp(svc, "b") == 0;
		nc += strcmp(svc, "c") == 0;
		if (strtoll(PQgetvalue(r, i, 0), NULL, 10) == a_hi)
			na += 100; /* a's highest priority first */
	}
	PQclear(r);
	CU_ASSERT_EQUAL(na, 102);
	CU_ASSERT_EQUAL(nb, 0);
	CU_ASSERT_EQUAL(nc, 1);

	/* finish a_hi as done and claim b up to 2 in one statement */
	finish_params(&fa, a_hi, "me", "1");
	const char *fc[11] = { fa.p[0], fa.p[1], fa.p[2], fa.p[3], fa.p[4], fa.p[5],
			       fa.p[6], fa.p[7], "{a,b}", "{0,2}", TOKEN };
	r = run_stmt(F.c, DQ_FINISH_CLAIM, 11, fc);
	CU_ASSERT_EQUAL(PQresultStatus(r), PGRES_TUPLES_OK);
	for (int i = 0; i < PQntuples(r); i++) {
		id = strtoll(PQgetvalue(r, i, 1), NULL, 10);
		if (PQgetvalue(r, i, 0)[0] == 'f')
			nf += id == a_hi;
		else
			nclaimed += strcmp(PQgetvalue(r, i, 4), "b") == 0;
	}
	PQclear(r);
	CU_ASSERT_EQUAL(nf, 1);
	CU_ASSERT_EQUAL(nclaimed, 2);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id = %lld "
				   "AND state = 'done'",
				   a_hi),
			1);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE service = "
					"'loc' AND state = 'queued'"),
			3);
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
}

/* Migration 009 over a version 8 schema whose submit() an administrator
 * granted to a role alone (PUBLIC revoked): the new submit() has the same
 * grants and the old signature is gone; applied again over its own result
 * (its version row removed) nothing changes. */
static void test_migrate_009_grants(void)
{
	char out[2048], cfg[300];
	FILE *f;
	static const char newsig[] = "gr.submit(text,jsonb,integer,timestamptz,text,interval)";

	snprintf(cfg, sizeof cfg, "%s/gr.yml", F.dir);
	f = fopen(cfg, "w");
	fprintf(f, "database: \"%s\"\nexecservers: [ws://127.0.0.1:9]\nschema: gr\n", F.conninfo);
	fclose(f);
	const char *mig[] = { "--migrate", "-c", cfg, NULL };
	CU_ASSERT_EQUAL(df_run_tool(out, sizeof out, mig), 0);
	/* back to version 8: 006's submit (a stand-in of its signature) */
	PQclear(pgtest_query(
		F.c,
		"DELETE FROM gr.schema_version WHERE version >= 9; DROP FUNCTION %s; "
		"CREATE FUNCTION gr.submit(p_service text, p_job jsonb, p_priority integer "
		"DEFAULT 0, p_start_after timestamptz DEFAULT now()) RETURNS bigint "
		"LANGUAGE sql AS 'SELECT 0::bigint'; "
		"DO $$ BEGIN CREATE ROLE sql30_app; EXCEPTION WHEN duplicate_object THEN "
		"NULL; END $$; "
		"REVOKE ALL ON FUNCTION gr.submit(text, jsonb, integer, timestamptz) FROM "
		"PUBLIC; GRANT EXECUTE ON FUNCTION gr.submit(text, jsonb, integer, "
		"timestamptz) TO sql30_app",
		newsig));
	for (int round = 0; round < 2; round++) {
		CU_ASSERT_EQUAL(df_run_tool(out, sizeof out, mig), 0);
		CU_ASSERT_PTR_NOT_NULL(strstr(out, migrated_from(9)));
		CU_ASSERT_EQUAL(pgtest_int(F.c,
					   "SELECT count(*) FROM pg_proc WHERE proname = 'submit' "
					   "AND pronamespace = 'gr'::regnamespace"),
				1);
		CU_ASSERT_EQUAL(pgtest_int(F.c,
					   "SELECT has_function_privilege('sql30_app', '%s', "
					   "'EXECUTE')::int",
					   newsig),
				1);
		CU_ASSERT_EQUAL(pgtest_int(F.c,
					   "SELECT count(*) FROM pg_proc, aclexplode(proacl) a "
					   "WHERE oid = '%s'::regprocedure AND a.grantee = 0",
					   newsig),
				0);
		/* again over its own result */
		PQclear(pgtest_query(F.c, "DELETE FROM gr.schema_version WHERE version >= 9"));
	}
	CU_ASSERT_EQUAL(df_run_tool(out, sizeof out, mig), 0);
	PQclear(pgtest_query(F.c, "DROP SCHEMA gr CASCADE; DROP ROLE sql30_app"));
}

/* Each migration is committed on its own: over version 7 while a
 * session reads job, 008 (no lock on job) commits, and 009's trigger,
 * which waits for a lock that session's ACCESS SHARE blocks, fails on its
 * lock timeout: the schema stays at version 8, said in the message (one
 * transaction for all would have rolled 008 back).  Once the session is
 * gone, --migrate applies 009 and 010. */
static void test_migrate_each_committed(void)
{
	char out[2048], want[96];
	const char *args[] = { "--migrate", "-c", F.cfg[0], NULL };
	PGconn *reader = pgtest_connect(F.conninfo);

	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.schema_version WHERE version >= 8"));
	PQclear(pgtest_query(reader, "SET idle_in_transaction_session_timeout = '10s'; BEGIN; "
				     "SELECT count(*) FROM execdispatch.job"));
	CU_ASSERT_EQUAL(df_run_tool(out, sizeof out, args), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "009_"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "lock timeout"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "stays at version 8"));
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT max(version) FROM execdispatch.schema_version"), 8);
	PQfinish(reader);
	CU_ASSERT_EQUAL(df_run_tool(out, sizeof out, args), 0);
	snprintf(want, sizeof want, "%s", migrated_from(9));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT max(version) FROM execdispatch.schema_version"),
			DISPATCH_SCHEMA_VERSION);
}

/* ---- migration 009: pause, retry, attempts, unique jobs, bulk ---- */

/* DQ_CLAIM_EXEC for instance "me" of services (an array literal) with
 * limits, up to `others` rows of the other services: ids claimed, as
 * "{a,b}" sorted. */
static const char *claim_exec_ids(char *buf, size_t len, const char *services, const char *limits,
				  const char *others)
{
	const char *p[6] = { "me", services, limits, others, "{}", TOKEN };
	PGresult *r;

	alive("me");
	r = run_stmt(F.c, DQ_CLAIM_EXEC, 6, p);
	long long ids[16];
	int n = PQntuples(r) < 16 ? PQntuples(r) : 16;
	for (int i = 0; i < n; i++)
		ids[i] = strtoll(PQgetvalue(r, i, 0), NULL, 10);
	PQclear(r);
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && ids[j] < ids[j - 1]; j--) {
			long long t = ids[j];
			ids[j] = ids[j - 1];
			ids[j - 1] = t;
		}
	size_t o = (size_t)snprintf(buf, len, "{");
	for (int i = 0; i < n && o < len; i++)
		o += (size_t)snprintf(buf + o, len - o, "%s%lld", i ? "," : "", ids[i]);
	if (o < len)
		snprintf(buf + o, len - o, "}");
	return buf;
}

static long long submit_to(const char *service)
{
	return pgtest_int(F.c, "SELECT execdispatch.submit('%s', '{\"command\": \"true\"}')",
			  service);
}

/* A paused service is left by every claim (the per-service one, the
 * others', the local class's), position() says paused, queue_stats has
 * its row; resumed, the next claim takes its rows.  Running rows go on:
 * a finish of one of them still lands. */
static void test_pause_resume(void)
{
	char buf[256], want[64];
	long long a, b, held;

	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job; "
				  "DELETE FROM execdispatch.paused_service"));
	expect_error("SELECT execdispatch.pause('no such')", "service must be 1 to 64");
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.resume('work')"),
		"not_paused");
	held = submit_to("work");
	CU_ASSERT_EQUAL(claim_exec_ids(buf, sizeof buf, "{work}", "{1}", "0")[0], '{');
	a = submit_to("work");
	b = submit_to("other");
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.pause('work')"), "paused");
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.pause('work')"),
		"already_paused");
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.pause('other')"), "paused");
	CU_ASSERT_STRING_EQUAL(pgtest_text(F.c, buf, sizeof buf,
					   "SELECT execdispatch.position(%lld)->>'waiting'", a),
			       "paused");
	/* neither listed nor other, nor the local class's claim */
	CU_ASSERT_STRING_EQUAL(claim_exec_ids(buf, sizeof buf, "{work}", "{10}", "10"), "{}");
	CU_ASSERT_STRING_EQUAL(claim_exec_ids(buf, sizeof buf, "{}", "{}", "10"), "{}");
	const char *local[6] = { "me", "10", "{work,other}", "true", "-1000", TOKEN };
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_CLAIM, 6, local), 0);
	const char *others[6] = { "me", "10", "{}", "false", "-1000", TOKEN };
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_CLAIM, 6, others), 0);
	/* the figures for /metrics: one paused row per service */
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM (%s) s WHERE s.\"?column?\" = "
				   "'paused'",
				   q(DQ_QUEUE_STATS)),
			2);
	/* the running row of the paused service finishes */
	PQclear(pgtest_query(F.c, "UPDATE execdispatch.job SET state = 'running' WHERE id = %lld",
			     held));
	struct finish_args f;
	char claim[CLAIM_TEXT];
	snprintf(claim, sizeof claim, "%lld",
		 pgtest_int(F.c, "SELECT claims FROM execdispatch.job WHERE id = %lld", held));
	finish_params(&f, held, "me", claim);
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_FINISH, 8, f.p), 1);
	/* resumed: the per-service claim and the others' take them */
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.resume('work')"), "resumed");
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.resume('other')"),
		"resumed");
	snprintf(want, sizeof want, "{%lld}", a);
	CU_ASSERT_STRING_EQUAL(claim_exec_ids(buf, sizeof buf, "{work}", "{10}", "0"), want);
	snprintf(want, sizeof want, "{%lld}", b);
	CU_ASSERT_STRING_EQUAL(claim_exec_ids(buf, sizeof buf, "{work}", "{10}", "10"), want);
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
}

/* The attempts of a job as attempts(id) gives them, oldest
 * first: "attempt/state/error/stderr/finished?" each. */
static const char *attempts_of(long long id, char *buf, size_t len)
{
	return pgtest_text(F.c, buf, len,
			   "SELECT coalesce(string_agg(attempt || '/' || state || '/' || "
			   "coalesce(error, '-') || '/' || coalesce(receipt->>'stderr', "
			   "'-') || '/' || (finished IS NOT NULL), ' ' ORDER BY claim), '') "
			   "FROM execdispatch.attempts(%lld)",
			   id);
}

/* A job that runs once and ends done writes no job_attempt row (the
 * trigger's WHEN leaves it to the row), yet attempts(id) shows it;
 * one that failed twice (retryable) then succeeded shows three, each
 * with its receipt; a final failure stays in the row alone; a claim
 * given back (attempts down) is no attempt. */
static void test_attempts_view(void)
{
	char buf[512], claim[CLAIM_TEXT];
	long long id;
	struct finish_args f;

	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job; "
				  "DELETE FROM execdispatch.dispatcher"));
	id = df_submit(&F, "{\"command\":\"true\"}", 0);
	CU_ASSERT_STRING_EQUAL(attempts_of(id, buf, sizeof buf), "");
	CU_ASSERT_EQUAL(claim_one(id, claim, sizeof claim), 1);
	CU_ASSERT_STRING_EQUAL(attempts_of(id, buf, sizeof buf), "");
	finish_params(&f, id, "me", claim);
	f.p[7] = "{\"{\\\"exit_code\\\": 0, \\\"stderr\\\": \\\"once\\\"}\"}";
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_FINISH, 8, f.p), 1);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job_attempt"), 0);
	CU_ASSERT_STRING_EQUAL(attempts_of(id, buf, sizeof buf), "1/done/-/once/true");
	CU_ASSERT_STRING_EQUAL(pgtest_text(F.c, buf, sizeof buf,
					   "SELECT runner || '/' || (started IS NULL) || '/' || "
					   "(ended = finished) || '/' || (life IS NULL) FROM "
					   "execdispatch.attempts(%lld)",
					   id),
			       "me/true/true/true");
	/* a retry of done is refused and moves nothing */
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.retry(%lld)", id),
		"not_found_or_not_finished");
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job_attempt"), 0);

	/* failed twice (retryable), a claim given back, then done */
	id = df_submit(&F, "{\"command\":\"true\"}", 0);
	static const char *const err[2] = {
		"{\"{\\\"exit_code\\\": 3, \\\"stderr\\\": \\\"one\\\"}\"}",
		"{\"{\\\"exit_code\\\": 4, \\\"stderr\\\": \\\"two\\\"}\"}"
	};
	for (int i = 0; i < 2; i++) {
		CU_ASSERT_EQUAL(claim_one(id, claim, sizeof claim), i + 1);
		finish_params(&f, id, "me", claim);
		f.p[3] = "{queued}";
		f.p[6] = "{exit_status}";
		f.p[7] = err[i];
		CU_ASSERT_EQUAL(rows_of(F.c, DQ_FINISH, 8, f.p), 1);
	}
	CU_ASSERT_EQUAL(claim_one(id, claim, sizeof claim), 3);
	finish_params(&f, id, "me", claim);
	f.p[3] = "{queued}";
	f.p[4] = "{1}";
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_FINISH, 8, f.p), 1);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job_attempt"), 2);
	CU_ASSERT_EQUAL(claim_one(id, claim, sizeof claim), 4);
	finish_params(&f, id, "me", claim);
	f.p[7] = "{\"{\\\"exit_code\\\": 0, \\\"stderr\\\": \\\"three\\\"}\"}";
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_FINISH, 8, f.p), 1);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job_attempt"), 2);
	CU_ASSERT_STRING_EQUAL(attempts_of(id, buf, sizeof buf),
			       "1/queued/exit_status/one/true 2/queued/exit_status/two/true "
			       "3/done/-/three/true");
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
}

/* retry(): the answers; a cancel of a held row answers stopping until
 * its dispatcher writes the run's end (DQ_ATTEMPT_ENDED) or its life
 * ends; the attempts keep each receipt, and a claim clears the one
 * before from the row. */
static void test_retry_attempts(void)
{
	char buf[512], claim[CLAIM_TEXT];
	long long id;
	struct finish_args f;

	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job; "
				  "DELETE FROM execdispatch.dispatcher"));
	id = df_submit(&F, "{\"command\":\"true\"}", 0);
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.retry(%lld)", id),
		"not_found_or_not_finished");
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.retry(987654)"),
		"not_found_or_not_finished");
	/* attempt 1: a retryable failure with a receipt, requeued */
	CU_ASSERT_EQUAL(claim_one(id, claim, sizeof claim), 1);
	finish_params(&f, id, "me", claim);
	f.p[3] = "{queued}";
	f.p[6] = "{exec_lost}";
	f.p[7] = "{\"{\\\"exit_code\\\": 3, \\\"stderr\\\": \\\"first\\\"}\"}";
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_FINISH, 8, f.p), 1);
	/* attempt 2's claim clears attempt 1's error and receipt */
	CU_ASSERT_EQUAL(claim_one(id, claim, sizeof claim), 2);
	CU_ASSERT_EQUAL(pgtest_int(F.c,
				   "SELECT count(*) FROM execdispatch.job WHERE id = %lld "
				   "AND error IS NULL AND receipt IS NULL",
				   id),
			1);
	finish_params(&f, id, "me", claim);
	f.p[3] = "{failed}";
	f.p[6] = "{exit_status}";
	f.p[7] = "{\"{\\\"exit_code\\\": 4, \\\"stderr\\\": \\\"second\\\"}\"}";
	CU_ASSERT_EQUAL(rows_of(F.c, DQ_FINISH, 8, f.p), 1);
	/* the final failure is the row's alone until the retry moves it */
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job_attempt"), 1);
	CU_ASSERT_STRING_EQUAL(attempts_of(id, buf, sizeof buf),
			       "1/queued/exec_lost/first/true 2/failed/exit_status/second/true");
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.retry(%lld)", id),
		"requeued");
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job_attempt"), 2);
	CU_ASSERT_STRING_EQUAL(attempts_of(id, buf, sizeof buf),
			       "1/queued/exec_lost/first/true 2/failed/exit_status/second/true");
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf,
			    "SELECT state || '/' || attempts || '/' || "
			    "coalesce(runner_instance, '-') || '/' || "
			    "coalesce(error, '-') FROM execdispatch.job WHERE id = %lld",
			    id),
		"queued/0/-/-");
	/* attempt 3 (the retry's first): running, cancelled: stopping */
	CU_ASSERT_EQUAL(claim_one(id, claim, sizeof claim), 3);
	PQclear(pgtest_query(F.c, "UPDATE execdispatch.job SET state = 'running' WHERE id = %lld",
			     id));
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.cancel(%lld)", id),
		"requested");
	CU_ASSERT_STRING_EQUAL(pgtest_text(F.c, buf, sizeof buf,
					   "SELECT coalesce(runner_instance, '-') FROM "
					   "execdispatch.job WHERE id = %lld",
					   id),
			       "me");
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.retry(%lld)", id),
		"stopping");
	/* another dispatcher's word, or another claim's, does not end it */
	const char *other[3] = { "you", buf, claim };
	snprintf(buf, sizeof buf, "%lld", id);
	PQclear(run_stmt(F.c, DQ_ATTEMPT_ENDED, 3, other));
	const char *wrong[3] = { "me", buf, "2" };
	PQclear(run_stmt(F.c, DQ_ATTEMPT_ENDED, 3, wrong));
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.retry(%lld)", id),
		"stopping");
	char ids[24];
	snprintf(ids, sizeof ids, "%lld", id);
	const char *ended[3] = { "me", ids, claim };
	PGresult *r = run_stmt(F.c, DQ_ATTEMPT_ENDED, 3, ended);
	CU_ASSERT_STRING_EQUAL(PQcmdTuples(r), "1");
	PQclear(r);
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.retry(%lld)", id),
		"requeued");
	/* the attempts: both receipts, the cancel, in order */
	CU_ASSERT_STRING_EQUAL(attempts_of(id, buf, sizeof buf),
			       "1/queued/exec_lost/first/true 2/failed/exit_status/second/true "
			       "1/cancelled/cancelled/-/true");
	/* a cancel whose dispatcher's life ended: not stopping */
	CU_ASSERT_EQUAL(claim_one(id, claim, sizeof claim), 4);
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.cancel(%lld)", id),
		"requested");
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.retry(%lld)", id),
		"stopping");
	PQclear(pgtest_query(F.c, "UPDATE execdispatch.dispatcher SET started_at = now() "
				  "WHERE instance = 'me'"));
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.retry(%lld)", id),
		"requeued");
	/* the janitor's delete takes the attempts with the job */
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job WHERE id = %lld", id));
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job_attempt"), 0);
	/* retry_failed: the failed rows of a service since a time, bounded */
	PQclear(pgtest_query(F.c, "INSERT INTO execdispatch.job (service, job, state, "
				  "finished_at) SELECT 'work', '{\"command\": \"true\"}', "
				  "'failed', now() - make_interval(hours => g) FROM "
				  "generate_series(0, 4) g"));
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT execdispatch.retry_failed('work', now() - "
					"interval '150 minutes', 2)"),
			2);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT execdispatch.retry_failed('work', now() - "
					"interval '150 minutes')"),
			1);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE state = "
					"'queued'"),
			3);
	/* a failed row over the payload cap (006) is left failed, the others
	 * requeued: retry() of it would be refused (23514) and abort the call */
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	PQclear(pgtest_query(F.c,
			     "INSERT INTO execdispatch.job (service, job, state, "
			     "finished_at) SELECT 'work', jsonb_build_object('command', "
			     "'true', 'pad', repeat('x', 1044480 * (1 - g))), 'failed', "
			     "now() - make_interval(mins => 2 - g) FROM generate_series(0, 1) g"));
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT execdispatch.retry_failed('work', now() - "
					"interval '1 hour')"),
			1);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE state = "
					"'failed' AND octet_length(job::text) > 1044480"),
			1);
	expect_error("SELECT execdispatch.retry_failed('work', now(), 0)",
		     "max must be between 1 and 100000");
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
}

/* retry() of a job cancelled under a claim its dispatcher does not hold
 * does not answer stopping for the whole life: the sweep of lost claims
 * marks the attempt of a lost claim cancelled before it finished, and
 * the start-up look of this life marks an earlier life's held row
 * cancelled after the registration.  A cancelled row still held (its run
 * stopping) is left for attempt_ended.sql. */
static void test_retry_lost_cancel(void)
{
	char buf[64], c[CLAIM_TEXT], ids[24], claims[24];
	const char *token2 = "2026-01-02 03:04:06.5+00";
	long long id;

	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	id = df_submit(&F, "{\"command\":\"true\"}", 0);
	/* a claim whose reply was lost, then cancelled */
	CU_ASSERT_EQUAL_FATAL(claim_one(id, c, sizeof c), 1);
	pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.cancel(%lld)", id);
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.retry(%lld)", id),
		"stopping");
	CU_ASSERT_EQUAL(sweep_lost(F.c, "me", "{}", "{}", TOKEN), 0);
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.retry(%lld)", id),
		"requeued");
	/* held by the life before; registered again, then cancelled */
	CU_ASSERT_EQUAL_FATAL(claim_one(id, c, sizeof c), 2);
	PQclear(pgtest_query(F.c,
			     "UPDATE execdispatch.dispatcher SET started_at = '%s' WHERE "
			     "instance = 'me'",
			     token2));
	pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.cancel(%lld)", id);
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.retry(%lld)", id),
		"stopping");
	CU_ASSERT_EQUAL(rescue_own(F.c, "me", token2), 0);
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.retry(%lld)", id),
		"requeued");
	/* still held (its run stopping): the sweep leaves it unfinished */
	CU_ASSERT_EQUAL_FATAL(claim_one(id, c, sizeof c), 3);
	pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.cancel(%lld)", id);
	snprintf(ids, sizeof ids, "{%lld}", id);
	snprintf(claims, sizeof claims, "{%s}", c);
	CU_ASSERT_EQUAL(sweep_lost(F.c, "me", ids, claims, TOKEN), 0);
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.retry(%lld)", id),
		"stopping");
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
}

/* Unique jobs: one job per key while unfinished, a done one within
 * unique_for; the checks; two sessions submitting one key at once get
 * one job; retry() of a job whose key another holds is refused. */
static void test_unique_jobs(void)
{
	char buf[256];
	long long a, b, c;
	static const char sub[] = "SELECT execdispatch.submit('work', '{\"command\": \"true\"}', "
				  "unique_key => 'k1'%s)";

	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	a = pgtest_int(F.c, sub, "");
	b = pgtest_int(F.c, sub, "");
	CU_ASSERT(a > 0 && a == b);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job"), 1);
	/* another service, another key: new jobs */
	CU_ASSERT(pgtest_int(F.c, "SELECT execdispatch.submit('w2', '{\"command\": \"true\"}', "
				  "unique_key => 'k1')") != a);
	CU_ASSERT(pgtest_int(F.c, "SELECT execdispatch.submit('work', '{\"command\": \"true\"}', "
				  "unique_key => 'k2')") != a);
	/* done: with unique_for its id (and receipt), without a new job */
	PQclear(pgtest_query(F.c,
			     "UPDATE execdispatch.job SET state = 'done', finished_at = now(), "
			     "receipt = '{\"exit_code\": 0}' WHERE id = %lld",
			     a));
	CU_ASSERT_EQUAL(pgtest_int(F.c, sub, ", unique_for => interval '1 hour'"), a);
	c = pgtest_int(F.c, sub, "");
	CU_ASSERT(c > a);
	/* the checks */
	expect_error("SELECT execdispatch.submit('work', '{\"command\": \"true\"}', "
		     "unique_key => repeat('x', 201))",
		     "unique_key must be 1 to 200 characters (got 201)");
	expect_error("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT execdispatch.submit('work', "
		     "'{\"command\": \"true\"}', unique_key => 'k3')",
		     "a unique_key needs READ COMMITTED (this transaction is REPEATABLE READ)");
	PQclear(pgtest_query(F.c, "ROLLBACK"));
	/* payload_key: the same payload written differently, the same key */
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf,
			    "SELECT (execdispatch.payload_key('{\"b\": 1, \"a\": [2]}') = "
			    "execdispatch.payload_key('{\"a\":[2],\"b\":1}'))::text || '/' || "
			    "length(execdispatch.payload_key('{\"a\": 1}'))"),
		"true/64");
	/* retry of a failed job whose key is now another's */
	PQclear(pgtest_query(F.c,
			     "UPDATE execdispatch.job SET state = 'failed', finished_at = "
			     "now() WHERE id = %lld",
			     c));
	long long d = pgtest_int(F.c, sub, "");
	CU_ASSERT(d > c);
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf, "SELECT execdispatch.retry(%lld)", c),
		"unique_key_taken");
	/* the race: a holds the key's lock in its open transaction, b's
	 * submit waits for it and answers a's job once a commits */
	PGconn *s1 = pgtest_connect(F.conninfo), *s2 = pgtest_connect(F.conninfo);
	PQclear(pgtest_query(s1, "BEGIN"));
	long long first = pgtest_int(s1, "SELECT execdispatch.submit('work', '{\"command\": "
					 "\"true\"}', unique_key => 'race')");
	send_blocked(s2,
		     "SELECT execdispatch.submit('work', '{\"command\": \"true\"}', "
		     "unique_key => 'race')",
		     0, NULL);
	PQclear(pgtest_query(s1, "COMMIT"));
	PGresult *r = collect(s2);
	CU_ASSERT_EQUAL(PQresultStatus(r), PGRES_TUPLES_OK);
	CU_ASSERT_EQUAL(strtoll(PQgetvalue(r, 0, 0), NULL, 10), first);
	PQclear(r);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job_key WHERE "
					"unique_key = 'race'"),
			1);
	PQfinish(s1);
	PQfinish(s2);
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job_key"), 0);
}

/* submit_many: ids in the order of the array, a bad element refuses the
 * whole call; cancel_many: one answer per id, in id order, busy for a row
 * locked by another transaction. */
static void test_bulk(void)
{
	char buf[256];

	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	char ids[128];
	/* (the rows are read by a statement of their own: the one calling
	 * submit_many does not see what it inserted) */
	pgtest_text(F.c, ids, sizeof ids,
		    "SELECT execdispatch.submit_many('work', ARRAY['{\"command\": \"c\"}', "
		    "'{\"command\": \"a\"}', '{\"command\": \"b\"}']::jsonb[], 2)::text");
	CU_ASSERT_STRING_EQUAL(
		pgtest_text(F.c, buf, sizeof buf,
			    "SELECT string_agg(j.job->>'command', ',' ORDER BY o) "
			    "FROM unnest('%s'::bigint[]) WITH ORDINALITY AS u(id, o) "
			    "JOIN execdispatch.job j ON j.id = u.id",
			    ids),
		"c,a,b");
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE priority = 2"),
			3);
	expect_error("SELECT execdispatch.submit_many('work', ARRAY['{\"command\": \"c\"}', "
		     "'{\"args\": []}']::jsonb[])",
		     "jobs[2] must be a JSON object");
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job"), 3);
	long long first = pgtest_int(F.c, "SELECT min(id) FROM execdispatch.job");
	PQclear(pgtest_query(
		F.c,
		"UPDATE execdispatch.job SET state = 'running', runner_instance = 'x', "
		"attempts = 1 WHERE id = %lld",
		first + 1));
	snprintf(buf, sizeof buf,
		 "%lld:cancelled %lld:requested %lld:cancelled 987654:"
		 "not_found_or_finished",
		 first, first + 1, first + 2);
	char got[256];
	pgtest_text(F.c, got, sizeof got,
		    "SELECT string_agg(id || ':' || answer, ' ') FROM "
		    "execdispatch.cancel_many(ARRAY[987654, %lld, %lld, %lld, %lld])",
		    first + 2, first, first + 1, first);
	CU_ASSERT_STRING_EQUAL(got, buf);

	/* a row locked by another transaction (a finish batch, a progress
	 * write) is answered busy at once and the free ones are cancelled:
	 * cancel_many waits for no row lock, so it cannot deadlock with a
	 * batch that locks in another order, nor spin while rows are written
	 * (the bulk session's lock_timeout turns a wait into an error) */
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
	long long x = df_submit(&F, "{\"command\":\"true\"}", 0),
		  y = df_submit(&F, "{\"command\":\"true\"}", 0),
		  z = df_submit(&F, "{\"command\":\"true\"}", 0);
	PQclear(pgtest_query(F.c,
			     "UPDATE execdispatch.job SET state = 'done', finished_at = "
			     "now() WHERE id = %lld",
			     z));
	PGconn *fin = pgtest_connect(F.conninfo), *bulk = pgtest_connect(F.conninfo);
	PQclear(pgtest_query(fin,
			     "BEGIN; SELECT 1 FROM execdispatch.job WHERE id IN (%lld, %lld) "
			     "FOR UPDATE",
			     y, z));
	PQclear(pgtest_query(bulk, "SET lock_timeout = '1s'"));
	long long t0 = harness_now_ms();
	pgtest_text(bulk, got, sizeof got,
		    "SELECT string_agg(id || ':' || answer, ' ') FROM "
		    "execdispatch.cancel_many(ARRAY[%lld, %lld, %lld])",
		    z, y, x);
	snprintf(buf, sizeof buf, "%lld:cancelled %lld:busy %lld:not_found_or_finished", x, y, z);
	CU_ASSERT_STRING_EQUAL(got, buf);
	CU_ASSERT(harness_now_ms() - t0 < 1000);
	/* the batch then writes its row; called again, the busy one is cancelled
	 * and the finished one stays finished */
	PQclear(pgtest_query(fin, "COMMIT"));
	pgtest_text(bulk, got, sizeof got,
		    "SELECT string_agg(id || ':' || answer, ' ') FROM "
		    "execdispatch.cancel_many(ARRAY[%lld, %lld])",
		    y, z);
	snprintf(buf, sizeof buf, "%lld:cancelled %lld:not_found_or_finished", y, z);
	CU_ASSERT_STRING_EQUAL(got, buf);
	PQfinish(fin);
	PQfinish(bulk);
	PQclear(pgtest_query(F.c, "DELETE FROM execdispatch.job"));
}

static void test_setup(void)
{
	CU_ASSERT_FATAL(df_start(&F) == 0);
}

static void test_teardown(void)
{
	df_cleanup(&F, CU_get_number_of_failures() > 0);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "setup: PostgreSQL, migrated", test_setup },
		{ "configuration errors name file:line:column", test_config_errors },
		{ "consoleEnabled: its default and the key", test_console_default },
		{ "migrations are idempotent; table settings and indexes",
		  test_migrate_idempotent },
		{ "migration 007 waits 2 s at most for the dispatcher table's lock",
		  test_migrate_lock_bounded },
		{ "the daemon refuses a missing or unknown schema", test_daemon_refuses_schema },
		{ "migration 005 upgrades rows in flight, idempotent",
		  test_migrate_claims_upgrade },
		{ "the longest schema takes submissions", test_longest_schema },
		{ "submit checks, cancel's three answers, position", test_sql_api },
		{ "payload cap: submit refuses one byte more, the trigger the rest",
		  test_payload_cap },
		{ "migration 006 ends unfinished rows over the cap, idempotent",
		  test_migrate_payload_cap },
		{ "the claim runs on the partial index, in its order", test_claim_uses_index },
		{ "the exec-bound claim: per service, others, never local; with a finish",
		  test_claim_per_service },
		{ "race: claim against rescue", test_race_claim_rescue },
		{ "rescue: a service's own maxAttempts", test_rescue_service_limit },
		{ "race: finish against rescue (both orders), out of attempts",
		  test_race_finish_rescue },
		{ "race: cancel against finish (both orders)", test_race_cancel_finish },
		{ "race: cancel against rescue (both orders)", test_race_cancel_rescue },
		{ "race: two claims take disjoint rows", test_race_claim_claim },
		{ "a lost requeue written again misses the same dispatcher's new claim",
		  test_lost_requeue_reclaimed },
		{ "started_at from the receipt's duration_ms, a bad one left out",
		  test_finish_duration },
		{ "a late requeue of lost or left claims misses the claims made since",
		  test_late_requeue_misses_new_claim },
		{ "position() of a new claim does not answer the claim before's POSITION",
		  test_position_of_new_claim },
		{ "locks: start, position and rescue skip a locked row, say so, do it after",
		  test_locked_rows_skipped },
		{ "locks: a key-share lock (a foreign key's) is not skipped",
		  test_key_share_not_skipped },
		{ "race: a rescue passes over a stale dispatcher's claim in flight, put off",
		  test_race_own_claim_rescue },
		{ "the rescue requeues held rows whose dispatcher has no row",
		  test_rescue_orphans },
		{ "identity: instance and token; another life's row is left alone",
		  test_identity_token },
		{ "identity: a takeover waits for the claim of the life before",
		  test_takeover_waits_for_claim },
		{ "locks: the beat passes a LOCK TABLE job; the rescue after it spares who beat",
		  test_beat_passes_table_lock },
		{ "migration 009 keeps submit()'s grants, idempotent", test_migrate_009_grants },
		{ "a failed migration keeps the ones committed before it",
		  test_migrate_each_committed },
		{ "pause and resume: every claim leaves a paused service, position says so",
		  test_pause_resume },
		{ "retry: its answers, stopping until the cancelled run ended; attempts",
		  test_retry_attempts },
		{ "retry: the sweep and the start-up look end the attempts nobody runs",
		  test_retry_lost_cancel },
		{ "attempts: done and failed stay in the row, attempts(id) shows them all",
		  test_attempts_view },
		{ "unique jobs: one per key, unique_for, the checks, two submits at once",
		  test_unique_jobs },
		{ "bulk: submit_many in order, cancel_many's answers; a finish batch cannot "
		  "deadlock with it",
		  test_bulk },
		{ "a start clears the last attempt's progress", test_start_clears_progress },
		{ "teardown", test_teardown },
		{ NULL, NULL }
	};
	return run_suite("dispatch-sql", cases);
}
