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
 * execdispatch's init script the same way, against a private PostgreSQL
 * (tests/lib/pgtest) whose schema the installed binary migrates from the
 * installed SQL files: configtest (0; a broken file 1 naming
 * file:line:column; restart then refuses before stopping anything),
 * start (0: the pid file names a live execdispatch running as nobody whose
 * heartbeat row is in the database; a second start 0, same pid), status 0,
 * restart (a new pid, a new row), stop (0: the process gone, its row
 * deleted by the clean stop, the pid file removed; status 3; again 0); a
 * start with the metrics address in use fails (1, the reason printed,
 * nothing running), with a broken file 6 (LSB: not configured, as
 * execserver's script; restart too).  The script has no reload: the
 * daemon rereads nothing on SIGHUP but its log.
 * The daemons start as root and drop to the user nobody, as a service
 * does: not root, the test says so in one line and is skipped (exit 77).
 */
#include "autoconfig.h"

#include <errno.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "harness.h"
#include "pgtest.h"
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
	unsetenv("MAKEFLAGS"); /* a fresh make, not our caller's jobs */
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

	snprintf(req, sizeof req,
		 "GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\n%s"
		 "Connection: close\r\n\r\n",
		 auth ? "Authorization: Bearer " TOKEN "\r\n" : "");
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

/* The process pid runs the program comm (as /proc/PID/comm shows it). */
static int runs(pid_t pid, const char *comm)
{
	char path[64], line[32] = "";
	FILE *f;

	snprintf(path, sizeof path, "/proc/%ld/comm", (long)pid);
	if (!(f = fopen(path, "r")))
		return 0;
	if (!fgets(line, sizeof line, f))
		line[0] = '\0';
	fclose(f);
	line[strcspn(line, "\n")] = '\0';
	return strcmp(line, comm) == 0;
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
	snprintf(text, sizeof text, "EXECSERVER_CONFIG=%s\nEXECSERVER_PIDFILE=%s\n", config,
		 pidfile);
	CU_ASSERT_FATAL(write_file(defaults, "a", text) == 0);

	CU_ASSERT_EQUAL(SCRIPT("configtest"), 0);
	CU_ASSERT_EQUAL(SCRIPT("status"), 3);

	/* start: a live execserver in the pid file, answering on its port */
	CU_ASSERT_EQUAL(SCRIPT("start"), 0);
	pid_t pid = read_pid(pidfile);
	CU_ASSERT(pid > 0 && kill(pid, 0) == 0 && runs(pid, "execserver"));
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

/* The real uid of process pid (/proc/PID/status), or -1. */
static long uid_of(pid_t pid)
{
	char path[64], line[256];
	long uid = -1;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
	if (!(f = fopen(path, "r")))
		return -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "Uid: %ld", &uid) == 1)
			break;
	fclose(f);
	return uid;
}

/* Rows of execdispatch.dispatcher for the pid. */
static long long dispatcher_rows(PGconn *c, pid_t pid)
{
	return pgtest_int(c, "SELECT count(*) FROM execdispatch.dispatcher WHERE pid = %ld",
			  (long)pid);
}

/* Waits up to 5 s for the dispatcher row of pid to be there (want 1) or
 * gone (0); the last count. */
static long long wait_rows(PGconn *c, pid_t pid, long long want)
{
	long long got = -1;

	for (int waited = 0; waited < 5000 && got != want; waited += 50) {
		got = dispatcher_rows(c, pid);
		if (got != want)
			harness_sleep_ms(50);
	}
	return got;
}

