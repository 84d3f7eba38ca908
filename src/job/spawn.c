/*
 * spawn.c - see spawn.h.
 *
 * vfork(): the child borrows the handler's memory until execve, which is
 * what makes spawning cheap (no page-table copy of a big handler); it only
 * makes system calls.  Because the memory is shared and the parent sleeps
 * until the child has exec'd or exited, the child reports a failed step by
 * storing its errno in a variable of the parent's frame: no pipe, no read.
 * Where the process catches a signal, signals are blocked across vfork so
 * that no signal handler can run in the child; the child resets to the
 * default every disposition that is not (ignored ones survive execve,
 * caught ones would run on the borrowed memory if a signal came between
 * the unblock and the exec) and then unblocks everything.  Which
 * dispositions those are is read once (spawn_init): the handler takes its
 * signals through a signalfd and installs no handler after that, so it
 * catches none and spawns without the two sigprocmask calls around vfork
 * (a signal in the child before its exec then meets only default or
 * ignore dispositions, as it would after the child's unblock).
 */
#include "autoconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "job/spawn.h"

#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

static int is_executable_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int spawn_find_program(const char *prog, char *out, size_t outlen)
{
	const char *path, *dir;
	size_t plen;

	if (!prog || !*prog) {
		errno = ENOENT;
		return -1;
	}
	plen = strlen(prog);
	if (strchr(prog, '/')) {
		if (prog[0] != '/') {
			errno = EINVAL;
			return -1;
		}
		if (!is_executable_file(prog)) {
			errno = ENOENT;
			return -1;
		}
		if (plen >= outlen) {
			errno = ENAMETOOLONG;
			return -1;
		}
		memcpy(out, prog, plen + 1);
		return 0;
	}
	path = getenv("PATH");
	if (!path || !*path)
		path = DEFAULT_PATH;
	for (dir = path; dir;) {
		const char *end = strchr(dir, ':');
		size_t dlen = end ? (size_t)(end - dir) : strlen(dir);

		/* Empty and relative entries would search the working directory. */
		if (dlen > 0 && dir[0] == '/') {
			if (dlen + 1 + plen >= outlen) {
				errno = ENAMETOOLONG;
				return -1;
			}
			memcpy(out, dir, dlen);
			out[dlen] = '/';
			memcpy(out + dlen + 1, prog, plen + 1);
			if (is_executable_file(out))
				return 0;
		}
		dir = end ? end + 1 : NULL;
	}
	if (outlen)
		out[0] = '\0';
	errno = ENOENT;
	return -1;
}

/* Signals whose disposition is not the default in this process. */
static sigset_t not_default;
static int any_caught; /* a disposition is a handler function */
static int initialised;
/* /dev/null for reading and for writing, open once (close-on-exec): the
 * stdio of a job that has none, without an open in every child */
static int devnull[2] = { -1, -1 };
/* /proc/thread-self/children of the thread that called spawn_init, open
 * once: a read at offset 0 lists the children anew (seq_file) */
static int children_fd = -1;

void spawn_init(void)
{
	/* Orphans of jobs (a daemonising converter, a setsid child) become
	 * children of this process instead of init's: job_reap reaps them,
	 * spawn_other_children sees them. */
	(void)prctl(PR_SET_CHILD_SUBREAPER, 1);
	sigemptyset(&not_default);
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;
		if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &sa) != 0)
			continue;
		if (sa.sa_handler != SIG_DFL)
			sigaddset(&not_default, sig);
		if ((sa.sa_flags & SA_SIGINFO) ||
		    (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN))
			any_caught = 1;
	}
	if (devnull[0] < 0)
		devnull[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (devnull[1] < 0)
		devnull[1] = open("/dev/null", O_WRONLY | O_CLOEXEC);
	/* the process's main thread is where orphans are reparented; the
	 * handler calls this from it (thread-self: no getpid) */
	if (children_fd < 0)
		children_fd = open("/proc/thread-self/children", O_RDONLY | O_CLOEXEC);
	initialised = 1;
}

static void child(const struct spawn_request *req, volatile int *report)
{
	int fds[3] = { req->stdin_fd, req->stdout_fd, req->stderr_fd };

	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP &&
		    (!initialised || sigismember(&not_default, sig)))
			signal(sig, SIG_DFL);
	if (setpgid(0, 0) != 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
		goto fail;
	for (int i = 0; i < 3; i++) {
		int fd = fds[i], opened = 0;
		if (fd < 0)
			fd = devnull[i == 0 ? 0 : 1];
		if (fd < 0) {
			fd = open("/dev/null", (i == 0 ? O_RDONLY : O_WRONLY) | O_CLOEXEC);
			if (fd < 0)
				goto fail;
			opened = 1;
		}
		if (fd != i) {
			if (dup2(fd, i) < 0)
				goto fail;
			if (opened)
				close(fd);
		} else {
			/* already in place: keep it across exec */
			int fl = fcntl(fd, F_GETFD);
			if (fl < 0 || fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC) < 0)
				goto fail;
		}
	}
	/* Nothing but stdio reaches the program, whatever the handler (or
	 * whoever started the daemon) had open without close-on-exec. */
	if (close_range(3, ~0u, CLOSE_RANGE_CLOEXEC) != 0)
		goto fail;
	if (req->cwd && chdir(req->cwd) != 0)
		goto fail;
	if (req->nice > 0) {
		/* relative to the daemon's own niceness (never needs a privilege) */
		errno = 0;
		if (nice(req->nice) == -1 && errno != 0)
			goto fail;
	}
	for (size_t i = 0; i < req->nlimits; i++) {
		struct rlimit rl = { (rlim_t)req->limits[i].value, (rlim_t)req->limits[i].value };
		if (setrlimit(req->limits[i].resource, &rl) != 0)
			goto fail;
	}
	{
		/* a job starts with no signal blocked, whatever the handler had */
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
	}
	execve(req->path, req->argv, req->envp);
fail:
	*report = errno ? errno : EIO;
	_exit(127);
}

pid_t spawn_process(const struct spawn_request *req, int *err)
{
	volatile int child_err = 0;
	sigset_t all, old;
	pid_t pid;
	int block = !initialised || any_caught;

	if (block) {
		sigfillset(&all);
		sigprocmask(SIG_BLOCK, &all, &old);
	}
	pid = vfork();
	if (pid == 0)
		child(req, &child_err);
	int fork_errno = errno;
	if (block)
		sigprocmask(SIG_SETMASK, &old, NULL);
	if (pid < 0) {
		*err = fork_errno;
		return -1;
	}
	/* vfork returned: the child has exec'd (in its own process group
	 * already) or failed and exited with child_err set. */
	if (child_err != 0) {
		int status;
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		*err = child_err;
		return -1;
	}
	return pid;
}

int spawn_other_children(int (*is_job)(pid_t pid))
{
	char buf[8192];
	size_t len = 0;
	ssize_t n;

	if (children_fd < 0)
		return 1; /* cannot tell: assume the worst */
	for (;;) {
		/* from offset 0: the list as it is now, not a rest of the last */
		n = pread(children_fd, buf + len, sizeof buf - 1 - len, (off_t)len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len == sizeof buf - 1) {
			n = -1; /* more children than the buffer holds */
			break;
		}
	}
	if (n < 0)
		return 1; /* cannot tell: assume the worst */
	buf[len] = '\0';
	for (char *p = buf, *end;; p = end) {
		long pid = strtol(p, &end, 10);
		if (end == p)
			return 0;
		if (!is_job((pid_t)pid))
			return 1;
	}
}
