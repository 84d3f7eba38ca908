/*
 * schedule_check.c - see schedule_check.h.
 */
#include "autoconfig.h"
#include "dispatch/schedule_check.h"

#include <stdio.h>

#include "common/cron.h"

int schedule_check(const char *spec, const char *tz, char *err, size_t len)
{
	char why[200];
	struct cron c;

	if (cron_parse(spec, &c, why, sizeof why) < 0) {
		snprintf(err, len, "cron: %s", why);
		return -1;
	}
	if (cron_zone_check(tz, why, sizeof why) < 0) {
		snprintf(err, len, "tz: %s", why);
		return -1;
	}
	return 0;
}
