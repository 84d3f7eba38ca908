/*
 * test_daemon.c - the daemon's lifecycle against a real process tree:
 * handler count, a killed handler replaced, -t on good and broken files,
 * a clean exit on SIGTERM (also when SIGTERM comes again while it stops),
 * no orphans when the master is killed, a SIGHUP reload, a second start
 * refused (on a busy address, with a pid file in use), a service whose
 * program is missing (disabled with a warning, clients told why), and the
 * log line of each finished job (jobLog).
 */
#include "autoconfig.h"

#include <errno.h>
#include <fcntl.h>
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
#include "httpc.h"
#include "proto.h"
#include "suite.h"

static int process_alive(int pid)
{
	return pid > 0 && kill(pid, 0) == 0;
}

/* Parent pid of a process, from /proc. */
static int parent_of(int pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	int ppid = -1;
	if (p)
		sscanf(p + 2, "%*c %d", &ppid);
	return ppid;
}

static void test_handler_count_and_parentage(void)
{
	struct es_daemon d;
	int pids[8];

	CU_ASSERT_FATAL(harness_start(&d, 3, harness_default_body(2), NULL) == 0);
	int n = harness_handler_pids(&d, pids, 8);
	CU_ASSERT_EQUAL(n, 3);
	for (int i = 0; i < n; i++) {
		CU_ASSERT(pids[i] > 0);
		CU_ASSERT_EQUAL(parent_of(pids[i]), d.pid);
		for (int k = 0; k < i; k++)
			CU_ASSERT_NOT_EQUAL(pids[i], pids[k]);
	}
	CU_ASSERT(harness_log_contains(&d, "handler 2 started"));
	CU_ASSERT(WIFEXITED(harness_stop(&d, 10000)));
	harness_cleanup(&d);
}

struct replaced_arg {
	int slot, old_pid;
};

static int handler_replaced(struct json_object *st, void *argp)
{
	struct replaced_arg *a = argp;
	struct json_object *hs, *h, *pid;
	if (!json_object_object_get_ex(st, "handlers", &hs))
		return 0;
	h = json_object_array_get_idx(hs, (size_t)a->slot);
	if (!h || !json_object_object_get_ex(h, "pid", &pid))
		return 0;
	int p = json_object_get_int(pid);
	return p > 0 && p != a->old_pid;
}

static void test_killed_handler_is_replaced(void)
{
	struct es_daemon d;
	int pids[4];

	CU_ASSERT_FATAL(harness_start(&d, 2, harness_default_body(2), NULL) == 0);
	CU_ASSERT_EQUAL_FATAL(harness_handler_pids(&d, pids, 4), 2);
	CU_ASSERT_EQUAL(kill(pids[1], SIGKILL), 0);
	struct replaced_arg a = { 1, pids[1] };
	CU_ASSERT(harness_wait_status(&d, 5000, handler_replaced, &a) == 0);
	CU_ASSERT(harness_log_contains(&d, "killed by signal 9"));
	int now[4];
	CU_ASSERT_EQUAL(harness_handler_pids(&d, now, 4), 2);
	CU_ASSERT_EQUAL(now[0], pids[0]); /* the other handler was untouched */
	CU_ASSERT(process_alive(now[1]));
	CU_ASSERT_EQUAL(parent_of(now[1]), d.pid);
	/* /status counts the restart, for the slot that had it */
	struct json_object *st = harness_status(&d), *hs;
	CU_ASSERT_FATAL(st != NULL);
	CU_ASSERT_FATAL(json_object_object_get_ex(st, "handlers", &hs));
	CU_ASSERT_EQUAL(harness_json_int(json_object_array_get_idx(hs, 0), "restarts", NULL), 0);
	CU_ASSERT_EQUAL(harness_json_int(json_object_array_get_idx(hs, 1), "restarts", NULL), 1);
	json_object_put(st);
	CU_ASSERT(WIFEXITED(harness_stop(&d, 10000)));
	harness_cleanup(&d);
}

/* The status of method target with extra header lines (NULL: none), or -1. */
static int code_with(const struct es_daemon *d, const char *method, const char *target,
		     const char *headers)
{
	struct httpc_resp r;
	if (httpc_request(d->port, method, target, headers, NULL, 0, 0, 5000, &r) != 0)
		return -1;
	int code = r.status;
	httpc_free(&r);
	return code;
}

static int http_code(const struct es_daemon *d, const char *method, const char *target)
{
	return code_with(d, method, target, NULL);
}

static int post_code(const struct es_daemon *d, const char *target, const char *headers)
{
	return code_with(d, "POST", target, headers);
}

/* consoleEnabled: on by default on loopback (the page, its files); false
 * answers 404 to the page, its files and its action. */
