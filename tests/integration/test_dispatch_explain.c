/*
 * test_dispatch_explain.c - the plans of execdispatch's statements
 * (sql/queries/NAME.sql, as compiled in) on a job table of a million rows,
 * against a real PostgreSQL: 97 % finished, 2 % queued over 20 services
 * and 14 priorities, 1 % held by four dispatchers.  Each hot statement is
 * PREPAREd as the daemon's text and EXPLAINed (FORMAT JSON) with
 * representative parameters twice, under plan_cache_mode
 * force_generic_plan and force_custom_plan (the daemon's unnamed
 * statements get custom plans; a server set to generic plans gets the
 * other); every index its row of the table below names must be in the
 * plan, and a sequential scan of job fails it.  EXPLAIN without ANALYZE
 * runs nothing: the table stays as filled.  A paused service's backlog
 * (migration 009) is shown unread by the claims (EXPLAIN ANALYZE in a
 * transaction rolled back: the buffers they touch).
 *
 * Also the fragments the statements share, each written out in every
 * statement (pasteable), are checked to read alike.
 *
 * Run by the first pass of scripts/test.sh only (the sanitizer pass
 * leaves it out): filling the table takes seconds, and what it checks
 * does not depend on the build's sanitizers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>
#include <json-c/json.h>

#include "dispatch/queries.h"
#include "dispatch_fixture.h"
#include "suite.h"

static struct dfix F;

#define TOKEN "2026-01-02 03:04:05.678901+00"
#define ROWS 1000000

/* ---- the shared fragments ---- */

/* s with each run of blanks made one space, none after "(" or before ")"
 * and ",", into out. */
static void squeeze(const char *s, size_t n, char *out, size_t len)
{
	size_t o = 0;
	for (size_t i = 0; i < n && o + 1 < len; i++) {
		int blank = s[i] == ' ' || s[i] == '\t' || s[i] == '\n';
		if (blank && (o == 0 || out[o - 1] == ' ' || out[o - 1] == '('))
			continue;
		if ((s[i] == ')' || s[i] == ',') && o > 0 && out[o - 1] == ' ')
			o--;
		out[o++] = blank ? ' ' : s[i];
	}
	out[o] = '\0';
}

/* Every occurrence of from in s replaced by to (in place, len bytes). */
static void replace_all(char *s, size_t len, const char *from, const char *to)
{
	char tmp[8192];
	size_t o = 0, fl = strlen(from), tl = strlen(to);
	for (const char *p = s; *p && o + tl + 1 < sizeof tmp;) {
		if (strncmp(p, from, fl) == 0) {
			memcpy(tmp + o, to, tl);
			o += tl;
			p += fl;
		} else {
			tmp[o++] = *p++;
		}
	}
	tmp[o] = '\0';
	snprintf(s, len, "%s", tmp);
}

/* The nth (0: first) piece of text from `from` through the end of the
 * first `to` after it, squeezed, with param made "$P" and param2 "$Q"
 * (either NULL: none); 0, or -1 when there is none. */
static int piece(const char *text, int nth, const char *from, const char *to, const char *param,
		 const char *param2, char *out, size_t len)
{
	const char *a = text, *b;
	for (int i = 0; a && i <= nth; i++)
		if ((a = strstr(i ? a + 1 : a, from)) == NULL)
			return -1;
	if (!(b = strstr(a, to)))
		return -1;
	squeeze(a, (size_t)(b - a) + strlen(to), out, len);
	if (param)
		replace_all(out, len, param, "$P");
	if (param2)
		replace_all(out, len, param2, "$Q");
	return 0;
}

/* One fragment as it stands in one statement: the statement, which
 * occurrence, and the parameters that differ from one to the other
 * (param read as $P, param2 as $Q). */
struct frag_use {
	const char *stmt_name, *text;
	int nth;
	const char *param, *param2;
};

