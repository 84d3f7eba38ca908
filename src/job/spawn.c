/*
 * spawn.c - see spawn.h.
 *
 * vfork(): the child borrows the handler's memory until execve, which is
 * what makes spawning cheap (no page-table copy of a big handler); it only
 * makes system calls and reports a failure through a close-on-exec pipe.
 * Signals are blocked across vfork so that none of the handler's libevent
 * signal handlers can run in the child; the child resets every disposition
 * to the default before unblocking.
 */
#include "autoconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <linux/close_range.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "job/spawn.h"

static void child(const struct spawn_request *req, int report_fd)
{
	int fds[3] = { req->stdin_fd, req->stdout_fd, req->stderr_fd };
	int err;

	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	if (setpgid(0, 0) != 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
		goto fail;
	for (int i = 0; i < 3; i++) {
		int fd = fds[i], opened = 0;
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
	err = errno;
	if (write(report_fd, &err, sizeof err) < 0) {
		/* nothing left to tell anyone */
	}
	_exit(127);
}

pid_t spawn_process(const struct spawn_request *req, int *err)
{
	int report[2];
	sigset_t all, old;
	pid_t pid;

	if (pipe2(report, O_CLOEXEC) != 0) {
		*err = errno;
		return -1;
	}
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	pid = vfork();
	if (pid == 0)
		child(req, report[1]);
	int fork_errno = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(report[1]);
	if (pid < 0) {
		close(report[0]);
		*err = fork_errno;
		return -1;
	}
	/* vfork returned: the child has exec'd (pipe closed, read gives 0) or
	 * failed (read gives its errno); either way this does not block long. */
	int child_err = 0;
	ssize_t n;
	do
		n = read(report[0], &child_err, sizeof child_err);
	while (n < 0 && errno == EINTR);
	close(report[0]);
	if (n == (ssize_t)sizeof child_err) {
		int status;
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		*err = child_err;
		return -1;
	}
	/* Also from the parent, so the group exists before anyone signals it. */
	setpgid(pid, pid);
	return pid;
}
