/* janitor.c - see janitor.h. */
#include "autoconfig.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "job/janitor.h"

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

int janitor_remove_tree(const char *path)
{
	return nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Empties dir (keeping it), creating it if missing. */
static int empty_dir(const char *dir)
{
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		log_error("cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	DIR *d = opendir(dir);
	if (!d) {
		log_error("cannot open %s: %s", dir, strerror(errno));
		return -1;
	}
	struct dirent *e;
	unsigned removed = 0;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		char path[4096];
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		if (janitor_remove_tree(path) == 0)
			removed++;
		else
			log_warn("cannot remove %s: %s", path, strerror(errno));
	}
	closedir(d);
	if (removed)
		log_info("removed %u leftover(s) from %s", removed, dir);
	return 0;
}

int janitor_prepare(const struct es_config *cfg)
{
	char path[4096];

	if (mkdir(cfg->temp_dir, 0700) != 0 && errno != EEXIST) {
		log_error("cannot create tempDir %s: %s", cfg->temp_dir, strerror(errno));
		return -1;
	}
	snprintf(path, sizeof path, "%s/job", cfg->temp_dir);
	if (empty_dir(path) != 0)
		return -1;
	snprintf(path, sizeof path, "%s/cache", cfg->temp_dir);
	return empty_dir(path);
}

/* The slot a job directory name belongs to ("<slot>-..."), or -1. */
static int slot_of_name(const char *name)
{
	char *end;
	long slot = strtol(name, &end, 10);
	if (end == name || *end != '-' || slot < 0 || slot > 1000000)
		return -1;
	return (int)slot;
}

unsigned janitor_sweep(const char *job_dir, int slot, int nhandlers, uint64_t max_age_ms,
		       uint64_t now_ms, int (*in_use)(const char *name))
{
	DIR *d = opendir(job_dir);
	unsigned removed = 0;

	if (!d)
		return 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.' &&
		    (e->d_name[1] == '\0' || (e->d_name[1] == '.' && e->d_name[2] == '\0')))
			continue;
		int owner = slot_of_name(e->d_name);
		if (owner < 0 || owner >= nhandlers)
			owner = 0; /* foreign entries: handler 0's */
		if (owner != slot || in_use(e->d_name))
			continue;
		char path[4096];
		struct stat st;
		snprintf(path, sizeof path, "%s/%s", job_dir, e->d_name);
		if (lstat(path, &st) != 0)
			continue;
		uint64_t mtime_ms = (uint64_t)st.st_mtim.tv_sec * 1000u +
				    (uint64_t)st.st_mtim.tv_nsec / 1000000u;
		if (mtime_ms + max_age_ms > now_ms)
			continue;
		if (janitor_remove_tree(path) == 0)
			removed++;
	}
	closedir(d);
	return removed;
}
