/*
 * privileges.c - see privileges.h.
 *
 * The decision table (euid = the user the daemon was started as):
 *
 *   euid 0, user set       drop to user (group: `group`, else the user's
 *                          primary group); user root needs allowRootJobs
 *   euid 0, user not set   refused unless allowRootJobs: true (then
 *                          everything, jobs included, runs as root)
 *   euid != 0, user set    fine if it is the current user (and group the
 *                          current group), else refused: only root can
 *                          switch users
 *   euid != 0, not set     runs as it is
 */
#include "autoconfig.h"

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "master/privileges.h"

/* A name, or a decimal id; -1 if neither. */
static int lookup_user(const char *name, uid_t *uid, gid_t *gid, char *pw_name, size_t len)
{
	struct passwd *pw = getpwnam(name);
	char *end;

	if (!pw) {
		unsigned long v = strtoul(name, &end, 10);
		if (*name == '\0' || *end != '\0' || v > UINT_MAX - 1)
			return -1;
		pw = getpwuid((uid_t)v);
		if (!pw)
			return -1;
	}
	*uid = pw->pw_uid;
	*gid = pw->pw_gid;
	snprintf(pw_name, len, "%s", pw->pw_name);
	return 0;
}

static int lookup_group(const char *name, gid_t *gid)
{
	struct group *gr = getgrnam(name);
	char *end;

	if (!gr) {
		unsigned long v = strtoul(name, &end, 10);
		if (*name == '\0' || *end != '\0' || v > UINT_MAX - 1)
			return -1;
		gr = getgrgid((gid_t)v);
		if (!gr)
			return -1;
	}
	*gid = gr->gr_gid;
	return 0;
}

/* "file:line:column: message" (line 0: "file: message") into why; -1. */
static int refuse(const struct es_config *cfg, int line, int column, char *why, size_t len,
		  const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int refuse(const struct es_config *cfg, int line, int column, char *why, size_t len,
		  const char *fmt, ...)
{
	va_list ap;
	int n = line > 0 ? snprintf(why, len, "%s:%d:%d: ", cfg->file, line, column)
			 : snprintf(why, len, "%s: ", cfg->file);

	if (n < 0 || (size_t)n >= len)
		return -1;
	va_start(ap, fmt);
	vsnprintf(why + n, len - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

int privileges_plan(const struct es_config *cfg, int check_only, struct privileges *p, char *why,
		    size_t len)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	int ul = cfg->user_line, uc = cfg->user_column;

	memset(p, 0, sizeof *p);
	if (cfg->group && !cfg->user)
		return refuse(cfg, cfg->group_line, cfg->group_column, why, len,
			      "group is set but user is not: set user as well");
	if (cfg->user) {
		if (lookup_user(cfg->user, &p->uid, &p->gid, p->user, sizeof p->user) != 0)
			return refuse(cfg, ul, uc, why, len, "user: no such user \"%s\"",
				      cfg->user);
		if (cfg->group && lookup_group(cfg->group, &p->gid) != 0)
			return refuse(cfg, cfg->group_line, cfg->group_column, why, len,
				      "group: no such group \"%s\"", cfg->group);
		if (p->uid == 0 && !cfg->allow_root_jobs)
			return refuse(cfg, ul, uc, why, len,
				      "user: \"%s\" is root, so jobs would run as root: name "
				      "another user, or set allowRootJobs: true to allow it",
				      cfg->user);
		if (uid != 0) {
			if (!check_only && (p->uid != uid || p->gid != gid))
				return refuse(cfg, ul, uc, why, len,
					      "user/group: cannot switch to %s: execserver was "
					      "not started as root",
					      cfg->user);
			return 0; /* already that user */
		}
		p->drop = 1;
		return 0;
	}
	if (uid == 0 && !cfg->allow_root_jobs)
		return refuse(cfg, 0, 0, why, len,
			      "started as root without a user to switch to: set user (and "
			      "group) to the account the daemon and its jobs should run as, or "
			      "set allowRootJobs: true to run everything, jobs included, as root");
	return 0;
}

int privileges_give_temp_dir(const struct privileges *p, const char *temp_dir, char *why,
			     size_t len)
{
	static const char *const below[] = { "", "/job", "/cache" };
	char path[4096];

	if (!p->drop)
		return 0;
	for (size_t i = 0; i < sizeof below / sizeof below[0]; i++) {
		snprintf(path, sizeof path, "%s%s", temp_dir, below[i]);
		if (lchown(path, p->uid, p->gid) != 0) {
			snprintf(why, len, "cannot give %s to user %s: %s", path, p->user,
				 strerror(errno));
			return -1;
		}
	}
	return 0;
}

int privileges_drop(const struct privileges *p, char *why, size_t len)
{
	if (!p->drop)
		return 0;
	if (initgroups(p->user, p->gid) != 0 && setgroups(1, &p->gid) != 0) {
		snprintf(why, len, "cannot set the groups of %s: %s", p->user, strerror(errno));
		return -1;
	}
	if (setgid(p->gid) != 0) {
		snprintf(why, len, "cannot switch to group %u: %s", (unsigned)p->gid,
			 strerror(errno));
		return -1;
	}
	if (setuid(p->uid) != 0) {
		snprintf(why, len, "cannot switch to user %s: %s", p->user, strerror(errno));
		return -1;
	}
	if (getuid() != p->uid || geteuid() != p->uid || getgid() != p->gid ||
	    getegid() != p->gid) {
		snprintf(why, len, "switching to user %s did not take", p->user);
		return -1;
	}
	/* A non-root user must not be able to get root back. */
	if (p->uid != 0 && (setuid(0) == 0 || seteuid(0) == 0)) {
		snprintf(why, len, "root could be regained after switching to %s", p->user);
		return -1;
	}
	if (p->gid != 0 && p->uid != 0 && (setgid(0) == 0 || setegid(0) == 0)) {
		snprintf(why, len, "group 0 could be regained after switching to %s", p->user);
		return -1;
	}
	return 0;
}