static void test_console_switch(void)
{
	struct es_daemon d;
	char body[2048];
	CU_ASSERT_FATAL(harness_start(&d, 1, harness_default_body(1), NULL) == 0);
	CU_ASSERT_EQUAL(http_code(&d, "GET", "/console"), 200);
	CU_ASSERT_EQUAL(http_code(&d, "GET", "/console/console.js"), 200);
	CU_ASSERT_EQUAL(http_code(&d, "GET", "/console/nothing.js"), 404);
	CU_ASSERT_EQUAL(http_code(&d, "POST", "/jobs/0.1/cancel"), 404); /* no such job */
	CU_ASSERT_EQUAL(http_code(&d, "GET", "/jobs/0.1/cancel"), 405);
	/* no authToken: a page of a DNS name rebound to 127.0.0.1 is
	 * same-origin to its browser, and refused by its Host; addresses and
	 * localhost reach the book (404: no such job) */
	char h[256];
	snprintf(h, sizeof h, "Host: rebound.example:%d\r\nOrigin: http://rebound.example:%d\r\n",
		 d.port, d.port);
	CU_ASSERT_EQUAL(post_code(&d, "/jobs/0.1/cancel", h), 403);
	snprintf(h, sizeof h, "Host: localhost:%d\r\nOrigin: http://localhost:%d\r\n", d.port,
		 d.port);
	CU_ASSERT_EQUAL(post_code(&d, "/jobs/0.1/cancel", h), 404);
	snprintf(h, sizeof h, "Host: [::1]:%d\r\n", d.port);
	CU_ASSERT_EQUAL(post_code(&d, "/jobs/0.1/cancel", h), 404);
	/* a cross-site form of a browser without Origin: refused by its type */
	CU_ASSERT_EQUAL(post_code(&d, "/jobs/0.1/cancel",
				  "Content-Type: application/x-www-form-urlencoded\r\n"),
			415);
	CU_ASSERT(WIFEXITED(harness_stop(&d, 10000)));
	harness_cleanup(&d);
	snprintf(body, sizeof body, "consoleEnabled: false\n%s", harness_default_body(1));
	CU_ASSERT_FATAL(harness_start(&d, 1, body, NULL) == 0);
	CU_ASSERT_EQUAL(http_code(&d, "GET", "/console"), 404);
	CU_ASSERT_EQUAL(http_code(&d, "GET", "/console/console.js"), 404);
	CU_ASSERT_EQUAL(http_code(&d, "POST", "/jobs/0.1/cancel"), 404);
	CU_ASSERT(WIFEXITED(harness_stop(&d, 10000)));
	harness_cleanup(&d);
}

/* HEAD answers where GET reads (the console's page and files, /status,
 * /metrics): GET's status and header fields, Content-Length included,
 * and no body; where GET acts (the broker's upgrade) it is still 405. */
static void test_head_like_get(void)
{
	static const char *const targets[] = { "/console",
					       "/console/",
					       "/console/execserver.js",
					       "/console/common.css",
					       "/status",
					       "/status?detail=1",
					       "/metrics" };
	struct es_daemon d;
	CU_ASSERT_FATAL(harness_start(&d, 1, harness_default_body(1), NULL) == 0);
	for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
		struct httpc_resp g, h;
		char gt[128], ht[128], gl[32], hl[32];
		CU_ASSERT_FATAL(
			httpc_request(d.port, "GET", targets[i], NULL, NULL, 0, 0, 5000, &g) == 0);
		CU_ASSERT_FATAL(
			httpc_request(d.port, "HEAD", targets[i], NULL, NULL, 0, 0, 5000, &h) == 0);
		if (h.status != 200)
			printf("\n  HEAD %s: %d\n", targets[i], h.status);
		CU_ASSERT_EQUAL(g.status, 200);
		CU_ASSERT_EQUAL(h.status, 200);
		CU_ASSERT_EQUAL(h.body_len, 0);
		CU_ASSERT(g.body_len > 0);
		CU_ASSERT_FATAL(httpc_field(g.head, "Content-Type", gt, sizeof gt) != NULL);
		CU_ASSERT_FATAL(httpc_field(h.head, "Content-Type", ht, sizeof ht) != NULL);
		CU_ASSERT_STRING_EQUAL(ht, gt);
		CU_ASSERT_FATAL(httpc_field(h.head, "Content-Length", hl, sizeof hl) != NULL);
		CU_ASSERT_FATAL(httpc_field(g.head, "Content-Length", gl, sizeof gl) != NULL);
		if (strncmp(targets[i], "/console", 8) == 0) /* the rest changes as it runs */
			CU_ASSERT_STRING_EQUAL(hl, gl);
		CU_ASSERT(strtoul(hl, NULL, 10) > 0);
		httpc_free(&g);
		httpc_free(&h);
	}
	struct httpc_resp r;
	CU_ASSERT_FATAL(httpc_request(d.port, "HEAD", "/broker", NULL, NULL, 0, 0, 5000, &r) == 0);
	CU_ASSERT_EQUAL(r.status, 405);
	CU_ASSERT_EQUAL(r.body_len, 0);
	httpc_free(&r);
	CU_ASSERT_EQUAL(http_code(&d, "PUT", "/console"), 405);
	CU_ASSERT(WIFEXITED(harness_stop(&d, 10000)));
	harness_cleanup(&d);
}

/* The status of GET target with a Host line (and more header lines), or -1. */
static int get_with_host(const struct es_daemon *d, const char *target, const char *host,
			 const char *more)
{
	char h[256];
	snprintf(h, sizeof h, "Host: %s\r\n%s", host, more ? more : "");
	return code_with(d, "GET", target, h);
}

/* DNS rebinding: without authToken, /status (the console's data) answers
 * only a Host that is an address or localhost, 403 to a name; /metrics
 * answers any name (Prometheus targets are often names).  With a token,
 * the token decides and a name is fine. */
