/*
 * test_service.c - the service files work as installed.  The tree is
 * installed with `make install DESTDIR=<tmp>`; the installed systemd unit
 * and init script name the configured paths, so each is moved into that
 * tree (every path under sbindir, sysconfdir and the unit directory gets
 * the tree in front, nothing else changes) and then:
 *  - the unit (and execdispatch's) passes `systemd-analyze verify` with exit status 0 and not a
 *    word of output (a stray line outside a section is only a warning
 *    there), its man pages found in the tree, and systemd reads
 *    NoNewPrivileges= as set (`systemd-analyze security --offline`);
 *  - the init script, through start-stop-daemon, checks the configuration
 *    (configtest, 0; a broken one: 1 naming file:line:column), starts the
 *    daemon (0: the pid file names a live execserver whose port answers
 *    /status; a second start is 0 with the same pid), reports it (status
 *    0), reloads it (0: the new authToken is in force, same pid; with a
 *    broken file 6 and the daemon untouched) and stops it (0: the process
 *    is gone, the pid file removed, the port closed; status 3).
 * The daemon starts as root and drops to the user nobody, as a service
 * does: not root, the test says so in one line and is skipped (exit 77).
 */
#include "autoconfig.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <CUnit/Basic.h>

#include "harness.h"
#include "suite.h"
#include "wsclient.h"

#define TOKEN "service-test-token"

static char root[64], logfile[128];

/* Runs argv with extra_env ("K=V" or NULL), output appended to logfile;
 * its exit status, or -1. */
static int run(const char *extra_env, char *const argv[])
{
	pid_t pid = harness_spawn(logfile, extra_env, argv);
	int ws = pid > 0 ? harness_reap(&pid, 0, 60000) : -1;

	return ws >= 0 && WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

/* Copies the installed file at path (under root) to dst, with its mode and
 * with every path under the configured directories moved into root. */
static int relocate(const char *path, const char *dst)
{
	char cmd[1024];

	snprintf(cmd, sizeof cmd,
		 "sed -e 's|%s/|%s%s/|g' -e 's|%s/|%s%s/|g' '%s%s' > '%s' && "
		 "chmod --reference='%s%s' '%s'",
		 TEST_SBINDIR, root, TEST_SBINDIR, TEST_SYSCONFDIR, root, TEST_SYSCONFDIR, root,
		 path, dst, root, path, dst);
	return system(cmd) == 0 ? 0 : -1;
}

static int write_file(const char *path, const char *mode, const char *text)
{
	FILE *f = fopen(path, mode);

	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f) == 0 && chmod(path, 0644) == 0 ? 0 : -1;
}

/* make install DESTDIR=root, once (each test may run alone: TEST_ONLY);
 * its exit status. */
static int install(void)
{
	static int rc = -1;
	char destdir[100];
	char *make[] = { TEST_MAKE, "-s", "-C", TEST_TOP_BUILDDIR, "install", destdir, NULL };

	if (rc >= 0)
		return rc;
	snprintf(destdir, sizeof destdir, "DESTDIR=%s", root);
	unsetenv("MAKEFLAGS");	/* a fresh make, not our caller's jobs */
	unsetenv("MFLAGS");
	unsetenv("MAKELEVEL");
	rc = run(NULL, make);
	return rc;
}

static void test_install(void)
{
	CU_ASSERT_EQUAL(install(), 0);
}

/* The installed unit name: systemd-analyze verify says nothing and exits 0,
 * and systemd reads NoNewPrivileges= as set. */
