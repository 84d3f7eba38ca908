/*
 * test_cron.c - unit tests of the cron spec parser and next-occurrence
 * calculator (src/common/cron.c, docs/cron.md): each form of the grammar,
 * each error with its column, month ends and leap years, the day rule of
 * Vixie cron, and the daylight-saving rules in Europe/Berlin and
 * America/New_York around the 2026 changes (Berlin: 2026-03-29 and
 * 2026-10-25 at 01:00 UTC; New York: 2026-03-08 at 07:00 UTC and
 * 2026-11-01 at 06:00 UTC), with the system's zone database.
 */
#include "autoconfig.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <CUnit/Basic.h>

#include "common/cron.h"
#include "suite.h"

#define HOUR 3600

static time_t utc(int y, int mo, int d, int h, int mi)
{
	struct tm tm = {
		.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi
	};
	return timegm(&tm);
}

static struct cron parsed(const char *text)
{
	struct cron c;
	char err[256];
	int r = cron_parse(text, &c, err, sizeof err);
	if (r != 0)
		fprintf(stderr, "cron_parse(\"%s\"): %s\n", text, err);
	CU_ASSERT_FATAL(r == 0);
	return c;
}

static void parse_fails(const char *text, const char *message)
{
	struct cron c;
	char err[256];
	CU_ASSERT_EQUAL(cron_parse(text, &c, err, sizeof err), -1);
	if (strcmp(err, message) != 0)
		fprintf(stderr, "cron_parse(\"%s\"):\n  got  %s\n  want %s\n", text, err, message);
	CU_ASSERT_STRING_EQUAL(err, message);
}

/* The occurrences of spec in tz after `after`, one after another, must be
 * want[0..n-1]. */
static void sequence(const char *spec, const char *tz, time_t after, const time_t *want, int n)
{
	struct cron c = parsed(spec);
	char err[256];

	for (int i = 0; i < n; i++) {
		time_t next = 0;
		int r = cron_next(&c, tz, after, &next, err, sizeof err);
		if (r != 0)
			fprintf(stderr, "%s in %s after %lld: %s\n", spec, tz, (long long)after,
				err);
		CU_ASSERT_EQUAL_FATAL(r, 0);
		if (next != want[i])
			fprintf(stderr, "%s in %s after %lld: got %lld, want %lld (step %d)\n",
				spec, tz, (long long)after, (long long)next, (long long)want[i], i);
		CU_ASSERT_EQUAL(next, want[i]);
		after = next;
	}
}

#define SEQ(spec, tz, after, ...)                                                        \
	do {                                                                             \
		const time_t want_[] = { __VA_ARGS__ };                                  \
		sequence(spec, tz, after, want_, (int)(sizeof want_ / sizeof want_[0])); \
	} while (0)

static uint64_t bits(const int *v, int n)
{
	uint64_t b = 0;
	for (int i = 0; i < n; i++)
		b |= (uint64_t)1 << v[i];
	return b;
}

#define BITS(...) \
	bits((const int[]){ __VA_ARGS__ }, (int)(sizeof((int[]){ __VA_ARGS__ }) / sizeof(int)))

