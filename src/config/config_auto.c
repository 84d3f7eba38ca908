/*
 * config_auto.c - see config_auto.h.  Owns the resolution of the
 * auto-balance keys into the one pool; invariants after
 * config_auto_make_pool: one waitgroup, 0 <= fast_reserve < processes,
 * 1 <= unknown_cap <= processes.
 */
#include "autoconfig.h"
#include "config/config_auto.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t pow10u(unsigned n)
{
	uint64_t p = 1;
	while (n--)
		p *= 10;
	return p;
}

int config_share_parse(const char *text, size_t len, struct config_share *out)
{
	uint64_t num = 0;
	unsigned scale = 0, digits = 0, zeros = 0;
	int point = 0;

	for (size_t i = 0; i < len; i++) {
		char ch = text[i];
		if (ch == '.' && !point) {
			point = 1;
			continue;
		}
		if (ch < '0' || ch > '9')
			return -1;
		digits++;
		if (!point) {
			if (num > 1)
				return -1; /* above 1 whatever follows */
			num = num * 10 + (uint64_t)(ch - '0');
			continue;
		}
		if (ch == '0') {
			zeros++; /* kept only if a non-zero digit follows */
			continue;
		}
		if (scale + zeros + 1 > CONFIG_SHARE_MAX_DIGITS)
			return -1;
		for (; zeros; zeros--, scale++)
			num *= 10;
		num = num * 10 + (uint64_t)(ch - '0');
		scale++;
	}
	if (digits == 0 || num == 0 || num > pow10u(scale))
		return -1;
	out->num = num;
	out->scale = scale;
	return 0;
}

double config_share_value(struct config_share s)
{
	return (double)s.num / (double)pow10u(s.scale);
}

long config_share_of(struct config_share s, long pool)
{
	/* num <= 10^15 and pool <= CONFIG_MAX_PROCESSES: no overflow */
	return (long)(s.num * (uint64_t)pool / pow10u(s.scale));
}

long config_cpu_count(long n, long max)
{
	if (n <= 0)
		n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 1)
		n = 1;
	return n > max ? max : n;
}

int config_auto_make_pool(struct es_config *cfg, struct config_share share, long *pool_out)
{
	long pool = config_cpu_count(cfg->cpus, CONFIG_MAX_PROCESSES);

	*pool_out = pool;
	cfg->auto_balance = 1;
	cfg->waitgroups = calloc(1, sizeof *cfg->waitgroups);
	if (!cfg->waitgroups)
		return -1;
	cfg->waitgroups[0].name = strdup(CONFIG_AUTO_POOL);
	if (!cfg->waitgroups[0].name)
		return -1;
	cfg->nwaitgroups = 1;
	cfg->waitgroups[0].processes = (int)pool;
	if (cfg->fast_reserve == 0) {
		/* max(1, pool/4), but never the whole pool */
		cfg->fast_reserve = pool / 4 > 1 ? (int)(pool / 4) : 1;
		if (cfg->fast_reserve >= pool)
			cfg->fast_reserve = (int)pool - 1;
	} else if (cfg->fast_reserve >= pool) {
		return -2;
	}
	long cap = config_share_of(share, pool);
	cfg->unknown_share = config_share_value(share);
	cfg->unknown_cap = cap < 1 ? 1 : (int)cap;
	return 0;
}