static void check_unit(const char *name)
{
	char unit[128], path[200], man[300], cmd[600], out[4096];

	CU_ASSERT_FATAL(install() == 0);
	snprintf(unit, sizeof unit, "%s/%s", root, name);
	snprintf(path, sizeof path, "%s/%s", TEST_UNITDIR, name);
	CU_ASSERT_FATAL(relocate(path, unit) == 0);
	/* setenv copies: putenv would leave the environment pointing into
	 * this frame once it returns (and every later spawn reading it) */
	snprintf(man, sizeof man, "%s%s", root, TEST_MANDIR);
	CU_ASSERT_FATAL(setenv("MANPATH", man, 1) == 0);

	/* verify: exit status 0 and nothing said (warnings included) */
	snprintf(cmd, sizeof cmd, "systemd-analyze verify '%s' 2>&1", unit);
	FILE *p = popen(cmd, "r");
	CU_ASSERT_FATAL(p != NULL);
	size_t n = fread(out, 1, sizeof out - 1, p);
	out[n] = '\0';
	CU_ASSERT_EQUAL(pclose(p), 0);
	CU_ASSERT_EQUAL(n, 0);
	if (n)
		fprintf(stderr, "\n  systemd-analyze verify %s: %s", name, out);

	/* the settings as systemd reads them */
	snprintf(cmd, sizeof cmd, "systemd-analyze security --offline=yes '%s' 2>&1", unit);
	p = popen(cmd, "r");
	CU_ASSERT_FATAL(p != NULL);
	int nnp = 0;
	while (fgets(out, sizeof out, p))
		if (strstr(out, "NoNewPrivileges="))
			nnp = strncmp(out, "\xE2\x9C\x93 ", 4) == 0 ? 1 : -1; /* a check mark */
	pclose(p);
	CU_ASSERT_EQUAL(nnp, 1);
}

static void test_unit(void)
{
	check_unit("execserver.service");
}

static void test_unit_dispatch(void)
{
	check_unit("execdispatch.service");
}

/* The HTTP status of GET /status (with the token when auth), or -1. */
static int status_code(int port, int auth)
{
	char req[256];
	int status = -1;

	snprintf(req, sizeof req, "GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\n%s"
		 "Connection: close\r\n\r\n", auth ? "Authorization: Bearer " TOKEN "\r\n" : "");
	if (wsc_http_request("127.0.0.1", port, req, 2000, &status, NULL, 0) < 0)
		return -1;
	return status;
}

static int wait_status_code(int port, int auth, int want)
{
	int got = -1;

	for (int waited = 0; waited < 5000 && got != want; waited += 50) {
		got = status_code(port, auth);
		if (got != want)
			harness_sleep_ms(50);
	}
	return got;
}

static pid_t read_pid(const char *pidfile)
{
	FILE *f = fopen(pidfile, "r");
	long pid = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%ld", &pid) != 1)
		pid = 0;
	fclose(f);
	return (pid_t)pid;
}

static int is_execserver(pid_t pid)
{
	char path[64], comm[32] = "";
	FILE *f;

	snprintf(path, sizeof path, "/proc/%ld/comm", (long)pid);
	if (!(f = fopen(path, "r")))
		return 0;
	if (!fgets(comm, sizeof comm, f))
		comm[0] = '\0';
	fclose(f);
	return strcmp(comm, "execserver\n") == 0;
}

