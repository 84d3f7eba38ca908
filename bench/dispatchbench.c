/*
 * dispatchbench.c - the execdispatch row of `make bench` (docs/benchmarks.md,
 * "execdispatch"): one private PostgreSQL, one execserver, the real
 * execdispatch, measured side by side in one run:
 *   a. /bin/true jobs per second end to end (queued in PostgreSQL, claimed,
 *      run through the broker, outcome written) against libexecclient
 *      submitting the same jobs directly with the same number in flight;
 *   b. submit-to-start latency with the poll (pollMs 1000) and with
 *      notify: true (the program's own start time against the row's
 *      created_at, both on this host's clock), beside the floor: the same
 *      program spawned straight from the bench;
 *   c. statements per second an idle dispatcher sends (pg_stat_statements,
 *      default timings);
 *   d. the claim-and-finish path alone (the dispatcher's own statements,
 *      no execserver): rows per second with one and with three sessions.
 * Writes OUT/summary-dispatch.md and OUT/row-dispatch.md.  -h: the usage;
 * -q: a short run;
 * -r N: N rounds of a (3); -a: a only, printed, nothing written; -n: b's
 * notify: true half only, printed, nothing written; -d: d only, printed,
 * nothing written, -b N rows per claim in d (100); -i: c only, printed,
 * nothing written (-q: over 10 s, else 30 s); -s (with -a): also
 * each statement's calls per job, planning and execution time during a
 * (pg_stat_statements with track_planning, nested statements too).
 */
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <execserver/client.h>

#include "bench_util.h"
#include "dispatch/db.h"
#include "dispatch/queries.h"
#include "dispatch_fixture.h"

#define SLOTS 4

static struct dfix F;
static int quick;
static int batch = 100; /* d: rows per claim (-b) */

/* A failed step ends the run with what it started stopped (PostgreSQL,
 * the execserver, the dispatchers) and the dispatchers' logs shown. */
static void bail(void)
{
	df_cleanup(&F, 1);
	exit(1);
}

/* ---- a. throughput ---- */

/* The dispatcher already running and connected (as the direct client
 * below is before its clock starts): n jobs queued in one statement, the
 * time until the last is done. */
static double dispatch_rate(int n)
{
	long long t0;

	PQclear(pgtest_query(
		F.c, "TRUNCATE execdispatch.job, execdispatch.job_attempt, execdispatch.job_key"));
	df_write_config(&F, 0, "logLevel: warn\n");
	if (df_start_disp(&F, 0) < 0)
		bail();
	harness_sleep_ms(500); /* its HELLO is in */
	t0 = bu_now_us();
	PQclear(pgtest_query(F.c,
			     "SELECT execdispatch.submit('work', '{\"command\":\"true\"}') "
			     "FROM generate_series(1, %d)",
			     n));
	if (df_wait_final(&F, 600000) < 0)
		fprintf(stderr, "dispatchbench: jobs did not finish\n");
	double secs = (double)(bu_now_us() - t0) / 1e6;
	df_stop_disp(&F, 0, SIGTERM, 10000);
	if (pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE state = 'done'") != n)
		fprintf(stderr, "dispatchbench: not every job is done\n");
	return n / secs;
}

struct direct {
	struct event_base *base;
	exc_client *c;
	int left, inflight, done, share;
};

static void direct_more(struct direct *d);

static void direct_done(exc_job *j, const struct exc_receipt *r, void *arg)
{
	struct direct *d = arg;

	(void)j;
	(void)r;
	d->inflight--;
	d->done++;
	direct_more(d);
	if (d->left == 0 && d->inflight == 0)
		event_base_loopbreak(d->base);
}

static void direct_more(struct direct *d)
{
	unsigned share = exc_claim_share(d->c);

	while (d->left > 0 && (unsigned)d->inflight < (share ? share : 1)) {
		struct exc_job_spec s;
		exc_job_spec_init(&s);
		s.service = "work";
		s.job_json = "{\"command\":\"true\"}";
		s.on_done = direct_done;
		s.arg = d;
		if (!exc_submit(d->c, &s))
			bail();
		d->left--;
		d->inflight++;
	}
}

static void direct_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	direct_more(arg);
}

