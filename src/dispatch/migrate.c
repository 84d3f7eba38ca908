/*
 * migrate.c - see migrate.h.  The files are read and checked (names,
 * versions 1..N without gaps, N equal to DISPATCH_SCHEMA_VERSION) before
 * the first transaction starts, so a broken installation changes nothing.
 * Each migration then runs in a transaction of its own, which reads the
 * version again under the advisory lock.
 */
#include "autoconfig.h"
#include "dispatch/migrate.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/queries.h"

#ifndef DISPATCH_SQL_DIR
#define DISPATCH_SQL_DIR "/usr/local/share/execserver/migrations"
#endif

const char *migrate_dir(void)
{
	const char *env = getenv("EXECDISPATCH_SQL_DIR");

	return env && *env ? env : DISPATCH_SQL_DIR;
}

/* The file of version v in dir ("NNN_*.sql"), malloc'd text, or NULL. */
static char *read_version(const char *dir, int v, char *name, size_t namelen, char *msg, size_t len)
{
	char prefix[8], path[4096];
	DIR *d = opendir(dir);
	struct dirent *e;
	FILE *f;
	char *text = NULL;
	long size;

	if (!d) {
		snprintf(msg, len, "%s: %s", dir, strerror(errno));
		return NULL;
	}
	snprintf(prefix, sizeof prefix, "%03d_", v);
	name[0] = '\0';
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (strncmp(e->d_name, prefix, 4) == 0 && n > 8 &&
		    strcmp(e->d_name + n - 4, ".sql") == 0) {
			snprintf(name, namelen, "%s", e->d_name);
			break;
		}
	}
	closedir(d);
	if (!name[0]) {
		snprintf(msg, len, "%s: no migration %s*.sql (the installation is incomplete)", dir,
			 prefix);
		return NULL;
	}
	snprintf(path, sizeof path, "%s/%s", dir, name);
	f = fopen(path, "rb");
	if (!f || fseek(f, 0, SEEK_END) < 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0 ||
	    !(text = malloc((size_t)size + 1)) || fread(text, 1, (size_t)size, f) != (size_t)size) {
		snprintf(msg, len, "%s: cannot read: %s", path, strerror(errno ? errno : EIO));
		free(text);
		text = NULL;
	} else {
		text[size] = '\0';
	}
	if (f)
		fclose(f);
	return text;
}

/* One statement without result rows; -1 with msg. */
static int run(struct db *db, const char *sql, const char *what, char *msg, size_t len)
{
	int away;
	PGresult *res = db_exec_script(db, sql, &away);

	if (!res) {
		snprintf(msg, len, "%s: %s", what, db->last_error);
		return -1;
	}
	PQclear(res);
	return 0;
}

/* The version recorded in schema, in the open transaction; -1 with msg. */
static int read_current(struct db *db, const char *schema, char *msg, size_t len)
{
	char sql[300];
	int away, v;
	PGresult *res;

	snprintf(sql, sizeof sql, "SELECT coalesce(max(version), 0) FROM \"%s\".schema_version",
		 schema);
	res = db_exec(db, sql, 0, NULL, &away);
	if (!res) {
		snprintf(msg, len, "reading the schema version: %s", db->last_error);
		return -1;
	}
	v = atoi(PQgetvalue(res, 0, 0));
	PQclear(res);
	return v;
}

