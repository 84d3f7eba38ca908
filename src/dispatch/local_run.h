/*
 * local_run.h - a job of a service marked `local` (execdispatch.yml(5)),
 * run on the dispatcher's own host: the job payload's command looked up in
 * the service's commands, its args and env, its timeout_sec, spawned in
 * a process group of its own; its stdout (the first 4000 bytes) and its
 * last stderr line become the receipt, as the execserver's would.
 *
 * Streams and files (stdin, stdout, inputs, outputs) are the execserver's
 * business: a local payload that names them is refused (bad_job).  The
 * environment is the payload's env alone (nothing of the dispatcher's).
 *
 * Exits are learned from local_reaped(), which the owner calls for every
 * child it reaps (SIGCHLD); done() is called once, from the event loop.
 */
#ifndef ES_DISPATCH_LOCAL_RUN_H
#define ES_DISPATCH_LOCAL_RUN_H

#include <stddef.h>
#include <sys/types.h>

#include <execserver/client.h>

#include "dispatch/dispatch_config.h"

struct event_base;
struct local_run;

typedef void (*local_done_cb)(struct local_run *run, const struct exc_receipt *r, void *arg);

/* Starts the payload (JSON text) under svc.  NULL with err filled
 * ("bad_job: ...") when the payload cannot run; the job did not start. */
struct local_run *local_start(struct event_base *base, const struct dispatch_local_service *svc,
			      const char *payload, local_done_cb done, void *arg, char *err,
			      size_t errlen);
/* Stops the run (SIGKILL to its group); done() follows with "cancelled". */
void local_cancel(struct local_run *run);
/* A child was reaped: 1 when it was this run's (then done() may follow). */
int local_reaped(struct local_run *run, pid_t pid, int status);

#endif