/* Every use reads as the first one: 0, or -1 (printed). */
static int same_fragment(const char *what, const char *from, const char *to,
			 const struct frag_use *uses, int n)
{
	char first[8192], other[8192];
	int bad = 0;

	if (piece(uses[0].text, uses[0].nth, from, to, uses[0].param, uses[0].param2, first,
		  sizeof first) < 0) {
		fprintf(stderr, "%s: not found in %s\n", what, uses[0].stmt_name);
		return -1;
	}
	for (int i = 1; i < n; i++) {
		if (piece(uses[i].text, uses[i].nth, from, to, uses[i].param, uses[i].param2, other,
			  sizeof other) < 0) {
			fprintf(stderr, "%s: not found in %s\n", what, uses[i].stmt_name);
			bad = -1;
		} else if (strcmp(first, other) != 0) {
			fprintf(stderr, "%s differs:\n  %s: %s\n  %s: %s\n", what,
				uses[0].stmt_name, first, uses[i].stmt_name, other);
			bad = -1;
		}
	}
	return bad;
}

static void test_fragments(void)
{
	/* "me": our dispatcher row of this life, locked FOR KEY SHARE, in
	 * every statement that changes rows of "me" */
	const struct frag_use me[] = {
		{ "claim", DQ_CLAIM, 0, "$6", NULL },
		{ "claim_exec", DQ_CLAIM_EXEC, 0, "$6", NULL },
		{ "finish_claim", DQ_FINISH_CLAIM, 0, "$11", NULL },
		{ "requeue_claims", DQ_REQUEUE_CLAIMS, 0, "$5", NULL },
	};
	/* ...and read, unlocked, by the looks that change nothing */
	const struct frag_use there[] = {
		{ "find_own", DQ_FIND_OWN, 0, "$2", NULL },
		{ "find_lost", DQ_FIND_LOST, 0, "$4", NULL },
	};
	/* the rescue's outcome for a held row whose dispatcher is gone */
	const struct frag_use requeue[] = {
		{ "rescue (moved)", DQ_RESCUE, 0, "$3", "$4" },
		{ "rescue (lone)", DQ_RESCUE, 1, "$3", "$4" },
		{ "requeue_claims", DQ_REQUEUE_CLAIMS, 0, "$4", "$6" },
		{ "leave", DQ_LEAVE, 0, "$3", "$4" },
	};
	/* the change of the picked rows to claimed */
	const struct frag_use claim_set[] = {
		{ "claim", DQ_CLAIM, 0, "(SELECT id FROM picked)", NULL },
		{ "claim_exec", DQ_CLAIM_EXEC, 0, "(SELECT id FROM picked)", NULL },
		{ "finish_claim", DQ_FINISH_CLAIM, 0, "(SELECT id FROM picked_s)", NULL },
	};
	/* the outcomes */
	const struct frag_use finish[] = {
		{ "finish", DQ_FINISH, 0, NULL, NULL },
		{ "finish_claim", DQ_FINISH_CLAIM, 0, NULL, NULL },
	};
	/* each service's pick up to its admission */
	const struct frag_use per_service[] = {
		{ "claim_exec", DQ_CLAIM_EXEC, 0, NULL, NULL },
		{ "finish_claim", DQ_FINISH_CLAIM, 0, NULL, NULL },
	};
	char sq[8192];

	CU_ASSERT_EQUAL(same_fragment("the CTE me", "me AS MATERIALIZED", "FOR KEY SHARE)", me, 4),
			0);
	CU_ASSERT_EQUAL(same_fragment("our row there", "EXISTS (SELECT 1 FROM @schema@.dispatcher",
				      "::timestamptz)", there, 2),
			0);
	CU_ASSERT_EQUAL(same_fragment("the rescue's outcome", "state = CASE WHEN j.attempts >=",
				      "start_after = now()", requeue, 4),
			0);
	CU_ASSERT_EQUAL(same_fragment("the claim's change",
				      "UPDATE @schema@.job j SET state = 'claimed'", "AS waited",
				      claim_set, 3),
			0);
	CU_ASSERT_EQUAL(same_fragment("the outcomes' change",
				      "UPDATE @schema@.job j SET state = u.state", "RETURNING j.id",
				      finish, 2),
			0);
	CU_ASSERT_EQUAL(
		same_fragment("the per-service pick", "CROSS JOIN LATERAL", ") p)", per_service, 2),
		0);
	/* every pick is guarded by me */
	const char *picks[] = { DQ_CLAIM, DQ_CLAIM_EXEC, DQ_FINISH_CLAIM };
	for (size_t i = 0; i < 3; i++) {
		squeeze(picks[i], strlen(picks[i]), sq, sizeof sq);
		CU_ASSERT_PTR_NOT_NULL(strstr(sq, "AND EXISTS (SELECT 1 FROM me)"));
	}
	/* the checks above find what they look for (a fragment changed in
	 * one statement is reported) */
	const struct frag_use changed[] = {
		{ "claim", DQ_CLAIM, 0, "$6", NULL },
		{ "finish_claim", DQ_FINISH_CLAIM, 0, "$1", NULL },
	};
	fprintf(stderr, "(a difference is expected next)\n");
	CU_ASSERT_EQUAL(
		same_fragment("the CTE me", "me AS MATERIALIZED", "FOR KEY SHARE)", changed, 2),
		-1);
}

