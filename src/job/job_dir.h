/*
 * job_dir.h - the private directories jobs run in, under tempDir/job/.
 *
 * A job gets an empty directory of its own, named "<slot>-<n>-XXXXXX"
 * (janitor.h: the slot says which handler may sweep it).  Creating and
 * removing a directory is the dearest file-system work of a short job
 * (mkdir, then rmdir after a walk of the tree: a third of the handler's
 * CPU for /bin/true on ext4), so a directory its job left empty is kept
 * as a spare and handed to the next job of this handler instead.
 *
 * Invariants: a directory is handed out only when it is, at that moment, a
 * real directory (no symlink), owned by this process's user, mode 0700 and
 * empty — checked again when it is taken, so a stray process of an
 * earlier job that wrote into it, or a job that changed its mode, never
 * passes anything on (the directory is then removed and another made).
 * At most JOB_DIR_SPARES spares per handler; the rest are removed.
 *
 * The check, cheaply: reading a directory to see that it is empty takes
 * five system calls (open, fstat, two getdents, close), twice per job.  A
 * directory found empty is remembered with its identity and times
 * (struct job_dir_seen); as long as lstat shows the same device, inode,
 * owner, mode, link count, size, mtime and ctime, no entry was added or
 * removed since (each changes the directory's mtime and ctime), so one
 * lstat replaces the five.  That holds only when a later change cannot get
 * the same timestamp: the record is trusted when the clock, read before
 * the check, was already 3 s past both times (coarse clock ticks and
 * file systems that keep whole or even seconds); a directory changed
 * within the last 3 s is read again.
 */
#ifndef ES_JOB_DIR_H
#define ES_JOB_DIR_H

#include <stddef.h>
#include <sys/stat.h>
#include <time.h>

#define JOB_DIR_SPARES 16

/* What a directory looked like when it was last found empty. */
struct job_dir_seen {
	dev_t dev;
	ino_t ino;
	nlink_t nlink;
	off_t size;
	struct timespec mtime, ctime;
	int trusted; /* an lstat showing the same means still empty */
};

/* An empty job directory for handler slot (a spare, or a new one under
 * temp_dir/job) into out, and what it looked like into seen (for
 * job_dir_release).  Returns 0, or -1 with errno. */
int job_dir_take(const char *temp_dir, int slot, char *out, size_t len, struct job_dir_seen *seen);

/* The job of path ended and its directory is to go: kept as a spare when
 * the caller allows reuse (job.c: no process a job left behind is alive,
 * so none can sit in the directory and write into it later) and it is
 * empty, removed otherwise.  seen: what job_dir_take handed out with it. */
void job_dir_release(const char *path, int reuse, const struct job_dir_seen *seen);

/* How many times a directory's entries were read to see that it is empty
 * (the rest were one lstat; for tests and measurements). */
unsigned long job_dir_reads(void);

/* Whether name (an entry of tempDir/job) is one of the spares. */
int job_dir_is_spare(const char *name);

/* Removes every spare (the handler stops). */
void job_dir_drop_spares(void);

#endif
