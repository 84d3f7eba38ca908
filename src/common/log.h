/*
 * log.h - leveled logging for every process of the execserver.
 *
 * Each line carries a level and names the process that wrote it ("master",
 * "handler 3").  In the foreground lines go to stderr; a daemon logs to
 * syslog with the daemon facility.  Safe to call after fork: a child sets its
 * own name with log_set_process().  libexecclient's code never writes here:
 * its websocket sessions log through their owner (ws_callbacks.on_log).
 */
#ifndef ES_LOG_H
#define ES_LOG_H

#include <stdarg.h>

enum log_level {
	LOG_LVL_ERROR,
	LOG_LVL_WARN,
	LOG_LVL_INFO,
	LOG_LVL_DEBUG
};

/* Parses "error", "warn", "info", "debug"; returns -1 for anything else. */
int log_level_parse(const char *name);

void log_set_level(enum log_level level);
enum log_level log_get_level(void);
/* to_syslog != 0 sends lines to syslog(LOG_DAEMON) under the name program
 * ("execserver", "execdispatch"), else to stderr.  A syslog line names the
 * process too ("[handler 2]") unless it is the program's only one.
 * Opening syslog sends it the first warnings and errors written to stderr
 * before (those of the start, before the daemon detached). */
void log_open(const char *program, int to_syslog);
void log_set_process(const char *name);
/* Reopens the output (SIGHUP): syslog is closed and opened again. */
void log_reopen(void);

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...)                                       \
	do {                                                 \
		if (log_get_level() >= LOG_LVL_DEBUG)        \
			log_msg(LOG_LVL_DEBUG, __VA_ARGS__); \
	} while (0)

#endif