static void test_parse_forms(void)
{
	struct cron c = parsed("*/15 * * * *");
	CU_ASSERT_EQUAL(c.minutes, BITS(0, 15, 30, 45));
	CU_ASSERT_EQUAL(c.hours, 0xffffffu);
	CU_ASSERT_EQUAL(c.days, 0xfffffffeu);
	CU_ASSERT_EQUAL(c.months, 0x1ffe);
	CU_ASSERT_EQUAL(c.weekdays, 0x7f);
	CU_ASSERT(c.days_star && c.weekdays_star);

	c = parsed("1,2,5-7 * * * *");
	CU_ASSERT_EQUAL(c.minutes, BITS(1, 2, 5, 6, 7));
	c = parsed("10-50/20 0-23/6 1-31/10 */5 *");
	CU_ASSERT_EQUAL(c.minutes, BITS(10, 30, 50));
	CU_ASSERT_EQUAL(c.hours, BITS(0, 6, 12, 18));
	CU_ASSERT_EQUAL(c.days, BITS(1, 11, 21, 31));
	CU_ASSERT_EQUAL(c.months, BITS(1, 6, 11));
	CU_ASSERT(!c.days_star && c.weekdays_star);

	/* names in any case, in ranges; 0 and 7 are both Sunday */
	c = parsed("0 0 1 JAN-mar,Dec Mon-FRI");
	CU_ASSERT_EQUAL(c.months, BITS(1, 2, 3, 12));
	CU_ASSERT_EQUAL(c.weekdays, BITS(1, 2, 3, 4, 5));
	CU_ASSERT_EQUAL(parsed("0 0 * * 7").weekdays, BITS(0));
	CU_ASSERT_EQUAL(parsed("0 0 * * 0").weekdays, BITS(0));
	CU_ASSERT_EQUAL(parsed("0 0 * * 5-7").weekdays, BITS(0, 5, 6));
	CU_ASSERT_EQUAL(parsed("0 0 * * sun,sat").weekdays, BITS(0, 6));
	CU_ASSERT_EQUAL(parsed("0 0 * * */2").weekdays, BITS(0, 2, 4, 6));
	CU_ASSERT(!parsed("0 0 * * 1").weekdays_star);

	/* blanks: spaces and tabs, around and between */
	c = parsed(" \t5\t 4  3 2 1 \t");
	CU_ASSERT_EQUAL(c.minutes, BITS(5));
	CU_ASSERT_EQUAL(c.hours, BITS(4));
	CU_ASSERT_EQUAL(c.days, BITS(3));
	CU_ASSERT_EQUAL(c.months, BITS(2));
	CU_ASSERT_EQUAL(c.weekdays, BITS(1));
}

static void same(const char *a, const char *b)
{
	struct cron x = parsed(a), y = parsed(b);
	CU_ASSERT(memcmp(&x, &y, sizeof x) == 0);
}

static void test_parse_macros(void)
{
	same("@hourly", "0 * * * *");
	same("@daily", "0 0 * * *");
	same("@midnight", "0 0 * * *");
	same("@weekly", "0 0 * * 0");
	same("@monthly", "0 0 1 * *");
	same("@yearly", "0 0 1 1 *");
	same("@annually", "0 0 1 1 *");
	same("  @DAILY ", "0 0 * * *");
}