static void test_status_host_rule(void)
{
	static const char *const data[] = { "/status", "/status?detail=1" };
	struct es_daemon d;
	char evil[64], ok[3][64], body[2048];
	CU_ASSERT_FATAL(harness_start(&d, 1, harness_default_body(1), NULL) == 0);
	snprintf(evil, sizeof evil, "evil.example:%d", d.port);
	snprintf(ok[0], sizeof ok[0], "localhost:%d", d.port);
	snprintf(ok[1], sizeof ok[1], "127.0.0.1:%d", d.port);
	snprintf(ok[2], sizeof ok[2], "[::1]:%d", d.port);
	for (size_t i = 0; i < 2; i++) {
		CU_ASSERT_EQUAL(get_with_host(&d, data[i], evil, NULL), 403);
		CU_ASSERT_EQUAL(get_with_host(&d, data[i], "evil.example", NULL), 403);
		for (size_t k = 0; k < 3; k++)
			CU_ASSERT_EQUAL(get_with_host(&d, data[i], ok[k], NULL), 200);
	}
	CU_ASSERT_EQUAL(get_with_host(&d, "/metrics", evil, NULL), 200);
	CU_ASSERT_EQUAL(get_with_host(&d, "/console", evil, NULL), 200); /* no data */
	CU_ASSERT(WIFEXITED(harness_stop(&d, 10000)));
	harness_cleanup(&d);
	snprintf(body, sizeof body, "authToken: s3cret\n%s", harness_default_body(1));
	harness_auth_token = "s3cret"; /* for the harness's own /status */
	int started = harness_start(&d, 1, body, NULL);
	harness_auth_token = NULL;
	CU_ASSERT_FATAL(started == 0);
	snprintf(evil, sizeof evil, "evil.example:%d", d.port);
	CU_ASSERT_EQUAL(get_with_host(&d, "/status?detail=1", evil, NULL), 401);
	CU_ASSERT_EQUAL(
		get_with_host(&d, "/status?detail=1", evil, "Authorization: Bearer s3cret\r\n"),
		200);
	CU_ASSERT(WIFEXITED(harness_stop(&d, 10000)));
	harness_cleanup(&d);
}

static void test_sigterm_clean_exit(void)
{
	struct es_daemon d;
	int pids[4];

	CU_ASSERT_FATAL(harness_start(&d, 2, harness_default_body(2), NULL) == 0);
	CU_ASSERT_EQUAL_FATAL(harness_handler_pids(&d, pids, 4), 2);
	int status = harness_stop(&d, 10000);
	CU_ASSERT(WIFEXITED(status));
	CU_ASSERT_EQUAL(WEXITSTATUS(status), 0);
	CU_ASSERT(harness_wait_gone(pids[0], 5000) == 0);
	CU_ASSERT(harness_wait_gone(pids[1], 5000) == 0);
	CU_ASSERT(harness_log_contains(&d, "stopped"));
	harness_cleanup(&d);
}

/* A supervisor or an init script may send SIGTERM again while the daemon
 * stops (start-stop-daemon --retry does): the exit stays a clean exit 0,
 * also in the moment after the master's event loop has ended and its
 * signal events are gone.  SIGTERM every 100 us until the master is gone;
 * five rounds in which more than one SIGTERM went, so that one of them
 * lands in that moment.  A round with one SIGTERM does not count: on a
 * loaded machine the sender can be kept off the CPU from its first kill
 * until the whole stop is over (seen in a full make check). */
static void test_sigterm_repeated_while_stopping(void)
{
	int repeated = 0;

	for (int round = 0; round < 50 && repeated < 5; round++) {
		struct es_daemon d;
		int status = -1, sent = 0;

		CU_ASSERT_FATAL(harness_start(&d, 1, harness_default_body(1), NULL) == 0);
		for (int spins = 0; spins < 200000 && d.pid; spins++) {
			kill(d.pid, SIGTERM);
			sent++;
			if (waitpid(d.pid, &status, WNOHANG) == d.pid)
				d.pid = 0;
			else
				usleep(100);
		}
		CU_ASSERT_EQUAL(d.pid, 0);
		repeated += sent > 1;
		CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		if (!WIFEXITED(status))
			printf("\n  round %d: master ended by signal %d after %d SIGTERMs\n", round,
			       WTERMSIG(status), sent);
		harness_cleanup(&d);
	}
	CU_ASSERT_EQUAL(repeated, 5);
}

static void test_master_killed_no_orphans(void)
{
	struct es_daemon d;
	int pids[4];

	CU_ASSERT_FATAL(harness_start(&d, 2, harness_default_body(2), NULL) == 0);
	CU_ASSERT_EQUAL_FATAL(harness_handler_pids(&d, pids, 4), 2);
	kill(d.pid, SIGKILL);
	waitpid(d.pid, NULL, 0);
	d.pid = 0;
	long long end = harness_now_ms() + 3000;
	while ((process_alive(pids[0]) || process_alive(pids[1])) && harness_now_ms() < end)
		harness_sleep_ms(10);
	CU_ASSERT(!process_alive(pids[0]));
	CU_ASSERT(!process_alive(pids[1]));
	harness_cleanup(&d);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	CU_ASSERT_FATAL(f != NULL);
	fputs(text, f);
	fclose(f);
}

