/*
 * pgtest.h - a real PostgreSQL for the tests: a private cluster made with
 * initdb in a temporary directory (as the unprivileged user "postgres"
 * through runuser when the tests run as root), started with pg_ctl on a
 * free loopback port with its socket in that directory, trust
 * authentication, fsync off; stopped with -m immediate and removed at the
 * end.  Optionally a PgBouncer in transaction mode in front of it.
 *
 * PGTEST_OPTS: more server options ("-c name=value ...", e.g. the
 * benchmark's shared_preload_libraries=pg_stat_statements).
 *
 * The binaries come from $PG_BINDIR, else the newest
 * /usr/lib/postgresql/N/bin (Debian's postgresql packages); pgbouncer
 * from PATH or /usr/sbin.
 */
#ifndef ES_PGTEST_H
#define ES_PGTEST_H

#include <sys/types.h>

#include <libpq-fe.h>

struct pg_cluster {
	char dir[256]; /* the cluster's directory (removed at cleanup) */
	char bindir[256];
	int port;
	char conninfo[512]; /* direct: host=127.0.0.1 port=P user=postgres dbname=postgres */
	int bouncer_port;   /* 0: no PgBouncer */
	char bouncer_conninfo[512];
};

/* initdb + start; 0 or -1 (the log is printed). */
int pgtest_start(struct pg_cluster *pg);
/* pg_ctl -m immediate stop (0 or -1); pgtest_restart starts it again on
 * the same port. */
int pgtest_stop(struct pg_cluster *pg);
int pgtest_restart(struct pg_cluster *pg);
/* PgBouncer in transaction mode in front of the cluster, on bouncer_port
 * if set (a port a client was told of before), else on a free port;
 * fills bouncer_conninfo.  0 or -1. */
int pgtest_start_bouncer(struct pg_cluster *pg);
/* Stops PgBouncer and the cluster and removes the directory. */
void pgtest_cleanup(struct pg_cluster *pg);

/* A connection (NULL and a message on stderr when it fails). */
PGconn *pgtest_connect(const char *conninfo);
/* Runs sql (printf format); the result, or NULL after printing the error. */
PGresult *pgtest_query(PGconn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The first column of the first row as an integer; -1 on error or no row. */
long long pgtest_int(PGconn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same as text into buf ("" on error or NULL). */
const char *pgtest_text(PGconn *c, char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