static void test_parse_errors(void)
{
	char longer[300];
	memset(longer, ' ', sizeof longer - 1);
	longer[sizeof longer - 1] = '\0';

	parse_fails("", "empty: expected 5 fields (minute hour day-of-month month day-of-week) "
			"or a macro such as @daily");
	parse_fails(" \t ", "empty: expected 5 fields (minute hour day-of-month month "
			    "day-of-week) or a macro such as @daily");
	parse_fails(longer, "at column 257: longer than 256 bytes");
	parse_fails("0  24 * * *", "field 2 (hour) at column 4: 24 is out of range 0-23");
	parse_fails("60 * * * *", "field 1 (minute) at column 1: 60 is out of range 0-59");
	parse_fails("0 0 0 * *", "field 3 (day-of-month) at column 5: 0 is out of range 1-31");
	parse_fails("0 0 * 13 *", "field 4 (month) at column 7: 13 is out of range 1-12");
	parse_fails("0 0 * * 8", "field 5 (day-of-week) at column 9: 8 is out of range 0-7");
	parse_fails("99999999999999999999 * * * *",
		    "field 1 (minute) at column 1: 999999999999 is out of range 0-59");
	parse_fails("*/0 * * * *", "field 1 (minute) at column 3: step 0 is out of range 1-59");
	parse_fails("0 */24 * * *", "field 2 (hour) at column 5: step 24 is out of range 1-23");
	parse_fails("0 0 * * 1-5/", "field 5 (day-of-week) at column 13: expected a step 1-7, "
				    "found end of text");
	parse_fails("5-1 * * * *", "field 1 (minute) at column 1: range 5-1 is reversed (write "
				   "two ranges, as in 5-59,0-1)");
	parse_fails("0 0 * * fri-mon", "field 5 (day-of-week) at column 9: range 5-1 is reversed "
				       "(write two ranges, as in 5-7,0-1)");
	parse_fails("5/10 * * * *", "field 1 (minute) at column 2: a step follows '*' or a range "
				    "(*/2, 5-59/2), not a single value");
	parse_fails("0 0 * *", "field 5 (day-of-week) at column 8: missing (a spec has 5 fields: "
			       "minute hour day-of-month month day-of-week)");
	parse_fails("0", "field 2 (hour) at column 2: missing (a spec has 5 fields: minute hour "
			 "day-of-month month day-of-week)");
	parse_fails("0 0 * * * x", "at column 11: unexpected 6th field (a spec has 5 fields)");
	parse_fails("0 0 * * 1x", "field 5 (day-of-week) at column 10: unexpected 'x' (expected "
				  "',' or a blank)");
	parse_fails("0 0 * * mon\n", "field 5 (day-of-week) at column 12: unexpected byte 0x0a "
				     "(expected ',' or a blank)");
	parse_fails("1,,2 * * * *",
		    "field 1 (minute) at column 3: expected a number 0-59, found ','");
	parse_fails("0 0 * * 1-", "field 5 (day-of-week) at column 11: expected a number 0-7 or "
				  "sun-sat, found end of text");
	parse_fails("a * * * *", "field 1 (minute) at column 1: 'a' is not a number 0-59");
	parse_fails("0 0 * foo *", "field 4 (month) at column 7: unknown month name 'foo' "
				   "(expected jan-dec or a number 1-12)");
	parse_fails("0 0 * * sunday", "field 5 (day-of-week) at column 9: unknown day-of-week "
				      "name 'sunday' (expected sun-sat or a number 0-7)");
	parse_fails("0 0 30 2 *", "field 3 (day-of-month) at column 5: never matches: no "
				  "selected day occurs in a selected month");
	parse_fails("0 0 31 apr,jun,sep,nov *", "field 3 (day-of-month) at column 5: never "
						"matches: no selected day occurs in a selected "
						"month");
	parse_fails("@reboot", "at column 1: unknown macro '@reboot' (expected @hourly, @daily, "
			       "@midnight, @weekly, @monthly, @yearly or @annually)");
	parse_fails("@daily 5", "at column 8: unexpected text after @daily");

	/* what stays legal beside the errors: Feb 29, 30 Feb when a weekday
	 * also selects days (either matches) */
	parsed("0 0 29 2 *");
	parsed("0 0 30 2 mon");
	parsed("0 0 31 * *");
}

static void test_next_utc(void)
{
	/* month ends: the 31st skips short months; the 30th skips February */
	SEQ("0 0 31 * *", "UTC", utc(2026, 4, 1, 0, 0), utc(2026, 5, 31, 0, 0),
	    utc(2026, 7, 31, 0, 0), utc(2026, 8, 31, 0, 0));
	SEQ("0 12 30 * *", "UTC", utc(2026, 1, 30, 12, 0), utc(2026, 3, 30, 12, 0));
	SEQ("59 23 31 12 *", "UTC", utc(2026, 6, 1, 0, 0), utc(2026, 12, 31, 23, 59),
	    utc(2027, 12, 31, 23, 59));
	/* strictly after: an occurrence equal to `after` is not returned */
	SEQ("* * * * *", "UTC", utc(2026, 12, 31, 23, 59), utc(2027, 1, 1, 0, 0));
	SEQ("* * * * *", "UTC", utc(2026, 12, 31, 23, 59) + 30, utc(2027, 1, 1, 0, 0));
	SEQ("0 0 1 */3 *", "UTC", utc(2026, 1, 1, 0, 0), utc(2026, 4, 1, 0, 0),
	    utc(2026, 7, 1, 0, 0), utc(2026, 10, 1, 0, 0), utc(2027, 1, 1, 0, 0));
	/* leap years: Feb 29, and 2100 is not one */
	SEQ("0 0 29 2 *", "UTC", utc(2026, 3, 1, 0, 0), utc(2028, 2, 29, 0, 0),
	    utc(2032, 2, 29, 0, 0));
	SEQ("0 0 29 2 *", "UTC", utc(2096, 3, 1, 0, 0), utc(2104, 2, 29, 0, 0));
	/* Feb 29 on a Sunday, the day-of-week written with '*' so that both
	 * must match: 2032, 2060, 2088, then 2128 across 2100 */
	SEQ("0 0 29 2 */7", "UTC", utc(2026, 1, 1, 0, 0), utc(2032, 2, 29, 0, 0),
	    utc(2060, 2, 29, 0, 0), utc(2088, 2, 29, 0, 0), utc(2128, 2, 29, 0, 0));
	SEQ("@weekly", "UTC", utc(2026, 1, 1, 0, 0), utc(2026, 1, 4, 0, 0), utc(2026, 1, 11, 0, 0));
	SEQ("@hourly", "UTC", utc(2026, 1, 1, 0, 30), utc(2026, 1, 1, 1, 0));
	SEQ("@yearly", "UTC", utc(1969, 12, 31, 0, 0), utc(1970, 1, 1, 0, 0),
	    utc(1971, 1, 1, 0, 0));
}

