/*
 * daemonize.c - see daemonize.h.
 *
 * Classic double fork: the daemon is not a session leader and cannot
 * reacquire a terminal; stdio goes to /dev/null.  The process that was
 * started waits on a pipe until the daemon reports how its start went (or
 * dies, which closes the pipe: status 2), and exits with that status.
 */
#include "autoconfig.h"
#include "common/daemonize.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int daemonize_std_fds(void)
{
	for (;;) {
		int fd = open("/dev/null", O_RDWR);
		if (fd < 0)
			return -1;
		if (fd > STDERR_FILENO) {
			close(fd);
			return 0;
		}
	}
}

int daemonize(const char *program, int *ready_fd)
{
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) != 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid > 0) {
		unsigned char status = 2;
		close(pipefd[1]);
		if (read(pipefd[0], &status, 1) != 1)
			status = 2; /* the daemon died before it was ready */
		if (status != 0)
			fprintf(stderr,
				"%s: the daemon failed after it detached (exit status %d); the "
				"reason is in the system log\n",
				program, status);
		_exit(status);
	}
	close(pipefd[0]);
	*ready_fd = pipefd[1];
	if (setsid() < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid > 0)
		_exit(0);
	if (chdir("/") != 0)
		return -1;
	umask(022);
	int fd = open("/dev/null", O_RDWR);
	if (fd < 0)
		return -1;
	dup2(fd, STDIN_FILENO);
	dup2(fd, STDOUT_FILENO);
	dup2(fd, STDERR_FILENO);
	if (fd > STDERR_FILENO)
		close(fd);
	return 0;
}

int daemonize_ready(int *ready_fd, int status)
{
	unsigned char b = (unsigned char)status;
	int rc = 0;

	if (*ready_fd < 0)
		return 0;
	if (write(*ready_fd, &b, 1) != 1)
		rc = -1;
	close(*ready_fd);
	*ready_fd = -1;
	return rc;
}