static void test_init_script_dispatch(void)
{
	struct pg_cluster pg;
	char script[128], config[128], piddir[128], pidfile[160], defaults[300], text[2048],
		sqlenv[300], migrate_bin[200];
	const char *env = "SYSTEMCTL_SKIP_REDIRECT=1";
	char *action[] = { "/bin/sh", script, NULL, NULL };
	char *migrate[] = { migrate_bin, "--migrate", "-c", config, NULL };
	PGconn *c = NULL;
	struct passwd *nobody;
	pid_t pid, pid2;
#define SCRIPT(what) (action[2] = (what), run(env, action))

	CU_ASSERT_FATAL(install() == 0);
	CU_ASSERT_FATAL(pgtest_start(&pg) == 0);
	snprintf(script, sizeof script, "%s/execdispatch.init", root);
	CU_ASSERT_FATAL(relocate(TEST_SYSCONFDIR "/init.d/execdispatch", script) == 0);
	snprintf(config, sizeof config, "%s/dispatch.yml", root);
	snprintf(piddir, sizeof piddir, "%s/run/execdispatch", root);
	snprintf(pidfile, sizeof pidfile, "%s/execdispatch.pid", piddir);
	CU_ASSERT_FATAL(chmod(root, 0711) == 0);
	/* no execserver needed: the dispatcher registers, beats and waits */
	snprintf(text, sizeof text,
		 "database: \"%s\"\nexecservers:\n  - ws://127.0.0.1:9\n"
		 "instanceId: initd\npollMs: 200\nheartbeatSec: 1\n",
		 pg.conninfo);
	CU_ASSERT_FATAL(write_file(config, "w", text) == 0);
	snprintf(defaults, sizeof defaults, "%s%s/default/execdispatch", root, TEST_SYSCONFDIR);
	snprintf(text, sizeof text,
		 "EXECDISPATCH_CONFIG=%s\nEXECDISPATCH_USER=nobody\nPIDDIR=%s\n"
		 "PIDFILE=%s\nSTOP_TIMEOUT=20\n",
		 config, piddir, pidfile);
	CU_ASSERT_FATAL(write_file(defaults, "w", text) == 0);
	/* the installed binaries, with the installed libexecclient */
	snprintf(text, sizeof text, "%s%s", root, TEST_LIBDIR);
	setenv("LD_LIBRARY_PATH", text, 1);
	/* the installed binary migrates from the installed SQL files */
	snprintf(migrate_bin, sizeof migrate_bin, "%s%s/execdispatch", root, TEST_SBINDIR);
	snprintf(sqlenv, sizeof sqlenv, "EXECDISPATCH_SQL_DIR=%s%s/execserver/migrations", root,
		 TEST_DATADIR);
	CU_ASSERT_FATAL(run(sqlenv, migrate) == 0);
	c = pgtest_connect(pg.conninfo);
	CU_ASSERT_FATAL(c != NULL);

	CU_ASSERT_EQUAL(SCRIPT("configtest"), 0);
	CU_ASSERT_EQUAL(SCRIPT("status"), 3);

	/* start: a live execdispatch as nobody, registered in the database */
	CU_ASSERT_EQUAL(SCRIPT("start"), 0);
	for (int i = 0; i < 100 && read_pid(pidfile) == 0; i++)
		harness_sleep_ms(50);
	pid = read_pid(pidfile);
	CU_ASSERT(pid > 0 && kill(pid, 0) == 0 && runs(pid, "execdispatch"));
	nobody = getpwnam("nobody"); /* libpq and pgtest use the same buffer */
	CU_ASSERT(nobody && uid_of(pid) == (long)nobody->pw_uid);
	CU_ASSERT_EQUAL(wait_rows(c, pid, 1), 1);
	CU_ASSERT_EQUAL(SCRIPT("start"), 0);
	CU_ASSERT_EQUAL(read_pid(pidfile), pid);
	CU_ASSERT_EQUAL(SCRIPT("status"), 0);

	/* a broken file: configtest names where; restart refuses it before
	 * stopping anything */
	CU_ASSERT_FATAL(write_file(config, "a", "pollMs: [\n") == 0);
	CU_ASSERT_EQUAL(SCRIPT("configtest"), 1);
	snprintf(text, sizeof text, "grep -q '%s:[0-9]*:[0-9]*: ' '%s'", config, logfile);
	CU_ASSERT_EQUAL(system(text), 0);
	CU_ASSERT_EQUAL(SCRIPT("restart"), 6);
	CU_ASSERT(kill(pid, 0) == 0 && read_pid(pidfile) == pid);
	CU_ASSERT_EQUAL(dispatcher_rows(c, pid), 1);
	CU_ASSERT_EQUAL(SCRIPT("stop"), 0);
	CU_ASSERT(kill(pid, 0) == -1 && errno == ESRCH);
	CU_ASSERT_EQUAL(SCRIPT("status"), 3);
	CU_ASSERT_EQUAL(dispatcher_rows(c, pid), 0);
	snprintf(text, sizeof text,
		 "database: \"%s\"\nexecservers:\n  - ws://127.0.0.1:9\n"
		 "instanceId: initd\npollMs: 200\nheartbeatSec: 1\n",
		 pg.conninfo);
	CU_ASSERT_FATAL(write_file(config, "w", text) == 0);

	/* restart from stopped, then again: a new process and row each time */
	CU_ASSERT_EQUAL(SCRIPT("restart"), 0);
	for (int i = 0; i < 100 && read_pid(pidfile) == 0; i++)
		harness_sleep_ms(50);
	pid = read_pid(pidfile);
	CU_ASSERT(pid > 0 && kill(pid, 0) == 0 && runs(pid, "execdispatch"));
	CU_ASSERT_EQUAL(wait_rows(c, pid, 1), 1);
	CU_ASSERT_EQUAL(SCRIPT("restart"), 0);
	for (int i = 0; i < 100 && (read_pid(pidfile) == 0 || read_pid(pidfile) == pid); i++)
		harness_sleep_ms(50);
	pid2 = read_pid(pidfile);
	CU_ASSERT(pid2 > 0 && pid2 != pid && runs(pid2, "execdispatch"));
	CU_ASSERT(kill(pid, 0) == -1 && errno == ESRCH);
	CU_ASSERT_EQUAL(wait_rows(c, pid2, 1), 1);

	/* stop: the process gone, its row deleted by the clean stop */
	CU_ASSERT_EQUAL(SCRIPT("stop"), 0);
	CU_ASSERT(pid2 > 0 && kill(pid2, 0) == -1 && errno == ESRCH);
	CU_ASSERT_EQUAL(dispatcher_rows(c, pid2), 0);
	CU_ASSERT_EQUAL(access(pidfile, F_OK), -1);
	CU_ASSERT_EQUAL(SCRIPT("status"), 3);
	CU_ASSERT_EQUAL(SCRIPT("stop"), 0); /* not running: still 0 */
	if (pid2 > 0 && kill(pid2, 0) == 0)
		kill(pid2, SIGKILL);

	/* the metrics address in use: start fails (1, the reason printed),
	 * nothing runs; a broken file: 6 */
	int busy = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof sin;
	CU_ASSERT_FATAL(bind(busy, (struct sockaddr *)&sin, sizeof sin) == 0 &&
			listen(busy, 1) == 0);
	getsockname(busy, (struct sockaddr *)&sin, &sl);
	snprintf(text, sizeof text, "metrics: 127.0.0.1:%d\n", ntohs(sin.sin_port));
	CU_ASSERT_FATAL(write_file(config, "a", text) == 0);
	CU_ASSERT_EQUAL(SCRIPT("start"), 1);
	CU_ASSERT_EQUAL(SCRIPT("status"), 3);
	snprintf(text, sizeof text,
		 "grep -q 'metrics: cannot listen on 127.0.0.1:%d: Address already in use' '%s'",
		 ntohs(sin.sin_port), logfile);
	CU_ASSERT_EQUAL(system(text), 0);
	close(busy);
	CU_ASSERT_FATAL(write_file(config, "a", "pollMs: [\n") == 0);
	CU_ASSERT_EQUAL(SCRIPT("start"), 6);
	CU_ASSERT_EQUAL(SCRIPT("status"), 3);
	PQfinish(c);
	pgtest_cleanup(&pg);
	unsetenv("LD_LIBRARY_PATH");
#undef SCRIPT
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "make install DESTDIR", test_install },
		{ "the unit: systemd-analyze verify and security", test_unit },
		{ "execdispatch's unit: the same", test_unit_dispatch },
		{ "the init script: configtest, start, status, reload, stop", test_init_script },
		{ "execdispatch's init script: configtest, start, status, restart, stop",
		  test_init_script_dispatch },
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