/* ---- a million rows ---- */

static void test_fill(void)
{
	long long t0 = harness_now_ms(), t1;

	/* triggers off while filling (the submit NOTIFY, the payload size) */
	PQclear(pgtest_query(F.c, "SET session_replication_role = replica"));
	PQclear(pgtest_query(
		F.c, "INSERT INTO execdispatch.dispatcher (instance, host, pid, started_at) "
		     "SELECT 'd' || g, 'h', g, '" TOKEN "' FROM generate_series(0, 3) g"));
	/* g % 100: 0..96 finished (done, failed, cancelled), 97, 98 queued,
	 * 99 held (claimed or running) by d0..d3; finished over the last 7
	 * days and an hour (the janitor of retainDoneDays 7 runs hourly),
	 * the queued ones due over the last hour */
	PGresult *r = pgtest_query(
		F.c,
		"INSERT INTO execdispatch.job (service, priority, job, state, attempts, claims, "
		" runner_instance, start_after, created_at, started_at, finished_at, error, "
		" receipt) "
		"SELECT 'svc' || (g / 100 %% 20), (g / 100 %% 14) - 6, "
		" '{\"command\": \"true\"}', s.state, "
		" CASE WHEN s.state = 'queued' THEN 0 ELSE 1 END, "
		" CASE WHEN s.state = 'queued' THEN 0 ELSE 1 END, "
		" CASE WHEN s.state IN ('claimed', 'running') THEN 'd' || (g / 100 %% 4) END, "
		" now() - make_interval(secs => g %% 3600), now() - interval '9 days', "
		" CASE WHEN s.state NOT IN ('queued', 'claimed') THEN now() - interval '9 days' "
		"END, "
		" CASE WHEN s.fin THEN now() - make_interval(secs => g %% (7 * 86400 + 3600)) END, "
		" CASE WHEN s.state = 'failed' THEN 'exit' END, "
		" CASE WHEN s.fin THEN '{\"exit_code\": 0, \"duration_ms\": 5}'::jsonb END "
		"FROM generate_series(1, %d) g, LATERAL (SELECT st AS state, "
		"  st IN ('done', 'failed', 'cancelled') AS fin FROM (SELECT CASE "
		"   WHEN g %% 100 < 90 THEN 'done' WHEN g %% 100 < 95 THEN 'failed' "
		"   WHEN g %% 100 < 97 THEN 'cancelled' WHEN g %% 100 < 99 THEN 'queued' "
		"   WHEN g / 2000 %% 2 = 0 THEN 'claimed' ELSE 'running' END AS st) x) s",
		ROWS);
	CU_ASSERT_PTR_NOT_NULL(r);
	PQclear(r);
	PQclear(pgtest_query(F.c, "RESET session_replication_role"));
	t1 = harness_now_ms();
	PQclear(pgtest_query(F.c, "VACUUM ANALYZE execdispatch.job"));
	PQclear(pgtest_query(F.c, "ANALYZE execdispatch.dispatcher"));
	printf("\n  filled %d rows in %lld ms, vacuumed and analyzed in %lld ms\n", ROWS, t1 - t0,
	       harness_now_ms() - t1);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job"), ROWS);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE state = "
					"'queued'"),
			ROWS / 50);
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE state IN "
					"('claimed', 'running')"),
			ROWS / 100);
}

