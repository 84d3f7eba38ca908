/*
 * profile_keeper.c - see profile_keeper.h.  Owns the "last written"
 * counters of the master process; the snapshot is gathered under the book
 * lock and written after the lock is released (file I/O never holds it).
 */
#include "autoconfig.h"
#include "master/profile_keeper.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "book/book_class.h"
#include "common/log.h"
#include "master/profile.h"

static struct {
	uint64_t samples, class_changes; /* book counters at the last write */
	uint64_t written_ms;
	int started;
} K;

static void path_of(const struct instance *inst, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", inst->cfg->temp_dir, PROFILE_FILE);
}

static uint32_t pool_of(const struct instance *inst)
{
	return (uint32_t)inst->cfg->waitgroups[0].processes;
}

void profile_keeper_restore(const struct instance *inst, const struct keeper_lock *lk)
{
	const struct es_config *cfg = inst->cfg;
	char path[4096], why[256];
	struct profile_entry *e;
	size_t n;

	if (!cfg->auto_balance)
		return;
	path_of(inst, path, sizeof path);
	int rc = profile_read(path, profile_arch(), pool_of(inst), &e, &n, why, sizeof why);
	if (rc < 0) {
		log_warn("profile snapshot %s discarded: %s; every service starts unknown", path,
			 why);
		return;
	}
	if (rc == 0) {
		log_info("no profile snapshot at %s: every service starts unknown", path);
		return;
	}
	size_t restored = 0;
	struct book *b = lk->lock();
	for (size_t i = 0; i < n; i++) {
		int s = config_service_index(cfg, e[i].name);
		if (s >= 0 && book_profile_set(b, (uint32_t)s, &e[i].p) == BOOK_OK)
			restored++;
	}
	book_profile_changes(b, &K.samples, &K.class_changes);
	for (size_t s = 0; s < cfg->nservices; s++) {
		struct book_profile p;
		book_profile_get(b, (uint32_t)s, &p);
		if (p.samples)
			log_info("profile: service %s is %s (mean runtime %.0f ms over %llu jobs)",
				 cfg->services[s].name, class_name(p.klass), p.ema_ms,
				 (unsigned long long)p.samples);
	}
	lk->unlock();
	free(e);
	log_info("profile snapshot %s restored: %zu of %zu service(s)", path, restored, n);
}

static void save(const struct instance *inst, const struct keeper_lock *lk)
{
	const struct es_config *cfg = inst->cfg;
	struct profile_entry *e = calloc(cfg->nservices ? cfg->nservices : 1, sizeof *e);
	char path[4096], why[512];

	if (!e) {
		log_warn("profile snapshot not written: out of memory");
		return;
	}
	struct book *b = lk->lock();
	book_profile_changes(b, &K.samples, &K.class_changes);
	for (size_t s = 0; s < cfg->nservices; s++) {
		snprintf(e[s].name, sizeof e[s].name, "%s", cfg->services[s].name);
		book_profile_get(b, (uint32_t)s, &e[s].p);
	}
	lk->unlock();
	path_of(inst, path, sizeof path);
	if (profile_write(path, profile_arch(), pool_of(inst), e, cfg->nservices, why,
			  sizeof why) != 0)
		log_warn("profile snapshot not written: %s", why);
	else
		log_debug("profile snapshot written to %s", path);
	free(e);
}

void profile_keeper_tick(const struct instance *inst, const struct keeper_lock *lk, uint64_t now_ms,
			 int force)
{
	uint64_t samples, changes;

	if (!inst->cfg->auto_balance)
		return;
	if (!K.started) {
		K.started = 1;
		K.written_ms = now_ms;
	}
	struct book *b = lk->lock();
	book_profile_changes(b, &samples, &changes);
	lk->unlock();
	if (force || changes != K.class_changes ||
	    (samples != K.samples && now_ms - K.written_ms >= PROFILE_SAVE_MS)) {
		save(inst, lk);
		K.written_ms = now_ms;
	}
}
