/*
 * test_jobs.c - running jobs through the broker against a real daemon:
 * placeholders, argument checks, timeout, a leader that leaves children
 * behind, descriptors that must not leak into jobs, no signal blocked or
 * ignored in a job, job directories across
 * a handler restart, and a slowloris upgrade.
 */
#include "autoconfig.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "harness.h"
#include "proto.h"
#include "suite.h"

static struct es_daemon D;

/* The service "tools" on 2 processes, jobs' directories removed by policy
 * ("none", "done", "all"), and environment at every level. */
static const char *body(const char *policy)
{
	char head[128];

	snprintf(head, sizeof head,
		 "jobRemovalPolicy: %s\n"
		 "env: [\"SHARED=global\", \"GLOBALV=g\"]\n",
		 policy);
	return harness_tools_body(head, 2, "echo sh ls sleep true",
				  "      printenv: {prog: printenv, env: [\"SHARED=cmd\"]}\n");
}

static void start(int handlers)
{
	CU_ASSERT_FATAL(harness_start(&D, handlers, body("none"), NULL) == 0);
}

static void stop(void)
{
	CU_ASSERT(harness_stop_clean(&D) == 0);
}

static long long slots_in_use(void)
{
	struct json_object *st = harness_status(&D);
	long long v = harness_json_int(st, "waitgroups", "wg", "running", NULL) +
		      harness_json_int(st, "waitgroups", "wg", "offered", NULL);
	if (st)
		json_object_put(st);
	return v;
}

static void test_placeholders_and_args(void)
{
	start(1);
	struct tclient *c = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(c != NULL);
	struct json_object *d = tc_run_job(
		c, "p1", "tools", "{\"command\":\"echo\",\"args\":[\"A=%jobdir%:B=%jobdir%\"]}",
		5000);
	const char *out = tc_str(tc_receipt(d), "stdout");
	CU_ASSERT_FATAL(out != NULL);
	/* both placeholders replaced by the same directory under tempDir/job */
	char dir[512];
	CU_ASSERT(sscanf(out, "A=%511[^:]", dir) == 1);
	char expect[1200];
	snprintf(expect, sizeof expect, "A=%s:B=%s\n", dir, dir);
	CU_ASSERT_STRING_EQUAL(out, expect);
	char prefix[400];
	snprintf(prefix, sizeof prefix, "%s/tmp/job/", D.dir);
	CU_ASSERT(strncmp(dir, prefix, strlen(prefix)) == 0);
	json_object_put(d);

	/* an argument with NUL is refused, and the offer goes back */
	CU_ASSERT_FATAL(tc_start_job(c, "p2", "tools",
				     "{\"command\":\"echo\",\"args\":[\"a\\u0000b\"]}") == 0);
	struct json_object *e = tc_expect(c, "ERROR", 3000);
	CU_ASSERT(e && strcmp(tc_str(e, "code"), "bad_job") == 0);
	if (e)
		json_object_put(e);
	CU_ASSERT_EQUAL(slots_in_use(), 0);
	tc_close(c);
	stop();
}

static void expect_bad_job(struct tclient *c, const char *id, const char *job_json,
			   const char *words)
{
	const char *token = tc_want_offer(c, id, "tools", 0, 3000);
	CU_ASSERT_FATAL(token != NULL);
	tc_send(c, "{\"type\":\"JOB\",\"job_id\":\"%s\",\"token\":\"%s\",\"job\":%s}", id, token,
		job_json);
	struct json_object *e = tc_expect(c, "ERROR", 3000);
	CU_ASSERT(e && strcmp(tc_str(e, "code"), "bad_job") == 0);
	CU_ASSERT(e && strstr(tc_str(e, "message"), words) != NULL);
	if (e)
		json_object_put(e);
}