/* ---- the plans ---- */

/* What the arguments of a case may name, found in the filled table. */
static char held_ids[512], held_claims[512], claimed_id[32], done_id[32], queued_id[32];

/* tmpl with @ids@, @claims@ (arrays of 20 rows d0 holds, claimed),
 * @id@ (one of them), @done@ (a done row) and @token@ filled in. */
static void args_of(const char *tmpl, char *out, size_t len)
{
	snprintf(out, len, "%s", tmpl);
	replace_all(out, len, "@ids@", held_ids);
	replace_all(out, len, "@claims@", held_claims);
	replace_all(out, len, "@id@", claimed_id);
	replace_all(out, len, "@done@", done_id);
	replace_all(out, len, "@queued@", queued_id);
	replace_all(out, len, "@token@", "'" TOKEN "'");
}

/* Each statement, its EXECUTE arguments, and the indexes on job its plan
 * must use (every one; "x|y": either; the dispatcher table's few rows may
 * be read any way).  Where the rows of the arrays are few, job_holder (the
 * rows the instance holds) serves as well as job_pkey, and which of the two
 * a generic plan takes depends on ANALYZE's random sample (finish chose
 * job_holder in one run of many).  execctl's submit, position and cancel are calls of the SQL API's
 * functions, whose statements EXPLAIN does not show. */
