/*
 * db.c - see db.h.  Back-off after a failed connection: 250 ms doubling to
 * 8 s, reset by a success.  The log says once that the database went away
 * and once that it is back, not at every attempt in between.
 */
#include "autoconfig.h"
#include "dispatch/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"

#define BACKOFF_MIN_MS 250
#define BACKOFF_MAX_MS 8000

static void one_line(char *dst, size_t len, const char *msg)
{
	snprintf(dst, len, "%s", msg ? msg : "");
	for (char *p = dst; *p; p++)
		if (*p == '\n' || *p == '\r' || *p == '\t')
			*p = (p[1] ? ' ' : '\0');
}

int db_init(struct db *db, const char *conninfo)
{
	memset(db, 0, sizeof *db);
	db->backoff_ms = BACKOFF_MIN_MS;
	db->conninfo = strdup(conninfo);
	return db->conninfo ? 0 : -1;
}

void db_close(struct db *db)
{
	if (db->conn)
		PQfinish(db->conn);
	db->conn = NULL;
	free(db->conninfo);
	db->conninfo = NULL;
}

static void went_away(struct db *db, const char *why)
{
	one_line(db->last_error, sizeof db->last_error, why);
	if (db->conn)
		PQfinish(db->conn);
	db->conn = NULL;
	if (db->was_up)
		log_error("database: connection lost (%s); retrying with back-off", db->last_error);
	db->was_up = 0;
	db->retry_at_ms = (int64_t)clock_mono_ms() + db->backoff_ms;
	db->backoff_ms = db->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : db->backoff_ms * 2;
}

/* NOTICEs ("already exists, skipping") are not news. */
static void quiet_notice(void *arg, const char *message)
{
	(void)arg;
	log_debug("database: %s", message);
}

int db_ready(struct db *db)
{
	/* connect_timeout first: a value in the connection string wins */
	const char *keys[] = { "connect_timeout", "keepalives_idle", "dbname",
			       "fallback_application_name", NULL };
	const char *vals[] = { "5", "30", db->conninfo, "execdispatch", NULL };
	static int warned;

	if (db->conn)
		return 1;
	if ((int64_t)clock_mono_ms() < db->retry_at_ms)
		return 0;
	db->conn = PQconnectdbParams(keys, vals, 1);
	if (!db->conn || PQstatus(db->conn) != CONNECTION_OK) {
		went_away(db, db->conn ? PQerrorMessage(db->conn) : "out of memory");
		if (!warned++)
			log_error("database: cannot connect: %s", db->last_error);
		return 0;
	}
	PQsetNoticeProcessor(db->conn, quiet_notice, NULL);
	if (warned || db->statements)
		log_info("database: connected");
	warned = 0;
	db->was_up = 1;
	db->backoff_ms = BACKOFF_MIN_MS;
	return 1;
}

static PGresult *checked(struct db *db, PGresult *res, int *away)
{
	ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;

	*away = 0;
	db->statements++;
	if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK)
		return res;
	if (!res || PQstatus(db->conn) != CONNECTION_OK) {
		*away = 1;
		went_away(db, res ? PQresultErrorMessage(res) : PQerrorMessage(db->conn));
	} else {
		one_line(db->last_error, sizeof db->last_error, PQresultErrorMessage(res));
	}
	PQclear(res);
	return NULL;
}

PGresult *db_exec(struct db *db, const char *sql, int nparams, const char *const *params, int *away)
{
	*away = 1;
	if (!db_ready(db))
		return NULL;
	return checked(db, PQexecParams(db->conn, sql, nparams, NULL, params, NULL, NULL, 0), away);
}

PGresult *db_exec_script(struct db *db, const char *sql, int *away)
{
	*away = 1;
	if (!db_ready(db))
		return NULL;
	return checked(db, PQexec(db->conn, sql), away);
}

void db_int_array(char *buf, const int64_t *v, int n)
{
	char *p = buf;

	*p++ = '{';
	for (int i = 0; i < n; i++)
		p += sprintf(p, "%s%lld", i ? "," : "", (long long)v[i]);
	*p++ = '}';
	*p = '\0';
}

char *db_text_array(const char *const *v, int n)
{
	size_t len = 3;
	char *out, *p;

	for (int i = 0; i < n; i++)
		len += v[i] ? 2 * strlen(v[i]) + 3 : 5;
	out = malloc(len);
	if (!out)
		return NULL;
	p = out;
	*p++ = '{';
	for (int i = 0; i < n; i++) {
		if (i)
			*p++ = ',';
		if (!v[i]) {
			memcpy(p, "NULL", 4);
			p += 4;
			continue;
		}
		*p++ = '"';
		for (const char *c = v[i]; *c; c++) {
			if (*c == '"' || *c == '\\')
				*p++ = '\\';
			*p++ = *c;
		}
		*p++ = '"';
	}
	*p++ = '}';
	*p = '\0';
	return out;
}
