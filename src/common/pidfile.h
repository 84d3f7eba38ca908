/*
 * pidfile.h - the pid file of a daemon, locked for the daemon's life, so
 * that a second start with the same pid file is refused and names the pid
 * that runs, instead of overwriting the file and leaving the first daemon
 * without one (an init script's "stop" would then miss it).
 *
 * Taken before the daemon detaches (the starting process can still print
 * why it failed), written once the pid is final.  The file is not removed
 * on exit by this code: a daemon that dropped its privileges cannot, and a
 * file left behind holds no lock, so it never blocks the next start.
 */
#ifndef ES_PIDFILE_H
#define ES_PIDFILE_H

#include <stddef.h>

/* path as an absolute path in buf, relative to the current directory (a
 * daemon changes to / before it removes the file); buf, or NULL with errno
 * when the current directory is unknown or the path does not fit. */
const char *pidfile_absolute(const char *path, char *buf, size_t len);
/* Opens (creating) path and locks it; the descriptor, to keep open for the
 * daemon's life, or -1 with why ("already running as pid N ..."). */
int pidfile_lock(const char *path, char *why, size_t len);
/* Writes the calling process's pid into the locked file; 0 or -1 with why. */
int pidfile_write(int fd, char *why, size_t len);

#endif