static void test_environment_and_percent(void)
{
	start(1);
	struct tclient *c = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(c != NULL);
	/* global env, then the command's env: the later one wins, once */
	struct json_object *d = tc_run_job(c, "e1", "tools", "{\"command\":\"printenv\"}", 5000);
	const char *out = tc_str(tc_receipt(d), "stdout");
	CU_ASSERT_FATAL(out != NULL);
	CU_ASSERT(strstr(out, "PATH=/usr/local/bin:/usr/bin:/bin\n") == out);
	CU_ASSERT(strstr(out, "SHARED=cmd\n") != NULL);
	CU_ASSERT(strstr(out, "SHARED=global") == NULL);
	CU_ASSERT(strstr(out, "GLOBALV=g\n") != NULL);
	json_object_put(d);
	/* then the job's env */
	d = tc_run_job(c, "e2", "tools",
		       "{\"command\":\"printenv\",\"args\":[\"SHARED\"],\"env\":[\"SHARED=job\"]}",
		       5000);
	CU_ASSERT_STRING_EQUAL(tc_str(tc_receipt(d), "stdout"), "job\n");
	json_object_put(d);
	/* names that change how programs load are refused */
	expect_bad_job(c, "e3", "{\"command\":\"printenv\",\"env\":[\"LD_PRELOAD=/tmp/x.so\"]}",
		       "LD_PRELOAD");
	expect_bad_job(c, "e4", "{\"command\":\"printenv\",\"env\":[\"PATH=/tmp\"]}", "PATH");
	/* '%' other than %jobdir% is the tools' own syntax: passed as is */
	d = tc_run_job(c, "e5", "tools",
		       "{\"command\":\"echo\",\"args\":[\"frame%03d.png\",\"50%\",\"%%\"]}", 5000);
	CU_ASSERT_STRING_EQUAL(tc_str(tc_receipt(d), "stdout"), "frame%03d.png 50% %%\n");
	json_object_put(d);
	/* only http and https URLs */
	expect_bad_job(c, "e7", "{\"command\":\"echo\",\"stdout\":\"file:///etc/passwd\"}",
		       "job.stdout");
	CU_ASSERT_EQUAL(slots_in_use(), 0);
	tc_close(c);
	stop();
}

static void test_job_limits(void)
{
	char b[4096];
	char expect[64];
	/* the daemon inherits this process's niceness; a job's is 3 more */
	int own = getpriority(PRIO_PROCESS, 0);
	snprintf(b, sizeof b, "jobLimits: {openFiles: 64, fileSizeMB: 1, cpuSec: 30, nice: 3}\n%s",
		 body("none"));
	CU_ASSERT_FATAL(harness_start(&D, 1, b, NULL) == 0);
	struct tclient *c = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(c != NULL);
	/* sh's ulimit -f counts 512-byte blocks: 1 MiB = 2048; no core files */
	struct json_object *d = tc_run_job(c, "l1", "tools",
					   "{\"command\":\"sh\",\"args\":[\"-c\","
					   "\"ulimit -n; ulimit -f; ulimit -t; ulimit -c; nice\"]}",
					   5000);
	snprintf(expect, sizeof expect, "64\n2048\n30\n0\n%d\n", own + 3 > 19 ? 19 : own + 3);
	CU_ASSERT_STRING_EQUAL(tc_str(tc_receipt(d), "stdout"), expect);
	json_object_put(d);
	/* and the limit bites: writing 2 MiB fails with SIGXFSZ */
	d = tc_run_job(c, "l2", "tools",
		       "{\"command\":\"sh\",\"args\":[\"-c\","
		       "\"head -c 2097152 /dev/zero > big\"]}",
		       5000);
	CU_ASSERT(tc_int(tc_receipt(d), "exit_code") != 0);
	json_object_put(d);
	tc_close(c);
	stop();

	/* without jobLimits.nice a job runs at the daemon's niceness */
	start(1);
	c = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(c != NULL);
	d = tc_run_job(c, "l3", "tools", "{\"command\":\"sh\",\"args\":[\"-c\",\"nice\"]}", 5000);
	snprintf(expect, sizeof expect, "%d\n", own);
	CU_ASSERT_STRING_EQUAL(tc_str(tc_receipt(d), "stdout"), expect);
	json_object_put(d);
	tc_close(c);
	stop();
}

static void test_timeout(void)
{
	start(1);
	struct tclient *c = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(c != NULL);
	long long t0 = harness_now_ms();
	struct json_object *d = tc_run_job(
		c, "t1", "tools", "{\"command\":\"sleep\",\"args\":[\"30\"],\"timeout_sec\":1}",
		8000);
	long long took = harness_now_ms() - t0;
	CU_ASSERT_FATAL(d != NULL);
	struct json_object *err;
	CU_ASSERT(json_object_object_get_ex(tc_receipt(d), "error", &err));
	CU_ASSERT_STRING_EQUAL(tc_str(err, "code"), "timeout");
	CU_ASSERT_EQUAL(tc_int(tc_receipt(d), "signal"), SIGTERM);
	CU_ASSERT(took >= 900 && took < 5000);
	json_object_put(d);
	CU_ASSERT_EQUAL(slots_in_use(), 0);
	tc_close(c);
	stop();
}

