/* utf8.c - see utf8.h.  A direct transcription of the well-formed byte
 * sequence table of Unicode 15, section 3.9, table 3-7. */
#include "autoconfig.h"
#include "common/utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid sequence starting at s[i], or 0 if it is invalid. */
static size_t sequence_length(const unsigned char *s, size_t len, size_t i)
{
	unsigned char c = s[i];
	size_t need;
	unsigned char lo = 0x80, hi = 0xBF; /* range of the second byte */

	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF) {
		need = 1;
	} else if (c >= 0xE0 && c <= 0xEF) {
		need = 2;
		if (c == 0xE0)
			lo = 0xA0; /* no overlongs */
		else if (c == 0xED)
			hi = 0x9F; /* no surrogates */
	} else if (c >= 0xF0 && c <= 0xF4) {
		need = 3;
		if (c == 0xF0)
			lo = 0x90; /* no overlongs */
		else if (c == 0xF4)
			hi = 0x8F; /* nothing above U+10FFFF */
	} else {
		return 0;
	}
	if (len - i <= need)
		return 0;
	if (s[i + 1] < lo || s[i + 1] > hi)
		return 0;
	for (size_t k = 2; k <= need; k++)
		if (s[i + k] < 0x80 || s[i + k] > 0xBF)
			return 0;
	return need + 1;
}

int utf8_valid(const unsigned char *s, size_t len)
{
	for (size_t i = 0, n; i < len; i += n) {
		/* ASCII eight bytes at a time (every message the broker sends
		 * is mostly ASCII): no byte with its top bit set */
		uint64_t w;

		while (len - i >= 8 && (memcpy(&w, s + i, 8), (w & 0x8080808080808080ull) == 0))
			i += 8;
		if (i == len)
			break;
		if ((n = sequence_length(s, len, i)) == 0)
			return 0;
	}
	return 1;
}

char *utf8_sanitize(const unsigned char *s, size_t len)
{
	char *out = malloc(len * 3 + 1), *p = out;

	if (!out)
		return NULL;
	for (size_t i = 0, n; i < len; i += n) {
		n = sequence_length(s, len, i);
		if (n == 0 || s[i] == 0) {
			memcpy(p, "\xEF\xBF\xBD", 3);
			p += 3;
			n = 1;
		} else {
			memcpy(p, s + i, n);
			p += n;
		}
	}
	*p = '\0';
	return out;
}

size_t utf8_cut(const char *s, size_t max)
{
	size_t n = strnlen(s, max);

	if (n < max || s[n] == '\0')
		return n;
	while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--;
	return n;
}

int utf8_has_control(const char *buf, size_t len)
{
	const unsigned char *b = (const unsigned char *)buf;

	for (size_t i = 0; i < len; i++) {
		if (b[i] < 0x20 || b[i] == 0x7f)
			return 1;
		if (b[i] == 0xc2 && i + 1 < len && b[i + 1] >= 0x80 && b[i + 1] <= 0x9f)
			return 1;
	}
	return 0;
}
