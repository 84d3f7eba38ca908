/*
 * cron.h - crontab(5) schedule expressions: parse one, and compute the
 * first occurrence after a given instant in an IANA time zone.  Used by
 * execdispatch's periodic jobs (docs/cron.md); it knows nothing of SQL.
 *
 * Grammar (docs/cron.md has the table):
 *   spec   := blank* ( macro | field blank+ field blank+ field blank+ field blank+ field ) blank*
 *   field  := item ( ',' item )*
 *   item   := '*' [ '/' step ] | value [ '-' value [ '/' step ] ]
 *   value  := digits | name          (names: jan-dec, sun-sat, any case)
 *   macro  := @hourly | @daily | @midnight | @weekly | @monthly | @yearly | @annually
 * The five fields are minute 0-59, hour 0-23, day-of-month 1-31, month
 * 1-12, day-of-week 0-7 (0 and 7 are Sunday).  A step runs from 1 to the
 * field's largest value.  Rejected: an empty spec, more than
 * CRON_TEXT_MAX bytes, a wrong field count, a value out of range, step 0,
 * a reversed range (5-1: crons disagree on what it means, so none is
 * guessed), a step after a single value (5/10: same reason), and a
 * day-of-month that occurs in none of the months given (0 0 30 2 *).
 *
 * Day rule (Vixie cron's): a field is "restricted" unless its text starts
 * with '*'.  When both day-of-month and day-of-week are restricted, a day
 * matches if either matches; otherwise it must match both.
 *
 * Daylight saving, two kinds of spec (cron.c says why):
 *   - the hour field selects all 24 hours ("*", "0-23"): the spec follows
 *     real time; it runs at every instant whose local wall clock matches,
 *     so a repeated hour runs again and a skipped hour does not run;
 *   - otherwise each matching wall-clock minute runs once: at its first
 *     instant when the clock passes it twice, and at the first instant
 *     after the gap when the clock skips it (several skipped minutes that
 *     share that instant run once).
 * Either way successive cron_next results strictly increase.
 */
#ifndef ES_CRON_H
#define ES_CRON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* The longest spec cron_parse accepts, in bytes. */
#define CRON_TEXT_MAX 256
/* How far cron_next searches before it answers "no occurrence"; every
 * spec cron_parse accepts occurs at least once in any 40 years (Feb 29 on
 * a given weekday is the rarest). */
#define CRON_SEARCH_YEARS 100

/* A parsed spec: one bit per value each field selects. */
struct cron {
	uint64_t minutes;   /* bit m: minute m, 0-59 */
	uint32_t hours;     /* bit h: hour h, 0-23 */
	uint32_t days;      /* bit d: day of month d, 1-31 */
	uint16_t months;    /* bit m: month m, 1-12 */
	uint8_t weekdays;   /* bit w: weekday w, 0 Sunday to 6 Saturday */
	bool days_star;     /* the day-of-month field starts with '*' */
	bool weekdays_star; /* the day-of-week field starts with '*' */
};

/* Parses text (NUL-terminated) into *out.  Returns 0, or -1 with a
 * message in err naming the field and the 1-based column, e.g. "field 2
 * (hour) at column 7: 24 is out of range 0-23". */
int cron_parse(const char *text, struct cron *out, char *err, size_t errlen);

/* Returns 0 if tz names a time zone of the system's database: a relative
 * path under /usr/share/zoneinfo without "." or ".." components, naming
 * a regular TZif file ("UTC", "Europe/Berlin"); -1 with a message. */
int cron_zone_check(const char *tz, char *err, size_t errlen);

/* Sets *next to the first occurrence of c strictly after `after`, in the
 * time zone tz (cron_zone_check).  Returns 0, or -1 with a message: an
 * unknown zone, `after` outside years 1900-9000, or no occurrence within
 * CRON_SEARCH_YEARS.  It sets the TZ environment variable while it runs
 * and restores it (unset stays unset): not for threaded programs. */
int cron_next(const struct cron *c, const char *tz, time_t after, time_t *next, char *err,
	      size_t errlen);

#endif
