/*
 * cron.c - parses crontab(5) specs and computes their next occurrence in a
 * time zone (grammar and rules in cron.h and docs/cron.md).
 *
 * Time is kept in two scales, both int64 seconds:
 *   - instants: time_t, seconds since the epoch;
 *   - walls: a local date and time counted as if it were UTC (so a wall w
 *     of an instant t is t + offset(t)); the calendar arithmetic of
 *     next_wall works on walls and knows nothing of zones.
 * The zone enters only through offset_at(), libc's localtime_r under a TZ
 * set for the call.  libc already reads TZif files, including the POSIX
 * rule at their end that describes the years after the table; a parser of
 * our own would duplicate that for no gain.  Setting TZ is not thread
 * safe, which is why cron_next is for single-threaded daemons (it saves
 * and restores TZ, unset included).
 *
 * The offset is read in pieces: offset_piece(t) gives the offset at t and
 * where it next changes within PIECE seconds (bisection to the second).
 * This assumes no zone changes its offset twice within PIECE (6 h) and
 * that offsets and their changes stay within SPAN (2 days).  Both hold
 * for every zone of zone1970.tab from 1900 to 2100 (zdump): the closest
 * changes are days apart, the largest are a day (Kwajalein 1993,
 * Kiritimati 1994, Samoa 2011).
 *
 * Daylight saving:
 *   - a spec whose hours are all 24 ("real time") runs at every instant
 *     whose wall matches: the first such instant after `after`;
 *   - any other spec ("wall clock") runs each matching wall once, at the
 *     first instant whose wall reaches it: for a wall passed twice that is
 *     the first pass, for a wall skipped by a gap it is the end of the gap.
 *     The next occurrence after `after` is therefore the first matching
 *     wall above the highest wall reached up to `after` (wall_high), run
 *     at its first reaching instant (first_reaching): strictly increasing,
 *     no wall twice, none skipped.
 * Hourly specs follow real time so that `0 * * * *` stays an hour apart
 * through both changes; daily and rarer specs use the wall clock so that a
 * job at 02:30 runs exactly once on each day, changes included.
 */
#include "autoconfig.h"
#include "common/cron.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ZONEINFO "/usr/share/zoneinfo"
#define DAY 86400
#define SPAN (2 * DAY)   /* bounds every |offset| and every change of offset */
#define PIECE (6 * 3600) /* no zone changes its offset twice within this */
#define SEARCH ((int64_t)CRON_SEARCH_YEARS * 366 * DAY)
#define ALL_HOURS 0xffffffu

/* ---- parsing ---- */

enum {
	F_MINUTE,
	F_HOUR,
	F_DAY,
	F_MONTH,
	F_WEEKDAY,
	N_FIELDS
};

static const char *const field_name[N_FIELDS] = { "minute", "hour", "day-of-month", "month",
						  "day-of-week" };
static const int field_lo[N_FIELDS] = { 0, 0, 1, 1, 0 };
static const int field_hi[N_FIELDS] = { 59, 23, 31, 12, 7 };
static const char *const month_names[12] = { "jan", "feb", "mar", "apr", "may", "jun",
					     "jul", "aug", "sep", "oct", "nov", "dec" };
static const char *const weekday_names[7] = { "sun", "mon", "tue", "wed", "thu", "fri", "sat" };

static const struct {
	const char *name;
	const char *spec;
} macros[] = {
	{ "@hourly", "0 * * * *" },   { "@daily", "0 0 * * *" },   { "@midnight", "0 0 * * *" },
	{ "@weekly", "0 0 * * 0" },   { "@monthly", "0 0 1 * *" }, { "@yearly", "0 0 1 1 *" },
	{ "@annually", "0 0 1 1 *" },
};

struct parser {
	const char *s;
	size_t pos;
	int field; /* F_*, or -1 outside the fields */
	char *err;
	size_t errlen;
};

/* Writes "field N (name) at column C: " (or "at column C: ") and the
 * message; col0 is 0-based.  Returns -1. */
