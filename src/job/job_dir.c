/* job_dir.c - see job_dir.h. */
#include "autoconfig.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "job/janitor.h"
#include "job/job_dir.h"

static struct spare {
	char path[512];
	struct job_dir_seen seen;
} spares[JOB_DIR_SPARES];
static unsigned nspares;
static uint64_t dir_counter;
static uid_t owner = (uid_t)-1; /* ours, once known */
static unsigned long reads;     /* job_dir_reads */

#define TRUST_MARGIN_SEC 3 /* job_dir.h: when a record may be trusted */

static int ours(const struct stat *st)
{
	if (owner == (uid_t)-1)
		owner = geteuid();
	return S_ISDIR(st->st_mode) && st->st_uid == owner && (st->st_mode & 07777) == 0700;
}

static int same_time(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* Whether path is, by one lstat, still the directory seen empty. */
static int unchanged(const char *path, const struct job_dir_seen *seen)
{
	struct stat st;
	return seen->trusted && lstat(path, &st) == 0 && ours(&st) && st.st_dev == seen->dev &&
	       st.st_ino == seen->ino && st.st_nlink == seen->nlink && st.st_size == seen->size &&
	       same_time(&st.st_mtim, &seen->mtime) && same_time(&st.st_ctim, &seen->ctime);
}

/* Whether path is a directory of ours (not a symlink, our user, mode
 * 0700) with nothing in it but "." and ".."; what it looked like into
 * seen. */
static int usable_empty(const char *path, struct job_dir_seen *seen)
{
	struct timespec now;
	if (clock_gettime(CLOCK_REALTIME_COARSE, &now) != 0)
		now.tv_sec = 0;
	memset(seen, 0, sizeof *seen);
	reads++;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	struct stat st;
	int ok = fstat(fd, &st) == 0 && ours(&st);
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
	if (ok) {
		*seen = (struct job_dir_seen){ .dev = st.st_dev,
					       .ino = st.st_ino,
					       .nlink = st.st_nlink,
					       .size = st.st_size,
					       .mtime = st.st_mtim,
					       .ctime = st.st_ctim };
		seen->trusted = now.tv_sec >= st.st_mtim.tv_sec + TRUST_MARGIN_SEC &&
				now.tv_sec >= st.st_ctim.tv_sec + TRUST_MARGIN_SEC;
	}
	return ok;
}

int job_dir_take(const char *temp_dir, int slot, char *out, size_t len, struct job_dir_seen *seen)
{
	while (nspares > 0) {
		struct spare *sp = &spares[--nspares];
		int ok = unchanged(sp->path, &sp->seen);
		if (ok)
			*seen = sp->seen;
		else
			ok = usable_empty(sp->path, seen);
		if (ok && snprintf(out, len, "%s", sp->path) < (int)len)
			return 0;
		janitor_remove_tree(sp->path);
	}
	memset(seen, 0, sizeof *seen); /* a new directory: read at release */
	/* mkdtemp: unique even across handler restarts and leftovers */
	if (snprintf(out, len, "%s/job/%d-%llu-XXXXXX", temp_dir, slot,
		     (unsigned long long)++dir_counter) >= (int)len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return mkdtemp(out) ? 0 : -1;
}

void job_dir_release(const char *path, int reuse, const struct job_dir_seen *seen)
{
	if (reuse && nspares < JOB_DIR_SPARES && strlen(path) < sizeof spares[0].path) {
		struct spare *sp = &spares[nspares];
		int ok = unchanged(path, seen);
		if (ok)
			sp->seen = *seen;
		else
			ok = usable_empty(path, &sp->seen);
		if (ok) {
			snprintf(sp->path, sizeof sp->path, "%s", path);
			nspares++;
			return;
		}
	}
	janitor_remove_tree(path);
}

unsigned long job_dir_reads(void)
{
	return reads;
}

int job_dir_is_spare(const char *name)
{
	for (unsigned i = 0; i < nspares; i++) {
		const char *base = strrchr(spares[i].path, '/');
		if (base && strcmp(base + 1, name) == 0)
			return 1;
	}
	return 0;
}

void job_dir_drop_spares(void)
{
	while (nspares > 0)
		janitor_remove_tree(spares[--nspares].path);
}