static void test_next_day_rule(void)
{
	/* both restricted: either matches (2026-01-01 is a Thursday) */
	SEQ("0 0 13 * fri", "UTC", utc(2026, 1, 1, 0, 0), utc(2026, 1, 2, 0, 0),
	    utc(2026, 1, 9, 0, 0), utc(2026, 1, 13, 0, 0), utc(2026, 1, 16, 0, 0));
	SEQ("0 0 1-31/10 * 1", "UTC", utc(2026, 1, 1, 0, 0), utc(2026, 1, 5, 0, 0),
	    utc(2026, 1, 11, 0, 0), utc(2026, 1, 12, 0, 0));
	/* day-of-month starting with '*': both must match (1st, 11th, 21st
	 * or 31st and a Monday: first 2026-05-11) */
	SEQ("0 0 */10 * 1", "UTC", utc(2026, 1, 1, 0, 0), utc(2026, 5, 11, 0, 0));
	/* day-of-week '*': the day-of-month alone */
	SEQ("0 0 13 * *", "UTC", utc(2026, 1, 1, 0, 0), utc(2026, 1, 13, 0, 0));
	/* day-of-month '*': the weekday alone */
	SEQ("0 0 * * fri", "UTC", utc(2026, 1, 1, 0, 0), utc(2026, 1, 2, 0, 0),
	    utc(2026, 1, 9, 0, 0));
}

static void test_dst_berlin(void)
{
	const char *z = "Europe/Berlin";
	/* spring: 02:00 CET becomes 03:00 CEST at 01:00 UTC on 2026-03-29;
	 * a daily 02:30 runs at 03:00 CEST, once */
	SEQ("30 2 * * *", z, utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1, 0),
	    utc(2026, 3, 30, 0, 30));
	/* two skipped walls, and a wall equal to the end of the gap: once */
	SEQ("0,30 2 * * *", z, utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1, 0),
	    utc(2026, 3, 30, 0, 0));
	SEQ("0 2,3 * * *", z, utc(2026, 3, 28, 2, 0), utc(2026, 3, 29, 1, 0),
	    utc(2026, 3, 30, 0, 0));
	/* hourly and every 20 minutes: real time, the gap has no instants */
	SEQ("0 * * * *", z, utc(2026, 3, 29, 0, 0), utc(2026, 3, 29, 1, 0), utc(2026, 3, 29, 2, 0));
	SEQ("*/20 * * * *", z, utc(2026, 3, 29, 0, 20), utc(2026, 3, 29, 0, 40),
	    utc(2026, 3, 29, 1, 0), utc(2026, 3, 29, 1, 20));
	/* fall: 03:00 CEST becomes 02:00 CET at 01:00 UTC on 2026-10-25; a
	 * daily 02:30 runs at its first pass only */
	SEQ("30 2 * * *", z, utc(2026, 10, 24, 0, 30), utc(2026, 10, 25, 0, 30),
	    utc(2026, 10, 26, 1, 30));
	SEQ("*/20 2 * * *", z, utc(2026, 10, 24, 23, 0), utc(2026, 10, 25, 0, 0),
	    utc(2026, 10, 25, 0, 20), utc(2026, 10, 25, 0, 40), utc(2026, 10, 26, 1, 0));
	/* hourly and every 20 minutes run through both passes */
	SEQ("0 * * * *", z, utc(2026, 10, 24, 23, 0), utc(2026, 10, 25, 0, 0),
	    utc(2026, 10, 25, 1, 0), utc(2026, 10, 25, 2, 0));
	SEQ("*/20 * * * *", z, utc(2026, 10, 25, 0, 40), utc(2026, 10, 25, 1, 0),
	    utc(2026, 10, 25, 1, 20), utc(2026, 10, 25, 1, 40), utc(2026, 10, 25, 2, 0));
	/* after an instant of the second pass, the daily job waits a day */
	SEQ("30 2 * * *", z, utc(2026, 10, 25, 1, 10), utc(2026, 10, 26, 1, 30));
}

