/*
 * privileges.h - who the execserver's processes and jobs run as
 * (docs/security.md, "Privileges").
 *
 * Started as root, the master binds its sockets, creates the shared
 * segment and prepares tempDir, then drops to the configured `user` and
 * `group` before it forks anything: every handler and job runs as that
 * user, and getting root back is verified to fail.  Jobs never run as root
 * unless `allowRootJobs: true` says so.
 *
 * Invariants:
 *  - privileges_plan decides everything from the configuration and the
 *    current credentials, before anything is bound or forked, so a
 *    configuration that cannot work is refused at start with a message
 *    naming the key;
 *  - privileges_drop either leaves the process with exactly the planned
 *    uid, gid and supplementary groups and no way back to root, or fails.
 */
#ifndef ES_PRIVILEGES_H
#define ES_PRIVILEGES_H

#include <stddef.h>
#include <sys/types.h>

#include "config/config.h"

struct privileges {
	int drop; /* 1: switch to uid/gid (started as root) */
	uid_t uid;
	gid_t gid;
	char user[64]; /* for initgroups and messages */
};

/* Decides what to do.  Returns 0, or -1 with why ("user: no such user
 * \"x\"", "... set user or allowRootJobs: true").  check_only (-t): a
 * user other than the current one is no error when not root (only the
 * start is, where the switch would be needed); p->drop stays 0 then. */
int privileges_plan(const struct es_config *cfg, int check_only, struct privileges *p, char *why,
		    size_t len);

/* Gives tempDir and its job/ and cache/ directories (which janitor_prepare
 * created empty) to the planned user, so that the dropped processes can
 * use them; not what else an operator keeps in tempDir, and never through
 * a symbolic link.  No-op without a drop.  Returns 0 or -1 with why. */
int privileges_give_temp_dir(const struct privileges *p, const char *temp_dir, char *why,
			     size_t len);

/* setgroups/initgroups, setgid, setuid; then checks that setuid(0) and
 * setgid(0) fail.  No-op without a drop.  Returns 0 or -1 with why. */
int privileges_drop(const struct privileges *p, char *why, size_t len);

#endif