__attribute__((format(printf, 3, 4))) static int fail(struct parser *p, size_t col0,
						      const char *fmt, ...)
{
	va_list ap;
	int n;

	if (p->errlen == 0)
		return -1;
	if (p->field >= 0)
		n = snprintf(p->err, p->errlen, "field %d (%s) at column %zu: ", p->field + 1,
			     field_name[p->field], col0 + 1);
	else
		n = snprintf(p->err, p->errlen, "at column %zu: ", col0 + 1);
	if (n < 0 || (size_t)n >= p->errlen)
		return -1;
	va_start(ap, fmt);
	vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* The character at p->pos as a message shows it. */
static const char *shown(const struct parser *p, char buf[16])
{
	unsigned char c = (unsigned char)p->s[p->pos];

	if (c == '\0')
		return "end of text";
	if (isprint(c))
		snprintf(buf, 16, "'%c'", c);
	else
		snprintf(buf, 16, "byte 0x%02x", c);
	return buf;
}

/* Reads a run of digits as a number (saturating at 100000). */
static long read_digits(struct parser *p)
{
	long n = 0;

	while (isdigit((unsigned char)p->s[p->pos])) {
		if (n < 100000)
			n = n * 10 + (p->s[p->pos] - '0');
		p->pos++;
	}
	return n;
}

/* Reads one value of the current field: a number or a name. */
static int parse_value(struct parser *p, int *v)
{
	int f = p->field, lo = field_lo[f], hi = field_hi[f];
	size_t start = p->pos;
	char buf[16];

	if (isdigit((unsigned char)p->s[p->pos])) {
		long n = read_digits(p);
		int len = (int)(p->pos - start);

		if (n < lo || n > hi)
			return fail(p, start, "%.*s is out of range %d-%d", len > 12 ? 12 : len,
				    p->s + start, lo, hi);
		*v = (int)n;
		return 0;
	}
	if (isalpha((unsigned char)p->s[p->pos])) {
		const char *const *names = f == F_MONTH ? month_names : weekday_names;
		int count = f == F_MONTH ? 12 : 7;

		while (isalpha((unsigned char)p->s[p->pos]))
			p->pos++;
		int len = (int)(p->pos - start);
		if (f != F_MONTH && f != F_WEEKDAY)
			return fail(p, start, "'%.*s' is not a number %d-%d", len > 12 ? 12 : len,
				    p->s + start, lo, hi);
		for (int i = 0; len == 3 && i < count; i++)
			if (strncasecmp(p->s + start, names[i], 3) == 0) {
				*v = f == F_MONTH ? i + 1 : i;
				return 0;
			}
		return fail(p, start, "unknown %s name '%.*s' (expected %s or a number %d-%d)",
			    field_name[f], len > 12 ? 12 : len, p->s + start,
			    f == F_MONTH ? "jan-dec" : "sun-sat", lo, hi);
	}
	return fail(p, start, "expected a number %d-%d%s, found %s", lo, hi,
		    f == F_MONTH     ? " or jan-dec"
		    : f == F_WEEKDAY ? " or sun-sat"
				     : "",
		    shown(p, buf));
}

/* Reads one item (*, value, range, with a step) and sets its bits. */
static int parse_item(struct parser *p, uint64_t *bits)
{
	int f = p->field, lo, hi, step = 1;
	size_t start = p->pos;
	bool single = false;
	char buf[16];

	if (p->s[p->pos] == '*') {
		p->pos++;
		lo = field_lo[f];
		hi = f == F_WEEKDAY ? 6 : field_hi[f];
	} else {
		if (parse_value(p, &lo) < 0)
			return -1;
		hi = lo;
		single = true;
		if (p->s[p->pos] == '-') {
			p->pos++;
			if (parse_value(p, &hi) < 0)
				return -1;
			single = false;
			if (hi < lo)
				return fail(p, start,
					    "range %d-%d is reversed (write two ranges, as in "
					    "%d-%d,%d-%d)",
					    lo, hi, lo, field_hi[f], field_lo[f], hi);
		}
	}
	if (p->s[p->pos] == '/') {
		size_t at = p->pos + 1;

		if (single)
			return fail(p, p->pos,
				    "a step follows '*' or a range (*/%d, %d-%d/%d), not a single "
				    "value",
				    2, lo, field_hi[f], 2);
		p->pos++;
		if (!isdigit((unsigned char)p->s[p->pos]))
			return fail(p, at, "expected a step 1-%d, found %s", field_hi[f],
				    shown(p, buf));
		long n = read_digits(p);
		int len = (int)(p->pos - at);
		if (n < 1 || n > field_hi[f])
			return fail(p, at, "step %.*s is out of range 1-%d", len > 12 ? 12 : len,
				    p->s + at, field_hi[f]);
		step = (int)n;
	}
	for (int v = lo; v <= hi; v += step)
		*bits |= (uint64_t)1 << (f == F_WEEKDAY && v == 7 ? 0 : v);
	return 0;
}

/* Reads one field: items separated by ','. */
static int parse_field(struct parser *p, uint64_t *bits)
{
	char buf[16];

	for (;;) {
		if (parse_item(p, bits) < 0)
			return -1;
		if (p->s[p->pos] != ',')
			break;
		p->pos++;
	}
	if (p->s[p->pos] != '\0' && !is_blank(p->s[p->pos]))
		return fail(p, p->pos, "unexpected %s (expected ',' or a blank)", shown(p, buf));
	return 0;
}

static int days_in_month(int64_t y, int m);

/* 0 if some selected day-of-month occurs in some selected month. */
static int check_reachable(struct parser *p, const struct cron *c, size_t day_col)
{
	for (int m = 1; m <= 12; m++)
		if (c->months >> m & 1) {
			int last = m == 2 ? 29 : days_in_month(2001, m);
			if (c->days & (((uint32_t)2 << last) - 2))
				return 0;
		}
	if (!c->days_star && !c->weekdays_star)
		return 0; /* the day-of-week alone matches */
	p->field = F_DAY;
	return fail(p, day_col, "never matches: no selected day occurs in a selected month");
}

static int parse_fields(struct parser *p, struct cron *out)
{
	uint64_t bits[N_FIELDS] = { 0 };
	size_t day_col = 0;
	bool star[N_FIELDS] = { false };

	for (int f = 0; f < N_FIELDS; f++) {
		while (is_blank(p->s[p->pos]))
			p->pos++;
		p->field = f;
		if (p->s[p->pos] == '\0')
			return fail(p, p->pos,
				    "missing (a spec has 5 fields: minute hour day-of-month month "
				    "day-of-week)");
		if (f == F_DAY)
			day_col = p->pos;
		star[f] = p->s[p->pos] == '*';
		if (parse_field(p, &bits[f]) < 0)
			return -1;
	}
	while (is_blank(p->s[p->pos]))
		p->pos++;
	p->field = -1;
	if (p->s[p->pos] != '\0')
		return fail(p, p->pos, "unexpected 6th field (a spec has 5 fields)");
	out->minutes = bits[F_MINUTE];
	out->hours = (uint32_t)bits[F_HOUR];
	out->days = (uint32_t)bits[F_DAY];
	out->months = (uint16_t)bits[F_MONTH];
	out->weekdays = (uint8_t)bits[F_WEEKDAY];
	out->days_star = star[F_DAY];
	out->weekdays_star = star[F_WEEKDAY];
	return check_reachable(p, out, day_col);
}

int cron_parse(const char *text, struct cron *out, char *err, size_t errlen)
{
	struct parser p = { .s = text, .pos = 0, .field = -1, .err = err, .errlen = errlen };
	struct cron c;

	if (errlen > 0)
		err[0] = '\0';
	if (strnlen(text, CRON_TEXT_MAX + 1) > CRON_TEXT_MAX)
		return fail(&p, CRON_TEXT_MAX, "longer than %d bytes", CRON_TEXT_MAX);
	while (is_blank(text[p.pos]))
		p.pos++;
	if (text[p.pos] == '\0') {
		if (errlen > 0)
			snprintf(err, errlen,
				 "empty: expected 5 fields (minute hour day-of-month month "
				 "day-of-week) or a macro such as @daily");
		return -1;
	}
	memset(&c, 0, sizeof c);
	if (text[p.pos] == '@') {
		size_t start = p.pos, len;
		const char *spec = NULL;

		p.pos++;
		while (isalpha((unsigned char)text[p.pos]))
			p.pos++;
		len = p.pos - start;
		for (size_t i = 0; i < sizeof macros / sizeof macros[0]; i++)
			if (strlen(macros[i].name) == len &&
			    strncasecmp(text + start, macros[i].name, len) == 0)
				spec = macros[i].spec;
		if (spec == NULL)
			return fail(&p, start,
				    "unknown macro '%.*s' (expected @hourly, @daily, @midnight, "
				    "@weekly, @monthly, @yearly or @annually)",
				    (int)(len > 12 ? 12 : len), text + start);
		while (is_blank(text[p.pos]))
			p.pos++;
		if (text[p.pos] != '\0')
			return fail(&p, p.pos, "unexpected text after %.*s", (int)len,
				    text + start);
		struct parser m = {
			.s = spec, .pos = 0, .field = -1, .err = err, .errlen = errlen
		};
		if (parse_fields(&m, &c) < 0)
			return -1;
	} else if (parse_fields(&p, &c) < 0) {
		return -1;
	}
	*out = c;
	return 0;
}

/* ---- calendar arithmetic on walls ---- */

static int64_t floor_div(int64_t a, int64_t b)
{
	return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

static bool is_leap(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int64_t y, int m)
{
	static const int n[13] = { 0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	return m == 2 && is_leap(y) ? 29 : n[m];
}

/* Days from 1970-01-01 to January 1 of year y. */
static int64_t year_start(int64_t y)
{
	int64_t p = y - 1;
	/* 477 leap days fall before 1970 (years 1 to 1969) */
	return 365 * (y - 1970) + floor_div(p, 4) - floor_div(p, 100) + floor_div(p, 400) - 477;
}

static int64_t day_number(int64_t y, int m, int d)
{
	int64_t n = year_start(y);
	for (int i = 1; i < m; i++)
		n += days_in_month(y, i);
	return n + d - 1;
}

struct civil {
	int64_t y;
	int m, d, hour, min;
};

static struct civil split_wall(int64_t w)
{
	struct civil c;
	int64_t days = floor_div(w, DAY), secs = w - days * DAY;

	c.y = 1970 + floor_div(days, 366);
	while (year_start(c.y) > days)
		c.y--;
	while (year_start(c.y + 1) <= days)
		c.y++;
	days -= year_start(c.y);
	for (c.m = 1; days >= days_in_month(c.y, c.m); c.m++)
		days -= days_in_month(c.y, c.m);
	c.d = (int)days + 1;
	c.hour = (int)(secs / 3600);
	c.min = (int)(secs % 3600 / 60);
	return c;
}

static bool day_matches(const struct cron *c, int64_t y, int m, int d)
{
	int64_t n = day_number(y, m, d);
	int wd = (int)(n - 7 * floor_div(n + 4, 7) + 4); /* 1970-01-01 was a Thursday */
	bool dom = c->days >> d & 1, dow = c->weekdays >> wd & 1;

	if (c->days_star || c->weekdays_star)
		return dom && dow;
	return dom || dow;
}

/* Sets *out to the first matching wall at or after `from` and not after
 * limit (walls are whole minutes).  Returns 0, or -1 if none. */
static int next_wall(const struct cron *c, int64_t from, int64_t limit, int64_t *out)
{
	struct civil t = split_wall(floor_div(from + 59, 60) * 60);

	for (;;) {
		if (t.min == 60)
			t.min = 0, t.hour++;
		if (t.hour == 24)
			t.hour = 0, t.d++;
		if (t.m <= 12 && t.d > days_in_month(t.y, t.m))
			t.d = 1, t.m++;
		if (t.m == 13)
			t.m = 1, t.y++;
		int64_t w = day_number(t.y, t.m, t.d) * DAY + t.hour * 3600 + t.min * 60;
		if (w > limit)
			return -1;
		if (!(c->months >> t.m & 1))
			t.m++, t.d = 1, t.hour = 0, t.min = 0;
		else if (!day_matches(c, t.y, t.m, t.d))
			t.d++, t.hour = 0, t.min = 0;
		else if (!(c->hours >> t.hour & 1))
			t.hour++, t.min = 0;
		else if (!(c->minutes >> t.min & 1))
			t.min++;
		else {
			*out = w;
			return 0;
		}
	}
}

/* ---- the zone ---- */

int cron_zone_check(const char *tz, char *err, size_t errlen)
{
	size_t len = strnlen(tz, 201);
	char path[sizeof ZONEINFO + 202], magic[4];
	const char *c = tz;
	struct stat st;
	int fd;

	if (len == 0 || len > 200 || tz[0] == '/')
		goto not_a_name;
	for (const char *s = tz; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("/._+-", *s))
			goto not_a_name;
	while (*c) { /* each component: not empty, not "." or ".." */
		size_t n = strcspn(c, "/");
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			goto not_a_name;
		c += n + (c[n] == '/');
		if (c[-1] == '/' && *c == '\0')
			goto not_a_name;
	}
	snprintf(path, sizeof path, "%s/%s", ZONEINFO, tz);
	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "unknown time zone '%s' (no such zone in %s)", tz, ZONEINFO);
		return -1;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, magic, 4) != 4 || memcmp(magic, "TZif", 4) != 0) {
		if (fd >= 0)
			close(fd);
		snprintf(err, errlen, "unknown time zone '%s' (%s is not a TZif file)", tz, path);
		return -1;
	}
	close(fd);
	return 0;
not_a_name:
	for (size_t i = 0; i < len && i < 64; i++)
		if (!isprint((unsigned char)tz[i])) { /* a message is one printable line */
			snprintf(err, errlen,
				 "time zone name with byte 0x%02x at %zu is not a zone name (an "
				 "IANA name such as Europe/Berlin or UTC)",
				 (unsigned char)tz[i], i + 1);
			return -1;
		}
	snprintf(err, errlen,
		 "time zone '%.*s' is not a zone name (an IANA name such as Europe/Berlin or UTC)",
		 (int)(len > 64 ? 64 : len), tz);
	return -1;
}