static void test_dst_new_york(void)
{
	const char *z = "America/New_York";
	/* spring: 02:00 EST becomes 03:00 EDT at 07:00 UTC on 2026-03-08 */
	SEQ("30 2 * * *", z, utc(2026, 3, 7, 7, 30), utc(2026, 3, 8, 7, 0), utc(2026, 3, 9, 6, 30));
	SEQ("0 * * * *", z, utc(2026, 3, 8, 6, 0), utc(2026, 3, 8, 7, 0), utc(2026, 3, 8, 8, 0));
	SEQ("*/20 * * * *", z, utc(2026, 3, 8, 6, 40), utc(2026, 3, 8, 7, 0),
	    utc(2026, 3, 8, 7, 20));
	/* fall: 02:00 EDT becomes 01:00 EST at 06:00 UTC on 2026-11-01; 02:30
	 * is not repeated, 01:30 is and runs at its first pass */
	SEQ("30 2 * * *", z, utc(2026, 10, 31, 6, 30), utc(2026, 11, 1, 7, 30),
	    utc(2026, 11, 2, 7, 30));
	SEQ("30 1 * * *", z, utc(2026, 10, 31, 5, 30), utc(2026, 11, 1, 5, 30),
	    utc(2026, 11, 2, 6, 30));
	SEQ("0 * * * *", z, utc(2026, 11, 1, 4, 0), utc(2026, 11, 1, 5, 0), utc(2026, 11, 1, 6, 0),
	    utc(2026, 11, 1, 7, 0));
	SEQ("*/20 * * * *", z, utc(2026, 11, 1, 5, 40), utc(2026, 11, 1, 6, 0),
	    utc(2026, 11, 1, 6, 20));
}

/* A daily job runs on every day of 2026, once, in both zones; an hourly
 * one every real hour through the weeks of both changes. */
static void test_dst_no_skip_no_repeat(void)
{
	const char *zones[] = { "Europe/Berlin", "America/New_York" };
	char err[256];

	for (int z = 0; z < 2; z++) {
		struct cron c = parsed("30 2 * * *");
		time_t t, next;
		int count = 1;

		/* from the first run of 2026 (local Jan 1) */
		CU_ASSERT_EQUAL_FATAL(
			cron_next(&c, zones[z], utc(2025, 12, 31, 12, 0), &t, err, sizeof err), 0);

		for (;;) {
			CU_ASSERT_EQUAL_FATAL(cron_next(&c, zones[z], t, &next, err, sizeof err),
					      0);
			if (next >= utc(2026, 12, 31, 12, 0)) /* after the last run of 2026 */
				break;
			/* 23.5 h into and out of the spring gap, 25 h at fall */
			CU_ASSERT(next - t >= 23 * HOUR && next - t <= 25 * HOUR);
			t = next;
			count++;
		}
		CU_ASSERT_EQUAL(count, 365);

		c = parsed("0 * * * *");
		const time_t weeks[][2] = { { utc(2026, 3, 1, 0, 0), utc(2026, 3, 15, 0, 0) },
					    { utc(2026, 10, 20, 0, 0), utc(2026, 11, 5, 0, 0) } };
		for (int w = 0; w < 2; w++)
			for (t = weeks[w][0]; t < weeks[w][1]; t = next) {
				CU_ASSERT_EQUAL_FATAL(
					cron_next(&c, zones[z], t, &next, err, sizeof err), 0);
				CU_ASSERT_EQUAL(next - t, HOUR);
			}
	}
}