int migrate_apply(struct db *db, const char *schema, const char *dir, char *msg, size_t len)
{
	char *files[DISPATCH_SCHEMA_VERSION + 1] = { NULL };
	char names[DISPATCH_SCHEMA_VERSION + 1][256];
	char sql[1024], lock[300], what[300];
	int current = -1, applied = 0, rc = -1, v;

	for (v = 1; v <= DISPATCH_SCHEMA_VERSION; v++) {
		char *raw = read_version(dir, v, names[v], sizeof names[v], msg, len);
		if (!raw)
			goto out;
		files[v] = dq_expand(raw, schema);
		free(raw);
		if (!files[v]) {
			snprintf(msg, len, "out of memory");
			goto out;
		}
	}
	if (!db_ready(db)) {
		snprintf(msg, len, "cannot connect to the database: %s", db->last_error);
		goto out;
	}
	snprintf(lock, sizeof lock,
		 "BEGIN; SELECT pg_advisory_xact_lock(hashtext('execdispatch migrate %s'))",
		 schema);
	snprintf(sql, sizeof sql,
		 "%s; CREATE SCHEMA IF NOT EXISTS \"%s\"; "
		 "CREATE TABLE IF NOT EXISTS \"%s\".schema_version (version integer PRIMARY KEY, "
		 "name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now()); COMMIT",
		 lock, schema, schema);
	if (run(db, sql, "preparing the schema", msg, len) < 0)
		goto rollback;
	/* one transaction per migration, the version read again under the
	 * lock in each: a failure keeps the ones committed before it */
	for (;;) {
		if (run(db, lock, "locking the schema", msg, len) < 0)
			goto rollback;
		if ((v = read_current(db, schema, msg, len)) < 0)
			goto rollback;
		if (current < 0 && v > DISPATCH_SCHEMA_VERSION) {
			snprintf(msg, len,
				 "schema \"%s\" is at version %d, newer than this execdispatch "
				 "(which knows up to %d): install a newer execdispatch",
				 schema, v, DISPATCH_SCHEMA_VERSION);
			goto rollback;
		}
		current = v;
		if (v >= DISPATCH_SCHEMA_VERSION)
			break;
		v++;
		snprintf(what, sizeof what, "migration %s", names[v]);
		if (run(db, files[v], what, msg, len) < 0)
			goto failed;
		snprintf(sql, sizeof sql,
			 "INSERT INTO \"%s\".schema_version (version, name) "
			 "VALUES (%d, '%.200s')",
			 schema, v, names[v]);
		if (run(db, sql, what, msg, len) < 0 || run(db, "COMMIT", what, msg, len) < 0)
			goto failed;
		applied++;
	}
	if (run(db, "COMMIT", "commit", msg, len) < 0)
		goto out;
	rc = applied;
	goto out;
failed:
	if (db->conn)
		PQclear(PQexec(db->conn, "ROLLBACK"));
	{
		size_t n = strlen(msg);
		snprintf(msg + n, len - n,
			 "; schema \"%s\" stays at version %d (%d migration%s applied before "
			 "it, each committed on its own): run --migrate again once the cause "
			 "is gone",
			 schema, current, applied, applied == 1 ? "" : "s");
	}
	goto out;
rollback:
	if (db->conn)
		PQclear(PQexec(db->conn, "ROLLBACK"));
out:
	for (v = 1; v <= DISPATCH_SCHEMA_VERSION; v++)
		free(files[v]);
	return rc;
}

int migrate_judge(const PGresult *res, const char *err, const char *schema, const char *config_file,
		  char *msg, size_t len)
{
	int v;

	if (!res || PQgetisnull(res, 0, 0)) {
		snprintf(msg, len,
			 "schema \"%s\" is not installed (%s): run execdispatch --migrate -c %s",
			 schema, res ? "no version recorded" : err, config_file);
		return -1;
	}
	v = atoi(PQgetvalue(res, 0, 0));
	if (v < DISPATCH_SCHEMA_VERSION) {
		snprintf(msg, len,
			 "schema \"%s\" is at version %d, this execdispatch needs %d: run "
			 "execdispatch --migrate -c %s",
			 schema, v, DISPATCH_SCHEMA_VERSION, config_file);
		return -1;
	}
	if (v > DISPATCH_SCHEMA_VERSION) {
		snprintf(msg, len,
			 "schema \"%s\" is at version %d, which this execdispatch does not "
			 "know (it knows up to %d): run a newer execdispatch",
			 schema, v, DISPATCH_SCHEMA_VERSION);
		return -1;
	}
	return 0;
}

int migrate_check(struct db *db, const char *schema, const char *config_file, char *msg, size_t len)
{
	char *sql = dq_expand(DQ_SCHEMA_VERSION, schema);
	int away, rc;
	PGresult *res;

	if (!sql) {
		snprintf(msg, len, "out of memory");
		return -1;
	}
	res = db_exec(db, sql, 0, NULL, &away);
	free(sql);
	if (!res && away) {
		snprintf(msg, len, "cannot reach the database: %s", db->last_error);
		return -2;
	}
	rc = migrate_judge(res, db->last_error, schema, config_file, msg, len);
	PQclear(res);
	return rc;
}