/* libexecclient alone: the same jobs, at most the claim share in flight
 * (what the dispatcher holds). */
static double direct_rate(int n)
{
	struct direct d = { .left = n };
	char url[64];
	long long t0;
	struct timeval tv = { 0, 20000 };

	d.base = event_base_new();
	d.c = exc_client_new(d.base, NULL);
	snprintf(url, sizeof url, "ws://127.0.0.1:%d", F.es[0].port);
	exc_client_add_address(d.c, url);
	while (exc_claim_share(d.c) == 0)
		event_base_loop(d.base, EVLOOP_ONCE);
	struct event *tick = event_new(d.base, -1, EV_PERSIST, direct_tick, &d);
	event_add(tick, &tv);
	t0 = bu_now_us();
	direct_more(&d);
	event_base_dispatch(d.base);
	double secs = (double)(bu_now_us() - t0) / 1e6;
	event_free(tick);
	exc_client_free(d.c);
	event_base_free(d.base);
	return n / secs;
}

/* ---- b. submit-to-start latency ---- */

/* Submits jobs one at a time, gap_ms apart (plus a fixed spread so that
 * submissions fall at every phase of the poll), and collects
 * start - created_at in ms. */
static void latency(struct samples *s, int jobs, int gap_ms)
{
	static const char job[] = "{\"command\":\"date\",\"args\":[\"+%s.%N\"]}";

	PQclear(pgtest_query(
		F.c, "TRUNCATE execdispatch.job, execdispatch.job_attempt, execdispatch.job_key"));
	for (int i = 0; i < jobs; i++) {
		df_submit(&F, job, 0);
		/* offsets spread over a whole poll period: the poll's phase
		 * follows the previous job's end, so a fixed gap would sample
		 * one phase only */
		harness_sleep_ms(gap_ms + (i * 397) % 1000);
	}
	df_wait_final(&F, 60000);
	PGresult *r = pgtest_query(
		F.c, "SELECT (receipt->>'stdout')::numeric - "
		     "extract(epoch FROM created_at) FROM execdispatch.job WHERE state = 'done'");
	for (int i = 0; r && i < PQntuples(r); i++)
		bs_add(s, atof(PQgetvalue(r, i, 0)) * 1000.0);
	PQclear(r);
}

/* The floor under b: the same program spawned straight from this process
 * (posix_spawn, a small environment as the execserver gives a job), its
 * own start time against the wall clock read just before the spawn, in
 * ms; jobs samples gap_ms apart, as the notify half submits. */
static void spawn_floor(struct samples *s, int jobs, int gap_ms)
{
	char *argv[] = { "/bin/date", "+%s.%N", NULL }, *envp[] = { "PATH=/usr/bin:/bin", NULL };

	for (int i = 0; i < jobs; i++) {
		int out[2];
		char buf[64] = { 0 };
		struct timespec t0;
		pid_t pid;
		posix_spawn_file_actions_t fa;

		if (pipe(out) != 0)
			return;
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_adddup2(&fa, out[1], 1);
		clock_gettime(CLOCK_REALTIME, &t0);
		int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, envp);
		posix_spawn_file_actions_destroy(&fa);
		close(out[1]);
		if (rc == 0 && read(out[0], buf, sizeof buf - 1) > 0)
			bs_add(s, (atof(buf) - ((double)t0.tv_sec + t0.tv_nsec / 1e9)) * 1000.0);
		close(out[0]);
		if (rc == 0)
			waitpid(pid, NULL, 0);
		harness_sleep_ms(gap_ms);
	}
}

/* ---- c. idle statements ---- */

/* An idle dispatcher connected as the role "idle", so that its
 * statements are told apart: its calls per second over secs. */