/* Zones with other kinds of change: Samoa skipped 2011-12-30 (10:00 UTC:
 * 24:00 at -10 became 00:00 on the 31st at +14); Lord Howe moves its
 * clock by 30 minutes (2026-04-05 02:00 +11 becomes 01:30 +10:30, at
 * 15:00 UTC on the 4th). */
static void test_dst_other_zones(void)
{
	SEQ("0 12 * * *", "Pacific/Apia", utc(2011, 12, 29, 22, 0), utc(2011, 12, 30, 10, 0),
	    utc(2011, 12, 30, 22, 0));
	SEQ("45 1 * * *", "Australia/Lord_Howe", utc(2026, 4, 3, 14, 45), utc(2026, 4, 4, 14, 45),
	    utc(2026, 4, 5, 15, 15));
	SEQ("*/30 * * * *", "Australia/Lord_Howe", utc(2026, 4, 4, 14, 30), utc(2026, 4, 4, 15, 0),
	    utc(2026, 4, 4, 15, 30));
}

static void test_never_and_bounds(void)
{
	/* a spec cron_parse refuses, built by hand: Feb 31 */
	struct cron c = { .minutes = 1,
			  .hours = 1,
			  .days = 1u << 31,
			  .months = 1 << 2,
			  .weekdays = 0x7f,
			  .days_star = false,
			  .weekdays_star = true };
	char err[256];
	time_t next = 7;

	CU_ASSERT_EQUAL(cron_next(&c, "UTC", utc(2026, 1, 1, 0, 0), &next, err, sizeof err), -1);
	CU_ASSERT_STRING_EQUAL(err, "never matches: no occurrence within 100 years");
	c.hours = 0xffffff; /* the real-time search too */
	CU_ASSERT_EQUAL(
		cron_next(&c, "Europe/Berlin", utc(2026, 1, 1, 0, 0), &next, err, sizeof err), -1);
	CU_ASSERT_STRING_EQUAL(err, "never matches: no occurrence within 100 years");
	CU_ASSERT_EQUAL(next, 7);

	c = parsed("* * * * *");
	CU_ASSERT_EQUAL(cron_next(&c, "UTC", (time_t)300000000000LL, &next, err, sizeof err), -1);
	CU_ASSERT_STRING_EQUAL(err, "time 300000000000 is outside the years 1900-9000");
}

static void zone_fails(const char *tz, const char *message)
{
	struct cron c = parsed("* * * * *");
	char err[256];
	time_t next;

	CU_ASSERT_EQUAL(cron_zone_check(tz, err, sizeof err), -1);
	CU_ASSERT_STRING_EQUAL(err, message);
	CU_ASSERT_EQUAL(cron_next(&c, tz, 0, &next, err, sizeof err), -1);
	CU_ASSERT_STRING_EQUAL(err, message);
}

static void test_zones(void)
{
	char err[256];

	CU_ASSERT_EQUAL(cron_zone_check("UTC", err, sizeof err), 0);
	CU_ASSERT_EQUAL(cron_zone_check("Europe/Berlin", err, sizeof err), 0);
	CU_ASSERT_EQUAL(cron_zone_check("Etc/GMT+5", err, sizeof err), 0);
	zone_fails("Mars/Olympus",
		   "unknown time zone 'Mars/Olympus' (no such zone in /usr/share/zoneinfo)");
	zone_fails("Europe", "unknown time zone 'Europe' (no such zone in /usr/share/zoneinfo)");
	zone_fails("zone.tab", "unknown time zone 'zone.tab' (/usr/share/zoneinfo/zone.tab is "
			       "not a TZif file)");
	const char *not_names[] = {
		"",      "/etc/localtime", "../../etc/passwd", "Europe/../UTC",
		"./UTC", "Europe//Berlin", "Europe/Berlin/",   "Europe/Ber lin"
	};
	for (size_t i = 0; i < sizeof not_names / sizeof not_names[0]; i++) {
		char want[256];
		snprintf(want, sizeof want,
			 "time zone '%s' is not a zone name (an IANA name such as Europe/Berlin "
			 "or UTC)",
			 not_names[i]);
		zone_fails(not_names[i], want);
	}
	zone_fails("UTC\n", "time zone name with byte 0x0a at 4 is not a zone name (an IANA name "
			    "such as Europe/Berlin or UTC)");
}