static void test_leader_exits_children_left(void)
{
	start(1);
	struct tclient *c = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(c != NULL);
	/* the leader prints and exits; its background child holds stdout */
	char job[160], pattern[96];
	snprintf(job, sizeof job,
		 "{\"command\":\"sh\",\"args\":[\"-c\",\"sleep 25.%d & echo started\"]}",
		 (int)getpid());
	snprintf(pattern, sizeof pattern, "pgrep -f '^sleep 25.%d$' > /dev/null", (int)getpid());
	long long t0 = harness_now_ms();
	struct json_object *d = tc_run_job(c, "g1", "tools", job, 8000);
	CU_ASSERT_FATAL(d != NULL);
	CU_ASSERT(harness_now_ms() - t0 < 4000);
	CU_ASSERT_EQUAL(tc_int(tc_receipt(d), "exit_code"), 0);
	CU_ASSERT_STRING_EQUAL(tc_str(tc_receipt(d), "stdout"), "started\n");
	json_object_put(d);
	CU_ASSERT_EQUAL(slots_in_use(), 0);
	/* the child went with it (1: no match; 127: no pgrep) */
	CU_ASSERT(harness_wait_pgrep(pattern, 0, 5000) == 0);
	tc_close(c);
	stop();
}

static void test_no_descriptor_leaks(void)
{
	start(1);
	struct tclient *c = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(c != NULL);
	/* fd 3 is the progress pipe (docs/progress.md); ls opens the
	 * directory as fd 4 itself: nothing else may be open */
	struct json_object *d = tc_run_job(
		c, "f1", "tools", "{\"command\":\"ls\",\"args\":[\"/proc/self/fd\"]}", 5000);
	CU_ASSERT_FATAL(d != NULL);
	CU_ASSERT_STRING_EQUAL(tc_str(tc_receipt(d), "stdout"), "0\n1\n2\n3\n4\n");
	json_object_put(d);
	tc_close(c);
	stop();
}

/* The handler ignores SIGPIPE, blocks the signals its signalfd takes and
 * spawns without blocking the rest around the clone (it catches none,
 * src/job/spawn.c): the program still starts with no signal blocked and
 * none of the standard signals (1-31) ignored.  (glibc will not change the
 * dispositions of its own signals 32 and 33: they stay as the daemon got
 * them, and some test drivers start it with those ignored.) */
static void test_signals_of_a_job(void)
{
	start(1);
	struct tclient *c = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(c != NULL);
	for (int i = 0; i < 2; i++) {
		char id[8];
		snprintf(id, sizeof id, "sig%d", i);
		struct json_object *d = tc_run_job(
			c, id, "tools",
			"{\"command\":\"sh\",\"args\":[\"-c\",\"exec grep -E "
			"'^Sig(Blk|Ign)' /proc/self/status\"]}",
			5000);
		CU_ASSERT_FATAL(d != NULL);
		unsigned long long blk = ~0ull, ign = ~0ull;
		CU_ASSERT_EQUAL(sscanf(tc_str(tc_receipt(d), "stdout"),
				       "SigBlk:\t%llx\nSigIgn:\t%llx", &blk, &ign),
				2);
		CU_ASSERT_EQUAL(blk, 0);
		CU_ASSERT_EQUAL(ign & 0x7fffffffull, 0);
		json_object_put(d);
	}
	tc_close(c);
	stop();
}

static void test_job_dirs_after_restart(void)
{
	start(1);
	struct tclient *c = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(c != NULL);
	struct json_object *d = tc_run_job(c, "d1", "tools", "{\"command\":\"true\"}", 5000);
	CU_ASSERT(d && tc_int(tc_receipt(d), "exit_code") == 0);
	if (d)
		json_object_put(d);
	tc_close(c);
	/* the replacement handler must not collide with the kept directory */
	int pid;
	CU_ASSERT_EQUAL_FATAL(harness_handler_pids(&D, &pid, 1), 1);
	kill(pid, SIGKILL);
	c = NULL;
	for (int i = 0; i < 50 && !c; i++) {
		harness_sleep_ms(100);
		c = tc_connect(D.port, NULL);
	}
	CU_ASSERT_FATAL(c != NULL);
	d = tc_run_job(c, "d2", "tools", "{\"command\":\"true\"}", 5000);
	CU_ASSERT(d && tc_int(tc_receipt(d), "exit_code") == 0);
	CU_ASSERT(d && !json_object_object_get_ex(tc_receipt(d), "error", NULL));
	if (d)
		json_object_put(d);
	tc_close(c);
	stop();
}

