/*
 * dispatcher.h - the execdispatch daemon's loop: claims queued rows within
 * the claim share, runs them through libexecclient, writes each outcome
 * back under its claim, keeps the heartbeat, rescues the rows of silent
 * dispatchers and notices cancels (docs/dispatch.md).
 */
#ifndef ES_DISPATCH_DISPATCHER_H
#define ES_DISPATCH_DISPATCHER_H

#include "dispatch/dispatch_config.h"

/* Runs until SIGTERM or SIGINT (then: claims not yet started are given
 * back, running jobs finish, their outcomes are written, the heartbeat row
 * is removed; a second signal exits at once).  Returns the exit status. */
int dispatcher_run(const struct dispatch_config *cfg);

#endif
