/*
 * migrate.h - the schema's versions: applying the SQL files of the
 * migrations directory (`execdispatch --migrate`) and checking, at the
 * daemon's start, that the database holds the version this program knows.
 *
 * A migration is a file NNN_name.sql (NNN its version, from 001, without
 * gaps); @schema@ in it stands for the configured schema.  Each pending
 * file is applied in a transaction of its own with its row in
 * SCHEMA.schema_version, under a transaction-scoped advisory lock so that
 * two concurrent --migrate runs apply each file once.  One transaction
 * per file keeps a file's locks from piling onto the next one's (009's
 * SHARE ROW EXCLUSIVE on job held while 010 waits for ACCESS EXCLUSIVE
 * would deadlock with a session that read job, then cancels); a failure
 * leaves the schema at the last version committed, and the message says
 * which.  Running it again applies nothing (idempotent).
 */
#ifndef ES_DISPATCH_MIGRATE_H
#define ES_DISPATCH_MIGRATE_H

#include "dispatch/db.h"

/* The newest schema version this program was built for. */
#define DISPATCH_SCHEMA_VERSION 11

/* The directory of the SQL files: $EXECDISPATCH_SQL_DIR, else the
 * installed one (DATADIR/execserver/migrations). */
const char *migrate_dir(void);

/* Applies the pending migrations of dir to schema, each committed on its
 * own.  Returns the number applied (0: already current), or -1 with the
 * reason in msg (a migration that failed: the version the schema stays
 * at, the ones before it kept). */
int migrate_apply(struct db *db, const char *schema, const char *dir, char *msg, size_t len);

/* 0 when the database holds exactly DISPATCH_SCHEMA_VERSION; -1 with a
 * message naming the command to run; -2 when the database is unreachable. */
int migrate_check(struct db *db, const char *schema, const char *config_file, char *msg,
		  size_t len);

/* migrate_check's verdict on the answer to DQ_SCHEMA_VERSION (res NULL:
 * the statement failed with error err), for a caller that sent it
 * itself (the daemon, without blocking): 0, or -1 with the message. */
int migrate_judge(const PGresult *res, const char *err, const char *schema, const char *config_file,
		  char *msg, size_t len);

#endif
