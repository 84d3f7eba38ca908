/*
 * duration.c - see duration.h.  A duration is a sequence of <number><unit>
 * terms (number: digits with an optional fraction), or one bare integer that
 * counts seconds.  Every addition and multiplication is checked for int64_t
 * overflow before it is done.
 */
#include "autoconfig.h"
#include "config/duration.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define MS_PER_S INT64_C(1000)
#define MS_PER_M (60 * MS_PER_S)
#define MS_PER_H (60 * MS_PER_M)
#define FRACTION_DIGITS 9 /* digits of a fraction that count; later ones are dropped */

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* *acc = *acc * 10 + digit, or -1 on overflow. */
static int push_digit(int64_t *acc, char c)
{
	int d = c - '0';

	if (*acc > (INT64_MAX - d) / 10)
		return -1;
	*acc = *acc * 10 + d;
	return 0;
}

static int add_term(int64_t *total, int64_t whole, int64_t frac, int64_t scale, int64_t unit)
{
	int64_t v;

	if (whole > INT64_MAX / unit)
		return -1;
	v = whole * unit + frac * unit / scale; /* frac < scale <= 1e9, unit <= 3.6e6 */
	if (v < 0 || *total > INT64_MAX - v)
		return -1;
	*total += v;
	return 0;
}

int duration_parse_ms(const char *s, int64_t *ms, const char **why)
{
	int64_t total = 0;
	const char *p = s;

	if (*p == '\0') {
		*why = "empty duration";
		return -1;
	}
	if (*p == '-') {
		*why = "negative durations are not allowed";
		return -1;
	}
	if (strpbrk(p, " \t\r\n")) {
		*why = "spaces are not allowed (write 1h30m)";
		return -1;
	}
	if (strspn(p, "0123456789") == strlen(p)) {
		int64_t secs = 0;
		for (; *p; p++)
			if (push_digit(&secs, *p) < 0 || secs > INT64_MAX / MS_PER_S) {
				*why = "duration too large";
				return -1;
			}
		*ms = secs * MS_PER_S;
		return 0;
	}
	while (*p) {
		int64_t whole = 0, frac = 0, scale = 1, unit;
		int ndigits = 0;

		for (; is_digit(*p); p++, ndigits++)
			if (push_digit(&whole, *p) < 0) {
				*why = "duration too large";
				return -1;
			}
		if (*p == '.') {
			int nfrac = 0;
			for (p++; is_digit(*p); p++, ndigits++, nfrac++)
				if (nfrac < FRACTION_DIGITS) {
					frac = frac * 10 + (*p - '0');
					scale *= 10;
				}
		}
		if (ndigits == 0) {
			*why = "expected a number like 90s, 1h30m or 500ms";
			return -1;
		}
		if (strncmp(p, "ms", 2) == 0) {
			unit = 1;
			p += 2;
		} else if (*p == 'h') {
			unit = MS_PER_H;
			p++;
		} else if (*p == 'm') {
			unit = MS_PER_M;
			p++;
		} else if (*p == 's') {
			unit = MS_PER_S;
			p++;
		} else if (*p == '\0') {
			*why = "missing unit (h, m, s or ms) after a number";
			return -1;
		} else {
			*why = "unknown unit (use h, m, s or ms)";
			return -1;
		}
		if (add_term(&total, whole, frac, scale, unit) < 0) {
			*why = "duration too large";
			return -1;
		}
	}
	*ms = total;
	return 0;
}

char *duration_format_ms(int64_t ms, char *buf, size_t len)
{
	static const struct {
		int64_t ms;
		const char *unit;
	} units[] = {
		{ MS_PER_H, "h" },
		{ MS_PER_M, "m" },
		{ MS_PER_S, "s" },
		{ 1, "ms" },
	};
	size_t used = 0;

	if (len == 0)
		return buf;
	buf[0] = '\0';
	if (ms <= 0) {
		snprintf(buf, len, "0s");
		return buf;
	}
	for (size_t i = 0; i < sizeof units / sizeof units[0] && used < len; i++) {
		int64_t n = ms / units[i].ms;
		if (n == 0)
			continue;
		ms -= n * units[i].ms;
		int w = snprintf(buf + used, len - used, "%" PRId64 "%s", n, units[i].unit);
		if (w < 0)
			break;
		used += (size_t)w;
	}
	return buf;
}