static const struct plan_case {
	const char *name, *text, *args, *indexes;
} plans[] = {
	{ "claim", DQ_CLAIM, "'d0', 10, '{svc0}', false, -1000, @token@", "job_claim job_pkey" },
	{ "claim (local)", DQ_CLAIM, "'d0', 10, '{svc0}', true, 2, @token@", "job_claim job_pkey" },
	{ "claim_exec", DQ_CLAIM_EXEC, "'d0', '{svc1,svc2,svc3}', '{10,10,10}', 10, '{}', @token@",
	  "job_claim_service job_pkey" },
	{ "finish", DQ_FINISH,
	  "'d0', '{@id@}', '{1}', '{done}', '{0}', '{0}', '{NULL}', '{\"{}\"}'",
	  "job_pkey|job_holder" },
	{ "finish_claim", DQ_FINISH_CLAIM,
	  "'d0', '{@id@}', '{1}', '{done}', '{0}', '{0}', '{NULL}', '{\"{}\"}', "
	  "'{svc1,svc2}', '{10,10}', @token@",
	  "job_pkey|job_holder job_claim_service" },
	{ "start", DQ_START, "'d0', '@ids@', '@claims@'", "job_pkey|job_holder" },
	{ "held", DQ_HELD, "'d0', '@ids@'", "job_pkey" },
	{ "position", DQ_POSITION, "@id@, 'd0', 1, '{\"ahead\": 0}'", "job_pkey" },
	{ "landed", DQ_LANDED, "@done@, 1, 'done', NULL, '{}', 'd0'", "job_pkey" },
	{ "beat", DQ_BEAT, "'d0', @token@, NULL", "" },
	{ "register", DQ_REGISTER, "'d0', 'h', 1, 30, @token@", "" },
	{ "rescue", DQ_RESCUE, "'d0', 30, 3, '{\"svc1\": 1}'", "job_holder job_pkey" },
	{ "find_own", DQ_FIND_OWN, "'d0', @token@", "job_holder" },
	{ "find_lost", DQ_FIND_LOST, "'d0', '@ids@', '@claims@', @token@", "job_holder" },
	{ "requeue_claims", DQ_REQUEUE_CLAIMS,
	  "'d0', '@ids@', '@claims@', 3, @token@, '{\"svc1\": 1}'", "job_pkey|job_holder" },
	{ "leave", DQ_LEAVE, "'d0', @token@, 3, '{\"svc1\": 1}'", "job_holder" },
	{ "janitor", DQ_JANITOR, "7", "job_finished" },
	{ "queue_stats", DQ_QUEUE_STATS, NULL, "job_claim|job_claim_service job_holder" },
	{ "claims_settled", DQ_CLAIMS_SETTLED, "'d0', @token@", "" },
	{ "ctl_show", DQ_CTL_SHOW, "@done@", "job_pkey" },
	{ "ctl_show_json", DQ_CTL_SHOW_JSON, "@done@", "job_pkey" },
	{ "ctl_final", DQ_CTL_FINAL, "@done@", "job_pkey" },
	/* the pages of execctl jobs | stats and the console (migration 011):
	 * first pages and the pages after a job, with and without a service */
	{ "list_jobs", DQ_LIST_JOBS, "NULL, NULL, NULL, 50", "job_pkey" },
	{ "list_jobs (after)", DQ_LIST_JOBS, "NULL, NULL, @done@, 50", "job_pkey" },
	/* since: the binary search for its first id and the page, all on
	 * job_pkey (the fill's rows were all created 9 days ago) */
	{ "list_jobs (since)", DQ_LIST_JOBS, "NULL, now() - interval '10 days', @done@, 50",
	  "job_pkey" },
	{ "list_queued", DQ_LIST_QUEUED, "NULL, NULL, NULL, 50", "job_claim" },
	{ "list_queued (after)", DQ_LIST_QUEUED, "NULL, NULL, @queued@, 50", "job_pkey job_claim" },
	{ "list_queued (svc)", DQ_LIST_QUEUED, "'svc3', NULL, @queued@, 50",
	  "job_pkey job_claim_service|job_claim" },
	{ "list_held", DQ_LIST_HELD, "'running', NULL, NULL, @id@, 50", "job_holder|job_pkey" },
	{ "list_finished", DQ_LIST_FINISHED, "'failed', NULL, NULL, NULL, 50", "job_finished" },
	{ "list_finished (after)", DQ_LIST_FINISHED, "'done', NULL, NULL, @done@, 50",
	  "job_pkey job_finished" },
	{ "list_finished (svc)", DQ_LIST_FINISHED, "'cancelled', 'svc3', NULL, @done@, 50",
	  "job_pkey job_service_finished|job_finished" },
	{ "stats", DQ_STATS, NULL, "job_claim|job_claim_service job_holder job_finished" },
	{ "console_job", DQ_CONSOLE_JOB, "@done@", "job_pkey job_attempt_pkey" },
	{ "console_dispatchers", DQ_CONSOLE_DISPATCHERS, NULL, "job_holder" },
};

/* Walks a plan node: the index names into used (space-separated), and
 * the number of sequential scans of job. */
static void walk(struct json_object *node, char *used, size_t len, int *seq_job)
{
	struct json_object *v, *subs;

	if (json_object_object_get_ex(node, "Index Name", &v)) {
		size_t n = strlen(used);
		snprintf(used + n, len - n, "%s%s", n ? " " : "", json_object_get_string(v));
	}
	if (json_object_object_get_ex(node, "Node Type", &v) &&
	    strcmp(json_object_get_string(v), "Seq Scan") == 0 &&
	    json_object_object_get_ex(node, "Relation Name", &v) &&
	    strcmp(json_object_get_string(v), "job") == 0)
		(*seq_job)++;
	if (json_object_object_get_ex(node, "Plans", &subs))
		for (size_t i = 0; i < json_object_array_length(subs); i++)
			walk(json_object_array_get_idx(subs, i), used, len, seq_job);
}

