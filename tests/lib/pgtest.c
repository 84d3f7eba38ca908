/*
 * pgtest.c - see pgtest.h.  Commands run through system() with every path
 * single-quoted; the directories are made by mkdtemp, so they hold no
 * quote.
 */
#include "pgtest.h"

#include <dirent.h>
#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define PG_USER "postgres"

/* "runuser -u postgres -- " as root (initdb refuses root), else "". */
static const char *as_user(void)
{
	return geteuid() == 0 ? "runuser -u " PG_USER " -- " : "";
}

static int find_bindir(char *out, size_t len)
{
	const char *env = getenv("PG_BINDIR");
	DIR *d;
	struct dirent *e;
	int best = 0;

	if (env && *env) {
		snprintf(out, len, "%s", env);
		return 0;
	}
	d = opendir("/usr/lib/postgresql");
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		int v = atoi(e->d_name);
		char path[512];
		snprintf(path, sizeof path, "/usr/lib/postgresql/%s/bin/initdb", e->d_name);
		if (v > best && access(path, X_OK) == 0) {
			best = v;
			snprintf(out, len, "/usr/lib/postgresql/%d/bin", v);
		}
	}
	closedir(d);
	return best ? 0 : -1;
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	return system(cmd) == 0 ? 0 : -1;
}

static int start_server(struct pg_cluster *pg)
{
	const char *extra = getenv("PGTEST_OPTS");

	if (sh("%s'%s/pg_ctl' -w -t 30 -D '%s/data' -l '%s/postgres.log' -o "
	       "\"-p %d -k '%s' -c listen_addresses=127.0.0.1 -c fsync=off "
	       "-c full_page_writes=off -c max_connections=200 %s\" "
	       "start >/dev/null",
	       as_user(), pg->bindir, pg->dir, pg->dir, pg->port, pg->dir,
	       extra ? extra : "") < 0) {
		char log[300];
		snprintf(log, sizeof log, "%s/postgres.log", pg->dir);
		harness_tail("postgres", log, 30);
		return -1;
	}
	return 0;
}

int pgtest_start(struct pg_cluster *pg)
{
	memset(pg, 0, sizeof *pg);
	if (find_bindir(pg->bindir, sizeof pg->bindir) < 0) {
		fprintf(stderr, "pgtest: no PostgreSQL server binaries (install the Debian package "
				"postgresql, or set PG_BINDIR)\n");
		return -1;
	}
	snprintf(pg->dir, sizeof pg->dir, "/tmp/es-pg-XXXXXX");
	if (!mkdtemp(pg->dir)) {
		perror("pgtest: mkdtemp");
		return -1;
	}
	if (geteuid() == 0) {
		struct passwd *pw = getpwnam(PG_USER);
		if (!pw || chown(pg->dir, pw->pw_uid, pw->pw_gid) < 0) {
			fprintf(stderr, "pgtest: no user %s to run PostgreSQL as\n", PG_USER);
			return -1;
		}
	}
	pg->port = harness_free_port();
	snprintf(pg->conninfo, sizeof pg->conninfo,
		 "host=127.0.0.1 port=%d user=%s dbname=postgres", pg->port, PG_USER);
	if (sh("%s'%s/initdb' -A trust -U %s -E UTF8 --no-sync -D '%s/data' >'%s/initdb.log' 2>&1",
	       as_user(), pg->bindir, PG_USER, pg->dir, pg->dir) < 0) {
		char log[300];
		snprintf(log, sizeof log, "%s/initdb.log", pg->dir);
		harness_tail("initdb", log, 30);
		return -1;
	}
	return start_server(pg);
}

int pgtest_stop(struct pg_cluster *pg)
{
	return sh("%s'%s/pg_ctl' -D '%s/data' -m immediate stop >/dev/null 2>&1", as_user(),
		  pg->bindir, pg->dir);
}

int pgtest_restart(struct pg_cluster *pg)
{
	return start_server(pg);
}

