/*
 * profile_keeper.h - keeps the want-book's learned profile (auto-balance)
 * and its snapshot file (profile.h) in step, for the master: restore at
 * start, write when a class changed (at the next tick), when samples were
 * added and PROFILE_SAVE_MS passed since the last write, and at shutdown
 * (always).
 * Does nothing without auto-balance.  The master passes its own locking
 * function (it logs repairs and handles an unusable mutex).
 */
#ifndef ES_PROFILE_KEEPER_H
#define ES_PROFILE_KEEPER_H

#include <stdint.h>

#include "handler/instance.h"

#define PROFILE_SAVE_MS 30000

/* The master's lock and unlock of the book: the unlock wakes the handlers
 * a repair done by the lock left mail for. */
struct keeper_lock {
	struct book *(*lock)(void);
	void (*unlock)(void);
};

/* Reads tempDir/profile.json into the book (logs what it restored, or why
 * it discarded the snapshot). */
void profile_keeper_restore(const struct instance *inst, const struct keeper_lock *lk);
/* Called every master tick; force: write now, whatever changed (shutdown:
 * the file then always describes this pool, even when nothing was learned
 * since a snapshot of another pool was discarded). */
void profile_keeper_tick(const struct instance *inst, const struct keeper_lock *lk, uint64_t now_ms,
			 int force);

#endif