/* Whether the wl bytes at word are one of the space-separated words of
 * list. */
static int has_word(const char *list, const char *word, size_t wl)
{
	for (const char *p = list; *p;) {
		size_t n = strcspn(p, " ");
		if (n == wl && memcmp(p, word, wl) == 0)
			return 1;
		p += n + (p[n] == ' ');
	}
	return 0;
}

/* One case under one plan_cache_mode: 0, or -1 (printed). */
static int check_plan(const struct plan_case *c, int i, const char *mode)
{
	char sql[4096], args[2048], used[1024] = "";
	int seq_job = 0, bad = 0;
	PGresult *r;

	PQclear(pgtest_query(F.c, "SET plan_cache_mode = %s", mode));
	args_of(c->args ? c->args : "", args, sizeof args);
	snprintf(sql, sizeof sql, "EXPLAIN (FORMAT JSON) EXECUTE s%d%s%s%s", i, c->args ? "(" : "",
		 args, c->args ? ")" : "");
	r = pgtest_query(F.c, "%s", sql);
	if (!r || PQntuples(r) != 1) {
		fprintf(stderr, "%s: %s failed\n", c->name, sql);
		PQclear(r);
		return -1;
	}
	struct json_object *plan = json_tokener_parse(PQgetvalue(r, 0, 0)), *top;
	PQclear(r);
	if (!plan || !json_object_object_get_ex(json_object_array_get_idx(plan, 0), "Plan", &top)) {
		fprintf(stderr, "%s: no plan\n", c->name);
		json_object_put(plan);
		return -1;
	}
	walk(top, used, sizeof used, &seq_job);
	json_object_put(plan);
	for (const char *p = c->indexes; *p;) {
		size_t wl = strcspn(p, " "), found = 0;
		for (const char *a = p; a < p + wl;) { /* "x|y": either */
			size_t al = strcspn(a, " |");
			found += (size_t)has_word(used, a, al);
			a += al + (a[al] == '|');
		}
		if (!found) {
			fprintf(stderr, "%s (%s): %.*s not used; the plan uses: %s\n", c->name,
				mode, (int)wl, p, used[0] ? used : "no index");
			bad = -1;
		}
		p += wl + (p[wl] == ' ');
	}
	if (seq_job) {
		fprintf(stderr, "%s (%s): %d sequential scans of job\n", c->name, mode, seq_job);
		bad = -1;
	}
	printf("  %-16s %-18s %s%s\n", c->name, mode, used[0] ? used : "-",
	       seq_job ? " + Seq Scan on job" : "");
	return bad;
}

static void test_plans(void)
{
	char sql[8192];
	const char *modes[] = { "force_generic_plan", "force_custom_plan" };
	int failed = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(pgtest_text(
		F.c, held_ids, sizeof held_ids,
		"SELECT array_agg(id ORDER BY id)::text FROM (SELECT id FROM execdispatch.job "
		"WHERE runner_instance = 'd0' AND state = 'claimed' ORDER BY id LIMIT 20) x"));
	pgtest_text(F.c, held_claims, sizeof held_claims,
		    "SELECT array_agg(1)::text FROM generate_series(1, 20)");
	pgtest_text(F.c, claimed_id, sizeof claimed_id,
		    "SELECT min(id) FROM execdispatch.job WHERE runner_instance = 'd0' "
		    "AND state = 'claimed'");
	pgtest_text(F.c, done_id, sizeof done_id,
		    "SELECT min(id) FROM execdispatch.job WHERE state = 'done'");
	pgtest_text(F.c, queued_id, sizeof queued_id,
		    "SELECT max(id) FROM execdispatch.job WHERE state = 'queued' AND priority = 0");
	CU_ASSERT(held_ids[0] == '{' && claimed_id[0] && done_id[0] && queued_id[0]);

	printf("\n  %-16s %-18s %s\n", "statement", "plan_cache_mode", "indexes used");
	for (size_t i = 0; i < sizeof plans / sizeof plans[0]; i++) {
		char *text = dq_expand(plans[i].text, "execdispatch");
		snprintf(sql, sizeof sql, "PREPARE s%zu AS %s", i, text);
		free(text);
		PGresult *r = pgtest_query(F.c, "%s", sql);
		CU_ASSERT_PTR_NOT_NULL(r);
		PQclear(r);
		for (int m = 0; m < 2; m++)
			if (check_plan(&plans[i], (int)i, modes[m]) < 0)
				failed++;
	}
	PQclear(pgtest_query(F.c, "RESET plan_cache_mode"));
	CU_ASSERT_EQUAL(failed, 0);
}

