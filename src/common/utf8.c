/* utf8.c - see utf8.h.  A direct transcription of the well-formed byte
 * sequence table of Unicode 15, section 3.9, table 3-7. */
#include "autoconfig.h"
#include "common/utf8.h"

int utf8_valid(const unsigned char *s, size_t len)
{
	size_t i = 0;

	while (i < len) {
		unsigned char c = s[i];
		size_t need;
		unsigned char lo = 0x80, hi = 0xBF; /* range of the second byte */

		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xC2 && c <= 0xDF) {
			need = 1;
		} else if (c >= 0xE0 && c <= 0xEF) {
			need = 2;
			if (c == 0xE0)
				lo = 0xA0;      /* no overlongs */
			else if (c == 0xED)
				hi = 0x9F;      /* no surrogates */
		} else if (c >= 0xF0 && c <= 0xF4) {
			need = 3;
			if (c == 0xF0)
				lo = 0x90;      /* no overlongs */
			else if (c == 0xF4)
				hi = 0x8F;      /* nothing above U+10FFFF */
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
		i += need + 1;
	}
	return 1;
}