int pgtest_start_bouncer(struct pg_cluster *pg)
{
	char path[400];
	FILE *f;
	const char *bin = access("/usr/sbin/pgbouncer", X_OK) == 0 ? "/usr/sbin/pgbouncer"
								   : "pgbouncer";

	if (!pg->bouncer_port)
		pg->bouncer_port = harness_free_port();
	snprintf(path, sizeof path, "%s/userlist.txt", pg->dir);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fprintf(f, "\"%s\" \"\"\n", PG_USER);
	fclose(f);
	/* one left by a PgBouncer killed earlier (a zombie where nothing
	 * reaps orphans) would make the new one refuse to start */
	snprintf(path, sizeof path, "%s/pgbouncer.pid", pg->dir);
	unlink(path);
	snprintf(path, sizeof path, "%s/pgbouncer.ini", pg->dir);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fprintf(f,
		"[databases]\n"
		"postgres = host=127.0.0.1 port=%d dbname=postgres\n"
		"[pgbouncer]\n"
		"listen_addr = 127.0.0.1\n"
		"listen_port = %d\n"
		"unix_socket_dir =\n"
		"auth_type = trust\n"
		"auth_file = %s/userlist.txt\n"
		"pool_mode = transaction\n"
		"max_client_conn = 500\n"
		"default_pool_size = 8\n"
		"logfile = %s/pgbouncer.log\n"
		"pidfile = %s/pgbouncer.pid\n",
		pg->port, pg->bouncer_port, pg->dir, pg->dir, pg->dir);
	fclose(f);
	if (geteuid() == 0)
		sh("chown %s '%s/pgbouncer.ini' '%s/userlist.txt'", PG_USER, pg->dir, pg->dir);
	if (sh("%s%s -d '%s/pgbouncer.ini' >/dev/null 2>&1", as_user(), bin, pg->dir) < 0) {
		fprintf(stderr, "pgtest: pgbouncer did not start (install the Debian package "
				"pgbouncer)\n");
		snprintf(path, sizeof path, "%s/pgbouncer.log", pg->dir);
		harness_tail("pgbouncer", path, 20);
		pg->bouncer_port = 0;
		return -1;
	}
	snprintf(pg->bouncer_conninfo, sizeof pg->bouncer_conninfo,
		 "host=127.0.0.1 port=%d user=%s dbname=postgres", pg->bouncer_port, PG_USER);
	for (int i = 0; i < 100; i++) {
		PGconn *c = PQconnectdb(pg->bouncer_conninfo);
		int ok = PQstatus(c) == CONNECTION_OK;
		PQfinish(c);
		if (ok)
			return 0;
		harness_sleep_ms(50);
	}
	fprintf(stderr, "pgtest: pgbouncer does not answer on port %d\n", pg->bouncer_port);
	return -1;
}

static void stop_bouncer(struct pg_cluster *pg)
{
	char path[400];
	size_t len;
	unsigned char *txt;
	pid_t pid;

	if (!pg->bouncer_port)
		return;
	snprintf(path, sizeof path, "%s/pgbouncer.pid", pg->dir);
	txt = harness_read_file(path, &len);
	pid = txt ? (pid_t)atoi((char *)txt) : 0;
	free(txt);
	if (pid > 0)
		kill(pid, SIGTERM);
	for (int i = 0; pid > 0 && i < 100 && kill(pid, 0) == 0; i++)
		harness_sleep_ms(20);
	/* still there after 2 s (a SIGSTOP'ed PgBouncer never takes its
	 * SIGTERM): killed, so that no test leaves one running */
	if (pid > 0 && kill(pid, 0) == 0) {
		kill(pid, SIGKILL);
		for (int i = 0; i < 100 && kill(pid, 0) == 0; i++)
			harness_sleep_ms(20);
	}
	pg->bouncer_port = 0;
}

void pgtest_cleanup(struct pg_cluster *pg)
{
	if (!pg->dir[0])
		return;
	stop_bouncer(pg);
	pgtest_stop(pg);
	harness_remove_dir(pg->dir);
	pg->dir[0] = '\0';
}

static void quiet(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

PGconn *pgtest_connect(const char *conninfo)
{
	PGconn *c = PQconnectdb(conninfo);

	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "pgtest: connect %s: %s", conninfo, PQerrorMessage(c));
		PQfinish(c);
		return NULL;
	}
	PQsetNoticeProcessor(c, quiet, NULL);
	return c;
}

static PGresult *vquery(PGconn *c, const char *fmt, va_list ap)
{
	char sql[8192];
	PGresult *res;

	vsnprintf(sql, sizeof sql, fmt, ap);
	res = PQexec(c, sql);
	if (PQresultStatus(res) != PGRES_TUPLES_OK && PQresultStatus(res) != PGRES_COMMAND_OK) {
		fprintf(stderr, "pgtest: %s: %s", sql, PQresultErrorMessage(res));
		PQclear(res);
		return NULL;
	}
	return res;
}

PGresult *pgtest_query(PGconn *c, const char *fmt, ...)
{
	va_list ap;
	PGresult *res;

	va_start(ap, fmt);
	res = vquery(c, fmt, ap);
	va_end(ap);
	return res;
}

long long pgtest_int(PGconn *c, const char *fmt, ...)
{
	va_list ap;
	PGresult *res;
	long long v = -1;

	va_start(ap, fmt);
	res = vquery(c, fmt, ap);
	va_end(ap);
	if (res && PQntuples(res) > 0 && !PQgetisnull(res, 0, 0))
		v = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return v;
}

const char *pgtest_text(PGconn *c, char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	PGresult *res;

	va_start(ap, fmt);
	res = vquery(c, fmt, ap);
	va_end(ap);
	buf[0] = '\0';
	if (res && PQntuples(res) > 0 && !PQgetisnull(res, 0, 0))
		snprintf(buf, len, "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	return buf;
}