/* The queue's figures for /metrics at a million rows: run, timed. */
static void test_queue_stats_time(void)
{
	char *text = dq_expand(DQ_QUEUE_STATS, "execdispatch");
	long long best = -1;

	for (int i = 0; i < 3; i++) {
		long long t0 = harness_now_ms();
		PGresult *r = pgtest_query(F.c, "%s", text);
		long long took = harness_now_ms() - t0;
		CU_ASSERT_PTR_NOT_NULL(r);
		/* 20 services queued, and claimed and running */
		CU_ASSERT_EQUAL(r ? PQntuples(r) : 0, 60);
		PQclear(r);
		if (best < 0 || took < best)
			best = took;
	}
	printf("\n  queue_stats at %d rows: %lld ms (best of 3)\n", ROWS, best);
	free(text);
}

/* A paused service with a backlog of 200,000 queued rows at the highest
 * priority (first in job_claim's order): the exec-bound claims, with the
 * service in their list and with the other services' share, read none of
 * them.  Each runs under EXPLAIN ANALYZE in a transaction rolled back:
 * the buffers it touched stay a few hundred (reading the backlog's index
 * entries and rows would take thousands), and it claims none of them. */
#define BACKLOG 200000
static void test_paused_backlog(void)
{
	static const struct {
		const char *name, *text, *args;
	} cases[] = {
		{ "claim_exec", DQ_CLAIM_EXEC,
		  "('d0', '{held0,svc1}', '{10,10}', 10, '{}', @token@)" },
		{ "claim_exec, others only", DQ_CLAIM_EXEC,
		  "('d0', '{}', '{}', 10, '{}', @token@)" },
		{ "finish_claim", DQ_FINISH_CLAIM,
		  "('d0', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{held0,svc1}', '{10,10}', "
		  "@token@)" },
	};
	char sql[8192], args[1024];

	PQclear(pgtest_query(
		F.c,
		"INSERT INTO execdispatch.job (service, job, priority) SELECT "
		"'held0', '{\"command\": \"true\"}', 1000 FROM generate_series(1, %d); "
		"SELECT execdispatch.pause('held0'); ANALYZE execdispatch.job",
		BACKLOG));
	printf("\n  a paused backlog of %d rows:\n", BACKLOG);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *text = dq_expand(cases[i].text, "execdispatch");
		args_of(cases[i].args, args, sizeof args);
		PQclear(pgtest_query(F.c, "BEGIN; PREPARE b%zu AS %s", i, text));
		free(text);
		snprintf(sql, sizeof sql, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE b%zu%s",
			 i, args);
		PGresult *r = pgtest_query(F.c, "%s", sql);
		struct json_object *plan = r ? json_tokener_parse(PQgetvalue(r, 0, 0)) : NULL, *top,
				   *v;
		PQclear(r);
		long long hit = -1;
		if (plan &&
		    json_object_object_get_ex(json_object_array_get_idx(plan, 0), "Plan", &top) &&
		    json_object_object_get_ex(top, "Shared Hit Blocks", &v)) {
			hit = json_object_get_int64(v);
			if (json_object_object_get_ex(top, "Shared Read Blocks", &v))
				hit += json_object_get_int64(v);
		}
		json_object_put(plan);
		CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE "
						"service = 'held0' AND state <> 'queued'"),
				0);
		PQclear(pgtest_query(F.c, "ROLLBACK"));
		printf("  %-24s %lld buffers\n", cases[i].name, hit);
		CU_ASSERT(hit >= 0 && hit < 1000);
	}
	/* resumed, the same claim takes them first */
	PQclear(pgtest_query(F.c, "SELECT execdispatch.resume('held0')"));
	char *text = dq_expand(DQ_CLAIM_EXEC, "execdispatch");
	args_of("('d0', '{held0}', '{10}', 0, '{}', @token@)", args, sizeof args);
	PQclear(pgtest_query(F.c, "BEGIN; PREPARE b9 AS %s", text));
	free(text);
	PQclear(pgtest_query(F.c, "EXECUTE b9%s", args));
	CU_ASSERT_EQUAL(pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE service = "
					"'held0' AND state = 'claimed'"),
			10);
	PQclear(pgtest_query(F.c,
			     "ROLLBACK; DELETE FROM execdispatch.job WHERE service = 'held0'"));
}