static void test_check_config(void)
{
	char dir[] = "/tmp/es-check-XXXXXX", path[128], out[2048], good[2048];
	CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
	snprintf(path, sizeof path, "%s/c.yml", dir);

	/* as root a configuration needs a user or allowRootJobs (harness.c) */
	const char *root_ok = geteuid() == 0 ? "allowRootJobs: true\n" : "";
	snprintf(good, sizeof good, "addr: 127.0.0.1:0\n%s%s", root_ok, harness_default_body(2));
	write_file(path, good);
	CU_ASSERT_EQUAL(harness_check_config(path, out, sizeof out), 0);
	CU_ASSERT(strstr(out, "successful") != NULL);

	/* a service naming a missing waitgroup: line 7, column 16 */
	write_file(path, "waitgroups:\n"
			 "  wg:\n"
			 "    processes: 1\n"
			 "services:\n"
			 "  cat:\n"
			 "    commands: {cat: {prog: cat}}\n"
			 "    waitgroup: nosuch\n");
	CU_ASSERT_EQUAL(harness_check_config(path, out, sizeof out), 1);
	char expect[400];
	snprintf(expect, sizeof expect, "%s:7:16:", path);
	CU_ASSERT(strstr(out, expect) != NULL);

	/* an unknown key */
	write_file(path, "addr: 127.0.0.1:0\nbogusKey: 1\n");
	CU_ASSERT_EQUAL(harness_check_config(path, out, sizeof out), 1);
	snprintf(expect, sizeof expect, "%s:2:1:", path);
	CU_ASSERT(strstr(out, expect) != NULL);

	/* a program that does not exist: -t warns as a start does, naming
	 * file:line:column and disabling the service; an error with --strict */
	snprintf(good, sizeof good,
		 "%swaitgroups: {wg: {processes: 1}}\n"
		 "services:\n"
		 "  x:\n"
		 "    waitgroup: wg\n"
		 "    commands: {x: {prog: no-such-program-anywhere}}\n",
		 root_ok);
	write_file(path, good);
	CU_ASSERT_EQUAL(harness_check_config(path, out, sizeof out), 0);
	snprintf(expect, sizeof expect,
		 "%s:%d:16: service x disabled: command x: program no-such-program-anywhere not "
		 "found in PATH",
		 path, root_ok[0] ? 6 : 5);
	CU_ASSERT(strstr(out, expect) != NULL);
	CU_ASSERT(strstr(out, "successful") != NULL);
	if (!strstr(out, expect))
		printf("\n  -t said: %s\n", out);
	char cmd[400];
	snprintf(cmd, sizeof cmd, "'%s' -t --strict -c '%s' >/dev/null 2>&1",
		 getenv("EXECSERVER_BIN") ? getenv("EXECSERVER_BIN") : "./execserver", path);
	int st = system(cmd);
	CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 1);

	unlink(path);
	rmdir(dir);
}

/* Valid files that still deserve a word, at -t as at a start: one
 * without services, one holding an authToken readable by everyone. */
static void test_check_config_warnings(void)
{
	char dir[] = "/tmp/es-warn-XXXXXX", path[128], out[2048], text[2048], expect[300];
	CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
	snprintf(path, sizeof path, "%s/c.yml", dir);
	const char *root_ok = geteuid() == 0 ? "allowRootJobs: true\n" : "";

	snprintf(text, sizeof text, "addr: 127.0.0.1:0\n%s", root_ok);
	write_file(path, text);
	CU_ASSERT_EQUAL(harness_check_config(path, out, sizeof out), 0);
	snprintf(expect, sizeof expect, "%s:1:1: no \"services\" are defined", path);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, expect));

	snprintf(text, sizeof text, "authToken: s3cret\n%s%s", root_ok, harness_default_body(1));
	write_file(path, text);
	CU_ASSERT_FATAL(chmod(path, 0644) == 0);
	CU_ASSERT_EQUAL(harness_check_config(path, out, sizeof out), 0);
	snprintf(expect, sizeof expect,
		 "%s holds the authToken and is readable by every user of the host (mode 0644)",
		 path);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, expect));
	CU_ASSERT_FATAL(chmod(path, 0640) == 0);
	CU_ASSERT_EQUAL(harness_check_config(path, out, sizeof out), 0);
	CU_ASSERT_PTR_NULL(strstr(out, "readable by every user"));
	unlink(path);
	rmdir(dir);
}

static void test_sighup_reload(void)
{
	struct es_daemon d;
	char body[2048];

	CU_ASSERT_FATAL(harness_start(&d, 1, harness_default_body(1), NULL) == 0);
	/* A broken file is refused and the instance keeps running. */
	FILE *f = fopen(d.config, "a");
	fputs("unknownKey: 1\n", f);
	fclose(f);
	kill(d.pid, SIGHUP);
	CU_ASSERT(harness_wait_log(&d, "reload refused", 5000) == 0);
	struct json_object *st = harness_status(&d);
	CU_ASSERT(st != NULL);
	if (st)
		json_object_put(st);
	/* A good one is taken, with new pings (the defaults were 15 and 45). */
	struct tclient *before = tc_connect(d.port, "before");
	CU_ASSERT_FATAL(before != NULL);
	CU_ASSERT_EQUAL(tc_int(before->hello, "ping_interval_sec"), 15);
	CU_ASSERT_EQUAL(tc_int(before->hello, "ping_timeout_sec"), 45);
	int frame = tc_int(before->hello, "max_frame_bytes");
	CU_ASSERT(frame > 0 && frame != 65536);
	/* the harness's keys as it wrote them (a changed one is named) */
	snprintf(body, sizeof body,
		 "addr: 127.0.0.1:%d\ntempDir: %s/tmp\npidFile: %s/execserver.pid\nhandlers: 1\n"
		 "%slogLevel: info\npingIntervalSec: 5\npingTimeoutSec: 20\n"
		 "maxFrameBytes: 65536\nresumeGraceSec: 7\n%s",
		 d.port, d.dir, d.dir, geteuid() == 0 ? "allowRootJobs: true\n" : "",
		 harness_default_body(1));
	f = fopen(d.config, "w");
	fputs(body, f);
	fclose(f);
	kill(d.pid, SIGHUP);
	CU_ASSERT(harness_wait_log(&d, "configuration reloaded", 5000) == 0);
	/* The keys that need a restart are named, exactly those that changed,
	 * and keep their values (HELLO's frame size and grace). */
	CU_ASSERT(harness_log_contains(&d, "reload: resumeGraceSec, maxFrameBytes changed"));
	/* A connection opened now runs with the new pings and says so; the
	 * open one keeps its own, and the HELLO it gets again (the clients
	 * went up) still announces them: a client's bound on how long a job
	 * outlives a lost connection rests on them (protocol.md, HELLO). */
	struct tclient *after = tc_connect(d.port, "after");
	CU_ASSERT_FATAL(after != NULL);
	CU_ASSERT_EQUAL(tc_int(after->hello, "ping_interval_sec"), 5);
	CU_ASSERT_EQUAL(tc_int(after->hello, "ping_timeout_sec"), 20);
	CU_ASSERT_EQUAL(tc_int(after->hello, "max_frame_bytes"), frame);
	CU_ASSERT_EQUAL(tc_int(after->hello, "resume_grace_sec"),
			tc_int(before->hello, "resume_grace_sec"));
	struct json_object *again = tc_expect(before, "HELLO", 3000);
	CU_ASSERT_FATAL(again != NULL);
	CU_ASSERT_EQUAL(tc_int(again, "clients"), 2);
	CU_ASSERT_EQUAL(tc_int(again, "ping_interval_sec"), 15);
	CU_ASSERT_EQUAL(tc_int(again, "ping_timeout_sec"), 45);
	json_object_put(again);
	tc_close(after);
	tc_close(before);
	CU_ASSERT(WIFEXITED(harness_stop(&d, 10000)));
	harness_cleanup(&d);
}