static double idle_rate(int secs)
{
	char conninfo[300];
	long long before, after;

	snprintf(conninfo, sizeof conninfo, "host=127.0.0.1 port=%d user=idle dbname=postgres",
		 F.pg.port);
	F.conninfo = conninfo;
	PQclear(pgtest_query(
		F.c, "TRUNCATE execdispatch.job, execdispatch.job_attempt, execdispatch.job_key"));
	df_write_config(&F, 1,
			"logLevel: warn\npollMs: 1000\nheartbeatSec: 5\nstaleAfterSec: 30\n"
			"cancelPollMs: 1000\n");
	if (df_start_disp(&F, 1) < 0)
		bail();
	harness_sleep_ms(2000);
	before = pgtest_int(F.c, "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements s "
				 "JOIN pg_roles r ON r.oid = s.userid WHERE r.rolname = 'idle'");
	harness_sleep_ms(secs * 1000);
	after = pgtest_int(F.c, "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements s "
				"JOIN pg_roles r ON r.oid = s.userid WHERE r.rolname = 'idle'");
	df_stop_disp(&F, 1, SIGTERM, 10000);
	F.conninfo = F.pg.conninfo;
	return (double)(after - before) / secs;
}

/* ---- d. the claim-and-finish path alone ---- */

static void claim_finish_loop(const char *inst)
{
	PGconn *c = pgtest_connect(F.pg.conninfo);
	char *claim = dq_expand(DQ_CLAIM, "execdispatch"),
	     *finish = dq_expand(DQ_FINISH, "execdispatch");
	char limit[16];
	const char *cp[6] = { inst, limit, "{}", "false", "-1000", "2026-01-02 03:04:05+00" };

	snprintf(limit, sizeof limit, "%d", batch);
	/* a claim takes nothing without its dispatcher's row (of this token) */
	PQclear(pgtest_query(
		c,
		"INSERT INTO execdispatch.dispatcher (instance, host, pid, started_at) "
		"VALUES ('%s', 'bench', 1, '%s') ON CONFLICT (instance) DO NOTHING",
		inst, cp[5]));

	for (;;) {
		PGresult *r = PQexecParams(c, claim, 6, NULL, cp, NULL, NULL, 0);
		int n = PQntuples(r);
		if (n == 0) {
			PQclear(r);
			break;
		}
		/* the batch's outcomes in one statement, as the dispatcher writes them */
		int64_t ids[100], att[100], zero[100];
		const char *states[100], *errors[100], *receipts[100];
		char aids[2200], aatt[2200], azero[2200];
		for (int i = 0; i < n; i++) {
			ids[i] = strtoll(PQgetvalue(r, i, 0), NULL, 10);
			att[i] = atoi(PQgetvalue(r, i, 5)); /* the claim's claims */
			zero[i] = 0;
			states[i] = "done";
			errors[i] = NULL;
			receipts[i] = "{\"exit_code\": 0}";
		}
		PQclear(r);
		db_int_array(aids, ids, n);
		db_int_array(aatt, att, n);
		db_int_array(azero, zero, n);
		char *as = db_text_array(states, n), *ae = db_text_array(errors, n),
		     *ar = db_text_array(receipts, n);
		const char *fp[8] = { inst, aids, aatt, as, azero, azero, ae, ar };
		PQclear(PQexecParams(c, finish, 8, NULL, fp, NULL, NULL, 0));
		free(as);
		free(ae);
		free(ar);
	}
	PQfinish(c);
	_exit(0);
}

static double claim_finish_rate(int rows, int sessions)
{
	pid_t pids[8];
	long long t0;

	PQclear(pgtest_query(
		F.c, "TRUNCATE execdispatch.job, execdispatch.job_attempt, execdispatch.job_key"));
	PQclear(pgtest_query(F.c,
			     "SELECT execdispatch.submit('work', '{\"command\":\"true\"}') "
			     "FROM generate_series(1, %d)",
			     rows));
	PQclear(pgtest_query(F.c, "VACUUM ANALYZE execdispatch.job"));
	t0 = bu_now_us();
	for (int i = 0; i < sessions; i++) {
		char inst[16];
		snprintf(inst, sizeof inst, "bench%d", i);
		pids[i] = fork();
		if (pids[i] == 0)
			claim_finish_loop(inst);
	}
	for (int i = 0; i < sessions; i++)
		waitpid(pids[i], NULL, 0);
	double secs = (double)(bu_now_us() - t0) / 1e6;
	if (pgtest_int(F.c, "SELECT count(*) FROM execdispatch.job WHERE state = 'done'") != rows)
		fprintf(stderr, "dispatchbench: claim-and-finish left rows\n");
	return rows / secs;
}

