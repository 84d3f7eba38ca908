/*
 * queue_target.c - see queue_target.h.
 */
#include "autoconfig.h"
#include "cli/queue_target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/dispatch_config.h"

void queue_target_set(char **field, const char *value)
{
	free(*field);
	*field = value ? strdup(value) : NULL;
}

int queue_target_config(const char *cmd, const char *file, char **conninfo, char **schema,
			char *err, size_t len)
{
	struct dispatch_config cfg;
	struct config_error cerr;

	if (dispatch_config_load(file, NULL, &cfg, &cerr) < 0) {
		snprintf(err, len, "%s: %.400s", cmd, cerr.text);
		return -1;
	}
	queue_target_set(conninfo, cfg.database);
	if (!*schema)
		queue_target_set(schema, cfg.schema);
	dispatch_config_free(&cfg);
	return 0;
}

int queue_target_finish(const char *cmd, char **conninfo, char **schema, char *err, size_t len)
{
	const char *env = getenv("EXECCTL_DB");

	if (!*conninfo && env && *env)
		queue_target_set(conninfo, env);
	if (!*conninfo) {
		snprintf(err, len, "%s: --db CONNINFO or -c FILE is required (or EXECCTL_DB)", cmd);
		return -1;
	}
	if (!*schema)
		queue_target_set(schema, "execdispatch");
	if (!dispatch_schema_ok(*schema)) {
		snprintf(err, len,
			 "%s: --schema: a lower-case SQL identifier is required (a-z, 0-9, _, not "
			 "starting with a digit, at most %d)",
			 cmd, DISPATCH_SCHEMA_MAX);
		return -1;
	}
	return 0;
}