/* "Max open files" soft limit of a process, or -1. */
static long soft_nofile(int pid)
{
	char path[64], line[256];
	long soft = -1;
	snprintf(path, sizeof path, "/proc/%d/limits", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (strncmp(line, "Max open files", 14) == 0)
			soft = atol(line + 14);
	fclose(f);
	return soft;
}

static void test_descriptor_limit(void)
{
	struct es_daemon d;
	struct rlimit saved, low;
	char body[2048];
	int pids[2];

	CU_ASSERT_FATAL(getrlimit(RLIMIT_NOFILE, &saved) == 0);
	CU_ASSERT_FATAL(saved.rlim_max >= 3000);
	low = saved;
	low.rlim_cur = 256;
	CU_ASSERT_FATAL(setrlimit(RLIMIT_NOFILE, &low) == 0);
	/* (the default body ends inside `services`: one more service) */
	snprintf(body, sizeof body,
		 "maxConnections: 2000\n%s"
		 "  shell:\n    waitgroup: wg\n    commands:\n      sh: {prog: sh}\n",
		 harness_default_body(2));
	int started = harness_start(&d, 1, body, NULL);
	setrlimit(RLIMIT_NOFILE, &saved);
	CU_ASSERT_FATAL(started == 0);
	CU_ASSERT_EQUAL(harness_handler_pids(&d, pids, 2), 1);
	/* maxConnections + 256 + 8 per slot */
	CU_ASSERT_EQUAL(soft_nofile(pids[0]), 2000 + 256 + 8 * 2);
	CU_ASSERT_EQUAL(soft_nofile(d.pid), 2000 + 256 + 8 * 2);
	/* jobs get the limit the daemon was started with */
	struct tclient *c = tc_connect(d.port, NULL);
	CU_ASSERT_FATAL(c != NULL);
	struct json_object *done = tc_run_job(
		c, "n", "shell", "{\"command\":\"sh\",\"args\":[\"-c\",\"ulimit -n\"]}", 5000);
	CU_ASSERT_FATAL(done != NULL);
	CU_ASSERT_STRING_EQUAL(tc_str(tc_receipt(done), "stdout"), "256\n");
	json_object_put(done);
	tc_close(c);
	CU_ASSERT(WIFEXITED(harness_stop(&d, 10000)));
	harness_cleanup(&d);
}

/* A service whose program is missing: the daemon starts without it, the
 * log says why with file:line:column, HELLO and /status say why, and a
 * client asking for it is told it is disabled and why (execctl: 113). */
static void test_disabled_service(void)
{
	struct es_daemon d;
	char body[2048], url[64], out[4096], log[300];

	snprintf(body, sizeof body,
		 "%s"
		 "  images:\n    waitgroup: wg\n    commands:\n"
		 "      convert: {prog: convert-not-here}\n",
		 harness_default_body(1));
	CU_ASSERT_FATAL(harness_start(&d, 1, body, NULL) == 0);
	CU_ASSERT(harness_log_contains(&d, "service images disabled: command convert: program "
					   "convert-not-here not found in PATH"));
	CU_ASSERT(harness_log_contains(&d, "execserver.yml:"));
	struct tclient *c = tc_connect(d.port, "dis");
	CU_ASSERT_FATAL(c != NULL);
	struct json_object *off = NULL;
	CU_ASSERT(json_object_object_get_ex(c->hello, "disabled", &off));
	CU_ASSERT_PTR_NOT_NULL(off ? strstr(tc_str(off, "images"), "convert-not-here") : NULL);
	tc_close(c);

	snprintf(url, sizeof url, "ws://127.0.0.1:%d", d.port);
	snprintf(log, sizeof log, "%s/execctl.log", d.dir);
	char *argv[] = {
		(char *)harness_execctl(), "run", "-a", url, "-s", "images", "--", "convert", NULL
	};
	pid_t pid = harness_spawn(log, NULL, argv);
	int st = harness_reap(&pid, 0, 10000);
	CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 113);
	size_t len;
	unsigned char *text = harness_read_file(log, &len);
	snprintf(out, sizeof out, "%s", text ? (char *)text : "");
	free(text);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "service_disabled"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "program convert-not-here not found in PATH"));
	if (!strstr(out, "service_disabled"))
		printf("\n  execctl said: %s\n", out);
	CU_ASSERT_EQUAL(harness_finish(&d, 0), 0);
}