/* The UTC offset at t, in seconds, in the zone TZ names. */
static long offset_at(time_t t)
{
	struct tm tm;

	memset(&tm, 0, sizeof tm);
	if (localtime_r(&t, &tm) == NULL)
		return 0; /* unreachable: cron_next bounds its instants */
	return tm.tm_gmtoff;
}

/* Returns the offset at t; *end is where it next changes if that is within
 * PIECE, else t + PIECE. */
static long offset_piece(time_t t, time_t *end)
{
	long o = offset_at(t);
	time_t lo = t, hi = t + PIECE;

	if (offset_at(hi) != o)
		while (hi - lo > 1) {
			time_t mid = lo + (hi - lo) / 2;
			if (offset_at(mid) == o)
				lo = mid;
			else
				hi = mid;
		}
	*end = hi;
	return o;
}

/* The highest wall any instant up to `after` showed. */
static int64_t wall_high(time_t after)
{
	int64_t high = INT64_MIN;

	for (time_t t = after - SPAN, end; t <= after; t = end) {
		long o = offset_piece(t, &end);
		time_t last = end - 1 < after ? end - 1 : after;
		if (last + o > high)
			high = last + o;
	}
	return high;
}

/* The first instant whose wall is w or later. */
static time_t first_reaching(int64_t w)
{
	for (time_t t = w - SPAN, end;; t = end) {
		long o = offset_piece(t, &end);
		if (w - o < end)
			return w - o > t ? w - o : t;
	}
}