static void test_init_script(void)
{
	char script[128], config[128], pidfile[128], defaults[300], text[1024];
	int port = harness_free_port();
	/* where systemd runs the machine, init-functions would hand the actions
	 * to systemctl and the system's unit: the script itself is under test */
	const char *env = "SYSTEMCTL_SKIP_REDIRECT=1";
	char *action[] = { "/bin/sh", script, NULL, NULL };
#define SCRIPT(what) (action[2] = (what), run(env, action))

	CU_ASSERT_FATAL(port > 0 && install() == 0);
	snprintf(script, sizeof script, "%s/execserver.init", root);
	CU_ASSERT_FATAL(relocate(TEST_SYSCONFDIR "/init.d/execserver", script) == 0);
	snprintf(config, sizeof config, "%s/service.yml", root);
	snprintf(pidfile, sizeof pidfile, "%s/run/execserver.pid", root);
	/* the daemon runs as nobody: it must reach tempDir and the file */
	CU_ASSERT_FATAL(chmod(root, 0711) == 0);
	snprintf(text, sizeof text, "addr: 127.0.0.1:%d\ntempDir: %s/tmp\nuser: nobody\n%s", port,
		 root, harness_default_body(1));
	CU_ASSERT_FATAL(write_file(config, "w", text) == 0);
	snprintf(defaults, sizeof defaults, "%s%s/default/execserver", root, TEST_SYSCONFDIR);
	snprintf(text, sizeof text, "EXECSERVER_CONFIG=%s\nEXECSERVER_PIDFILE=%s\n", config, pidfile);
	CU_ASSERT_FATAL(write_file(defaults, "a", text) == 0);

	CU_ASSERT_EQUAL(SCRIPT("configtest"), 0);
	CU_ASSERT_EQUAL(SCRIPT("status"), 3);

	/* start: a live execserver in the pid file, answering on its port */
	CU_ASSERT_EQUAL(SCRIPT("start"), 0);
	pid_t pid = read_pid(pidfile);
	CU_ASSERT(pid > 0 && kill(pid, 0) == 0 && is_execserver(pid));
	CU_ASSERT_EQUAL(wait_status_code(port, 0, 200), 200);
	CU_ASSERT_EQUAL(SCRIPT("start"), 0);
	CU_ASSERT_EQUAL(read_pid(pidfile), pid);
	CU_ASSERT_EQUAL(SCRIPT("status"), 0);

	/* reload: the new authToken is in force in the same process */
	snprintf(text, sizeof text, "authToken: %s\n", TOKEN);
	CU_ASSERT_FATAL(write_file(config, "a", text) == 0);
	CU_ASSERT_EQUAL(SCRIPT("reload"), 0);
	CU_ASSERT_EQUAL(wait_status_code(port, 0, 401), 401);
	CU_ASSERT_EQUAL(status_code(port, 1), 200);
	CU_ASSERT_EQUAL(read_pid(pidfile), pid);

	/* a broken file: configtest names where, reload leaves the daemon be */
	CU_ASSERT_FATAL(write_file(config, "a", "handlers: [\n") == 0);
	CU_ASSERT_EQUAL(SCRIPT("configtest"), 1);
	snprintf(text, sizeof text, "grep -q '%s:[0-9]*:[0-9]*: ' '%s'", config, logfile);
	CU_ASSERT_EQUAL(system(text), 0);
	CU_ASSERT_EQUAL(SCRIPT("reload"), 6);
	CU_ASSERT(kill(pid, 0) == 0);
	CU_ASSERT_EQUAL(status_code(port, 1), 200);

	/* stop: the process gone, its pid file and port too */
	CU_ASSERT_EQUAL(SCRIPT("stop"), 0);
	CU_ASSERT(pid > 0 && kill(pid, 0) == -1 && errno == ESRCH);
	CU_ASSERT_EQUAL(access(pidfile, F_OK), -1);
	CU_ASSERT_EQUAL(status_code(port, 1), -1);
	CU_ASSERT_EQUAL(SCRIPT("status"), 3);
	if (pid > 0 && kill(pid, 0) == 0)
		kill(pid, SIGKILL);
#undef SCRIPT
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "make install DESTDIR", test_install },
		{ "the unit: systemd-analyze verify and security", test_unit },
		{ "execdispatch's unit: the same", test_unit_dispatch },
		{ "the init script: configtest, start, status, reload, stop", test_init_script },
		{ NULL, NULL },
	};

	if (geteuid() != 0) {
		printf("test_service: skipped: needs root (the init script starts the daemon as "
		       "root, which drops to nobody)\n");
		return 77;
	}
	snprintf(root, sizeof root, "/tmp/es-service-XXXXXX");
	if (!mkdtemp(root))
		return 1;
	snprintf(logfile, sizeof logfile, "%s/log", root);
	int rc = run_suite("service files", cases);
	if (rc != 0)
		harness_tail("make install, systemd-analyze and the init script", logfile, 40);
	harness_remove_dir(root);
	return rc;
}
