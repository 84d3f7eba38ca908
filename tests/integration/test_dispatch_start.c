/*
 * test_dispatch_start.c - how execdispatch starts as a daemon: what can
 * fail without the database fails before it detaches, with the reason on
 * stderr and exit status 2 (a metrics address another process holds, a pid
 * file another daemon has locked); the daemon's made instanceId names its
 * own pid; a second start with the same pid file names the running pid;
 * its syslog lines carry its own name; a row for a service its execserver
 * disabled fails with the reason.
 * Real processes and a private PostgreSQL (dispatch_fixture.h).
 */
#include "autoconfig.h"

#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "dispatch_fixture.h"
#include "suite.h"

static struct dfix F;

/* Writes dir/name: the database, one execserver address, no instanceId
 * (a made one), then extra.  The path into path. */
static void write_config(const char *conninfo, const char *name, const char *extra, char *path,
			 size_t len)
{
	snprintf(path, len, "%s/%s", F.dir, name);
	FILE *f = fopen(path, "w");
	CU_ASSERT_FATAL(f != NULL);
	fprintf(f, "database: \"%s\"\nexecservers: [ws://127.0.0.1:9]\nlogLevel: debug\n%s",
		conninfo, extra ? extra : "");
	fclose(f);
}

static int alive(int pid)
{
	return pid > 0 && kill(pid, 0) == 0;
}

/* The pid in a pid file, or 0. */
static int pid_in(const char *path)
{
	size_t len;
	unsigned char *text = harness_read_file(path, &len);
	int pid = text ? atoi((char *)text) : 0;
	free(text);
	return pid;
}

/* A metrics address that another process listens on: exit 2 before the
 * daemon detaches, the address and errno's text on stderr, no pid file
 * and no daemon left. */
static void test_metrics_address_busy(void)
{
	int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof sin;
	char extra[64], cfg[300], pid_file[300], out[2048], expect[128];

	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	CU_ASSERT_FATAL(bind(s, (struct sockaddr *)&sin, sizeof sin) == 0 && listen(s, 4) == 0);
	getsockname(s, (struct sockaddr *)&sin, &sl);
	snprintf(extra, sizeof extra, "metrics: 127.0.0.1:%d\n", ntohs(sin.sin_port));
	write_config(F.pg.conninfo, "busy.yml", extra, cfg, sizeof cfg);
	snprintf(pid_file, sizeof pid_file, "%s/busy.pid", F.dir);

	const char *args[] = { "-c", cfg, "-p", pid_file, NULL };
	CU_ASSERT_EQUAL(df_run_tool(out, sizeof out, args), 2);
	snprintf(expect, sizeof expect,
		 "metrics: cannot listen on 127.0.0.1:%d: Address already in use",
		 ntohs(sin.sin_port));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, expect));
	if (!strstr(out, expect))
		printf("\n  output: %s\n", out);
	CU_ASSERT(access(pid_file, F_OK) != 0);
	int left = pid_in(pid_file);
	if (left > 0)
		kill(left, SIGKILL);
	close(s);
}

/* A daemon: its made instanceId carries its own pid (the one in the pid
 * file, registered in the dispatcher table), and a second start with the
 * same pid file is refused naming that pid, leaving the file alone. */
static void test_daemon_pid_and_instance(void)
{
	char cfg[300], pid_file[300], out[2048], expect[128], inst[128], want[32];

	write_config(F.pg.conninfo, "daemon.yml", NULL, cfg, sizeof cfg);
	snprintf(pid_file, sizeof pid_file, "%s/daemon.pid", F.dir);
	const char *args[] = { "-c", cfg, "-p", pid_file, NULL };
	CU_ASSERT_EQUAL_FATAL(df_run_tool(out, sizeof out, args), 0);
	int pid = pid_in(pid_file);
	CU_ASSERT_FATAL(alive(pid));

	/* registered as host-PID-random */
	long long rows = 0;
	for (int waited = 0; waited < 10000 && rows < 1; waited += 20) {
		rows = pgtest_int(
			F.c, "SELECT count(*) FROM execdispatch.dispatcher WHERE pid = %d", pid);
		if (rows < 1)
			harness_sleep_ms(20);
	}
	CU_ASSERT_EQUAL(rows, 1);
	pgtest_text(F.c, inst, sizeof inst,
		    "SELECT instance FROM execdispatch.dispatcher WHERE pid = %d", pid);
	snprintf(want, sizeof want, "-%d-", pid);
	CU_ASSERT_PTR_NOT_NULL(strstr(inst, want));
	if (!strstr(inst, want))
		printf("\n  instance %s, daemon pid %d\n", inst, pid);

	CU_ASSERT_EQUAL(df_run_tool(out, sizeof out, args), 2);
	snprintf(expect, sizeof expect, "already running as pid %d", pid);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, expect));
	if (!strstr(out, expect))
		printf("\n  output: %s\n", out);
	CU_ASSERT_EQUAL(pid_in(pid_file), pid);

	kill(pid, SIGTERM);
	for (int waited = 0; waited < 10000 && alive(pid); waited += 10)
		harness_sleep_ms(10);
	CU_ASSERT(!alive(pid));
	if (alive(pid))
		kill(pid, SIGKILL);
}

