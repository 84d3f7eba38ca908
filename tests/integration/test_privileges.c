/*
 * test_privileges.c - who the execserver and its jobs run as
 * (docs/security.md, "Privileges"), against a real daemon.
 *
 * Started as root with `user: nobody`: the master, every handler and every
 * job run as nobody (real, effective, saved and filesystem ids; no
 * capabilities; no supplementary root group; not dumpable), tempDir
 * belongs to nobody, and a job's environment is the configured one plus
 * PATH, nothing of the daemon's.  Configurations that would run jobs as root without saying so
 * are refused at start with a message naming the key.  Run as another
 * user, the test checks the other branch: switching users is refused.
 */
#include "autoconfig.h"

#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "harness.h"
#include "proto.h"
#include "suite.h"

static struct es_daemon D;

static const char body_tools[] = "waitgroups:\n"
				 "  wg:\n"
				 "    processes: 2\n"
				 "env: [FOO=bar, LANG=C]\n"
				 "services:\n"
				 "  tools:\n"
				 "    waitgroup: wg\n"
				 "    commands:\n"
				 "      id: {prog: id}\n"
				 "      env: {prog: env}\n"
				 "      touch: {prog: touch}\n";

/* The value of a "Key:\t..." line of /proc/<pid>/status, or "" (static). */
static const char *proc_status(int pid, const char *key)
{
	static char value[256];
	char path[64], line[512];
	size_t klen = strlen(key);
	FILE *f;

	value[0] = '\0';
	snprintf(path, sizeof path, "/proc/%d/status", pid);
	f = fopen(path, "r");
	if (!f)
		return value;
	while (fgets(line, sizeof line, f))
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			const char *v = line + klen + 1;
			v += strspn(v, " \t");
			snprintf(value, sizeof value, "%s", v);
			value[strcspn(value, "\n")] = '\0';
			break;
		}
	fclose(f);
	return value;
}

/* All four ids of the process (real, effective, saved, filesystem) equal
 * want, no capability left, no root group. */
static void check_process(int pid, uid_t uid, gid_t gid)
{
	char four[64];

	snprintf(four, sizeof four, "%u\t%u\t%u\t%u", (unsigned)uid, (unsigned)uid, (unsigned)uid,
		 (unsigned)uid);
	CU_ASSERT_STRING_EQUAL(proc_status(pid, "Uid"), four);
	snprintf(four, sizeof four, "%u\t%u\t%u\t%u", (unsigned)gid, (unsigned)gid, (unsigned)gid,
		 (unsigned)gid);
	CU_ASSERT_STRING_EQUAL(proc_status(pid, "Gid"), four);
	CU_ASSERT_STRING_EQUAL(proc_status(pid, "CapPrm"), "0000000000000000");
	CU_ASSERT_STRING_EQUAL(proc_status(pid, "CapEff"), "0000000000000000");
	char groups[256];
	snprintf(groups, sizeof groups, " %s ", proc_status(pid, "Groups"));
	CU_ASSERT(strstr(groups, " 0 ") == NULL);
	/* not dumpable (its /proc files stay root's): a job of the same user
	 * cannot ptrace it or read its memory */
	char path[64];
	struct stat st;
	snprintf(path, sizeof path, "/proc/%d/environ", pid);
	CU_ASSERT(stat(path, &st) == 0 && st.st_uid == 0);
}

/* The stdout of a job (static), or NULL. */
static const char *job_stdout(struct tclient *c, const char *id, const char *job)
{
	static char out[4096];
	struct json_object *d = tc_run_job(c, id, "tools", job, 5000);
	const char *s = d ? tc_str(tc_receipt(d), "stdout") : NULL;
	if (s)
		snprintf(out, sizeof out, "%s", s);
	if (d)
		json_object_put(d);
	return s ? out : NULL;
}

/* Runs the daemon on a configuration written to a file; returns its exit
 * status (it must exit by itself within 5 s) and its output in out. */
