/*
 * janitor.h - what is left under tempDir: job directories kept by
 * jobRemovalPolicy, or left by a handler that died.
 *
 * At start the master empties tempDir/job/ and tempDir/cache/ (nothing in
 * them can belong to a live job: no handler runs yet).  Then each handler
 * sweeps tempDir/job/ now and then and removes, among the directories named
 * after its own slot ("<slot>-..."), those older than janitorFileAge that
 * no job of its own uses; handler 0 also takes entries named otherwise.  A
 * slot's directories are thus only ever removed by the one process that
 * knows which of them are in use.
 */
#ifndef ES_JANITOR_H
#define ES_JANITOR_H

#include <stdint.h>

#include "config/config.h"

/* Master, before the handlers start: empties tempDir/job and tempDir/cache
 * (creating them and tempDir if missing).  Returns 0 or -1 (logged). */
int janitor_prepare(const struct es_config *cfg);

/* Removes a directory tree (no symlink is followed).  Returns 0 or -1. */
int janitor_remove_tree(const char *path);

/* One sweep for handler `slot` of nhandlers: in_use(name) says whether a
 * directory entry name belongs to a job still running here.  Removes what
 * is older than max_age_ms at now (wall clock, ms).  Returns the number
 * removed. */
unsigned janitor_sweep(const char *job_dir, int slot, int nhandlers, uint64_t max_age_ms,
		       uint64_t now_ms, int (*in_use)(const char *name));

#endif
