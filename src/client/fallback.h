/*
 * fallback.h - the legacy token transport of libexecclient (fallback.c): the
 * calls of client_job.c, placement.c and pool.c into it.  Not installed.
 */
#ifndef EXC_CLIENT_FALLBACK_H
#define EXC_CLIENT_FALLBACK_H

#include "client/client_impl.h"

/* A waiting job starts polling the legacy addresses that serve it (no-op
 * when it already polls or none does). */
void legacy_job_wait(struct exc_job *j);
/* Address a just answered 404 to /broker: every waiting job polls it. */
void legacy_address_found(exc_client *c, struct exc_addr *a);
/* Cancels a job running over a legacy PUT (closes it; the server kills
 * the job).  0, or -1 when the job has no legacy PUT. */
int legacy_cancel(struct exc_job *j);
/* Frees the job's legacy requests (job free). */
void legacy_job_free(struct exc_job *j);

#endif