/* A disabled service's reason is cut to its limit on a character
 * boundary: HELLO (a text frame) carries it, and a cut inside a UTF-8
 * sequence would make every HELLO of the instance invalid UTF-8, which
 * the daemon refuses to send, so no client could connect at all.  The
 * regex (in the reason) is "a" and then two-byte characters, so that
 * the limit falls inside one of them. */
static void test_disabled_reason_utf8(void)
{
	struct es_daemon d;
	char body[2048], regex[400] = "a";

	for (int i = 0; i < 150; i++)
		strcat(regex, "\u00fc");
	snprintf(body, sizeof body,
		 "%s"
		 "  images:\n    waitgroup: wg\n    commands:\n"
		 "      convert:\n        prog: echo\n"
		 "        startupCheck: {args: [hi], regex: \"%s\"}\n",
		 harness_default_body(1), regex);
	CU_ASSERT_FATAL(harness_start(&d, 1, body, NULL) == 0);
	struct tclient *c = tc_connect(d.port, "utf8");
	CU_ASSERT_PTR_NOT_NULL(c);
	struct json_object *off = NULL;
	if (c && json_object_object_get_ex(c->hello, "disabled", &off)) {
		const char *why = tc_str(off, "images");
		CU_ASSERT_PTR_NOT_NULL(why ? strstr(why, "did not match /a\xc3\xbc") : NULL);
	} else {
		CU_FAIL("no HELLO.disabled");
	}
	if (c)
		tc_close(c);
	CU_ASSERT_EQUAL(harness_finish(&d, 0), 0);
}

/* jobLog: an info line per finished job (service, command, client, exit,
 * duration, bytes, the receipt's error); jobLog: false turns it off. */
static void test_job_log(void)
{
	struct es_daemon d;
	char body[2048];

	CU_ASSERT_FATAL(harness_start(&d, 1, harness_default_body(1), NULL) == 0);
	struct tclient *c = tc_connect(d.port, "logger");
	CU_ASSERT_FATAL(c != NULL);
	struct json_object *done = tc_run_job(c, "j1", "cat",
					      "{\"command\":\"echo\",\"args\":[\"hi\"]}", 5000);
	CU_ASSERT(done != NULL);
	json_object_put(done);
	done = tc_run_job(c, "j2", "cat", "{\"command\":\"false\"}", 5000);
	CU_ASSERT(done != NULL);
	json_object_put(done);
	/* the receipt's error: stdin from a port where nothing listens */
	char job[160];
	snprintf(job, sizeof job, "{\"command\":\"cat\",\"stdin\":\"http://127.0.0.1:%d/in\"}",
		 harness_free_port());
	done = tc_run_job(c, "j4", "cat", job, 5000);
	CU_ASSERT(done != NULL);
	json_object_put(done);
	tc_close(c);
	CU_ASSERT(harness_log_contains(&d, "info: job j1: service cat, command echo, client logger "
					   "(127.0.0.1): exit 0, "));
	CU_ASSERT(harness_log_contains(&d, "s, 0 bytes in, 3 bytes out"));
	CU_ASSERT(harness_log_contains(&d, "info: job j2: service cat, command false, client "
					   "logger (127.0.0.1): exit 1, "));
	CU_ASSERT(harness_log_contains(&d, "bytes out, error stdin_failed: "));
	CU_ASSERT_EQUAL(harness_finish(&d, 0), 0);

	snprintf(body, sizeof body, "jobLog: false\n%s", harness_default_body(1));
	CU_ASSERT_FATAL(harness_start(&d, 1, body, NULL) == 0);
	c = tc_connect(d.port, "quiet");
	CU_ASSERT_FATAL(c != NULL);
	done = tc_run_job(c, "j3", "cat", "{\"command\":\"true\"}", 5000);
	CU_ASSERT(done != NULL);
	json_object_put(done);
	tc_close(c);
	CU_ASSERT_EQUAL(harness_log_count(&d, "info: job j3"), 0);
	CU_ASSERT_EQUAL(harness_finish(&d, 0), 0);
}

/* Runs execserver with args (after the program's name), its output into
 * out; waits up to 10 s for it to exit.  The exit status, or -1 (it was
 * still running: killed). */
static int run_execserver(const char *dir, const char *const args[], char *out, size_t outlen)
{
	const char *bin = getenv("EXECSERVER_BIN");
	char log[300], *argv[12] = { (char *)(bin ? bin : "./execserver") };
	size_t len = 0;

	for (int i = 0; args[i] && i < 10; i++)
		argv[i + 1] = (char *)args[i];
	snprintf(log, sizeof log, "%s/run.log", dir);
	unlink(log);
	pid_t pid = harness_spawn(log, NULL, argv);
	int status = harness_reap(&pid, 0, 10000);
	unsigned char *text = harness_read_file(log, &len);
	snprintf(out, outlen, "%s", text ? (char *)text : "");
	free(text);
	return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* A second execserver on the address of a running one fails before it
 * detaches, naming the address, with exit status 2 (daemon or not); the
 * first keeps the port to itself and serves on. */
static void test_busy_address_refused(void)
{
	struct es_daemon d;
	char out[4096], pid_file[300], expect[64];

	CU_ASSERT_FATAL(harness_start(&d, 2, harness_default_body(1), NULL) == 0);
	snprintf(pid_file, sizeof pid_file, "%s/second.pid", d.dir);
	snprintf(expect, sizeof expect, "cannot listen on 127.0.0.1:%d: Address already in use",
		 d.port);
	const char *daemon_args[] = { "-c", d.config, "-p", pid_file, NULL };
	CU_ASSERT_EQUAL(run_execserver(d.dir, daemon_args, out, sizeof out), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, expect));
	CU_ASSERT(access(pid_file, F_OK) != 0); /* not left behind */
	const char *fg_args[] = { "-f", "-c", d.config, NULL };
	CU_ASSERT_EQUAL(run_execserver(d.dir, fg_args, out, sizeof out), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, expect));
	if (!strstr(out, expect))
		printf("\n  output: %s\n", out);
	CU_ASSERT_EQUAL(harness_finish(&d, 0), 0);
}

