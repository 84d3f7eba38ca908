/*
 * pidfile.c - see pidfile.h.
 *
 * The lock is flock(2), not fcntl(2): an flock lock belongs to the open
 * file, so it survives the forks of daemonizing (and is held by every
 * process of the instance that keeps the descriptor), while a record lock
 * would stay with the process that took it and vanish when that process
 * exits after the first fork.  The descriptor is close-on-exec, so no job
 * holds the lock.  The file is opened as root: it must be a regular file
 * of one link, not a symbolic link (O_NOFOLLOW), so that whoever can
 * write into its directory cannot make the daemon truncate another file.
 */
#include "autoconfig.h"
#include "common/pidfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

const char *pidfile_absolute(const char *path, char *buf, size_t len)
{
	char cwd[PATH_MAX];
	int n;

	if (path[0] == '/')
		n = snprintf(buf, len, "%s", path);
	else if (getcwd(cwd, sizeof cwd))
		n = snprintf(buf, len, "%s/%s", cwd, path);
	else
		return NULL;
	if (n < 0 || (size_t)n >= len) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	return buf;
}

int pidfile_lock(const char *path, char *why, size_t len)
{
	char buf[32];
	struct stat st;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0644);

	if (fd < 0) {
		snprintf(why, len, "cannot open pid file %s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
		snprintf(why, len, "pid file %s is not a regular file of one link: not using it",
			 path);
		close(fd);
		return -1;
	}
	/* ours: what a dead daemon left in it goes, so that nobody takes
	 * that pid for ours before pidfile_write */
	if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
		if (ftruncate(fd, 0) == 0)
			return fd;
		snprintf(why, len, "cannot write pid file %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	int e = errno;
	if (e == EWOULDBLOCK) {
		ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
		long pid = n > 0 ? (buf[n] = '\0', strtol(buf, NULL, 10)) : 0;
		if (pid > 0)
			snprintf(why, len, "already running as pid %ld (pid file %s is locked)",
				 pid, path);
		else
			snprintf(why, len, "already running (pid file %s is locked)", path);
	} else {
		snprintf(why, len, "cannot lock pid file %s: %s", path, strerror(e));
	}
	close(fd);
	return -1;
}

int pidfile_write(int fd, char *why, size_t len)
{
	char buf[32];
	int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());

	if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n) {
		snprintf(why, len, "cannot write the pid file: %s", strerror(errno));
		return -1;
	}
	return 0;
}
