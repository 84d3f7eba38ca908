/*
 * spawn.h - starting one job process: its own process group, death with
 * its handler (PR_SET_PDEATHSIG), a working directory, given stdio, an
 * exact argv and environment, never a shell.
 */
#ifndef ES_SPAWN_H
#define ES_SPAWN_H

#include <sys/types.h>

struct spawn_request {
	const char *path;        /* absolute path of the program */
	char *const *argv;
	char *const *envp;
	const char *cwd;         /* NULL: inherit */
	int stdin_fd, stdout_fd, stderr_fd; /* -1: /dev/null */
	/* setrlimit(resource, value) for each (soft = hard); value is in the
	 * resource's own unit (bytes, seconds, count) */
	const struct spawn_rlimit {
		int resource;
		unsigned long long value;
	} *limits;
	size_t nlimits;
	int nice;                /* added to the niceness (nice(2)) */
};

/* Once, before the first spawn, after the process set its signal
 * dispositions (spawn.c says why). */
void spawn_init(void);

/* Returns the pid (== its process group id), or -1 with *err = errno of
 * the failed step (chdir, execve...) in the child or of fork itself. */
pid_t spawn_process(const struct spawn_request *req, int *err);

#endif
