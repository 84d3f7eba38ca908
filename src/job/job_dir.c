/* job_dir.c - see job_dir.h. */
#include "autoconfig.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "job/janitor.h"
#include "job/job_dir.h"

static char spares[JOB_DIR_SPARES][512];
static unsigned nspares;
static uint64_t dir_counter;
static uid_t owner = (uid_t)-1; /* ours, once known */

/* Whether path is a directory of ours (not a symlink, our user, mode
 * 0700) with nothing in it but "." and "..". */
static int usable_empty(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	struct stat st;
	if (owner == (uid_t)-1)
		owner = geteuid();
	int ok = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == owner &&
		 (st.st_mode & 07777) == 0700;
	/* One small read of the entries: a third entry, or a name too long
	 * for the buffer (EINVAL), means not empty. */
	union {
		struct dirent64 first;
		char bytes[512];
	} buf;
	ssize_t n = 0;
	while (ok && (n = getdents64(fd, buf.bytes, sizeof buf.bytes)) > 0) {
		for (ssize_t off = 0; off < n;) {
			const struct dirent64 *e = (const struct dirent64 *)(buf.bytes + off);
			if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
				ok = 0;
			off += e->d_reclen;
		}
	}
	if (n < 0)
		ok = 0;
	close(fd);
	return ok;
}

int job_dir_take(const char *temp_dir, int slot, char *out, size_t len)
{
	while (nspares > 0) {
		const char *dir = spares[--nspares];
		if (usable_empty(dir) && snprintf(out, len, "%s", dir) < (int)len)
			return 0;
		janitor_remove_tree(dir);
	}
	/* mkdtemp: unique even across handler restarts and leftovers */
	if (snprintf(out, len, "%s/job/%d-%llu-XXXXXX", temp_dir, slot,
		     (unsigned long long)++dir_counter) >= (int)len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return mkdtemp(out) ? 0 : -1;
}

void job_dir_release(const char *path, int reuse)
{
	if (reuse && nspares < JOB_DIR_SPARES && strlen(path) < sizeof spares[0] &&
	    usable_empty(path)) {
		snprintf(spares[nspares++], sizeof spares[0], "%s", path);
		return;
	}
	janitor_remove_tree(path);
}

int job_dir_is_spare(const char *name)
{
	for (unsigned i = 0; i < nspares; i++) {
		const char *base = strrchr(spares[i], '/');
		if (base && strcmp(base + 1, name) == 0)
			return 1;
	}
	return 0;
}

void job_dir_drop_spares(void)
{
	while (nspares > 0)
		janitor_remove_tree(spares[--nspares]);
}
