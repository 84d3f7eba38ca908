/*
 * duration.h - Go-style durations ("1h30m", "10s", "500ms", "1.5h") and bare
 * integer seconds ("90"), as written in execserver.yml(5).
 *
 * Owns: parsing and formatting of durations, in milliseconds.
 * Invariants: a parsed duration is >= 0 and fits in int64_t; units are h, m,
 * s and ms (a fraction finer than a millisecond is truncated); signs, spaces
 * and unknown units are rejected; duration_format_ms() output parses back to
 * the same value.
 */
#ifndef ES_DURATION_H
#define ES_DURATION_H

#include <stddef.h>
#include <stdint.h>

/* Parses s into *ms.  Returns 0, or -1 with *why pointing to a static
 * explanation ("unknown unit", "negative", ...). */
int duration_parse_ms(const char *s, int64_t *ms, const char **why);

/* Writes ms (>= 0) as e.g. "24h", "1h30m", "1m30s500ms", "0s"; returns buf. */
char *duration_format_ms(int64_t ms, char *buf, size_t len);

#endif
