/*
 * spawn.h - finding a program in PATH, and starting one job process: its
 * own process group, death with its handler (PR_SET_PDEATHSIG), a working
 * directory, given stdio (and one extra descriptor), an exact argv and environment, never a shell.
 */
#ifndef ES_SPAWN_H
#define ES_SPAWN_H

#include <stddef.h>
#include <sys/types.h>

/* The number the program finds its extra descriptor under: the first one
 * after stdio. */
#define SPAWN_EXTRA_FD 3

struct spawn_request {
	const char *path; /* absolute path of the program */
	char *const *argv;
	char *const *envp;
	const char *cwd;                    /* NULL: inherit */
	int stdin_fd, stdout_fd, stderr_fd; /* -1: /dev/null */
	/* 0: none; else a descriptor above 2 that the program gets as
	 * SPAWN_EXTRA_FD (its progress pipe, job.c), the only one besides
	 * stdio */
	int extra_fd;
	/* setrlimit(resource, value) for each (soft = hard); value is in the
	 * resource's own unit (bytes, seconds, count) */
	const struct spawn_rlimit {
		int resource;
		unsigned long long value;
	} * limits;
	size_t nlimits;
	int nice; /* added to the niceness (nice(2)) */
};

/* Resolves prog: an absolute path to an executable regular file, or a name
 * without '/' found in the absolute directories of $PATH (default
 * /usr/local/bin:/usr/bin:/bin; empty and relative entries are skipped).
 * Writes the full path to out; returns 0, or -1 with errno ENOENT,
 * ENAMETOOLONG or EINVAL (relative path with '/'). */
int spawn_find_program(const char *prog, char *out, size_t outlen);

/* Once, before the first spawn, after the process set its signal
 * dispositions (spawn.c says why; none may change afterwards), from the
 * thread that spawns.  Also makes this process the reaper of its jobs'
 * orphans, opens /dev/null (close-on-exec) for the stdio of jobs that have
 * none, and opens this thread's list of children for
 * spawn_other_children. */
void spawn_init(void);

/* Whether this process has a child, alive or not yet reaped, that
 * is_job(pid) does not claim as a running job's leader: a process a job
 * left behind.  1 also when it cannot tell (or before spawn_init).  From
 * the main thread (where orphans are reparented), which called
 * spawn_init. */
int spawn_other_children(int (*is_job)(pid_t pid));

/* Starts req's program and returns at once, without waiting for the exec:
 * the pid (== its process group id, which exists already), or -1 with
 * *err = errno of what failed here (the clone; under valgrind the report
 * pipe; ENOMEM; ENAMETOOLONG for a path or working directory of PATH_MAX or
 * more; EINVAL for more than RLIM_NLIMITS limits).  A step that fails in the child
 * (chdir, setrlimit, execve...) ends it with status 127 and is told by
 * spawn_reaped.  req's argv and envp (arrays and strings) must stay
 * unchanged until then; the rest of req is copied. */
pid_t spawn_process(const struct spawn_request *req, int *err);

/* 1 where spawn_process waits for the child's exec (under valgrind, which
 * runs the clone as a vfork), 0 where it returns at once. */
int spawn_waits_for_exec(void);

/* For every pid spawn_process returned, once waitpid reported its end with
 * status: 0 if the program ran (its status is its own), else the errno of
 * the step that failed in the child before the program.  Frees what the
 * spawn kept for the child (its stack; under valgrind the report pipe). */
int spawn_reaped(pid_t pid, int status);

#endif