static int run_daemon(const char *mode, const char *config_text, char *out, size_t outlen)
{
	char dir[] = "/tmp/es-priv-XXXXXX", path[128], cmd[512];
	const char *bin = getenv("EXECSERVER_BIN");

	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof path, "%s/c.yml", dir);
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	fprintf(f, "addr: 127.0.0.1:0\ntempDir: %s/tmp\n%s", dir, config_text);
	fclose(f);
	snprintf(cmd, sizeof cmd, "timeout 5 '%s' %s -c '%s' 2>&1", bin ? bin : "./execserver",
		 mode, path);
	FILE *p = popen(cmd, "r");
	size_t n = p ? fread(out, 1, outlen - 1, p) : 0;
	out[n] = '\0';
	int status = p ? pclose(p) : -1;
	unlink(path);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_drop_to_nobody(void)
{
	struct passwd *pw = getpwnam("nobody");
	char body[2048], expect[256];

	if (geteuid() != 0) {
		/* only root can switch: a user who is not root is refused */
		char out[2048];
		snprintf(body, sizeof body, "user: nobody\n%s", body_tools);
		CU_ASSERT_EQUAL(run_daemon("-f", body, out, sizeof out), 1);
		CU_ASSERT(strstr(out, "not started as root") != NULL);
		/* -t checks the file, not the switch it cannot try */
		CU_ASSERT_EQUAL(run_daemon("-t", body, out, sizeof out), 0);
		return;
	}
	CU_ASSERT_FATAL(pw != NULL);
	snprintf(body, sizeof body, "user: nobody\n%s", body_tools);
	CU_ASSERT_FATAL(harness_start(&D, 2, body, "EXECSERVER_LEAK_TEST=secret") == 0);

	/* the master and every handler */
	check_process(D.pid, pw->pw_uid, pw->pw_gid);
	int pids[8];
	int n = harness_handler_pids(&D, pids, 8);
	CU_ASSERT_EQUAL(n, 2);
	for (int i = 0; i < n; i++)
		check_process(pids[i], pw->pw_uid, pw->pw_gid);
	CU_ASSERT(harness_log_contains(&D, "running as user nobody"));

	/* a job */
	struct tclient *c = tc_connect(D.port, "p");
	CU_ASSERT_FATAL(c != NULL);
	snprintf(expect, sizeof expect, "%u\n", (unsigned)pw->pw_uid);
	const char *out = job_stdout(c, "u", "{\"command\":\"id\",\"args\":[\"-u\"]}");
	CU_ASSERT(out && strcmp(out, expect) == 0);
	snprintf(expect, sizeof expect, "%u\n", (unsigned)pw->pw_gid);
	out = job_stdout(c, "g", "{\"command\":\"id\",\"args\":[\"-g\"]}");
	CU_ASSERT(out && strcmp(out, expect) == 0);
	out = job_stdout(c, "G", "{\"command\":\"id\",\"args\":[\"-G\"]}");
	CU_ASSERT(out && strcmp(out, expect) == 0); /* nobody's group only */

	/* the environment: PATH and the configuration's, the job's, then the
	 * progress descriptor's number (docs/progress.md), nothing of the
	 * daemon's (EXECSERVER_LEAK_TEST, HOME, the test's own PATH...) */
	out = job_stdout(c, "e", "{\"command\":\"env\",\"env\":[\"JOBVAR=1\"]}");
	CU_ASSERT(out && strcmp(out, "PATH=/usr/local/bin:/usr/bin:/bin\nFOO=bar\nLANG=C\n"
				     "JOBVAR=1\nEXECSERVER_PROGRESS_FD=3\n") == 0);
	if (out && !strstr(out, "EXECSERVER_PROGRESS_FD=3\n"))
		fprintf(stderr, "env: %s\n", out);

	/* the job directory (and tempDir) belong to nobody: the job can
	 * write there */
	out = job_stdout(c, "t", "{\"command\":\"touch\",\"args\":[\"%jobdir%/made\"]}");
	CU_ASSERT(out != NULL);
	struct stat st;
	char path[400];
	snprintf(path, sizeof path, "%s/tmp", D.dir);
	CU_ASSERT(stat(path, &st) == 0 && st.st_uid == pw->pw_uid);
	snprintf(path, sizeof path, "%s/tmp/job", D.dir);
	CU_ASSERT(stat(path, &st) == 0 && st.st_uid == pw->pw_uid);
	tc_close(c);

	/* a handler that dies is replaced by one that is nobody too */
	CU_ASSERT(kill(pids[0], SIGKILL) == 0);
	int fresh[8] = { 0 };
	for (int i = 0; i < 100; i++) {
		if (harness_handler_pids(&D, fresh, 8) == 2 && fresh[0] && fresh[0] != pids[0])
			break;
		harness_sleep_ms(50);
	}
	CU_ASSERT(fresh[0] != 0 && fresh[0] != pids[0]);
	if (fresh[0] && fresh[0] != pids[0])
		check_process(fresh[0], pw->pw_uid, pw->pw_gid);

	CU_ASSERT(harness_stop_clean(&D) == 0);
}