/* The counts by state at a million rows: the live states exact, the
 * finished ones estimated from the statistics (within 10 % here: the
 * sample of ANALYZE; the rarest state, 2 %, varies most), and said so. */
static void test_state_counts(void)
{
	static const struct {
		const char *state;
		long long rows;
		int estimated;
	} want[] = { { "queued", ROWS / 50, 0 },      { "claimed", ROWS / 200, 0 },
		     { "running", ROWS / 200, 0 },    { "done", ROWS / 100 * 90, 1 },
		     { "failed", ROWS / 100 * 5, 1 }, { "cancelled", ROWS / 100 * 2, 1 } };
	char *text = dq_expand(DQ_STATE_COUNTS, "execdispatch");
	PGresult *r = pgtest_query(F.c, "%s", text);
	struct json_object *a = r && PQntuples(r) == 1 ? json_tokener_parse(PQgetvalue(r, 0, 0))
						       : NULL;

	free(text);
	PQclear(r);
	CU_ASSERT_FATAL(a && json_object_array_length(a) == 6);
	for (size_t i = 0; i < 6; i++) {
		struct json_object *o = json_object_array_get_idx(a, i), *v;
		CU_ASSERT(json_object_object_get_ex(o, "state", &v) &&
			  strcmp(json_object_get_string(v), want[i].state) == 0);
		CU_ASSERT(json_object_object_get_ex(o, "estimated", &v) &&
			  json_object_get_boolean(v) == want[i].estimated);
		CU_ASSERT_FATAL(json_object_object_get_ex(o, "rows", &v));
		long long n = json_object_get_int64(v);
		if (want[i].estimated) {
			CU_ASSERT(n > want[i].rows * 90 / 100 && n < want[i].rows * 110 / 100);
		} else {
			CU_ASSERT_EQUAL(n, want[i].rows);
		}
		printf("%s  %s %lld%s", i ? "," : "\n ", want[i].state, n,
		       want[i].estimated ? " (estimated)" : "");
	}
	printf("\n");
	json_object_put(a);
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
		{ "shared fragments read alike in every statement", test_fragments },
		{ "setup: PostgreSQL, migrated", test_setup },
		{ "a million rows, analyzed", test_fill },
		{ "each hot statement uses its index, no Seq Scan on job", test_plans },
		{ "the queue's figures at a million rows, timed", test_queue_stats_time },
		{ "a paused backlog: the claims read none of it", test_paused_backlog },
		{ "counts by state: live exact, finished estimated", test_state_counts },
		{ "teardown", test_teardown },
		{ NULL, NULL }
	};
	return run_suite("dispatch-explain", cases);
}