/* The daemon logs to syslog under its own name: "execdispatch[PID]: info:
 * ...", not "execserver[PID]: [execdispatch] ...".  The host runs no
 * syslog daemon here, so the test is the syslog daemon: a datagram socket
 * that /dev/log points at in a mount namespace of the daemon's own (a
 * tmpfs on /dev with /dev/null in it; root only). */
static void test_syslog_name(void)
{
	char cfg[300], pid_file[300], sock_path[100], script[1200], log[300], msg[2048];
	const char *bin = getenv("EXECDISPATCH_BIN");

	if (geteuid() != 0 || system("command -v unshare >/dev/null") != 0) {
		printf("\n  skipped: needs root and unshare(1)\n");
		return;
	}
	write_config(F.pg.conninfo, "syslog.yml", NULL, cfg, sizeof cfg);
	snprintf(pid_file, sizeof pid_file, "%s/syslog.pid", F.dir);
	snprintf(sock_path, sizeof sock_path, "%.80s/devlog", F.dir);
	snprintf(log, sizeof log, "%s/syslog-start.log", F.dir);
	int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", sock_path);
	CU_ASSERT_FATAL(bind(s, (struct sockaddr *)&sun, sizeof sun) == 0);
	struct timeval tv = { 10, 0 };
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	snprintf(script, sizeof script,
		 "mount -t tmpfs none /dev && mknod -m 666 /dev/null c 1 3 && "
		 "ln -s '%s' /dev/log && exec '%s' -c '%s' -p '%s'",
		 sock_path, bin ? bin : "./execdispatch", cfg, pid_file);
	char *argv[] = { "unshare", "-m", "sh", "-c", script, NULL };
	pid_t pid = harness_spawn(log, NULL, argv);
	int st = harness_reap(&pid, 0, 10000);
	CU_ASSERT_FATAL(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	int daemon_pid = pid_in(pid_file);
	CU_ASSERT(alive(daemon_pid));

	char want[64];
	int found = 0, foreign = 0;
	snprintf(want, sizeof want, "execdispatch[%d]: info: execdispatch ", daemon_pid);
	for (int i = 0; i < 50 && !found; i++) {
		ssize_t n = recv(s, msg, sizeof msg - 1, 0);
		if (n <= 0)
			break;
		msg[n] = '\0';
		found = strstr(msg, want) != NULL;
		foreign += strstr(msg, "execserver[") != NULL ||
			   strstr(msg, "[execdispatch]") != NULL;
	}
	CU_ASSERT(found);
	CU_ASSERT_EQUAL(foreign, 0);
	if (!found)
		printf("\n  last datagram: %s\n", msg);
	kill(daemon_pid, SIGTERM);
	for (int waited = 0; waited < 10000 && alive(daemon_pid); waited += 10)
		harness_sleep_ms(10);
	if (alive(daemon_pid))
		kill(daemon_pid, SIGKILL);
	close(s);
}

/* A row for a service that the execserver has but disabled (its program
 * is missing) fails with service_disabled and keeps the reason, as an
 * unknown service's row keeps libexecclient's message. */
static void test_disabled_service_row(void)
{
	char body[2048], buf[512];

	snprintf(body, sizeof body,
		 "waitgroups: {wg: {processes: 1}}\nservices:\n"
		 "  images:\n    waitgroup: wg\n    commands:\n"
		 "      convert: {prog: convert-not-here}\n");
	CU_ASSERT_FATAL(harness_start(&F.es[0], 1, body, NULL) == 0);
	F.nes = 1;
	CU_ASSERT_FATAL(df_write_config(&F, 0, NULL) == 0 && df_start_disp(&F, 0) == 0);
	long long id = pgtest_int(
		F.c, "SELECT execdispatch.submit('images', '{\"command\":\"convert\"}')");
	CU_ASSERT_FATAL(df_wait_final(&F, 20000) == 0);
	pgtest_text(F.c, buf, sizeof buf,
		    "SELECT state || '/' || error FROM execdispatch.job WHERE id = %lld", id);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "failed/service_disabled: service \"images\" is "
					   "disabled on instance "));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "command convert: program convert-not-here not "
					   "found in PATH"));
	if (!strstr(buf, "convert-not-here"))
		printf("\n  row: %s\n", buf);
	df_stop_disp(&F, 0, SIGTERM, 10000);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "metrics address busy: exit 2 before detaching", test_metrics_address_busy },
		{ "daemon: own pid in instanceId, pid file locked", test_daemon_pid_and_instance },
		{ "daemon: logs to syslog as execdispatch", test_syslog_name },
		{ "a disabled service's row keeps the reason", test_disabled_service_row },
		{ NULL, NULL },
	};
	if (df_start(&F) < 0) {
		fprintf(stderr, "cannot start PostgreSQL\n");
		return 1;
	}
	int rc = run_suite("dispatch_start", cases);
	df_cleanup(&F, rc != 0);
	return rc;
}