/* Real-time specs: the first instant after `after` whose wall matches. */
static int next_real(const struct cron *c, time_t after, time_t *next)
{
	for (time_t t = after + 1, end; t - after <= SEARCH; t = end) {
		long o = offset_piece(t, &end);
		int64_t w, behind;

		if (next_wall(c, t + o, end - 1 + o, &w) == 0) {
			*next = w - o;
			return 0;
		}
		/* no instant from t on shows a wall below t + o - SPAN, nor
		 * reaches wall `behind` before behind - SPAN */
		if (next_wall(c, t + o - SPAN, t + o + SEARCH, &behind) < 0)
			return -1;
		if (behind - SPAN > end)
			end = behind - SPAN;
	}
	return -1;
}

/* Wall-clock specs: the first matching wall above all walls shown up to
 * `after`, at the first instant that reaches it. */
static int next_by_wall(const struct cron *c, time_t after, time_t *next)
{
	int64_t high = wall_high(after), w;

	if (next_wall(c, high + 1, high + SEARCH, &w) < 0)
		return -1;
	*next = first_reaching(w);
	return 0;
}

int cron_next(const struct cron *c, const char *tz, time_t after, time_t *next, char *err,
	      size_t errlen)
{
	const char *old = getenv("TZ");
	char *saved = NULL, zone[sizeof ZONEINFO + 202];
	int r;

	if (cron_zone_check(tz, err, errlen) < 0)
		return -1;
	if (after < year_start(1900) * DAY || after > year_start(9000) * DAY) {
		snprintf(err, errlen, "time %lld is outside the years 1900-9000", (long long)after);
		return -1;
	}
	if (old != NULL && (saved = strdup(old)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	snprintf(zone, sizeof zone, ":%s/%s", ZONEINFO, tz);
	if (setenv("TZ", zone, 1) < 0) {
		free(saved);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	tzset();
	if (c->hours == ALL_HOURS)
		r = next_real(c, after, next);
	else
		r = next_by_wall(c, after, next);
	if (saved != NULL)
		setenv("TZ", saved, 1);
	else
		unsetenv("TZ");
	free(saved);
	tzset();
	if (r < 0)
		snprintf(err, errlen, "never matches: no occurrence within %d years",
			 CRON_SEARCH_YEARS);
	return r;
}