/* Entries of DIR/tmp/job. */
static int job_dir_entries(void)
{
	char cmd[400];
	snprintf(cmd, sizeof cmd, "ls -A '%s/tmp/job' | wc -l", D.dir);
	FILE *p = popen(cmd, "r");
	int n = -1;
	if (p) {
		if (fscanf(p, "%d", &n) != 1)
			n = -1;
		pclose(p);
	}
	return n;
}

static void test_removal_policy_and_janitor(void)
{
	char path[400];

	/* a leftover from an earlier run is cleared at start */
	CU_ASSERT_FATAL(harness_start(&D, 1, body("none"), NULL) == 0);
	snprintf(path, sizeof path, "%s/tmp/job/0-99-leftover", D.dir);
	CU_ASSERT(mkdir(path, 0700) == 0);
	CU_ASSERT_EQUAL(harness_stop(&D, 10000) >> 8, 0);
	D.pid = 0;
	FILE *f = fopen(D.config, "w");
	/* as root a configuration needs a user or allowRootJobs (harness.c) */
	fprintf(f, "addr: 127.0.0.1:%d\ntempDir: %s/tmp\nhandlers: 1\n%sjanitorFileAge: 2s\n%s",
		D.port, D.dir, geteuid() == 0 ? "allowRootJobs: true\n" : "", body("done"));
	fclose(f);
	int port = D.port;
	/* restart on the same directory */
	D.pid = fork();
	if (D.pid == 0) {
		FILE *log = freopen(D.log, "a", stderr);
		(void)log;
		execl(getenv("EXECSERVER_BIN"), "execserver", "-f", "-c", D.config, (char *)NULL);
		_exit(127);
	}
	struct tclient *c = NULL;
	for (int i = 0; i < 100 && !c; i++) {
		harness_sleep_ms(50);
		c = tc_connect(port, NULL);
	}
	CU_ASSERT_FATAL(c != NULL);
	CU_ASSERT_EQUAL(job_dir_entries(), 0);

	/* policy done: a successful job's directory goes, a failed one stays */
	struct json_object *d = tc_run_job(c, "r1", "tools", "{\"command\":\"true\"}", 5000);
	CU_ASSERT(d && tc_int(tc_receipt(d), "exit_code") == 0);
	if (d)
		json_object_put(d);
	d = tc_run_job(c, "r2", "tools", "{\"command\":\"sh\",\"args\":[\"-c\",\"exit 3\"]}", 5000);
	CU_ASSERT(d && tc_int(tc_receipt(d), "exit_code") == 3);
	if (d)
		json_object_put(d);
	CU_ASSERT_EQUAL(job_dir_entries(), 1);
	/* the janitor removes it once older than janitorFileAge (2 s) */
	long long end = harness_now_ms() + 6000;
	while (job_dir_entries() != 0 && harness_now_ms() < end)
		harness_sleep_ms(200);
	CU_ASSERT_EQUAL(job_dir_entries(), 0);
	/* but not the directory of a job still running */
	CU_ASSERT_FATAL(
		tc_start_job(c, "r3", "tools", "{\"command\":\"sleep\",\"args\":[\"4\"]}") == 0);
	/* sleep: the directory outlives janitorFileAge (2 s) while its job runs */
	harness_sleep_ms(3500);
	CU_ASSERT_EQUAL(job_dir_entries(), 1);
	d = tc_expect(c, "DONE", 5000);
	CU_ASSERT(d && tc_int(tc_receipt(d), "exit_code") == 0);
	if (d)
		json_object_put(d);

	/* a directory its job left empty goes to the next job; one with a
	 * file left in it is removed; every job starts in an empty one */
	char first[400] = "", second[400] = "", third[400] = "";
	char *seen[3] = { first, second, third };
	static const char *const cmd[3] = { "pwd; ls -A", "pwd; ls -A; touch left", "pwd; ls -A" };
	for (int i = 0; i < 3; i++) {
		char job[200], id[8];
		snprintf(job, sizeof job, "{\"command\":\"sh\",\"args\":[\"-c\",\"%s\"]}", cmd[i]);
		snprintf(id, sizeof id, "u%d", i);
		d = tc_run_job(c, id, "tools", job, 5000);
		const char *out = d ? tc_str(tc_receipt(d), "stdout") : NULL;
		CU_ASSERT_FATAL(out != NULL);
		/* the directory's path and nothing from ls */
		CU_ASSERT(strchr(out, '\n') == out + strlen(out) - 1);
		snprintf(seen[i], 400, "%.*s", (int)strcspn(out, "\n"), out);
		json_object_put(d);
	}
	CU_ASSERT_STRING_EQUAL(first, second);
	CU_ASSERT_STRING_NOT_EQUAL(second, third);
	struct stat st;
	CU_ASSERT(stat(second, &st) != 0);
	tc_close(c);
	stop();
}

