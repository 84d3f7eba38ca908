/*
 * dispatch_fixture.c - see dispatch_fixture.h.
 */
#include "dispatch_fixture.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *bin(void)
{
	const char *b = getenv("EXECDISPATCH_BIN");
	return b ? b : "./execdispatch";
}

static const char *sql_dir_env(void)
{
	static char env[600];
	const char *top = getenv("TOP_SRCDIR");

	snprintf(env, sizeof env, "EXECDISPATCH_SQL_DIR=%s/sql/migrations", top ? top : "..");
	return env;
}

const char *df_exec_body(int slots)
{
	static char body[1024];

	snprintf(body, sizeof body,
		 "waitgroups:\n"
		 "  wg:\n"
		 "    processes: %d\n"
		 "services:\n"
		 "  work:\n"
		 "    waitgroup: wg\n"
		 "    commands:\n"
		 "      true: {prog: \"true\"}\n"
		 "      false: {prog: \"false\"}\n"
		 "      sleep: {prog: sleep}\n"
		 "      sh: {prog: /bin/sh}\n"
		 "      date: {prog: /bin/date}\n"
		 "logLevel: info\n",
		 slots);
	return body;
}

int df_run_tool(char *out, size_t outlen, const char *const *args)
{
	char file[] = "/tmp/es-dtool-XXXXXX";
	int fd = mkstemp(file), st;
	char *argv[16];
	size_t n = 0, len;
	unsigned char *txt;
	pid_t pid;

	if (fd < 0)
		return -1;
	close(fd);
	argv[n++] = (char *)bin();
	for (; *args && n < 15; args++)
		argv[n++] = (char *)*args;
	argv[n] = NULL;
	pid = harness_spawn(file, sql_dir_env(), argv);
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		st = -1;
	txt = harness_read_file(file, &len);
	snprintf(out, outlen, "%s", txt ? (char *)txt : "");
	free(txt);
	unlink(file);
	return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int df_start(struct dfix *f)
{
	char out[2048];
	int rc;

	memset(f, 0, sizeof *f);
	snprintf(f->dir, sizeof f->dir, "/tmp/es-disp-XXXXXX");
	if (!mkdtemp(f->dir) || pgtest_start(&f->pg) < 0)
		return -1;
	f->conninfo = f->pg.conninfo;
	if (df_write_config(f, 0, NULL) < 0)
		return -1;
	const char *args[] = { "--migrate", "-c", f->cfg[0], NULL };
	rc = df_run_tool(out, sizeof out, args);
	if (rc != 0) {
		fprintf(stderr, "migrate failed (%d): %s\n", rc, out);
		return -1;
	}
	f->c = pgtest_connect(f->pg.conninfo);
	return f->c ? 0 : -1;
}

int df_start_exec(struct dfix *f, int i, int slots)
{
	if (harness_start(&f->es[i], 1, df_exec_body(slots), NULL) < 0)
		return -1;
	if (i >= f->nes)
		f->nes = i + 1;
	return 0;
}

int df_write_config(struct dfix *f, int i, const char *extra)
{
	FILE *out;

	snprintf(f->cfg[i], sizeof f->cfg[i], "%s/d%d.yml", f->dir, i);
	snprintf(f->log[i], sizeof f->log[i], "%s/d%d.log", f->dir, i);
	out = fopen(f->cfg[i], "w");
	if (!out)
		return -1;
	fprintf(out, "database: \"%s\"\nexecservers:\n", f->conninfo);
	for (int e = 0; e < f->nes; e++)
		fprintf(out, "  - ws://127.0.0.1:%d\n", f->es[e].port);
	if (f->nes == 0)
		fprintf(out, "  - ws://127.0.0.1:9\n");
	fprintf(out, "instanceId: d%d\n", i);
	/* the tests' timings, unless extra sets the key itself */
	static const char *const defaults[] = { "pollMs: 100",      "heartbeatSec: 1",
						"staleAfterSec: 3", "cancelPollMs: 100",
						"retryDelaySec: 1", "connectTimeoutSec: 30",
						"logLevel: debug" };
	for (size_t k = 0; k < sizeof defaults / sizeof defaults[0]; k++) {
		int klen = (int)(strchr(defaults[k], ':') - defaults[k]) + 1;
		char key[64];
		snprintf(key, sizeof key, "%.*s", klen, defaults[k]);
		if (!extra || !strstr(extra, key))
			fprintf(out, "%s\n", defaults[k]);
	}
	fprintf(out, "%s", extra ? extra : "");
	return fclose(out);
}

int df_spawn_disp(struct dfix *f, int i)
{
	char *argv[] = { (char *)bin(), "-f", "-c", f->cfg[i], NULL };

	f->disp[i] = harness_spawn(f->log[i], sql_dir_env(), argv);
	return f->disp[i] < 0 ? -1 : 0;
}

int df_start_with_metrics(struct dfix *f, int i, const char *extra)
{
	char lines[512];
	int port = harness_free_port();

	snprintf(lines, sizeof lines, "metrics: 127.0.0.1:%d\n%s", port, extra ? extra : "");
	if (port <= 0 || df_write_config(f, i, lines) < 0 || df_start_disp(f, i) < 0)
		return -1;
	return port;
}

double df_metric_value(int port, const char *series)
{
	char cmd[200], line[512];
	size_t n = strlen(series);
	int labelled = strchr(series, '{') != NULL;
	double v = -1;
	FILE *p;

	snprintf(cmd, sizeof cmd, "curl -sf --max-time 2 http://127.0.0.1:%d/metrics", port);
	p = popen(cmd, "r");
	while (p && fgets(line, sizeof line, p))
		if (strncmp(line, series, n) == 0 &&
		    (line[n] == ' ' || (line[n] == '{' && !labelled)))
			v = strtod(strchr(line + n, ' ') + 1, NULL);
	if (p)
		pclose(p);
	return v;
}

long long df_metric(int port, const char *series)
{
	return (long long)df_metric_value(port, series);
}

int df_wait_metric(int port, const char *series, long long want, int timeout_ms)
{
	for (long long t0 = harness_now_ms(); df_metric(port, series) != want; harness_sleep_ms(50))
		if (harness_now_ms() - t0 >= timeout_ms)
			return -1;
	return 0;
}

int df_wait_statements(struct dfix *f, int n, int timeout_ms)
{
	static const char *const latest =
		"SELECT coalesce(floor(extract(epoch FROM max(query_start)) * 1e6), 0)::bigint "
		"FROM pg_stat_activity WHERE application_name = 'execdispatch'";
	long long last = pgtest_int(f->c, "%s", latest), t0 = harness_now_ms();

	while (n > 0 && harness_now_ms() - t0 < timeout_ms) {
		long long now = pgtest_int(f->c, "%s", latest);
		if (now != last) {
			n--;
			last = now;
		}
		harness_sleep_ms(10);
	}
	return n > 0 ? -1 : 0;
}

int df_wait_log(struct dfix *f, int i, const char *text, int timeout_ms)
{
	for (long long t0 = harness_now_ms();; harness_sleep_ms(50)) {
		size_t len;
		unsigned char *log = harness_read_file(f->log[i], &len);
		int found = log && strstr((char *)log, text);

		free(log);
		if (found)
			return 0;
		if (harness_now_ms() - t0 >= timeout_ms)
			return -1;
	}
}

/* Whether dispatcher i's log says its start is complete (the first
 * contact's last step, the requeue of an earlier life's claims, done).
 * A dispatcher configured quieter than info (the benchmark's) never logs
 * that line: its registration is taken for the start (nothing there makes
 * claimed rows by hand for the requeue to take). */
static int started_up(struct dfix *f, int i)
{
	char line[80];
	size_t len;
	unsigned char *cfg = harness_read_file(f->cfg[i], &len);
	int quiet = cfg && (strstr((char *)cfg, "logLevel: warn") ||
			    strstr((char *)cfg, "logLevel: error"));
	unsigned char *log;
	int yes;

	free(cfg);
	if (quiet)
		return 1;
	log = harness_read_file(f->log[i], &len);

	snprintf(line, sizeof line, "[execdispatch %ld] info: database: schema version",
		 (long)f->disp[i]);
	yes = log && strstr((char *)log, line);
	free(log);
	return yes;
}

int df_start_disp(struct dfix *f, int i)
{
	char inst[16];

	if (df_spawn_disp(f, i) < 0)
		return -1;
	snprintf(inst, sizeof inst, "d%d", i);
	/* a start past a silent first host waits out its connect_timeout
	 * (5 s) before registering: the budget is well beyond that, under
	 * the load of a parallel make check */
	for (long long t0 = harness_now_ms(); harness_now_ms() - t0 < DF_START_MS;
	     harness_sleep_ms(20)) {
		int st;
		if (pgtest_int(f->c,
			       "SELECT count(*) FROM execdispatch.dispatcher WHERE instance = '%s'",
			       inst) == 1 &&
		    started_up(f, i))
			return 0;
		if (waitpid(f->disp[i], &st, WNOHANG) == f->disp[i]) {
			f->disp[i] = 0;
			break;
		}
	}
	harness_tail("dispatcher did not register", f->log[i], 30);
	/* not left running: it would hold instance d<i> against the next
	 * test's dispatcher */
	if (f->disp[i])
		harness_reap(&f->disp[i], SIGKILL, 2000);
	return -1;
}

int df_stop_disp(struct dfix *f, int i, int sig, int timeout_ms)
{
	return harness_reap(&f->disp[i], sig, timeout_ms);
}

void df_cleanup(struct dfix *f, int failed)
{
	for (int i = 0; i < DF_MAX_DISP; i++) {
		if (f->disp[i])
			harness_reap(&f->disp[i], SIGKILL, 2000);
		if (failed && f->log[i][0])
			harness_tail("dispatcher", f->log[i], 40);
	}
	for (int e = 0; e < f->nes; e++) {
		if (failed)
			harness_dump_log(&f->es[e]);
		harness_stop(&f->es[e], 5000);
		harness_cleanup(&f->es[e]);
	}
	if (f->c)
		PQfinish(f->c);
	f->c = NULL;
	pgtest_cleanup(&f->pg);
	if (f->dir[0])
		harness_remove_dir(f->dir);
}

long long df_submit(struct dfix *f, const char *job, int priority)
{
	const char *params[2] = { job, NULL };
	char prio[16];
	PGresult *res;
	long long id = -1;

	snprintf(prio, sizeof prio, "%d", priority);
	params[1] = prio;
	res = PQexecParams(f->c, "SELECT execdispatch.submit('work', $1::jsonb, $2::int)", 2, NULL,
			   params, NULL, NULL, 0);
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	else
		fprintf(stderr, "submit: %s", PQresultErrorMessage(res));
	PQclear(res);
	return id;
}

int df_wait_final(struct dfix *f, int timeout_ms)
{
	long long end = harness_now_ms() + timeout_ms;

	while (harness_now_ms() < end) {
		if (pgtest_int(f->c, "SELECT count(*) FROM execdispatch.job "
				     "WHERE state IN ('queued', 'claimed', 'running')") == 0)
			return 0;
		harness_sleep_ms(50);
	}
	return -1;
}

long long df_held(struct dfix *f, const char *instance)
{
	return pgtest_int(f->c,
			  "SELECT count(*) FROM execdispatch.job WHERE runner_instance = '%s' "
			  "AND state IN ('claimed', 'running')",
			  instance);
}

int df_make_ledger(struct dfix *f)
{
	PGresult *r = pgtest_query(
		f->c, "CREATE TABLE ledger (job_id bigint NOT NULL, attempt int NOT NULL, "
		      "started_at timestamptz NOT NULL, finished_at timestamptz, UNIQUE (job_id, "
		      "attempt)); "
		      "CREATE TABLE violations (id bigint, old_state text, new_state text); "
		      "CREATE FUNCTION final_guard() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
		      " IF OLD.state IN ('done', 'failed', 'cancelled') THEN "
		      "  INSERT INTO violations VALUES (OLD.id, OLD.state, NEW.state); END IF; "
		      " RETURN NEW; END $$; "
		      "CREATE TRIGGER final_guard BEFORE UPDATE ON execdispatch.job FOR EACH ROW "
		      "EXECUTE FUNCTION final_guard()");
	PQclear(r);
	return r ? 0 : -1;
}

const char *df_ledger_job(struct dfix *f, char *buf, size_t len, int ms, int split)
{
	static const char ins[] = "INSERT INTO ledger VALUES ($EXECDISPATCH_JOB_ID, "
				  "$EXECDISPATCH_ATTEMPT, clock_timestamp())";
	static const char upd[] =
		"UPDATE ledger SET finished_at = clock_timestamp() "
		"WHERE job_id = $EXECDISPATCH_JOB_ID AND attempt = $EXECDISPATCH_ATTEMPT";
	char script[2048];

	/* one psql session and three autocommitted statements, or (split) two
	 * sessions with a sleep between them that holds no connection, each
	 * tried again while the database cannot be reached (psql's exit
	 * status 2; a retried INSERT may find its row committed already) */
	if (split)
		snprintf(script, sizeof script,
			 "P='/usr/bin/psql -X -q -v ON_ERROR_STOP=1'; "
			 "$P -c \\\"%s\\\" >/dev/null; rc=$?; "
			 "while [ $rc = 2 ]; do sleep 0.2; "
			 "$P -c \\\"%s ON CONFLICT DO NOTHING\\\" >/dev/null; rc=$?; done; "
			 "[ $rc = 0 ] || exit $rc; sleep %d.%03d; "
			 "$P -c \\\"%s\\\" >/dev/null; rc=$?; "
			 "while [ $rc = 2 ]; do sleep 0.2; $P -c \\\"%s\\\" >/dev/null; rc=$?; "
			 "done; "
			 "exit $rc",
			 ins, ins, ms / 1000, ms % 1000, upd, upd);
	else
		snprintf(script, sizeof script,
			 "exec /usr/bin/psql -X -q -v ON_ERROR_STOP=1 -c \\\"%s\\\" "
			 "-c \\\"SELECT pg_sleep(%d / 1000.0)\\\" -c \\\"%s\\\" >/dev/null",
			 ins, ms, upd);
	snprintf(buf, len,
		 "{\"command\":\"sh\",\"args\":[\"-c\",\"%s\"],"
		 "\"env\":[\"PGHOST=127.0.0.1\",\"PGPORT=%d\","
		 "\"PGUSER=postgres\",\"PGDATABASE=postgres\"]}",
		 script, f->pg.port);
	return buf;
}

int df_execctl(char *out, size_t len, const char *fmt, ...)
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
	/* execctl sits next to execdispatch in the build directory */
	snprintf(cmd, sizeof cmd, "%.*sexecctl %s 2>&1",
		 bin ? (int)(strrchr(bin, '/') + 1 - bin) : 2, bin ? bin : "./", args);
	p = popen(cmd, "r");
	n = p ? fread(out, 1, len - 1, p) : 0;
	out[n] = '\0';
	st = p ? pclose(p) : -1;
	return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
