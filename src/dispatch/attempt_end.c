/*
 * attempt_end.c - tells the database that the run of a lost claim ended
 * (DQ_ATTEMPT_ENDED): a cancel of a held row leaves its attempt in
 * job_attempt unfinished, and retry() answers "stopping" until the
 * dispatcher that ran it says the run is over, so that a retried job
 * never runs beside its cancelled run (docs/dispatch.md, "Retry").
 *
 * One chore per ended run, on the chores lane, nobody waiting for the
 * answer but the log.  Invariant: sent only once the run is over (its
 * receipt, or its end without one, came from the execserver or the
 * local process group), never before.
 */
#include "autoconfig.h"

#include <stdio.h>

#include "common/log.h"
#include "dispatch/dispatch_impl.h"

static void attempt_ended_done(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;
	const int64_t *id = note;

	if (!res)
		log_warn("job %lld: the end of its cancelled run not written (%s): retry() "
			 "answers stopping until this dispatcher stops",
			 (long long)*id, away ? "database away" : chores_db(d->chores)->last_error);
}

void attempt_ended(struct dispatcher *d, int64_t id, int claim)
{
	char ids[24], claims[16];
	const char *params[3] = { d->cfg->instance_id, ids, claims };

	snprintf(ids, sizeof ids, "%lld", (long long)id);
	snprintf(claims, sizeof claims, "%d", claim);
	if (chores_add(d->chores, d->sql[Q_ENDED], 3, params, &id, sizeof id, attempt_ended_done,
		       d) < 0)
		log_warn("job %lld: the end of its cancelled run not written (no memory)",
			 (long long)id);
}