static int alive_after(int pid, int timeout_ms)
{
	for (int waited = 0; waited < timeout_ms && process_alive(pid); waited += 10)
		harness_sleep_ms(10);
	return process_alive(pid);
}

/* The pid file is locked for the daemon's life: a second start with the
 * same pid file (here on another port) names the running pid and exits 2,
 * and the file still holds the first daemon's pid. */
static void test_pid_file_locked(void)
{
	char dir[] = "/tmp/es-pidlock-XXXXXX", config[300], pid_file[300], text[2048];
	char out[4096], expect[128];
	CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
	snprintf(config, sizeof config, "%s/c.yml", dir);
	snprintf(pid_file, sizeof pid_file, "%s/x.pid", dir);
	snprintf(text, sizeof text, "addr: 127.0.0.1:0\ntempDir: %s/tmp\nhandlers: 1\n%s%s", dir,
		 geteuid() == 0 ? "allowRootJobs: true\n" : "", harness_default_body(1));
	write_file(config, text);

	const char *args[] = { "-c", config, "-p", pid_file, NULL };
	CU_ASSERT_EQUAL_FATAL(run_execserver(dir, args, out, sizeof out), 0);
	size_t len;
	unsigned char *content = harness_read_file(pid_file, &len);
	int pid = content ? atoi((char *)content) : 0;
	free(content);
	CU_ASSERT_FATAL(pid > 0 && process_alive(pid));

	CU_ASSERT_EQUAL(run_execserver(dir, args, out, sizeof out), 2);
	snprintf(expect, sizeof expect, "already running as pid %d", pid);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, expect));
	if (!strstr(out, expect))
		printf("\n  output: %s\n", out);
	content = harness_read_file(pid_file, &len);
	CU_ASSERT(content && atoi((char *)content) == pid);
	free(content);

	kill(pid, SIGTERM);
	CU_ASSERT(!alive_after(pid, 10000));
	if (process_alive(pid))
		kill(pid, SIGKILL);
	harness_remove_dir(dir);
}

/* dir/c.yml (into config): port 0, one handler, the default body and
 * then extra (more services). */
static void pid_test_config(const char *dir, char *config, size_t len, const char *extra)
{
	char text[4096];

	snprintf(config, len, "%s/c.yml", dir);
	snprintf(text, sizeof text, "addr: 127.0.0.1:0\ntempDir: %s/tmp\nhandlers: 1\n%s%s%s", dir,
		 geteuid() == 0 ? "allowRootJobs: true\n" : "", harness_default_body(1), extra);
	write_file(config, text);
}

/* Stops the daemon of a pid file; 1 when it exited within 10 s. */
static int stop_daemon_of(const char *pid_file)
{
	size_t len;
	unsigned char *content = harness_read_file(pid_file, &len);
	int pid = content ? atoi((char *)content) : 0;

	free(content);
	if (pid <= 0 || kill(pid, SIGTERM) != 0)
		return 0;
	if (!alive_after(pid, 10000))
		return 1;
	kill(pid, SIGKILL);
	return 0;
}

/* -p with a relative path names a file in the directory execserver was
 * started in: the daemon changes to /, and at its end removes that file,
 * not one of the same name in /. */
static void test_pid_file_relative(void)
{
	char dir[] = "/tmp/es-pidrel-XXXXXX", config[300], out[4096], cwd[1024], pid_file[300];

	CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
	pid_test_config(dir, config, sizeof config, "");
	snprintf(pid_file, sizeof pid_file, "%s/rel.pid", dir);
	CU_ASSERT_FATAL(getcwd(cwd, sizeof cwd) != NULL);
	CU_ASSERT_FATAL(chdir(dir) == 0);
	const char *args[] = { "-c", config, "-p", "rel.pid", NULL };
	int rc = run_execserver(dir, args, out, sizeof out);
	CU_ASSERT_FATAL(chdir(cwd) == 0);
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	CU_ASSERT(stop_daemon_of(pid_file));
	CU_ASSERT(access(pid_file, F_OK) != 0); /* removed at the end */
	harness_remove_dir(dir);
}

/* The pid file is opened as root: one that is not a regular file of one
 * link (a hard link to another file) is refused before anything else. */
static void test_pid_file_hard_link(void)
{
	char dir[] = "/tmp/es-pidlink-XXXXXX", config[300], out[4096], other[300], pid_file[300];

	CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
	pid_test_config(dir, config, sizeof config, "");
	snprintf(other, sizeof other, "%s/precious", dir);
	snprintf(pid_file, sizeof pid_file, "%s/x.pid", dir);
	write_file(other, "precious\n");
	CU_ASSERT_FATAL(link(other, pid_file) == 0);
	const char *args[] = { "-c", config, "-p", pid_file, NULL };
	CU_ASSERT_EQUAL(run_execserver(dir, args, out, sizeof out), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "is not a regular file of one link"));
	size_t len;
	unsigned char *content = harness_read_file(other, &len);
	CU_ASSERT(content && strcmp((char *)content, "precious\n") == 0);
	free(content);
	if (!strstr(out, "one link")) {
		printf("\n  output: %s\n", out);
		stop_daemon_of(pid_file);
	}
	harness_remove_dir(dir);
}