/* A process a job left behind (setsid, sitting in the job's directory)
 * keeps that directory from the next job; a clean stop leaves no spare. */
static void test_dir_not_reused_under_a_stray(void)
{
	CU_ASSERT_FATAL(harness_start(&D, 1, body("all"), NULL) == 0);
	struct tclient *c = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(c != NULL);
	struct json_object *d = tc_run_job(c, "s1", "tools",
					   "{\"command\":\"sh\",\"args\":[\"-c\","
					   "\"pwd; setsid sh -c 'sleep 1; echo from-s1 > planted' "
					   "</dev/null >/dev/null 2>&1 & sleep 0.3\"]}",
					   5000);
	const char *out = d ? tc_str(tc_receipt(d), "stdout") : NULL;
	CU_ASSERT_FATAL(out != NULL);
	char first[400];
	snprintf(first, sizeof first, "%.*s", (int)strcspn(out, "\n"), out);
	json_object_put(d);
	d = tc_run_job(c, "s2", "tools",
		       "{\"command\":\"sh\",\"args\":[\"-c\","
		       "\"pwd; sleep 1.5; ls -A\"]}",
		       8000);
	out = d ? tc_str(tc_receipt(d), "stdout") : NULL;
	CU_ASSERT_FATAL(out != NULL);
	/* (the leader waits so that the stray is in its own session before the
	 * leader's group is killed) another directory, nothing planted in it */
	CU_ASSERT(strncmp(out, first, strlen(first)) != 0 || out[strlen(first)] != '\n');
	CU_ASSERT(strstr(out, "planted") == NULL);
	json_object_put(d);
	/* the stray is gone: reuse resumes, and a clean stop removes the spare
	 * ("[f]": the shell that runs pgrep does not match itself) */
	CU_ASSERT(harness_wait_pgrep("pgrep -f 'echo [f]rom-s1 > planted' > /dev/null", 0, 5000) ==
		  0);
	d = tc_run_job(c, "s3", "tools", "{\"command\":\"true\"}", 5000);
	CU_ASSERT(d && tc_int(tc_receipt(d), "exit_code") == 0);
	if (d)
		json_object_put(d);
	CU_ASSERT_EQUAL(job_dir_entries(), 1);
	tc_close(c);
	int status = harness_stop(&D, 15000);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CU_ASSERT_EQUAL(job_dir_entries(), 0);
	harness_cleanup(&D);
}

static void test_slowloris(void)
{
	start(1);
	int fd = wsc_tcp_connect("127.0.0.1", D.port, 2000);
	CU_ASSERT_FATAL(fd >= 0);
	const char *req = "GET /broker HTTP/1.1\r\nHost: x\r\n";
	long long t0 = harness_now_ms();
	int closed = 0;
	/* one byte every 500 ms: an idle timeout would never fire */
	for (size_t i = 0; !closed && harness_now_ms() - t0 < 14000; i++) {
		if (write(fd, req + (i % strlen(req)), 1) != 1)
			closed = 1;
		else
			closed = wsc_wait_closed(fd, 500) == 1;
	}
	long long took = harness_now_ms() - t0;
	CU_ASSERT(closed);
	CU_ASSERT(took >= 9000 && took < 13000);
	close(fd);
	/* and the instance still answers */
	struct tclient *c = tc_connect(D.port, NULL);
	CU_ASSERT(c != NULL);
	tc_close(c);
	stop();
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "placeholders and argument checks", test_placeholders_and_args },
		{ "environment merge and literal %", test_environment_and_percent },
		{ "jobLimits", test_job_limits },
		{ "timeout_sec", test_timeout },
		{ "leader exits, children left behind", test_leader_exits_children_left },
		{ "no descriptor leaks into jobs", test_no_descriptor_leaks },
		{ "no signal blocked or ignored in jobs", test_signals_of_a_job },
		{ "job directories after a handler restart", test_job_dirs_after_restart },
		{ "removal policy and janitor", test_removal_policy_and_janitor },
		{ "no directory reuse under a stray process", test_dir_not_reused_under_a_stray },
		{ "slowloris upgrade cut off", test_slowloris },
		{ NULL, NULL },
	};
	return run_suite("jobs", cases);
}
