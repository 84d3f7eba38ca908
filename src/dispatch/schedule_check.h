/*
 * schedule_check.h - what a schedule must be for the dispatchers to run
 * it (docs/dispatch.md, "Periodic jobs"): its spec accepted by
 * cron_parse and its zone by cron_zone_check (common/cron.h).  One rule
 * for both sides: the dispatcher marks a row that fails it (schedules.c)
 * and execctl refuses it before calling schedule() (cli/schedule.c).
 */
#ifndef ES_DISPATCH_SCHEDULE_CHECK_H
#define ES_DISPATCH_SCHEDULE_CHECK_H

#include <stddef.h>

/* 0, or -1 with the reason in err, "cron: ..." or "tz: ...". */
int schedule_check(const char *spec, const char *tz, char *err, size_t len);

#endif
