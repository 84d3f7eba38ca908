/*
 * db.h - execdispatch's one database connection (libpq): connecting with
 * back-off, one statement at a time as an unnamed PQexecParams, and the
 * difference between "the database is away" (the connection is dropped
 * and retried later; the caller keeps what it wanted to write) and "this
 * statement failed" (logged; the connection stays).
 *
 * Statements block the event loop for their duration: each is small and
 * indexed, and a connection attempt waits at most connect_timeout (5 s
 * unless the connection string says otherwise).  Nothing here keeps
 * session state, so a transaction-mode pooler may sit in between.
 */
#ifndef ES_DISPATCH_DB_H
#define ES_DISPATCH_DB_H

#include <stdint.h>

#include <libpq-fe.h>

struct db {
	char *conninfo;
	PGconn *conn;         /* NULL while away */
	int64_t retry_at_ms;  /* monotonic: no attempt before this */
	int backoff_ms;       /* next wait after a failed attempt */
	int was_up;           /* for the "back" log line */
	uint64_t statements;  /* sent since the start */
	char last_error[256]; /* the last failure, one line */
};

/* Sets up (no connection yet). */
int db_init(struct db *db, const char *conninfo);
void db_close(struct db *db);
/* 1 when connected or when a (re)connection attempt now succeeds; 0 while
 * away (no attempt before the back-off has passed). */
int db_ready(struct db *db);
/* Runs one statement.  Returns the result (PGRES_TUPLES_OK or
 * PGRES_COMMAND_OK; the caller PQclears it), or NULL: then *away is 1 if
 * the connection was lost (it is closed and retried with back-off) and 0
 * if the statement itself failed (last_error says why). */
PGresult *db_exec(struct db *db, const char *sql, int nparams, const char *const *params,
		  int *away);
/* The same for a text of several statements without parameters (the
 * migrations). */
PGresult *db_exec_script(struct db *db, const char *sql, int *away);
/* "{1,2,3}" from n int64 values into buf (size >= 21 * n + 3). */
void db_int_array(char *buf, const int64_t *v, int n);
/* An array literal of n strings ("{\"a\",NULL}": every element quoted,
 * " and \ escaped; NULL pointers are NULL), malloc'd; NULL when out of
 * memory. */
char *db_text_array(const char *const *v, int n);

#endif
