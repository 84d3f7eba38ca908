/*
 * log.c - see log.h.  One formatted line per call, written with a single
 * write(2) so that lines from several processes sharing stderr never
 * interleave mid-line.
 */
#include "autoconfig.h"
#include "common/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

static enum log_level current_level = LOG_LVL_INFO;
static int use_syslog;
static char process_name[32] = "execserver";
static char ident[32] = "execserver"; /* the program's name in syslog */
/* Warnings and errors written to stderr before the daemon opened syslog
 * (the start, before detaching), sent to syslog too once it is opened, so
 * that the log has them and not only the terminal that started it. */
#define EARLY_MAX 32
static struct {
	enum log_level level;
	char body[512];
} early[EARLY_MAX];
static int nearly;

static const char *const level_names[] = { "error", "warn", "info", "debug" };

int log_level_parse(const char *name)
{
	for (int i = 0; i < (int)(sizeof level_names / sizeof level_names[0]); i++)
		if (strcmp(name, level_names[i]) == 0)
			return i;
	return -1;
}

void log_set_level(enum log_level level)
{
	current_level = level;
}
enum log_level log_get_level(void)
{
	return current_level;
}

void log_open(const char *program, int to_syslog)
{
	snprintf(ident, sizeof ident, "%s", program);
	use_syslog = to_syslog;
	if (!use_syslog)
		return;
	openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	for (int i = 0; i < nearly; i++)
		log_msg(early[i].level, "%s", early[i].body);
	nearly = 0;
}

void log_set_process(const char *name)
{
	snprintf(process_name, sizeof process_name, "%s", name);
}

void log_reopen(void)
{
	if (use_syslog) {
		closelog();
		openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	}
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	static const int syslog_prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	char body[1024];
	int saved_errno = errno;
	va_list ap;

	if (level > current_level)
		return;
	va_start(ap, fmt);
	vsnprintf(body, sizeof body, fmt, ap);
	va_end(ap);

	if (use_syslog && strcmp(process_name, ident) == 0) { /* one process: named once */
		syslog(syslog_prio[level], "%s: %s", level_names[level], body);
	} else if (use_syslog) {
		syslog(syslog_prio[level], "[%s] %s: %s", process_name, level_names[level], body);
	} else {
		char line[1200];
		if (level <= LOG_LVL_WARN && nearly < EARLY_MAX) {
			early[nearly].level = level;
			snprintf(early[nearly++].body, sizeof early[0].body, "%.*s",
				 (int)sizeof early[0].body - 1, body);
		}
		struct timeval tv;
		struct tm tm;
		gettimeofday(&tv, NULL);
		localtime_r(&tv.tv_sec, &tm);
		int n = snprintf(line, sizeof line,
				 "%04d-%02d-%02d %02d:%02d:%02d.%03d [%s %d] %s: %s\n",
				 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
				 tm.tm_min, tm.tm_sec, (int)(tv.tv_usec / 1000), process_name,
				 (int)getpid(), level_names[level], body);
		if (n > (int)sizeof line - 1) {
			n = (int)sizeof line - 1;
			line[n - 1] = '\n';
		}
		ssize_t ignored = write(STDERR_FILENO, line, (size_t)n);
		(void)ignored;
	}
	errno = saved_errno;
}
