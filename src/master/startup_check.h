/*
 * startup_check.h - checks, once at start and before forking, that each
 * service's programs exist and answer as configured (startupCheck).
 *
 * Owns: running a startupCheck (programs are found by spawn_find_program,
 * job/spawn.h, as for jobs).  A failing command disables its whole
 * service (svc->enabled = 0, with the reason), or makes the strict run
 * fail.  One rule for `execserver -t`, a start and a reload (whose init
 * script and unit run -t first): a disabled service is a warning naming
 * file:line:column, an error only with --strict (execserver.yml(5)).
 * Programs run as argv (never through a shell) with stdin from /dev/null,
 * stdout and stderr captured together, the daemon's environment plus the
 * config's env and the command's env, in a process group of their own
 * that is killed with SIGKILL at the timeout.
 *
 * Blocks, and waits for its own children with waitpid(pid): run it before a
 * SIGCHLD handler that reaps every child is installed.
 */
#ifndef ES_STARTUP_CHECK_H
#define ES_STARTUP_CHECK_H

#include <stddef.h>

#include "config/config.h"

#define STARTUP_CHECK_TIMEOUT_MS 10000
#define STARTUP_CHECK_MAX_OUTPUT (64 * 1024) /* bytes of output matched; more is read and dropped */

/* Checks every command of every service.  A failure disables the service
 * (enabled 0, disabled_why and the command's place set; returns 0), or
 * with strict logs an error naming file:line:column and returns -1. */
int startup_check_run(struct es_config *cfg, int strict);
/* Logs a warning for each disabled service: "file:line:column: service S
 * disabled: command C: why" (and one when every service is). */
void startup_check_report(const struct es_config *cfg);

/* Checks one command: prog found (PATH or absolute); if it has a
 * startupCheck, runs it within timeout_ms and matches its regex against the
 * output (without a regex the exit status must be 0).  The regex is POSIX
 * extended with REG_NEWLINE: ^ and $ match at every line of the output.
 * Returns 0, or -1 with a one-line reason in why. */
int startup_check_command(const struct es_config *cfg, const struct config_command *cmd,
			  int timeout_ms, char *why, size_t whylen);

#endif
