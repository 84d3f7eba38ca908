/*
 * reload.h - the keys a running instance takes over on SIGHUP.  Master and
 * handlers each re-read the file and call this, so they agree on the list:
 * logLevel, authToken, pingIntervalSec, pingTimeoutSec, jobRemovalPolicy,
 * janitorFileAge, legacyToken, legacyTokenValiditySec, handshakeTimeoutSec,
 * idleTimeoutSec, callbackAllow.  Everything else needs a restart.
 */
#ifndef ES_RELOAD_H
#define ES_RELOAD_H

#include "config/config.h"

/* Moves the reloadable values of fresh into cur (fresh keeps the rest and
 * is freed by the caller).  keep_log_level: a -l on the command line wins.
 * Returns 1 if fresh differs from cur in a key that needs a restart. */
int config_take_reloadable(struct es_config *cur, struct es_config *fresh, int keep_log_level);

#endif