/* cron_next leaves TZ as it found it: set, or unset. */
static void test_tz_restored(void)
{
	struct cron c = parsed("0 0 * * *");
	char err[256];
	time_t next, t = utc(2026, 7, 1, 0, 0);
	struct tm tm;

	CU_ASSERT_EQUAL_FATAL(setenv("TZ", "Asia/Tokyo", 1), 0);
	tzset();
	CU_ASSERT_EQUAL(cron_next(&c, "America/New_York", t, &next, err, sizeof err), 0);
	CU_ASSERT_EQUAL(next, utc(2026, 7, 1, 4, 0));
	CU_ASSERT_STRING_EQUAL(getenv("TZ"), "Asia/Tokyo");
	CU_ASSERT(localtime_r(&t, &tm) != NULL && tm.tm_gmtoff == 9 * HOUR);

	CU_ASSERT_EQUAL_FATAL(unsetenv("TZ"), 0);
	tzset();
	CU_ASSERT_EQUAL(cron_next(&c, "Europe/Berlin", t, &next, err, sizeof err), 0);
	CU_ASSERT_EQUAL(next, utc(2026, 7, 1, 22, 0));
	CU_ASSERT(getenv("TZ") == NULL);
}

/* ---- an oracle: minute-by-minute scans of real time ---- */

/* xorshift64: the fixed-seed generator of the random specs */
static uint64_t rng = 0x9e3779b97f4a7c15u;
static int pick(int n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (int)(rng % (uint64_t)n);
}

/* Appends a random field for values lo-hi; restricted one time in
 * `restrict_one_in`. */
static void random_field(char *out, size_t cap, int lo, int hi, int restrict_one_in)
{
	size_t n = strlen(out);
	int a = lo + pick(hi - lo + 1), b = a + pick(hi - a + 1), k = 1 + pick(hi > 12 ? 12 : hi);

	if (pick(restrict_one_in) != 0) {
		snprintf(out + n, cap - n, pick(4) == 0 ? "*/%d " : "* ", k);
		return;
	}
	if (hi == 23 && pick(2) == 0) /* hours near the changes: 1 to 4 */
		a = 1 + pick(3), b = a + pick(2), k = 1 + pick(2);
	switch (pick(4)) {
	case 0: snprintf(out + n, cap - n, "%d ", a); break;
	case 1: snprintf(out + n, cap - n, "%d-%d ", a, b); break;
	case 2: snprintf(out + n, cap - n, "%d-%d/%d ", a, b, k); break;
	default: snprintf(out + n, cap - n, "%d,%d ", a, b); break;
	}
}

/* Whether local time tm matches c: the definition of docs/cron.md,
 * written again without cron.c's calendar. */
static bool tm_matches(const struct cron *c, const struct tm *tm)
{
	bool dom = c->days >> tm->tm_mday & 1, dow = c->weekdays >> tm->tm_wday & 1;
	bool day = c->days_star || c->weekdays_star ? dom && dow : dom || dow;
	return day && (c->minutes >> tm->tm_min & 1) && (c->hours >> tm->tm_hour & 1) &&
	       (c->months >> (tm->tm_mon + 1) & 1);
}

static int64_t wall_of(time_t t)
{
	struct tm tm;
	localtime_r(&t, &tm);
	return (int64_t)t + tm.tm_gmtoff;
}

/* The oracle's next occurrence after `after` (TZ set to the zone), or -1
 * if none within `minutes` minutes.  Hour field all 24 hours: the first
 * minute whose local time matches.  Otherwise: the first minute whose
 * wall reaches a matching wall above every wall shown before. */
