/* progress.c - see progress.h. */
#include "autoconfig.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli/progress.h"

void progress_eta(char *buf, size_t len, int64_t eta_ms)
{
	if (eta_ms < 0) {
		snprintf(buf, len, "%s", "");
		return;
	}
	int64_t s = (eta_ms + 999) / 1000; /* never "about 0 s" */
	if (s < 1)
		s = 1;
	if (s < 60)
		snprintf(buf, len, "about %" PRId64 " s", s);
	else if (s < 90 * 60)
		snprintf(buf, len, "about %" PRId64 " min", (s + 30) / 60);
	else
		snprintf(buf, len, "about %" PRId64 " h", (s + 1800) / 3600);
}

void progress_line(char *buf, size_t len, int64_t busy, int64_t capacity, int64_t ahead,
		   int64_t eta_ms)
{
	char eta[32], of[32] = "";
	progress_eta(eta, sizeof eta, eta_ms);
	if (capacity > 0)
		snprintf(of, sizeof of, " of %" PRId64, capacity);
	snprintf(buf, len, "%" PRId64 "%s slot%s busy, %" PRId64 " ahead, %s", busy, of,
		 (capacity > 0 ? capacity : busy) == 1 ? "" : "s", ahead,
		 eta[0] ? eta : "time unknown");
}

void progress_running(char *buf, size_t len, double fraction, const char *text)
{
	int pct = (int)(fraction * 100 + 1e-9);
	if (pct < 0)
		pct = 0;
	if (pct > 100)
		pct = 100;
	size_t keep = text ? strlen(text) : 0;
	if (keep > 100) {
		/* back to the start of the character byte 100 is in (the
		 * text is UTF-8: the execserver checked it) */
		keep = 100;
		while (keep > 0 && ((unsigned char)text[keep] & 0xc0) == 0x80)
			keep--;
	}
	snprintf(buf, len, "running: %d%%%s%.*s", pct, keep ? " " : "", (int)keep,
		 keep ? text : "");
}
