/*
 * queue_target.h - the database an execctl queue command talks to, as
 * every one of them takes it (queue.c, schedule.c, listing.c): --db
 * CONNINFO, -c FILE (execdispatch.yml's database and schema), --schema,
 * and $EXECCTL_DB when none is given.  Invariant after
 * queue_target_finish: conninfo is set and schema is a valid schema name.
 */
#ifndef ES_CLI_QUEUE_TARGET_H
#define ES_CLI_QUEUE_TARGET_H

#include <stddef.h>

/* *field = a copy of value (the old one freed). */
void queue_target_set(char **field, const char *value);

/* -c FILE: the database and (unless --schema came first) the schema of
 * execdispatch.yml FILE.  0, or -1 with "CMD: <the config error>" in err. */
int queue_target_config(const char *cmd, const char *file, char **conninfo, char **schema,
			char *err, size_t len);

/* After the options: $EXECCTL_DB when no database was given, the default
 * schema, and the schema checked.  0, or -1 with the usage error in err. */
int queue_target_finish(const char *cmd, char **conninfo, char **schema, char *err, size_t len);

#endif