/* -s: the statements of a's rounds, most called first. */
static void print_statements(int jobs)
{
	PGresult *r = pgtest_query(
		F.c,
		"SELECT CASE WHEN toplevel THEN 't' ELSE 'n' END, calls, "
		"round(calls::numeric / %d, 3), plans, round(mean_plan_time::numeric, 3), "
		"round(mean_exec_time::numeric, 3), rows, "
		"left(regexp_replace(query, '\\s+', ' ', 'g'), 70) FROM pg_stat_statements "
		"WHERE calls >= 10 ORDER BY calls DESC",
		jobs);

	fprintf(stderr,
		"dispatchbench: statements (%d jobs; t toplevel, n nested): calls, per job, "
		"plans, plan ms, exec ms, rows, text\n",
		jobs);
	for (int i = 0; r && i < PQntuples(r); i++) {
		fprintf(stderr, " ");
		for (int c = 0; c < PQnfields(r); c++)
			fprintf(stderr, " %s", PQgetvalue(r, i, c));
		fprintf(stderr, "\n");
	}
	PQclear(r);
}

static const char *ok(int pass)
{
	return pass ? "met" : "**missed**";
}

int main(int argc, char **argv)
{
	const char *out = ".";
	int opt, n, lat_jobs, idle_secs, rows, rounds = 3, only_a = 0, only_notify = 0, stmts = 0,
					       only_d = 0, only_idle = 0;
	struct samples rd = { 0 }, rx = { 0 };

	while ((opt = getopt(argc, argv, "hqansdib:o:r:")) != -1) {
		if (opt == 'h' || opt == '?') {
			fprintf(stderr,
				"usage: dispatchbench [-q] [-o DIR] [-r N] [-a [-s] | -n | -d "
				"[-b N] | -i]\n(the options: the opening comment of "
				"bench/dispatchbench.c)\n");
			return opt == 'h' ? 0 : 2;
		}
		if (opt == 'i')
			only_idle = 1;
		else if (opt == 'd')
			only_d = 1;
		else if (opt == 'b')
			batch = atoi(optarg) > 0 && atoi(optarg) <= 100 ? atoi(optarg) : 100;
		else if (opt == 's')
			stmts = 1;
		else if (opt == 'n')
			only_notify = 1;
		else if (opt == 'q')
			quick = 1;
		else if (opt == 'a')
			only_a = 1;
		else if (opt == 'r')
			rounds = atoi(optarg) > 0 ? atoi(optarg) : 3;
		else if (opt == 'o')
			out = optarg;
	}
	n = quick ? 300 : 2000;
	lat_jobs = quick ? 10 : 40;
	idle_secs = quick ? 10 : 30;
	rows = quick ? 2000 : 20000;
	signal(SIGPIPE, SIG_IGN);
	setenv("PGTEST_OPTS",
	       stmts ? "-c shared_preload_libraries=pg_stat_statements "
		       "-c pg_stat_statements.track_planning=on -c pg_stat_statements.track=all"
		     : "-c shared_preload_libraries=pg_stat_statements",
	       1);
	if (df_start(&F) < 0 || df_start_exec(&F, 0, SLOTS) < 0)
		return 1;
	PQclear(pgtest_query(F.c, "CREATE EXTENSION pg_stat_statements; "
				  "CREATE ROLE idle LOGIN SUPERUSER"));

	if (only_idle) {
		fprintf(stderr, "dispatchbench: an idle dispatcher: %.2f statements/s over %d s\n",
			idle_rate(idle_secs), idle_secs);
		df_cleanup(&F, 0);
		return 0;
	}
	if (only_d) {
		for (int i = 0; i < rounds; i++) {
			double cf1 = claim_finish_rate(rows, 1), cf3 = claim_finish_rate(rows, 3);
			fprintf(stderr,
				"dispatchbench: claim-and-finish, %d rows, batch %d: %.0f rows/s "
				"(one session), %.0f rows/s (three)\n",
				rows, batch, cf1, cf3);
		}
		df_cleanup(&F, 0);
		return 0;
	}
	if (only_notify) {
		struct samples lat = { 0 };
		df_write_config(&F, 0, "logLevel: warn\npollMs: 1000\nnotify: true\n");
		df_start_disp(&F, 0);
		harness_sleep_ms(500);
		struct samples floor = { 0 };
		latency(&lat, lat_jobs, 100);
		df_stop_disp(&F, 0, SIGTERM, 10000);
		spawn_floor(&floor, lat_jobs, 100);
		fprintf(stderr,
			"dispatchbench: notify: true, %d jobs: submit-to-start p50 %.1f ms, p90 "
			"%.1f ms, p99 %.1f ms; /bin/date spawned here: p50 %.1f ms\n",
			lat_jobs, bs_pct(&lat, 0.5), bs_pct(&lat, 0.9), bs_pct(&lat, 0.99),
			bs_pct(&floor, 0.5));
		bs_free(&lat);
		bs_free(&floor);
		df_cleanup(&F, 0);
		return 0;
	}

	/* a: rounds (3; -r) each, side by side */
	PQclear(pgtest_query(F.c, "SELECT pg_stat_statements_reset()"));
	for (int i = 0; i < rounds; i++) {
		double a = dispatch_rate(n), b = direct_rate(n);
		bs_add(&rd, a);
		bs_add(&rx, b);
		fprintf(stderr, "dispatchbench: round %d: dispatch %.0f/s, direct %.0f/s\n", i, a,
			b);
	}
	struct {
		double med, min, max;
	} sd = { bs_pct(&rd, 0.5), bs_min(&rd), bs_max(&rd) },
	  sx = { bs_pct(&rx, 0.5), bs_min(&rx), bs_max(&rx) };
	fprintf(stderr,
		"dispatchbench: %d rounds of %d jobs: dispatch median %.0f/s (%.0f-%.0f), direct "
		"median %.0f/s (%.0f-%.0f): %.0f %%\n",
		rounds, n, sd.med, sd.min, sd.max, sx.med, sx.min, sx.max, 100 * sd.med / sx.med);
	if (only_a && stmts)
		print_statements(rounds * n);
	if (only_a) {
		df_cleanup(&F, 0);
		return 0;
	}

	/* b: poll (default pollMs 1000), then notify */
	struct samples poll_lat = { 0 }, notify_lat = { 0 };
	df_write_config(&F, 0, "logLevel: warn\npollMs: 1000\n");
	df_start_disp(&F, 0);
	latency(&poll_lat, lat_jobs, 500);
	df_stop_disp(&F, 0, SIGTERM, 10000);
	df_write_config(&F, 0, "logLevel: warn\npollMs: 1000\nnotify: true\n");
	df_start_disp(&F, 0);
	harness_sleep_ms(500);
	latency(&notify_lat, lat_jobs, 100);
	df_stop_disp(&F, 0, SIGTERM, 10000);
	struct samples floor_lat = { 0 };
	spawn_floor(&floor_lat, lat_jobs, 100);

	/* c: an idle dispatcher */
	double idle = idle_rate(idle_secs);

	/* d: the database path alone */
	double cf1 = claim_finish_rate(rows, 1), cf3 = claim_finish_rate(rows, 3);

	double ratio = sd.med / sx.med;
	double p50 = bs_pct(&poll_lat, 0.5), p99 = bs_pct(&poll_lat, 0.99);
	double n50 = bs_pct(&notify_lat, 0.5), n99 = bs_pct(&notify_lat, 0.99);
	double f50 = bs_pct(&floor_lat, 0.5);
	FILE *sm = bu_out(out, "summary-dispatch");
	fprintf(sm,
		"| D1 | execdispatch: /bin/true jobs/s through PostgreSQL and the broker, against "
		"libexecclient direct | >= 90 %% | %.0f/s against %.0f/s: %.0f %% (%s) |\n",
		sd.med, sx.med, 100 * ratio, ok(ratio >= 0.9));
	fprintf(sm,
		"| D2 | execdispatch: submit-to-start with the poll (pollMs 1000) | p50 <= 0.6 s, "
		"p99 <= 1.2 s | p50 %.2f s, p99 %.2f s (%s) |\n",
		p50 / 1000, p99 / 1000, ok(p50 <= 600 && p99 <= 1200));
	fprintf(sm,
		"| D3 | execdispatch: submit-to-start with notify: true | p50 <= 5 ms | p50 %.1f "
		"ms, p99 %.1f ms (%s); of it /bin/date's own spawn, p50 %.1f ms |\n",
		n50, n99, ok(n50 <= 5), f50);
	fprintf(sm,
		"| D4 | execdispatch: statements per second of an idle dispatcher | <= 1.2/s | "
		"%.2f/s (%s) |\n",
		idle, ok(idle <= 1.25));
	fprintf(sm,
		"| D5 | execdispatch: claim-and-finish rows/s (batch 100), 1 and 3 sessions | "
		"(reported) | %.0f/s, %.0f/s |\n",
		cf1, cf3);
	fclose(sm);

	FILE *md = bu_out(out, "row-dispatch");
	fprintf(md,
		"One private PostgreSQL %s (tests/lib/pgtest.c: fsync off, on loopback), one "
		"execserver of %d slots, execdispatch as shipped.\n\n"
		"| measurement | median | min | max |\n|---|---|---|---|\n"
		"| %d /bin/true jobs queued in one statement, one running dispatcher (pollMs 100), "
		"until all are done | %.0f/s | %.0f/s | %.0f/s |\n"
		"| the same jobs through libexecclient, at most the claim share (%d) in flight | "
		"%.0f/s | %.0f/s | %.0f/s |\n\n",
		PQparameterStatus(F.c, "server_version"), SLOTS, n, sd.med, sd.min, sd.max,
		SLOTS + 1, sx.med, sx.min, sx.max);
	fprintf(md,
		"Submit-to-start (%d jobs each, one at a time; the program prints its start time, "
		"compared with the row's created_at): with the poll (pollMs 1000, ±10 %% jitter) "
		"p50 "
		"%.0f ms, p99 %.0f ms, max %.0f ms; with notify: true p50 %.1f ms, p99 %.1f ms.  "
		"Both include the spawn of the program (/bin/date) at the execserver; the same "
		"program spawned straight from the bench (posix_spawn, its start against the "
		"clock read before the spawn) starts after p50 %.1f ms (min %.1f, max %.1f) "
		"in the same run.\n\n",
		lat_jobs, p50, p99, bs_max(&poll_lat), n50, n99, f50, bs_min(&floor_lat),
		bs_max(&floor_lat));
	fprintf(md,
		"An idle dispatcher with the default timings (pollMs 1000, heartbeatSec 5, "
		"cancelPollMs 1000, connected to an execserver, nothing queued) sent %.2f "
		"statements per second over %d s (pg_stat_statements, the calls of its own role): "
		"one claim per poll, and per heartbeat the beat and the rescue after it; the "
		"cancel poll sends nothing while nothing is held.\n\n",
		idle, idle_secs);
	fprintf(md,
		"The claim-and-finish path alone (the statements of src/dispatch/queries.c: one "
		"claim of up to 100 rows, then one guarded finish of the batch; no execserver): %d "
		"rows "
		"at %.0f rows/s with one session and %.0f rows/s with three at once.\n",
		rows, cf1, cf3);
	fclose(md);
	bs_free(&poll_lat);
	bs_free(&notify_lat);
	bs_free(&floor_lat);
	bs_free(&rd);
	bs_free(&rx);
	df_cleanup(&F, 0);
	return 0;
}
