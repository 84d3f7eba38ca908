/*
 * fuzz_cron.c - fuzz target of the cron spec parser and next-occurrence
 * calculator (src/common/cron.c, docs/cron.md).  The input is a spec as a
 * user would type it for `execctl schedule add`.
 *
 * The bytes are parsed as they are, and so is every prefix of them (in
 * the replay of `make check` that turns each seed into many inputs).
 * Properties checked, beyond "no crash, no leak, no undefined behaviour":
 *  - a refusal carries a message, which names a column unless the spec is
 *    empty or blank;
 *  - an accepted spec selects at least one value in every field and fits
 *    in CRON_TEXT_MAX bytes;
 *  - for an accepted spec, cron_next from a start picked by the input
 *    (near a daylight-saving change of a zone picked by the input)
 *    answers NEXT_CALLS times (every accepted spec occurs within 40
 *    years), each answer strictly later than the one before and within
 *    CRON_SEARCH_YEARS of it.
 */
#include "autoconfig.h"

#include <stdbool.h>
#include <string.h>

#include "common/cron.h"
#include "fuzz.h"

#define NEXT_CALLS 4

static const char *const zones[] = { "UTC",          "Europe/Berlin",       "America/New_York",
				     "Pacific/Apia", "Australia/Lord_Howe", "America/Santiago" };

/* Starts near the 2026 changes of the zones above, and a few far ones. */
static const time_t starts[] = {
	1774746000,  /* 2026-03-29 01:00 UTC, Berlin's spring change */
	1792890000,  /* 2026-10-25 01:00 UTC, Berlin's fall change */
	1772953200,  /* 2026-03-08 07:00 UTC, New York's spring change */
	1793512800,  /* 2026-11-01 06:00 UTC, New York's fall change */
	1775314800,  /* 2026-04-04 15:00 UTC, Lord Howe's 30-minute change */
	1325239200,  /* 2011-12-30 10:00 UTC, Samoa's skipped day */
	0,           /* 1970-01-01 */
	-2177452800, /* 1901-01-01 (cron_next takes 1900 to 9000) */
	4102444800,  /* 2100-01-01 */
};

static void parse_one(const char *text, size_t len, bool whole, uint32_t pick)
{
	struct cron c;
	char err[160];

	memset(err, 'x', sizeof err);
	if (cron_parse(text, &c, err, sizeof err) < 0) {
		FUZZ_CHECK(memchr(err, '\0', sizeof err) != NULL);
		FUZZ_CHECK(err[0] != '\0');
		FUZZ_CHECK(strstr(err, "column ") != NULL || strncmp(err, "empty", 5) == 0);
		return;
	}
	FUZZ_CHECK(len <= CRON_TEXT_MAX);
	FUZZ_CHECK(c.minutes != 0 && c.minutes >> 60 == 0);
	FUZZ_CHECK(c.hours != 0 && c.hours >> 24 == 0);
	FUZZ_CHECK(c.days != 0 && (c.days & 1) == 0);
	FUZZ_CHECK(c.months != 0 && (c.months & 0xe001) == 0);
	FUZZ_CHECK(c.weekdays != 0 && c.weekdays >> 7 == 0);
	if (!whole)
		return; /* the times only once per input: they cost the most */

	const char *tz = zones[pick % (sizeof zones / sizeof zones[0])];
	time_t after = starts[(pick / 8) % (sizeof starts / sizeof starts[0])] -
		       (time_t)((pick >> 8) % 7200) * 60;
	for (int i = 0; i < NEXT_CALLS; i++) {
		time_t next = 0;
		FUZZ_CHECK(cron_next(&c, tz, after, &next, err, sizeof err) == 0);
		FUZZ_CHECK(next > after);
		FUZZ_CHECK(next - after <= (time_t)CRON_SEARCH_YEARS * 366 * 86400);
		after = next;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t len = size < CRON_TEXT_MAX + 8 ? size : CRON_TEXT_MAX + 8;
	char text[CRON_TEXT_MAX + 9];
	uint32_t pick = 2166136261u; /* FNV-1a of the input: zone and start */

	for (size_t i = 0; i < size; i++)
		pick = (pick ^ data[i]) * 16777619u;
	memcpy(text, data, len);
	text[len] = '\0';
	for (size_t i = 0; i < len; i++) {
		char c = text[i];
		text[i] = '\0';
		parse_one(text, strlen(text), false, pick);
		text[i] = c;
	}
	parse_one(text, strlen(text), true, pick);
	return 0;
}