static time_t oracle_next(const struct cron *c, time_t after, int minutes)
{
	bool real = c->hours == 0xffffffu;
	time_t t = after - after % 60 + 60;
	int64_t high = wall_of(after);
	struct tm tm;

	for (time_t u = after - 3 * 86400; u < after; u += 60)
		if (wall_of(u) > high)
			high = wall_of(u);
	for (int i = 0; i < minutes; i++, t += 60) {
		int64_t w = wall_of(t);
		if (real) {
			localtime_r(&t, &tm);
			if (tm_matches(c, &tm))
				return t;
			continue;
		}
		for (int64_t v = high - high % 60 + 60; v <= w; v += 60) {
			time_t vt = (time_t)v;
			gmtime_r(&vt, &tm);
			if (tm_matches(c, &tm))
				return t;
		}
		if (w > high)
			high = w;
	}
	return -1;
}

/* Random specs (fixed seed) in four zones from starts near their 2026
 * changes: cron_next agrees with the oracle's scan, three times in a row.
 * CRON_ORACLE_SPECS sets the count (valgrind runs fewer). */
static void test_oracle(void)
{
	static const struct {
		const char *zone;
		time_t change;
	} at[] = {
		{ "Europe/Berlin", 1774746000 },       { "Europe/Berlin", 1792890000 },
		{ "America/New_York", 1772953200 },    { "America/New_York", 1793512800 },
		{ "Australia/Lord_Howe", 1775314800 }, { "UTC", 1798761600 },
	};
	const char *env = getenv("CRON_ORACLE_SPECS");
	int specs = env != NULL ? atoi(env) : 300, agreed = 0;
	char err[256];

	for (int i = 0; i < specs; i++) {
		char text[128] = "";
		struct cron c;
		int z = pick(6);

		random_field(text, sizeof text, 0, 59, 2);
		random_field(text, sizeof text, 0, 23, 2);
		random_field(text, sizeof text, 1, 31, 3);
		snprintf(text + strlen(text), sizeof text - strlen(text), "* ");
		random_field(text, sizeof text, 0, 6, 3);
		if (cron_parse(text, &c, err, sizeof err) != 0)
			continue; /* a spec that can never match: none here but 31 in short months */
		CU_ASSERT_EQUAL_FATAL(setenv("TZ", at[z].zone, 1), 0);
		tzset();
		time_t after = at[z].change - 2 * 86400 + pick(5 * 86400 / 2);
		for (int k = 0; k < 3; k++) {
			time_t next, want = oracle_next(&c, after, 40 * 1440);
			CU_ASSERT_EQUAL_FATAL(
				cron_next(&c, at[z].zone, after, &next, err, sizeof err), 0);
			if (want >= 0 ? next != want : next <= after + 40 * 86400) {
				fprintf(stderr, "'%s' in %s after %lld: got %lld, oracle %lld\n",
					text, at[z].zone, (long long)after, (long long)next,
					(long long)want);
				CU_FAIL("cron_next and the oracle disagree");
				break;
			}
			if (want < 0)
				break;
			after = next;
			agreed++;
		}
	}
	unsetenv("TZ");
	tzset();
	CU_ASSERT(agreed >= specs); /* most specs answer within 40 days, three times */
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "parse: each form", test_parse_forms },
		{ "parse: macros", test_parse_macros },
		{ "parse: each error names field and column", test_parse_errors },
		{ "next: UTC, month ends, leap years", test_next_utc },
		{ "next: day-of-month and day-of-week", test_next_day_rule },
		{ "next: daylight saving in Europe/Berlin", test_dst_berlin },
		{ "next: daylight saving in America/New_York", test_dst_new_york },
		{ "next: a daily job every day once, hourly every real hour",
		  test_dst_no_skip_no_repeat },
		{ "next: a skipped day and a 30-minute change", test_dst_other_zones },
		{ "next: never-matching spec and time bounds end with an error",
		  test_never_and_bounds },
		{ "zones: names checked against the database", test_zones },
		{ "zones: TZ restored, set or unset", test_tz_restored },
		{ "next: agrees with a minute-by-minute scan, random specs", test_oracle },
		{ NULL, NULL },
	};
	return run_suite("cron", cases);
}
