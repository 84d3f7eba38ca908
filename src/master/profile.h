/*
 * profile.h - the snapshot of what auto-balance learned (each service's
 * moving-average runtime, sample count and class), so that a restarted
 * execserver still knows which services are heavy.
 *
 * The file is tempDir/profile.json, a small versioned JSON document:
 *   {"format": "execserver-profile", "version": 1, "arch": "x86_64",
 *    "pool": 8, "services": {"<name>": {"class": "heavy",
 *    "mean_runtime_ms": 61234.5, "samples": 12}, ...}}
 * written atomically (a temporary file in the same directory, fsync,
 * rename, fsync of the directory), so a reader sees the old or the new
 * snapshot, never a mixture.  A snapshot taken on another architecture
 * (uname machine) or with another pool size measured other hardware and is
 * discarded as a whole.  This file does the I/O only; the master moves the
 * entries in and out of the want-book (book_profile_get/set) under its lock.
 */
#ifndef ES_PROFILE_H
#define ES_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "book/book.h"

#define PROFILE_FILE "profile.json"
#define PROFILE_VERSION 1

struct profile_entry {
	char name[BOOK_NAME_MAX];
	struct book_profile p;
};

/* This host's architecture as recorded in snapshots (uname machine). */
const char *profile_arch(void);

/* Writes n entries for arch and pool to path atomically, through a
 * temporary file of a unique name in the same directory (path.tmp-XXXXXX,
 * created with O_EXCL: never an existing file or link).  0, or -1 with why
 * filled: the old file, if any, is left as it was, except when only the
 * final fsync of the directory failed (the new snapshot is in place but
 * may not survive a power loss; why says so). */
int profile_write(const char *path, const char *arch, uint32_t pool, const struct profile_entry *e,
		  size_t n, char *why, size_t whylen);

/* Reads path into *out (malloc'ed, *n entries; free it).  Returns 1 when
 * loaded, 0 when there is no file, -1 when it is discarded: a symbolic
 * link (not followed), not a regular file (a FIFO is never opened for a
 * blocking read), larger than 64 KiB, unreadable, not a snapshot of this
 * version, another architecture or another pool size, a malformed entry
 * (a mean runtime that is negative, not finite or above UINT32_MAX ms)
 * (why says which, for the log). */
int profile_read(const char *path, const char *arch, uint32_t pool, struct profile_entry **out,
		 size_t *n, char *why, size_t whylen);

#endif
