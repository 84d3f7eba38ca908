/*
 * config_auto.h - the auto-balance part of the configuration: how the one
 * pool, its fast reserve and the unknown cap are resolved from `cpus`,
 * `fastReserve` and `unknownShare` when the file has no `waitgroups` block
 * (execserver.yml(5), AUTO-BALANCE).  No YAML here: config.c reads the
 * keys and reports errors at their position; this file does the
 * arithmetic, exactly (a share is a decimal fraction, never a binary
 * floating point number, so floor(share x pool) is what the manual says).
 */
#ifndef ES_CONFIG_AUTO_H
#define ES_CONFIG_AUTO_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

/* Most digits after the point of unknownShare (trailing zeros aside):
 * num * CONFIG_MAX_PROCESSES stays far below 2^64. */
#define CONFIG_SHARE_MAX_DIGITS 15

/* A share of the pool as the exact decimal fraction num / 10^scale. */
struct config_share {
	uint64_t num;
	unsigned scale;
};
#define CONFIG_SHARE_DEFAULT ((struct config_share){ 5, 1 }) /* 0.5 */

/* Parses text[0..len) as a plain decimal number (digits with at most one
 * point, at most CONFIG_SHARE_MAX_DIGITS significant digits after it) above
 * 0 and at most 1.  0, or -1 when it is not one. */
int config_share_parse(const char *text, size_t len, struct config_share *out);
/* The share as a double (for display only). */
double config_share_value(struct config_share s);
/* floor(s x pool), exactly. */
long config_share_of(struct config_share s, long pool);

/* n, or the number of online CPUs for n <= 0; within 1..max. */
long config_cpu_count(long n, long max);

/* Makes the one pool of auto-balance in cfg: sets auto_balance, the single
 * waitgroup CONFIG_AUTO_POOL of cfg->cpus (or the CPU count) processes,
 * fast_reserve (0 = max(1, pool / 4), never the whole pool),
 * unknown_share and unknown_cap = max(1, floor(share x pool)).  Returns 0;
 * -1 out of memory; -2 when a given fastReserve is not smaller than the
 * pool (*pool says its size, for the message). */
int config_auto_make_pool(struct es_config *cfg, struct config_share share, long *pool);

#endif