/* Between the lock and the pid (the startup checks run in between), the
 * pid file does not name the dead daemon that left it: it is emptied at
 * the lock, and a second start does not name that pid as the running one.
 * The startup check reads a FIFO, so that the test holds the first start
 * there. */
static void test_pid_file_stale_emptied(void)
{
	char dir[] = "/tmp/es-pidold-XXXXXX", config[300], out[4096], fifo[300], pid_file[300];
	char extra[600], log[300];

	CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
	snprintf(fifo, sizeof fifo, "%s/hold", dir);
	CU_ASSERT_FATAL(mkfifo(fifo, 0666) == 0);
	snprintf(extra, sizeof extra,
		 "  held:\n    waitgroup: wg\n    commands:\n      cat:\n        prog: cat\n"
		 "        startupCheck: {args: [\"%s\"], regex: go}\n",
		 fifo);
	pid_test_config(dir, config, sizeof config, extra);
	snprintf(pid_file, sizeof pid_file, "%s/x.pid", dir);
	write_file(pid_file, "999999\n");
	snprintf(log, sizeof log, "%s/first.log", dir);
	const char *bin = getenv("EXECSERVER_BIN");
	char *argv[] = { (char *)(bin ? bin : "./execserver"), "-c", config, "-p", pid_file, NULL };
	pid_t first = harness_spawn(log, NULL, argv);
	CU_ASSERT_FATAL(first > 0);
	/* the startup check has opened the FIFO: the lock is taken */
	int w = -1;
	for (int waited = 0; waited < 10000 && w < 0; waited += 10) {
		w = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		if (w < 0)
			harness_sleep_ms(10);
	}
	CU_ASSERT_FATAL(w >= 0);
	size_t len;
	unsigned char *content = harness_read_file(pid_file, &len);
	CU_ASSERT(content && len == 0);
	free(content);
	const char *args[] = { "-c", config, "-p", pid_file, NULL };
	CU_ASSERT_EQUAL(run_execserver(dir, args, out, sizeof out), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "already running (pid file"));
	CU_ASSERT_PTR_NULL(strstr(out, "999999"));
	CU_ASSERT(write(w, "go\n", 3) == 3);
	close(w);
	int st = harness_reap(&first, 0, 10000);
	CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CU_ASSERT(stop_daemon_of(pid_file));
	harness_remove_dir(dir);
}

/* Started with descriptors 0, 1 and 2 closed (as some supervisors do):
 * the pid file and the listener opened before detaching must not take
 * their numbers, which the daemon points at /dev/null.  It starts (0),
 * and holds the lock of its pid file. */
static void test_closed_stdio(void)
{
	char dir[] = "/tmp/es-nostd-XXXXXX", config[300], out[4096], cmd[1200], pid_file[300];
	const char *bin = getenv("EXECSERVER_BIN");

	CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
	pid_test_config(dir, config, sizeof config, "");
	snprintf(pid_file, sizeof pid_file, "%s/x.pid", dir);
	snprintf(cmd, sizeof cmd, "'%s' -c '%s' -p '%s' <&- >&- 2>&-", bin ? bin : "./execserver",
		 config, pid_file);
	int st = system(cmd);
	CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	const char *args[] = { "-c", config, "-p", pid_file, NULL };
	CU_ASSERT_EQUAL(run_execserver(dir, args, out, sizeof out), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "already running as pid"));
	CU_ASSERT(stop_daemon_of(pid_file));
	harness_remove_dir(dir);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "handler count and parentage", test_handler_count_and_parentage },
		{ "a killed handler is replaced", test_killed_handler_is_replaced },
		{ "SIGTERM: clean exit", test_sigterm_clean_exit },
		{ "SIGTERM again while stopping: still exit 0",
		  test_sigterm_repeated_while_stopping },
		{ "master killed: no orphans", test_master_killed_no_orphans },
		{ "-t on good and broken files", test_check_config },
		{ "-t warns: no services, a token readable by all", test_check_config_warnings },
		{ "SIGHUP reload", test_sighup_reload },
		{ "descriptor limit raised for maxConnections", test_descriptor_limit },
		{ "a second start on a busy address: exit 2", test_busy_address_refused },
		{ "jobLog: a line per finished job, off with the key", test_job_log },
		{ "consoleEnabled: the console, or 404 with false", test_console_switch },
		{ "HEAD where GET reads: same head, no body", test_head_like_get },
		{ "no authToken: /status needs an address in Host", test_status_host_rule },
		{ "a disabled service: warned with its place, told to clients",
		  test_disabled_service },
		{ "a second start with the same pid file: exit 2", test_pid_file_locked },
		{ "a disabled service's reason cut as UTF-8", test_disabled_reason_utf8 },
		{ "a relative pid file: removed where it was made", test_pid_file_relative },
		{ "a hard-linked pid file: refused", test_pid_file_hard_link },
		{ "a stale pid file: emptied at the lock", test_pid_file_stale_emptied },
		{ "started with stdin, stdout, stderr closed", test_closed_stdio },
		{ NULL, NULL },
	};
	return run_suite("daemon", cases);
}