static void test_refusals(void)
{
	char out[4096], body[2048];

	if (geteuid() != 0) {
		/* not root: no user and no allowRootJobs is fine */
		CU_ASSERT_EQUAL(run_daemon("-t", body_tools, out, sizeof out), 0);
		return;
	}
	/* root, no user, no allowRootJobs: refused, both -t and a start */
	CU_ASSERT_EQUAL(run_daemon("-t", body_tools, out, sizeof out), 1);
	CU_ASSERT(strstr(out, "allowRootJobs") && strstr(out, "set user"));
	CU_ASSERT_EQUAL(run_daemon("-f", body_tools, out, sizeof out), 1);
	CU_ASSERT(strstr(out, "allowRootJobs") != NULL);
	/* user root needs allowRootJobs as well */
	snprintf(body, sizeof body, "user: root\n%s", body_tools);
	CU_ASSERT_EQUAL(run_daemon("-f", body, out, sizeof out), 1);
	CU_ASSERT(strstr(out, "is root") && strstr(out, "allowRootJobs"));
	/* users and groups that do not exist */
	snprintf(body, sizeof body, "user: no-such-user-here\n%s", body_tools);
	CU_ASSERT_EQUAL(run_daemon("-f", body, out, sizeof out), 1);
	CU_ASSERT(strstr(out, "no such user \"no-such-user-here\"") != NULL);
	CU_ASSERT(strstr(out, "c.yml:3:7: user: no such user") != NULL); /* where it is */
	snprintf(body, sizeof body, "user: nobody\ngroup: no-such-group-here\n%s", body_tools);
	CU_ASSERT_EQUAL(run_daemon("-f", body, out, sizeof out), 1);
	CU_ASSERT(strstr(out, "no such group") != NULL);
	snprintf(body, sizeof body, "group: nogroup\n%s", body_tools);
	CU_ASSERT_EQUAL(run_daemon("-f", body, out, sizeof out), 1);
	CU_ASSERT(strstr(out, "user is not") != NULL);
	/* -t with a user checks as that user */
	snprintf(body, sizeof body, "user: nobody\n%s", body_tools);
	CU_ASSERT_EQUAL(run_daemon("-t", body, out, sizeof out), 0);

	/* said explicitly: jobs run as root */
	snprintf(body, sizeof body, "allowRootJobs: true\n%s", body_tools);
	CU_ASSERT_FATAL(harness_start(&D, 1, body, NULL) == 0);
	struct tclient *c = tc_connect(D.port, "r");
	CU_ASSERT_FATAL(c != NULL);
	const char *id = job_stdout(c, "u", "{\"command\":\"id\",\"args\":[\"-u\"]}");
	CU_ASSERT(id && strcmp(id, "0\n") == 0);
	tc_close(c);
	CU_ASSERT(harness_stop_clean(&D) == 0);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "started as root, runs as nobody", test_drop_to_nobody },
		{ "refused configurations, allowRootJobs", test_refusals },
		{ NULL, NULL },
	};
	return run_suite("privileges", cases);
}
