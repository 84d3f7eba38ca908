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
 */
#ifndef ES_JOB_DIR_H
#define ES_JOB_DIR_H

#include <stddef.h>

#define JOB_DIR_SPARES 16

/* An empty job directory for handler slot (a spare, or a new one under
 * temp_dir/job) into out.  Returns 0, or -1 with errno. */
int job_dir_take(const char *temp_dir, int slot, char *out, size_t len);

/* The job of path ended and its directory is to go: kept as a spare when
 * reuse is allowed (the job's processes are known to be gone) and it is
 * empty, removed otherwise. */
void job_dir_release(const char *path, int reuse);

/* Whether name (an entry of tempDir/job) is one of the spares. */
int job_dir_is_spare(const char *name);

/* Removes every spare (the handler stops). */
void job_dir_drop_spares(void);

#endif
