/*
 * reload.h - the keys a running instance takes over on SIGHUP.  Master and
 * handlers each re-read the file and call config_take_reloadable, so they
 * agree on the list: logLevel, authToken, pingIntervalSec, pingTimeoutSec,
 * jobRemovalPolicy, janitorFileAge, broker, legacyToken,
 * legacyTokenValiditySec, handshakeTimeoutSec, idleTimeoutSec,
 * callbackAllow, trustedProxies.  Every other key needs a restart; the
 * master names those that changed (config_restart_keys), and they keep
 * their old values until then.
 */
#ifndef ES_RELOAD_H
#define ES_RELOAD_H

#include <stddef.h>

#include "config/config.h"

/* The keys that need a restart and whose values differ between cur and
 * fresh, by their names in the file, comma-separated into out (cut short
 * if out is too small).  Returns how many differ. */
int config_restart_keys(const struct es_config *cur, const struct es_config *fresh, char *out,
			size_t len);

/* Moves the reloadable values of fresh into cur (fresh keeps the rest and
 * is freed by the caller).  keep_log_level: a -l on the command line
 * wins. */
void config_take_reloadable(struct es_config *cur, struct es_config *fresh, int keep_log_level);

#endif
